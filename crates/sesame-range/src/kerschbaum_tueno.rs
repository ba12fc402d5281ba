//! The Kerschbaum-Tueno rotated circular array (F. Kerschbaum, A. Tueno,
//! "An Efficiently Searchable Encrypted Data Structure for Range Queries",
//! ESORICS 2019; seed 004, section 4.2).
//!
//! The server holds an array of semantically secure ciphertexts (each a
//! [`RecordKey`]-sealed record) kept in sorted order up to a rotation: the
//! array is a sorted array rotated by an unknown offset. The client finds
//! positions by an interactive binary search (request slot `j`, decrypt,
//! decide), using the record in slot 0 as the reference point of the
//! circular order. Every insertion (and deletion) rotates the whole array
//! by a fresh uniformly random offset chosen by the client, which hides
//! where the smallest element lies.
//!
//! Two fixes to the paper, both reported by seed 004:
//! - insertion compares the middle element `m` against the inserted value
//!   `m'` with the two swapped relative to the paper's listing (see
//!   [`Order`] and the unit test `paper_order_breaks_the_array`);
//! - duplicates that span the rotation point: every comparison is on the
//!   pair (value, ciphertext bytes), a strict total order (ciphertexts are
//!   distinct), so the rotation point is never ambiguous, however many
//!   copies of the reference value there are.
//!
//! Layout: slots are packed `per_page` to a page (see `Page`); an
//! insertion or deletion rewrites every page (O(N/B) I/O, the protocol's
//! nature) by copying byte ranges, without decoding entries. See
//! `docs/schemes/kerschbaum_tueno.md`.

use std::cmp::Ordering;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Service, Store, Typed, WriteBatch,
};

use sesame_sse::common::below;

use crate::api::{bits_param, split_page, Io, RangeAnswer, RangeClient, RangeProtocol, Record};
use crate::paged::PageConfig;
use crate::record::RecordKey;

/// Descriptor of Kerschbaum-Tueno.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "kerschbaum-tueno",
    title: "Kerschbaum-Tueno rotated circular array",
    citation: "F. Kerschbaum, A. Tueno. An Efficiently Searchable Encrypted Data Structure for \
               Range Queries. ESORICS 2019",
    kind: SchemeKind::Range,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "The stored array leaks its size and, once searched, the order of neighbouring \
              slots (the total order up to the rotation; not equality: ciphertexts are \
              semantically secure). Each operation leaks the slots the binary searches probe \
              and, for a query, the contiguous slots returned (the access pattern and result \
              size); an insertion or deletion leaks the slot inserted at or removed. The \
              rotation offsets travel in the clear with each insertion and deletion, so a \
              server that watches operations follows every slot through the rotations and, \
              once it has located the smallest element, keeps it: the random rotations hide \
              the smallest element only from a single snapshot of the array (IND-CPA-DS), not \
              from a server that sees the operations.",
    doc: "docs/schemes/kerschbaum_tueno.md",
};

/// Associated data of the sealed records.
const AAD: &[u8] = b"kerschbaum-tueno";

/// Bytes a slot is assumed to take when sizing pages: a record with a
/// 16-byte payload and its 4-byte offset in the page.
const NOMINAL_SLOT: usize = 8 + 16 + 28 + 4;

/// Largest sealed record the server accepts (1 MiB).
const MAX_RECORD: usize = 1 << 20;

/// The registry entries of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![RangeProtocol {
        descriptor: &DESCRIPTOR,
        params: &[("bits", "32 (value width)")],
        new_client: |rng, params| {
            let (params, _) = split_page(params)?;
            Ok(Box::new(KtClient::new(rng, &params)?))
        },
        restore_client: |bytes| Ok(Box::new(KtClient::restore(bytes)?)),
        new_server: Some(|store, params| -> Result<Box<dyn Service>> {
            let (_, page) = split_page(params)?;
            Ok(Box::new(Typed(KtServer::new(store, &page)?)))
        }),
    }]
}

/// A Kerschbaum-Tueno request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The ciphertext in `slot` (and the array size).
    Get {
        /// Slot index, below the array size.
        slot: u64,
    },
    /// Inserts `sealed` before slot `position` (0 ..= n), then rotates the
    /// n + 1 slots by `offset` (below n + 1): slot i moves to
    /// (i + offset) mod (n + 1).
    Insert {
        /// Insertion position in the current array.
        position: u64,
        /// The sealed record.
        sealed: Vec<u8>,
        /// Rotation, chosen uniformly by the client.
        offset: u64,
    },
    /// Removes `slot`, then rotates the n - 1 remaining slots by `offset`
    /// (below max(1, n - 1)).
    Delete {
        /// Slot to remove.
        slot: u64,
        /// Rotation, chosen uniformly by the client.
        offset: u64,
    },
    /// Bulk load into an empty array: `sealed` holds the records already
    /// in circular order (sorted, then rotated by an offset the client
    /// drew), slot 0 first. Refused unless the array is empty.
    Load {
        /// The sealed records, slot by slot.
        sealed: Vec<Vec<u8>>,
    },
    /// The ciphertexts in slots `from .. to`, or, when `wrap`, in
    /// `from .. n` followed by `0 .. to`.
    Range {
        /// First slot (0 ..= n).
        from: u64,
        /// End slot, excluded (0 ..= n).
        to: u64,
        /// Whether the interval wraps around the end of the array.
        wrap: bool,
    },
}

/// A Kerschbaum-Tueno response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The array is empty.
    Empty,
    /// A slot's ciphertext and the array size.
    Slot {
        /// Array size.
        n: u64,
        /// The sealed record.
        sealed: Vec<u8>,
    },
    /// The array was updated.
    Done,
    /// The ciphertexts of a range, in slot order.
    Records(Vec<Vec<u8>>),
}

// ---------------------------------------------------------------------------
// The order.

/// Tie-breaker of a search key: below, at, or above every ciphertext of the
/// same value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Tie<'a> {
    /// Below every ciphertext.
    Min,
    /// A ciphertext.
    Bytes(&'a [u8]),
    /// Above every ciphertext.
    Max,
}

/// A point of the strict total order on (value, ciphertext).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key<'a> {
    value: u64,
    tie: Tie<'a>,
}

impl<'a> Key<'a> {
    fn entry(value: u64, sealed: &'a [u8]) -> Self {
        Key {
            value,
            tie: Tie::Bytes(sealed),
        }
    }
    fn below(value: u64) -> Self {
        Key {
            value,
            tie: Tie::Min,
        }
    }
    fn above(value: u64) -> Self {
        Key {
            value,
            tie: Tie::Max,
        }
    }
}

/// Compares `a` and `b` in the circular order that starts at `r` (the
/// reference, the entry in slot 0): keys at or after `r` come first, then
/// the keys before `r`.
fn circular(r: &Key<'_>, a: &Key<'_>, b: &Key<'_>) -> Ordering {
    let ra = (a < r, a);
    let rb = (b < r, b);
    ra.cmp(&rb)
}

/// The order of the comparison in the insertion's binary search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The corrected order (seed 004): go right while the middle element
    /// `m` precedes the inserted `m'`.
    Fixed,
    /// The paper's listing, with `m` and `m'` swapped: go right while `m'`
    /// precedes `m`. Kept to show, in tests, that it breaks the array.
    Paper,
}

/// First slot in `1 ..= n` whose entry follows `x` in the circular order
/// from the entry `r` in slot 0, found by binary search; `probe(j)` returns
/// the (value, ciphertext) of slot `j`. `strict`: an entry equal to `x`
/// counts as following it.
fn search<F>(n: u64, r: &Key<'_>, x: &Key<'_>, order: Order, mut probe: F) -> Result<u64>
where
    F: FnMut(u64) -> Result<(u64, Vec<u8>)>,
{
    let (mut lo, mut hi) = (1u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (value, sealed) = probe(mid)?;
        let m = Key::entry(value, &sealed);
        let right = match order {
            Order::Fixed => circular(r, &m, x) == Ordering::Less,
            Order::Paper => circular(r, x, &m) == Ordering::Less,
        };
        if right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

// ---------------------------------------------------------------------------
// Client.

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    key: [u8; 32],
    bits: u32,
}

/// The client half of Kerschbaum-Tueno: the record key only.
pub struct KtClient {
    key: RecordKey,
    bits: u32,
    order: Order,
}

impl std::fmt::Debug for KtClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KtClient")
            .field("bits", &self.bits)
            .finish_non_exhaustive()
    }
}

/// The slots and ciphertexts a query found, in slot order.
type Located = Vec<(u64, Vec<u8>, Record)>;

impl KtClient {
    /// A client with a fresh key. Parameter: `bits` (value width, default
    /// 32).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["bits"])?;
        Ok(KtClient {
            key: RecordKey::generate(rng),
            bits: bits_param(params)?,
            order: Order::Fixed,
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if !(1..=64).contains(&s.bits) {
            return Err(Error::Malformed(
                "Kerschbaum-Tueno state with bad bits".into(),
            ));
        }
        Ok(KtClient {
            key: RecordKey::from_bytes(&s.key)?,
            bits: s.bits,
            order: Order::Fixed,
        })
    }

    /// Uses `order` in the insertion's binary search ([`Order::Paper`]
    /// reproduces the paper's listing; for tests).
    pub fn with_order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    fn open(&self, sealed: &[u8]) -> Result<Record> {
        self.key.open(AAD, sealed)
    }

    /// Slot `j`'s (value, ciphertext).
    fn probe(&self, channel: &mut dyn Channel, n: u64, slot: u64) -> Result<(u64, Vec<u8>)> {
        match channel::call(channel, &Request::Get { slot })? {
            Response::Slot { n: m, sealed } if m == n => {
                let (value, _) = self.open(&sealed)?;
                Ok((value, sealed))
            }
            Response::Slot { .. } => Err(Error::Protocol(
                "the array size changed during an operation".into(),
            )),
            other => Err(Error::unexpected("Kerschbaum-Tueno", &other)),
        }
    }

    /// The array size and the reference entry (slot 0), if any.
    fn start(&self, channel: &mut dyn Channel) -> Result<Option<(u64, u64, Vec<u8>)>> {
        match channel::call(channel, &Request::Get { slot: 0 })? {
            Response::Empty => Ok(None),
            Response::Slot { n, sealed } if n > 0 => {
                let (value, _) = self.open(&sealed)?;
                Ok(Some((n, value, sealed)))
            }
            other => Err(Error::unexpected("Kerschbaum-Tueno", &other)),
        }
    }

    /// The records with values in `[lo, hi]` and their slots.
    fn locate(&self, channel: &mut dyn Channel, lo: u64, hi: u64) -> Result<(u64, Located)> {
        if lo > hi {
            return Ok((0, Vec::new()));
        }
        let Some((n, rv, rs)) = self.start(channel)? else {
            return Ok((0, Vec::new()));
        };
        let r = Key::entry(rv, &rs);
        let wrap = lo <= rv && rv <= hi;
        let from = search(n, &r, &Key::below(lo), Order::Fixed, |j| {
            self.probe(channel, n, j)
        })?;
        let to = search(n, &r, &Key::above(hi), Order::Fixed, |j| {
            self.probe(channel, n, j)
        })?;
        if !wrap && from > to {
            return Err(Error::Protocol("the array is not in circular order".into()));
        }
        let sealed = match channel::call(channel, &Request::Range { from, to, wrap })? {
            Response::Records(v) => v,
            other => return Err(Error::unexpected("Kerschbaum-Tueno", &other)),
        };
        let count = if wrap { n - from + to } else { to - from };
        if count != sealed.len() as u64 {
            return Err(Error::Protocol("wrong number of records in a range".into()));
        }
        let (first, second) = if wrap {
            (from..n, 0..to)
        } else {
            (from..to, 0..0)
        };
        let slots = first.chain(second);
        let mut out = Vec::with_capacity(sealed.len());
        for (slot, s) in slots.zip(sealed) {
            let record = self.open(&s)?;
            if record.0 < lo || record.0 > hi {
                return Err(Error::Protocol("a record outside the range".into()));
            }
            out.push((slot, s, record));
        }
        Ok((n, out))
    }
}

impl RangeClient for KtClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn seals_records(&self) -> bool {
        true
    }

    /// Its build uploads the whole rotated array at once (a second
    /// build would insert one by one): not in pieces.
    fn builds_in_pieces(&self) -> bool {
        false
    }

    /// Batch construction (the paper notes the structure suits batch
    /// uploads): on an empty server, the client seals every record, sorts
    /// them in the protocol's order, rotates them by a uniform offset and
    /// uploads the array in one request. On a non-empty server, records
    /// are inserted one by one.
    fn build_checked(&mut self, mut io: Io<'_>, records: &[Record]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.start(io.channel)?.is_some() {
            for (value, data) in records {
                self.insert_checked(io.reborrow(), *value, data)?;
            }
            return Ok(());
        }
        let mut sealed = Vec::with_capacity(records.len());
        for (value, data) in records {
            sealed.push((*value, self.key.seal(io.rng, AAD, *value, data)?));
        }
        sealed.sort_by(|a, b| Key::entry(a.0, &a.1).cmp(&Key::entry(b.0, &b.1)));
        let n = sealed.len();
        let offset = below(io.rng, n as u64) as usize;
        // New slot j holds sorted[(j - offset) mod n].
        sealed.rotate_right(offset);
        let sealed = sealed.into_iter().map(|(_, s)| s).collect();
        update(io.channel, &Request::Load { sealed })
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()> {
        let Io { rng, channel } = io;
        let sealed = self.key.seal(rng, AAD, value, data)?;
        let (position, n) = match self.start(channel)? {
            None => (0, 0),
            Some((n, rv, rs)) => {
                let r = Key::entry(rv, &rs);
                let x = Key::entry(value, &sealed);
                let p = search(n, &r, &x, self.order, |j| self.probe(channel, n, j))?;
                (p, n)
            }
        };
        let offset = below(rng, n + 1);
        let request = Request::Insert {
            position,
            sealed,
            offset,
        };
        update(channel, &request)
    }

    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool> {
        let (n, found) = self.locate(io.channel, value, value)?;
        let Some((slot, _, _)) = found.iter().find(|(_, _, r)| r.1 == data) else {
            return Ok(false);
        };
        let offset = below(io.rng, n.saturating_sub(1));
        let request = Request::Delete {
            slot: *slot,
            offset,
        };
        update(io.channel, &request)?;
        Ok(true)
    }

    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer> {
        let (_, found) = self.locate(io.channel, lo, hi)?;
        let records = found.into_iter().map(|(_, _, r)| r).collect();
        Ok(RangeAnswer::from_records(records, 0))
    }

    fn client_storage_bytes(&self) -> u64 {
        32 + 4
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            key: *self.key.to_bytes(),
            bits: self.bits,
        })
    }
}

/// Sends an update of the array; the server answers [`Response::Done`].
fn update(channel: &mut dyn Channel, request: &Request) -> Result<()> {
    match channel::call(channel, request)? {
        Response::Done => Ok(()),
        other => Err(Error::unexpected("Kerschbaum-Tueno", &other)),
    }
}

// ---------------------------------------------------------------------------
// Pages.

/// A page: `count` (u32 LE), then `count` end offsets (u32 LE) into the
/// data that follows, then the entries' bytes back to back. Entry `i` is
/// `data[end(i - 1) .. end(i)]`, so a slot is found without decoding the
/// others and a rotation copies byte ranges.
pub(crate) struct Page<'a> {
    ends: &'a [u8],
    data: &'a [u8],
}

impl<'a> Page<'a> {
    /// Parses and validates a stored page.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self> {
        let corrupt = || Error::StoreCorrupt("malformed Kerschbaum-Tueno page".into());
        let (count, rest) = bytes.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let count = u32::from_le_bytes(*count) as usize;
        let header = count.checked_mul(4).ok_or_else(corrupt)?;
        if rest.len() < header {
            return Err(corrupt());
        }
        let (ends, data) = rest.split_at(header);
        let page = Page { ends, data };
        let mut prev = 0usize;
        for i in 0..count {
            let e = page.end(i);
            if e < prev || e > data.len() {
                return Err(corrupt());
            }
            prev = e;
        }
        if prev != data.len() {
            return Err(corrupt());
        }
        Ok(page)
    }

    fn end(&self, i: usize) -> usize {
        let mut b = [0u8; 4];
        if let Some(s) = self.ends.get(4 * i..4 * i + 4) {
            b.copy_from_slice(s);
        }
        u32::from_le_bytes(b) as usize
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.ends.len() / 4
    }

    /// Entry `i` (validated by [`Page::parse`]).
    pub(crate) fn entry(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.len() {
            return None;
        }
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        self.data.get(start..self.end(i))
    }
}

/// Builds a page of a known number of entries in place: the header is
/// reserved up front and each end offset written as entries arrive.
struct PageBuilder {
    out: Vec<u8>,
    /// Entries pushed so far.
    count: usize,
    /// Entries the page will hold.
    slots: usize,
}

impl PageBuilder {
    fn new(slots: usize) -> Self {
        let header = 4 + 4 * slots;
        let mut out = Vec::with_capacity(header + slots * NOMINAL_SLOT);
        out.extend_from_slice(&(slots as u32).to_le_bytes());
        out.resize(header, 0);
        PageBuilder {
            out,
            count: 0,
            slots,
        }
    }

    fn header(&self) -> usize {
        4 + 4 * self.slots
    }

    fn set_end(&mut self, end: usize) -> Result<()> {
        let end =
            u32::try_from(end).map_err(|_| Error::InvalidArgument("page over 4 GiB".into()))?;
        let at = 4 + 4 * self.count;
        let slot = self
            .out
            .get_mut(at..at + 4)
            .filter(|_| self.count < self.slots)
            .ok_or_else(|| Error::InvalidArgument("page overflow".into()))?;
        slot.copy_from_slice(&end.to_le_bytes());
        self.count += 1;
        Ok(())
    }

    fn push(&mut self, entry: &[u8]) -> Result<()> {
        self.out.extend_from_slice(entry);
        self.set_end(self.out.len() - self.header())
    }

    /// Appends entries `from .. to` of `page` with one copy.
    fn push_run(&mut self, page: &Page<'_>, from: usize, to: usize) -> Result<()> {
        let short = || Error::StoreCorrupt("short Kerschbaum-Tueno page".into());
        if to > page.len() || from >= to {
            return Err(short());
        }
        let start = if from == 0 { 0 } else { page.end(from - 1) };
        let stop = page.end(to - 1);
        let bytes = page.data.get(start..stop).ok_or_else(short)?;
        let base = self.out.len() - self.header();
        self.out.extend_from_slice(bytes);
        for i in from..to {
            let end = page.end(i).checked_sub(start).ok_or_else(short)?;
            self.set_end(end + base)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<Vec<u8>> {
        if self.count != self.slots {
            return Err(Error::InvalidArgument("page underflow".into()));
        }
        Ok(self.out)
    }
}

// ---------------------------------------------------------------------------
// Server.

#[derive(Clone, Copy, Serialize, Deserialize)]
struct Meta {
    n: u64,
    per_page: u32,
}

const META_KEY: &[u8] = b"m";

fn page_key(page: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'p';
    k[1..].copy_from_slice(&page.to_be_bytes());
    k
}

/// The server half of Kerschbaum-Tueno: the array in pages of `per_page`
/// slots (`page_size / 56`, at least 1, fixed when the store is created).
pub struct KtServer {
    store: Arc<dyn Store>,
    meta: Meta,
}

impl std::fmt::Debug for KtServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KtServer")
            .field("n", &self.meta.n)
            .field("per_page", &self.meta.per_page)
            .finish_non_exhaustive()
    }
}

impl KtServer {
    /// A server over `store`, continuing the array already there.
    pub fn new(store: Arc<dyn Store>, page: &PageConfig) -> Result<Self> {
        page.check()?;
        let meta = match store.get(META_KEY)? {
            Some(bytes) => {
                let m: Meta = sesame_core::wire::decode(&bytes)
                    .map_err(|_| Error::StoreCorrupt("Kerschbaum-Tueno metadata".into()))?;
                if m.per_page == 0 {
                    return Err(Error::StoreCorrupt("Kerschbaum-Tueno metadata".into()));
                }
                m
            }
            None => Meta {
                n: 0,
                per_page: u32::try_from((page.page_size / NOMINAL_SLOT).max(1))
                    .map_err(|_| Error::InvalidArgument("page size".into()))?,
            },
        };
        Ok(KtServer { store, meta })
    }

    fn per_page(&self) -> u64 {
        u64::from(self.meta.per_page)
    }

    fn pages(&self, n: u64) -> u64 {
        n.div_ceil(self.per_page())
    }

    fn read_page(&self, page: u64) -> Result<Vec<u8>> {
        self.store
            .get(&page_key(page))?
            .ok_or_else(|| Error::StoreCorrupt("missing Kerschbaum-Tueno page".into()))
    }

    fn slot(&self, slot: u64) -> Result<Vec<u8>> {
        let bytes = self.read_page(slot / self.per_page())?;
        let page = Page::parse(&bytes)?;
        page.entry((slot % self.per_page()) as usize)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::StoreCorrupt("short Kerschbaum-Tueno page".into()))
    }

    /// Every page of the array, in order.
    fn read_all(&self) -> Result<Vec<Vec<u8>>> {
        let keys: Vec<[u8; 9]> = (0..self.pages(self.meta.n)).map(page_key).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        self.store
            .get_many(&refs)?
            .into_iter()
            .map(|p| p.ok_or_else(|| Error::StoreCorrupt("missing Kerschbaum-Tueno page".into())))
            .collect()
    }

    /// Rewrites the array as `new_n` slots where new slot `j` holds
    /// `source(j)`: `(None, 1)` for the inserted record, or `(Some(i), r)`:
    /// old slot `i`, and the `r - 1` slots after `j` hold the old slots after
    /// `i` (a run, copied as one byte range per old page).
    fn rewrite<F>(&mut self, new_n: u64, extra: &[u8], source: F) -> Result<()>
    where
        F: Fn(u64) -> (Option<u64>, u64),
    {
        let short = || Error::StoreCorrupt("short Kerschbaum-Tueno page".into());
        let old = self.read_all()?;
        let parsed: Vec<Page<'_>> = old.iter().map(|p| Page::parse(p)).collect::<Result<_>>()?;
        let k = self.per_page();
        let mut batch = WriteBatch::new();
        for p in 0..self.pages(new_n) {
            let end = ((p + 1) * k).min(new_n);
            let mut b = PageBuilder::new((end - p * k) as usize);
            let mut j = p * k;
            while j < end {
                match source(j) {
                    (None, _) => {
                        b.push(extra)?;
                        j += 1;
                    }
                    (Some(i), run) => {
                        // Within the new page, the run and the old page.
                        let len = run.min(end - j).min(k - i % k).max(1);
                        let page = parsed.get((i / k) as usize).ok_or_else(short)?;
                        let from = (i % k) as usize;
                        b.push_run(page, from, from + len as usize)?;
                        j += len;
                    }
                }
            }
            batch.put(page_key(p).to_vec(), b.finish()?);
        }
        for p in self.pages(new_n)..self.pages(self.meta.n) {
            batch.delete(page_key(p).to_vec());
        }
        let meta = Meta {
            n: new_n,
            per_page: self.meta.per_page,
        };
        batch.put(META_KEY.to_vec(), sesame_core::wire::encode(&meta)?);
        self.store.write(batch)?;
        self.meta = meta;
        Ok(())
    }

    fn insert(&mut self, position: u64, sealed: Vec<u8>, offset: u64) -> Result<()> {
        let n = self.meta.n;
        if position > n || offset > n {
            return Err(Error::InvalidArgument(format!(
                "insertion at {position} rotated by {offset} in an array of {n}"
            )));
        }
        if sealed.is_empty() || sealed.len() > MAX_RECORD {
            return Err(Error::InvalidArgument("record size".into()));
        }
        let m = n + 1;
        // New slot j holds a'[(j - offset) mod m], where a' is the array
        // with the record inserted at `position`; a' index i runs on
        // (consecutively) until m or `position`.
        self.rewrite(m, &sealed, |j| {
            let i = (j + m - offset) % m;
            match i.cmp(&position) {
                Ordering::Less => (Some(i), position - i),
                Ordering::Equal => (None, 1),
                Ordering::Greater => (Some(i - 1), m - i),
            }
        })
    }

    fn delete(&mut self, slot: u64, offset: u64) -> Result<()> {
        let n = self.meta.n;
        if slot >= n || offset >= (n - 1).max(1) {
            return Err(Error::InvalidArgument(format!(
                "deletion of slot {slot} rotated by {offset} in an array of {n}"
            )));
        }
        let m = n - 1;
        self.rewrite(m, &[], |j| {
            let i = (j + m - offset) % m;
            if i < slot {
                (Some(i), slot - i)
            } else {
                (Some(i + 1), m - i)
            }
        })
    }

    fn load(&mut self, sealed: Vec<Vec<u8>>) -> Result<()> {
        if self.meta.n != 0 {
            return Err(Error::InvalidArgument(
                "a bulk load needs an empty array".into(),
            ));
        }
        if sealed.iter().any(|s| s.is_empty() || s.len() > MAX_RECORD) {
            return Err(Error::InvalidArgument("record size".into()));
        }
        let n = sealed.len() as u64;
        let k = self.per_page() as usize;
        let mut batch = WriteBatch::new();
        for (p, chunk) in sealed.chunks(k).enumerate() {
            let mut b = PageBuilder::new(chunk.len());
            for s in chunk {
                b.push(s)?;
            }
            batch.put(page_key(p as u64).to_vec(), b.finish()?);
        }
        let meta = Meta {
            n,
            per_page: self.meta.per_page,
        };
        batch.put(META_KEY.to_vec(), sesame_core::wire::encode(&meta)?);
        self.store.write(batch)?;
        self.meta = meta;
        Ok(())
    }

    fn range(&self, from: u64, to: u64, wrap: bool) -> Result<Vec<Vec<u8>>> {
        let n = self.meta.n;
        if from > n || to > n || (!wrap && from > to) {
            return Err(Error::InvalidArgument(format!(
                "range {from}..{to} (wrap {wrap}) in an array of {n}"
            )));
        }
        let runs: Vec<(u64, u64)> = if wrap {
            vec![(from, n), (0, to)]
        } else {
            vec![(from, to)]
        };
        let k = self.per_page();
        let mut out = Vec::new();
        for (a, b) in runs {
            let mut j = a;
            while j < b {
                let bytes = self.read_page(j / k)?;
                let page = Page::parse(&bytes)?;
                let end = ((j / k + 1) * k).min(b);
                for s in j..end {
                    let e = page
                        .entry((s % k) as usize)
                        .ok_or_else(|| Error::StoreCorrupt("short Kerschbaum-Tueno page".into()))?;
                    out.push(e.to_vec());
                }
                j = end;
            }
        }
        Ok(out)
    }
}

impl Handler for KtServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Get { slot } => {
                if self.meta.n == 0 {
                    return Ok(Response::Empty);
                }
                if slot >= self.meta.n {
                    return Err(Error::InvalidArgument(format!(
                        "slot {slot} of an array of {}",
                        self.meta.n
                    )));
                }
                Ok(Response::Slot {
                    n: self.meta.n,
                    sealed: self.slot(slot)?,
                })
            }
            Request::Insert {
                position,
                sealed,
                offset,
            } => {
                self.insert(position, sealed, offset)?;
                Ok(Response::Done)
            }
            Request::Delete { slot, offset } => {
                self.delete(slot, offset)?;
                Ok(Response::Done)
            }
            Request::Load { sealed } => {
                self.load(sealed)?;
                Ok(Response::Done)
            }
            Request::Range { from, to, wrap } => Ok(Response::Records(self.range(from, to, wrap)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plaintext simulation of an insertion's binary search over `arr`
    /// (values; ciphertexts are the values' own bytes plus a serial).
    fn sim_insert(arr: &mut Vec<(u64, Vec<u8>)>, value: u64, serial: u64, order: Order) {
        let sealed = [value.to_be_bytes(), serial.to_be_bytes()].concat();
        let pos = if arr.is_empty() {
            0
        } else {
            let r = arr[0].clone();
            let rk = Key::entry(r.0, &r.1);
            let x = Key::entry(value, &sealed);
            let a = arr.clone();
            search(
                a.len() as u64,
                &rk,
                &x,
                order,
                |j| Ok(a[j as usize].clone()),
            )
            .unwrap()
        };
        arr.insert(pos as usize, (value, sealed));
        let rot = (serial * 7 + 3) % arr.len() as u64;
        arr.rotate_right(rot as usize);
    }

    /// Whether `arr` is a rotation of a sorted array.
    fn circular_sorted(arr: &[(u64, Vec<u8>)]) -> bool {
        let n = arr.len();
        (0..n).filter(|&i| arr[i] > arr[(i + 1) % n]).count() <= 1
    }

    #[test]
    fn fixed_order_keeps_the_array_circularly_sorted() {
        let mut arr = Vec::new();
        for (s, v) in [5u64, 1, 9, 5, 5, 0, u64::MAX, 3, 5, 7, 2]
            .into_iter()
            .enumerate()
        {
            sim_insert(&mut arr, v, s as u64, Order::Fixed);
            assert!(circular_sorted(&arr), "{arr:?}");
        }
    }

    #[test]
    fn paper_order_breaks_the_array() {
        // Swapping m and m' (the paper's listing) sends the search the
        // wrong way: inserting 10, 20, 30, 40 leaves the array unsorted.
        let mut arr = Vec::new();
        let mut broken = false;
        for (s, v) in [10u64, 20, 30, 40, 15].into_iter().enumerate() {
            sim_insert(&mut arr, v, s as u64, Order::Paper);
            broken |= !circular_sorted(&arr);
        }
        assert!(broken, "{arr:?}");
    }

    #[test]
    fn pages_round_trip_and_reject_garbage() {
        let mut b = PageBuilder::new(3);
        for e in [&b"ab"[..], b"", b"xyz"] {
            b.push(e).unwrap();
        }
        let bytes = b.finish().unwrap();
        let p = Page::parse(&bytes).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p.entry(0), Some(&b"ab"[..]));
        assert_eq!(p.entry(1), Some(&b""[..]));
        assert_eq!(p.entry(2), Some(&b"xyz"[..]));
        assert_eq!(p.entry(3), None);
        assert!(Page::parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(Page::parse(&[9, 0, 0, 0]).is_err());
        assert!(Page::parse(&[]).is_err());
    }

    #[test]
    fn uniform_stays_in_bounds() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        assert_eq!(below(&mut rng, 0), 0);
        assert_eq!(below(&mut rng, 1), 0);
        assert!((0..100).all(|_| below(&mut rng, 7) < 7));
    }
}
