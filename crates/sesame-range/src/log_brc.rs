//! Logarithmic-BRC: I. Demertzis, S. Papadopoulos, O. Papapetrou,
//! A. Deligiannakis, M. Garofalakis, "Practical Private Range Search
//! Revisited", SIGMOD 2016, with the Best Range Cover of Kiayias et al.
//! (CCS 2013), over PiBas and over 2Lev with the pack extension (Cash et
//! al., NDSS 2014).
//!
//! The client views the value domain `0..2^bits` as a binary tree of
//! `bits + 1` levels (`brc`). A record with value `v` is indexed under the
//! keywords of the `bits + 1` nodes on the path from the leaf of `v` to the
//! root, with a random identifier as its document; the multimap of every
//! record is the index of a static SSE scheme, built in one batch. A query
//! `[lo, hi]` is answered by the Best Range Cover of the interval (at most
//! `2·bits` nodes, disjoint, exactly the interval): the client sends the
//! SSE search tokens of the cover's nodes in one request, and the server
//! runs the SSE search of each token and returns the sealed records of the
//! matching identifiers in the same response (one round).
//!
//! Records are sealed with a [`RecordKey`] and stored by the server under
//! their identifiers, next to the SSE index, in the same store (the SSE
//! index under the key prefix `s`, the records under `r`).
//!
//! The construction is static. Inserts and deletes rebuild: the client
//! fetches every sealed record (one round), applies the change and rebuilds
//! the whole index with fresh keys and fresh identifiers, so an update
//! costs O(N) (the batch-only nature of the construction).
//!
//! See `docs/schemes/log_brc.md` for leakage and deviations.

mod brc;

pub use brc::{best_range_cover, path, Node};

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Meter, Params, Prefixed,
    QueryKind, Result, SchemeDescriptor, SchemeKind, Store, Typed, WriteBatch,
};
use sesame_sse::pibas::PiBasServer;
use sesame_sse::two_lev::TwoLevServer;
use sesame_sse::{DocId, KeywordClient, Multimap};
use zeroize::{Zeroize, Zeroizing};

use crate::api::{
    bits_param, open_answer, split_page, Io, RangeAnswer, RangeClient, RangeProtocol, Record,
};
use crate::paged::PageConfig;
use crate::record::RecordKey;

const LEAKAGE: &str = "Construction: the number of records, the sizes of the sealed records and \
    the SSE scheme's setup leakage (index size). Query: the search pattern of the cover's nodes \
    (a node queried again sends the same token until the next rebuild), the access pattern (the \
    identifiers each node matches, hence the cover's shape through its result sizes, and which \
    records are returned) and the SSE scheme's own search leakage. Updates: a rebuild reveals \
    the new record count and unlinks all identifiers and tokens.";

/// A descriptor of Logarithmic-BRC over one SSE scheme (the two entries
/// differ in name and title only).
const fn descriptor(name: &'static str, title: &'static str) -> SchemeDescriptor {
    SchemeDescriptor {
        name,
        title,
        citation: "I. Demertzis, S. Papadopoulos, O. Papapetrou, A. Deligiannakis, \
                   M. Garofalakis. Practical Private Range Search Revisited. SIGMOD 2016",
        kind: SchemeKind::Range,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Range],
        leakage: LEAKAGE,
        doc: "docs/schemes/log_brc.md",
    }
}

/// Descriptor of Logarithmic-BRC over PiBas.
pub static DESCRIPTOR_PIBAS: SchemeDescriptor =
    descriptor("log-brc-pibas", "Logarithmic-BRC over PiBas");

/// Descriptor of Logarithmic-BRC over 2Lev with the pack extension.
pub static DESCRIPTOR_2LEV: SchemeDescriptor =
    descriptor("log-brc-2lev", "Logarithmic-BRC over 2Lev (pack)");

/// Parameters every Log-BRC protocol accepts besides its SSE ones: the
/// page parameters are read by [`PageConfig::from_params`], not here.
const COMMON_PARAMS: &[&str] = &["bits", "page_size", "cache_size", "cache_policy"];

/// The protocols of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![
        RangeProtocol {
            descriptor: &DESCRIPTOR_PIBAS,
            params: &[
                ("bits", "32 (value width)"),
                (
                    "block",
                    "1 (identifiers per PiBas entry: plain Π_bas; >1 is Π_pack)",
                ),
            ],
            new_client: |rng, params| new_client(rng, Base::PiBas, params),
            restore_client: |bytes| Ok(Box::new(LogBrcClient::restore(bytes)?)),
            new_server: Some(|store, params| new_server(Base::PiBas, store, params)),
        },
        RangeProtocol {
            descriptor: &DESCRIPTOR_2LEV,
            params: &[
                ("bits", "32 (value width)"),
                (
                    "block",
                    "page_size / 8 (identifiers per array block: a block fills a page)",
                ),
                (
                    "b",
                    "(page_size - 1) / 8 (dictionary slots: an entry fits a page)",
                ),
            ],
            new_client: |rng, params| new_client(rng, Base::TwoLev, params),
            restore_client: |bytes| Ok(Box::new(LogBrcClient::restore(bytes)?)),
            new_server: Some(|store, params| new_server(Base::TwoLev, store, params)),
        },
    ]
}

/// A client of the protocol over `base` (what both registry entries make).
fn new_client(
    rng: &mut dyn CryptoRngCore,
    base: Base,
    params: &Params,
) -> Result<Box<dyn RangeClient>> {
    let (params, page) = split_page(params)?;
    Ok(Box::new(LogBrcClient::new(rng, base, &params, &page)?))
}

/// A server of the protocol over `base`; checks the page parameters.
fn new_server(
    base: Base,
    store: Arc<dyn Store>,
    params: &Params,
) -> Result<Box<dyn sesame_core::Service>> {
    split_page(params)?;
    Ok(Box::new(LogBrcServer::service(base, store)))
}

/// The SSE scheme under the range protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Base {
    /// PiBas (Π_bas, or Π_pack with `block` > 1).
    PiBas,
    /// 2Lev with page-sized blocks (the pack layout).
    TwoLev,
}

impl Base {
    fn descriptor(self) -> &'static SchemeDescriptor {
        match self {
            Base::PiBas => &DESCRIPTOR_PIBAS,
            Base::TwoLev => &DESCRIPTOR_2LEV,
        }
    }

    fn scheme(self) -> sesame_sse::KeywordScheme {
        match self {
            Base::PiBas => sesame_sse::pibas::scheme(),
            Base::TwoLev => sesame_sse::two_lev::scheme(),
        }
    }

    /// The SSE parameters from the protocol's, with the page-derived
    /// defaults.
    fn sse_params(self, params: &Params, page: &PageConfig) -> Result<Params> {
        // The SSE schemes cap block sizes at 2^20 slots.
        const CAP: usize = 1 << 20;
        let mut out = Params::new();
        match self {
            Base::PiBas => {
                let block: usize = params.get_or("block", 1)?;
                out.set("block", block);
            }
            Base::TwoLev => {
                let block = (page.page_size / 8).clamp(2, CAP);
                let b = (page.page_size.saturating_sub(1) / 8).clamp(1, CAP);
                let block: usize = params.get_or("block", block)?;
                let b: usize = params.get_or("b", b)?;
                out.set("block", block).set("b", b);
            }
        }
        Ok(out)
    }

    fn known_params(self) -> &'static [&'static str] {
        match self {
            Base::PiBas => &["block"],
            Base::TwoLev => &["block", "b"],
        }
    }

    /// The search token in an SSE search request of this scheme.
    fn token(self, request: &[u8]) -> Result<Token> {
        let bad = || Error::Protocol("the SSE client sent no search request".into());
        match self {
            Base::PiBas => match sesame_core::wire::decode(request)? {
                sesame_sse::pibas::Request::Search { k1, k2 } => Ok(Token { k1, k2 }),
                _ => Err(bad()),
            },
            Base::TwoLev => match sesame_core::wire::decode(request)? {
                sesame_sse::two_lev::Request::Search { k1, k2 } => Ok(Token { k1, k2 }),
                _ => Err(bad()),
            },
        }
    }
}

/// The SSE search token of one node: the keyword's two keys (the same shape
/// in PiBas and 2Lev).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// Label key.
    pub k1: [u8; 16],
    /// Value key.
    pub k2: [u8; 16],
}

impl Drop for Token {
    fn drop(&mut self) {
        self.k1.zeroize();
        self.k2.zeroize();
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([redacted])")
    }
}

/// A Log-BRC request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// One encoded request of the SSE scheme's setup, for the SSE server.
    Index(Vec<u8>),
    /// Stores sealed records under their identifiers; `reset` first
    /// removes every earlier record.
    Records {
        /// Remove the earlier records first.
        reset: bool,
        /// (identifier, sealed record) pairs.
        records: Vec<(DocId, Vec<u8>)>,
    },
    /// The records of the nodes whose search tokens these are.
    Query {
        /// One SSE search token per node of the cover.
        tokens: Vec<Token>,
    },
    /// Every sealed record (the first step of a rebuild).
    FetchAll,
}

/// A Log-BRC response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The SSE server's encoded response to [`Request::Index`].
    Index(Vec<u8>),
    /// The records are stored.
    Stored,
    /// Sealed records.
    Records(Vec<Vec<u8>>),
}

/// A channel that wraps each SSE setup request in [`Request::Index`], so
/// the SSE client's setup runs unchanged through the Log-BRC server.
struct IndexChannel<'a> {
    inner: &'a mut dyn Channel,
}

impl Channel for IndexChannel<'_> {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        match channel::call(self.inner, &Request::Index(request.to_vec()))? {
            Response::Index(bytes) => Ok(bytes),
            other => Err(Error::unexpected("Log-BRC", &other)),
        }
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

/// The persisted client state.
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    #[zeroize(skip)]
    base: Base,
    bits: u32,
    #[zeroize(skip)]
    sse_params: Params,
    sse_state: Vec<u8>,
    record_key: [u8; 32],
    count: u64,
}

/// The client half of Logarithmic-BRC.
pub struct LogBrcClient {
    base: Base,
    bits: u32,
    sse_params: Params,
    sse: Box<dyn KeywordClient>,
    record_key: RecordKey,
    /// Records in the index, to check the server's answer to a fetch.
    count: u64,
}

impl std::fmt::Debug for LogBrcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBrcClient")
            .field("base", &self.base)
            .field("bits", &self.bits)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl LogBrcClient {
    /// A client with fresh keys over `base`. Parameters: `bits` (value
    /// width, default 32) and the SSE scheme's block sizes (see
    /// [`protocols`]); `page` sets the defaults of the 2Lev block sizes.
    pub fn new(
        rng: &mut dyn CryptoRngCore,
        base: Base,
        params: &Params,
        page: &PageConfig,
    ) -> Result<Self> {
        let mut known = COMMON_PARAMS.to_vec();
        known.extend_from_slice(base.known_params());
        params.only(base.descriptor().name, &known)?;
        let bits = bits_param(params)?;
        let sse_params = base.sse_params(params, page)?;
        let sse = (base.scheme().new_client)(rng, &sse_params)?;
        Ok(LogBrcClient {
            base,
            bits,
            sse_params,
            sse,
            record_key: RecordKey::generate(rng),
            count: 0,
        })
    }

    /// A client from [`RangeClient::save_state`]'s bytes.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let state: State = sesame_core::wire::decode(bytes)?;
        if !(1..=64).contains(&state.bits) {
            return Err(Error::Malformed(
                "Log-BRC state with an invalid width".into(),
            ));
        }
        let sse = (state.base.scheme().restore_client)(&state.sse_state)?;
        Ok(LogBrcClient {
            base: state.base,
            bits: state.bits,
            sse_params: state.sse_params.clone(),
            sse,
            record_key: RecordKey::from_bytes(&state.record_key)?,
            count: state.count,
        })
    }

    fn aad(&self) -> &'static [u8] {
        self.base.descriptor().name.as_bytes()
    }

    /// The SSE search token of `node`.
    fn token(&mut self, rng: &mut dyn CryptoRngCore, node: &Node) -> Result<Token> {
        let request = self
            .sse
            .search_token(rng, &node.keyword())?
            .map(Zeroizing::new)
            .ok_or_else(|| Error::Protocol("the SSE client made no search token".into()))?;
        self.base.token(&request)
    }

    /// Every record on the server, opened (one round).
    fn fetch_all(&self, channel: &mut dyn Channel) -> Result<Vec<Record>> {
        let sealed = match channel::call(channel, &Request::FetchAll)? {
            Response::Records(r) => r,
            other => return Err(Error::unexpected("Log-BRC", &other)),
        };
        if sealed.len() as u64 != self.count {
            return Err(Error::Protocol(format!(
                "the server holds {} records, the client indexed {}",
                sealed.len(),
                self.count
            )));
        }
        let aad = self.aad();
        sealed
            .iter()
            .map(|s| self.record_key.open(aad, s))
            .collect()
    }

    /// Builds the index of `records` with fresh keys and identifiers,
    /// replacing whatever the server held.
    fn rebuild(&mut self, io: Io<'_>, records: &[Record]) -> Result<()> {
        let Io { rng, channel } = io;
        let mut sse = (self.base.scheme().new_client)(rng, &self.sse_params)?;
        let record_key = RecordKey::generate(rng);
        let aad = self.aad();
        // Random identifiers: the server sees them in query results, so they
        // must not reveal the records' order or their insertion history.
        let ids = sesame_sse::common::shuffled(rng, records.len());
        let mut db = Multimap::new();
        let mut sealed = Vec::with_capacity(records.len());
        for (&id, (value, data)) in ids.iter().zip(records) {
            for node in path(*value, self.bits) {
                db.entry(node.keyword()).or_default().push(id);
            }
            sealed.push((id, record_key.seal(rng, aad, *value, data)?));
        }
        sse.setup(rng, &mut IndexChannel { inner: channel }, &db)?;
        sealed.sort_unstable_by_key(|r| r.0);
        let mut rest = sealed.into_iter().peekable();
        let mut reset = true;
        loop {
            let chunk = sesame_sse::common::take_chunk(&mut rest, |r| 8 + r.1.len());
            let request = Request::Records {
                reset,
                records: chunk,
            };
            match channel::call(channel, &request)? {
                Response::Stored => {}
                other => return Err(Error::unexpected("Log-BRC", &other)),
            }
            reset = false;
            if rest.peek().is_none() {
                break;
            }
        }
        self.sse = sse;
        self.record_key = record_key;
        self.count = records.len() as u64;
        Ok(())
    }
}

impl RangeClient for LogBrcClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        self.base.descriptor()
    }

    fn seals_records(&self) -> bool {
        true
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    /// Its build writes the whole index: not in pieces.
    fn builds_in_pieces(&self) -> bool {
        false
    }

    /// Builds the whole index in one batch (the construction of the paper).
    fn build_checked(&mut self, io: Io<'_>, records: &[Record]) -> Result<()> {
        self.rebuild(io, records)
    }

    /// Rebuilds with the record added: O(N), see the module docs.
    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()> {
        let mut records = self.fetch_all(io.channel)?;
        records.push((value, data.to_vec()));
        self.rebuild(io, &records)
    }

    /// Rebuilds without one occurrence of the pair: O(N), see the module
    /// docs. An absent pair costs the fetch and no rebuild.
    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool> {
        let mut records = self.fetch_all(io.channel)?;
        let Some(at) = records
            .iter()
            .position(|(v, d)| *v == value && d.as_slice() == data)
        else {
            return Ok(false);
        };
        records.swap_remove(at);
        self.rebuild(io, &records)?;
        Ok(true)
    }

    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer> {
        let cover = best_range_cover(lo, hi, self.bits);
        let mut tokens = cover
            .iter()
            .map(|node| self.token(io.rng, node))
            .collect::<Result<Vec<_>>>()?;
        // The order of the tokens would tell the server which node lies
        // where in the interval.
        sesame_sse::common::shuffle(io.rng, &mut tokens);
        let sealed = match channel::call(io.channel, &Request::Query { tokens })? {
            Response::Records(r) => r,
            other => return Err(Error::unexpected("Log-BRC", &other)),
        };
        let aad = self.aad();
        open_answer(&sealed, lo, hi, |s| self.record_key.open(aad, s))
    }

    /// Two 32-byte keys (the SSE master key and the record key), the record
    /// count and the value width.
    fn query_writes(&self) -> bool {
        false
    }

    fn client_storage_bytes(&self) -> u64 {
        32 + 32 + 8 + 4
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let state = State {
            base: self.base,
            bits: self.bits,
            sse_params: self.sse_params.clone(),
            sse_state: self.sse.save_state()?,
            record_key: *self.record_key.to_bytes(),
            count: self.count,
        };
        sesame_core::wire::encode(&state)
    }
}

/// The SSE server under Log-BRC.
enum SseServer {
    PiBas(PiBasServer),
    TwoLev(TwoLevServer),
}

impl SseServer {
    fn search(&self, token: &Token) -> Result<Vec<DocId>> {
        match self {
            SseServer::PiBas(s) => s.search(token.k1, token.k2),
            SseServer::TwoLev(s) => s.search(token.k1, token.k2),
        }
    }

    fn handle(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        match self {
            SseServer::PiBas(s) => {
                let request = sesame_core::wire::decode(request)?;
                sesame_core::wire::encode(&s.handle(request)?)
            }
            SseServer::TwoLev(s) => {
                let request = sesame_core::wire::decode(request)?;
                sesame_core::wire::encode(&s.handle(request)?)
            }
        }
    }
}

/// Store prefix of the SSE index.
const SSE_PREFIX: &[u8] = b"s";
/// Store prefix of the sealed records.
const RECORD_PREFIX: &[u8] = b"r";

/// The server half of Logarithmic-BRC: the SSE server and the sealed
/// records, both in one store.
pub struct LogBrcServer {
    store: Arc<dyn Store>,
    sse: SseServer,
    records: Prefixed<Arc<dyn Store>>,
}

impl std::fmt::Debug for LogBrcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBrcServer").finish_non_exhaustive()
    }
}

impl LogBrcServer {
    /// A server over `base` keeping everything in `store`.
    pub fn new(base: Base, store: Arc<dyn Store>) -> Self {
        let sse_store: Arc<dyn Store> = Arc::new(Prefixed::new(store.clone(), SSE_PREFIX));
        let sse = match base {
            Base::PiBas => SseServer::PiBas(PiBasServer::new(sse_store)),
            Base::TwoLev => SseServer::TwoLev(TwoLevServer::new(sse_store)),
        };
        LogBrcServer {
            records: Prefixed::new(store.clone(), RECORD_PREFIX),
            store,
            sse,
        }
    }

    /// The server as a [`Service`](sesame_core::Service).
    pub fn service(base: Base, store: Arc<dyn Store>) -> Typed<LogBrcServer> {
        Typed(Self::new(base, store))
    }

    /// The sealed records of the identifiers the tokens match.
    fn query(&self, tokens: &[Token]) -> Result<Vec<Vec<u8>>> {
        let mut ids = Vec::new();
        for token in tokens {
            ids.extend(self.sse.search(token)?);
        }
        // The cover's nodes are disjoint; a repeated token (or a hostile
        // one) must not return a record twice.
        ids.sort_unstable();
        ids.dedup();
        let keys: Vec<[u8; 8]> = ids.iter().map(|id| id.to_be_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        self.records
            .get_many(&refs)?
            .into_iter()
            .zip(&ids)
            .map(|(r, id)| r.ok_or_else(|| Error::Protocol(format!("record {id} is missing"))))
            .collect()
    }
}

impl Handler for LogBrcServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Index(bytes) => Ok(Response::Index(self.sse.handle(&bytes)?)),
            Request::Records { reset, records } => {
                let mut batch = WriteBatch::with_capacity(records.len());
                if reset {
                    for (key, _) in self.records.scan_prefix(b"")? {
                        batch.delete(key);
                    }
                }
                for (id, sealed) in records {
                    batch.put(id.to_be_bytes().to_vec(), sealed);
                }
                self.records.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Query { tokens } => Ok(Response::Records(self.query(&tokens)?)),
            Request::FetchAll => Ok(Response::Records(
                self.records
                    .scan_prefix(b"")?
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect(),
            )),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use sesame_core::{LocalChannel, Service};
    use sesame_store::MemoryStore;

    fn setup(base: Base) -> (LogBrcClient, LocalChannel<Typed<LogBrcServer>>) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut params = Params::new();
        params.set("bits", 8);
        let page = PageConfig::default();
        let client = LogBrcClient::new(&mut rng, base, &params, &page).unwrap();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        (
            client,
            LocalChannel::new(LogBrcServer::service(base, store)),
        )
    }

    #[test]
    fn a_query_is_one_round_and_returns_the_records() {
        for base in [Base::PiBas, Base::TwoLev] {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
            let (mut client, mut ch) = setup(base);
            let records: Vec<Record> = (0..40u64).map(|v| (v * 5, vec![v as u8])).collect();
            client.build(&mut rng, &mut ch, &records).unwrap();
            let span = ch.meter().span();
            let answer = client.query(&mut rng, &mut ch, 10, 37).unwrap();
            assert_eq!(span.finish().rounds, 1);
            let want: Vec<Record> = records
                .iter()
                .filter(|r| (10..=37).contains(&r.0))
                .cloned()
                .collect();
            assert_eq!(answer.records, want);
        }
    }

    #[test]
    fn tokens_do_not_print_and_bad_requests_fail() {
        let t = Token {
            k1: [1; 16],
            k2: [2; 16],
        };
        assert_eq!(format!("{t:?}"), "Token([redacted])");
        let (_, mut ch) = setup(Base::TwoLev);
        let server = ch.service_mut();
        assert!(server.handle(&[0xff, 0, 1]).is_err());
        let bad = sesame_core::wire::encode(&Request::Index(vec![9, 9, 9])).unwrap();
        assert!(server.handle(&bad).is_err());
    }
}
