//! The errors of the command line, each printed as one line.

use std::fmt;

use sesame_bench::BenchError;
use sesame_client::ClientError;

/// An error a command ends with.
#[derive(Debug)]
pub(crate) enum CliError {
    /// From the client SDK.
    Client(ClientError),
    /// From the benchmark harness.
    Bench(BenchError),
    /// A mistake on the command line or in the environment.
    Usage(String),
    /// Anything else (standard output closed, ...).
    Other(String),
    /// The command already printed what went wrong (`check`'s problems);
    /// it only sets the exit status.
    Reported,
}

impl CliError {
    /// The exit status: 2 for a mistake on the command line or in the
    /// environment, 1 for anything else.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_)
            | CliError::Client(
                ClientError::EmptyQuery
                | ClientError::InvalidQuery(_)
                | ClientError::UnsupportedQuery { .. }
                | ClientError::UnknownScheme { .. }
                | ClientError::InvalidArgument(_),
            ) => 2,
            _ => 1,
        }
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Client(e)
    }
}

impl From<BenchError> for CliError {
    fn from(e: BenchError) -> Self {
        CliError::Bench(e)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            CliError::Client(ClientError::NoProfile(dir)) => format!(
                "no Sesame profile in {} (create one with `sesame init`, or pass --dir)",
                dir.display()
            ),
            CliError::Client(e @ ClientError::ProfileExists(_)) => {
                format!("{e} (pass another --dir)")
            }
            CliError::Client(e) => e.to_string(),
            CliError::Bench(e) => e.to_string(),
            CliError::Usage(m) | CliError::Other(m) => m.clone(),
            CliError::Reported => "the check found problems (listed above)".into(),
        };
        f.write_str(&one_line(&text))?;
        f.write_str(full_disk_hint(&text))
    }
}

/// What to do about a full disk, when `text` reports one; else "".
fn full_disk_hint(text: &str) -> &'static str {
    if text.contains("server's store is out of space") {
        " (the server's disk is full: once its operator has made room, run the command again; \
         nothing is lost and nothing is applied twice)"
    } else if text.contains("No space left on device") || text.contains("os error 28") {
        " (the disk is full: make room and run the command again; nothing is lost and nothing \
         is applied twice)"
    } else {
        ""
    }
}

/// `text` on one line: lines joined with spaces.
/// A file error as one line naming the file: "cannot read x: no such
/// file or directory".
pub(crate) fn file_error(
    action: &'static str,
    path: &std::path::Path,
    e: &std::io::Error,
) -> CliError {
    sesame_client::ClientError::Io {
        action,
        path: path.to_path_buf(),
        message: if e.kind() == std::io::ErrorKind::NotFound {
            "no such file or directory".to_owned()
        } else {
            one_line(&e.to_string())
        },
    }
    .into()
}

pub(crate) fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_says_what_to_do() {
        let local = CliError::Client(ClientError::Core(sesame_core::Error::StoreIo(
            "redb store p/store.redb: No space left on device (os error 28)".into(),
        )));
        assert!(
            local.to_string().contains("the disk is full: make room"),
            "{local}"
        );
        let remote = CliError::Other(
            "server error: the server's store is out of space; the request was not applied".into(),
        );
        assert!(
            remote.to_string().contains("the server's disk is full"),
            "{remote}"
        );
        let other = CliError::Other("permission denied".into());
        assert_eq!(other.to_string(), "permission denied");
    }
}
