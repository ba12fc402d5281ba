//! Frequency-hiding order-preserving encryption (Kerschbaum, CCS 2015).
//!
//! Stateful: the client keeps a binary search tree of (plaintext,
//! ciphertext) nodes. Encrypting `x` walks down from the root, going right
//! when `x` is larger than the node's plaintext, left when smaller, and
//! left or right at random when equal (so repeated plaintexts get distinct,
//! randomly ordered ciphertexts: the frequency is hidden); the new node's
//! ciphertext is the midpoint of the open interval its path leaves. When
//! that interval has no integer inside, the tree is rebuilt perfectly
//! balanced and every node re-encoded ([`FhOpe::take_reencoding`] lists the
//! changes, which the caller must apply to stored ciphertexts).
//!
//! Epochs: a rebalance moves ciphertexts onto midpoints that older
//! ciphertexts of other plaintexts held, so an old ciphertext would decrypt
//! to a wrong plaintext. Through the generic [`OreScheme`] interface a
//! ciphertext ([`FhOpeCiphertext`]) therefore carries the epoch (the number
//! of rebalances) of the tree that issued it: `decrypt` and `compare`
//! refuse a ciphertext of another epoch, and [`Reencoding::apply`] brings
//! one forward. The epoch is a label, not authenticated (FH-OPE has no
//! key): it catches a caller that kept a ciphertext across a rebalance,
//! not a party that stores ciphertexts and relabels a stale one with the
//! current epoch, which is refused only when its number is no current
//! ciphertext (see `docs/schemes/fh_ope.md`). The `u64` methods ([`FhOpe::encrypt_u64`],
//! [`FhOpe::decrypt_u64`]) carry no epoch; their caller (the B+ tree
//! protocol) applies every re-encoding to everything it stores.
//!
//! Compaction: since every ciphertext is the midpoint that the node's
//! position defines, ciphertexts are not stored in the persisted state,
//! only the tree's shape (2 bits per node) and the plaintexts in sorted
//! order, delta-coded (repeated plaintexts cost one byte). See
//! `docs/schemes/fh_ope.md`.

use core::cmp::Ordering;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::Key;
use zeroize::{Zeroize, Zeroizing};

use crate::api::{check_bits, check_plaintext, OreScheme};
use crate::saved;

/// Descriptor of FH-OPE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "fh-ope",
    title: "Frequency-hiding order-preserving encryption (stateful)",
    citation: "F. Kerschbaum. Frequency-Hiding Order-Preserving Encryption. CCS 2015",
    kind: SchemeKind::Ope,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Total order of the ciphertexts (ties among equal plaintexts broken at random, so \
              not equality or frequency: IND-FAOCPA) and the insertion order, which shapes the \
              tree and hence the ciphertexts. A rebalance re-encodes every ciphertext.",
    doc: "docs/schemes/fh_ope.md",
};

const NIL: u32 = u32::MAX;

/// Plaintext and ciphertext widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FhOpeParams {
    /// Plaintexts are `0..2^bits`, `1 <= bits <= 64`.
    pub bits: u32,
    /// Ciphertexts are `1..2^cipher_bits`, `2 <= cipher_bits <= 64`.
    pub cipher_bits: u32,
}

impl Default for FhOpeParams {
    /// Seed 004's setting: 32-bit plaintexts, 64-bit ciphertexts.
    fn default() -> Self {
        FhOpeParams {
            bits: 32,
            cipher_bits: 64,
        }
    }
}

/// An FH-OPE ciphertext: a number, ordered as its plaintext (ties random)
/// among the ciphertexts of the same epoch, and that epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FhOpeCiphertext {
    /// The order-preserving number.
    pub value: u64,
    /// The number of rebalances of the tree when it was issued.
    pub epoch: u64,
}

/// The public comparison of FH-OPE ciphertexts of one epoch: as numbers
/// (ties, which hide equal plaintexts, compare by their random order).
/// Ciphertexts of different epochs are not comparable; a server that keeps
/// FH-OPE ciphertexts applies every [`Reencoding`] instead (the `bplus-fh-ope`
/// protocol). [`OreScheme::compare`] of [`FhOpe`] is the client's exact
/// comparison, which uses its state.
#[derive(Clone, Copy, Debug, Default)]
pub struct FhOpeComparator;

impl crate::api::Comparator for FhOpeComparator {
    type Ciphertext = FhOpeCiphertext;
    type Left = FhOpeCiphertext;
    type Right = FhOpeCiphertext;

    fn left(c: &FhOpeCiphertext) -> &FhOpeCiphertext {
        c
    }
    fn right(c: &FhOpeCiphertext) -> FhOpeCiphertext {
        *c
    }
    fn compare(&self, left: &FhOpeCiphertext, right: &FhOpeCiphertext) -> Result<Ordering> {
        if left.epoch != right.epoch {
            return Err(Error::InvalidArgument(format!(
                "FH-OPE ciphertexts of epochs {} and {} are not comparable",
                left.epoch, right.epoch
            )));
        }
        Ok(left.value.cmp(&right.value))
    }
}

/// What a rebalance changed: the ciphertexts of epoch `epoch - 1` that
/// moved, as `(old, new)` pairs sorted by `old`; the others keep their
/// number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reencoding {
    /// The epoch the rebalance led to.
    pub epoch: u64,
    /// `(old, new)` numbers, sorted by `old`.
    pub changes: Vec<(u64, u64)>,
}

impl Reencoding {
    /// `c` in the new epoch; refuses a ciphertext of any epoch but the
    /// one before (a ciphertext two rebalances old needs both re-encodings,
    /// in order).
    pub fn apply(&self, c: &FhOpeCiphertext) -> Result<FhOpeCiphertext> {
        if c.epoch.checked_add(1) != Some(self.epoch) {
            return Err(Error::InvalidArgument(format!(
                "FH-OPE ciphertext of epoch {} cannot take the re-encoding into epoch {}",
                c.epoch, self.epoch
            )));
        }
        let value = match self.changes.binary_search_by_key(&c.value, |&(old, _)| old) {
            Ok(i) => self.changes.get(i).map_or(c.value, |&(_, new)| new),
            Err(_) => c.value,
        };
        Ok(FhOpeCiphertext {
            value,
            epoch: self.epoch,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    plain: u64,
    cipher: u64,
    left: u32,
    right: u32,
}

/// FH-OPE: parameters and the client state (the tree).
#[derive(Clone)]
pub struct FhOpe {
    params: FhOpeParams,
    nodes: Vec<Node>,
    root: u32,
    rebalances: u64,
    reencoding: Option<Reencoding>,
}

impl FhOpe {
    /// Overwrites every plaintext and ciphertext of the tree, and the
    /// pending re-encoding, with zeros: the tree is the scheme's secret.
    /// Called on drop. (A buffer the tree outgrew was freed by `Vec`
    /// without wiping.)
    fn wipe(&mut self) {
        for n in &mut self.nodes {
            n.plain.zeroize();
            n.cipher.zeroize();
        }
        if let Some(r) = &mut self.reencoding {
            for (old, new) in &mut r.changes {
                old.zeroize();
                new.zeroize();
            }
        }
    }
}

impl Drop for FhOpe {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl core::fmt::Debug for FhOpe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FhOpe")
            .field("params", &self.params)
            .field("nodes", &self.nodes.len())
            .field("state", &"[redacted]")
            .finish()
    }
}

/// The persisted, compacted state.
#[derive(Serialize, Deserialize)]
struct CompactState {
    nodes: u64,
    rebalances: u64,
    /// Two bits per node in pre-order: has a left child, has a right child.
    shape: Vec<u8>,
    /// Plaintexts in sorted (in-order) order, LEB128 deltas.
    plains: Vec<u8>,
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *bytes
            .get(*pos)
            .ok_or_else(|| Error::Malformed("FH-OPE state truncated".into()))?;
        *pos += 1;
        v |= u64::from(b & 0x7f)
            .checked_shl(shift)
            .ok_or_else(|| Error::Malformed("FH-OPE varint overflow".into()))?;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(Error::Malformed("FH-OPE varint too long".into()))
}

impl FhOpe {
    /// An empty FH-OPE client.
    pub fn new(params: FhOpeParams) -> Result<Self> {
        check_bits(params.bits)?;
        if !(2..=64).contains(&params.cipher_bits) {
            return Err(Error::InvalidArgument(format!(
                "FH-OPE ciphertext width {} is not in 2..=64",
                params.cipher_bits
            )));
        }
        Ok(FhOpe {
            params,
            nodes: Vec::new(),
            root: NIL,
            rebalances: 0,
            reencoding: None,
        })
    }

    /// The parameters.
    pub fn params(&self) -> FhOpeParams {
        self.params
    }

    /// Number of ciphertexts issued (nodes in the tree).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing has been encrypted.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many times the tree was rebalanced.
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// The current epoch: the number of rebalances so far.
    pub fn epoch(&self) -> u64 {
        self.rebalances
    }

    /// The re-encoding of the last rebalance since the previous call, if
    /// one happened: every stored ciphertext must be brought forward. Take
    /// it after every encryption: if a second rebalance happens first, the
    /// first re-encoding is gone, and ciphertexts issued before it can
    /// only be refused (never misread).
    pub fn take_reencoding(&mut self) -> Option<Reencoding> {
        self.reencoding.take()
    }

    fn check_epoch(&self, c: &FhOpeCiphertext) -> Result<u64> {
        if c.epoch != self.rebalances {
            return Err(Error::InvalidArgument(format!(
                "stale FH-OPE ciphertext: issued in epoch {}, the tree is in epoch {} \
                 (apply the re-encoding of each rebalance since)",
                c.epoch, self.rebalances
            )));
        }
        Ok(c.value)
    }

    fn top(&self) -> u128 {
        1u128 << self.params.cipher_bits
    }

    fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    /// Where `x` goes: the parent, the side, and the new ciphertext; `None`
    /// when the interval left has no room.
    fn slot<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, x: u64) -> Option<(u32, bool, u64)> {
        let (mut lo, mut hi) = (0u128, self.top());
        let mut t = self.root;
        let mut parent = (NIL, false);
        while t != NIL {
            let node = self.node(t);
            let right = match x.cmp(&node.plain) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => rng.next_u32() & 1 == 1,
            };
            parent = (t, right);
            if right {
                lo = u128::from(node.cipher);
                t = node.right;
            } else {
                hi = u128::from(node.cipher);
                t = node.left;
            }
        }
        if hi - lo < 2 {
            return None;
        }
        Some((parent.0, parent.1, (lo + (hi - lo) / 2) as u64))
    }

    /// Encrypts `x`: one traversal (and a rebalance when needed).
    pub fn encrypt_u64<R: CryptoRngCore + ?Sized>(&mut self, rng: &mut R, x: u64) -> Result<u64> {
        check_plaintext(x, self.params.bits)?;
        counter::record(Primitive::Traversal, 1);
        for _ in 0..2 {
            if let Some((parent, right, cipher)) = self.slot(rng, x) {
                let index = u32::try_from(self.nodes.len())
                    .ok()
                    .filter(|&i| i != NIL)
                    .ok_or_else(|| Error::Unsupported("FH-OPE tree is full".into()))?;
                self.nodes.push(Node {
                    plain: x,
                    cipher,
                    left: NIL,
                    right: NIL,
                });
                if parent == NIL {
                    self.root = index;
                } else if right {
                    self.nodes[parent as usize].right = index;
                } else {
                    self.nodes[parent as usize].left = index;
                }
                return Ok(cipher);
            }
            self.rebalance()?;
        }
        Err(Error::Unsupported(
            "FH-OPE ciphertext range exhausted even after rebalancing".into(),
        ))
    }

    /// Node indices in order (ascending ciphertexts).
    fn in_order(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut stack = Vec::new();
        let mut t = self.root;
        while t != NIL || !stack.is_empty() {
            while t != NIL {
                stack.push(t);
                t = self.node(t).left;
            }
            if let Some(top) = stack.pop() {
                out.push(top);
                t = self.node(top).right;
            }
        }
        out
    }

    /// Rebuilds the tree perfectly balanced and re-encodes every node.
    pub fn rebalance(&mut self) -> Result<()> {
        let order = self.in_order();
        if order.len() as u128 >= self.top() {
            return Err(Error::Unsupported(format!(
                "FH-OPE: {} ciphertexts do not fit {} bits",
                order.len(),
                self.params.cipher_bits
            )));
        }
        let old: Vec<u64> = self.nodes.iter().map(|n| n.cipher).collect();
        self.root = self.build(&order, 0, self.top());
        let mut changes: Vec<(u64, u64)> = order
            .iter()
            .map(|&i| (old[i as usize], self.node(i).cipher))
            .filter(|(a, b)| a != b)
            .collect();
        changes.sort_unstable();
        self.rebalances += 1;
        self.reencoding = Some(Reencoding {
            epoch: self.rebalances,
            changes,
        });
        Ok(())
    }

    /// Makes the nodes of `order` a balanced subtree in `(lo, hi)`.
    fn build(&mut self, order: &[u32], lo: u128, hi: u128) -> u32 {
        if order.is_empty() {
            return NIL;
        }
        let mid = order.len() / 2;
        let c = lo + (hi - lo) / 2;
        let t = order[mid];
        let left = self.build(&order[..mid], lo, c);
        let right = self.build(&order[mid + 1..], c, hi);
        let node = &mut self.nodes[t as usize];
        node.cipher = c as u64;
        node.left = left;
        node.right = right;
        t
    }

    /// The plaintext of ciphertext `c`: one traversal.
    pub fn decrypt_u64(&self, c: u64) -> Result<u64> {
        counter::record(Primitive::Traversal, 1);
        let mut t = self.root;
        while t != NIL {
            let node = self.node(t);
            match c.cmp(&node.cipher) {
                Ordering::Equal => return Ok(node.plain),
                Ordering::Less => t = node.left,
                Ordering::Greater => t = node.right,
            }
        }
        Err(Error::Crypto)
    }

    /// The smallest and largest ciphertexts of `x` issued so far (two
    /// traversals): a range query for `x` covers exactly these.
    pub fn ciphertext_range(&self, x: u64) -> Option<(u64, u64)> {
        counter::record(Primitive::Traversal, 2);
        let (mut t, mut min) = (self.root, None);
        while t != NIL {
            let node = self.node(t);
            if node.plain >= x {
                if node.plain == x {
                    min = Some(node.cipher);
                }
                t = node.left;
            } else {
                t = node.right;
            }
        }
        let (mut t, mut max) = (self.root, None);
        while t != NIL {
            let node = self.node(t);
            if node.plain <= x {
                if node.plain == x {
                    max = Some(node.cipher);
                }
                t = node.right;
            } else {
                t = node.left;
            }
        }
        min.zip(max)
    }

    fn compact(&self) -> CompactState {
        let mut shape = vec![0u8; (2 * self.nodes.len()).div_ceil(8)];
        let mut k = 0usize;
        let mut stack = vec![self.root];
        while let Some(t) = stack.pop() {
            if t == NIL {
                continue;
            }
            let node = self.node(t);
            let bits = u8::from(node.left != NIL) | (u8::from(node.right != NIL) << 1);
            shape[k / 4] |= bits << (2 * (k % 4));
            k += 1;
            stack.push(node.right);
            stack.push(node.left);
        }
        let mut plains = Vec::with_capacity(self.nodes.len());
        let mut prev = 0u64;
        for i in self.in_order() {
            let p = self.node(i).plain;
            push_varint(&mut plains, p - prev);
            prev = p;
        }
        CompactState {
            nodes: self.nodes.len() as u64,
            rebalances: self.rebalances,
            shape,
            plains,
        }
    }

    fn from_compact(params: FhOpeParams, s: &CompactState) -> Result<Self> {
        let mut me = FhOpe::new(params)?;
        let n = usize::try_from(s.nodes)
            .ok()
            .filter(|&n| n < NIL as usize && s.shape.len() == (2 * n).div_ceil(8))
            .ok_or_else(|| Error::Malformed("FH-OPE state: bad node count".into()))?;
        // Plaintexts, sorted.
        let mut plains = Vec::with_capacity(n);
        let (mut pos, mut prev) = (0usize, 0u64);
        for _ in 0..n {
            prev = prev
                .checked_add(read_varint(&s.plains, &mut pos)?)
                .ok_or_else(|| Error::Malformed("FH-OPE state: plaintext overflow".into()))?;
            check_plaintext(prev, params.bits)
                .map_err(|_| Error::Malformed("FH-OPE state: plaintext too wide".into()))?;
            plains.push(prev);
        }
        if pos != s.plains.len() {
            return Err(Error::Malformed("FH-OPE state: trailing bytes".into()));
        }
        // Shape in pre-order: nodes are created in pre-order, plaintexts
        // and ciphertexts assigned in order from the bounds.
        me.nodes = vec![
            Node {
                plain: 0,
                cipher: 0,
                left: NIL,
                right: NIL
            };
            n
        ];
        let mut next_pre = 0usize;
        let mut next_in = 0usize;
        if n > 0 {
            me.root = me.rebuild(s, &plains, &mut next_pre, &mut next_in, 0, me.top(), 0)?;
        }
        if next_pre != n || next_in != n {
            return Err(Error::Malformed(
                "FH-OPE state: shape and size differ".into(),
            ));
        }
        me.rebalances = s.rebalances;
        Ok(me)
    }

    #[allow(clippy::too_many_arguments)]
    fn rebuild(
        &mut self,
        s: &CompactState,
        plains: &[u64],
        next_pre: &mut usize,
        next_in: &mut usize,
        lo: u128,
        hi: u128,
        depth: u32,
    ) -> Result<u32> {
        let k = *next_pre;
        if k >= plains.len() || hi - lo < 2 || depth > 64 {
            return Err(Error::Malformed("FH-OPE state: impossible shape".into()));
        }
        *next_pre += 1;
        let bits = (s.shape[k / 4] >> (2 * (k % 4))) & 3;
        let c = lo + (hi - lo) / 2;
        let left = if bits & 1 == 1 {
            self.rebuild(s, plains, next_pre, next_in, lo, c, depth + 1)?
        } else {
            NIL
        };
        let plain = plains[*next_in];
        *next_in += 1;
        let right = if bits & 2 == 2 {
            self.rebuild(s, plains, next_pre, next_in, c, hi, depth + 1)?
        } else {
            NIL
        };
        self.nodes[k] = Node {
            plain,
            cipher: c as u64,
            left,
            right,
        };
        Ok(k as u32)
    }
}

impl OreScheme for FhOpe {
    type Ciphertext = FhOpeCiphertext;

    descriptor_and_bits!(params.bits);

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        x: u64,
    ) -> Result<FhOpeCiphertext> {
        let value = self.encrypt_u64(rng, x)?;
        Ok(FhOpeCiphertext {
            value,
            epoch: self.rebalances,
        })
    }

    /// Seed 004's comparison: the plaintext of `a` (one traversal), then
    /// the smallest and largest ciphertexts of that plaintext (two more);
    /// `b` is placed against that interval.
    fn compare(&self, a: &FhOpeCiphertext, b: &FhOpeCiphertext) -> Result<Ordering> {
        let v = self.decrypt_u64(self.check_epoch(a)?)?;
        let b = self.check_epoch(b)?;
        let (min, max) = self.ciphertext_range(v).ok_or(Error::Crypto)?;
        Ok(if b < min {
            Ordering::Greater
        } else if b > max {
            Ordering::Less
        } else {
            Ordering::Equal
        })
    }

    fn can_decrypt(&self) -> bool {
        true
    }

    fn decrypt(&self, c: &FhOpeCiphertext) -> Result<u64> {
        self.decrypt_u64(self.check_epoch(c)?)
    }

    /// The order-preserving number's width, as the papers count it; the
    /// epoch beside it (a small counter the server sees anyway, as it
    /// receives every re-encoding) is not counted.
    fn ciphertext_bits(&self, _c: &FhOpeCiphertext) -> u64 {
        u64::from(self.params.cipher_bits)
    }

    /// The size of the compacted state: shape bits plus delta-coded
    /// plaintexts.
    fn state_bits(&self) -> u64 {
        let s = self.compact();
        8 * (s.shape.len() + s.plains.len()) as u64
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        // FH-OPE has no key: its secret is the state.
        saved::save(
            DESCRIPTOR.name,
            self.params,
            &Key::from_bytes([0; 32]),
            self.compact(),
        )
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<FhOpeParams, CompactState> = saved::restore(DESCRIPTOR.name, bytes)?;
        FhOpe::from_compact(s.params, &s.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    fn rng() -> rand_chacha::ChaCha20Rng {
        rand_chacha::ChaCha20Rng::seed_from_u64(7)
    }

    #[test]
    fn duplicates_get_distinct_ciphertexts_in_one_run() {
        let mut s = FhOpe::new(FhOpeParams::default()).unwrap();
        let mut r = rng();
        let mut cts: Vec<(u64, u64)> = [5u64, 3, 5, 5, 9, 3, 5, 1]
            .iter()
            .map(|&x| (s.encrypt_u64(&mut r, x).unwrap(), x))
            .collect();
        cts.sort_unstable();
        let plains: Vec<u64> = cts.iter().map(|&(_, x)| x).collect();
        assert_eq!(plains, vec![1, 3, 3, 5, 5, 5, 5, 9]);
        let distinct: std::collections::BTreeSet<u64> = cts.iter().map(|&(c, _)| c).collect();
        assert_eq!(distinct.len(), cts.len());
        assert_eq!(s.ciphertext_range(5).map(|(a, b)| a < b), Some(true));
        assert_eq!(s.ciphertext_range(4), None);
    }

    #[test]
    fn sorted_input_triggers_rebalancing_and_reencoding() {
        let mut s = FhOpe::new(FhOpeParams {
            bits: 16,
            cipher_bits: 12,
        })
        .unwrap();
        let mut r = rng();
        let mut issued: Vec<(u64, u64)> = Vec::new();
        for x in 0..200u64 {
            let c = s.encrypt_u64(&mut r, x).unwrap();
            if let Some(Reencoding { changes: map, .. }) = s.take_reencoding() {
                for (c_old, _) in issued.iter_mut() {
                    if let Ok(i) = map.binary_search_by_key(c_old, |&(o, _)| o) {
                        *c_old = map[i].1;
                    }
                }
            }
            issued.push((c, x));
        }
        assert!(s.rebalances() > 0);
        for &(c, x) in &issued {
            assert_eq!(s.decrypt_u64(c).unwrap(), x);
        }
        issued.sort_unstable();
        assert!(issued.windows(2).all(|w| w[0].1 < w[1].1));
    }

    #[test]
    fn wipe_zeroes_the_plaintexts_in_place() {
        let mut s = FhOpe::new(FhOpeParams::default()).unwrap();
        let mut r = rng();
        for x in [7u64, 70, 700] {
            s.encrypt_u64(&mut r, x).unwrap();
        }
        assert!(s.nodes.iter().all(|n| n.plain != 0 && n.cipher != 0));
        s.wipe();
        assert_eq!(s.nodes.len(), 3);
        assert!(s.nodes.iter().all(|n| n.plain == 0 && n.cipher == 0));
    }

    #[test]
    fn range_exhaustion_is_an_error() {
        let mut s = FhOpe::new(FhOpeParams {
            bits: 8,
            cipher_bits: 3,
        })
        .unwrap();
        let mut r = rng();
        let mut ok = 0;
        for x in 0..20 {
            if s.encrypt_u64(&mut r, x).is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, 7);
    }

    #[test]
    fn compact_state_round_trips() {
        let mut s = FhOpe::new(FhOpeParams::default()).unwrap();
        let mut r = rng();
        for i in 0..500u64 {
            s.encrypt_u64(&mut r, (i * 7919) % 101).unwrap();
        }
        let saved = OreScheme::save(&s).unwrap();
        let back = FhOpe::restore(&saved).unwrap();
        let listing = |f: &FhOpe| -> Vec<(u64, u64)> {
            f.in_order()
                .iter()
                .map(|&i| (f.node(i).plain, f.node(i).cipher))
                .collect()
        };
        assert_eq!(listing(&back), listing(&s));
        assert_eq!(back.len(), 500);
        assert!(s.state_bits() < 500 * 16);
    }
}
