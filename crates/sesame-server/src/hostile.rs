//! Entry points that feed untrusted bytes to every decoder a peer
//! controls, for the fuzz targets in `fuzz/` and for the test that replays
//! their corpus (`tests/fuzz_corpus.rs`). Each must return normally
//! whatever the input: an error is fine, a panic is a bug.
//!
//! | function | peer | decoders |
//! |---|---|---|
//! | [`server_request`] | a client | every request message, then the engine (scheme calls included) |
//! | [`scheme_request`] | a client | every scheme's server half, on a fresh in-memory store |
//! | [`client_response`] | the server | every response message, the server report, replay details, and every scheme client's response handling |
//! | [`stored_record`] | the store | index metadata, replay records, the tokens file, a packed documents chunk (`get_documents`, `list_documents`) |
//!
//! [`corpus_inputs`] makes the inputs of the corpus smoke runs (this
//! crate's and the client's `tests/fuzz_corpus.rs`) from a target's
//! seeds; [`write_seed`] writes a seed.

use std::sync::Arc;

use prost::Message;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{wire, Channel, Meter, Params, ServerReport, Store};
use sesame_store::MemoryStore;

use crate::engine::{Engine, Limits};
use crate::proto;
use crate::records::{IndexMeta, ReplayRecord};
use crate::tokens::Tokens;

/// The seed folder of fuzz target `target`: `fuzz/corpus/TARGET` of
/// the source tree.
pub fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Writes `bytes` as seed `name` of fuzz target `target`.
pub fn write_seed(target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(name), bytes)
}

/// The inputs of a corpus smoke run of fuzz target `target`: its seeds
/// (in the order of their file names), `mutations` mutants of each (a
/// bit flipped, a truncation, a byte inserted, an edge byte written) and
/// `random` random inputs of under 200 bytes, all drawn from a generator
/// seeded with `seed`, so every run feeds the same inputs. An error
/// where the seed folder cannot be read or holds no seed.
pub fn corpus_inputs(
    target: &str,
    seed: u64,
    mutations: usize,
    random: usize,
) -> Result<Vec<Vec<u8>>, String> {
    let dir = corpus_dir(target);
    let unreadable = |e: std::io::Error| format!("{}: {e}", dir.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(unreadable)? {
        files.push(entry.map_err(unreadable)?.path());
    }
    files.sort();
    if files.is_empty() {
        return Err(format!("no seeds in {}", dir.display()));
    }
    let seeds = files
        .iter()
        .map(std::fs::read)
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(unreadable)?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut out = seeds.clone();
    for seed in &seeds {
        for _ in 0..mutations {
            let mut m = seed.clone();
            match below(&mut rng, 4) {
                0 if !m.is_empty() => {
                    let i = below(&mut rng, m.len());
                    m[i] ^= 1 << below(&mut rng, 8);
                }
                1 if !m.is_empty() => {
                    let keep = below(&mut rng, m.len());
                    m.truncate(keep);
                }
                2 => {
                    let i = below(&mut rng, m.len() + 1);
                    m.insert(i, below(&mut rng, 256) as u8);
                }
                _ if !m.is_empty() => {
                    let i = below(&mut rng, m.len());
                    m[i] = [0x00, 0xFF, 0x7F, 0x80][below(&mut rng, 4)];
                }
                _ => {}
            }
            out.push(m);
        }
    }
    for _ in 0..random {
        let mut m = vec![0u8; below(&mut rng, 200)];
        rng.fill_bytes(&mut m);
        out.push(m);
    }
    Ok(out)
}

/// A number below `n` (not zero) drawn from `rng`.
fn below(rng: &mut ChaCha20Rng, n: usize) -> usize {
    rng.next_u32() as usize % n
}

/// The tenant the engine-level target speaks as.
pub const TENANT: &str = "fuzz";

/// The registered keyword schemes' names, in registry order.
pub fn scheme_names() -> Vec<&'static str> {
    sesame_sse::schemes()
        .iter()
        .map(|s| s.descriptor.name)
        .collect()
}

/// An engine over a fresh memory store with one index per scheme, named
/// after it.
pub fn engine() -> Engine {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let limits = Limits {
        max_transaction_bytes: 1 << 20,
        max_messages_per_call: 64,
        max_documents_per_request: 64,
        max_indexes_per_tenant: 64,
        ..Limits::default()
    };
    let engine = Engine::new(store, limits).expect("an empty memory store takes the marker");
    for name in scheme_names() {
        let index = name.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
        let _ = engine.create_index(
            TENANT,
            proto::CreateIndexRequest {
                index,
                scheme: name.to_owned(),
                params: String::new(),
                request_id: Vec::new(),
            },
        );
    }
    engine
}

/// Method selector (first byte, modulo 11), then a protobuf request for
/// that method, given to the engine.
pub fn server_request(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    // A fresh engine per input keeps runs independent; the engine is cheap.
    let e = engine();
    match selector % 11 {
        0 => {
            if let Ok(r) = proto::CallRequest::decode(body) {
                let _ = e.call(TENANT, r);
            }
        }
        1 => {
            if let Ok(r) = proto::UploadRequest::decode(body) {
                if let Some(start) = r.start {
                    if let Ok(mut up) = e.start_upload(TENANT, start) {
                        if !r.message.is_empty() {
                            let _ = e.upload_message(&mut up, &r.message);
                        }
                        let _ = e.commit_upload(up);
                    }
                }
            }
        }
        2 => {
            if let Ok(r) = proto::PutDocumentsRequest::decode(body) {
                let _ = e.put_documents(TENANT, r);
            }
        }
        3 => {
            if let Ok(r) = proto::GetDocumentsRequest::decode(body) {
                let _ = e.get_documents(TENANT, r);
            }
        }
        4 => {
            if let Ok(r) = proto::DeleteDocumentsRequest::decode(body) {
                let _ = e.delete_documents(TENANT, r);
            }
        }
        5 => {
            if let Ok(r) = proto::CreateIndexRequest::decode(body) {
                let _ = e.create_index(TENANT, r);
            }
        }
        6 => {
            if let Ok(r) = proto::DropIndexRequest::decode(body) {
                let _ = e.drop_index(TENANT, r);
            }
        }
        7 => {
            if let Ok(r) = proto::DropGenerationsRequest::decode(body) {
                let _ = e.drop_generations(TENANT, r);
            }
        }
        8 => {
            if let Ok(r) = proto::ReadRecordsRequest::decode(body) {
                let _ = e.read_records(TENANT, r);
            }
        }
        9 => {
            if let Ok(r) = proto::WriteRecordsRequest::decode(body) {
                let _ = e.write_records(TENANT, r);
            }
        }
        _ => {
            if let Ok(r) = proto::ListDocumentsRequest::decode(body) {
                let _ = e.list_documents(TENANT, r);
            }
            if let Ok(r) = proto::CompactIndexRequest::decode(body) {
                let _ = e.compact_index(TENANT, r);
            }
            let _ = proto::ListIndexesRequest::decode(body);
            let _ = proto::StatsRequest::decode(body);
            let _ = proto::HealthRequest::decode(body);
        }
    }
}

/// Scheme selector (first byte), then one scheme message, handled by that
/// scheme's server half over a fresh memory store. Every scheme a server
/// hosts, of every family, can be selected.
pub fn scheme_request(data: &[u8]) {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    let schemes: Vec<_> = sesame_schemes::all()
        .into_iter()
        .filter(sesame_schemes::Scheme::hosted)
        .collect();
    let Some(scheme) = schemes.get(usize::from(selector) % schemes.len().max(1)) else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let Ok(mut server) = scheme.server(store, &sesame_core::Params::new()) else {
        return;
    };
    let _ = server.handle(message);
    // A second message after the first (state the first left behind).
    let _ = server.handle(message);
}

/// A channel whose answers are the fuzz input.
struct Replay<'a> {
    answers: std::slice::Iter<'a, Vec<u8>>,
    meter: Meter,
}

impl Channel for Replay<'_> {
    fn call(&mut self, _request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.answers
            .next()
            .cloned()
            .ok_or_else(|| sesame_core::Error::Transport("no more answers".into()))
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
}

/// Everything a client decodes from a server: every response message,
/// the server report, a replay's details; and, with the input split at
/// `0xFF 0x00` into answers, every scheme client's search and update
/// checks fed those answers.
pub fn client_response(data: &[u8]) {
    let _ = proto::CallResponse::decode(data);
    let _ = proto::UploadResponse::decode(data);
    let _ = proto::GetDocumentsResponse::decode(data);
    let _ = proto::DeleteDocumentsResponse::decode(data);
    let _ = proto::PutDocumentsResponse::decode(data);
    let _ = proto::ListDocumentsResponse::decode(data);
    let _ = proto::ListIndexesResponse::decode(data);
    let _ = proto::StatsResponse::decode(data);
    let _ = proto::HealthResponse::decode(data);
    let _ = proto::IndexInfo::decode(data);
    let _ = proto::DropIndexResponse::decode(data);
    let _ = proto::DropGenerationsResponse::decode(data);
    let _ = proto::ReadRecordsResponse::decode(data);
    let _ = proto::WriteRecordsResponse::decode(data);
    let _ = proto::CompactIndexResponse::decode(data);
    let _ = wire::decode::<ServerReport>(data);

    let answers: Vec<Vec<u8>> = split(data);
    for scheme in sesame_sse::schemes() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let Ok(mut client) = (scheme.new_client)(&mut rng, &Params::new()) else {
            continue;
        };
        // Give dynamic clients some state, so searches send tokens.
        let _ = client.prepare_update(&mut rng, sesame_sse::UpdateOp::Add, 1, &[b"w".to_vec()]);
        let mut ch = Replay {
            answers: answers.iter(),
            meter: Meter::new(),
        };
        let _ = client.search(&mut rng, &mut ch, b"w");
        for a in &answers {
            let _ = client.check_update_response(a);
        }
        let _ = (scheme.restore_client)(data);
    }
}

fn split(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut i = 0;
    while i < data.len() {
        if data[i] == 0xFF && data.get(i + 1) == Some(&0x00) {
            out.push(Vec::new());
            i += 2;
        } else {
            out.last_mut().expect("never empty").push(data[i]);
            i += 1;
        }
    }
    out
}

/// Records read back from the store (a packed documents chunk among
/// them), and the tokens file.
pub fn stored_record(data: &[u8]) {
    let _ = IndexMeta::decode(data);
    let _ = ReplayRecord::decode(data);
    let _ = Tokens::parse(&String::from_utf8_lossy(data));
    // A stored replay answer is decoded by the client as a CallResponse.
    if let Ok(r) = ReplayRecord::decode(data) {
        let _ = proto::CallResponse::decode(r.response.as_slice());
    }
    // A damaged record under an index: the engine must refuse, not panic.
    let e = engine();
    // First as a chunk of packed documents (any form, prefixed ones
    // included), read by a get and a list.
    let mut chunk = crate::keys::doc_prefix(TENANT, "pibas");
    chunk.extend_from_slice(b"#h");
    let _ = e.store().put(&chunk, data);
    let _ = e.get_documents(
        TENANT,
        proto::GetDocumentsRequest {
            index: "pibas".into(),
            ids: vec![1, 2],
        },
    );
    let _ = e.list_documents(
        TENANT,
        proto::ListDocumentsRequest {
            index: "pibas".into(),
        },
    );
    let _ = e.store().put(&crate::keys::meta_key(TENANT, "pibas"), data);
    let _ = e.list_indexes(TENANT, proto::ListIndexesRequest {});
    let _ = e.get_documents(
        TENANT,
        proto::GetDocumentsRequest {
            index: "pibas".into(),
            ids: vec![1],
        },
    );
}
