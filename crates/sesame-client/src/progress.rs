//! Progress of a long operation (an add, a rotation, an import), as the
//! session, the profile and tables report it to a caller's callback.

/// What a long operation is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Reading and tokenizing the new files.
    Reading,
    /// Encrypting and storing the new documents.
    Storing,
    /// Fetching and decrypting stored documents (a static index's rebuild,
    /// the keywords of documents to delete, a check).
    Fetching,
    /// Building or updating the encrypted index.
    Indexing,
    /// Records of an import inserted into a table, all indexes included.
    Imported,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Reading => "reading",
            Phase::Storing => "storing",
            Phase::Fetching => "fetching",
            Phase::Indexing => "indexing",
            Phase::Imported => "imported",
        })
    }
}

/// Progress of a long operation: `done` of `total` steps of `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// Steps done.
    pub done: u64,
    /// Steps in the phase.
    pub total: u64,
}
