//! KPR12's tokens and its Search, Add and Del, run over a [`Memory`]: by
//! the server over its store, by the client over the server's transcript.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result};

use super::{
    address, corrupt, dict_find, dual_cell, dual_pad, free_cell, head_value, index, meta_cell,
    node_cell, node_pad, pair_cell, parse_dual, parse_node, parse_pair, read_meta, ts_cell, u64_at,
    xor_into, xor_u64, Memory, AD, AS, CELL_FREE, CELL_PAIR, CELL_TS, DUAL_LEN, INDEX_MASK, META,
    NODE_LEN, NONCE_LEN, PAIRS, TS,
};
use crate::api::DocId;

// -------------------------------------------------------- tokens

crate::common::redacted_debug!(SearchToken);

/// The search token `τ_s = (F(K1, w), G(K2, w), P(K3, w))`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchToken {
    /// `F(K1, w)`: the search-table label.
    pub label: [u8; 32],
    /// `G(K2, w)`: the pad of the search-table value.
    pub pad: [u8; 16],
    /// `P(K3, w)`: the key of the keyword's nodes.
    pub key: [u8; 32],
}

crate::common::redacted_debug!(AddItem);

/// One keyword of an add token (`λ_i` of the paper).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddItem {
    /// `F(K1, w)`.
    pub label: [u8; 32],
    /// `G(K2, w)`.
    pub pad: [u8; 16],
    /// The pair tag `F(K1, (f, w))` of the pair dictionary.
    pub pair: [u8; 32],
    /// `⟨f, 0⟩ ⊕ H(K_w, r)`.
    pub node: [u8; NODE_LEN],
    /// `r`.
    pub node_r: [u8; NONCE_LEN],
    /// `⟨0, 0, 0, F(K1, w)⟩ ⊕ H(K_f, r')` ([`DUAL_LEN`] bytes).
    pub dual: Vec<u8>,
    /// `r'`.
    pub dual_r: [u8; NONCE_LEN],
}

crate::common::redacted_debug!(AddToken);

/// The add token `τ_a` of a document: one item per keyword, in label
/// order.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddToken {
    /// The keywords.
    pub items: Vec<AddItem>,
}

crate::common::redacted_debug!(DelToken);

/// The delete token `τ_d` of (document, keywords) pairs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelToken {
    /// `K_f = P(K3, f)`: the key of the document's dual nodes.
    pub key: [u8; 32],
    /// The pair tags, in order.
    pub pairs: Vec<[u8; 32]>,
}

// ------------------------------------------------------ algorithms

/// KPR12 Search over `m`: walks the keyword's list from the search table.
pub fn search_in(m: &mut dyn Memory, t: &SearchToken) -> Result<Vec<DocId>> {
    let (_, slot) = dict_find(m, TS, &t.label, CELL_TS)?;
    let Some(c) = slot else {
        return Ok(Vec::new());
    };
    if c.len() != 49 {
        return Err(corrupt("search-table entry"));
    }
    let mut v = [0u8; 16];
    v.copy_from_slice(&c[33..]);
    xor_into(&mut v, &t.pad);
    let mut at = index(u64_at(&v, 0)?)?;
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    while at != 0 {
        if !seen.insert(at) {
            return Err(corrupt("cycle in a list"));
        }
        let (mut plain, r) = parse_node(&m.read(address(AS, at))?)?;
        xor_into(&mut plain, &node_pad(&t.key, &r));
        ids.push(u64_at(&plain, 0)?);
        at = index(u64_at(&plain, 8)?)?;
    }
    Ok(ids)
}

/// Takes a node from the free list (or a never-used one).
pub(super) fn alloc(m: &mut dyn Memory) -> Result<u64> {
    let (free, fresh) = read_meta(m)?;
    if free != 0 {
        let c = m.read(address(AS, free))?;
        if c.len() != 9 || c[0] != CELL_FREE {
            return Err(corrupt("free node"));
        }
        let next = index(u64_at(&c, 1)?)?;
        m.write(address(META, 0), meta_cell(next, fresh))?;
        Ok(free)
    } else {
        if fresh >= INDEX_MASK {
            return Err(Error::InvalidArgument("KPR12 search array is full".into()));
        }
        m.write(address(META, 0), meta_cell(0, fresh + 1))?;
        Ok(fresh)
    }
}

/// KPR12 Add over `m`: prepends a node per keyword whose pair is not yet
/// there.
pub fn add_in(m: &mut dyn Memory, t: &AddToken) -> Result<()> {
    for item in &t.items {
        if item.dual.len() != DUAL_LEN {
            return Err(Error::Protocol("KPR12 add token of a wrong size".into()));
        }
        let (pair_at, pair) = dict_find(m, PAIRS, &item.pair, CELL_PAIR)?;
        if let Some(c) = &pair {
            if parse_pair(c)?.is_some() {
                continue;
            }
        }
        let phi = alloc(m)?;
        let (ts_at, ts) = dict_find(m, TS, &item.label, CELL_TS)?;
        let old = match ts {
            Some(c) => {
                if c.len() != 49 {
                    return Err(corrupt("search-table entry"));
                }
                let mut v = [0u8; 16];
                v.copy_from_slice(&c[33..]);
                xor_into(&mut v, &item.pad);
                index(u64_at(&v, 0)?)?
            }
            None => 0,
        };
        // The new node points to the old head: its pointer field is
        // 0 ⊕ H(K_w, r), so XOR-ing the address sets it.
        let mut node = item.node;
        xor_u64(&mut node, 8, old);
        m.write(address(AS, phi), node_cell(&node, &item.node_r))?;
        let mut dual = item.dual.clone();
        xor_u64(&mut dual, 0, phi);
        xor_u64(&mut dual, 16, old);
        m.write(address(AD, phi), dual_cell(&dual, &item.dual_r))?;
        if old != 0 {
            let (mut d, r) = parse_dual(&m.read(address(AD, old))?)?;
            xor_u64(&mut d, 8, phi);
            m.write(address(AD, old), dual_cell(&d, &r))?;
        }
        let mut v = head_value(phi);
        xor_into(&mut v, &item.pad);
        m.write(ts_at, ts_cell(&item.label, &v))?;
        m.write(pair_at, pair_cell(&item.pair, Some(phi)))?;
    }
    Ok(())
}

/// KPR12 Del over `m`: unlinks the node of each live pair and frees it.
pub fn del_in(m: &mut dyn Memory, t: &DelToken) -> Result<()> {
    for tag in &t.pairs {
        let (pair_at, pair) = dict_find(m, PAIRS, tag, CELL_PAIR)?;
        let Some(phi) = pair.as_deref().map(parse_pair).transpose()?.flatten() else {
            continue;
        };
        let (mut d, r) = parse_dual(&m.read(address(AD, phi))?)?;
        xor_into(&mut d, &dual_pad(&t.key, &r));
        let (me, prev, next) = (
            index(u64_at(&d, 0)?)?,
            index(u64_at(&d, 8)?)?,
            index(u64_at(&d, 16)?)?,
        );
        if me != phi {
            return Err(corrupt("dual node of another node"));
        }
        let mut label = [0u8; 32];
        label.copy_from_slice(&d[24..]);
        if prev != 0 {
            let (mut ct, nr) = parse_node(&m.read(address(AS, prev))?)?;
            xor_u64(&mut ct, 8, phi ^ next);
            m.write(address(AS, prev), node_cell(&ct, &nr))?;
            let (mut pd, pr) = parse_dual(&m.read(address(AD, prev))?)?;
            xor_u64(&mut pd, 16, phi ^ next);
            m.write(address(AD, prev), dual_cell(&pd, &pr))?;
        } else {
            let (ts_at, ts) = dict_find(m, TS, &label, CELL_TS)?;
            let c = ts.ok_or_else(|| corrupt("list without a search-table entry"))?;
            if c.len() != 49 {
                return Err(corrupt("search-table entry"));
            }
            let mut v = [0u8; 16];
            v.copy_from_slice(&c[33..]);
            let mut delta = head_value(phi);
            xor_into(&mut delta, &head_value(next));
            xor_into(&mut v, &delta);
            m.write(ts_at, ts_cell(&label, &v))?;
        }
        if next != 0 {
            let (mut nd, nr) = parse_dual(&m.read(address(AD, next))?)?;
            xor_u64(&mut nd, 8, phi ^ prev);
            m.write(address(AD, next), dual_cell(&nd, &nr))?;
        }
        let (free, fresh) = read_meta(m)?;
        m.write(address(AS, phi), free_cell(free))?;
        m.write(address(AD, phi), Vec::new())?;
        m.write(address(META, 0), meta_cell(phi, fresh))?;
        m.write(pair_at, pair_cell(tag, None))?;
    }
    Ok(())
}
