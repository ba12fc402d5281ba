//! Per-index client state, encrypted at rest.
//!
//! A state file is `MAGIC || scheme length (1 byte) || scheme name ||
//! AEAD seal of the wire-encoded [`IndexState`]`. The scheme name is in
//! clear so that it can be bound into the associated data together with
//! the profile id and the index name: a state file copied to another
//! index or profile, or relabelled with another scheme, does not open.
//!
//! Format 2 (`SSMIDX02`) adds the pending intents and the journal of an
//! add in progress; format-1 files (`SSMIDX01`) are still read, and
//! rewritten as format 2 by the next change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Params};
use sesame_crypto::{Aes256GcmSiv, Key};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{ClientError, Result};
use crate::fsutil;

/// First bytes of every state file this build writes (name and format
/// version).
const MAGIC: &[u8; 8] = b"SSMIDX02";
/// First bytes of a format-1 state file (read, never written).
const MAGIC_V1: &[u8; 8] = b"SSMIDX01";

/// Where a document came from, kept in the client state so that a search
/// can show paths without fetching documents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentInfo {
    /// The document's identifier.
    pub id: u64,
    /// The path it was added from, as given (lossily UTF-8).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An update whose requests are computed, and whose new client state is
/// already saved, but which the server has not acknowledged yet. It is
/// persisted together with the state that produced it, before anything is
/// sent, and sent again until acknowledged: its labels are fixed, so the
/// server applies it once however often it arrives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PendingIntent {
    /// Names the update on the server (a repeat is recognised).
    pub id: [u8; 16],
    /// The index generation it belongs to.
    pub generation: u64,
    /// The encoded scheme requests, applied together.
    pub requests: Vec<Vec<u8>>,
    /// The documents it indexes; they enter the catalog on acknowledgement.
    pub documents: Vec<DocumentInfo>,
}

/// A file of an add in progress: its reserved identifier and what it
/// held. Running the same add again after a crash reuses the identifier
/// and skips what was done, instead of adding the file twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JournalEntry {
    /// The reserved identifier.
    pub id: u64,
    /// The path as given.
    pub path: String,
    /// SHA-256 of the content.
    pub digest: [u8; 32],
}

/// Everything the client must remember about one index.
#[derive(Serialize, Deserialize)]
pub(crate) struct IndexState {
    /// Registry name of the scheme.
    pub scheme: String,
    /// Scheme parameters given at creation.
    pub params: Params,
    /// The index generation the client state belongs to.
    pub generation: u64,
    /// The next unused document identifier; identifiers are never reused,
    /// also after a crash (they are reserved before anything is sent).
    pub next_doc: u64,
    /// The scheme client's own state (keys included).
    pub client: Vec<u8>,
    /// Document identifier to origin.
    pub catalog: BTreeMap<u64, DocumentInfo>,
    /// Updates not yet acknowledged by the server, oldest first.
    pub pending: Vec<PendingIntent>,
    /// The files of an add that has not completed.
    pub journal: Vec<JournalEntry>,
}

/// Format 1 of [`IndexState`], without pending intents and journal.
#[derive(Deserialize)]
struct IndexStateV1 {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    client: Vec<u8>,
    catalog: BTreeMap<u64, DocumentInfo>,
}

impl IndexState {
    /// A new state: nothing added yet.
    pub fn new(scheme: &str, params: &Params, client: Vec<u8>) -> Self {
        IndexState {
            scheme: scheme.to_owned(),
            params: params.clone(),
            generation: 0,
            next_doc: 1,
            client,
            catalog: BTreeMap::new(),
            pending: Vec::new(),
            journal: Vec::new(),
        }
    }
}

impl Drop for IndexStateV1 {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

impl Drop for IndexState {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

/// Decodes a decrypted state as [`StateCipher::load`] does, in both
/// formats (for the fuzz targets).
pub(crate) fn parse_plain(bytes: &[u8]) {
    let _ = wire::decode::<IndexState>(bytes);
    let _ = wire::decode::<IndexStateV1>(bytes);
}

/// Seals and opens the state files of one profile.
pub(crate) struct StateCipher {
    aead: Aes256GcmSiv,
    profile_id: String,
}

impl StateCipher {
    pub fn new(key: &Key<32>, profile_id: &str) -> Self {
        StateCipher {
            aead: Aes256GcmSiv::new(key),
            profile_id: profile_id.to_owned(),
        }
    }

    fn aad(&self, version: u8, index: &str, scheme: &str) -> Vec<u8> {
        let mut aad = format!("sesame-client/state/v{version}\0").into_bytes();
        for part in [self.profile_id.as_str(), index, scheme] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }

    /// Encrypts `state` and writes it to `path` atomically.
    pub fn save(
        &self,
        rng: &mut dyn CryptoRngCore,
        path: &Path,
        index: &str,
        state: &IndexState,
    ) -> Result<()> {
        let plain = Zeroizing::new(wire::encode(state)?);
        let scheme = state.scheme.as_bytes();
        let scheme_len = u8::try_from(scheme.len()).map_err(|_| {
            ClientError::InvalidArgument(format!("scheme name {:?} is too long", state.scheme))
        })?;
        let sealed = self
            .aead
            .seal(rng, &self.aad(2, index, &state.scheme), &plain)
            .map_err(|_| ClientError::InvalidArgument("client state is too large".into()))?;
        let mut file = Vec::with_capacity(MAGIC.len() + 1 + scheme.len() + sealed.len());
        file.extend_from_slice(MAGIC);
        file.push(scheme_len);
        file.extend_from_slice(scheme);
        file.extend_from_slice(&sealed);
        fsutil::write_atomic(path, &file)
    }

    /// Reads and decrypts the state at `path`. Any damage (truncation, a
    /// flipped byte, a file from elsewhere) is [`ClientError::StateCorrupt`].
    pub fn load(&self, path: &Path, index: &str) -> Result<IndexState> {
        let file = std::fs::read(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ClientError::UnknownIndex(index.to_owned())
            } else {
                ClientError::io("read", path, &e)
            }
        })?;
        let corrupt = || ClientError::StateCorrupt {
            index: index.to_owned(),
            path: PathBuf::from(path),
        };
        let (version, rest) = if let Some(rest) = file.strip_prefix(MAGIC.as_slice()) {
            (2, rest)
        } else {
            (
                1,
                file.strip_prefix(MAGIC_V1.as_slice()).ok_or_else(corrupt)?,
            )
        };
        let (&len, rest) = rest.split_first().ok_or_else(corrupt)?;
        let (scheme, sealed) = rest
            .split_at_checked(usize::from(len))
            .ok_or_else(corrupt)?;
        let scheme = std::str::from_utf8(scheme).map_err(|_| corrupt())?;
        let plain = Zeroizing::new(
            self.aead
                .open(&self.aad(version, index, scheme), sealed)
                .map_err(|_| corrupt())?,
        );
        let state: IndexState = if version == 2 {
            wire::decode(&plain).map_err(|_| corrupt())?
        } else {
            let mut v1: IndexStateV1 = wire::decode(&plain).map_err(|_| corrupt())?;
            IndexState {
                scheme: std::mem::take(&mut v1.scheme),
                params: std::mem::take(&mut v1.params),
                generation: v1.generation,
                next_doc: v1.next_doc,
                client: std::mem::take(&mut v1.client),
                catalog: std::mem::take(&mut v1.catalog),
                pending: Vec::new(),
                journal: Vec::new(),
            }
        };
        if state.scheme != scheme {
            return Err(corrupt());
        }
        Ok(state)
    }
}
