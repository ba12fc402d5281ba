//! The progress bar of long commands, on standard error when it is a
//! terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sesame_client::{Phase, Progress};

/// A progress bar fed by the client's [`Progress`] callbacks; hidden when
/// standard error is not a terminal.
pub(crate) struct Bar {
    bar: ProgressBar,
    phase: Option<Phase>,
}

impl Bar {
    /// A bar, drawn only on a terminal.
    pub(crate) fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(0), target);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>9} [{bar:32}] {pos}/{len} ({per_sec}, {elapsed})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        Bar { bar, phase: None }
    }

    /// Shows `p`.
    pub(crate) fn update(&mut self, p: Progress) {
        if self.phase != Some(p.phase) {
            self.phase = Some(p.phase);
            self.bar.set_message(p.phase.to_string());
            self.bar.reset();
        }
        self.bar.set_length(p.total);
        self.bar.set_position(p.done);
    }

    /// Removes the bar.
    pub(crate) fn finish(self) {
        self.bar.finish_and_clear();
    }
}
