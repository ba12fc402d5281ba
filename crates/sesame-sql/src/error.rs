//! Errors as a PostgreSQL client sees them: an SQLSTATE, a message that
//! says what to do, and where the statement went wrong.

use pgwire::error::{ErrorInfo, PgWireError};
use sesame_client::ClientError;

/// `0A000`: a statement or predicate this front end does not answer (no
/// index answers it, or the SQL is outside the supported subset).
pub(crate) const NOT_SUPPORTED: &str = "0A000";
/// `42601`: a syntax error.
pub(crate) const SYNTAX: &str = "42601";
/// `42P01`: no such table.
pub(crate) const NO_TABLE: &str = "42P01";
/// `42703`: no such column.
pub(crate) const NO_COLUMN: &str = "42703";
/// `22P02`: a value that does not read as its column's type.
pub(crate) const BAD_VALUE: &str = "22P02";
/// `08P01`: a protocol violation.
pub(crate) const PROTOCOL: &str = "08P01";
/// `XX000`: the table could not do what was asked.
pub(crate) const INTERNAL: &str = "XX000";

/// An error answered to the client; the connection stays usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SqlError {
    /// The SQLSTATE.
    pub(crate) code: &'static str,
    /// What went wrong and what to do.
    pub(crate) message: String,
    /// 1-based character position in the statement, where known.
    pub(crate) position: Option<usize>,
}

impl SqlError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        SqlError {
            code,
            message: message.into(),
            position: None,
        }
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        SqlError::new(NOT_SUPPORTED, message)
    }

    pub(crate) fn at(mut self, position: Option<usize>) -> Self {
        if self.position.is_none() {
            self.position = position;
        }
        self
    }
}

impl From<ClientError> for SqlError {
    fn from(e: ClientError) -> Self {
        let code = match &e {
            ClientError::UnknownTable(_) => NO_TABLE,
            ClientError::InvalidQuery(_) | ClientError::InvalidArgument(_) => BAD_VALUE,
            _ => INTERNAL,
        };
        SqlError::new(code, e.to_string())
    }
}

impl From<SqlError> for PgWireError {
    fn from(e: SqlError) -> Self {
        let mut info = ErrorInfo::new("ERROR".to_owned(), e.code.to_owned(), e.message);
        info.position = e.position.map(|p| p.to_string());
        PgWireError::UserError(Box::new(info))
    }
}

/// The 1-based character position in `sql` of a line and column as
/// sqlparser reports them (both 1-based).
pub(crate) fn position(sql: &str, line: u64, column: u64) -> Option<usize> {
    if line == 0 || column == 0 {
        return None;
    }
    let mut chars = 0usize;
    for (i, text) in sql.split('\n').enumerate() {
        if i as u64 + 1 == line {
            return Some(chars + column as usize);
        }
        chars += text.chars().count() + 1;
    }
    None
}
