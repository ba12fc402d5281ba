//! Per-index client state, encrypted at rest.
//!
//! A state file is `MAGIC || scheme length (1 byte) || scheme name ||
//! AEAD seal of the wire-encoded [`IndexState`]`. The scheme name is in
//! clear so that it can be bound into the associated data together with
//! the profile id and the index name: a state file copied to another
//! index or profile, or relabelled with another scheme, does not open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Params};
use sesame_crypto::{Aes256GcmSiv, Key};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{ClientError, Result};
use crate::fsutil;

/// First bytes of every state file (name and format version).
const MAGIC: &[u8; 8] = b"SSMIDX01";

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
}

impl Drop for IndexState {
    fn drop(&mut self) {
        self.client.zeroize();
    }
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

    fn aad(&self, index: &str, scheme: &str) -> Vec<u8> {
        let mut aad = b"sesame-client/state/v1\0".to_vec();
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
            .seal(rng, &self.aad(index, &state.scheme), &plain)
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
        let rest = file.strip_prefix(MAGIC.as_slice()).ok_or_else(corrupt)?;
        let (&len, rest) = rest.split_first().ok_or_else(corrupt)?;
        let (scheme, sealed) = rest
            .split_at_checked(usize::from(len))
            .ok_or_else(corrupt)?;
        let scheme = std::str::from_utf8(scheme).map_err(|_| corrupt())?;
        let plain = Zeroizing::new(
            self.aead
                .open(&self.aad(index, scheme), sealed)
                .map_err(|_| corrupt())?,
        );
        let state: IndexState = wire::decode(&plain).map_err(|_| corrupt())?;
        if state.scheme != scheme {
            return Err(corrupt());
        }
        Ok(state)
    }
}
