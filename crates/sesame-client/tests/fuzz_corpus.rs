//! The corpus of the client fuzz targets (`fuzz/corpus/client_documents`,
//! `fuzz/corpus/client_files`), mutations of it and random inputs, run
//! through `sesame_client::hostile`: the CI smoke run of those fuzzers.
//!
//! `cargo test -p sesame-client --test fuzz_corpus -- --ignored
//! write_seed_corpus` rewrites the seeds from a real profile.

#![allow(clippy::unwrap_used)]

mod support;

use sesame_client::doc_service::{DocRequest, DocResponse};
use sesame_client::{hostile, ServerBinding};
use sesame_core::wire;

/// The seeds of fuzz target `target`, mutants and random inputs (the
/// server's corpus runs' generator, `sesame_server::hostile`).
fn inputs(target: &str, mutations: usize, random: usize) -> Vec<Vec<u8>> {
    let seed = 0x243F_6A88_85A3_08D3 ^ target.len() as u64;
    sesame_server::hostile::corpus_inputs(target, seed, mutations, random).unwrap()
}

#[test]
fn client_documents_corpus() {
    for input in inputs("client_documents", 32, 300) {
        hostile::document_messages(&input);
    }
}

#[test]
fn client_files_corpus() {
    for input in inputs("client_files", 32, 300) {
        hostile::local_files(&input);
    }
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    sesame_server::hostile::write_seed(target, name, bytes).unwrap();
}

#[test]
#[ignore = "writes the seed corpus into fuzz/corpus"]
fn write_seed_corpus() {
    let requests = [
        DocRequest::PutDocs(vec![(1, b"blob".to_vec()), (2, vec![])]),
        DocRequest::GetDoc(1),
        DocRequest::GetDocs(vec![1, 2, 3]),
        DocRequest::DeleteDoc(2),
        DocRequest::ListDocIds,
    ];
    for (i, r) in requests.iter().enumerate() {
        write(
            "client_documents",
            &format!("request-{i}"),
            &wire::encode(r).unwrap(),
        );
    }
    let responses = [
        DocResponse::Stored,
        DocResponse::Doc(Some(b"x".to_vec())),
        DocResponse::Docs(vec![None, Some(vec![1])]),
        DocResponse::Deleted(true),
        DocResponse::DocIds(vec![1, 5]),
    ];
    for (i, r) in responses.iter().enumerate() {
        write(
            "client_documents",
            &format!("response-{i}"),
            &wire::encode(r).unwrap(),
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    write(
        "client_files",
        "profile-json",
        &std::fs::read(tmp.path().join("p/profile.json")).unwrap(),
    );
    write("client_files", "state-plain", &hostile::sample_state());
    p.bind_server(&ServerBinding {
        url: "https://localhost:7443".into(),
        token: "sst1_x".into(),
        ca_pem: Some(b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".to_vec()),
        index_prefix: String::new(),
    })
    .unwrap();
    write(
        "client_files",
        "server-json",
        &std::fs::read(tmp.path().join("p/server.json")).unwrap(),
    );
}
