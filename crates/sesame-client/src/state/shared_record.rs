//! The server's copy of an index's state (the shared record, `state`
//! in `docs/client.md`): what the devices of a profile share beyond one
//! device's [`IndexState`], its place in the chain of states, and how a
//! [`StateCipher`] seals and opens it in each format (`SSMSHR03`, its
//! catalog in compact blocks: module `shared_form`; `SSMSHR02` and
//! `SSMSHR01` before it, still opened).

use super::*;

/// What the devices of a profile share about an index beyond one
/// device's [`IndexState`]: the server's copy of the state carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SharedExtras {
    /// The next generation number a rebuild may take: a rebuild reserves
    /// its number (a committed write) before it builds, so two devices
    /// never build the same generation.
    pub next_generation: u64,
    /// Identifiers reserved by each device's add in progress (the
    /// `reserved` of its [`IndexState`]), by device: a device cleans up
    /// only its own, never another's that is still running.
    pub reserved_by: BTreeMap<[u8; 16], Vec<u64>>,
}

/// A state a device wrote: its version and digest ([`shared_digest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Head {
    /// The version of the shared record it was.
    pub version: u64,
    /// The digest of its sealed bytes.
    pub digest: [u8; 32],
}

/// Where a shared state stands in the history of the index's shared
/// states (fork consistency, as in SUNDR): sealed with it, so only a
/// device of the profile can write one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Chain {
    /// The digest of the state it was written on (zeros for the first).
    pub prev: [u8; 32],
    /// The device that wrote it.
    pub writer: [u8; 16],
    /// The last state each device wrote before this one, by device (this
    /// state's own entry, its writer's, is itself: version and digest of
    /// this record).
    pub heads: BTreeMap<[u8; 16], Head>,
}

/// The digest naming a shared state: SHA-256 (domain-separated) of its
/// sealed bytes, as [`StateCipher::seal_shared_with`] made them.
pub(crate) fn shared_digest(sealed: &[u8]) -> [u8; 32] {
    sesame_crypto::hash::ro("sesame-client/shared-state-digest/v1", &[sealed])
}

/// The plaintext of a shared state: [`Chain`] in the current format,
/// `()` (encoded as nothing) in the format before the chain.
#[derive(Serialize, Deserialize)]
struct SharedPlainOf<C> {
    state: Vec<u8>,
    extras: SharedExtras,
    chain: C,
}

impl<C> Drop for SharedPlainOf<C> {
    fn drop(&mut self) {
        self.state.zeroize();
    }
}

/// The plaintext of a shared state.
type SharedPlain = SharedPlainOf<Chain>;

/// The plaintext of a shared state written before the chain.
type SharedPlainV1 = SharedPlainOf<()>;

/// A format of the shared record, by what its plaintext carries besides
/// the state: [`Chain`] (`SSMSHR02`, the one written), or `()` for the
/// format before the chain (`SSMSHR01`, written only by tests of its
/// adoption).
pub(crate) trait SharedFormat: Serialize + Clone {
    /// The record's magic.
    const MAGIC: &'static [u8; 8];
    /// The format's number, bound into the associated data.
    const FORMAT: u8;
}

impl SharedFormat for Chain {
    const MAGIC: &'static [u8; 8] = SHARED_MAGIC;
    const FORMAT: u8 = 3;
}

/// The format before the catalog's compact blocks (`SSMSHR02`: written
/// only by tests of its adoption).
#[cfg(test)]
#[derive(Clone, Serialize)]
pub(crate) struct ChainV2(pub Chain);

#[cfg(test)]
impl SharedFormat for ChainV2 {
    const MAGIC: &'static [u8; 8] = SHARED_MAGIC_V2;
    const FORMAT: u8 = 2;
}

#[cfg(test)]
impl SharedFormat for () {
    const MAGIC: &'static [u8; 8] = SHARED_MAGIC_V1;
    const FORMAT: u8 = 1;
}

impl StateCipher {
    fn shared_aad(&self, format: u8, index: &str, scheme: &str, version: u64) -> Vec<u8> {
        let mut aad = format!("sesame-client/shared-state/v{format}\0").into_bytes();
        for part in [self.profile_id.as_str(), index, scheme] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad.extend_from_slice(&version.to_be_bytes());
        aad
    }

    /// [`StateCipher::seal_shared_with`] with nothing to take from a last
    /// commit.
    #[cfg(test)]
    pub(crate) fn seal_shared<C: SharedFormat>(
        &self,
        rng: &mut dyn CryptoRngCore,
        index: &str,
        version: u64,
        state: &IndexState,
        extras: &SharedExtras,
        chain: &C,
    ) -> Result<Vec<u8>> {
        let memo = CommitMemo::default();
        let shared = (state, extras, chain);
        Ok(self.seal_shared_with(rng, index, version, shared, &memo)?.0)
    }

    /// The server's copy of `state` and `extras` as version `version` of
    /// the shared record, at its place `chain` in the history of states:
    /// `"SSMSHR02" || version || len(scheme) || scheme ||
    /// AES-256-GCM-SIV(state key, aad, plain)`, the version bound into the
    /// associated data so that the server cannot pass an older copy off
    /// as a newer one.
    ///
    /// Each segment the last commit (`memo`) sealed already takes the
    /// sealed bytes it had (the same bytes as sealing it again); the seal
    /// is returned, to keep in the memo once the commit's chunks are
    /// named.
    pub(crate) fn seal_shared_with<C: SharedFormat>(
        &self,
        rng: &mut dyn CryptoRngCore,
        index: &str,
        version: u64,
        (state, extras, chain): (&IndexState, &SharedExtras, &C),
        memo: &CommitMemo,
    ) -> Result<(Vec<u8>, Seal)> {
        let mut state_bytes = if C::FORMAT >= 3 {
            shared_form::encode(state)?
        } else {
            Zeroizing::new(wire::encode(state)?)
        };
        let plain = SharedPlainOf {
            // Moved, not copied (the plaintext wipes it when dropped).
            state: std::mem::take(&mut *state_bytes),
            extras: extras.clone(),
            chain: chain.clone(),
        };
        let plain = Zeroizing::new(wire::encode(&plain)?);
        let (magic, format, scheme) = (C::MAGIC, C::FORMAT, &state.scheme);
        let scheme_len = u8::try_from(scheme.len()).map_err(|_| {
            ClientError::InvalidArgument(format!("scheme name {scheme:?} is too long"))
        })?;
        let aad = self.shared_aad(format, index, scheme, version);
        let segment_aad = self.shared_aad(format, index, scheme, 0);
        // Room for the header, the plaintext and each segment's 20 bytes
        // of length and tag (segments of at least 4 KiB), so that the
        // sealed state is written in place once.
        let room = magic.len() + 9 + scheme.len() + plain.len() + plain.len() / 128 + 4096;
        let mut out = Vec::with_capacity(room);
        out.extend_from_slice(magic);
        out.extend_from_slice(&version.to_be_bytes());
        out.push(scheme_len);
        out.extend_from_slice(scheme.as_bytes());
        let (out, mut seal) = if format >= 2 {
            self.seal_segmented_with(rng, (&segment_aad, &aad), &plain, memo, out)?
        } else {
            let sealed = self
                .aead
                .seal(rng, &aad, &plain)
                .map_err(|_| ClientError::InvalidArgument("client state is too large".into()))?;
            out.extend_from_slice(&sealed);
            // Sealed whole: nothing a later commit could take.
            (out, Seal::new([0; 32]))
        };
        seal.finish(plain);
        Ok((out, seal))
    }

    /// A keyed digest of the state key and a segments' associated data:
    /// a [`CommitMemo`] reuses sealed segments only under the same.
    pub(crate) fn memo_check(&self, segment_aad: &[u8]) -> [u8; 32] {
        self.names
            .hash("sesame-client/shared-segment-memo/v1", &[segment_aad])
    }

    /// Opens version `version` of the shared record of `index`, as
    /// [`StateCipher::seal_shared_with`] made it, with its place in the chain;
    /// a record of the format before the chain (`SSMSHR01`) opens with
    /// none. Anything else (another version, index or profile, a flipped
    /// byte) is [`ClientError::SharedStateCorrupt`].
    pub(crate) fn open_shared(
        &self,
        index: &str,
        version: u64,
        bytes: &[u8],
    ) -> Result<(IndexState, SharedExtras, Option<Chain>)> {
        let corrupt = || ClientError::SharedStateCorrupt {
            index: index.to_owned(),
        };
        let (format, rest) = if let Some(rest) = bytes.strip_prefix(SHARED_MAGIC.as_slice()) {
            (3, rest)
        } else if let Some(rest) = bytes.strip_prefix(SHARED_MAGIC_V2.as_slice()) {
            (2, rest)
        } else {
            let rest = bytes
                .strip_prefix(SHARED_MAGIC_V1.as_slice())
                .ok_or_else(corrupt)?;
            (1, rest)
        };
        let (said, rest) = rest.split_first_chunk::<8>().ok_or_else(corrupt)?;
        if u64::from_be_bytes(*said) != version {
            return Err(corrupt());
        }
        let (scheme, sealed) = split_scheme(rest).ok_or_else(corrupt)?;
        let plain = self
            .open_segmented(
                &self.shared_aad(format, index, scheme, 0),
                &self.shared_aad(format, index, scheme, version),
                sealed,
            )
            .ok_or_else(corrupt)?;
        let (state, extras, chain) = if format >= 2 {
            let mut shared: SharedPlain = wire::decode(&plain).map_err(|_| corrupt())?;
            let state: IndexState = if format == 3 {
                shared_form::decode(&shared.state).ok_or_else(corrupt)?
            } else {
                wire::decode(&shared.state).map_err(|_| corrupt())?
            };
            shared.state.zeroize();
            let chain = std::mem::take(&mut shared.chain);
            (state, std::mem::take(&mut shared.extras), Some(chain))
        } else {
            let mut shared: SharedPlainV1 = wire::decode(&plain).map_err(|_| corrupt())?;
            let state: IndexState = wire::decode(&shared.state).map_err(|_| corrupt())?;
            (state, std::mem::take(&mut shared.extras), None)
        };
        if state.scheme != scheme {
            return Err(corrupt());
        }
        Ok((state, extras, chain))
    }
}
