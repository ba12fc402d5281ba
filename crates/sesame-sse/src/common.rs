//! Building blocks shared by the static schemes: per-keyword keys, counter
//! blocks, fixed-size blocks of identifiers and their encryption.

use rand_core::CryptoRngCore;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Result, Store, WriteBatch};
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};
use zeroize::Zeroize;

use crate::api::DocId;

/// Implements `Debug` for a message type as its type name and encoded
/// size, never its contents: requests carry search tokens, labels, keys
/// and sealed values, which must not reach a log or an error message by a
/// stray `{:?}`.
macro_rules! redacted_debug {
    ($t:ty) => {
        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match sesame_core::wire::encode(self) {
                    Ok(bytes) => write!(
                        f,
                        "{} ({} bytes, contents redacted)",
                        core::any::type_name::<Self>(),
                        bytes.len()
                    ),
                    Err(_) => write!(f, "{} (contents redacted)", core::any::type_name::<Self>()),
                }
            }
        }
    };
}
pub(crate) use redacted_debug;

/// The registry entry of a keyword scheme: its descriptor and parameters,
/// a client from `Client::new(rng, params, extra…)` or
/// `Client::restore(bytes, extra…)`, and a server from
/// `Server::new(store)`, where `extra` are the arguments that choose a
/// variant (SUISE2's prefixes).
macro_rules! keyword_scheme {
    ($descriptor:expr, $params:expr, $client:ident, $server:ident $(, $extra:expr)*) => {
        $crate::api::KeywordScheme {
            descriptor: $descriptor,
            params: $params,
            new_client: |rng, params| Ok(Box::new($client::new(rng, params $(, $extra)*)?)),
            restore_client: |bytes| Ok(Box::new($client::restore(bytes $(, $extra)*)?)),
            new_server: Some(|store, _| {
                Ok(Box::new(sesame_core::Typed($server::new(store))))
            }),
        }
    };
}
pub(crate) use keyword_scheme;

/// A sealed value as it crosses the channel: the same bytes on the wire
/// as a `Vec<u8>` (a length, then the bytes), but encoded and decoded in
/// one copy instead of byte by byte.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Sealed(pub Vec<u8>);

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealed({} bytes)", self.0.len())
    }
}

impl std::ops::Deref for Sealed {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Sealed {
    fn from(bytes: Vec<u8>) -> Self {
        Sealed(bytes)
    }
}

impl From<Sealed> for Vec<u8> {
    fn from(sealed: Sealed) -> Self {
        sealed.0
    }
}

// A byte string on the wire, copied in one piece
// (`sesame_core::wire::bytes`: the same bytes as a plain `Vec<u8>`).
impl Serialize for Sealed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        sesame_core::wire::bytes::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Sealed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        sesame_core::wire::bytes::deserialize(d).map(Sealed)
    }
}

/// Fills the unused slots of a block. No document may have this identifier.
pub const PAD: DocId = DocId::MAX;

/// Bytes per identifier in a block.
pub const ID_BYTES: usize = 8;

/// Domain tags of the 16-byte PRF inputs, so that no two uses of one key
/// ever evaluate the PRF on the same block.
#[derive(Clone, Copy)]
#[repr(u8)]
pub enum Tag {
    /// Dictionary label of entry `c`.
    Label = 1,
    /// Keystream of dictionary entry `c`.
    Entry = 2,
    /// Keystream of array block at position `c` (2Lev).
    Array = 3,
}

/// The 16-byte PRF input for (`tag`, `c`, `j`).
#[inline]
pub fn block(tag: Tag, c: u64, j: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0] = tag as u8;
    b[1..9].copy_from_slice(&c.to_le_bytes());
    b[9..13].copy_from_slice(&j.to_le_bytes());
    b
}

/// The two per-keyword keys of Cash et al.: K1 derives labels, K2 encrypts
/// values. Both come from one HMAC-SHA256 of the keyword under the master
/// key.
#[derive(Clone, Serialize, Deserialize)]
pub struct KeywordKeys {
    /// Label key.
    pub k1: [u8; 16],
    /// Value key.
    pub k2: [u8; 16],
}

impl Drop for KeywordKeys {
    fn drop(&mut self) {
        self.k1.zeroize();
        self.k2.zeroize();
    }
}

impl std::fmt::Debug for KeywordKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeywordKeys([redacted])")
    }
}

impl KeywordKeys {
    /// The keys of `keyword` under `master`.
    pub fn derive(master: &HmacPrf, keyword: &[u8]) -> Self {
        let mut out = master.eval_bytes(keyword);
        let mut k1 = [0u8; 16];
        let mut k2 = [0u8; 16];
        k1.copy_from_slice(&out[..16]);
        k2.copy_from_slice(&out[16..]);
        out.zeroize();
        KeywordKeys { k1, k2 }
    }

    /// The label PRF.
    pub fn label_prf(&self) -> Aes128Prf {
        Aes128Prf::new(&Key::from_bytes(self.k1))
    }

    /// The value PRF.
    pub fn value_prf(&self) -> Aes128Prf {
        Aes128Prf::new(&Key::from_bytes(self.k2))
    }
}

/// Labels of entries `from..from + n` under the label PRF.
pub fn labels(prf: &Aes128Prf, from: u64, n: usize) -> Vec<[u8; 16]> {
    let mut out: Vec<[u8; 16]> = (0..n as u64)
        .map(|i| block(Tag::Label, from + i, 0))
        .collect();
    prf.eval_in_place(&mut out);
    out
}

/// Reads the values stored under the labels `0, 1, 2, …` of `prf` (each
/// label's store key is `key(label)`), in order, up to the first label
/// with no value: `value(c, bytes)` takes each. The labels are derived
/// and read in batches of 4, doubling up to 4096 ([`Store::get_many`]),
/// so a short list costs one read and a long one a logarithmic number.
pub(crate) fn read_labels(
    store: &dyn Store,
    prf: &Aes128Prf,
    key: impl Fn(&[u8; 16]) -> [u8; 17],
    mut value: impl FnMut(u64, Vec<u8>) -> Result<()>,
) -> Result<()> {
    let mut c = 0u64;
    let mut step = 4usize;
    loop {
        let keys: Vec<[u8; 17]> = labels(prf, c, step).iter().map(&key).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        for v in store.get_many(&refs)? {
            let Some(v) = v else {
                return Ok(());
            };
            value(c, v)?;
            c += 1;
        }
        step = (step * 2).min(4096);
    }
}

/// XORs the keystream of (`tag`, `c`) into `data` (encryption and
/// decryption are the same).
pub fn xor_keystream(prf: &Aes128Prf, tag: Tag, c: u64, data: &mut [u8]) {
    // Short values (a single identifier, a small block) take their pad from
    // the stack: this runs once per result on the server's search path.
    const ON_STACK: usize = 8;
    let blocks = data.len().div_ceil(16);
    let mut stack = [[0u8; 16]; ON_STACK];
    let mut heap = Vec::new();
    let pad: &mut [[u8; 16]] = if blocks <= ON_STACK {
        &mut stack[..blocks]
    } else {
        heap.resize(blocks, [0u8; 16]);
        &mut heap
    };
    for (j, p) in pad.iter_mut().enumerate() {
        *p = block(tag, c, j as u32);
    }
    prf.eval_in_place(pad);
    for (d, p) in data.iter_mut().zip(pad.iter().flatten()) {
        *d ^= p;
    }
}

/// Encodes identifiers into a block of `slots` slots, padding with [`PAD`].
pub fn encode_ids(ids: &[DocId], slots: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(slots * ID_BYTES);
    for &id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    for _ in ids.len()..slots {
        out.extend_from_slice(&PAD.to_le_bytes());
    }
    out
}

/// Decodes a block of identifiers, dropping padding; a length that is not
/// a whole number of slots is an error (a corrupt or hostile entry).
pub fn decode_ids(bytes: &[u8], out: &mut Vec<DocId>) -> Result<()> {
    if !bytes.len().is_multiple_of(ID_BYTES) {
        return Err(Error::Protocol(format!(
            "entry of {} bytes is not a block of identifiers",
            bytes.len()
        )));
    }
    out.extend(
        bytes
            .chunks_exact(ID_BYTES)
            .map(|c| {
                let mut b = [0u8; ID_BYTES];
                b.copy_from_slice(c);
                DocId::from_le_bytes(b)
            })
            .filter(|&id| id != PAD),
    );
    Ok(())
}

/// `tag ‖ bytes`: a tagged token (exact keyword or prefix) or a store key
/// of variable length.
pub(crate) fn tagged(tag: u8, w: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(1 + w.len());
    t.push(tag);
    t.extend_from_slice(w);
    t
}

/// The store key `prefix ‖ label`; `M` must be `N + 1` (checked at
/// compile time).
pub fn prefixed<const N: usize, const M: usize>(prefix: u8, label: &[u8; N]) -> [u8; M] {
    const {
        assert!(
            M == N + 1,
            "a prefixed key is one byte longer than its label"
        )
    };
    let mut k = [0u8; M];
    k[0] = prefix;
    k[1..].copy_from_slice(label);
    k
}

/// Adds to `batch` the deletion of every key of `store` that starts with
/// `prefix` (`b""`: the whole index, as a fresh setup's first request
/// does, in the batch that stores its first entries).
pub(crate) fn delete_prefix(
    store: &dyn Store,
    prefix: &[u8],
    batch: &mut WriteBatch,
) -> Result<()> {
    for (k, _) in store.scan_prefix(prefix)? {
        batch.delete(k);
    }
    Ok(())
}

/// Removes every key of `store` that starts with `prefix`, in one batch.
pub(crate) fn clear(store: &dyn Store, prefix: &[u8]) -> Result<()> {
    let mut batch = WriteBatch::new();
    delete_prefix(store, prefix, &mut batch)?;
    store.write(batch)
}

/// Stores each labelled entry under `prefix ‖ label` in one write, after
/// removing the whole index when `reset` (a setup's first request): the
/// put of the schemes whose entries are fixed labels (PiBas, FAST,
/// Diana).
pub(crate) fn put_labelled<const N: usize, V: Into<Vec<u8>>>(
    store: &dyn Store,
    reset: bool,
    prefix: u8,
    entries: Vec<([u8; N], V)>,
) -> Result<()> {
    if reset {
        clear(store, b"")?;
    }
    let mut batch = WriteBatch::with_capacity(entries.len());
    for (label, value) in entries {
        let mut key = Vec::with_capacity(N + 1);
        key.push(prefix);
        key.extend_from_slice(&label);
        batch.put(key, value.into());
    }
    store.write(batch)
}

/// The answer of the schemes whose server stores entries and answers a
/// search with identifiers (PiBas, 2Lev, FAST, Aura, Janus++, SUISE): one
/// type, so the same wire form in each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IdsResponse {
    /// The entries (or the update) are stored.
    Stored,
    /// The identifiers a search found.
    Ids(Vec<DocId>),
}

impl IdsResponse {
    /// The identifiers of a search's answer, or the answer back if it is
    /// not one.
    pub(crate) fn ids(self) -> std::result::Result<Vec<DocId>, Self> {
        match self {
            IdsResponse::Ids(ids) => Ok(ids),
            other => Err(other),
        }
    }

    /// The identifiers of a search's answer, sorted and without
    /// duplicates; another answer is
    /// [`sesame_core::Error::UnexpectedResponse`] naming `scheme`.
    pub(crate) fn sorted_ids(self, scheme: &'static str) -> Result<Vec<DocId>> {
        self.ids()
            .map(normalise)
            .map_err(|other| Error::unexpected(scheme, &other))
    }
}

/// Refuses a document identifier that collides with the padding marker
/// (the check of one update; [`check_ids`] checks a whole index).
pub fn check_doc(doc: DocId) -> Result<()> {
    if doc == PAD {
        return Err(Error::InvalidArgument(format!(
            "document identifier {PAD} is reserved"
        )));
    }
    Ok(())
}

/// Refuses identifiers that collide with the padding marker.
pub fn check_ids(db: &crate::api::Multimap) -> Result<()> {
    if db.values().flatten().any(|&id| id == PAD) {
        return Err(Error::InvalidArgument(format!(
            "document identifier {PAD} is reserved"
        )));
    }
    Ok(())
}

/// The result of a search prepared as requests whose answers carry
/// identifiers (`ids` picks them out of one decoded answer; another kind
/// of answer is [`sesame_core::Error::UnexpectedResponse`]): every
/// identifier, sorted and without duplicates.
pub(crate) fn resolve_ids<R: serde::de::DeserializeOwned + std::fmt::Debug>(
    scheme: &'static str,
    responses: &[Vec<u8>],
    ids: impl Fn(R) -> Result<Vec<DocId>, R>,
) -> sesame_core::Result<crate::query::QueryResult> {
    let mut all = Vec::new();
    for response in responses {
        match ids(sesame_core::wire::decode(response)?) {
            Ok(found) => all.extend(found),
            Err(other) => return Err(sesame_core::Error::unexpected(scheme, &other)),
        }
    }
    Ok(crate::query::QueryResult {
        ids: normalise(all),
        ..crate::query::QueryResult::default()
    })
}

/// A search prepared as the one request `request`.
pub(crate) fn prepared_one(
    request: &impl serde::Serialize,
) -> sesame_core::Result<crate::api::Prepared> {
    Ok(crate::api::Prepared {
        requests: vec![sesame_core::wire::encode(request)?],
        context: Vec::new(),
    })
}

/// A sorted, duplicate-free copy of `ids`.
pub fn normalise(mut ids: Vec<DocId>) -> Vec<DocId> {
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Parses a positive block size parameter.
pub fn positive(params: &sesame_core::Params, name: &str, default: usize) -> Result<usize> {
    let v: usize = params.get_or(name, default)?;
    if v == 0 || v > 1 << 20 {
        return Err(Error::InvalidArgument(format!(
            "parameter {name}={v} must be between 1 and {}",
            1 << 20
        )));
    }
    Ok(v)
}

/// Payload bytes per setup request and per prepared update request: three
/// quarters of [`crate::MAX_PREPARED_REQUEST`], leaving room for the
/// encoding, so that every request fits a server's message limit (the
/// SDK sends each as one message); large enough that a request costs
/// little besides its bytes.
pub const SETUP_CHUNK_BYTES: usize = crate::MAX_PREPARED_REQUEST / 4 * 3;

/// The cores this process may use, asked once: on Linux the answer
/// reads the cgroup's files, several microseconds a call.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(std::num::NonZeroUsize::get)
            .unwrap_or(1)
    })
}

/// `f` over `items`, in order, on every core when there are at least
/// `min_per_thread` items per thread (otherwise on the calling thread).
/// For a client's per-entry cryptography, which reads no mutable state:
/// the primitive calls made on the other threads are counted as the
/// caller's ([`sesame_crypto::counter::absorb`]), so reports do not change.
/// A worker that panics gives an error, not a panic.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    min_per_thread: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use sesame_crypto::counter;
    // Too few items for two threads: no need to ask for the cores.
    if items.len() < 2 * min_per_thread.max(1) {
        return items.iter().map(&f).collect();
    }
    let workers = cores().min(items.len() / min_per_thread.max(1));
    if workers < 2 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(workers);
    let f = &f;
    let parts: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| {
                scope.spawn(move || {
                    counter::measure(|| chunk.iter().map(f).collect::<Result<Vec<R>>>())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let e = Error::Protocol("a client worker thread failed".into());
                    (Err(e), counter::PrimitiveCounts::default())
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for (part, counts) in parts {
        counter::absorb(&counts);
        out.extend(part?);
    }
    Ok(out)
}

/// Encodes `items` as requests of about [`SETUP_CHUNK_BYTES`] of payload
/// each, in order (none for no items): how a prepared update larger than
/// one request is split. Each request must stand alone (idempotent, in any
/// prefix).
pub fn chunked_requests<T, Req: Serialize>(
    items: Vec<T>,
    size: impl Fn(&T) -> usize,
    request: impl Fn(Vec<T>) -> Req,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut rest = items.into_iter().peekable();
    while rest.peek().is_some() {
        let chunk = take_chunk(&mut rest, &size);
        out.push(sesame_core::wire::encode(&request(chunk))?);
    }
    Ok(out)
}

/// Takes items from `rest` until their payload reaches
/// [`SETUP_CHUNK_BYTES`] (at least one item when any is left).
pub fn take_chunk<T>(
    rest: &mut std::iter::Peekable<impl Iterator<Item = T>>,
    size: impl Fn(&T) -> usize,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while bytes < SETUP_CHUNK_BYTES {
        let Some(item) = rest.next() else { break };
        bytes += size(&item);
        out.push(item);
    }
    out
}

/// Uploads `items` in requests of about [`SETUP_CHUNK_BYTES`] each (at
/// least one request, also for no items). `request(reset, chunk)` builds a
/// request, `reset` being true for the first only; `acknowledged` checks
/// each response.
pub fn upload<T, Req, Resp>(
    channel: &mut dyn Channel,
    items: Vec<T>,
    size: impl Fn(&T) -> usize,
    request: impl Fn(bool, Vec<T>) -> Req,
    acknowledged: impl Fn(Resp) -> Result<()>,
) -> Result<()>
where
    Req: Serialize,
    Resp: DeserializeOwned,
{
    let mut reset = true;
    let mut rest = items.into_iter().peekable();
    loop {
        let chunk = take_chunk(&mut rest, &size);
        acknowledged(channel::call(channel, &request(reset, chunk))?)?;
        reset = false;
        if rest.peek().is_none() {
            return Ok(());
        }
    }
}

/// The check of an answer that must be `expected` (a scheme's `Stored`
/// or `Done`): any other is [`Error::unexpected`] of `scheme`.
pub fn answered<Resp: PartialEq + std::fmt::Debug>(
    scheme: &'static str,
    expected: Resp,
) -> impl Fn(Resp) -> Result<()> {
    move |r| {
        if r == expected {
            Ok(())
        } else {
            Err(Error::unexpected(scheme, &r))
        }
    }
}

/// Decodes an encoded answer and checks that it is `expected`
/// ([`answered`]).
pub fn check_answered<Resp: DeserializeOwned + PartialEq + std::fmt::Debug>(
    scheme: &'static str,
    expected: Resp,
    response: &[u8],
) -> Result<()> {
    answered(scheme, expected)(sesame_core::wire::decode(response)?)
}

/// Sends `request` and checks that the answer is `expected`
/// ([`answered`]).
pub fn call_answered<Req: Serialize, Resp: DeserializeOwned + PartialEq + std::fmt::Debug>(
    channel: &mut dyn Channel,
    scheme: &'static str,
    request: &Req,
    expected: Resp,
) -> Result<()> {
    answered(scheme, expected)(channel::call(channel, request)?)
}

/// A uniform value in `0..n` ([`sesame_crypto::prg::uniform_below`]); 0
/// (drawing nothing) when `n` is 0 or 1.
pub fn below(rng: &mut dyn CryptoRngCore, n: u64) -> u64 {
    sesame_crypto::prg::uniform_below(rng, n)
}

/// Shuffles `items` uniformly ([`sesame_crypto::prg::shuffle_uniform`]).
pub fn shuffle<T>(rng: &mut dyn CryptoRngCore, items: &mut [T]) {
    sesame_crypto::prg::shuffle_uniform(rng, items);
}

/// A uniformly random permutation of `0..n`.
pub fn shuffled(rng: &mut dyn CryptoRngCore, n: usize) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n as u64).collect();
    shuffle(rng, &mut v);
    v
}

/// The two label lengths of a scheme whose client may store its entries
/// under short labels (FAST, Diana): its `labels` parameter and the two
/// forms of its saved state.
pub(crate) struct LabelLengths {
    /// The scheme's name, for errors.
    pub scheme: &'static str,
    /// The default length.
    pub long: usize,
    /// The short one.
    pub short: usize,
}

/// A saved state of a client of [`LabelLengths`]: of long labels (the
/// encoding of earlier builds) or of short ones.
pub(crate) enum Saved<L, S> {
    /// Long labels.
    Long(L),
    /// Short labels.
    Short(S),
}

impl LabelLengths {
    /// Whether `params` chooses short labels (`labels`, the long length
    /// by default); another length is refused.
    pub(crate) fn short(&self, params: &sesame_core::Params) -> Result<bool> {
        match params.get_or("labels", self.long)? {
            n if n == self.long => Ok(false),
            n if n == self.short => Ok(true),
            n => Err(Error::InvalidArgument(format!(
                "{} labels={n}: a label has {} or {} bytes",
                self.scheme, self.long, self.short
            ))),
        }
    }

    /// Decodes a saved state: as `L` (long labels), else as `S`, whose
    /// recorded length (`labels`) must be the short one. Neither form
    /// decodes as the other (the short one has a byte more; the encoding
    /// refuses trailing bytes and a missing field).
    pub(crate) fn restore<L: DeserializeOwned, S: DeserializeOwned>(
        &self,
        bytes: &[u8],
        labels: impl Fn(&S) -> u8,
    ) -> Result<Saved<L, S>> {
        match sesame_core::wire::decode::<L>(bytes) {
            Ok(long) => Ok(Saved::Long(long)),
            Err(full) => {
                let short: S = sesame_core::wire::decode(bytes).map_err(|_| full)?;
                if usize::from(labels(&short)) != self.short {
                    return Err(Error::Malformed(format!(
                        "{} state with labels of {} bytes",
                        self.scheme,
                        labels(&short)
                    )));
                }
                Ok(Saved::Short(short))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_have_the_bytes_of_a_vec() {
        // Every length class of postcard's length prefix, and a value in
        // an option and a tuple, as SDd's messages carry them.
        for len in [0usize, 1, 127, 128, 300, 16_384] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let plain = sesame_core::wire::encode(&(7u64, Some(bytes.clone()))).unwrap();
            let sealed = sesame_core::wire::encode(&(7u64, Some(Sealed(bytes.clone())))).unwrap();
            assert_eq!(plain, sealed, "length {len}");
            let back: (u64, Option<Sealed>) = sesame_core::wire::decode(&plain).unwrap();
            assert_eq!(back.1, Some(Sealed(bytes)));
        }
        // A truncated value is refused, not read past its end.
        let enc = sesame_core::wire::encode(&Sealed(vec![1; 10])).unwrap();
        assert!(sesame_core::wire::decode::<Sealed>(&enc[..enc.len() - 1]).is_err());
    }

    #[test]
    fn id_blocks_round_trip_and_reject_ragged_lengths() {
        let enc = encode_ids(&[1, 2, 3], 5);
        assert_eq!(enc.len(), 40);
        let mut out = Vec::new();
        decode_ids(&enc, &mut out).unwrap();
        assert_eq!(out, vec![1, 2, 3]);
        assert!(decode_ids(&enc[..39], &mut out).is_err());
    }

    #[test]
    fn keystream_is_an_involution_and_depends_on_the_counter() {
        let prf = Aes128Prf::new(&Key::from_bytes([7; 16]));
        let mut a = vec![0u8; 40];
        xor_keystream(&prf, Tag::Entry, 3, &mut a);
        let mut b = vec![0u8; 40];
        xor_keystream(&prf, Tag::Entry, 4, &mut b);
        assert_ne!(a, b);
        xor_keystream(&prf, Tag::Entry, 3, &mut a);
        assert_eq!(a, vec![0u8; 40]);
    }
}
