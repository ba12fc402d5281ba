//! The index's cells (search and deletion arrays, search table, pair
//! dictionary, free list) at their addresses, and their encryption pads.

use sesame_core::{Error, Result};
use sesame_crypto::hash::ro;

use super::{
    Memory, CELL_DUAL, CELL_FREE, CELL_META, CELL_NODE, CELL_PAIR, CELL_TS, DUAL_LEN, INDEX_BITS,
    INDEX_MASK, MAX_PROBES, META, NODE_LEN, NONCE_LEN,
};

/// The address of index `index` in `region`.
pub(super) fn address(region: u64, index: u64) -> u64 {
    (region << INDEX_BITS) | (index & INDEX_MASK)
}

// ---------------------------------------------------------------- cells

pub(super) fn corrupt(what: &str) -> Error {
    Error::StoreCorrupt(format!("KPR12 {what}"))
}

pub(super) fn u64_at(bytes: &[u8], at: usize) -> Result<u64> {
    let b: [u8; 8] = bytes
        .get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt("cell too short"))?;
    Ok(u64::from_le_bytes(b))
}

pub(super) fn xor_u64(bytes: &mut [u8], at: usize, v: u64) {
    for (b, x) in bytes[at..at + 8].iter_mut().zip(v.to_le_bytes()) {
        *b ^= x;
    }
}

/// An index within a region read from a cell: must fit the region.
pub(super) fn index(v: u64) -> Result<u64> {
    if v > INDEX_MASK {
        return Err(corrupt("pointer out of range"));
    }
    Ok(v)
}

pub(super) fn meta_cell(free: u64, fresh: u64) -> Vec<u8> {
    let mut c = vec![CELL_META];
    c.extend_from_slice(&free.to_le_bytes());
    c.extend_from_slice(&fresh.to_le_bytes());
    c
}

/// `(head of the free list, next never-used index)`.
pub(super) fn read_meta(m: &mut dyn Memory) -> Result<(u64, u64)> {
    let c = m.read(address(META, 0))?;
    if c.is_empty() {
        return Ok((0, 1));
    }
    if c.len() != 17 || c[0] != CELL_META {
        return Err(corrupt("free-list head"));
    }
    Ok((index(u64_at(&c, 1)?)?, index(u64_at(&c, 9)?)?))
}

pub(super) fn node_cell(ct: &[u8; NODE_LEN], r: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut c = Vec::with_capacity(1 + NODE_LEN + NONCE_LEN);
    c.push(CELL_NODE);
    c.extend_from_slice(ct);
    c.extend_from_slice(r);
    c
}

pub(super) fn parse_node(c: &[u8]) -> Result<([u8; NODE_LEN], [u8; NONCE_LEN])> {
    if c.len() != 1 + NODE_LEN + NONCE_LEN || c[0] != CELL_NODE {
        return Err(corrupt("search-array node"));
    }
    let mut ct = [0u8; NODE_LEN];
    let mut r = [0u8; NONCE_LEN];
    ct.copy_from_slice(&c[1..=NODE_LEN]);
    r.copy_from_slice(&c[1 + NODE_LEN..]);
    Ok((ct, r))
}

pub(super) fn free_cell(next: u64) -> Vec<u8> {
    let mut c = vec![CELL_FREE];
    c.extend_from_slice(&next.to_le_bytes());
    c
}

pub(super) fn dual_cell(ct: &[u8], r: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut c = Vec::with_capacity(1 + DUAL_LEN + NONCE_LEN);
    c.push(CELL_DUAL);
    c.extend_from_slice(ct);
    c.extend_from_slice(r);
    c
}

pub(super) fn parse_dual(c: &[u8]) -> Result<(Vec<u8>, [u8; NONCE_LEN])> {
    if c.len() != 1 + DUAL_LEN + NONCE_LEN || c[0] != CELL_DUAL {
        return Err(corrupt("deletion-array node"));
    }
    let mut r = [0u8; NONCE_LEN];
    r.copy_from_slice(&c[1 + DUAL_LEN..]);
    Ok((c[1..=DUAL_LEN].to_vec(), r))
}

pub(super) fn ts_cell(label: &[u8; 32], value: &[u8; 16]) -> Vec<u8> {
    let mut c = vec![CELL_TS];
    c.extend_from_slice(label);
    c.extend_from_slice(value);
    c
}

pub(super) fn pair_cell(tag: &[u8; 32], node: Option<u64>) -> Vec<u8> {
    let mut c = vec![CELL_PAIR];
    c.extend_from_slice(tag);
    match node {
        Some(i) => {
            c.push(1);
            c.extend_from_slice(&i.to_le_bytes());
        }
        None => {
            c.push(0);
            c.extend_from_slice(&0u64.to_le_bytes());
        }
    }
    c
}

/// The live node of a pair cell, `None` for a deleted pair.
pub(super) fn parse_pair(c: &[u8]) -> Result<Option<u64>> {
    if c.len() != 42 || c[0] != CELL_PAIR {
        return Err(corrupt("pair cell"));
    }
    match c[33] {
        0 => Ok(None),
        1 => Ok(Some(index(u64_at(c, 34)?)?)),
        _ => Err(corrupt("pair cell state")),
    }
}

/// Finds `key` in the open-addressing table of `region`: the slot's
/// address and its cell when the key is there, or the first empty slot.
pub(super) fn dict_find(
    m: &mut dyn Memory,
    region: u64,
    key: &[u8; 32],
    tag: u8,
) -> Result<(u64, Option<Vec<u8>>)> {
    let mut start = [0u8; 8];
    start.copy_from_slice(&key[..8]);
    let start = u64::from_le_bytes(start);
    for probe in 0..MAX_PROBES {
        let a = address(region, start.wrapping_add(probe));
        let c = m.read(a)?;
        if c.is_empty() {
            return Ok((a, None));
        }
        if c.len() < 33 || c[0] != tag {
            return Err(corrupt("dictionary slot"));
        }
        if c[1..33] == key[..] {
            return Ok((a, Some(c)));
        }
    }
    Err(corrupt("dictionary probe sequence too long"))
}

// ------------------------------------------------------------ crypto

/// `H(K_w, r)`: the pad of a node; one Hash call.
pub(super) fn node_pad(key: &[u8; 32], r: &[u8; NONCE_LEN]) -> [u8; NODE_LEN] {
    let h = ro("sesame-sse/kpr12/node", &[key, r]);
    let mut out = [0u8; NODE_LEN];
    out.copy_from_slice(&h[..NODE_LEN]);
    out
}

/// `H(K_f, r')`: the pad of a dual node; two Hash calls.
pub(super) fn dual_pad(key: &[u8; 32], r: &[u8; NONCE_LEN]) -> [u8; DUAL_LEN] {
    let a = ro("sesame-sse/kpr12/dual", &[key, r, &[0]]);
    let b = ro("sesame-sse/kpr12/dual", &[key, r, &[1]]);
    let mut out = [0u8; DUAL_LEN];
    out[..32].copy_from_slice(&a);
    out[32..].copy_from_slice(&b[..DUAL_LEN - 32]);
    out
}

pub(super) fn xor_into(dst: &mut [u8], pad: &[u8]) {
    for (d, p) in dst.iter_mut().zip(pad) {
        *d ^= p;
    }
}

/// The search table value `⟨s, d⟩` of head node `i` (`d = s`: the dual of
/// `As[i]` is `Ad[i]`).
pub(super) fn head_value(i: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..].copy_from_slice(&i.to_le_bytes());
    v
}
