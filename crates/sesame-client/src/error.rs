//! The error type of the client SDK.

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Everything that can go wrong in the client SDK.
///
/// Each variant is a cause the caller can act on, and its message is one
/// line meant for a person. Decryption failures stay opaque: a wrong key, an
/// altered byte and a swapped file all read the same
/// ([`ClientError::WrongPassphrase`], [`ClientError::StateCorrupt`],
/// [`ClientError::DocumentCorrupt`]).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The directory holds no profile (no `profile.json`).
    #[error("no Sesame profile in {}", .0.display())]
    NoProfile(PathBuf),
    /// A profile already exists in the directory.
    #[error("a Sesame profile already exists in {}", .0.display())]
    ProfileExists(PathBuf),
    /// The profile was made with a key file, and none was given.
    #[error(
        "the profile in {} needs its key file as well as the passphrase: give --key-file FILE \
         (or set SESAME_KEY_FILE)",
        .0.display()
    )]
    KeyFileNeeded(PathBuf),
    /// The passphrase does not open the profile (or its header was altered).
    #[error("wrong passphrase")]
    WrongPassphrase,
    /// The server holds a newer header of the profile than this device:
    /// its passphrase (or key file, or master key) was changed on another
    /// device. The new header is kept beside the old one; the next open
    /// with the new passphrase takes it. Nothing was sent.
    #[error(
        "the passphrase of the profile in {} was changed on another device (header version \
         {server}, this device has {local}): run the command again and enter the new passphrase",
        dir.display()
    )]
    PassphraseChanged {
        /// The profile directory.
        dir: PathBuf,
        /// The header version this device holds.
        local: u64,
        /// The header version the server holds.
        server: u64,
    },
    /// A file of the profile (its header, server binding, a saved
    /// operation) cannot be read as what it should be.
    #[error("{} is damaged: {reason}", path.display())]
    ProfileCorrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A part of the profile is missing. Nothing is created in its place:
    /// an empty store or state would silently stand for the real one.
    #[error(
        "{} is missing: the profile cannot work without it (restore it from a backup; nothing \
         was created in its place)",
        .0.display()
    )]
    ProfileIncomplete(PathBuf),
    /// An index's encrypted client state does not decrypt or decode: it is
    /// corrupt or was tampered with. Nothing was changed.
    #[error("client state of index {index:?} ({}) is corrupt or was tampered with", path.display())]
    StateCorrupt {
        /// The index.
        index: String,
        /// Its state file.
        path: PathBuf,
    },
    /// The server's copy of an index's client state (shared by the
    /// profile's devices) does not decrypt or decode, or is not the
    /// version the server says: it is corrupt or was tampered with.
    /// Nothing was changed.
    #[error(
        "the server's copy of the client state of index {index:?} is corrupt or was tampered          with; nothing was changed"
    )]
    SharedStateCorrupt {
        /// The index.
        index: String,
    },
    /// The server's copy of an index's client state is older than one
    /// this device has seen: the server lost or rolled back data.
    #[error(
        "the server holds version {server} of the client state of index {index:?}, older          than version {seen} that this device has seen: the server lost or rolled back          data; nothing was changed"
    )]
    SharedStateRolledBack {
        /// The index.
        index: String,
        /// The version the server holds.
        server: u64,
        /// The newest version this device saw.
        seen: u64,
    },
    /// The server's copy of an index's client state does not continue
    /// the history this device saw (it is not the state this device saw
    /// at that version, does not descend from it, or lacks a state this
    /// device or another it heard of wrote): the server forked the
    /// devices' histories or put back an older copy that another device
    /// then wrote on. Nothing was changed.
    #[error(
        "the server's copy of the client state of index {index:?} does not continue what this \
         device saw: {reason}. The server forked the devices' histories or put back an older \
         copy of its store; nothing was changed. Run `sesame devices` on each device to compare \
         what each wrote, then restore the server's newest store or join the index again into \
         a fresh directory"
    )]
    SharedStateForked {
        /// The index.
        index: String,
        /// What does not match, in words.
        reason: String,
    },
    /// Other devices changed the index's shared state again and again
    /// while this one tried to: nothing of this command was lost or
    /// applied twice, and running it again completes it.
    #[error(
        "index {index:?} was changed by other devices {attempts} times while this command ran;          run it again"
    )]
    StateContended {
        /// The index.
        index: String,
        /// The attempts made.
        attempts: usize,
    },
    /// This device's state of an index and the server's shared copy are
    /// different histories (this device never synchronised with it, and
    /// both hold documents).
    #[error(
        "the server already holds a client state for index {index:?} that this device's does          not descend from; join it into a fresh directory (`sesame init --server URL --join          INDEX`), or use another index"
    )]
    StateDiverged {
        /// The index.
        index: String,
    },
    /// Another device changed the index's shared state since this one
    /// last read it: this device refreshes and tries again (internal; a
    /// caller sees [`ClientError::StateContended`] when that keeps
    /// failing).
    #[error("index {index:?} was changed by another device; refresh and try again")]
    StaleState {
        /// The index.
        index: String,
    },
    /// A part of the profile (its directory, header, server binding or an
    /// index state) can be reached by other users: refused, as ssh refuses
    /// a private key others can read. Nothing was read beyond its mode.
    #[error(
        "{} can be read by other users (mode {mode:03o}): run `chmod {fix} {}` so that only \
         you can",
        path.display(),
        path.display(),
        fix = if *.dir { "700" } else { "600" }
    )]
    TooOpen {
        /// The file or directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// Whether it is a directory.
        dir: bool,
    },
    /// Another process is using the profile (it holds the profile lock).
    #[error(
        "the profile {} is in use by another Sesame process; run the command again when it \
         has finished",
        .0.display()
    )]
    ProfileBusy(PathBuf),
    /// An operation is larger than the server accepts in one message.
    #[error("{what} is {size} bytes, more than the server accepts in one message ({max} bytes)")]
    TooLarge {
        /// What is too large.
        what: String,
        /// Its size in bytes.
        size: u64,
        /// The largest accepted size in bytes.
        max: u64,
    },
    /// The profile's store is open in another process.
    #[error("the profile store {} is in use by another Sesame process", .0.display())]
    StoreBusy(PathBuf),
    /// No scheme of this name is registered.
    #[error("unknown scheme {name:?} (known: {})", known.join(", "))]
    UnknownScheme {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: Vec<String>,
    },
    /// The profile has no index of this name.
    #[error("no index named {0:?} in this profile")]
    UnknownIndex(String),
    /// The profile already has an index of this name.
    #[error("an index named {0:?} already exists")]
    IndexExists(String),
    /// No table of that name.
    #[error("no table named {0:?} in this profile (see `sesame table list`)")]
    UnknownTable(String),
    /// A table of that name exists (made on this device or another of
    /// the profile). Nothing was changed.
    #[error(
        "a table named {0:?} already exists in this profile (made on this or another device); \
         nothing was changed: use it, or drop it first (`sesame table drop`)"
    )]
    TableExists(String),
    /// Another device of the profile changed the table while this command
    /// ran. The command's records are kept (the keyword index applies
    /// them exactly once); a range index it could not finish is marked
    /// for a rebuild from the records, which the next command makes.
    #[error(
        "table {0:?} was changed by another device of the profile while this command ran; \
         run the command again"
    )]
    TableChanged(String),
    /// A verifying index's answer did not verify: the server dropped,
    /// added, replayed or altered a result.
    #[error(
        "the server's answer did not verify (index {0}): it dropped, added, replayed or altered \
         a result, so nothing of it was used"
    )]
    AnswerNotVerified(String),
    /// No document has this identifier.
    #[error("no document with id {0}")]
    UnknownDocument(u64),
    /// No document of the index has this identifier or path.
    #[error("no document with id or path {0:?} in the index (see `sesame list`)")]
    NotInIndex(String),
    /// The server does not hold a document the client state lists.
    #[error("document {0} is missing from the store")]
    DocumentMissing(u64),
    /// A stored document does not decrypt: it is corrupt or was tampered
    /// with.
    #[error("document {0} is corrupt or was tampered with")]
    DocumentCorrupt(u64),
    /// A stored document decrypts, but not to what the client added under
    /// its identifier (its content's SHA-256 differs from the digest the
    /// catalog recorded): the server served another version of it, an
    /// older one or one of an index or table since dropped. Nothing of it
    /// was used.
    #[error(
        "document {0} is not what was added under that identifier (its digest differs from the \
         one the client recorded): the server served another or older version of it, and \
         nothing of it was used; restore the server's store from a backup, or remove the \
         document and add it again"
    )]
    DocumentNotAsAdded(u64),
    /// A file is larger than a document may be.
    #[error("{} is too large to add ({size} bytes; at most {max})", path.display())]
    DocumentTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The largest accepted size in bytes.
        max: u64,
    },
    /// A file or directory could not be read or written.
    #[error("cannot {action} {}: {message}", path.display())]
    Io {
        /// What was being done ("read", "write", "create", ...).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// The query holds no keyword.
    #[error("empty query: give a keyword (letters or digits)")]
    EmptyQuery,
    /// The query is not one keyword.
    #[error("{0}")]
    InvalidQuery(String),
    /// The index's scheme does not answer this kind of query.
    #[error(
        "the index's scheme {scheme} does not answer {kind} queries (it answers: {supported}); \
         create an index with a scheme that does (see `sesame schemes`)"
    )]
    UnsupportedQuery {
        /// The index's scheme.
        scheme: String,
        /// The kind of query asked.
        kind: String,
        /// The kinds it answers, comma-separated.
        supported: String,
    },
    /// An argument is not acceptable (index name, scheme parameters,
    /// passphrase, key-derivation parameters).
    #[error("{0}")]
    InvalidArgument(String),
    /// An update was saved but the server did not acknowledge it; it is
    /// sent again by the next operation on the index, so nothing is lost
    /// and nothing is applied twice.
    #[error(
        "{cause} ({documents} document(s) are saved and will be sent again by the next command)"
    )]
    Unacknowledged {
        /// Documents waiting in unacknowledged updates.
        documents: usize,
        /// Why the update did not go through.
        cause: Box<ClientError>,
    },
    /// A read cannot answer while an update is pending that the server
    /// does not accept now: the scheme must apply it first. The update is
    /// kept and sent by the next command that can.
    #[error(
        "{documents} document(s) are pending: not yet on the server ({cause}); the index's \
         scheme {scheme} cannot answer without them: {reason}. Run the command again once the \
         server accepts writes (the pending update is sent first)"
    )]
    PendingFirst {
        /// The index's scheme.
        scheme: String,
        /// Documents waiting in pending updates.
        documents: usize,
        /// Why the scheme cannot answer from the state the server has.
        reason: String,
        /// Why the pending update could not be sent.
        cause: Box<ClientError>,
    },
    /// An import stopped part way because the server (or the connection
    /// to it) failed. Its records are saved or sent, each operation is
    /// applied once, and a range index it could not finish is rebuilt:
    /// the same import run again completes it.
    #[error(
        "{}: the import stopped part way: {cause}. Nothing is lost: run the same import again \
         once the server answers (it completes what was sent and inserts each record once)",
        path.display()
    )]
    ImportInterrupted {
        /// The file imported.
        path: PathBuf,
        /// What failed.
        cause: Box<ClientError>,
    },
    /// The store already holds other content where this operation writes
    /// (two clients updating from the same state): nothing was applied.
    #[error("conflict: {0}")]
    Conflict(String),
    /// An error of a scheme, channel or store.
    #[error(transparent)]
    Core(#[from] sesame_core::Error),
}

/// `Result` with [`ClientError`].
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

impl ClientError {
    /// An I/O error on `path`, with the operating system's message in plain
    /// words.
    pub(crate) fn io(action: &'static str, path: &Path, e: &std::io::Error) -> Self {
        ClientError::Io {
            action,
            path: path.to_path_buf(),
            message: io_message(e),
        }
    }
}

/// The operating system's message for `e`, without the `(os error N)` tail
/// for the common cases.
fn io_message(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "no such file or directory".into(),
        K::PermissionDenied => "permission denied".into(),
        K::AlreadyExists => "already exists".into(),
        _ => OneLine(&e.to_string()).to_string(),
    }
}

/// Displays text on one line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for part in self.0.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            f.write_str(part)?;
        }
        Ok(())
    }
}
