//! The fuzz targets' corpus (`fuzz/corpus/TARGET/`), mutations of it and
//! seeded random inputs, run through the same functions as the fuzz
//! targets (`sesame_server::hostile`): the CI smoke run of the fuzzers,
//! without nightly or cargo-fuzz. Nothing may panic.
//!
//! `cargo test -p sesame-server --test fuzz_corpus -- --ignored
//! write_seed_corpus` rewrites the seed files from real messages.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use prost::Message;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{wire, Channel, LocalChannel, Meter, Params, ServerReport, Store};
use sesame_server::hostile;
use sesame_server::proto;
use sesame_server::records::{IndexMeta, ReplayRecord};
use sesame_server::Tokens;
use sesame_sse::{Multimap, UpdateOp};
use sesame_store::MemoryStore;

/// The seeds of fuzz target `target`, mutants and random inputs
/// ([`hostile::corpus_inputs`]).
fn inputs(target: &str, mutations: usize, random: usize) -> Vec<Vec<u8>> {
    hostile::corpus_inputs(target, 0x5e5a_3e00 ^ target.len() as u64, mutations, random).unwrap()
}

#[test]
fn server_request_corpus() {
    for input in inputs("server_request", 8, 64) {
        hostile::server_request(&input);
    }
}

#[test]
fn scheme_request_corpus() {
    for input in inputs("scheme_request", 16, 200) {
        hostile::scheme_request(&input);
    }
}

#[test]
fn client_response_corpus() {
    for input in inputs("client_response", 16, 200) {
        hostile::client_response(&input);
    }
}

#[test]
fn stored_record_corpus() {
    for input in inputs("stored_record", 8, 32) {
        hostile::stored_record(&input);
    }
}

/// Records the requests a client sends, answering each from a real server.
struct Tap<C> {
    inner: C,
    sent: Vec<Vec<u8>>,
    answers: Vec<Vec<u8>>,
}

impl<C: Channel> Channel for Tap<C> {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.sent.push(request.to_vec());
        let answer = self.inner.call(request)?;
        self.answers.push(answer.clone());
        Ok(answer)
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    hostile::write_seed(target, name, bytes).unwrap();
}

#[test]
#[ignore = "writes the seed corpus into fuzz/corpus"]
fn write_seed_corpus() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut db = Multimap::new();
    db.insert(b"w".to_vec(), vec![1, 2, 3]);
    db.insert(b"v".to_vec(), vec![2]);
    for (i, scheme) in sesame_sse::schemes().iter().enumerate() {
        let name = scheme.descriptor.name;
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut tap = Tap {
            inner: LocalChannel::new(scheme.server(store, &sesame_core::Params::new()).unwrap()),
            sent: Vec::new(),
            answers: Vec::new(),
        };
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        if scheme.descriptor.kind == sesame_core::SchemeKind::StaticSse {
            client.setup(&mut rng, &mut tap, &db).unwrap();
        } else {
            let words = [b"w".to_vec(), b"v".to_vec()];
            match client
                .prepare_update(&mut rng, UpdateOp::Add, 4, &words)
                .unwrap()
            {
                Some(reqs) => {
                    for r in reqs {
                        let a = tap.call(&r).unwrap();
                        client.check_update_response(&a).unwrap();
                    }
                }
                None => client
                    .update(&mut rng, &mut tap, UpdateOp::Add, 4, &words)
                    .unwrap(),
            }
        }
        client.search(&mut rng, &mut tap, b"w").unwrap();
        for (j, m) in tap.sent.iter().enumerate() {
            let mut seed = vec![i as u8];
            seed.extend_from_slice(m);
            write("scheme_request", &format!("{name}-{j}"), &seed);
            // The same message in a Call to the engine's index of this scheme.
            let call = proto::CallRequest {
                index: name.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
                scheme: name.into(),
                generation: 0,
                request_id: vec![j as u8; 16],
                messages: vec![m.clone()],
            };
            let mut seed = vec![0u8];
            seed.extend(call.encode_to_vec());
            write("server_request", &format!("call-{name}-{j}"), &seed);
        }
        // Answers joined as the client_response target splits them.
        let mut joined = Vec::new();
        for (j, a) in tap.answers.iter().enumerate() {
            if j > 0 {
                joined.extend_from_slice(&[0xFF, 0x00]);
            }
            joined.extend_from_slice(a);
        }
        write("client_response", &format!("answers-{name}"), &joined);
        let response = proto::CallResponse {
            messages: tap.answers.clone(),
            report: wire::encode(&ServerReport::default()).unwrap(),
        };
        write(
            "client_response",
            &format!("call-response-{name}"),
            &response.encode_to_vec(),
        );
        let state = client.save_state().unwrap();
        write("client_response", &format!("state-{name}"), &state);
    }
    let upload = proto::UploadRequest {
        start: Some(proto::UploadStart {
            index: "pibas".into(),
            scheme: "pibas".into(),
            generation: 2,
            request_id: vec![9; 16],
        }),
        message: Vec::new(),
        commit: true,
    };
    let docs = proto::PutDocumentsRequest {
        index: "fast".into(),
        request_id: vec![3; 16],
        documents: vec![proto::Document {
            id: 7,
            blob: b"ciphertext".to_vec(),
        }],
        packed: false,
    };
    let seeds: Vec<(&str, u8, Vec<u8>)> = vec![
        ("upload", 1, upload.encode_to_vec()),
        ("put-documents", 2, docs.encode_to_vec()),
        (
            "get-documents",
            3,
            proto::GetDocumentsRequest {
                index: "fast".into(),
                ids: vec![7, 8],
            }
            .encode_to_vec(),
        ),
        (
            "delete-documents",
            4,
            proto::DeleteDocumentsRequest {
                index: "fast".into(),
                request_id: vec![],
                ids: vec![7],
            }
            .encode_to_vec(),
        ),
        (
            "create-index",
            5,
            proto::CreateIndexRequest {
                index: "new".into(),
                scheme: "2lev".into(),
                params: "block=4".into(),
                request_id: Vec::new(),
            }
            .encode_to_vec(),
        ),
        (
            "drop-index",
            6,
            proto::DropIndexRequest {
                index: "fast".into(),
            }
            .encode_to_vec(),
        ),
        (
            "drop-generations",
            7,
            proto::DropGenerationsRequest {
                index: "pibas".into(),
                keep: 1,
                only_older: false,
            }
            .encode_to_vec(),
        ),
        (
            "read-records",
            8,
            proto::ReadRecordsRequest {
                index: "fast".into(),
                names: vec!["state".into()],
                known: vec![1],
            }
            .encode_to_vec(),
        ),
        (
            "write-records",
            9,
            proto::WriteRecordsRequest {
                index: "fast".into(),
                writes: vec![proto::RecordWrite {
                    name: "state".into(),
                    expected: 0,
                    value: b"v".to_vec(),
                    delete: false,
                }],
            }
            .encode_to_vec(),
        ),
        (
            "list-documents",
            10,
            proto::ListDocumentsRequest {
                index: "fast".into(),
            }
            .encode_to_vec(),
        ),
    ];
    for (name, selector, body) in seeds {
        let mut seed = vec![selector];
        seed.extend(body);
        write("server_request", name, &seed);
    }
    // The stats of the fuzz target's engine: an index of every scheme.
    let stats = hostile::engine()
        .stats(hostile::TENANT, proto::StatsRequest {})
        .unwrap();
    write("client_response", "stats", &stats.encode_to_vec());
    write(
        "client_response",
        "get-documents",
        &proto::GetDocumentsResponse {
            documents: vec![
                proto::MaybeDocument {
                    found: true,
                    blob: b"x".to_vec(),
                },
                proto::MaybeDocument {
                    found: false,
                    blob: vec![],
                },
            ],
        }
        .encode_to_vec(),
    );

    let meta = IndexMeta {
        scheme: "pibas".into(),
        params: "block=2".into(),
        created_unix: 1,
        documents: 2,
        updates: 3,
        uploads: 1,
        generation: 1,
        records_since_prune: 0,
        spread: false,
        packed: false,
    };
    write("stored_record", "index-meta", &meta.encode().unwrap());
    let record = ReplayRecord {
        digest: [1; 32],
        at_unix: 2,
        response: proto::CallResponse {
            messages: vec![vec![1, 0]],
            report: vec![],
        }
        .encode_to_vec(),
    };
    write("stored_record", "replay-record", &record.encode().unwrap());
    let tokens = format!(
        "# sesame tokens\n{}\n{}\n",
        Tokens::line("alice", "sst1_a"),
        Tokens::line("bob", "sst1_b")
    );
    write("stored_record", "tokens", tokens.as_bytes());
}
