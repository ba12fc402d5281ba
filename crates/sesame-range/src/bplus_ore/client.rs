//! The client side: each scheme's keys, ciphertexts and query endpoints
//! ([`ClientOrder`]), and the protocol's client ([`BplusClient`]).

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, wire, Channel, Error, Params, Result, SchemeDescriptor};
use sesame_ore::bclo::{Bclo, BcloComparator, BcloParams};
use sesame_ore::cloz::{Cloz, ClozComparator, PairingPph};
use sesame_ore::clww::{Clww, ClwwComparator};
use sesame_ore::fh_ope::{FhOpe, FhOpeParams};
use sesame_ore::insecure::plain::{PlainCiphertext, PlainComparator};
use sesame_ore::insecure::CorrectnessOnlyPph;
use sesame_ore::lewi_wu::{LewiWu, LewiWuComparator, LewiWuParams};
use sesame_ore::{Comparator, LeftRight, OreScheme};
use zeroize::Zeroizing;

use super::{
    ClozHash, FhOpeNumber, FhOpeOrder, Layout, Request, Response, ServerOrder, BCLO, CLOZ,
    CLOZ_INSECURE, CLWW, FH_OPE, LEWI_WU, NONCE_RECORDS, PLAIN, UNIQUE_RECORDS,
};
use crate::api::{bits_param, open_answer, Io, RangeAnswer, RangeClient, Record};
use crate::record::{RecordKey, BLOCK_MESSAGE};

// ---------------------------------------------------------------------
// Client.

pub(super) type FullOf<C> = <<C as ClientOrder>::Server as Comparator>::Ciphertext;
pub(super) type ProbeOf<C> = <<C as ClientOrder>::Server as Comparator>::Left;
pub(super) type StoredOf<C> = <<C as ClientOrder>::Server as Comparator>::Right;
/// A request of the protocol of `C`.
type RequestOf<C> = Request<FullOf<C>, ProbeOf<C>, StoredOf<C>>;

/// A scheme's client side: keys (and state) and how values become
/// ciphertexts and query endpoints.
pub trait ClientOrder: Send + Sized + 'static {
    /// The server's comparison.
    type Server: ServerOrder;

    /// The protocol's descriptor.
    fn descriptor() -> &'static SchemeDescriptor;

    /// Whether records are sealed (all but the baseline).
    fn sealed() -> bool {
        true
    }

    /// Names of the scheme's own parameters (besides `bits`, `payload`).
    fn param_names() -> &'static [&'static str] {
        &[]
    }

    /// Fresh keys for `bits`-bit values; returns the scheme and
    /// [`Layout::extra`].
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)>;

    /// Keys and state saved by [`ClientOrder::save`].
    fn restore(bytes: &[u8]) -> Result<Self>;

    /// Keys and state.
    fn save(&self) -> Result<Zeroizing<Vec<u8>>>;

    /// Bytes of the scheme's key (32 unless it has none).
    fn key_bytes() -> u64 {
        32
    }

    /// Bits of state beyond the keys.
    fn state_bits(&self) -> u64 {
        0
    }

    /// The ciphertext an insertion of `v` sends.
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FullOf<Self>>;

    /// Whether the scheme's stored keys carry a 16-byte nonce the client
    /// may choose ([`ClientOrder::encrypt_with_nonce`]), so that a record
    /// can travel in it ([`Sealing::Nonce`]): Lewi-Wu.
    fn nonce_records() -> bool {
        false
    }

    /// The ciphertext of `v` under `nonce`, which the caller makes
    /// unpredictable and never repeats (for schemes of
    /// [`ClientOrder::nonce_records`]).
    fn encrypt_with_nonce(&mut self, _v: u64, _nonce: &[u8; 16]) -> Result<FullOf<Self>> {
        Err(Error::Unsupported(format!(
            "{} stores no nonce a record could travel in",
            Self::descriptor().title
        )))
    }

    /// The query ciphertext of the endpoint `v`, for schemes that encrypt
    /// a query's endpoints one by one (all but FH-OPE, which overrides
    /// [`ClientOrder::probes`] instead).
    fn probe(&mut self, _rng: &mut dyn CryptoRngCore, _v: u64) -> Result<ProbeOf<Self>> {
        Err(Error::Unsupported(format!(
            "{} encrypts query intervals, not endpoints",
            Self::descriptor().title
        )))
    }

    /// Query ciphertexts for `[lo, hi]` (`lo <= hi`); `None` when the
    /// scheme knows the range is empty. The default probes each endpoint.
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ProbeOf<Self>, ProbeOf<Self>)>> {
        Ok(Some((self.probe(rng, lo)?, self.probe(rng, hi)?)))
    }

    /// The re-encoding the server must apply before the next request.
    fn take_reencoding(&mut self) -> Option<Vec<(u64, u64)>> {
        None
    }

    /// Whether the server stores a part of each ciphertext that is
    /// semantically secure on its own (Lewi-Wu's and CLOZ's right halves):
    /// a build then sends that part alone (`Request::AppendStored`), and
    /// no left half of a built value reaches the server.
    fn stores_right_halves() -> bool {
        false
    }

    /// Whether a build may send its ciphertexts sorted by value in one go
    /// (not FH-OPE, whose encryption of a value depends on the values
    /// encrypted before it and may re-encode the stored ones).
    fn bulk() -> bool {
        true
    }
}

/// Whether records of `bits`-bit values and `payload`-byte payloads fit
/// in a nonce ([`Sealing::Nonce`]) of a scheme that `holds_nonces`.
pub fn nonce_fits(holds_nonces: bool, bits: u32, payload: u32) -> bool {
    holds_nonces
        && (payload as usize).saturating_add(crate::record::value_bytes(bits)) <= BLOCK_MESSAGE
}

/// Bytes of sealed records per `Append` round of a build (well under a
/// network message's limit).
pub const BULK_BYTES: usize = 4 << 20;

/// The methods of a [`ClientOrder`] that are those of its [`OreScheme`]:
/// `restore` and `save` (its keys and state), and `encrypt` where an
/// insertion sends the scheme's full ciphertext.
macro_rules! ore_client_methods {
    (restore, save) => {
        fn restore(bytes: &[u8]) -> Result<Self> {
            <Self as OreScheme>::restore(bytes)
        }
        fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
            OreScheme::save(self)
        }
    };
    (restore, save, encrypt) => {
        ore_client_methods!(restore, save);
        fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FullOf<Self>> {
            OreScheme::encrypt(self, rng, v)
        }
    };
}

/// The baseline: values in the clear.
#[derive(Debug)]
pub struct PlainClient;

impl ClientOrder for PlainClient {
    type Server = PlainComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &PLAIN
    }
    fn sealed() -> bool {
        false
    }
    fn key_bytes() -> u64 {
        0
    }
    fn generate(_rng: &mut dyn CryptoRngCore, _params: &Params, _bits: u32) -> Result<(Self, u32)> {
        Ok((PlainClient, 0))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        if !bytes.is_empty() {
            return Err(Error::Malformed("plain B+ tree state is empty".into()));
        }
        Ok(PlainClient)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        Ok(Zeroizing::new(Vec::new()))
    }
    fn encrypt(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<PlainCiphertext> {
        Ok(PlainCiphertext(v))
    }
    fn probe(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<ProbeOf<Self>> {
        Ok(PlainCiphertext(v))
    }
}

impl ClientOrder for Bclo {
    type Server = BcloComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &BCLO
    }
    fn param_names() -> &'static [&'static str] {
        &["range"]
    }
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let range_bits = params.get_or("range", 48u32.max(bits))?;
        let scheme = Bclo::generate(rng, BcloParams { bits, range_bits })?;
        Ok((scheme, range_bits))
    }
    ore_client_methods!(restore, save, encrypt);
    fn probe(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<ProbeOf<Self>> {
        OreScheme::encrypt(self, rng, v)
    }
}

impl ClientOrder for Clww {
    type Server = ClwwComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &CLWW
    }
    fn generate(rng: &mut dyn CryptoRngCore, _params: &Params, bits: u32) -> Result<(Self, u32)> {
        Ok((Clww::generate(rng, bits)?, 0))
    }
    ore_client_methods!(restore, save, encrypt);
    fn probe(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<ProbeOf<Self>> {
        self.encrypt_u64(v)
    }
}

impl ClientOrder for LewiWu {
    type Server = LewiWuComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &LEWI_WU
    }
    fn stores_right_halves() -> bool {
        true
    }
    fn param_names() -> &'static [&'static str] {
        &["block"]
    }
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let block_bits = params.get_or("block", 2u32)?;
        Ok((
            LewiWu::generate(rng, LewiWuParams { bits, block_bits })?,
            block_bits,
        ))
    }
    ore_client_methods!(restore, save, encrypt);
    fn probe(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<ProbeOf<Self>> {
        self.encrypt_left_only(v)
    }
    fn nonce_records() -> bool {
        true
    }
    fn encrypt_with_nonce(&mut self, v: u64, nonce: &[u8; 16]) -> Result<FullOf<Self>> {
        self.encrypt_full_with_nonce(v, nonce)
    }
}

/// CLOZ protocol descriptors by hash function.
pub trait ClozProtocol: ClozHash {
    /// The protocol's descriptor.
    fn protocol_descriptor() -> &'static SchemeDescriptor;
}

impl ClozProtocol for PairingPph {
    fn protocol_descriptor() -> &'static SchemeDescriptor {
        &CLOZ
    }
}

impl ClozProtocol for CorrectnessOnlyPph {
    fn protocol_descriptor() -> &'static SchemeDescriptor {
        &CLOZ_INSECURE
    }
}

impl<P: ClozProtocol> ClientOrder for Cloz<P> {
    type Server = ClozComparator<P>;

    fn descriptor() -> &'static SchemeDescriptor {
        P::protocol_descriptor()
    }
    fn stores_right_halves() -> bool {
        true
    }
    fn generate(rng: &mut dyn CryptoRngCore, _params: &Params, bits: u32) -> Result<(Self, u32)> {
        Ok((Cloz::generate(rng, bits)?, 0))
    }
    ore_client_methods!(restore, save, encrypt);
    fn probe(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<ProbeOf<Self>> {
        LeftRight::encrypt_left(self, rng, v)
    }
}

/// Where a query endpoint falls among FH-OPE ciphertexts: the extreme
/// ciphertext of the value if it was encrypted, else the ciphertext a new
/// encryption would get (computed on a copy of the state, and strictly
/// between those of the smaller and the larger values). `None` when the
/// copy had to rebalance.
pub(super) fn fh_bound(
    scheme: &FhOpe,
    scratch: &mut Option<FhOpe>,
    rng: &mut dyn CryptoRngCore,
    x: u64,
    lower: bool,
) -> Result<Option<u64>> {
    if let Some((min, max)) = scheme.ciphertext_range(x) {
        return Ok(Some(if lower { min } else { max }));
    }
    let copy = scratch.get_or_insert_with(|| {
        let mut copy = scheme.clone();
        // A re-encoding pending on the original is not the copy's.
        let _ = copy.take_reencoding();
        copy
    });
    let c = copy.encrypt_u64(rng, x)?;
    if copy.take_reencoding().is_some() {
        return Ok(None);
    }
    Ok(Some(c))
}

impl ClientOrder for FhOpe {
    type Server = FhOpeOrder;

    fn descriptor() -> &'static SchemeDescriptor {
        &FH_OPE
    }
    fn param_names() -> &'static [&'static str] {
        &["cipher_bits"]
    }
    fn key_bytes() -> u64 {
        0
    }
    fn generate(_rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let cipher_bits = params.get_or("cipher_bits", 64u32)?;
        Ok((FhOpe::new(FhOpeParams { bits, cipher_bits })?, cipher_bits))
    }
    ore_client_methods!(restore, save);
    fn state_bits(&self) -> u64 {
        OreScheme::state_bits(self)
    }
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FhOpeNumber> {
        self.encrypt_u64(rng, v).map(FhOpeNumber)
    }
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(FhOpeNumber, FhOpeNumber)>> {
        if self.is_empty() {
            return Ok(None);
        }
        for _ in 0..2 {
            let mut scratch = None;
            let a = fh_bound(self, &mut scratch, rng, lo, true)?;
            let b = fh_bound(self, &mut scratch, rng, hi, false)?;
            if let (Some(a), Some(b)) = (a, b) {
                if a > b {
                    // `lo == hi`, never encrypted: nothing lies between.
                    return Ok(None);
                }
                return Ok(Some((FhOpeNumber(a), FhOpeNumber(b))));
            }
            // The copy ran out of room: rebalance for real (the server
            // receives the re-encoding first) and try again.
            self.rebalance()?;
        }
        Err(Error::Unsupported(
            "FH-OPE ciphertext range exhausted even after rebalancing".into(),
        ))
    }
    fn take_reencoding(&mut self) -> Option<Vec<(u64, u64)>> {
        FhOpe::take_reencoding(self).map(|r| r.changes)
    }
    fn bulk() -> bool {
        false
    }
}

/// How a client seals its records (the `seal` parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sealing {
    /// Under a random nonce, stored with each record: any payloads, the
    /// same pair any number of times (the default).
    Random,
    /// The unique form ([`RecordKey::seal_unique`]): the value in the
    /// bytes its width needs and no stored nonce, for a caller that
    /// inserts each (value, payload) pair at most once in the index's
    /// life (a table's record identifiers). A deletion is then one round.
    Unique,
    /// In the ciphertext's nonce ([`RecordKey::seal_block`]: one AES-256
    /// block over the value, the payload and at least six bytes of
    /// redundancy, used as a Lewi-Wu right half's nonce): no bytes of the
    /// record's own in the tree. For the same callers as
    /// [`Sealing::Unique`], on schemes of [`ClientOrder::nonce_records`],
    /// with payloads of exactly the layout's `payload` bytes and at most
    /// [`BLOCK_MESSAGE`] bytes of value and payload.
    Nonce,
}

impl std::str::FromStr for Sealing {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "random" => Ok(Sealing::Random),
            "unique" => Ok(Sealing::Unique),
            "nonce" => Ok(Sealing::Nonce),
            _ => Err(Error::InvalidArgument(format!(
                "seal={s:?}: expected random, unique or nonce"
            ))),
        }
    }
}

/// The saved state of a client that seals under random nonces: the
/// form every build wrote before the unique form, and still written for
/// such a client.
#[derive(Serialize, Deserialize)]
pub(super) struct SavedClient {
    protocol: String,
    bits: u32,
    extra: u32,
    payload: u32,
    record_key: [u8; 32],
    scheme: Vec<u8>,
}

impl Drop for SavedClient {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.record_key);
        zeroize::Zeroize::zeroize(&mut self.scheme);
    }
}

/// The saved state of a client of another [`Sealing`]: [`SavedClient`]
/// and the sealing after it (one byte more, so neither form decodes as
/// the other: the encoding refuses trailing bytes and a missing field).
#[derive(Serialize, Deserialize)]
struct SavedSealing {
    client: SavedClient,
    sealing: Sealing,
}

/// The client half of a B+ tree protocol.
pub struct BplusClient<C: ClientOrder> {
    scheme: C,
    record_key: RecordKey,
    layout: Layout,
    sealing: Sealing,
}

impl<C: ClientOrder> std::fmt::Debug for BplusClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BplusClient")
            .field("protocol", &C::descriptor().name)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl<C: ClientOrder> BplusClient<C> {
    /// A client with fresh keys. Parameters: `bits` (value width, default
    /// 32), `payload` (record bytes leaves are sized for, default 16),
    /// `seal` ([`Sealing`]: `random`, the default, or `unique`) and the
    /// scheme's own (see [`protocols`](super::protocols)).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        let mut known = vec!["bits", "payload", "seal"];
        known.extend_from_slice(C::param_names());
        params.only(C::descriptor().name, &known)?;
        let bits = bits_param(params)?;
        let payload: u32 = params.get_or("payload", 16)?;
        let sealing: Sealing = params.get_or("seal", Sealing::Random)?;
        let (scheme, extra) = C::generate(rng, params, bits)?;
        if sealing == Sealing::Nonce && !nonce_fits(C::nonce_records(), bits, payload) {
            return Err(Error::InvalidArgument(format!(
                "seal=nonce needs a scheme whose ciphertexts carry a nonce (Lewi-Wu) and at \
                 most {BLOCK_MESSAGE} bytes of value and payload; {} with {bits}-bit values \
                 and {payload}-byte payloads",
                C::descriptor().title
            )));
        }
        let unique = C::sealed() && sealing != Sealing::Random && payload <= 1 << 20;
        let flags = match (unique, sealing) {
            (false, _) => 0,
            (true, Sealing::Nonce) => UNIQUE_RECORDS | NONCE_RECORDS,
            (true, _) => UNIQUE_RECORDS,
        };
        let layout = Layout {
            bits,
            extra,
            payload: payload | flags,
        };
        layout
            .check()
            .map_err(|_| Error::InvalidArgument(format!("invalid parameters {layout:?}")))?;
        Ok(BplusClient {
            scheme,
            record_key: RecordKey::generate(rng),
            layout,
            sealing,
        })
    }

    /// A client from [`RangeClient::save_state`]'s bytes.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let (saved, sealing) = match wire::decode::<SavedSealing>(bytes) {
            Ok(s) => (s.client, s.sealing),
            Err(_) => (wire::decode::<SavedClient>(bytes)?, Sealing::Random),
        };
        if saved.protocol != C::descriptor().name {
            return Err(Error::Malformed(format!(
                "state of {}, not {}",
                saved.protocol,
                C::descriptor().name
            )));
        }
        let layout = Layout {
            bits: saved.bits,
            extra: saved.extra,
            payload: saved.payload,
        };
        layout
            .check()
            .map_err(|_| Error::Malformed("impossible saved layout".into()))?;
        Ok(BplusClient {
            scheme: C::restore(&saved.scheme)?,
            record_key: RecordKey::from_bytes(&saved.record_key)?,
            layout,
            sealing,
        })
    }

    /// How this client seals its records.
    pub fn sealing(&self) -> Sealing {
        self.sealing
    }

    fn aad() -> &'static [u8] {
        C::descriptor().name.as_bytes()
    }

    /// Bytes of a value in a record of the unique form.
    fn value_bytes(&self) -> usize {
        crate::record::value_bytes(self.layout.bits)
    }

    /// Whether a record names one entry without a query first: the
    /// baseline's plain records, the unique form and records in the nonce
    /// are deterministic.
    fn deterministic(&self) -> bool {
        !C::sealed() || self.sealing != Sealing::Random
    }

    /// The record of (`value`, `data`) in the block form, the nonce of
    /// its ciphertext ([`Sealing::Nonce`]); a payload of another length
    /// than the layout's is refused.
    fn seal_block(&self, value: u64, data: &[u8]) -> Result<[u8; 16]> {
        if data.len() != self.layout.payload_bytes() {
            return Err(Error::InvalidArgument(format!(
                "this index's records travel in nonces and take payloads of exactly {} bytes, \
                 not {}",
                self.layout.payload_bytes(),
                data.len()
            )));
        }
        self.record_key.seal_block(value, self.value_bytes(), data)
    }

    /// The ciphertext and the record an insertion of (`value`, `data`)
    /// sends.
    fn entry(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        value: u64,
        data: &[u8],
    ) -> Result<(FullOf<C>, Vec<u8>)> {
        if self.sealing == Sealing::Nonce {
            let nonce = Zeroizing::new(self.seal_block(value, data)?);
            return Ok((self.scheme.encrypt_with_nonce(value, &nonce)?, Vec::new()));
        }
        let ciphertext = self.scheme.encrypt(rng, value)?;
        Ok((ciphertext, self.seal(rng, value, data)?))
    }

    fn seal(&self, rng: &mut dyn CryptoRngCore, value: u64, data: &[u8]) -> Result<Vec<u8>> {
        if C::sealed() {
            match self.sealing {
                Sealing::Random => self.record_key.seal(rng, Self::aad(), value, data),
                Sealing::Unique => {
                    self.record_key
                        .seal_unique(Self::aad(), value, self.value_bytes(), data)
                }
                Sealing::Nonce => self.seal_block(value, data).map(|b| b.to_vec()),
            }
        } else {
            let mut plain = Vec::with_capacity(8 + data.len());
            plain.extend_from_slice(&value.to_be_bytes());
            plain.extend_from_slice(data);
            Ok(plain)
        }
    }

    fn open(&self, record: &[u8]) -> Result<(u64, Vec<u8>)> {
        if C::sealed() {
            match self.sealing {
                Sealing::Random => self.record_key.open(Self::aad(), record),
                Sealing::Unique => {
                    self.record_key
                        .open_unique(Self::aad(), self.value_bytes(), record)
                }
                Sealing::Nonce => self.record_key.open_block(
                    self.value_bytes(),
                    self.layout.payload_bytes(),
                    record,
                ),
            }
        } else {
            let (value, data) = record
                .split_first_chunk::<8>()
                .ok_or_else(|| Error::Protocol("plain record shorter than 8 bytes".into()))?;
            Ok((u64::from_be_bytes(*value), data.to_vec()))
        }
    }

    fn send(&self, channel: &mut dyn Channel, request: &RequestOf<C>) -> Result<Response> {
        channel::call(channel, request)
    }

    /// Sends the pending FH-OPE re-encoding, if any.
    fn flush_reencoding(&mut self, channel: &mut dyn Channel) -> Result<()> {
        if let Some(changes) = self.scheme.take_reencoding() {
            let request = Request::Reencode {
                layout: self.layout,
                changes,
            };
            self.update(channel, &request)?;
        }
        Ok(())
    }

    /// Sends an update; the server answers [`Response::Done`].
    fn update(&self, channel: &mut dyn Channel, request: &RequestOf<C>) -> Result<()> {
        match self.send(channel, request)? {
            Response::Done => Ok(()),
            other => Err(Error::unexpected("B+ tree", &other)),
        }
    }

    /// The sealed records of `[lo, hi]` (`lo <= hi`), with the endpoints
    /// sent.
    #[allow(clippy::type_complexity)]
    fn fetch(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ProbeOf<C>, ProbeOf<C>, Vec<Vec<u8>>)>> {
        let probes = self.scheme.probes(rng, lo, hi)?;
        self.flush_reencoding(channel)?;
        let Some((a, b)) = probes else {
            return Ok(None);
        };
        let request = Request::Query {
            layout: self.layout,
            lo: a,
            hi: b,
        };
        let records = match self.send(channel, &request)? {
            Response::Records(records) => records,
            other => return Err(Error::unexpected("B+ tree", &other)),
        };
        let Request::Query { lo: a, hi: b, .. } = request else {
            return Err(Error::Protocol("request changed".into()));
        };
        Ok(Some((a, b, records)))
    }
}

impl<C: ClientOrder> RangeClient for BplusClient<C> {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        C::descriptor()
    }

    fn seals_records(&self) -> bool {
        C::sealed()
    }

    fn payload_len(&self) -> Option<usize> {
        (self.sealing == Sealing::Nonce).then(|| self.layout.payload_bytes())
    }

    fn bits(&self) -> u32 {
        self.layout.bits
    }

    /// Sorts the records by value and sends them in rounds of about
    /// [`BULK_BYTES`] (`Append`): the server fills the tree bottom up,
    /// each page written once. The server sees the same ciphertexts as
    /// insertions one by one would send it (so the same order of the
    /// values), in value order instead of the caller's, and a tree whose
    /// shape depends on the number of records only. Where the tree
    /// stores right halves only, the build sends those alone
    /// (`AppendStored`): the server learns the values' order from the
    /// positions, and none of the left halves' leakage.
    fn build_checked(&mut self, mut io: Io<'_>, records: &[Record]) -> Result<()> {
        if !C::bulk() {
            for (value, data) in records {
                self.insert_checked(io.reborrow(), *value, data)?;
            }
            return Ok(());
        }
        let Io { rng, channel } = io;
        let mut order: Vec<&Record> = records.iter().collect();
        order.sort_by_key(|r| r.0);
        let halves = C::stores_right_halves();
        let (mut entries, mut stored) = (Vec::new(), Vec::new());
        let mut bytes = 0usize;
        let mut rest = order.into_iter().peekable();
        while let Some((value, data)) = rest.next() {
            let (ciphertext, record) = self.entry(rng, *value, data)?;
            bytes += record.len() + 64;
            if halves {
                stored.push((C::Server::right(&ciphertext), record));
            } else {
                entries.push((ciphertext, record));
            }
            if bytes >= BULK_BYTES || rest.peek().is_none() {
                let request = if halves {
                    Request::AppendStored {
                        layout: self.layout,
                        entries: std::mem::take(&mut stored),
                    }
                } else {
                    Request::Append {
                        layout: self.layout,
                        entries: std::mem::take(&mut entries),
                    }
                };
                bytes = 0;
                self.update(channel, &request)?;
            }
        }
        Ok(())
    }

    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()> {
        let (ciphertext, record) = self.entry(io.rng, value, data)?;
        self.flush_reencoding(io.channel)?;
        let request = Request::Insert {
            layout: self.layout,
            ciphertext,
            record,
        };
        self.update(io.channel, &request)
    }

    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool> {
        let Io { rng, channel } = io;
        if self.sealing == Sealing::Nonce && data.len() != self.layout.payload_bytes() {
            // No entry of this tree has a payload of another length.
            return Ok(false);
        }
        let (lo, hi, record) = if !self.deterministic() {
            // Round 1: the sealed records of [v, v]; pick the pair's.
            let Some((lo, hi, records)) = self.fetch(rng, channel, value, value)? else {
                return Ok(false);
            };
            let mut found = None;
            for r in records {
                let (v, d) = self.open(&r)?;
                if v == value && d == data {
                    found = Some(r);
                    break;
                }
            }
            let Some(record) = found else {
                return Ok(false);
            };
            (lo, hi, record)
        } else {
            // The baseline's records and the unique form are
            // deterministic: one round.
            let Some((lo, hi)) = self.scheme.probes(rng, value, value)? else {
                return Ok(false);
            };
            (lo, hi, self.seal(rng, value, data)?)
        };
        // Round 2 (round 1 for the baseline): delete that entry.
        let request = Request::Delete {
            layout: self.layout,
            lo,
            hi,
            record,
        };
        match self.send(channel, &request)? {
            Response::Deleted(found) => Ok(found),
            other => Err(Error::unexpected("B+ tree", &other)),
        }
    }

    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer> {
        let Some((_, _, sealed)) = self.fetch(io.rng, io.channel, lo, hi)? else {
            return Ok(RangeAnswer::default());
        };
        open_answer(&sealed, lo, hi, |r| self.open(r))
    }

    fn query_writes(&self) -> bool {
        false
    }

    fn client_storage_bytes(&self) -> u64 {
        // The parameters (bits, extra, payload), the keys and the state.
        let record_key = if C::sealed() { 32 } else { 0 };
        12 + record_key + C::key_bytes() + self.scheme.state_bits().div_ceil(8)
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let saved = SavedClient {
            protocol: C::descriptor().name.to_owned(),
            bits: self.layout.bits,
            extra: self.layout.extra,
            payload: self.layout.payload,
            record_key: *self.record_key.to_bytes(),
            scheme: self.scheme.save()?.to_vec(),
        };
        match self.sealing {
            // The form of earlier builds, which they still read.
            Sealing::Random => wire::encode(&saved),
            sealing => wire::encode(&SavedSealing {
                client: saved,
                sealing,
            }),
        }
    }
}
