//! What a device holds of an index's shared state: the session keeps it
//! ([`Shared`]), the chain checks and updates what it saw ([`Seen`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::backend::IndexRecordWrite;
use crate::state::{CommitMemo, Head, SharedExtras};

/// This device's side of an index's shared state.
pub(crate) struct Shared {
    /// The state this device's is (its version and digest) and what it
    /// knows of the history of states.
    pub seen: Seen,
    /// This device's identifier (its reservations are marked with it).
    pub device: [u8; 16],
    /// What the devices share beyond the state; this device's own
    /// reservations are in the state's `reserved`, not here.
    pub extras: SharedExtras,
    /// Records to write with the next commit of the state (a pending
    /// intent's bytes, or its deletion once completed).
    pub staged: Vec<IndexRecordWrite>,
    /// `indexes/NAME.shared`.
    pub(super) sidecar: PathBuf,
    /// The largest chunk (what one message carries, less framing).
    pub(super) chunk_max: usize,
    /// What the last commit sealed and named (`state::memo`).
    pub memo: CommitMemo,
}

/// What a device knows of the history of an index's shared states:
/// kept in `indexes/NAME.shared`, checked against every state the server
/// answers ([`accept`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The version of the newest state this device saw.
    pub version: u64,
    /// Its digest; `None` when the note was written without it (by a
    /// build before the chain, or by a join): the next state read is
    /// adopted as it is.
    pub digest: Option<[u8; 32]>,
    /// Whether that state had a place in the chain ([`Chain`]): once one
    /// had, a state without is refused.
    pub chained: bool,
    /// The last state each device wrote, as that state said (its own
    /// writer's entry included).
    pub heads: BTreeMap<[u8; 16], Head>,
    /// This device's own last write.
    pub own: Option<Head>,
}
