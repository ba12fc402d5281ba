//! Packed entries in the embedded store (`sesame_store::packed`): a new
//! FAST, Aura or PiBas index packs its entries and answers exactly as a
//! plain one,
//! an index written plain stays plain, and the write-once check still
//! refuses an update that would change an entry.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sesame_client::{
    insecure, Backend, ClientError, EmbeddedBackend, Profile, Session, DEFAULT_INDEX,
};
use sesame_core::{wire, IoCounts, Params, Result, Store, WriteBatch};
use sesame_sse::fast::Request;
use sesame_store::MemoryStore;

const PASS: &str = "correct horse battery staple";

/// A memory store that does not claim ordered probes (`Store::ordered_probes`
/// is left at its default): the embedded backend packs only where lookups
/// are bounded probes, so this one gets the plain layout (as every index
/// written before packing has).
struct Plain(Arc<MemoryStore>);

impl Store for Plain {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.0.write(batch)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.0.scan_prefix(prefix)
    }
    fn io_counts(&self) -> IoCounts {
        self.0.io_counts()
    }
    fn backend(&self) -> &'static str {
        "plain-test"
    }
}

fn profile(dir: &Path) -> Profile {
    profile_of(dir, "fast")
}

fn profile_of(dir: &Path, scheme: &str) -> Profile {
    Profile::create_with_kdf(dir, PASS, scheme, &Params::new(), insecure::fast_kdf()).unwrap()
}

fn session(p: &Profile, store: Arc<dyn Store>) -> Session {
    p.session_with(DEFAULT_INDEX, Box::new(EmbeddedBackend::over(store)))
        .unwrap()
}

/// Files over a small vocabulary, so keywords have many documents.
fn corpus(root: &Path, from: usize, n: usize) -> Vec<PathBuf> {
    let words = [
        "fox", "dog", "cat", "owl", "elk", "yak", "emu", "gnu", "bee", "ant",
    ];
    fs::create_dir_all(root).unwrap();
    (from..from + n)
        .map(|i| {
            let text: Vec<String> = (0..40)
                .filter(|j| (i * 7 + j * 3) % 5 != 0)
                .map(|j| format!("{} w{}", words[(i + j) % words.len()], (i * j) % 97))
                .collect();
            let path = root.join(format!("f{i}.txt"));
            fs::write(&path, text.join(" ")).unwrap();
            path
        })
        .collect()
}

fn answers(s: &mut Session) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for word in ["fox", "owl", "ant", "w0", "w13", "w96", "absent"] {
        let mut hits: Vec<String> = s
            .search(word)
            .unwrap()
            .into_iter()
            .map(|d| d.path)
            .collect();
        hits.sort();
        out.push(hits);
    }
    out
}

fn keys_under(store: &dyn Store, prefix: &str) -> usize {
    store.scan_prefix(prefix.as_bytes()).unwrap().len()
}

#[test]
fn a_new_fast_index_packs_its_entries_and_answers_as_a_plain_one() {
    packs_and_answers_as_plain("fast");
}

/// Aura's searches delete the entries they read and write a cached result:
/// through packed chunks too, and searched three times here.
#[test]
fn a_new_aura_index_packs_its_entries_and_answers_as_a_plain_one() {
    packs_and_answers_as_plain("aura");
}

/// PiBas rebuilds a new generation on every add: its setup is planned
/// once, into an empty generation.
#[test]
fn a_new_pibas_generation_packs_its_entries_and_answers_as_a_plain_one() {
    packs_and_answers_as_plain("pibas");
}

fn packs_and_answers_as_plain(scheme: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    let first = corpus(&docs, 0, 120);
    let second = corpus(&docs, 120, 30);

    let packed_store = Arc::new(MemoryStore::new());
    let plain_store = Arc::new(MemoryStore::new());
    let packed_profile = profile_of(&tmp.path().join("packed"), scheme);
    let plain_profile = profile_of(&tmp.path().join("plain"), scheme);
    let mut packed = session(&packed_profile, packed_store.clone());
    let mut plain = session(&plain_profile, Arc::new(Plain(plain_store.clone())));
    for s in [&mut packed, &mut plain] {
        s.add_documents(&first, &mut |_| {}).unwrap();
        s.add_documents(&second, &mut |_| {}).unwrap();
        // Deletions are entries too.
        s.remove_documents(&[second[3].to_string_lossy().into_owned()])
            .unwrap();
    }
    assert_eq!(answers(&mut packed), answers(&mut plain));
    assert!(!answers(&mut packed)[0].is_empty());

    let generation = packed.generation();
    assert_eq!(generation, plain.generation());
    let entries = format!("i/{DEFAULT_INDEX}/{generation}/");
    let plain_entries = keys_under(plain_store.as_ref(), &entries);
    let chunks = keys_under(packed_store.as_ref(), &format!("{entries}#"));
    println!("{scheme}: {plain_entries} plain entries, {chunks} packed chunks");
    assert!(plain_entries > 2000, "{plain_entries}");
    assert_eq!(keys_under(packed_store.as_ref(), &entries), chunks);
    assert!(chunks > 0 && chunks * 10 < plain_entries, "{chunks} chunks");
    assert_eq!(keys_under(plain_store.as_ref(), &format!("{entries}#")), 0);

    // The packed index survives the session: a new one answers the same.
    drop(packed);
    let mut again = session(&packed_profile, packed_store.clone());
    assert_eq!(answers(&mut again), answers(&mut plain));
    again.check(&mut |_| {}).unwrap();
}

#[test]
fn an_index_written_plain_stays_plain() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    let first = corpus(&docs, 0, 40);
    let second = corpus(&docs, 40, 10);
    let store = Arc::new(MemoryStore::new());
    let p = profile(&tmp.path().join("p"));
    let mut old = session(&p, Arc::new(Plain(store.clone())));
    old.add_documents(&first, &mut |_| {}).unwrap();
    let before = answers(&mut old);
    let generation = old.generation();
    drop(old);

    // Now over a store the backend would pack on: it finds plain entries
    // and keeps to them.
    let mut now = session(&p, store.clone());
    assert_eq!(answers(&mut now), before);
    now.add_documents(&second, &mut |_| {}).unwrap();
    let after = answers(&mut now);
    assert!(after[0].len() > before[0].len(), "{after:?}");
    let entries = format!("i/{DEFAULT_INDEX}/{generation}/");
    assert_eq!(keys_under(store.as_ref(), &format!("{entries}#")), 0);
    assert!(keys_under(store.as_ref(), &format!("{entries}e")) > 0);
}

/// Two updates that write one label with different values (two copies
/// of a profile updating from the same state, over one store) are
/// refused, packed or plain, before anything is written.
#[test]
fn an_update_that_would_overwrite_an_entry_is_refused_in_both_layouts() {
    let fast = sesame_sse::fast::scheme();
    let put = |value: u8| {
        let request = Request::Put {
            reset: false,
            entries: vec![([7; 32], [value; 25]), ([value; 32], [value; 25])],
        };
        vec![wire::encode(&request).unwrap()]
    };
    let packed_store = Arc::new(MemoryStore::new());
    let stores: [Arc<dyn Store>; 2] = [
        packed_store.clone(),
        Arc::new(Plain(Arc::new(MemoryStore::new()))),
    ];
    for store in stores {
        let mut backend = EmbeddedBackend::over(store.clone());
        backend
            .apply_update("ix", 0, &fast, [1; 16], &put(1))
            .unwrap();
        // The same value again is no overwrite.
        backend
            .apply_update("ix", 0, &fast, [2; 16], &put(1))
            .unwrap();
        let before = store.scan_prefix(b"i/").unwrap();
        let err = backend
            .apply_update("ix", 0, &fast, [3; 16], &put(2))
            .unwrap_err();
        assert!(matches!(err, ClientError::Conflict(_)), "{err:?}");
        assert_eq!(store.scan_prefix(b"i/").unwrap(), before);
        assert_eq!(
            store
                .get(b"r/ix/\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03\x03")
                .unwrap(),
            None
        );
    }
    assert!(keys_under(packed_store.as_ref(), "i/ix/0/#") > 0);
}

/// `check` decodes every chunk of a packed generation: a damaged chunk is
/// a problem of the index's entries, found whether or not a sample search
/// reads it.
#[test]
fn check_finds_a_damaged_chunk() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = corpus(&tmp.path().join("docs"), 0, 120);
    let store = Arc::new(MemoryStore::new());
    let p = profile(&tmp.path().join("p"));
    let mut s = session(&p, store.clone());
    s.add_documents(&docs, &mut |_| {}).unwrap();
    let report = s.check(&mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let chunks: Vec<(Vec<u8>, Vec<u8>)> = store
        .scan_prefix(b"i/")
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.windows(2).any(|w| w == b"/#"))
        .collect();
    assert!(chunks.len() > 1, "{} chunks", chunks.len());
    // The last chunk, three bytes short: its last pair is cut.
    let (key, value) = chunks.last().unwrap();
    store.put(key, &value[..value.len() - 3]).unwrap();
    let report = s.check(&mut |_| {}).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.starts_with("the index's entries:") && p.contains("packed chunk")),
        "{:?}",
        report.problems
    );
}

/// Packed deltas of keyword generations (`i/<index>/<generation>/#...`
/// holding a value that starts with `0x02`) in the whole store.
fn keyword_deltas(store: &dyn Store) -> usize {
    store
        .scan_prefix(b"i/")
        .unwrap()
        .iter()
        .filter(|(key, value)| {
            let mut parts = key.splitn(4, |&b| b == b'/');
            let (_, _, generation, rest) = (parts.next(), parts.next(), parts.next(), parts.next());
            generation.is_some_and(|g| !g.is_empty() && g.iter().all(u8::is_ascii_digit))
                && rest.is_some_and(|r| r.first() == Some(&b'#'))
                && value.first() == Some(&2)
        })
        .count()
}

/// A table's second import appends its keyword entries beside the chunks
/// the first one wrote (deltas, which make most lookups read a chunk
/// twice); the import ends by merging them into their chunks
/// (`Table::compact_index`), and every answer is as before.
#[test]
fn an_import_leaves_no_delta_beside_the_keyword_chunks() {
    use sesame_client::table::import::Format;
    use sesame_client::table::{Schema, Table};

    let tmp = tempfile::tempdir().unwrap();
    let p = profile(&tmp.path().join("p"));
    let store = Arc::new(MemoryStore::new());
    let backend = || Box::new(EmbeddedBackend::over(store.clone() as Arc<dyn Store>));
    let schema = Schema::from_toml(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.tail]\ntype = \"string\"\n\
         index = [\"equality\"]\n",
    )
    .unwrap();
    let mut table = Table::create_with(&p, "t", schema, backend()).unwrap();
    let csv = |name: &str, rows: std::ops::Range<usize>| {
        let path = tmp.path().join(name);
        let mut text = String::from("id,tail\n");
        for i in rows {
            text.push_str(&format!("{i},N{}\n", i % 97));
        }
        fs::write(&path, text).unwrap();
        path
    };
    table
        .import(&csv("a.csv", 0..3_000), Format::Csv, &mut |_| {})
        .unwrap();
    table
        .import(&csv("b.csv", 3_000..3_040), Format::Csv, &mut |_| {})
        .unwrap();
    assert_eq!(
        keyword_deltas(store.as_ref()),
        0,
        "deltas left beside the keyword chunks after an import"
    );
    for tail in [0, 5, 96] {
        let answer = table.query(&format!("tail = \"N{tail}\""), None).unwrap();
        let want = (0..3_040).filter(|i| i % 97 == tail).count();
        assert_eq!(answer.records.len(), want, "N{tail}");
    }
    drop(table);
    let mut again = Table::open_with(&p, "t", backend()).unwrap();
    assert_eq!(
        again.query("tail = \"N1\"", None).unwrap().records.len(),
        32
    );
    let (_, problems) = again.check().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}
