//! Node capacities: how many entries a node of one page holds, for each
//! scheme's ciphertext size (fan-out), and the layout every request names.

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result};

use crate::btree::Capacity;

// ---------------------------------------------------------------------
// Layout and fan-out.

/// The scheme parameters a server needs: sent with every request, fixed
/// by the first one and checked against it afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Value width in bits.
    pub bits: u32,
    /// The scheme's second parameter: BCLO's ciphertext width, Lewi-Wu's
    /// block width, FH-OPE's ciphertext width; 0 for the others.
    pub extra: u32,
    /// Payload bytes per record that leaves are sized for, with
    /// [`UNIQUE_RECORDS`] set where records are sealed in the unique form.
    pub payload: u32,
}

/// Set in [`Layout::payload`] by a client that seals its records in the
/// unique form ([`crate::record::RecordKey::seal_unique`]: the value in
/// the bytes its width needs, the payload and the tag, 10 + 12 bytes
/// fewer than a record under a stored nonce for a 16-bit value): leaves
/// are then sized for records of that form, and a page holds as many
/// entries as it has room for. A tree laid out without it (every tree
/// of an earlier build, every client of the random form) keeps the
/// sizes of the random form.
pub const UNIQUE_RECORDS: u32 = 1 << 31;

/// Set in [`Layout::payload`], with [`UNIQUE_RECORDS`], by a client
/// whose records travel in its ciphertexts' nonces (`seal=nonce`:
/// [`crate::record::RecordKey::seal_block`], Lewi-Wu only): the tree
/// stores an empty record beside each right half, a query answers each
/// entry's nonce as its record, and a deletion names the entry by its
/// nonce. Every payload then takes exactly the layout's payload bytes.
pub const NONCE_RECORDS: u32 = 1 << 30;

impl Layout {
    /// The payload bytes leaves are sized for.
    pub fn payload_bytes(&self) -> usize {
        (self.payload & !(UNIQUE_RECORDS | NONCE_RECORDS)) as usize
    }

    /// Whether leaves are sized for records of the unique form (or hold
    /// them in the nonces).
    pub fn unique_records(&self) -> bool {
        self.payload & UNIQUE_RECORDS != 0
    }

    /// Whether each entry's record is its ciphertext's nonce.
    pub fn nonce_records(&self) -> bool {
        self.payload & NONCE_RECORDS != 0
    }

    pub(super) fn check(&self) -> Result<()> {
        let nonce_without_unique = self.nonce_records() && !self.unique_records();
        if !(1..=64).contains(&self.bits)
            || self.extra > 128
            || self.payload_bytes() > 1 << 20
            || nonce_without_unique
        {
            return Err(Error::Protocol(format!(
                "impossible B+ tree layout {self:?}"
            )));
        }
        Ok(())
    }
}

/// Bytes of a postcard varint of a `bits`-bit number, at most.
pub(super) const fn varint_bytes(bits: u32) -> usize {
    if bits == 0 {
        1
    } else {
        bits.div_ceil(7) as usize
    }
}

/// Bytes of a postcard length prefix for `len`.
pub(super) fn len_prefix(len: usize) -> usize {
    varint_bytes(usize::BITS - len.leading_zeros())
}

/// Bytes of a page left, in a tree of [`UNIQUE_RECORDS`], for the
/// node's key in the store (about 50 bytes in a profile:
/// `i/<index>/<generation>/`, the node's own key) and the store
/// engine's framing of one pair (redb: 12 bytes), so that a full node
/// and its key fill one redb page rather than spill into a run of two.
/// (Trees of the random form keep the sizes their build gave them:
/// their leaves never came near a page's end.)
pub const STORE_KEY_ROOM: usize = 128;

/// Bound on a node's bytes beyond its entries: kind tag, vector lengths,
/// the next-leaf pointer, the wire version.
pub const NODE_HEADER_BYTES: usize = 16;

/// Bytes a child pointer takes in a page (node ids below 2^35).
pub const CHILD_BYTES: usize = 5;

/// Node capacities for pages of `page_size` bytes, keys of at most
/// `key_bytes` bytes and leaf values of at most `value_bytes` bytes:
/// `leaf = (page - 16) / (key + value)` and
/// `internal = (page - 16 - 5) / (key + 5)`, at least 2 each (a key larger
/// than a page gives nodes of several pages).
pub fn capacity(page_size: usize, key_bytes: usize, value_bytes: usize) -> Result<Capacity> {
    let room = page_size.saturating_sub(NODE_HEADER_BYTES);
    let leaf = room / (key_bytes + value_bytes).max(1);
    let internal = room.saturating_sub(CHILD_BYTES) / (key_bytes + CHILD_BYTES);
    Capacity::new(leaf.max(2), internal.max(2))
}
