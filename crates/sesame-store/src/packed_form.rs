//! The stored forms of a packed view's chunks and deltas
//! ([`crate::packed`]), and their checked decoding.
//!
//! A chunk is one of two forms, told apart by its first byte:
//!
//! - `0x01` (*variable*): per pair in ascending key order, the key's
//!   length (LEB128), the key, the value's length (LEB128), the value;
//! - `0x03` (*fixed*): the keys' common length (LEB128), the values'
//!   common length (LEB128), then per pair in ascending key order the key
//!   and the value, nothing between. A chunk whose pairs all have one key
//!   length and one value length (a keyword index's entries: FAST's are
//!   a 17-byte key and a 25-byte value) is written in this form: 42 bytes
//!   an entry where the variable form takes 44.
//!
//! Either form may state its keys' common prefix once (*prefixed*):
//!
//! - `0x04`: the fixed form with a prefix: the prefix's length (LEB128),
//!   the prefix, the length of the rest of each key (LEB128), the values'
//!   length (LEB128), then per pair the rest of its key and its value;
//! - `0x05`: the variable form with a prefix: the prefix's length and the
//!   prefix, then per pair the rest of its key's length, the rest, the
//!   value's length, the value.
//!
//! A chunk's keys are sorted, so the bytes its first and last key share
//! are shared by all: a keyword index's labels spread evenly, and a chunk
//! of a few hundred of them shares its view's mark and a byte or two of
//! label; a record store's keys are `h` and an identifier in 8 bytes
//! big-endian, and a chunk of consecutive identifiers shares seven. A
//! chunk of two pairs or more whose keys share two bytes or more is
//! written prefixed: 2 bytes a keyword entry of a large index and 7 a
//! table's record fewer (`docs/storage.md`, "Packed entries"). One
//! shared byte (a small index's chunks share their view's mark alone)
//! is left as the unprefixed forms wrote it: a byte a pair at most, and
//! those chunks stay byte for byte what earlier builds wrote. A prefixed chunk is read by
//! putting the prefix back ([`expand`]: the chunk in its unprefixed form,
//! which the rest of the view reads as before), or, for a lookup, searched
//! in place ([`find`], [`Lookup`]).
//!
//! The forms hold the same pairs in the same order; which one a chunk is
//! in says only that its pairs share their lengths or a prefix, which a
//! reader of the store learned already from the keys themselves (the
//! server sees the keys and values: they are the scheme's entries).
//! Chunks written before the fixed form existed are in the variable form
//! and read as they are; a chunk is rewritten in the fixed form when a
//! write rewrites it. A build before the fixed form refuses a fixed chunk
//! as damaged ("unknown format 3"), it does not misread it; a build
//! before the prefixed forms refuses them so ("unknown format 4" or "5").
//!
//! A delta is `0x02`, its chunk's fence's length (LEB128), the fence, then
//! the value.
//!
//! Every length read is checked: a damaged chunk or delta is
//! [`Error::StoreCorrupt`] naming it, never a panic.

use std::borrow::Cow;

use sesame_core::{Error, Result};

use super::Pair;

/// The first byte of a chunk in the variable form.
pub(super) const FORMAT: u8 = 0x01;

/// The first byte of every delta.
const DELTA: u8 = 0x02;

/// The first byte of a chunk in the fixed form.
const FIXED: u8 = 0x03;

/// The first byte of a chunk in the fixed form with its keys' prefix.
const FIXED_PREFIXED: u8 = 0x04;

/// The first byte of a chunk in the variable form with its keys' prefix.
const VARIABLE_PREFIXED: u8 = 0x05;

pub(super) fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The bytes of a pair in the variable form.
pub(super) fn encoded_len(key: &[u8], value: &[u8]) -> usize {
    varint_len(key.len()) + key.len() + varint_len(value.len()) + value.len()
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The lengths that every pair of a chunk being built shares, if any
/// ([`Widths::stored_len`]: the bytes of the form it will be stored in).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Widths {
    /// No pair yet.
    #[default]
    Empty,
    /// Every pair so far has this key length and this value length.
    Uniform(usize, usize),
    /// Two pairs differ in a length: the variable form.
    Mixed,
}

impl Widths {
    /// With one more pair of `key` and `value`.
    pub(super) fn with(self, key: &[u8], value: &[u8]) -> Self {
        match self {
            Self::Empty => Self::Uniform(key.len(), value.len()),
            Self::Uniform(k, v) if k == key.len() && v == value.len() => self,
            _ => Self::Mixed,
        }
    }

    /// The stored bytes of a chunk of `count` pairs of these widths whose
    /// variable form is `variable` bytes long.
    pub(super) fn stored_len(self, count: usize, variable: usize) -> usize {
        match self {
            Self::Uniform(k, v) if k + v > 0 => 1 + varint_len(k) + varint_len(v) + count * (k + v),
            _ => variable,
        }
    }
}

/// The fewest bytes of a prefix a chunk states ([`encode`]).
const MIN_PREFIX: usize = 2;

/// The stored chunk of `pairs` (sorted, each key once): the fixed form
/// when they share their lengths, else the variable form; prefixed when
/// two pairs or more share [`MIN_PREFIX`] bytes or more of their keys.
pub(super) fn encode(pairs: &[Pair<'_>]) -> Vec<u8> {
    let widths = pairs.iter().fold(Widths::Empty, |w, (k, v)| w.with(k, v));
    let prefix = match (pairs.first(), pairs.last()) {
        (Some((first, _)), Some((last, _))) if pairs.len() > 1 => {
            let n = first
                .iter()
                .zip(last.iter())
                .take_while(|(a, b)| a == b)
                .count();
            if n >= MIN_PREFIX {
                &first[..n]
            } else {
                &[][..]
            }
        }
        _ => &[][..],
    };
    let p = prefix.len();
    let fixed = matches!(widths, Widths::Uniform(k, v) if k - p + v > 0);
    let rests: Vec<Pair<'_>> = pairs.iter().map(|(k, v)| (&k[p..], *v)).collect();
    write_chunk(fixed, prefix, &[], &rests)
}

/// The chunk stored as `bytes` under `chunk_key` in a form without a
/// prefix: as it is, or, for a prefixed chunk, its pairs written again
/// with their whole keys in the form of the same kind (checked as
/// [`decode`] checks them).
pub(super) fn expand<'a>(bytes: &'a [u8], chunk_key: &[u8]) -> Result<Cow<'a, [u8]>> {
    // A chunk of another form is given as it is, not decoded here: its
    // reader decodes and checks it.
    let fixed = match bytes.first() {
        Some(&FIXED_PREFIXED) => true,
        Some(&VARIABLE_PREFIXED) => false,
        _ => return Ok(Cow::Borrowed(bytes)),
    };
    let (prefix, rests) = decode_parts(bytes, chunk_key)?;
    Ok(Cow::Owned(write_chunk(fixed, &[], prefix, &rests)))
}

/// A chunk in the fixed form (`fixed`: `pairs` share their lengths and
/// are not empty) or the variable one, whose keys are `leading` and each
/// pair's key, with the prefix `stated` written once (a prefixed form;
/// empty: an unprefixed one). [`encode`] states the shared prefix and
/// [`expand`] writes it before each key again; neither copies a key.
fn write_chunk(fixed: bool, stated: &[u8], leading: &[u8], pairs: &[Pair<'_>]) -> Vec<u8> {
    let lead = leading.len();
    let body: usize = pairs
        .iter()
        .map(|(k, v)| match fixed {
            true => lead + k.len() + v.len(),
            false => encoded_len(k, v) + lead + 1,
        })
        .sum();
    let mut out = Vec::with_capacity(1 + varint_len(stated.len()) + stated.len() + 20 + body);
    out.push(match (fixed, stated.is_empty()) {
        (true, true) => FIXED,
        (true, false) => FIXED_PREFIXED,
        (false, true) => FORMAT,
        (false, false) => VARIABLE_PREFIXED,
    });
    if !stated.is_empty() {
        put_varint(&mut out, stated.len());
        out.extend_from_slice(stated);
    }
    if let (true, Some((k, v))) = (fixed, pairs.first()) {
        put_varint(&mut out, lead + k.len());
        put_varint(&mut out, v.len());
    }
    for (key, value) in pairs {
        if !fixed {
            put_varint(&mut out, lead + key.len());
        }
        out.extend_from_slice(leading);
        out.extend_from_slice(key);
        if !fixed {
            put_varint(&mut out, value.len());
        }
        out.extend_from_slice(value);
    }
    out
}

/// [`expand`] of an owned chunk: the same bytes where it is not prefixed.
pub(super) fn expand_owned(bytes: Vec<u8>, chunk_key: &[u8]) -> Result<Vec<u8>> {
    match expand(&bytes, chunk_key)? {
        Cow::Owned(expanded) => Ok(expanded),
        Cow::Borrowed(_) => Ok(bytes),
    }
}

/// A chunk built in the variable form, stored in the form its pairs
/// allow ([`encode`]: fixed where they share their lengths, prefixed
/// where they share a first byte).
pub(super) fn seal(variable: Vec<u8>, chunk_key: &[u8]) -> Result<Vec<u8>> {
    Ok(encode(&decode(&variable, chunk_key)?))
}

pub(super) fn damaged(chunk_key: &[u8], what: &str) -> Error {
    let shown: String = chunk_key
        .iter()
        .take(48)
        .map(|b| format!("{b:02x}"))
        .collect();
    Error::StoreCorrupt(format!("packed chunk {shown}: {what}"))
}

pub(super) fn damaged_delta(key: &[u8], what: &str) -> Error {
    let shown: String = key.iter().take(48).map(|b| format!("{b:02x}")).collect();
    Error::StoreCorrupt(format!("packed delta {shown}: {what}"))
}

/// Whether a chunk is stored in the fixed form, with a prefix or not
/// (searched in place by [`find`]; a chunk in the variable form is read
/// pair by pair).
pub(super) fn is_fixed(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(&FIXED | &FIXED_PREFIXED))
}

pub(super) fn is_delta(bytes: &[u8]) -> bool {
    bytes.first() == Some(&DELTA)
}

/// The stored length of a delta of `value` beside the chunk of `fence`.
pub(super) fn delta_len(fence: &[u8], value: &[u8]) -> usize {
    1 + varint_len(fence.len()) + fence.len() + value.len()
}

pub(super) fn encode_delta(fence: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(delta_len(fence, value));
    out.push(DELTA);
    put_varint(&mut out, fence.len());
    out.extend_from_slice(fence);
    out.extend_from_slice(value);
    out
}

/// The fence a delta stored under `key` names and its value, checked: the
/// fence lies below the delta's own key (`prefix_len` bytes into `key`).
pub(super) fn decode_delta<'a>(
    bytes: &'a [u8],
    key: &'a [u8],
    prefix_len: usize,
) -> Result<(&'a [u8], &'a [u8])> {
    if !is_delta(bytes) {
        return Err(damaged_delta(key, "not a delta"));
    }
    let mut reader = Reader {
        bytes,
        at: 1,
        chunk_key: key,
        fixed: None,
        prefix: &[],
    };
    let fence = reader
        .slice()
        .map_err(|_| damaged_delta(key, "its fence runs past the end"))?;
    if key.get(prefix_len..).is_none_or(|own| fence >= own) {
        return Err(damaged_delta(key, "its fence is not below its key"));
    }
    Ok((fence, &bytes[reader.at..]))
}

/// Reads pairs off a chunk's encoding, checking every length.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    chunk_key: &'a [u8],
    /// The key and value lengths of a chunk in the fixed form (of the
    /// rest of the keys, after the prefix).
    fixed: Option<(usize, usize)>,
    /// The keys' common prefix (empty: not a prefixed form); the pairs
    /// read are the rest of each key and its value.
    prefix: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], chunk_key: &'a [u8]) -> Result<Self> {
        let mut reader = Self {
            bytes,
            at: 1,
            chunk_key,
            fixed: None,
            prefix: &[],
        };
        let form = bytes.first().copied();
        if matches!(form, Some(FIXED_PREFIXED | VARIABLE_PREFIXED)) {
            reader.prefix = reader.slice()?;
            if reader.prefix.is_empty() {
                return Err(damaged(chunk_key, "an empty prefix"));
            }
        }
        match form {
            Some(FORMAT | VARIABLE_PREFIXED) => {}
            Some(FIXED | FIXED_PREFIXED) => {
                let (k, v) = (reader.varint()?, reader.varint()?);
                let width = k
                    .checked_add(v)
                    .filter(|&w| w > 0)
                    .ok_or_else(|| damaged(chunk_key, "pairs of no length"))?;
                if !(bytes.len() - reader.at).is_multiple_of(width) {
                    return Err(damaged(chunk_key, "a pair runs past the end"));
                }
                reader.fixed = Some((k, v));
            }
            Some(other) => return Err(damaged(chunk_key, &format!("unknown format {other}"))),
            None => return Err(damaged(chunk_key, "empty")),
        }
        Ok(reader)
    }

    fn varint(&mut self) -> Result<usize> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(damaged(self.chunk_key, "a length runs past the end"));
            };
            self.at += 1;
            n |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return usize::try_from(n).map_err(|_| damaged(self.chunk_key, "a huge length"));
            }
        }
        Err(damaged(self.chunk_key, "a length of more than 64 bits"))
    }

    /// The next `len` bytes.
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| damaged(self.chunk_key, "a pair runs past the end"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn slice(&mut self) -> Result<&'a [u8]> {
        let len = self.varint()?;
        self.take(len)
    }

    fn next_pair(&mut self) -> Result<Option<Pair<'a>>> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        Ok(Some(match self.fixed {
            Some((k, v)) => (self.take(k)?, self.take(v)?),
            None => (self.slice()?, self.slice()?),
        }))
    }
}

/// A chunk's keys' common prefix (empty where its form has none) and
/// every pair with the rest of its key, checked to be in strictly
/// ascending order.
fn decode_parts<'a>(bytes: &'a [u8], chunk_key: &'a [u8]) -> Result<(&'a [u8], Vec<Pair<'a>>)> {
    let mut reader = Reader::new(bytes, chunk_key)?;
    let mut pairs: Vec<Pair<'a>> = Vec::new();
    while let Some(pair) = reader.next_pair()? {
        if pairs.last().is_some_and(|(last, _)| *last >= pair.0) {
            return Err(damaged(chunk_key, "keys out of order"));
        }
        pairs.push(pair);
    }
    if !reader.prefix.is_empty() && pairs.len() < 2 {
        return Err(damaged(chunk_key, "a prefix for fewer than two pairs"));
    }
    Ok((reader.prefix, pairs))
}

/// Every pair of a chunk in a form without a prefix ([`expand`] puts a
/// prefixed chunk's back first), checked to be in strictly ascending
/// order.
pub(super) fn decode<'a>(bytes: &'a [u8], chunk_key: &'a [u8]) -> Result<Vec<Pair<'a>>> {
    match decode_parts(bytes, chunk_key)? {
        ([], pairs) => Ok(pairs),
        _ => Err(damaged(
            chunk_key,
            "a prefixed chunk read whole without its prefix",
        )),
    }
}

/// The pairs of a chunk as a write that appends beside it reads them: a
/// chunk in the fixed form is searched in place (its header and length
/// checked as [`find`] checks them, no copy and no allocation), one in the
/// variable form is decoded and checked whole.
///
/// Why not decode the fixed form whole here too: an update appends a few
/// deltas beside chunks it does not rewrite, and decoding each such chunk
/// (some 380 pairs of a keyword index) only to look up a few keys was 3
/// to 5 % of the samples of a 16-client update run on the server
/// (`docs/performance.md`, issue 40 item 5). What is not checked here is
/// what a lookup does not check either: the order of a fixed chunk's keys
/// ([`sesame_core::Store::verify`] and every rewrite check it); the chunk is
/// not written by the append, so no damage is carried forward.
pub(super) enum Lookup<'a> {
    /// The fixed form: its pairs back to back, each `width` bytes of which
    /// the first `key` are the key (after `prefix`, the keys' common
    /// prefix, empty where the form has none).
    Fixed {
        prefix: &'a [u8],
        body: &'a [u8],
        key: usize,
        width: usize,
    },
    /// The variable form, decoded: the rest of each key after `prefix`.
    Pairs {
        prefix: &'a [u8],
        pairs: Vec<Pair<'a>>,
    },
}

impl<'a> Lookup<'a> {
    /// The chunk stored as `bytes` under `chunk_key`, checked as the
    /// type's doc says.
    pub(super) fn new(bytes: &'a [u8], chunk_key: &'a [u8]) -> Result<Self> {
        let reader = Reader::new(bytes, chunk_key)?;
        Ok(match reader.fixed {
            Some((k, v)) => Self::Fixed {
                prefix: reader.prefix,
                body: &bytes[reader.at..],
                key: k,
                width: k + v,
            },
            None => {
                let (prefix, pairs) = decode_parts(bytes, chunk_key)?;
                Self::Pairs { prefix, pairs }
            }
        })
    }

    /// The value of `key` in the chunk.
    pub(super) fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        match self {
            Self::Fixed {
                prefix,
                body,
                key: k,
                width,
            } => search_fixed(body, *k, *width, key.strip_prefix(*prefix)?),
            Self::Pairs { prefix, pairs } => {
                let rest = key.strip_prefix(*prefix)?;
                pairs
                    .binary_search_by(|(k, _)| (*k).cmp(rest))
                    .ok()
                    .map(|at| pairs[at].1)
            }
        }
    }
}

/// The value of `key` among the pairs of a fixed chunk's `body` (each
/// `width` bytes, the first `k` of them the key), by binary search.
fn search_fixed<'a>(body: &'a [u8], k: usize, width: usize, key: &[u8]) -> Option<&'a [u8]> {
    let count = body.len() / width;
    let key_at = |i: usize| &body[i * width..i * width + k];
    let (mut lo, mut hi) = (0, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key_at(mid).cmp(key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(&body[mid * width + k..(mid + 1) * width]),
        }
    }
    None
}

/// The value of `key` in a chunk, read up to the key (every length read
/// is checked; [`sesame_core::Store::verify`] checks whole chunks).
pub(super) fn find(bytes: &[u8], chunk_key: &[u8], key: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut reader = Reader::new(bytes, chunk_key)?;
    let Some(key) = key.strip_prefix(reader.prefix) else {
        return Ok(None);
    };
    if let Some((k, v)) = reader.fixed {
        // Pairs of one width: a binary search over them.
        return Ok(search_fixed(&bytes[reader.at..], k, k + v, key).map(<[u8]>::to_vec));
    }
    while let Some((k, v)) = reader.next_pair()? {
        match k.cmp(key) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => return Ok(Some(v.to_vec())),
            std::cmp::Ordering::Greater => break,
        }
    }
    Ok(None)
}
