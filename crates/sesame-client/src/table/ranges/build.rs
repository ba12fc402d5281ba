//! The range indexes' build at the end of an import, on both cores.
//!
//! Each range index is filled from its own pairs in value order
//! ([`RangeIndex::fill_sorted`]), independently of the others, so the
//! indexes are filled side by side ([`fill_all`]): up to `workers`
//! threads each take one index at a time and do its client's work (the
//! merge of its sorted runs, the binding tags, ORE ciphertexts, sealed
//! payloads, the requests' encoding), while the calling thread, which
//! alone holds the backend, opens and commits each index's transactions
//! and runs the server halves, answering each worker's requests in the
//! order that worker sends them. So every index receives exactly the
//! requests, in the same order and committed at the same counts, that a
//! build on the calling thread sends: the server sees of each index what
//! one build of it shows (docs/schemes/bplus_ore.md, "Append"), and for
//! the same random streams the stored index and the client state are
//! byte for byte those of the sequential build
//! (`tests::workers_build_what_the_calling_thread_builds`).
//!
//! Each index draws its randomness (nonces, ORE randomness) from its own
//! ChaCha20 stream, seeded from the table's generator before the build
//! starts, in the order of the table's range fields: which thread runs
//! which index, and when, changes nothing drawn.
//!
//! A calling thread that stops (an error, a panic) ends every worker's
//! wait: each question carries the only sender of its answer
//! (`tests::a_panic_on_the_calling_thread_stops_the_workers`).
//!
//! Memory: each worker holds one index's piece of
//! [`BUILD_PIECE`](super::BUILD_PIECE) records and its merge's blocks, and
//! the calling thread at most one open transaction per worker (each
//! committed every `commit` records), so the build's memory grows with
//! the number of workers, not with the number of records. A crash leaves
//! the indexes marked dirty, rebuilt from the records (module `ranges`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread::ThreadId;

use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRngCore, SeedableRng};
use sesame_core::{Channel, Meter, Params, Service, Store};
use sesame_range::RangeProtocol;
use zeroize::Zeroize;

use super::spill::Pair;
use super::{HostedIndex, PayloadBinder, RangeIndex, RangeState, BUILD_PIECE};
use crate::backend::{Backend, SetupChannel};
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};

/// Threads that fill range indexes side by side: one per core (one
/// core: the build stays on the calling thread).
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// One range index to fill: the index, its place, and its pairs in
/// value order.
pub(crate) struct Fill<'a> {
    /// The index (its client).
    pub index: &'a mut RangeIndex,
    /// Where the backend runs it.
    pub state: &'a RangeState,
    /// Its pairs (encoded value, record identifier) in value order.
    pub pairs: Box<dyn Iterator<Item = Result<Pair>> + Send + 'a>,
}

/// What one index's fill did.
#[derive(Debug)]
pub(crate) struct Filled {
    /// Records added.
    pub added: u64,
    /// The thread that did the index's client work.
    #[cfg_attr(not(test), allow(dead_code))]
    pub thread: ThreadId,
}

/// Where a range index is hosted, apart from its client: what opening
/// its transactions takes while a worker holds the client.
struct Host {
    protocol: RangeProtocol,
    params: Params,
}

impl Host {
    fn of(index: &RangeIndex) -> Result<Host> {
        let name = index.protocol.descriptor.name;
        let protocol = sesame_range::protocol(name).ok_or_else(|| {
            ClientError::InvalidArgument(format!("range protocol {name:?} is not in the registry"))
        })?;
        Ok(Host {
            protocol,
            params: index.params.clone(),
        })
    }
}

impl HostedIndex for Host {
    type State = RangeState;

    fn place(state: &RangeState) -> (&str, u64) {
        RangeIndex::place(state)
    }

    fn scheme(&self) -> &'static str {
        self.protocol.descriptor.name
    }

    fn serve(&self, store: std::sync::Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>> {
        self.protocol.server(store, &self.params)
    }
}

impl RangeIndex {
    /// Fills this index (its place in `state`) with `pairs` (encoded
    /// value, record identifier) given in value order, as a build of all
    /// of them would, without holding them: an empty index is built in
    /// pieces of [`BUILD_PIECE`] records where its protocol
    /// [builds in pieces](sesame_range::RangeClient::builds_in_pieces)
    /// (else in one build of every pair, held in memory); an index that
    /// has records takes them by insertion. The writes go through
    /// transactions that `open` gives, committed every `commit` records:
    /// a crash between two commits leaves the index partly filled, which
    /// the caller's dirty mark repairs (module `ranges`). `progress`
    /// hears of the records sent so far. Returns the records added.
    ///
    /// What the server sees is what one build shows it: the same
    /// ciphertexts in the same (value) order; the pieces and commits
    /// fall at counts of records, which depend on the number of records
    /// only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fill_sorted(
        &mut self,
        open: &mut dyn FnMut() -> Result<Box<dyn SetupChannel>>,
        state: &RangeState,
        binder: Option<&PayloadBinder>,
        rng: &mut dyn CryptoRngCore,
        pairs: &mut dyn Iterator<Item = Result<(u64, DocId)>>,
        commit: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let empty = state.records == 0;
        let mut channel = open()?;
        if empty && !self.client.builds_in_pieces() {
            let mut records = Vec::new();
            for pair in pairs {
                let (v, id) = pair?;
                records.push((v, self.payload(binder, &state.field, id, v)?));
            }
            if !records.is_empty() {
                self.client.build(rng, channel.as_mut(), &records)?;
            }
            channel.commit()?;
            progress(records.len() as u64);
            return Ok(records.len() as u64);
        }
        let commit = commit.max(1);
        let mut piece: Vec<(u64, Vec<u8>)> = Vec::with_capacity(BUILD_PIECE.min(commit));
        let (mut added, mut uncommitted) = (0u64, 0usize);
        loop {
            let next = pairs.next().transpose()?;
            if let Some((v, id)) = next {
                piece.push((v, self.payload(binder, &state.field, id, v)?));
            }
            let full = piece.len() >= BUILD_PIECE.min(commit);
            if !piece.is_empty() && (full || next.is_none()) {
                if empty {
                    self.client.build(rng, channel.as_mut(), &piece)?;
                } else {
                    for (v, payload) in &piece {
                        self.client.insert(rng, channel.as_mut(), *v, payload)?;
                    }
                }
                added += piece.len() as u64;
                uncommitted += piece.len();
                piece.clear();
                progress(added);
                if uncommitted >= commit && next.is_some() {
                    channel.commit()?;
                    channel = open()?;
                    uncommitted = 0;
                }
            }
            if next.is_none() {
                break;
            }
        }
        channel.commit()?;
        Ok(added)
    }
}

/// One index's fill as a worker takes it.
struct Job<'a> {
    /// Its position among the fills.
    k: usize,
    fill: Fill<'a>,
    rng: ChaCha20Rng,
}

/// What a worker asks of the calling thread for index `k`.
struct Ask {
    k: usize,
    op: Op,
    reply: Option<mpsc::Sender<Answer>>,
}

enum Op {
    /// Open a transaction on the index (it has none open).
    Open,
    /// Send a request through the open transaction.
    Call(Vec<u8>),
    /// Commit the open transaction.
    Commit,
    /// Records added so far to the index.
    Progress(u64),
}

enum Answer {
    Opened(Result<()>),
    Called(sesame_core::Result<Vec<u8>>),
    Committed(Result<()>),
}

/// A worker's transaction on index `k`: its requests and its commit
/// go to the calling thread, which holds the real one. Each question
/// carries the only sender of its answer's channel, so that a calling
/// thread that stops (an error, a panic) ends the wait instead of
/// leaving the worker waiting forever.
struct Proxy {
    k: usize,
    asks: mpsc::Sender<Ask>,
    meter: Meter,
}

/// The calling thread stopped answering (it does so only once every
/// worker is done, so this is a fault of the build itself).
fn host_gone() -> &'static str {
    "the range build's calling thread stopped answering; run the same import again \
     (its range indexes are rebuilt from the records)"
}

impl Proxy {
    fn open(k: usize, asks: &mpsc::Sender<Ask>, meter: &Meter) -> Result<Box<dyn SetupChannel>> {
        let proxy = Proxy {
            k,
            asks: asks.clone(),
            meter: meter.clone(),
        };
        match proxy.ask(Op::Open) {
            Some(Answer::Opened(r)) => r.map(|()| Box::new(proxy) as Box<dyn SetupChannel>),
            _ => Err(ClientError::InvalidArgument(host_gone().into())),
        }
    }

    fn ask(&self, op: Op) -> Option<Answer> {
        let (reply, answer) = mpsc::channel();
        self.asks
            .send(Ask {
                k: self.k,
                op,
                reply: Some(reply),
            })
            .ok()?;
        answer.recv().ok()
    }
}

impl Channel for Proxy {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        match self.ask(Op::Call(request.to_vec())) {
            Some(Answer::Called(r)) => r,
            _ => Err(sesame_core::Error::Transport(host_gone().into())),
        }
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}

impl SetupChannel for Proxy {
    fn commit(self: Box<Self>) -> Result<()> {
        match self.ask(Op::Commit) {
            Some(Answer::Committed(r)) => r,
            _ => Err(ClientError::InvalidArgument(host_gone().into())),
        }
    }
}

/// Fills every index of `fills` ([`RangeIndex::fill_sorted`], each from
/// its own pairs), on up to `workers` threads besides the calling one
/// (module documentation; one worker or fewer: on the calling thread,
/// one index after another). Each index's random stream is seeded from
/// `rng` first, in the order of `fills`. `progress` hears of the records
/// added so far, every index together. Returns what each fill did, in
/// the order of `fills`; the first index's error (by that order) if
/// any failed, after every worker stopped (a worker takes no further
/// index once one failed).
pub(crate) fn fill_all(
    backend: &mut dyn Backend,
    fills: Vec<Fill<'_>>,
    binder: Option<&PayloadBinder>,
    rng: &mut dyn CryptoRngCore,
    commit: usize,
    workers: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<Filled>> {
    let mut hosts = Vec::with_capacity(fills.len());
    let mut jobs = Vec::with_capacity(fills.len());
    for (k, fill) in fills.into_iter().enumerate() {
        hosts.push((Host::of(fill.index)?, fill.state));
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        jobs.push(Job {
            k,
            fill,
            rng: ChaCha20Rng::from_seed(seed),
        });
        seed.zeroize();
    }
    if workers <= 1 {
        let mut out = Vec::with_capacity(jobs.len());
        let mut before = 0u64;
        for (mut job, (host, state)) in jobs.into_iter().zip(&hosts) {
            let added = job.fill.index.fill_sorted(
                &mut || host.transaction(backend, state),
                state,
                binder,
                &mut job.rng,
                &mut job.fill.pairs,
                commit,
                &mut |n| progress(before + n),
            )?;
            before += added;
            out.push(Filled {
                added,
                thread: std::thread::current().id(),
            });
        }
        return Ok(out);
    }
    let count = jobs.len();
    let meter = backend.meter().clone();
    let queue = Mutex::new(jobs.into_iter());
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (asks, inbox) = mpsc::channel::<Ask>();
        let mut handles = Vec::new();
        for _ in 0..workers.min(count) {
            let asks = asks.clone();
            let (queue, failed, meter) = (&queue, &failed, &meter);
            handles.push(scope.spawn(move || {
                let mut done = Vec::new();
                while !failed.load(Ordering::SeqCst) {
                    let next = queue.lock().ok().and_then(|mut q| q.next());
                    let Some(mut job) = next else {
                        break;
                    };
                    let k = job.k;
                    let state = job.fill.state;
                    let added = job.fill.index.fill_sorted(
                        &mut || Proxy::open(k, &asks, meter),
                        state,
                        binder,
                        &mut job.rng,
                        &mut job.fill.pairs,
                        commit,
                        &mut |n| {
                            let _ = asks.send(Ask {
                                k,
                                op: Op::Progress(n),
                                reply: None,
                            });
                        },
                    );
                    if added.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    done.push((
                        k,
                        added.map(|added| Filled {
                            added,
                            thread: std::thread::current().id(),
                        }),
                    ));
                }
                done
            }));
        }
        drop(asks);
        // Serve the workers until each is done (every sender dropped).
        let mut open: Vec<Option<Box<dyn SetupChannel>>> = (0..count).map(|_| None).collect();
        let mut added = vec![0u64; count];
        for Ask { k, op, reply } in inbox {
            let (Some(slot), Some((host, state))) = (open.get_mut(k), hosts.get(k)) else {
                continue;
            };
            let answer = match op {
                Op::Open => Answer::Opened(
                    host.transaction(backend, state)
                        .map(|channel| *slot = Some(channel)),
                ),
                Op::Call(request) => Answer::Called(match slot.as_mut() {
                    Some(channel) => channel.call(&request),
                    None => Err(sesame_core::Error::Transport(
                        "a range build sent a request with no transaction open".into(),
                    )),
                }),
                Op::Commit => Answer::Committed(slot.take().map_or(Ok(()), |c| c.commit())),
                Op::Progress(n) => {
                    if let Some(a) = added.get_mut(k) {
                        *a = n;
                    }
                    progress(added.iter().sum());
                    continue;
                }
            };
            if let Some(reply) = reply {
                // A worker that stopped waiting has its own error.
                let _ = reply.send(answer);
            }
        }
        // What a failed fill left uncommitted is dropped.
        drop(open);
        let mut results: Vec<(usize, Result<Filled>)> = Vec::with_capacity(count);
        for handle in handles {
            match handle.join() {
                Ok(done) => results.extend(done),
                Err(_) => {
                    return Err(ClientError::InvalidArgument(
                        "a range build's worker stopped; run the same import again \
                         (its range indexes are rebuilt from the records)"
                            .into(),
                    ))
                }
            }
        }
        results.sort_by_key(|(k, _)| *k);
        let filled = results
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Result<Vec<Filled>>>()?;
        if filled.len() < count {
            return Err(ClientError::InvalidArgument(host_gone().into()));
        }
        Ok(filled)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::table::ranges::Spill;
    use crate::table::schema::Schema;

    /// Fields of three range protocols: Lewi-Wu and CLWW B+ trees (built
    /// in pieces) and Kerschbaum-Tueno (built in one).
    const SCHEMA: &str = "[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 16\n\
        [fields.b]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"bplus-clww\"\nbits = 16\n\
        [fields.c]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"kerschbaum-tueno\"\nbits = 16\n";

    /// What a build leaves: every key and value of the store, each
    /// client's saved state, the thread of each fill, the last progress.
    type Built = (Vec<(Vec<u8>, Vec<u8>)>, Vec<Vec<u8>>, Vec<ThreadId>, u64);

    /// Fills three fresh indexes (keys from a fixed seed) with the same
    /// pairs, through a spill that wrote runs to its file, with `workers`
    /// workers, into an in-memory store.
    fn build(workers: usize) -> Built {
        build_with(workers, &mut |_| {})
    }

    /// [`build`] with `progress` hearing of the fill.
    fn build_with(workers: usize, progress: &mut dyn FnMut(u64)) -> Built {
        let schema = Schema::from_toml(SCHEMA).unwrap_or_else(|e| panic!("{e}"));
        let mut keys = ChaCha20Rng::seed_from_u64(7);
        let mut indexes: Vec<RangeIndex> = schema
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                RangeIndex::fresh(i, f, crate::table::ranges::UNTAGGED_PAYLOAD, 0, &mut keys)
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let states: Vec<RangeState> = schema
            .fields
            .iter()
            .map(|f| RangeState {
                field: f.name.clone(),
                index: format!("t.{}", f.name),
                generation: 1,
                client: Vec::new(),
                records: 0,
                dirty: true,
            })
            .collect();
        let mut spill = Spill::with_run_pairs(2500);
        for id in 0..3000u64 {
            for i in 0..3 {
                let value = (id * 7919 + i * 31) % 5000;
                spill
                    .push(&mut rand_core::OsRng, i as usize, value, id)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let store = Arc::new(sesame_store::MemoryStore::new());
        let mut backend = crate::EmbeddedBackend::over(store.clone());
        let binder = PayloadBinder::new(&sesame_crypto::Key::from_bytes([3; 32]), "p", [1; 16])
            .unwrap_or_else(|e| panic!("{e}"));
        let fills = indexes
            .iter_mut()
            .zip(&states)
            .zip(spill.sorted_all(3).unwrap_or_else(|e| panic!("{e}")))
            .map(|((index, state), pairs)| Fill {
                index,
                state,
                pairs: Box::new(pairs),
            })
            .collect();
        let mut last = 0;
        let filled = fill_all(
            &mut backend,
            fills,
            Some(&binder),
            &mut ChaCha20Rng::seed_from_u64(9),
            1000,
            workers,
            &mut |n| {
                last = n;
                progress(n);
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            filled.iter().map(|f| f.added).collect::<Vec<_>>(),
            [3000, 3000, 3000]
        );
        // Each index answers for every record.
        for (index, state) in indexes.iter_mut().zip(&states) {
            let mut channel = index
                .channel(&mut backend, state)
                .unwrap_or_else(|e| panic!("{e}"));
            let answer = index
                .client
                .query(&mut rand_core::OsRng, channel.as_mut(), 0, 4999)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(answer.records.len(), 3000, "{}", state.field);
        }
        let stored = store.scan_prefix(b"").unwrap_or_else(|e| panic!("{e}"));
        let clients = indexes
            .iter()
            .map(|i| i.client.save_state().unwrap_or_else(|e| panic!("{e}")))
            .collect();
        (
            stored,
            clients,
            filled.iter().map(|f| f.thread).collect(),
            last,
        )
    }

    /// Indexes filled on worker threads hold byte for byte what the
    /// calling thread's fill of one index after another stores (the same
    /// requests in the same order for each index, each from its own
    /// random stream), with the same client states; the workers did the
    /// clients' work (no index was filled on the calling thread), and
    /// the progress reached every record.
    #[test]
    fn workers_build_what_the_calling_thread_builds() {
        let me = std::thread::current().id();
        let (stored, clients, threads, last) = build(1);
        assert!(!stored.is_empty());
        assert!(threads.iter().all(|t| *t == me));
        assert_eq!(last, 9000);
        for workers in [2, 3] {
            let (s, c, t, l) = build(workers);
            assert!(s == stored, "{workers} workers stored other bytes");
            assert!(c == clients, "{workers} workers left other client states");
            assert!(t.iter().all(|t| *t != me), "{workers} workers: {t:?}");
            assert_eq!(l, 9000);
        }
    }

    /// The calling thread stopped by a panic while the workers wait on
    /// it (here its progress callback; a caller's own fault): the panic
    /// reaches the caller once the workers stopped, and nothing waits
    /// forever.
    #[test]
    fn a_panic_on_the_calling_thread_stops_the_workers() {
        let stopped = std::panic::catch_unwind(|| {
            build_with(2, &mut |n| {
                if n > 0 {
                    panic!("stopped at {n} records");
                }
            })
        });
        assert!(stopped.is_err(), "the build was not stopped");
    }
}
