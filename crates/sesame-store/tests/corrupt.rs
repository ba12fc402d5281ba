//! Files that are not Sesame stores, or damaged ones: a clear error (or the
//! right data), never a panic, and a foreign file is never changed.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use redb::TableDefinition;
use sesame_core::{Error, Store, WriteBatch};
use sesame_store::{RedbStore, FORMAT_KEY};

const META_STR: TableDefinition<&str, &str> = TableDefinition::new("sesame.meta");
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sesame.data");

/// Deterministic pseudo-random bytes (xorshift64).
fn noise(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Opens `path` both ways, expecting an error; checks the file is unchanged.
fn refused(path: &Path) -> Vec<Error> {
    let before = std::fs::read(path).unwrap();
    let errs = vec![
        RedbStore::open(path).unwrap_err(),
        RedbStore::open_checked(path).unwrap_err(),
    ];
    for err in &errs {
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()),
            "the error names the path: {msg}"
        );
    }
    assert_eq!(std::fs::read(path).unwrap(), before, "the file was changed");
    errs
}

/// `err` says the file is damaged or not a Sesame store (`what` names
/// the case).
fn assert_damaged(err: &Error, what: &str) {
    assert!(
        matches!(err, Error::StoreCorrupt(_) | Error::StoreForeign(_)),
        "{what}: {err:?}"
    );
}

fn assert_foreign(path: &Path, needle: &str) {
    for err in refused(path) {
        assert!(matches!(err, Error::StoreForeign(_)), "{err:?}");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn random_bytes_are_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "random.bin", &noise(64 << 10, 1));
    assert_foreign(&path, "not a redb database");
}

#[test]
fn an_empty_file_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "empty", b"");
    assert_foreign(&path, "empty");
}

#[test]
fn a_text_file_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let text = "Dear diary,\nthe index is in another file.\n".repeat(100);
    let path = write_file(dir.path(), "notes.txt", text.as_bytes());
    assert_foreign(&path, "not a redb database");
    let path = write_file(dir.path(), "short.txt", b"redb");
    assert_foreign(&path, "not a redb database");
}

#[test]
fn garbage_after_the_redb_magic_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let magic = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
    for (i, len) in [9usize, 100, 4096, 64 << 10, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let mut bytes = noise(len, 7 + i as u64);
        bytes[..9].copy_from_slice(&magic);
        let path = write_file(dir.path(), &format!("garbage{i}.redb"), &bytes);
        for err in refused(&path) {
            assert_damaged(&err, &format!("{len} bytes"));
        }
    }
}

/// A redb database of another program at `path`, open: a table
/// `counters` holding 1 → 2.
fn counters_db(path: &Path) -> redb::Database {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    txn.open_table(TableDefinition::<u64, u64>::new("counters"))
        .unwrap()
        .insert(1, 2)
        .unwrap();
    txn.commit().unwrap();
    db
}

/// A redb database of another program: refused, and not a byte changed,
/// although redb itself writes to every file it opens.
#[test]
fn a_plain_redb_file_is_foreign_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    drop(counters_db(&path));
    assert_foreign(&path, "without the Sesame marker");
    let db = redb::Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn
        .open_table(TableDefinition::<u64, u64>::new("counters"))
        .unwrap();
    assert_eq!(table.get(1).unwrap().unwrap().value(), 2);
}

/// The same for a redb file that was not closed cleanly, which redb repairs
/// (in writing) on open: the repair happens in memory only.
#[test]
fn an_unclean_plain_redb_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.redb");
    let db = counters_db(&live);
    // A copy taken while the database is open needs recovery.
    let copy = write_file(dir.path(), "unclean.redb", &std::fs::read(&live).unwrap());
    drop(db);
    assert_foreign(&copy, "without the Sesame marker");
}

fn redb_with(path: &Path, meta: Option<(&str, &str)>, data_table: bool) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    if let Some((k, v)) = meta {
        txn.open_table(META_STR).unwrap().insert(k, v).unwrap();
    }
    if data_table {
        txn.open_table(DATA).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn markers_are_checked() {
    let dir = tempfile::tempdir().unwrap();

    let path = dir.path().join("future.redb");
    redb_with(&path, Some((FORMAT_KEY, "sesame-store/2")), true);
    assert_foreign(&path, "sesame-store/2");

    let path = dir.path().join("odd-marker.redb");
    redb_with(&path, Some((FORMAT_KEY, "something else")), true);
    assert_foreign(&path, "unexpected format marker");

    let path = dir.path().join("no-key.redb");
    redb_with(&path, Some(("other.key", "x")), true);
    assert_foreign(&path, "no sesame.format marker");

    let path = dir.path().join("typed.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(TableDefinition::<u64, u64>::new("sesame.meta"))
            .unwrap()
            .insert(1, 1)
            .unwrap();
        txn.commit().unwrap();
    }
    assert_foreign(&path, "unexpected table layout");

    let path = dir.path().join("no-data.redb");
    redb_with(
        &path,
        Some((FORMAT_KEY, sesame_store::FORMAT_VERSION)),
        false,
    );
    for err in refused(&path) {
        assert!(matches!(err, Error::StoreCorrupt(_)), "{err:?}");
        assert!(err.to_string().contains("data table is missing"), "{err}");
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `pairs` to `store` in one batch.
fn write_pairs(store: &RedbStore, pairs: &[(Vec<u8>, Vec<u8>)]) {
    let mut batch = WriteBatch::new();
    for (k, v) in pairs {
        batch.put(k.clone(), v.clone());
    }
    store.write(batch).unwrap();
}

/// A store with a few thousand pairs, closed; returns its bytes and pairs.
fn sample_store(path: &Path) -> (Vec<u8>, Pairs) {
    let store = RedbStore::open(path).unwrap();
    for b in 0..4u32 {
        let mut batch = WriteBatch::new();
        for i in 0..500u32 {
            let v = noise(40 + (i % 50) as usize, u64::from(b * 1000 + i) + 1);
            batch.put(format!("key/{b}/{i:04}"), v);
        }
        store.write(batch).unwrap();
    }
    let pairs = store.scan_prefix(b"").unwrap();
    drop(store);
    (std::fs::read(path).unwrap(), pairs)
}

#[test]
fn a_truncated_store_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = sample_store(&dir.path().join("store.redb"));
    for len in [9, 100, 4096, bytes.len() / 2, bytes.len() - 1] {
        let path = write_file(dir.path(), &format!("cut{len}.redb"), &bytes[..len]);
        for err in refused(&path) {
            assert_damaged(&err, &len.to_string());
        }
    }
}

/// Flips bytes across a store file. `open_checked` must give an error or
/// exactly the data written; `open` must give an error or some data (redb
/// does not verify checksums on a clean open, so a flipped byte in a data
/// page can read back wrong); nothing may panic out of the store.
#[test]
fn flipped_bytes_give_an_error_or_the_right_data() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, pairs) = sample_store(&dir.path().join("store.redb"));
    let n = bytes.len();
    let mut offsets = vec![9, 16, 40, 200, 4096 + 8, n / 2, n / 2 + 4099];
    offsets.extend((1..8).map(|i| n * i / 8 + 123));
    // Inside stored values, to hit live data pages (and stale copies).
    for (_, v) in [&pairs[0], &pairs[777], &pairs[1999]] {
        let found = bytes.windows(v.len()).enumerate().filter(|(_, w)| w == v);
        offsets.extend(found.map(|(at, _)| at + v.len() / 2));
    }
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| k.as_slice()).collect();
    let values: Vec<Option<Vec<u8>>> = pairs.iter().map(|(_, v)| Some(v.clone())).collect();
    let (mut checked_refused, mut plain_refused, mut plain_wrong) = (0, 0, 0);
    for (i, &at) in offsets.iter().enumerate() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x5A;
        let path = write_file(dir.path(), &format!("flip{i}.redb"), &damaged);

        let checked = match RedbStore::open_checked(&path) {
            Err(err) => {
                assert_damaged(&err, &format!("flip at {at}"));
                assert_eq!(std::fs::read(&path).unwrap(), damaged, "flip at {at}");
                checked_refused += 1;
                format!("refused: {err}")
            }
            Ok(store) => {
                assert_eq!(store.scan_prefix(b"").unwrap(), pairs, "flip at {at}");
                assert_eq!(store.get_many(&keys).unwrap(), values, "flip at {at}");
                "right data".to_string()
            }
        };

        let path = write_file(dir.path(), &format!("flip{i}.redb"), &damaged);
        let plain = match RedbStore::open(&path) {
            Err(err) => {
                assert_damaged(&err, &format!("flip at {at}"));
                plain_refused += 1;
                format!("refused: {err}")
            }
            Ok(store) => match (store.scan_prefix(b""), store.get_many(&keys)) {
                (Ok(s), Ok(g)) if s == pairs && g == values => "right data".to_string(),
                (Ok(_), Ok(_)) => {
                    plain_wrong += 1;
                    "WRONG DATA".to_string()
                }
                (Err(err), _) | (_, Err(err)) => {
                    assert!(matches!(err, Error::StoreCorrupt(_)), "{err:?}");
                    plain_refused += 1;
                    format!("read error: {err}")
                }
            },
        };
        eprintln!("flip at {at}:\n  open_checked: {checked}\n  open: {plain}");
    }
    eprintln!(
        "{} flips: open_checked refused {checked_refused}; open refused {plain_refused}, \
         read wrong data {plain_wrong}",
        offsets.len()
    );
}

/// Single flipped bytes all over a store file: whatever reads wrong (a
/// value changed, a pair missing) is reported by opening the file or by
/// `verify`, and nothing panics.
#[test]
fn verify_reports_every_flip_that_reads_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..300u64)
        .map(|i| (format!("key{i:04}").into_bytes(), noise(40, i + 1)))
        .collect();
    write_pairs(&RedbStore::open(&path).unwrap(), &expected);
    let clean = std::fs::read(&path).unwrap();
    // Where the pairs live: the pages holding the first values (the file
    // is mostly unused space), flipped all over, plus the file's header.
    let first = clean
        .windows(40)
        .position(|w| expected.iter().any(|(_, v)| w == v.as_slice()))
        .unwrap();
    let page = first - first % 4096;
    let span = (clean.len() - page).min(4 * 4096);
    let positions: Vec<usize> = noise(8 * 120, 99)
        .chunks(8)
        .enumerate()
        .map(|(n, b)| {
            let r = u64::from_le_bytes(b.try_into().unwrap()) as usize;
            if n % 4 == 0 {
                r % 4096
            } else {
                page + r % span
            }
        })
        .collect();
    let (mut wrong, mut reported, mut silent) = (0, 0, Vec::new());
    for (n, &at) in positions.iter().enumerate() {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x5a;
        let copy = write_file(dir.path(), &format!("flip{n}.redb"), &bytes);
        let Ok(store) = RedbStore::open(&copy) else {
            reported += 1;
            continue;
        };
        let reads_wrong = expected.iter().any(|(k, v)| match store.get(k) {
            Ok(Some(got)) => &got != v,
            _ => true,
        }) || store.scan_prefix(b"").map_or(true, |all| all != expected);
        let verified = store.verify();
        if verified.is_err() && !reads_wrong {
            reported += 1;
        }
        if reads_wrong {
            wrong += 1;
            if verified.is_err() {
                reported += 1;
            } else {
                silent.push(at);
            }
        }
    }
    assert!(
        silent.is_empty(),
        "flips at {silent:?} read wrong and verify said nothing"
    );
    eprintln!("{wrong} of 120 flipped copies read wrong; {reported} reported at open or by verify");
    assert!(wrong > 0, "no flip hit the data: the test tests nothing");
}
