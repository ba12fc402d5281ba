//! The errors of the command line, each printed as one line.

use std::fmt;

use sesame_bench::BenchError;
use sesame_client::ClientError;

/// An error a command ends with.
#[derive(Debug)]
pub enum CliError {
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
    pub fn exit_code(&self) -> u8 {
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
        f.write_str(&one_line(&text))
    }
}

/// `text` on one line: lines joined with spaces.
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
