//! The progress bar of long commands, on standard error when it is a
//! terminal.

use std::io::IsTerminal;

use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use sesame_client::{Phase, Progress};

/// The bar of [`Bar::rows`]: `imported [=====>    ] 120000/336776 rows
/// (25,310 rows/s, 9s left)`.
const ROWS_TEMPLATE: &str =
    "{msg:>9} [{bar:32}] {pos}/{len} rows ({rows_per_sec}, {eta} left, {elapsed})";

/// `template` with the key `rows_per_sec`: the rate, as whole rows per
/// second with thousands separated.
fn rows_style(template: &str) -> Result<ProgressStyle, indicatif::style::TemplateError> {
    Ok(ProgressStyle::with_template(template)?.with_key(
        "rows_per_sec",
        |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{} rows/s", HumanCount(state.per_sec() as u64));
        },
    ))
}

/// A progress bar fed by the client's [`Progress`] callbacks; hidden when
/// standard error is not a terminal.
pub(crate) struct Bar {
    bar: ProgressBar,
    phase: Option<Phase>,
}

impl Bar {
    /// A bar, drawn only on a terminal.
    pub(crate) fn new() -> Self {
        Bar::with_template("{msg:>9} [{bar:32}] {pos}/{len} ({per_sec}, {elapsed})")
    }

    /// A bar counting rows (an import: rows checked, then imported),
    /// with rows per second and the time left.
    pub(crate) fn rows() -> Self {
        Bar::with_template(ROWS_TEMPLATE)
    }

    fn with_template(template: &str) -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(0), target);
        if let Ok(style) = rows_style(template) {
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
