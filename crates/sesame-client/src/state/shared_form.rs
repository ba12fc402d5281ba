//! The state a shared record carries (`SSMSHR03`, [`super::StateCipher::seal_shared_with`]):
//! the fields of [`IndexState`] in its order, the catalog as the compact
//! blocks of a catalog run (module `forms`, each compressed with zstd
//! where that is shorter, as `runs` writes them) where the records before
//! (`SSMSHR02` and `SSMSHR01`) carry it as a map of postcard entries.
//!
//! The shared record is the server's copy of the state, which another
//! device of the profile adopts; it is rewritten at every commit, its
//! unchanged segments taken from the commit before (`CommitMemo`). The
//! catalog is most of it: the flights' shared state was 27.7 MB on the
//! server, about 82 bytes a record, and is 9.6 MB with the catalog in
//! blocks, 28.4 bytes a record (`docs/performance.md`, "A compact
//! catalog and chunks that state their keys' prefix once").
//! Blocks hold [`BLOCK`] entries in identifier order, so an import, which
//! adds identifiers at the end, changes the last blocks only and the
//! segments before them are taken as they were.
//!
//! A block that does not open as entries in increasing order, or
//! entries that do not follow the block before, make the record
//! malformed (the caller's `SharedStateCorrupt`); the record is sealed
//! (AES-256-GCM-SIV under the state key), so only a client of the profile
//! could have written such bytes. What changes for a device: digests
//! arrive as their first 16 bytes (module `forms`, "The digest kept");
//! a device of a build before this format cannot open the record (it
//! reports the shared state as damaged) until it is updated.

use serde::{Deserialize, Serialize};
use sesame_core::wire;
use zeroize::Zeroizing;

use super::forms;
use super::runs::{pack_block, unpack_block, Entry, BLOCK};
use super::{Catalog, IndexState, PendingRef};
use crate::error::Result;
use sesame_core::Params;

/// [`IndexState`]'s fields as a shared record of `SSMSHR03` writes them.
#[derive(Serialize)]
struct SharedStateRef<'a> {
    scheme: &'a str,
    params: &'a Params,
    generation: u64,
    next_doc: u64,
    #[serde(with = "sesame_core::wire::bytes")]
    client: &'a [u8],
    catalog: Vec<Blob>,
    pending: &'a [PendingRef],
    reserved: &'a [u64],
    garbage: &'a [u64],
}

/// [`SharedStateRef`] as read.
#[derive(Deserialize)]
struct SharedStateOwned {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    #[serde(with = "sesame_core::wire::bytes")]
    client: Vec<u8>,
    catalog: Vec<Blob>,
    pending: Vec<PendingRef>,
    reserved: Vec<u64>,
    garbage: Vec<u64>,
}

/// A block's bytes (as a byte string: one copy, not one element at a
/// time).
#[derive(Serialize, Deserialize)]
struct Blob(#[serde(with = "sesame_core::wire::bytes")] Vec<u8>);

/// The bytes of `state` a shared record of `SSMSHR03` carries.
pub(super) fn encode(state: &IndexState) -> Result<Zeroizing<Vec<u8>>> {
    let mut blocks = Vec::new();
    let mut block: Vec<Entry> = Vec::with_capacity(BLOCK);
    let mut entries = state.catalog.iter();
    loop {
        let next = entries.next().transpose()?;
        let done = next.is_none();
        if let Some((id, doc)) = next {
            block.push((id, Some(doc)));
        }
        if block.len() == BLOCK || (done && !block.is_empty()) {
            let encoded = Zeroizing::new(forms::encode(&block)?);
            blocks.push(Blob(std::mem::take(&mut *pack_block(encoded))));
            block.clear();
        }
        if done {
            break;
        }
    }
    let shared = SharedStateRef {
        scheme: &state.scheme,
        params: &state.params,
        generation: state.generation,
        next_doc: state.next_doc,
        client: &state.client,
        catalog: blocks,
        pending: &state.pending,
        reserved: &state.reserved,
        garbage: &state.garbage,
    };
    let out = Zeroizing::new(wire::encode(&shared)?);
    // The blocks' copies of the names and digests go as the record's
    // plaintext does.
    for mut b in shared.catalog {
        zeroize::Zeroize::zeroize(&mut b.0);
    }
    Ok(out)
}

/// The state a shared record of `SSMSHR03` carries, from its bytes;
/// `None` where they are not exactly such a state.
pub(super) fn decode(bytes: &[u8]) -> Option<IndexState> {
    let shared: SharedStateOwned = wire::decode(bytes).ok()?;
    let mut entries = std::collections::BTreeMap::new();
    let mut last: Option<u64> = None;
    for Blob(block) in shared.catalog {
        let plain = unpack_block(Zeroizing::new(block))?;
        for (id, doc) in forms::decode::<Entry>(&plain)? {
            if last.is_some_and(|l| l >= id) {
                return None;
            }
            last = Some(id);
            entries.insert(id, doc?);
        }
    }
    let mut state = IndexState::new(&shared.scheme, &shared.params, shared.client);
    state.generation = shared.generation;
    state.next_doc = shared.next_doc;
    state.catalog = Catalog::from(entries);
    state.pending = shared.pending;
    state.reserved = shared.reserved;
    state.garbage = shared.garbage;
    Some(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::DocumentInfo;

    /// The bytes of a shared state whose catalog is `blocks` of entries.
    fn with_blocks(blocks: &[Vec<Entry>]) -> Vec<u8> {
        let state = IndexState::new("fast", &Params::new(), vec![7]);
        let shared = SharedStateRef {
            scheme: &state.scheme,
            params: &state.params,
            generation: 0,
            next_doc: 1,
            client: &state.client,
            catalog: blocks
                .iter()
                .map(|b| Blob(forms::encode(b).unwrap_or_else(|e| panic!("{e}"))))
                .collect(),
            pending: &[],
            reserved: &[],
            garbage: &[],
        };
        wire::encode(&shared).unwrap_or_else(|e| panic!("{e}"))
    }

    fn entry(id: u64) -> Entry {
        let doc = DocumentInfo {
            id,
            path: format!("f#{id}"),
            size: 1,
            digest: None,
        };
        (id, Some(doc))
    }

    /// Blocks in order decode; blocks out of order, an identifier twice
    /// across blocks, a removal (which a state's catalog never holds),
    /// a damaged block and bytes that are not a state are refused.
    #[test]
    fn a_catalog_of_blocks_out_of_order_or_with_removals_is_refused() {
        let good = with_blocks(&[vec![entry(1), entry(2)], vec![entry(5)]]);
        let state = decode(&good).unwrap_or_else(|| panic!("refused"));
        assert_eq!(state.catalog.len(), 3);
        assert!(decode(&with_blocks(&[vec![entry(5)], vec![entry(1)]])).is_none());
        assert!(decode(&with_blocks(&[vec![entry(1), entry(2)], vec![entry(2)]])).is_none());
        assert!(decode(&with_blocks(&[vec![entry(1), (2, None)]])).is_none());
        let mut damaged = good.clone();
        let at = damaged.len() - 8;
        damaged[at] ^= 0xff;
        let _ = decode(&damaged);
        assert!(decode(&good[..good.len() - 1]).is_none());
        assert!(decode(b"not a state").is_none());
    }
}
