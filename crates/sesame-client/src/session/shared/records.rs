//! The shared records on the server: the state record and its chunks, the
//! head record, fetching and adopting a state, and staging and committing
//! this device's writes in one compare-and-swap.

use std::path::Path;

use super::chain::{heads_of, read_sidecar, write_sidecar};
use super::{
    chunk_count, intent_chunk_prefix, intent_record, Seen, ANY_VERSION, CHUNKED, HEAD_MAGIC,
    HEAD_RECORD, INLINE, PROFILE_RECORD, STATE_RECORD,
};
use crate::backend::{Backend, IndexRecord, IndexRecordWrite};
use crate::error::{ClientError, Result};
use crate::intents::Intent;
use crate::session::Session;
use crate::state::{
    shared_digest, Chain, ChunkNames, CommitMemo, Head, IndexState, SharedExtras, StateCipher,
};

/// The head record's value for state `version` of digest `digest`.
pub(super) fn head_value(version: u64, digest: &[u8; 32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(HEAD_MAGIC);
    v.extend_from_slice(&version.to_be_bytes());
    v.extend_from_slice(digest);
    v
}

/// The version and digest a head record names, if it parses.
pub(super) fn parse_head(value: &[u8]) -> Option<(u64, [u8; 32])> {
    let rest = value.strip_prefix(HEAD_MAGIC.as_slice())?;
    let (version, digest) = rest.split_first_chunk::<8>()?;
    Some((u64::from_be_bytes(*version), digest.try_into().ok()?))
}

/// The largest chunk a record may carry through `backend`.
pub(crate) fn chunk_max(backend: &mut dyn Backend) -> Result<usize> {
    Ok(backend
        .max_message()?
        .map_or(usize::MAX / 2, |m| {
            crate::network::max_request(m).saturating_sub(4096)
        })
        .max(4096))
}

/// Reads a record value written by [`Session::put_value`]: inline, or
/// reassembled from its chunks.
pub(super) fn get_value(backend: &mut dyn Backend, index: &str, value: &[u8]) -> Result<Vec<u8>> {
    let damaged = || ClientError::SharedStateCorrupt {
        index: index.to_owned(),
    };
    let (&tag, rest) = value.split_first().ok_or_else(damaged)?;
    match tag {
        INLINE => Ok(rest.to_vec()),
        crate::session::chunks::CONTENT => {
            let chunk_max = chunk_max(backend)?;
            crate::session::chunks::get_state(backend, index, chunk_max, rest)
        }
        CHUNKED => {
            let (count, prefix) = rest.split_first_chunk::<4>().ok_or_else(damaged)?;
            let count = u32::from_be_bytes(*count);
            let prefix = std::str::from_utf8(prefix).map_err(|_| damaged())?;
            let mut out = Vec::new();
            for k in 0..count {
                let records = backend
                    .read_records(index, &[format!("{prefix}{k}")], &[])?
                    .unwrap_or_default();
                match records.into_iter().next() {
                    Some(r) if r.version > 0 => out.extend_from_slice(&r.value),
                    _ => return Err(damaged()),
                }
            }
            Ok(out)
        }
        _ => Err(damaged()),
    }
}

/// The server's shared state of `index` (opened), its version and the
/// profile record, if the backend keeps records; `Ok(None)` when it
/// keeps none. A state whose chunks another device was rewriting while
/// they were read is read again.
pub(crate) fn fetch(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    index: &str,
) -> Result<Option<Fetched>> {
    let names = [STATE_RECORD.to_owned(), PROFILE_RECORD.to_owned()];
    let mut last = None;
    for _ in 0..3 {
        let Some(records) = backend.read_records(index, &names, &[])? else {
            return Ok(None);
        };
        let [state, profile]: [IndexRecord; 2] = records.try_into().map_err(|_| {
            ClientError::Core(sesame_core::Error::Protocol(
                "the server answered another number of records".into(),
            ))
        })?;
        if last == Some(state.version) {
            return Err(ClientError::SharedStateCorrupt {
                index: index.to_owned(),
            });
        }
        if state.version == 0 {
            return Ok(Some(Fetched {
                version: 0,
                opened: None,
                digest: [0; 32],
                chain: None,
                profile,
            }));
        }
        let opened = get_value(backend, index, &state.value).and_then(|blob| {
            let digest = shared_digest(&blob);
            cipher
                .open_shared(index, state.version, &blob)
                .map(|o| (o, digest))
        });
        match opened {
            Ok(((state_, extras, chain), digest)) => {
                return Ok(Some(Fetched {
                    version: state.version,
                    opened: Some((state_, extras)),
                    digest,
                    chain,
                    profile,
                }))
            }
            Err(ClientError::SharedStateCorrupt { .. }) => last = Some(state.version),
            Err(e) => return Err(e),
        }
    }
    Err(ClientError::SharedStateCorrupt {
        index: index.to_owned(),
    })
}

/// What [`fetch`] read.
pub(crate) struct Fetched {
    /// The state record's version (0: none).
    pub version: u64,
    /// The state and extras, when there is a record.
    pub opened: Option<(IndexState, SharedExtras)>,
    /// The digest of the sealed state (zeros: none).
    pub digest: [u8; 32],
    /// Its place in the chain of states (`None`: none, or a state of the
    /// format before the chain).
    pub chain: Option<Chain>,
    /// The profile record.
    pub profile: IndexRecord,
}

/// Writes a joined device's local copy of a shared state: its state file
/// (via `save`) and its sidecar, with a fresh device identifier.
pub(crate) fn adopt_locally(
    sidecar: &Path,
    version: u64,
    save: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let (device, _, known) = read_sidecar(sidecar)?;
    save()?;
    if known {
        // What this device saw stays: the next session judges the
        // server's state against it.
        return Ok(());
    }
    // Without a digest: the first session takes the state it reads then
    // as the start of what this device saw.
    let seen = Seen {
        version,
        ..Seen::default()
    };
    write_sidecar(sidecar, &device, &seen)
}

/// Whether a state holds anything a device must not lose by adopting
/// another's.
pub(super) fn holds_anything(state: &IndexState) -> bool {
    !state.catalog.is_empty()
        || !state.pending.is_empty()
        || !state.reserved.is_empty()
        || !state.garbage.is_empty()
        || state.generation != 0
}

impl Session {
    /// The record value for `bytes`: the bytes themselves when small, else
    /// a list of chunk records named `prefix` and their number, written
    /// now (any version: the names are this writer's own).
    pub(super) fn put_value(&mut self, prefix: &str, bytes: &[u8]) -> Result<Vec<u8>> {
        let chunk_max = self.shared.as_ref().map_or(usize::MAX, |s| s.chunk_max);
        let count = chunk_count(bytes.len(), chunk_max);
        if count == 0 {
            let mut value = Vec::with_capacity(1 + bytes.len());
            value.push(INLINE);
            value.extend_from_slice(bytes);
            return Ok(value);
        }
        for (k, chunk) in bytes.chunks(chunk_max).enumerate() {
            let write = IndexRecordWrite {
                name: format!("{prefix}{k}"),
                expected: ANY_VERSION,
                value: Some(chunk.to_vec()),
            };
            if self
                .backend
                .write_records(&self.index, vec![write])?
                .is_some()
            {
                return Err(ClientError::Core(sesame_core::Error::Protocol(
                    "the server refused a write of any version".into(),
                )));
            }
        }
        let mut value = vec![CHUNKED];
        value.extend_from_slice(&(count as u32).to_be_bytes());
        value.extend_from_slice(prefix.as_bytes());
        Ok(value)
    }

    /// Puts back the commit memo taken for a commit.
    fn keep_memo(&mut self, memo: CommitMemo) {
        if let Some(shared) = self.shared.as_mut() {
            shared.memo = memo;
        }
    }

    /// Commits the state as the next version of the shared record, with
    /// the staged records, if the record is still at the version this
    /// session holds; [`ClientError::StaleState`] if not (nothing
    /// written). The staged records are dropped only once written: after
    /// a failure the caller unstages its own ([`Session::unstage_to`]) and
    /// the earlier ones wait for the next commit. The caller writes the
    /// local copy, then [`Session::note_version`].
    pub(in crate::session) fn commit_shared(&mut self) -> Result<()> {
        let Some(shared) = self.shared.as_ref() else {
            return Ok(());
        };
        let staged = shared.staged.clone();
        let next = shared.seen.version + 1;
        let expected = shared.seen.version;
        let device = shared.device;
        // The chain: the state this one is written on, and the last write
        // of each device as that state said.
        let chain = Chain {
            prev: shared.seen.digest.unwrap_or([0; 32]),
            writer: shared.device,
            heads: shared.seen.heads.clone(),
        };
        let mut extras = shared.extras.clone();
        if !self.state.reserved.is_empty() {
            extras
                .reserved_by
                .insert(shared.device, self.state.reserved.clone());
        }
        // The last commit's seal and chunk names: what did not change is
        // not sealed or hashed again (`state::memo`).
        let mut memo = self
            .shared
            .as_mut()
            .map(|s| std::mem::take(&mut s.memo))
            .unwrap_or_default();
        let sealed = self.cipher.seal_shared_with(
            &mut self.rng,
            &self.index,
            next,
            (&self.state, &extras, &chain),
            &memo,
        );
        let (blob, seal) = match sealed {
            Ok(sealed) => sealed,
            Err(e) => {
                self.keep_memo(memo);
                return Err(e);
            }
        };
        let digest = shared_digest(&blob);
        // Content-named chunks: the parts of the state in force that
        // did not change are not sent again (`chunks`).
        let mut names = ChunkNames::default();
        let put = self.put_state(expected, &blob, &memo, &mut names);
        if put.is_ok() {
            memo.keep(seal, blob, names);
        }
        // A failed commit keeps the last one's memo: it still holds.
        self.keep_memo(memo);
        let (value, gone) = put?;
        let mut writes = vec![
            IndexRecordWrite {
                name: STATE_RECORD.into(),
                expected,
                value: Some(value),
            },
            IndexRecordWrite {
                name: HEAD_RECORD.into(),
                expected: ANY_VERSION,
                value: Some(head_value(next, &digest)),
            },
        ];
        writes.extend(staged);
        writes.extend(gone);
        let conflict = self.backend.write_records(&self.index, writes.clone())?;
        if let Some(current) = conflict {
            // A retried request whose first try was applied finds every
            // record as it wrote it.
            let ours = current.len() == writes.len()
                && writes.iter().zip(&current).all(|(w, c)| match &w.value {
                    Some(v) => {
                        (w.expected == ANY_VERSION || c.version == w.expected + 1) && &c.value == v
                    }
                    None => c.version == 0,
                });
            if !ours {
                return Err(ClientError::StaleState {
                    index: self.index.clone(),
                });
            }
        }
        if let Some(shared) = self.shared.as_mut() {
            let mine = Head {
                version: next,
                digest,
            };
            shared.seen = Seen {
                version: next,
                digest: Some(digest),
                chained: true,
                heads: heads_of(&chain, next, digest),
                own: Some(mine),
            };
            debug_assert_eq!(shared.seen.heads.get(&device), Some(&mine));
            shared.staged.clear();
        }
        Ok(())
    }

    /// Notes the version of the shared state the local copy now is.
    pub(in crate::session) fn note_version(&self) -> Result<()> {
        match &self.shared {
            Some(shared) => write_sidecar(&shared.sidecar, &shared.device, &shared.seen),
            None => Ok(()),
        }
    }

    /// Stages the sealed bytes of a pending intent, to be written with the
    /// state that refers to it (its chunks, if it has any, are written
    /// now).
    pub(in crate::session) fn stage_intent(
        &mut self,
        id: &[u8; 16],
        sealed: Vec<u8>,
    ) -> Result<()> {
        if self.shared.is_none() {
            return Ok(());
        }
        let value = self.put_value(&intent_chunk_prefix(id), &sealed)?;
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.push(IndexRecordWrite {
                name: intent_record(id),
                expected: 0,
                value: Some(value),
            });
        }
        Ok(())
    }

    /// Stages the deletion of a completed intent's record and chunks.
    pub(in crate::session) fn stage_intent_done(&mut self, id: &[u8; 16]) {
        let Some(chunk_max) = self.shared.as_ref().map(|s| s.chunk_max) else {
            return;
        };
        let len = self.intents.read(id).map_or(0, |b| b.len());
        let chunks = chunk_count(len, chunk_max);
        let prefix = intent_chunk_prefix(id);
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.push(IndexRecordWrite {
                name: intent_record(id),
                expected: 1,
                value: None,
            });
            for k in 0..chunks {
                shared.staged.push(IndexRecordWrite {
                    name: format!("{prefix}{k}"),
                    expected: ANY_VERSION,
                    value: None,
                });
            }
        }
    }

    /// Drops what was staged for a commit that did not happen.
    pub(in crate::session) fn unstage(&mut self) {
        self.unstage_to(0);
    }

    /// How many record writes are staged.
    pub(in crate::session) fn staged_len(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.staged.len())
    }

    /// Drops what was staged after the first `mark` writes (those of a
    /// save that failed; the earlier ones still wait for the next).
    pub(in crate::session) fn unstage_to(&mut self, mark: usize) {
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.truncate(mark);
        }
    }

    /// Pending intent `id`: its file here, or the server's copy (another
    /// device saved it), kept here from then on.
    pub(in crate::session) fn load_intent(&mut self, id: &[u8; 16]) -> Result<Intent> {
        if self.intents.has(id) || self.shared.is_none() {
            return self.intents.load(id);
        }
        let records = self
            .backend
            .read_records(&self.index, &[intent_record(id)], &[])?
            .unwrap_or_default();
        match records.into_iter().next() {
            Some(r) if r.version > 0 => {
                let sealed = get_value(self.backend.as_mut(), &self.index, &r.value)?;
                let intent = self.intents.open(id, &sealed)?;
                self.intents.write(id, &sealed)?;
                Ok(intent)
            }
            // Gone: another device completed it since this one read the
            // state (the state moved on), or it is lost.
            _ => {
                let version = self.shared.as_ref().map_or(0, |s| s.seen.version);
                let now = self
                    .backend
                    .read_records(&self.index, &[STATE_RECORD.to_owned()], &[version])?
                    .unwrap_or_default();
                if now.first().is_some_and(|r| r.version != version) {
                    Err(ClientError::StaleState {
                        index: self.index.clone(),
                    })
                } else {
                    self.intents.load(id)
                }
            }
        }
    }
}
