//! Tests of the state files: formats, the log of changes.

use super::*;
use rand_core::OsRng;

/// A state holding `n` documents.
pub(super) fn state_of(n: u64) -> IndexState {
    let mut state = IndexState::new("fast", &Params::new(), vec![7; 64]);
    for id in 1..=n {
        state.catalog.insert(id, doc(id));
    }
    state.next_doc = n + 1;
    state
}

pub(super) fn doc(id: u64) -> DocumentInfo {
    // A digest as a catalog block keeps it (its first 16 bytes, then
    // zeros: module `forms`), so that an entry reads back equal.
    let mut digest = [id as u8; 32];
    digest[16..].fill(0);
    DocumentInfo {
        id,
        path: format!("flights.csv#0a1b2c3d4e5f:{id:016x}"),
        size: 200,
        digest: Some(digest),
    }
}

/// Bytes this thread has passed to `write` so far (Linux).
fn written() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap_or_default();
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no wchar in /proc/thread-self/io: {io:?}"))
}

fn cipher() -> StateCipher {
    StateCipher::new(&Key::from_bytes([9; 32]), "p")
}

/// State files of formats 1 and 2 (`SSMIDX01`, `SSMIDX02`), their
/// plaintext laid out field by field as those formats wrote it, load
/// as they were: the documents, and in format 2 the pending intents
/// and the journal's reserved identifiers.
#[test]
fn states_of_formats_1_and_2_load_as_they_were() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = cipher();
    let catalog = BTreeMap::from([(3u64, (3u64, "a.txt", 10u64))]);
    let head = ("fast", Params::new(), 4u64, 9u64, vec![7u8; 8], catalog);
    let pending = vec![(
        [1u8; 16],
        2u64,
        vec![vec![5u8]],
        vec![(4u64, "b.txt", 11u64)],
    )];
    let journal = vec![(6u64, "c.txt", [0u8; 32])];
    let (h, v2) = (head.clone(), (pending, journal));
    let v2 = (h.0, h.1, h.2, h.3, h.4, h.5, v2.0, v2.1);
    for (magic, format, plain) in [
        (MAGIC_V1, 1, wire::encode(&head)),
        (MAGIC_V2, 2, wire::encode(&v2)),
    ] {
        let plain = plain.unwrap_or_else(|e| panic!("{e}"));
        let sealed = cipher
            .aead
            .seal(&mut OsRng, &cipher.aad(format, "t", "fast"), &plain)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let file = [magic.as_slice(), &[4], b"fast", &sealed].concat();
        std::fs::write(&path, file).unwrap_or_else(|e| panic!("{e}"));
        let state = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((state.generation, state.next_doc), (4, 9));
        assert_eq!(state.client, vec![7u8; 8]);
        let doc = DocumentInfo {
            id: 3,
            path: "a.txt".into(),
            size: 10,
            digest: None,
        };
        assert_eq!(state.catalog.get(&3).ok().flatten(), Some(doc));
        let legacy: Vec<_> = state
            .legacy
            .iter()
            .map(|i| (i.id, i.generation, i.requests.clone(), i.documents.len()))
            .collect();
        if format == 2 {
            assert_eq!(state.reserved, vec![6]);
            assert_eq!(legacy, vec![([1u8; 16], 2, vec![vec![5u8]], 1)]);
        } else {
            assert!(state.reserved.is_empty() && legacy.is_empty());
        }
    }
}

/// Saves `state` as index `t` at `path`.
fn save(cipher: &StateCipher, path: &Path, state: &IndexState) {
    cipher
        .save(&mut OsRng, path, "t", state)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A save after a few documents were added writes in proportion to
/// them, not the whole catalog again.
#[cfg(target_os = "linux")]
#[test]
fn a_save_writes_what_changed_not_the_whole_state() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = cipher();
    let mut state = state_of(20_000);
    save(&cipher, &path, &state);
    let whole = std::fs::metadata(&path).map_or(0, |m| m.len());
    for round in 0..3u64 {
        let id = 20_001 + round;
        state.catalog.insert(id, doc(id));
        state.next_doc = id + 1;
        let before = written();
        save(&cipher, &path, &state);
        let wrote = written() - before;
        assert!(
            wrote < 4096,
            "a save of one more document wrote {wrote} bytes (the whole state is {whole} \
             bytes)"
        );
    }
    let loaded = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.catalog.len(), 20_003);
    assert_eq!(loaded.next_doc, 20_004);
    assert_eq!(
        loaded.catalog.get(&20_002).ok().flatten(),
        Some(doc(20_002))
    );
}

/// The log of changes after the snapshot, as its file holds it:
/// `(u32 length || sealed record)*`.
fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        let (record, tail) = tail.split_at(len.min(tail.len()));
        let mut framed = (len as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(record);
        out.push(framed);
        rest = tail;
    }
    out
}

fn log_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "statelog"))
        .unwrap_or_else(|| {
            panic!("no log of changes beside the state: the whole state is rewritten by every save")
        })
}

/// A log of changes with its last change dropped, an older change
/// played again in its place, or two changes swapped, does not open:
/// the same refusal as a flipped byte ([`ClientError::StateCorrupt`]),
/// nothing of it used.
#[test]
fn a_dropped_replayed_or_reordered_change_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    // The catalog kept in the state, so that the log holds it.
    let cipher = cipher().with_catalog(usize::MAX, 1 << 20);
    let mut state = state_of(20_000);
    save(&cipher, &path, &state);
    for id in 20_001..=20_003 {
        state.catalog.insert(id, doc(id));
        state.next_doc = id + 1;
        save(&cipher, &path, &state);
    }
    let log = log_file(dir.path());
    let good = std::fs::read(&log).unwrap_or_else(|e| panic!("{e}"));
    let all = records(&good);
    assert_eq!(all.len(), 4, "a snapshot and three changes");
    let (snapshot, changes) = all.split_first().unwrap_or_else(|| panic!("empty log"));
    let put = |parts: &[&Vec<u8>]| {
        let bytes: Vec<u8> = std::iter::once(snapshot)
            .chain(parts.iter().copied())
            .flatten()
            .copied()
            .collect();
        std::fs::write(&log, bytes).unwrap_or_else(|e| panic!("{e}"));
    };
    let [c1, c2, c3] = [&changes[0], &changes[1], &changes[2]];
    for (what, parts) in [
        ("the last change dropped", vec![c1, c2]),
        ("an older change in place of the last", vec![c1, c2, c2]),
        ("the first change in place of the last", vec![c1, c2, c1]),
        ("two changes swapped", vec![c2, c1, c3]),
        ("a change dropped in the middle", vec![c1, c3]),
    ] {
        put(&parts);
        match cipher.load(&path, "t") {
            Err(ClientError::StateCorrupt { .. }) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(s) => panic!(
                "{what}: opened, with {} documents (next {})",
                s.catalog.len(),
                s.next_doc
            ),
        }
    }
    std::fs::write(&log, &good).unwrap_or_else(|e| panic!("{e}"));
    let loaded = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.catalog.len(), 20_003);
}

/// A save cut off between its log record and its head (the head of
/// the save before put back) leaves the state before it; the next
/// save cuts the record off and continues the log.
#[test]
fn a_save_cut_off_before_its_head_leaves_the_state_before_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = cipher();
    let mut state = state_of(20_000);
    save(&cipher, &path, &state);
    state.catalog.insert(20_001, doc(20_001));
    save(&cipher, &path, &state);
    let head = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    state.catalog.remove(&20_001);
    state.catalog.insert(20_002, doc(20_002));
    save(&cipher, &path, &state);
    std::fs::write(&path, &head).unwrap_or_else(|e| panic!("{e}"));
    let mut older = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
    assert!(older.catalog.contains_key(&20_001).unwrap_or(false));
    assert!(!older.catalog.contains_key(&20_002).unwrap_or(true));
    older.catalog.insert(20_003, doc(20_003));
    save(&cipher, &path, &older);
    let loaded = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<u64> = loaded.catalog.keys().flatten().skip(19_999).collect();
    assert_eq!(ids, [20_000, 20_001, 20_003]);
}

/// Changes outgrowing the snapshot start a new log (the old one
/// deleted), and every state in between loads as it was saved; a
/// state that shrinks below the threshold is saved whole again.
#[test]
fn a_log_grown_past_its_snapshot_is_compacted() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = cipher().with_log_from(8 * 1024);
    let logs = || {
        std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "statelog"))
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    };
    let mut state = state_of(200);
    save(&cipher, &path, &state);
    let first = logs();
    assert_eq!(first.len(), 1);
    for id in 201..=400u64 {
        state.catalog.insert(id, doc(id));
        state.catalog.remove(&(id - 150));
        state.next_doc = id + 1;
        save(&cipher, &path, &state);
        if id % 50 == 0 {
            let loaded = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
            assert!(loaded.catalog == state.catalog, "after {id}");
            assert_eq!(loaded.next_doc, id + 1);
        }
    }
    let now = logs();
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, first, "the log was not compacted");
    let mut small = state_of(3);
    small.next_doc = 9;
    save(&cipher, &path, &small);
    assert!(logs().is_empty());
    let loaded = cipher.load(&path, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.next_doc, 9);
}

/// A shared record of this build (`SSMSHR03`) carries the catalog as a
/// catalog run's compact blocks: it opens with every entry (each digest
/// cut to its first 16 bytes) and the state's other fields as they were,
/// in under half the bytes of the record before (`SSMSHR02`, the catalog
/// a map of postcard entries), which still opens whole. Neither opens
/// relabelled as the other.
#[test]
fn shared_records_carry_the_catalog_in_blocks_and_the_format_before_opens() {
    let cipher = cipher();
    let mut rng = OsRng;
    let mut state = IndexState::new("fast", &sesame_core::Params::new(), vec![1, 2, 3]);
    state.generation = 4;
    state.next_doc = 3_001;
    state.reserved = vec![3_001];
    state.garbage = vec![17];
    state.pending = vec![PendingRef {
        id: [3; 16],
        documents: 2,
    }];
    let full = |id: u64| DocumentInfo {
        digest: Some([id as u8 ^ 0x5a; 32]),
        ..doc(id)
    };
    for id in 1..=3_000 {
        state.catalog.insert(id, full(id));
    }
    let extras = SharedExtras::default();
    let chain = Chain::default();
    let new = cipher
        .seal_shared(&mut rng, "i", 9, &state, &extras, &chain)
        .unwrap_or_else(|e| panic!("{e}"));
    let old = cipher
        .seal_shared(&mut rng, "i", 9, &state, &extras, &ChainV2(chain.clone()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&new[..8], b"SSMSHR03");
    assert_eq!(&old[..8], b"SSMSHR02");
    assert!(
        new.len() * 2 < old.len(),
        "{} against {}",
        new.len(),
        old.len()
    );
    for (record, cut) in [(&new, true), (&old, false)] {
        let (opened, _, got) = cipher
            .open_shared("i", 9, record)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, Some(chain.clone()));
        assert_eq!(
            (opened.generation, opened.next_doc, &opened.client),
            (4, 3_001, &vec![1, 2, 3])
        );
        assert_eq!(
            (&opened.reserved, &opened.garbage),
            (&vec![3_001], &vec![17])
        );
        assert_eq!(opened.pending, state.pending);
        assert_eq!(opened.catalog.len(), 3_000);
        for e in opened.catalog.iter() {
            let (id, d) = e.unwrap_or_else(|e| panic!("{e}"));
            let mut want = full(id);
            if cut {
                if let Some(g) = want.digest.as_mut() {
                    g[16..].fill(0);
                }
            }
            assert_eq!(d, want);
        }
    }
    for (record, other) in [(&new, b"SSMSHR02"), (&old, b"SSMSHR03")] {
        let mut relabelled = record.clone();
        relabelled[..8].copy_from_slice(other);
        assert!(cipher.open_shared("i", 9, &relabelled).is_err());
    }
}
