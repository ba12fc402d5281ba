//! Turns redb's errors and panics into `sesame_core::Error`.

use std::any::Any;
use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};

use sesame_core::{Error, Result};

/// Maps a redb error met while doing `what` (which names the store's path).
pub(crate) fn from_redb(what: &str, err: impl Into<redb::Error>) -> Error {
    match err.into() {
        redb::Error::Corrupted(msg) => Error::StoreCorrupt(format!("{what}: {msg}")),
        redb::Error::ValueTooLarge(len) => Error::InvalidArgument(format!(
            "{what}: a value of {len} bytes exceeds redb's limit of 3 GiB"
        )),
        redb::Error::DatabaseAlreadyOpen => Error::StoreBusy(format!(
            "{what}: the file is already open, by another store in this process or by \
             another process"
        )),
        redb::Error::UpgradeRequired(version) => Error::StoreForeign(format!(
            "{what}: redb file format version {version} is not the one this build reads"
        )),
        redb::Error::LockPoisoned(location) => Error::StoreCorrupt(format!(
            "{what}: an earlier operation panicked inside redb (at {location}); reopen the store"
        )),
        err @ (redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }) => {
            Error::StoreForeign(format!("{what}: unexpected table layout: {err}"))
        }
        redb::Error::Io(err) if is_full(&err) => Error::StoreFull(format!("{what}: {err}")),
        redb::Error::Io(err) => Error::StoreIo(format!("{what}: {err}")),
        err => Error::StoreIo(format!("{what}: {err}")),
    }
}

/// Whether `err` says the disk (or the file system's quota) is full.
fn is_full(err: &std::io::Error) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    matches!(
        err.kind(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded
    ) || matches!(err.raw_os_error(), Some(ENOSPC | EDQUOT))
}

/// Like [`from_redb`], for a file that is being inspected before use: a read
/// past its end means the file is truncated, not that the disk failed.
pub(crate) fn from_redb_probe(what: &str, err: impl Into<redb::Error>) -> Error {
    match err.into() {
        redb::Error::Io(io)
            if matches!(
                io.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::InvalidInput
            ) =>
        {
            Error::StoreCorrupt(format!("{what}: the file is truncated ({io})"))
        }
        err => from_redb(what, err),
    }
}

/// Runs `f`, turning a panic into [`Error::StoreCorrupt`].
///
/// redb checks page checksums only when it recovers from a crash or is asked
/// to; on other paths a damaged page can make it index out of bounds or fail
/// an assertion. Such a panic says the file is damaged (or redb has a bug);
/// either way the caller gets an error rather than a dead thread. The panic
/// hook still prints the panic message.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(panicked(what, &*payload)))
}

/// The error for a panic inside redb, with its message.
pub(crate) fn panicked(what: &str, payload: &(dyn Any + Send)) -> Error {
    Error::StoreCorrupt(format!(
        "{what}: redb panicked ({}); the file is damaged or redb has a bug",
        panic_message(payload)
    ))
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "no message"
    }
}
