//! Sesame from Python: the extension module `sesame._sesame`, re-exported
//! by the package `sesame` (`python/sesame`).
//!
//! - `schemes()`: every registry entry (all families) as a dict;
//! - `Index`: a keyword scheme's client and server half in process over a
//!   store (`memory`, `redb:PATH`), with the meter snapshot of the last
//!   operation;
//! - `OreScheme` (`sesame.ore.Scheme`): an ORE/OPE scheme with a fresh key:
//!   encrypt, compare, decrypt;
//! - `RangeProtocol` (`sesame.range.Protocol`): a range protocol in
//!   process (`sesame_range::LocalRange`), with its meter.
//!
//! Every Rust error is a `sesame.SesameError` with the error's message;
//! the GIL is released while Rust computes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rand_core::OsRng;
use sesame_core::view::{Event, RecordingService, RecordingStore, View};
use sesame_core::{LocalChannel, Meter, Params, Service, Snapshot};
use sesame_ore::DynOre;
use sesame_range::{LocalRange, PageConfig};
use sesame_sse::query::Query;
use sesame_sse::{KeywordClient, KeywordScheme, Multimap, UpdateOp};

mod held;
use held::Held;

create_exception!(
    _sesame,
    SesameError,
    PyException,
    "An error of Sesame's Rust code, with its message."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    SesameError::new_err(e.to_string())
}

/// `params` as scheme parameters: every value by its `str()`.
fn params_of(params: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    let mut p = Params::new();
    if let Some(d) = params {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            let value: String = v.str()?.extract()?;
            p.set(&key, value);
        }
    }
    Ok(p)
}

/// A JSON value as a Python object (dicts, lists, ints, floats, strings).
fn to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<PyObject> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any().unbind(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any().unbind(),
            _ => n
                .as_f64()
                .unwrap_or(f64::NAN)
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(to_py(py, x)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// The state behind a Python object (Python objects must be shareable
/// between threads; the Rust halves are used by one at a time).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The server's view as dicts, in order: `{"event": "request" |
/// "response", "bytes": ...}`, `{"event": "read", "key", "size"}` (size
/// `None` for an absent key), `{"event": "write", "key", "size"}`,
/// `{"event": "delete", "key"}`, `{"event": "scan", "prefix", "found"}`.
fn events_list(py: Python<'_>, events: Vec<Event>) -> PyResult<Vec<PyObject>> {
    events
        .into_iter()
        .map(|e| {
            let d = PyDict::new(py);
            match e {
                Event::Request(b) => {
                    d.set_item("event", "request")?;
                    d.set_item("bytes", PyBytes::new(py, &b))?;
                }
                Event::Response(b) => {
                    d.set_item("event", "response")?;
                    d.set_item("bytes", PyBytes::new(py, &b))?;
                }
                Event::Read { key, size } => {
                    d.set_item("event", "read")?;
                    d.set_item("key", PyBytes::new(py, &key))?;
                    d.set_item("size", size)?;
                }
                Event::Write { key, size } => {
                    d.set_item("event", "write")?;
                    d.set_item("key", PyBytes::new(py, &key))?;
                    d.set_item("size", size)?;
                }
                Event::Delete { key } => {
                    d.set_item("event", "delete")?;
                    d.set_item("key", PyBytes::new(py, &key))?;
                }
                Event::Scan { prefix, found } => {
                    d.set_item("event", "scan")?;
                    d.set_item("prefix", PyBytes::new(py, &prefix))?;
                    d.set_item("found", found)?;
                }
                _ => d.set_item("event", "other")?,
            }
            Ok(d.into_any().unbind())
        })
        .collect()
}

fn snapshot_dict(py: Python<'_>, s: &Snapshot) -> PyResult<PyObject> {
    let value = serde_json::to_value(s).map_err(err)?;
    to_py(py, &value)
}

/// Every registered scheme and protocol, of every family, as dicts: name,
/// family, kind, title, citation, queries, leakage, forward_private,
/// hosted (has a server half), params (name to default in words).
#[pyfunction]
fn schemes(py: Python<'_>) -> PyResult<Vec<PyObject>> {
    sesame_schemes::all()
        .iter()
        .map(|s| {
            let d = s.descriptor();
            let dict = PyDict::new(py);
            dict.set_item("name", d.name)?;
            dict.set_item("family", s.family().to_string())?;
            dict.set_item("kind", d.kind.to_string())?;
            dict.set_item("title", d.title)?;
            dict.set_item("citation", d.citation)?;
            let queries: Vec<String> = d.queries.iter().map(ToString::to_string).collect();
            dict.set_item("queries", queries)?;
            dict.set_item("leakage", d.leakage)?;
            dict.set_item("forward_private", d.forward_private)?;
            dict.set_item("hosted", s.hosted())?;
            let params: BTreeMap<&str, &str> = s.params().iter().copied().collect();
            dict.set_item("params", params)?;
            Ok(dict.into_any().unbind())
        })
        .collect()
}

/// A keyword scheme in process: its client, and its server half over a
/// store, joined by a metered channel.
#[pyclass(module = "sesame")]
struct Index {
    scheme: KeywordScheme,
    inner: Mutex<IndexHalves>,
    view: View,
}

struct IndexHalves {
    client: Box<dyn KeywordClient>,
    channel: LocalChannel<Box<dyn Service>>,
    last: Snapshot,
}

impl Index {
    /// Runs `op` with the GIL released, metered.
    fn metered<T: Send>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(
                &mut dyn KeywordClient,
                &mut LocalChannel<Box<dyn Service>>,
            ) -> sesame_core::Result<T>
            + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        py.allow_threads(|| {
            let mut halves = lock(inner);
            let IndexHalves {
                client,
                channel,
                last,
            } = &mut *halves;
            let span = sesame_core::Channel::meter(channel).span();
            let out = op(client.as_mut(), channel);
            *last = span.finish();
            out
        })
        .map_err(err)
    }
}

#[pymethods]
impl Index {
    /// A fresh client (fresh keys) of `scheme` with `params`, and its
    /// server half over `store` (`memory`, or `redb:PATH`).
    #[staticmethod]
    #[pyo3(signature = (scheme, store = "memory", params = None))]
    fn create(scheme: &str, store: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let entry = sesame_sse::scheme(scheme)
            .ok_or_else(|| err(format!("no keyword scheme named {scheme:?}")))?;
        let params = params_of(params)?;
        let client = (entry.new_client)(&mut OsRng, &params).map_err(err)?;
        let view = View::new();
        let store: Arc<dyn sesame_core::Store> = Arc::new(RecordingStore::new(
            sesame_store::open_store(store).map_err(err)?,
            view.clone(),
        ));
        let server: Box<dyn Service> = Box::new(RecordingService::new(
            entry.server(store, &params).map_err(err)?,
            view.clone(),
        ));
        Ok(Index {
            view,
            scheme: entry,
            inner: Mutex::new(IndexHalves {
                client,
                channel: LocalChannel::with_meter(server, Meter::new()),
                last: Snapshot::default(),
            }),
        })
    }

    /// The scheme's registry name.
    #[getter]
    fn scheme(&self) -> &'static str {
        self.scheme.descriptor.name
    }

    /// Builds the index of `db` (keyword to document identifiers),
    /// replacing any earlier one: a static scheme's setup.
    fn setup(&self, py: Python<'_>, db: BTreeMap<String, Vec<u64>>) -> PyResult<()> {
        let db: Multimap = db.into_iter().map(|(k, v)| (k.into_bytes(), v)).collect();
        self.metered(py, move |c, ch| c.setup(&mut OsRng, ch, &db))
    }

    /// Adds the pairs (`doc_id`, keyword) of a dynamic scheme.
    fn add(&self, py: Python<'_>, doc_id: u64, keywords: Vec<String>) -> PyResult<()> {
        let words: Vec<Vec<u8>> = keywords.into_iter().map(String::into_bytes).collect();
        self.metered(py, move |c, ch| {
            c.update(&mut OsRng, ch, UpdateOp::Add, doc_id, &words)
        })
    }

    /// Deletes the pairs (`doc_id`, keyword) of a dynamic scheme.
    fn delete(&self, py: Python<'_>, doc_id: u64, keywords: Vec<String>) -> PyResult<()> {
        let words: Vec<Vec<u8>> = keywords.into_iter().map(String::into_bytes).collect();
        self.metered(py, move |c, ch| {
            c.update(&mut OsRng, ch, UpdateOp::Delete, doc_id, &words)
        })
    }

    /// The identifiers of the documents holding `keyword`, sorted.
    fn search(&self, py: Python<'_>, keyword: &str) -> PyResult<Vec<u64>> {
        let w = keyword.as_bytes().to_vec();
        self.metered(py, move |c, ch| c.search(&mut OsRng, ch, &w))
    }

    /// Answers a query of the query language (`w`, `abc*`, `a?c`, `a b`,
    /// `top:K a b`): a dict with `ids`, `scores` (ranked queries) and
    /// `false_positives_removed`.
    fn query(&self, py: Python<'_>, text: &str) -> PyResult<PyObject> {
        let q = Query::parse(text).map_err(err)?;
        let r = self.metered(py, move |c, ch| c.query(&mut OsRng, ch, &q))?;
        let d = PyDict::new(py);
        d.set_item("ids", r.ids)?;
        d.set_item("scores", r.scores)?;
        d.set_item("false_positives_removed", r.false_positives_removed)?;
        Ok(d.into_any().unbind())
    }

    /// What the last operation cost: wall, client and server time (ns),
    /// bytes each way, rounds, store I/O and primitive calls.
    fn meter(&self, py: Python<'_>) -> PyResult<PyObject> {
        let last = lock(&self.inner).last;
        snapshot_dict(py, &last)
    }

    /// Starts recording the server's view: every request and response as
    /// the server half received and sent them, and every store key it
    /// read, wrote, deleted or scanned, in order (research use only: it
    /// keeps everything an attacker on the server would see).
    fn record_view(&self) {
        self.view.start();
    }

    /// Stops recording the server's view.
    fn stop_view(&self) {
        self.view.stop();
    }

    /// The server's view recorded since `record_view` (or the last call),
    /// as a list of event dicts.
    fn take_view(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        events_list(py, self.view.take())
    }

    /// The client state, keys included (secret).
    fn save_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let state = lock(&self.inner).client.save_state().map_err(err)?;
        Ok(PyBytes::new(py, &state))
    }
}

/// An order-preserving or order-revealing scheme with a fresh key.
#[pyclass(module = "sesame.ore", name = "Scheme")]
struct OreScheme {
    name: &'static str,
    bits: u32,
    scheme: Mutex<Box<dyn DynOre>>,
}

impl OreScheme {
    fn new_with(name: &str, params: &[(&str, &str)]) -> PyResult<Self> {
        let entry =
            sesame_ore::scheme(name).ok_or_else(|| err(format!("no ORE scheme named {name:?}")))?;
        let mut p = Params::new();
        for (k, v) in params {
            p.set(k, v);
        }
        let scheme = (entry.new_client)(&mut OsRng, &p).map_err(err)?;
        Ok(OreScheme {
            name: entry.descriptor.name,
            bits: scheme.bits(),
            scheme: Mutex::new(scheme),
        })
    }
}

#[pymethods]
impl OreScheme {
    /// Scheme `name` (`sesame.schemes()`, family `ore`) with parameters
    /// such as `bits=32`, `block=8`.
    #[new]
    #[pyo3(signature = (name, **params))]
    fn new(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let entry =
            sesame_ore::scheme(name).ok_or_else(|| err(format!("no ORE scheme named {name:?}")))?;
        let params = params_of(params)?;
        let scheme = (entry.new_client)(&mut OsRng, &params).map_err(err)?;
        Ok(OreScheme {
            name: entry.descriptor.name,
            bits: scheme.bits(),
            scheme: Mutex::new(scheme),
        })
    }

    /// The scheme's registry name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    /// Plaintext width in bits.
    #[getter]
    fn bits(&self) -> u32 {
        self.bits
    }

    /// The ciphertext of `x` (encoded).
    fn encrypt<'py>(&self, py: Python<'py>, x: u64) -> PyResult<Bound<'py, PyBytes>> {
        let scheme = &self.scheme;
        let c = py
            .allow_threads(|| lock(scheme).encrypt(&mut OsRng, x))
            .map_err(err)?;
        Ok(PyBytes::new(py, &c))
    }

    /// -1, 0 or 1 as the plaintext of `a` is below, equal to or above that
    /// of `b`.
    fn compare(&self, py: Python<'_>, a: &[u8], b: &[u8]) -> PyResult<i8> {
        let scheme = &self.scheme;
        let o = py
            .allow_threads(|| lock(scheme).compare(a, b))
            .map_err(err)?;
        Ok(o as i8)
    }

    /// The plaintext of `c` (where the scheme decrypts).
    fn decrypt(&self, c: &[u8]) -> PyResult<u64> {
        lock(&self.scheme).decrypt(c).map_err(err)
    }
}

/// A range protocol in process over a store in memory.
#[pyclass(module = "sesame.range", name = "Protocol")]
struct RangeProtocol {
    name: &'static str,
    inner: Mutex<(LocalRange, Snapshot)>,
    view: View,
}

impl RangeProtocol {
    fn metered<T: Send>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut LocalRange) -> sesame_core::Result<T> + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        py.allow_threads(|| {
            let mut guard = lock(inner);
            let (local, last) = &mut *guard;
            let span = sesame_core::Channel::meter(&local.channel).span();
            let out = op(local);
            *last = span.finish();
            out
        })
        .map_err(err)
    }
}

#[pymethods]
impl RangeProtocol {
    /// Protocol `name` (`sesame.schemes()`, family `range`) with
    /// parameters such as `bits=32`, `page_size=4096`.
    #[new]
    #[pyo3(signature = (name, **params))]
    fn new(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let protocol = sesame_range::protocol(name)
            .ok_or_else(|| err(format!("no range protocol named {name:?}")))?;
        let params = params_of(params)?;
        let (own, page) = sesame_range::api::split_page(&params).map_err(err)?;
        let view = View::new();
        let store: Arc<dyn sesame_core::Store> = Arc::new(RecordingStore::new(
            Arc::new(sesame_store::MemoryStore::new()),
            view.clone(),
        ));
        let LocalRange {
            protocol,
            store,
            page,
            channel,
            client,
        } = LocalRange::new(protocol, &own, page, store, &mut OsRng).map_err(err)?;
        let service: Box<dyn Service> =
            Box::new(RecordingService::new(channel.into_service(), view.clone()));
        let local = LocalRange {
            protocol,
            store,
            page,
            channel: LocalChannel::new(service),
            client,
        };
        Ok(RangeProtocol {
            view,
            name: protocol.descriptor.name,
            inner: Mutex::new((local, Snapshot::default())),
        })
    }

    /// The protocol's registry name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    /// Inserts `value` with its record `data`.
    fn insert(&self, py: Python<'_>, value: u64, data: Vec<u8>) -> PyResult<()> {
        self.metered(py, move |l| l.insert(&mut OsRng, value, &data))
    }

    /// Deletes one occurrence of (`value`, `data`); whether there was one.
    fn delete(&self, py: Python<'_>, value: u64, data: Vec<u8>) -> PyResult<bool> {
        self.metered(py, move |l| {
            l.client.delete(&mut OsRng, &mut l.channel, value, &data)
        })
    }

    /// The records `(value, data)` with values in `[lo, hi]`, sorted.
    fn query<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
    ) -> PyResult<Vec<(u64, Bound<'py, PyBytes>)>> {
        let answer = self.metered(py, move |l| l.query(&mut OsRng, lo, hi))?;
        Ok(answer
            .records
            .iter()
            .map(|(v, d)| (*v, PyBytes::new(py, d)))
            .collect())
    }

    /// What the last operation cost (see `Index.meter`).
    fn meter(&self, py: Python<'_>) -> PyResult<PyObject> {
        let last = lock(&self.inner).1;
        snapshot_dict(py, &last)
    }

    /// Starts recording the server's view (see `Index.record_view`).
    fn record_view(&self) {
        self.view.start();
    }

    /// Stops recording the server's view.
    fn stop_view(&self) {
        self.view.stop();
    }

    /// The server's view recorded since `record_view` (or the last call).
    fn take_view(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        events_list(py, self.view.take())
    }
}

/// Benchmark-only: the Rust side of a Python call, timed in Rust for the
/// overhead measurement in `docs/performance.md`. `n` FAST updates of one
/// keyword each (fresh index in memory, identifiers 0..n), then `n`
/// Lewi-Wu comparisons (32-bit, block 8) of two fixed ciphertexts; returns
/// the nanoseconds per update and per comparison, each measured the way
/// `Index.add` and `Scheme.compare` run them (update under a meter span,
/// comparison of encoded ciphertexts).
#[pyfunction]
fn _rust_call_costs(py: Python<'_>, n: u64) -> PyResult<(f64, f64)> {
    let index = Index::create("fast", "memory", None)?;
    let ore = OreScheme::new_with("lewi-wu", &[("bits", "32"), ("block", "8")])?;
    let a = lock(&ore.scheme).encrypt(&mut OsRng, 3).map_err(err)?;
    let b = lock(&ore.scheme).encrypt(&mut OsRng, 9).map_err(err)?;
    py.allow_threads(|| {
        let n = n.max(1);
        let words = vec![b"w".to_vec()];
        let start = std::time::Instant::now();
        for doc in 0..n {
            let mut halves = lock(&index.inner);
            let IndexHalves {
                client,
                channel,
                last,
            } = &mut *halves;
            let span = sesame_core::Channel::meter(channel).span();
            client
                .update(&mut OsRng, channel, UpdateOp::Add, doc, &words)
                .map_err(err)?;
            *last = span.finish();
        }
        let update = start.elapsed().as_nanos() as f64 / n as f64;
        let start = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(lock(&ore.scheme).compare(&a, &b).map_err(err)?);
        }
        let compare = start.elapsed().as_nanos() as f64 / n as f64;
        Ok((update, compare))
    })
}

/// Runs the benchmark experiment `name` (`sesame bench list`) at `scale`
/// (`quick`, `tiny` or `full`) and returns its result set as a dict (the
/// JSON the harness writes, plus `table`: its header and rows of cells),
/// writing no file. `data` is where the fetched data sets are.
#[pyfunction]
#[pyo3(signature = (name, scale = "quick", seed = 1, data = "data"))]
fn bench_run(py: Python<'_>, name: &str, scale: &str, seed: u64, data: &str) -> PyResult<PyObject> {
    use sesame_bench::{Ctx, Scale};
    let experiment = sesame_bench::experiment(name).ok_or_else(|| {
        let known: Vec<&str> = sesame_bench::experiments()
            .iter()
            .map(|e| e.name())
            .collect();
        err(format!(
            "no experiment named {name:?} (known: {})",
            known.join(", ")
        ))
    })?;
    let scale = match scale {
        "full" => Scale::Full,
        "quick" => Scale::Quick,
        "tiny" => Scale::Tiny,
        other => return Err(err(format!("scale {other:?}: use quick, tiny or full"))),
    };
    let mut work = std::env::temp_dir();
    work.push(format!(
        "sesame-py-bench-{}-{}",
        std::process::id(),
        rand_core::RngCore::next_u64(&mut OsRng)
    ));
    std::fs::create_dir_all(&work).map_err(err)?;
    let ctx = Ctx {
        scale,
        seed,
        data_dir: data.into(),
        work_dir: work.clone(),
        options: Params::new(),
    };
    let result = py.allow_threads(|| experiment.run(&ctx));
    let _ = std::fs::remove_dir_all(&work);
    let result = result.map_err(err)?;
    let mut value = serde_json::to_value(&result).map_err(err)?;
    let table = result.to_table();
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "table".into(),
            serde_json::json!({ "header": table.header, "rows": table.rows }),
        );
    }
    to_py(py, &value)
}

/// A profile: keys, the encrypted client state and documents in a
/// directory, its index embedded or bound to a server (what the `sesame`
/// CLI uses). Each call opens a session on the default index and closes
/// it, so a CLI on the same profile waits for the call, never interleaves.
#[pyclass(module = "sesame")]
struct Profile {
    inner: Arc<Mutex<sesame_client::Profile>>,
    /// The table a `with` block keeps open (module `held`).
    held: Mutex<Option<Held>>,
}

fn doc_dict(py: Python<'_>, d: &sesame_client::DocumentInfo) -> PyResult<PyObject> {
    let dict = PyDict::new(py);
    dict.set_item("id", d.id)?;
    dict.set_item("path", &d.path)?;
    dict.set_item("size", d.size)?;
    Ok(dict.into_any().unbind())
}

impl Profile {
    fn with_session<T: Send>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut sesame_client::Session) -> sesame_client::Result<T> + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        let held = lock(&self.held);
        if let Some(h) = held.as_ref() {
            return Err(err(held::busy(&h.name, "the profile's documents")));
        }
        py.allow_threads(|| {
            let profile = lock(inner);
            let mut session = profile.session(sesame_client::DEFAULT_INDEX)?;
            op(&mut session)
        })
        .map_err(err)
    }
}

#[pymethods]
impl Profile {
    /// Creates a profile in `dir` whose default index uses `scheme`.
    /// `insecure_fast_kdf` makes the passphrase's key derivation cheap
    /// (tests and benchmarks only: it makes guessing the passphrase
    /// cheap too).
    #[staticmethod]
    #[pyo3(signature = (dir, passphrase, scheme = "fast", params = None, insecure_fast_kdf = false))]
    fn create(
        py: Python<'_>,
        dir: &str,
        passphrase: &str,
        scheme: &str,
        params: Option<&Bound<'_, PyDict>>,
        insecure_fast_kdf: bool,
    ) -> PyResult<Self> {
        let params = params_of(params)?;
        let kdf = if insecure_fast_kdf {
            sesame_client::insecure::fast_kdf()
        } else {
            sesame_client::KdfParams::default()
        };
        let profile = py
            .allow_threads(|| {
                sesame_client::Profile::create_with_kdf(dir, passphrase, scheme, &params, kdf)
            })
            .map_err(err)?;
        Ok(Profile {
            inner: Arc::new(Mutex::new(profile)),
            held: Mutex::new(None),
        })
    }

    /// Opens the profile in `dir` (with the key file at `key_file` for a
    /// profile made with one).
    #[staticmethod]
    #[pyo3(signature = (dir, passphrase, key_file = None))]
    fn open(py: Python<'_>, dir: &str, passphrase: &str, key_file: Option<&str>) -> PyResult<Self> {
        let key = match key_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| err(format!("{path}: {e}")))?),
            None => None,
        };
        let profile = py
            .allow_threads(|| {
                sesame_client::Profile::open_with_key_file(dir, passphrase, key.as_deref())
            })
            .map_err(err)?;
        Ok(Profile {
            inner: Arc::new(Mutex::new(profile)),
            held: Mutex::new(None),
        })
    }

    /// Syncs files and directories into the index (as `sesame add`):
    /// a dict with the `added` and `replaced` documents, `unchanged` and
    /// `indexed` counts.
    fn add(&self, py: Python<'_>, paths: Vec<String>) -> PyResult<PyObject> {
        let report = self.with_session(py, move |s| s.add_documents(&paths, &mut |_| {}))?;
        let d = PyDict::new(py);
        let docs = |list: &[sesame_client::DocumentInfo]| -> PyResult<Vec<PyObject>> {
            list.iter().map(|x| doc_dict(py, x)).collect()
        };
        d.set_item("added", docs(&report.added)?)?;
        d.set_item("replaced", docs(&report.replaced)?)?;
        d.set_item("unchanged", report.unchanged)?;
        d.set_item("indexed", report.indexed)?;
        Ok(d.into_any().unbind())
    }

    /// The documents matching a query (as `sesame search`), each a dict
    /// with `id`, `path` and `size`.
    fn search(&self, py: Python<'_>, text: String) -> PyResult<Vec<PyObject>> {
        let hits = self.with_session(py, move |s| s.query(&text))?;
        hits.documents.iter().map(|d| doc_dict(py, d)).collect()
    }

    /// The decrypted content of document `id`.
    fn get<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyBytes>> {
        let content = self.with_session(py, move |s| s.get(id))?;
        Ok(PyBytes::new(py, &content))
    }

    /// Every document of the index.
    fn documents(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        let docs = self.with_session(py, |s| s.documents())?;
        docs.iter().map(|d| doc_dict(py, d)).collect()
    }

    /// Creates table `name` from a schema in TOML (see docs/tables.md).
    fn create_table(slf: Py<Self>, py: Python<'_>, name: String, schema: &str) -> PyResult<Table> {
        let parsed = sesame_client::table::Schema::from_toml(schema).map_err(err)?;
        {
            let me = slf.borrow(py);
            let inner = &me.inner;
            let name = name.clone();
            py.allow_threads(move || {
                sesame_client::Table::create(&lock(inner), &name, parsed).map(drop)
            })
            .map_err(err)?;
        }
        Ok(Table { profile: slf, name })
    }

    /// The table `name` (it must exist).
    fn table(slf: Py<Self>, py: Python<'_>, name: String) -> PyResult<Table> {
        let t = Table { profile: slf, name };
        t.with_table(py, |_| Ok(()))?;
        Ok(t)
    }

    /// The names of the profile's tables.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let inner = &self.inner;
        py.allow_threads(|| sesame_client::table::tables(&lock(inner)))
            .map_err(err)
    }
}

/// An encrypted table of a profile (see docs/tables.md). Each call opens
/// the table and closes it, as `sesame query` does, except inside a
/// `with` block of the table, which keeps it open (module `held`).
#[pyclass(module = "sesame")]
struct Table {
    profile: Py<Profile>,
    name: String,
}

impl Table {
    fn with_table<T: Send + 'static>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut sesame_client::Table) -> sesame_client::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let profile = self.profile.borrow(py);
        let inner = &profile.inner;
        let held = &profile.held;
        let name = &self.name;
        py.allow_threads(|| {
            let mut held = lock(held);
            match held.as_mut() {
                Some(h) if h.name == *name => return h.run(op).map_err(err),
                Some(h) => return Err(err(held::busy(&h.name, &format!("table {name:?}")))),
                None => {}
            }
            let profile = lock(inner);
            let mut table = sesame_client::Table::open(&profile, name).map_err(err)?;
            op(&mut table).map_err(err)
        })
    }
}

/// A record as a dict: integers as `int`, strings as `str`, decimals and
/// timestamps as the text the CLI prints (`"12.50"`,
/// `"2013-01-01T05:00:00Z"`), no value as `None`; the key under `"_key"`.
fn record_dict(
    py: Python<'_>,
    schema: &sesame_client::table::Schema,
    r: &sesame_client::table::Record,
) -> PyResult<PyObject> {
    use sesame_client::table::{FieldType, Value};
    let d = PyDict::new(py);
    d.set_item("_key", &r.key)?;
    for (f, v) in schema.fields.iter().zip(&r.values) {
        match (f.ty, v) {
            (_, None) => d.set_item(&f.name, py.None())?,
            (FieldType::Integer, Some(Value::Int(i))) => d.set_item(&f.name, *i)?,
            (_, Some(v)) => d.set_item(&f.name, f.display(v))?,
        }
    }
    Ok(d.into_any().unbind())
}

/// A Python value as a cell's text (`None`: no cell).
fn cell_text(v: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if v.is_none() {
        return Ok(None);
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(Some(s));
    }
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(err("a boolean is not a table value"));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Some(i.to_string()));
    }
    // Floats and decimal.Decimal: their text, which the field checks
    // against its scale.
    Ok(Some(v.str()?.to_string()))
}

#[pymethods]
impl Table {
    /// The table's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The fields: a list of dicts with `name`, `type`, `equality`,
    /// `prefix` (longest prefix, or None), `range` (protocol, or None) and
    /// `bits`.
    fn fields(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        let schema = self.with_table(py, |t| Ok(t.schema().clone()))?;
        schema
            .fields
            .iter()
            .map(|f| {
                let d = PyDict::new(py);
                d.set_item("name", &f.name)?;
                d.set_item("type", f.ty.to_string())?;
                d.set_item("equality", f.equality)?;
                d.set_item("prefix", f.prefix)?;
                d.set_item("range", f.range.as_ref().map(|b| b.scheme.clone()))?;
                d.set_item("bits", f.bits)?;
                Ok(d.into_any().unbind())
            })
            .collect()
    }

    /// Records it holds.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_table(py, |t| Ok(t.len()))
    }

    /// Inserts records, each a dict of field values (ints, strings,
    /// floats, `decimal.Decimal`, None), keyed by the schema's key field
    /// or, without one, by `keys` (one per record) or by position. A
    /// record with a key the table holds replaces it. Returns a dict of
    /// `inserted`, `replaced` and `unchanged` counts.
    #[pyo3(signature = (records, keys = None))]
    fn insert(
        &self,
        py: Python<'_>,
        records: Vec<Bound<'_, PyDict>>,
        keys: Option<Vec<String>>,
    ) -> PyResult<PyObject> {
        if let Some(k) = &keys {
            if k.len() != records.len() {
                return Err(err(format!(
                    "{} keys for {} records",
                    k.len(),
                    records.len()
                )));
            }
        }
        let mut rows: Vec<Vec<(String, String)>> = Vec::with_capacity(records.len());
        for r in &records {
            let mut cells = Vec::new();
            for (k, v) in r.iter() {
                let name: String = k.extract()?;
                if let Some(text) = cell_text(&v)? {
                    cells.push((name, text));
                }
            }
            rows.push(cells);
        }
        let report = self.with_table(py, move |t| {
            let mut out = Vec::with_capacity(rows.len());
            for (i, cells) in rows.iter().enumerate() {
                let key = keys.as_ref().and_then(|k| k.get(i).cloned());
                out.push(
                    t.record_from_cells(cells.iter().map(|(k, v)| (k.as_str(), v.as_str())), key)?,
                );
            }
            t.insert(out, &mut |_| {})
        })?;
        let d = PyDict::new(py);
        d.set_item("inserted", report.inserted)?;
        d.set_item("replaced", report.replaced)?;
        d.set_item("unchanged", report.unchanged)?;
        Ok(d.into_any().unbind())
    }

    /// Imports a CSV or JSON Lines file (as `sesame import`); `format` is
    /// `"csv"` or `"jsonl"` (default: from the extension). Returns a dict
    /// of `read`, `inserted`, `replaced`, `unchanged` and
    /// `ignored_columns`.
    #[pyo3(signature = (path, format = None))]
    fn import_file(
        &self,
        py: Python<'_>,
        path: String,
        format: Option<String>,
    ) -> PyResult<PyObject> {
        use sesame_client::table::import::Format;
        let path = std::path::PathBuf::from(path);
        let format = match format {
            Some(f) => Format::parse(&f).map_err(err)?,
            None => Format::of(&path).map_err(err)?,
        };
        let report = self.with_table(py, move |t| t.import(&path, format, &mut |_| {}))?;
        let d = PyDict::new(py);
        d.set_item("read", report.read)?;
        d.set_item("inserted", report.insert.inserted)?;
        d.set_item("replaced", report.insert.replaced)?;
        d.set_item("unchanged", report.insert.unchanged)?;
        d.set_item("removed", report.removed)?;
        d.set_item("ignored_columns", report.ignored_columns)?;
        Ok(d.into_any().unbind())
    }

    /// The records matching a query (as `sesame query`), each a dict (see
    /// the module docs), the first `limit` in insertion order.
    #[pyo3(signature = (text, limit = None))]
    fn query(&self, py: Python<'_>, text: String, limit: Option<usize>) -> PyResult<Vec<PyObject>> {
        let (schema, answer) = self.with_table(py, move |t| {
            Ok((t.schema().clone(), t.query(&text, limit)?))
        })?;
        answer
            .records
            .iter()
            .map(|r| record_dict(py, &schema, r))
            .collect()
    }

    /// How a query would be answered: a list of dicts with `predicate`,
    /// `field`, `index`, `scheme`, `request` and `leakage`. Nothing is
    /// sent.
    fn explain(&self, py: Python<'_>, text: String) -> PyResult<Vec<PyObject>> {
        let steps = self.with_table(py, move |t| t.explain(&text))?;
        steps
            .iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("predicate", &s.predicate)?;
                d.set_item("field", &s.field)?;
                d.set_item("index", &s.index)?;
                d.set_item("scheme", &s.scheme)?;
                d.set_item("request", &s.request)?;
                d.set_item("leakage", &s.leakage)?;
                Ok(d.into_any().unbind())
            })
            .collect()
    }

    /// Deletes the records matching a query; returns how many.
    fn delete(&self, py: Python<'_>, text: String) -> PyResult<usize> {
        self.with_table(py, move |t| t.delete(&text))
    }

    /// `with table:` keeps the table open until the block ends, with the
    /// chunk memo `sesame sql` keeps, and the profile's store locked
    /// against other processes meanwhile (module `held`).
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        {
            let me = slf.borrow(py);
            let profile = me.profile.borrow(py);
            let (inner, held, name) = (&profile.inner, &profile.held, &me.name);
            py.allow_threads(|| {
                let mut held = lock(held);
                match held.as_mut() {
                    Some(h) if h.name == *name => h.blocks += 1,
                    Some(h) => return Err(err(held::busy(&h.name, &format!("table {name:?}")))),
                    None => *held = Some(Held::open(inner.clone(), name).map_err(err)?),
                }
                Ok(())
            })?;
        }
        Ok(slf)
    }

    /// The end of a `with` block: the last one closes the table.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        let profile = self.profile.borrow(py);
        let held = &profile.held;
        py.allow_threads(|| {
            let mut held = lock(held);
            if let Some(h) = held.as_mut().filter(|h| h.name == self.name) {
                h.blocks -= 1;
                if h.blocks == 0 {
                    *held = None;
                }
            }
        });
        false
    }
}

/// The page configuration the protocols default to (bytes per page).
#[pyfunction]
fn default_page_size() -> usize {
    PageConfig::default().page_size
}

#[pymodule]
fn _sesame(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SesameError", m.py().get_type::<SesameError>())?;
    m.add_function(wrap_pyfunction!(schemes, m)?)?;
    m.add_function(wrap_pyfunction!(default_page_size, m)?)?;
    m.add_function(wrap_pyfunction!(_rust_call_costs, m)?)?;
    m.add_function(wrap_pyfunction!(bench_run, m)?)?;
    m.add_class::<Index>()?;
    m.add_class::<Profile>()?;
    m.add_class::<Table>()?;
    m.add_class::<OreScheme>()?;
    m.add_class::<RangeProtocol>()?;
    Ok(())
}
