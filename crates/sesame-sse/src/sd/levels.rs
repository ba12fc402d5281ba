//! What SDa and SDd share: the update entries `(w, ind, op, seq)` with
//! their padded encoding, the per-level keys, and the search's filter that
//! keeps each identifier's last operation.

use std::collections::BTreeMap;

use rand_core::CryptoRngCore;

use sesame_core::{Error, Result};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use crate::api::{DocId, Multimap, UpdateOp};
use crate::common::{self, Tag};

/// Bytes of an entry's label.
pub const LABEL_LEN: usize = 16;
/// Most levels (`2^64` updates).
pub(super) const MAX_LEVELS: usize = 64;
/// Longest keyword an entry carries.
pub(super) const MAX_KEYWORD: usize = 1 << 16;

/// Bytes of an entry before its keyword: sequence number, operation,
/// identifier, keyword length.
pub(super) const ENTRY_HEAD: usize = 8 + 1 + 8 + 4;

/// Entries are padded to a multiple of this many bytes.
pub(super) const ENTRY_PAD: usize = 64;

/// A decrypted update entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Update {
    pub(super) keyword: Vec<u8>,
    pub(super) id: DocId,
    pub(super) add: bool,
    pub(super) seq: u64,
}

impl Update {
    /// `seq ‖ add ‖ id ‖ keyword length (u32 LE) ‖ keyword`, padded with
    /// zeros to a multiple of [`ENTRY_PAD`] bytes, so that sealed entries
    /// of keywords up to 43 bytes all have one length.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity((ENTRY_HEAD + self.keyword.len()).next_multiple_of(ENTRY_PAD));
        self.encode_into(&mut out);
        out
    }

    /// [`encode`](Self::encode), appended to `out`.
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let len = ENTRY_HEAD + self.keyword.len();
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(u8::from(self.add));
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&(self.keyword.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.keyword);
        out.resize(start + len.next_multiple_of(ENTRY_PAD), 0);
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = || Error::Protocol("SDa entry of a bad length".into());
        if bytes.len() < ENTRY_HEAD
            || !bytes.len().is_multiple_of(ENTRY_PAD)
            || bytes.len() > (ENTRY_HEAD + MAX_KEYWORD).next_multiple_of(ENTRY_PAD)
        {
            return Err(bad());
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[..8]);
        let add = match bytes[8] {
            0 => false,
            1 => true,
            _ => return Err(Error::Protocol("SDa entry with a bad operation".into())),
        };
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[9..17]);
        let mut len = [0u8; 4];
        len.copy_from_slice(&bytes[17..ENTRY_HEAD]);
        let end = ENTRY_HEAD + u32::from_le_bytes(len) as usize;
        let (keyword, padding) = (bytes.get(ENTRY_HEAD..end).ok_or_else(bad)?, &bytes[end..]);
        if padding.len() >= ENTRY_PAD || padding.iter().any(|&b| b != 0) {
            return Err(bad());
        }
        Ok(Update {
            keyword: keyword.to_vec(),
            id: DocId::from_le_bytes(id),
            add,
            seq: u64::from_le_bytes(seq),
        })
    }
}

/// The keys of one level version.
pub(super) struct LevelKeys {
    pub(super) aead: Aes256GcmSiv,
    pub(super) labels: HmacPrf,
}

impl LevelKeys {
    /// The keys derived from a level version's 32-byte PRF output (SDa: a
    /// level and its version; SDd: a buffer).
    pub(super) fn derive(k: [u8; 32]) -> Self {
        let key: Key<32> = Key::from_bytes(k);
        LevelKeys {
            aead: Aes256GcmSiv::new(&key.derive("aead")),
            labels: HmacPrf::new(&key.derive("labels")),
        }
    }

    /// The PRF of `keyword`'s labels ([`label`]) in this level version.
    pub(super) fn label_prf(&self, keyword: &[u8]) -> Aes128Prf {
        Aes128Prf::new(&Key::from_bytes(self.label_key(keyword)))
    }

    /// The labels of `(keyword, c)` pairs: [`label`] under each keyword's
    /// [`label_prf`](Self::label_prf), its key derived once per run of
    /// equal keywords and the AES key schedules expanded side by side
    /// (`Aes128Prf::eval_each`); the same bytes and PRF calls.
    pub(super) fn labels<'a>(
        &self,
        entries: impl Iterator<Item = (&'a [u8], u64)>,
    ) -> Result<Vec<[u8; LABEL_LEN]>> {
        let (mut keys, mut blocks) = (Vec::new(), Vec::new());
        let mut last: Option<(&[u8], Key<16>)> = None;
        for (keyword, c) in entries {
            let key = match &last {
                Some((w, key)) if *w == keyword => key,
                _ => {
                    let key = Key::from_bytes(self.label_key(keyword));
                    &last.insert((keyword, key)).1
                }
            };
            keys.push(key.clone_secret());
            blocks.push(common::block(Tag::Label, c, 0));
        }
        Aes128Prf::eval_each(&keys, &mut blocks)?;
        Ok(blocks)
    }

    pub(super) fn label_key(&self, keyword: &[u8]) -> [u8; 16] {
        let full = self.labels.eval_bytes(keyword);
        let mut k = [0u8; 16];
        k.copy_from_slice(&full[..16]);
        k
    }
}

/// The sequenced updates of (`doc`, `keywords`), numbered after `seq`
/// (advanced): the update path shared by SDa and SDd (`doc` is checked
/// by [`crate::api::KeywordClient::update`]).
pub(super) fn sequenced(
    scheme: &str,
    seq: &mut u64,
    (op, doc, keywords): crate::api::Update<'_>,
) -> Result<Vec<Update>> {
    let mut out = Vec::with_capacity(keywords.len());
    for w in keywords {
        if w.len() > MAX_KEYWORD {
            return Err(Error::InvalidArgument(format!("{scheme} keyword too long")));
        }
        *seq += 1;
        out.push(Update {
            keyword: w.clone(),
            id: doc,
            add: op == UpdateOp::Add,
            seq: *seq,
        });
    }
    Ok(out)
}

/// Every pair of `db` as an addition, numbered after `seq` (advanced), in
/// random order: cut in keyword order into levels, the level a search hits
/// would tell the keyword's alphabetical place.
pub(super) fn shuffled_additions(
    rng: &mut dyn CryptoRngCore,
    seq: &mut u64,
    db: &Multimap,
) -> Vec<Update> {
    let mut all = Vec::new();
    for (w, ids) in db {
        for id in common::normalise(ids.clone()) {
            *seq += 1;
            all.push(Update {
                keyword: w.clone(),
                id,
                add: true,
                seq: *seq,
            });
        }
    }
    common::shuffle(rng, &mut all);
    all
}

/// `all` cut by the binary decomposition of its length, largest first:
/// `(level, its 2^level updates)` per set bit.
pub(super) fn by_set_bits(all: &[Update]) -> Vec<(usize, &[Update])> {
    let mut out = Vec::new();
    let mut rest = all;
    for level in (0..MAX_LEVELS).rev() {
        let size = 1usize.checked_shl(level as u32).unwrap_or(usize::MAX);
        if rest.len() >= size {
            let (now, later) = rest.split_at(size);
            rest = later;
            out.push((level, now));
        }
    }
    out
}

/// The live identifiers of `keyword` among opened updates: for each
/// identifier, the update with the highest sequence number decides.
pub(super) fn live_ids(
    scheme: &str,
    keyword: &[u8],
    updates: impl IntoIterator<Item = Result<Update>>,
) -> Result<Vec<DocId>> {
    let mut latest: BTreeMap<DocId, (u64, bool)> = BTreeMap::new();
    for u in updates {
        let u = u?;
        if u.keyword != keyword {
            return Err(Error::Protocol(format!(
                "{scheme} entry of another keyword"
            )));
        }
        let e = latest.entry(u.id).or_insert((0, false));
        if u.seq >= e.0 {
            *e = (u.seq, u.add);
        }
    }
    Ok(latest
        .into_iter()
        .filter(|(_, (_, add))| *add)
        .map(|(id, _)| id)
        .collect())
}

/// The label of the `c`-th entry under a label key.
pub(super) fn label(prf: &Aes128Prf, c: u64) -> [u8; LABEL_LEN] {
    prf.eval_block(&common::block(Tag::Label, c, 0))
}

/// A search over the client's live containers (SDa's full levels, SDd's
/// live buffers): the label key of `keyword` in each (`token`), one
/// request (`call`, which answers the sealed entries found per container,
/// in order), each entry opened (`open`) and the live identifiers kept.
pub(super) fn search_containers<I: Copy>(
    scheme: &str,
    keyword: &[u8],
    containers: &[I],
    token: impl Fn(I) -> [u8; 16],
    call: impl FnOnce(Vec<(I, [u8; 16])>) -> Result<Vec<Vec<Vec<u8>>>>,
    open: impl Fn(I, &[u8]) -> Result<Update>,
) -> Result<Vec<DocId>> {
    if containers.is_empty() {
        return Ok(Vec::new());
    }
    let tokens = containers.iter().map(|&c| (c, token(c))).collect();
    let found = call(tokens)?;
    if found.len() != containers.len() {
        return Err(Error::Protocol(format!(
            "{scheme} search answered {} containers for {}",
            found.len(),
            containers.len()
        )));
    }
    let opened = containers
        .iter()
        .zip(&found)
        .flat_map(|(&c, items)| items.iter().map(move |sealed| (c, sealed)))
        .map(|(c, sealed)| open(c, sealed));
    live_ids(scheme, keyword, opened)
}

/// The server's side of a search: for each container and label key, the
/// sealed entries under the labels `0, 1, …` up to the first missing one
/// (`key`: the store key of a container's label).
pub(super) fn found_by_label<I: Copy>(
    store: &dyn sesame_core::Store,
    tokens: Vec<(I, [u8; 16])>,
    key: impl Fn(I, &[u8; LABEL_LEN]) -> Vec<u8>,
) -> Result<Vec<Vec<Vec<u8>>>> {
    let mut out = Vec::with_capacity(tokens.len());
    for (container, k1) in tokens {
        let prf = Aes128Prf::new(&sesame_crypto::key::Key::from_bytes(k1));
        let mut items = Vec::new();
        for c in 0.. {
            match store.get(&key(container, &label(&prf, c)))? {
                Some(v) => items.push(v),
                None => break,
            }
        }
        out.push(items);
    }
    Ok(out)
}
