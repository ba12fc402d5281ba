//! The error type of `sesame-bench`.

use std::path::PathBuf;

use thiserror::Error;

/// Errors of the benchmark harness.
///
/// Every variant is a cause a caller can act on: a name to correct, a data
/// set to fetch, a file to fix or a scheme that failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BenchError {
    /// No experiment has this name.
    #[error("unknown experiment {name:?} (known: {known}; or `all`, `list`)")]
    UnknownExperiment {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// A data set is not on disk.
    #[error(
        "data set {dataset} not found at {}: run `scripts/fetch-data.sh {}` first",
        path.display(),
        dir.display()
    )]
    DataMissing {
        /// Which data set.
        dataset: &'static str,
        /// The file or folder that was looked for.
        path: PathBuf,
        /// The data folder to give the fetch script.
        dir: PathBuf,
    },
    /// A data file is there but cannot be understood.
    #[error("malformed data in {}: {message}", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "write", "create").
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A scheme or store failed during a measurement.
    #[error("{context}: {source}")]
    Scheme {
        /// What was running (scheme, parameters, operation).
        context: String,
        /// The error from the scheme, channel or store.
        #[source]
        source: sesame_core::Error,
    },
    /// A scheme returned a wrong result: the benchmark checks every answer.
    #[error("wrong result: {0}")]
    WrongResult(String),
    /// A report (JSON or CSV) could not be encoded or parsed.
    #[error("report format error: {0}")]
    Format(String),
    /// A chart could not be drawn.
    #[error("cannot draw chart {chart}: {message}")]
    Plot {
        /// The chart's file name.
        chart: String,
        /// What went wrong.
        message: String,
    },
    /// An argument is out of the accepted range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl BenchError {
    /// An [`BenchError::Io`] error.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        BenchError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// A [`BenchError::Scheme`] error with its context.
    pub(crate) fn scheme(context: impl Into<String>, source: sesame_core::Error) -> Self {
        BenchError::Scheme {
            context: context.into(),
            source,
        }
    }
}
