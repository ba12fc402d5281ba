//! Documents read back from a store that lies about them. Embedded, the
//! store is the server: whoever can write its file can forge the head of
//! a stored document (the number of full pieces it is cut into). The
//! client bounds every read by the size its catalog recorded when it
//! added the document, and refuses a larger claim before reading a piece.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use sesame_client::{EmbeddedBackend, Profile, Session, DEFAULT_INDEX};
use sesame_core::Store;
use sesame_store::documents::head_key;
use sesame_store::MemoryStore;

fn session(p: &Profile, store: &Arc<MemoryStore>) -> Session {
    let store: Arc<dyn Store> = store.clone();
    p.session_with(DEFAULT_INDEX, Box::new(EmbeddedBackend::over(store)))
        .unwrap()
}

/// Stored documents: identifier and content.
type Docs = Vec<(u64, Vec<u8>)>;

/// A profile and a store holding three small documents and one of
/// several pieces; the documents by content.
fn stored(dir: &Path) -> (Profile, Arc<MemoryStore>, Docs) {
    let p = support::profile_at(&dir.join("p"), "fast");
    let files = dir.join("files");
    fs::create_dir_all(&files).unwrap();
    for i in 0..3 {
        fs::write(files.join(format!("f{i}.txt")), format!("word{i} small")).unwrap();
    }
    // Bytes that do not compress, so the document is stored at its length
    // (a compressed one is shorter than its bound: a forged count within
    // the bound is found missing a piece instead, after at most the
    // pieces the bound allows).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let big: Vec<u8> = (0..17_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    fs::write(files.join("big.bin"), &big).unwrap();
    let store = Arc::new(MemoryStore::new());
    let mut s = session(&p, &store);
    s.add_documents(&[&files], &mut |_| {}).unwrap();
    let docs = s
        .documents()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|d| (d.id, fs::read(&d.path).unwrap()))
        .collect();
    (p, store, docs)
}

/// Rewrites the head of document `id` to name `pieces` full pieces,
/// keeping its tail.
fn forge_head(store: &MemoryStore, id: u64, pieces: u32) {
    let key = head_key(format!("d/{DEFAULT_INDEX}/").as_bytes(), id);
    let head = store.get(&key).unwrap().unwrap();
    let mut forged = pieces.to_be_bytes().to_vec();
    forged.extend_from_slice(&head[4..]);
    store.put(&key, &forged).unwrap();
}

/// The most store reads a read of one document may take here: its head,
/// its pieces (the largest document has 5) and the earlier layout's key.
const READS_OF_ONE: u64 = 16;

#[test]
fn a_forged_piece_count_is_refused_before_its_pieces_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, store, docs) = stored(tmp.path());
    let mut s = session(&p, &store);
    // Honest store: every document reads back, each in a few reads.
    for (id, content) in &docs {
        let before = store.io_counts();
        assert_eq!(&s.get(*id).unwrap(), content);
        let reads = store.io_counts().since(&before).reads;
        assert!(reads <= READS_OF_ONE, "document {id}: {reads} reads");
    }

    // The largest count a head may carry (16 GiB of pieces), on a small
    // document and on the one of several pieces.
    let small = docs.iter().find(|(_, c)| c.len() < 100).unwrap().0;
    let big = docs.iter().find(|(_, c)| c.len() > 10_000).unwrap().0;
    for id in [small, big] {
        forge_head(&store, id, 1 << 22);
        let before = store.io_counts();
        let err = s.get(id).unwrap_err().to_string();
        let reads = store.io_counts().since(&before).reads;
        assert!(
            reads <= READS_OF_ONE,
            "document {id}: {reads} reads ({err})"
        );
        assert!(
            err.contains(&format!("document {id}")) && err.contains("catalog"),
            "document {id}: {err}"
        );
    }

    // The other documents still read back.
    for (id, content) in docs.iter().filter(|(id, _)| ![small, big].contains(id)) {
        assert_eq!(&s.get(*id).unwrap(), content);
    }

    // A batch read (check fetches every document) is bounded the same way.
    let before = store.io_counts();
    let outcome = s.check(&mut |_| {});
    let reads = store.io_counts().since(&before).reads;
    let text = match outcome {
        Ok(report) => report.problems.join("; "),
        Err(e) => e.to_string(),
    };
    assert!(reads <= 1_000, "check: {reads} reads ({text})");
    assert!(text.contains("catalog"), "check: {text}");
}

#[test]
fn one_more_piece_than_recorded_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, store, docs) = stored(tmp.path());
    let mut s = session(&p, &store);
    let (id, _) = docs.iter().find(|(_, c)| c.len() > 10_000).unwrap();
    let key = head_key(format!("d/{DEFAULT_INDEX}/").as_bytes(), *id);
    let head = store.get(&key).unwrap().unwrap();
    let pieces = u32::from_be_bytes(head[..4].try_into().unwrap());
    // One piece more than stored: a piece is larger than the bound's room
    // for the sealing, so the claim exceeds the recorded size and is
    // refused for the count, not for a piece found missing.
    forge_head(&store, *id, pieces + 1);
    let err = s.get(*id).unwrap_err().to_string();
    assert!(err.contains("catalog"), "{err}");
    assert!(!err.contains("missing"), "{err}");
}

/// Text like a folder of sources: lines of words drawn from a small
/// vocabulary, in a seeded order.
fn text(seed: u64, bytes: usize) -> String {
    const WORDS: [&str; 24] = [
        "def", "return", "self", "import", "value", "for", "in", "if", "else", "None", "class",
        "raise", "error", "name", "path", "len", "with", "open", "data", "key", "args", "list",
        "dict", "the",
    ];
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let w = WORDS[(x >> 33) as usize % WORDS.len()];
        out.push_str(w);
        out.push(if (x >> 20).is_multiple_of(9) {
            '\n'
        } else {
            ' '
        });
    }
    out
}

/// Sealed bytes the store holds under the index's document prefix: every
/// value (pieces, heads) less the heads' 4-byte piece counts.
fn stored_bytes(store: &MemoryStore) -> u64 {
    let prefix = format!("d/{DEFAULT_INDEX}/");
    store
        .scan_prefix(prefix.as_bytes())
        .unwrap()
        .iter()
        .map(|(k, v)| match k.get(prefix.len()) {
            Some(b'h') => v.len().saturating_sub(4) as u64,
            _ => v.len() as u64,
        })
        .sum()
}

#[test]
fn documents_are_stored_compressed_and_read_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "pibas");
    let files = tmp.path().join("files");
    fs::create_dir_all(&files).unwrap();
    let mut plain = 0u64;
    for i in 0..40u64 {
        let t = text(i, 2_000 + 700 * i as usize);
        plain += t.len() as u64;
        fs::write(files.join(format!("f{i:02}.py")), t).unwrap();
    }
    let store = Arc::new(MemoryStore::new());
    let mut s = session(&p, &store);
    s.add_documents(&[&files], &mut |_| {}).unwrap();
    let sealed = stored_bytes(&store);
    // Text compresses: the store holds well under half its bytes.
    assert!(
        sealed * 2 < plain,
        "{sealed} sealed bytes stored for {plain} bytes of text"
    );
    // Every document reads back whole, and `check` finds nothing wrong.
    for d in s.documents().unwrap_or_else(|e| panic!("{e}")) {
        assert_eq!(s.get(d.id).unwrap(), fs::read(&d.path).unwrap());
    }
    let report = s.check(&mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
