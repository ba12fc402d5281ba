//! The generic store suite: the behaviour every [`Store`] backend must show.
//!
//! Each function takes a fresh, empty store and panics on a failure, so a
//! backend's tests are one line each; [`store_suite!`](crate::store_suite)
//! writes those lines. A backend that keeps data across reopening tests that
//! itself (it needs to know how to reopen).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sesame_core::{Conditional, IoCounts, Store, WriteBatch};

/// Proptest cases [`random_ops_match_oracle`] runs under `store_suite!`
/// unless told otherwise.
pub const ORACLE_CASES: u32 = 64;

/// A store that `remove` deletes when the wrapper is dropped: the suite
/// over a server's store in a fresh namespace (PostgreSQL, Redis
/// Cluster), which must not outlive the test.
pub struct Dropping<S: Store> {
    store: Option<S>,
    remove: fn(S),
}

impl<S: Store> Dropping<S> {
    /// Wraps `store`; `remove` runs on it when the wrapper is dropped.
    pub fn new(store: S, remove: fn(S)) -> Self {
        Self {
            store: Some(store),
            remove,
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        match &self.store {
            Some(s) => s,
            None => unreachable!("the store is taken only when dropped"),
        }
    }
}

impl<S: Store> Drop for Dropping<S> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            (self.remove)(store);
        }
    }
}

impl<S: Store> Store for Dropping<S> {
    crate::forward_store!(|s| s.inner(); get, get_many, write, write_if, write_if_group,
        commit_groups, scan_prefix, scan_from, ordered_probes, io_counts, backend);
}

/// The command that runs this test binary's test `crash_child` alone: the
/// child process a crash test starts and kills (its environment says what
/// the child does).
pub fn crash_child() -> std::io::Result<std::process::Command> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.args([
        "--exact",
        "crash_child",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    Ok(command)
}

/// Instantiates the store suite as `#[test]` functions in the current
/// module, given an expression that makes a fresh, empty store (a function
/// path or a closure; the store may be any type that implements `Store`),
/// and optionally the number of cases for [`random_ops_match_oracle`]
/// (default [`ORACLE_CASES`]; fewer where every commit costs an `fsync`).
///
/// ```ignore
/// mod memory {
///     sesame_store::store_suite!(sesame_store::MemoryStore::new);
/// }
/// mod redb_file {
///     sesame_store::store_suite!(super::temp_redb, 16);
/// }
/// ```
///
/// `store_suite!(optional make, cases)` is the same for a backend that may
/// be unavailable (a database server): `make` returns `Option<store>`, and
/// each test returns early, passing, when it gives `None` (`make` prints
/// why).
#[macro_export]
macro_rules! store_suite {
    (optional $make:expr, $oracle_cases:expr) => {
        $crate::store_suite!(@every optional_cases $make);
        #[test]
        fn random_ops_match_oracle() {
            let Some(store) = ($make)() else { return };
            $crate::suite::random_ops_match_oracle(&store, $oracle_cases);
        }
    };
    // The cases, listed once: `@every optional_cases` or `@every cases`.
    (@every $kind:ident $make:expr) => {
        $crate::store_suite!(@$kind $make;
            get_missing,
            put_get,
            overwrite,
            delete,
            batch_applies_in_order,
            empty_batch,
            scan_prefix_order_and_bounds,
            empty_key_and_value,
            large_value,
            io_counts,
            concurrent_writers,
            batches_are_isolated,
            conditional_writes,
            conditional_writes_race,
            conditional_write_groups
        );
    };
    (@optional_cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let Some(store) = ($make)() else { return };
                $crate::suite::$case(&store);
            }
        )*
    };
    ($make:expr) => {
        $crate::store_suite!($make, $crate::suite::ORACLE_CASES);
    };
    ($make:expr, $oracle_cases:expr) => {
        $crate::store_suite!(@every cases $make);
        #[test]
        fn random_ops_match_oracle() {
            let store = ($make)();
            $crate::suite::random_ops_match_oracle(&store, $oracle_cases);
        }
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let store = ($make)();
                $crate::suite::$case(&store);
            }
        )*
    };
}

fn put<S: Store + ?Sized>(store: &S, key: &[u8], value: &[u8]) {
    store.put(key, value).expect("put");
}

fn get<S: Store + ?Sized>(store: &S, key: &[u8]) -> Option<Vec<u8>> {
    store.get(key).expect("get")
}

fn scan<S: Store + ?Sized>(store: &S, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    store.scan_prefix(prefix).expect("scan_prefix")
}

fn keys(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
    pairs.iter().map(|(k, _)| k.clone()).collect()
}

/// A key never written reads as `None`, alone and in `get_many`.
pub fn get_missing<S: Store + ?Sized>(store: &S) {
    assert_eq!(get(store, b"missing"), None);
    assert_eq!(get(store, b""), None);
    put(store, b"present", b"1");
    assert_eq!(get(store, b"missing"), None);
    assert_eq!(get(store, b"presen"), None);
    assert_eq!(get(store, b"present\0"), None);
    let got = store
        .get_many(&[b"missing", b"present", b"other"])
        .expect("get_many");
    assert_eq!(got, vec![None, Some(b"1".to_vec()), None]);
    assert_eq!(store.get_many(&[]).expect("get_many of nothing"), vec![]);
}

/// What is put is got back, byte for byte.
pub fn put_get<S: Store + ?Sized>(store: &S) {
    put(store, b"alpha", b"one");
    put(store, b"beta", &[0, 1, 2, 255]);
    assert_eq!(get(store, b"alpha").as_deref(), Some(&b"one"[..]));
    assert_eq!(get(store, b"beta").as_deref(), Some(&[0, 1, 2, 255][..]));
    let got = store.get_many(&[b"beta", b"alpha"]).expect("get_many");
    assert_eq!(got, vec![Some(vec![0, 1, 2, 255]), Some(b"one".to_vec())]);
}

/// A put on a present key replaces its value, also with a shorter one.
pub fn overwrite<S: Store + ?Sized>(store: &S) {
    put(store, b"k", b"first value");
    put(store, b"k", b"second");
    assert_eq!(get(store, b"k").as_deref(), Some(&b"second"[..]));
    put(store, b"k", b"");
    assert_eq!(get(store, b"k").as_deref(), Some(&b""[..]));
    assert_eq!(scan(store, b"").len(), 1);
}

/// A delete removes a key; deleting an absent key is no error.
pub fn delete<S: Store + ?Sized>(store: &S) {
    put(store, b"a", b"1");
    put(store, b"b", b"2");
    store.delete(b"a").expect("delete");
    assert_eq!(get(store, b"a"), None);
    assert_eq!(get(store, b"b").as_deref(), Some(&b"2"[..]));
    store.delete(b"a").expect("delete of an absent key");
    store
        .delete(b"never")
        .expect("delete of a never written key");
    assert_eq!(keys(&scan(store, b"")), vec![b"b".to_vec()]);
}

/// A batch applies its operations in order.
pub fn batch_applies_in_order<S: Store + ?Sized>(store: &S) {
    put(store, b"old", b"x");
    let mut batch = WriteBatch::new();
    batch
        .put(b"gone".as_slice(), b"1".as_slice())
        .delete(b"gone".as_slice())
        .delete(b"back".as_slice())
        .put(b"back".as_slice(), b"2".as_slice())
        .put(b"twice".as_slice(), b"first".as_slice())
        .put(b"twice".as_slice(), b"last".as_slice())
        .delete(b"old".as_slice());
    store.write(batch).expect("write");
    assert_eq!(get(store, b"gone"), None);
    assert_eq!(get(store, b"back").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(store, b"twice").as_deref(), Some(&b"last"[..]));
    assert_eq!(get(store, b"old"), None);
    assert_eq!(
        keys(&scan(store, b"")),
        vec![b"back".to_vec(), b"twice".to_vec()]
    );
}

/// An empty batch changes nothing and counts nothing.
pub fn empty_batch<S: Store + ?Sized>(store: &S) {
    put(store, b"k", b"v");
    let before = store.io_counts();
    store
        .write(WriteBatch::new())
        .expect("write of an empty batch");
    assert_eq!(store.io_counts().since(&before), IoCounts::default());
    assert_eq!(scan(store, b""), vec![(b"k".to_vec(), b"v".to_vec())]);
}

/// Prefix scans return exactly the keys with the prefix, in byte order,
/// including at the `0x00` and `0xFF` edges.
pub fn scan_prefix_order_and_bounds<S: Store + ?Sized>(store: &S) {
    let all: Vec<&[u8]> = vec![
        b"",
        &[0x00],
        &[0x00, 0x00],
        &[0x01],
        &[0x01, 0x00],
        &[0x01, 0xFF],
        &[0x01, 0xFF, 0xFF],
        &[0x02],
        b"ab",
        b"abc",
        b"abd",
        b"abd\xff",
        b"ac",
        &[0xFE, 0xFF],
        &[0xFF],
        &[0xFF, 0x00],
        &[0xFF, 0xFF],
        &[0xFF, 0xFF, 0xFF],
    ];
    // Written in reverse so that order comes from the store, not from us.
    let mut batch = WriteBatch::new();
    for (i, k) in all.iter().enumerate().rev() {
        batch.put(*k, vec![i as u8]);
    }
    store.write(batch).expect("write");
    let owned = |ks: &[&[u8]]| ks.iter().map(|k| k.to_vec()).collect::<Vec<_>>();

    let everything = scan(store, b"");
    assert_eq!(
        keys(&everything),
        owned(&all),
        "the empty prefix returns all"
    );
    for (i, (_, v)) in everything.iter().enumerate() {
        assert_eq!(v, &vec![i as u8], "values travel with their keys");
    }
    let cases: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (&[0x00], vec![&[0x00], &[0x00, 0x00]]),
        (
            &[0x01],
            vec![&[0x01], &[0x01, 0x00], &[0x01, 0xFF], &[0x01, 0xFF, 0xFF]],
        ),
        (&[0x01, 0xFF], vec![&[0x01, 0xFF], &[0x01, 0xFF, 0xFF]]),
        (b"a", vec![b"ab", b"abc", b"abd", b"abd\xff", b"ac"]),
        (b"ab", vec![b"ab", b"abc", b"abd", b"abd\xff"]),
        (b"abd", vec![b"abd", b"abd\xff"]),
        (b"abe", vec![]),
        (b"b", vec![]),
        (&[0xFE], vec![&[0xFE, 0xFF]]),
        (
            &[0xFF],
            vec![&[0xFF], &[0xFF, 0x00], &[0xFF, 0xFF], &[0xFF, 0xFF, 0xFF]],
        ),
        (&[0xFF, 0xFF], vec![&[0xFF, 0xFF], &[0xFF, 0xFF, 0xFF]]),
        (&[0xFF, 0xFF, 0xFF, 0xFF], vec![]),
    ];
    for (prefix, want) in cases {
        assert_eq!(
            keys(&scan(store, prefix)),
            owned(&want),
            "scan_prefix({prefix:02x?})"
        );
    }
    // `scan_from` is a window of the same order: compared with the full
    // scan filtered here, for every prefix above and every stored key as
    // the start (plus keys that are not stored), both ways.
    let mut starts: Vec<&[u8]> = all.clone();
    starts.extend([b"aa".as_slice(), b"abca", b"zz", &[0x00, 0x00, 0x00]]);
    for prefix in [b"".as_slice(), &[0x01], b"ab", b"abd", b"abe", &[0xFF]] {
        let under: Vec<Vec<u8>> = keys(&scan(store, prefix));
        for from in &starts {
            for (descending, limit) in [(false, 1), (false, 3), (true, 1), (true, 2), (true, 99)] {
                let mut want: Vec<Vec<u8>> = under
                    .iter()
                    .filter(|k| {
                        if descending {
                            k.as_slice() <= *from
                        } else {
                            k.as_slice() >= *from
                        }
                    })
                    .cloned()
                    .collect();
                if descending {
                    want.reverse();
                }
                want.truncate(limit);
                let got = store
                    .scan_from(prefix, from, descending, limit)
                    .expect("scan_from");
                assert_eq!(
                    keys(&got),
                    want,
                    "scan_from({prefix:02x?}, {from:02x?}, descending {descending}, {limit})"
                );
            }
        }
    }
}

/// The empty key and empty values are ordinary keys and values.
pub fn empty_key_and_value<S: Store + ?Sized>(store: &S) {
    put(store, b"", b"value of the empty key");
    put(store, b"empty", b"");
    assert_eq!(
        get(store, b"").as_deref(),
        Some(&b"value of the empty key"[..])
    );
    assert_eq!(get(store, b"empty"), Some(vec![]));
    assert_eq!(
        scan(store, b""),
        vec![
            (vec![], b"value of the empty key".to_vec()),
            (b"empty".to_vec(), vec![]),
        ]
    );
    store.delete(b"").expect("delete of the empty key");
    assert_eq!(get(store, b""), None);
    assert_eq!(get(store, b"empty"), Some(vec![]));
}

/// Values of 1 MiB and keys of 1 KiB round-trip.
pub fn large_value<S: Store + ?Sized>(store: &S) {
    let value: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + i / 251) as u8).collect();
    let key: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    put(store, b"big", &value);
    put(store, &key, &value[..1000]);
    put(store, b"small", b"s");
    assert_eq!(get(store, b"big").as_deref(), Some(&value[..]));
    assert_eq!(get(store, &key).as_deref(), Some(&value[..1000]));
    let scanned = scan(store, b"big");
    assert_eq!(scanned, vec![(b"big".to_vec(), value.clone())]);
    let mut other = value.clone();
    other.reverse();
    put(store, b"big", &other);
    assert_eq!(get(store, b"big").as_deref(), Some(&other[..]));
}

/// Operations are counted as the crate docs say.
pub fn io_counts<S: Store + ?Sized>(store: &S) {
    let start = store.io_counts();
    let counts = || store.io_counts().since(&start);
    let want = |reads, writes, scans, scanned, bytes_read, bytes_written| IoCounts {
        reads,
        writes,
        scans,
        scanned,
        bytes_read,
        bytes_written,
    };
    assert_eq!(counts(), IoCounts::default());

    put(store, b"k1", b"vvv");
    assert_eq!(counts(), want(0, 1, 0, 0, 0, 5));
    get(store, b"k1");
    assert_eq!(counts(), want(1, 1, 0, 0, 3, 5));
    get(store, b"zz");
    assert_eq!(
        counts(),
        want(2, 1, 0, 0, 3, 5),
        "a miss is a read of 0 bytes"
    );
    store.get_many(&[b"k1", b"zz", b"k1"]).expect("get_many");
    assert_eq!(
        counts(),
        want(5, 1, 0, 0, 9, 5),
        "get_many counts every key"
    );

    let mut batch = WriteBatch::new();
    batch
        .put(b"k2".as_slice(), b"ab".as_slice())
        .delete(b"k1".as_slice())
        .delete(b"nope".as_slice());
    store.write(batch).expect("write");
    assert_eq!(
        counts(),
        want(5, 4, 0, 0, 9, 15),
        "every op counts, deletes of absent keys too"
    );
    store.write(WriteBatch::new()).expect("write");
    assert_eq!(
        counts(),
        want(5, 4, 0, 0, 9, 15),
        "an empty batch counts nothing"
    );

    scan(store, b"k");
    assert_eq!(counts(), want(5, 4, 1, 1, 13, 15));
    scan(store, b"x");
    assert_eq!(counts(), want(5, 4, 2, 1, 13, 15));
    store.delete(b"k2").expect("delete");
    assert_eq!(counts(), want(5, 5, 2, 1, 13, 17));
}

/// Writers on several threads lose no write.
pub fn concurrent_writers<S: Store + ?Sized>(store: &S) {
    const THREADS: u32 = 4;
    const PUTS: u32 = 40;
    let start = store.io_counts();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                for i in 0..PUTS {
                    let key = format!("t{t}/{i:04}");
                    if i % 4 == 3 {
                        let mut batch = WriteBatch::new();
                        batch.put(key.as_bytes(), key.as_bytes());
                        batch.put(format!("{key}/b"), key.as_bytes());
                        store.write(batch).expect("concurrent batch");
                    } else {
                        store.put(key.as_bytes(), key.as_bytes()).expect("put");
                    }
                }
            });
        }
    });
    for t in 0..THREADS {
        let pairs = scan(store, format!("t{t}/").as_bytes());
        assert_eq!(pairs.len() as u32, PUTS + PUTS / 4, "thread {t}");
        for i in 0..PUTS {
            let key = format!("t{t}/{i:04}");
            assert_eq!(get(store, key.as_bytes()).as_deref(), Some(key.as_bytes()));
        }
    }
    let writes = store.io_counts().since(&start).writes;
    assert_eq!(writes, u64::from(THREADS * (PUTS + PUTS / 4)));
}

/// A reader never sees part of a batch: while one thread rewrites a set of
/// keys batch after batch, scans on other threads see all keys with one
/// batch number, or none.
pub fn batches_are_isolated<S: Store + ?Sized>(store: &S) {
    const KEYS: u32 = 64;
    const BATCHES: u32 = 30;
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let done = &done;
        for _ in 0..2 {
            scope.spawn(move || {
                let mut seen = 0;
                while !done.load(Ordering::Acquire) || seen == 0 {
                    let pairs = scan(store, b"iso/");
                    if pairs.is_empty() {
                        continue;
                    }
                    seen += 1;
                    assert_eq!(pairs.len() as u32, KEYS, "a scan saw part of a batch");
                    let first = &pairs[0].1;
                    assert!(
                        pairs.iter().all(|(_, v)| v == first),
                        "a scan saw two batches at once"
                    );
                }
            });
        }
        for b in 1..=BATCHES {
            let mut batch = WriteBatch::with_capacity(KEYS as usize);
            for i in 0..KEYS {
                batch.put(format!("iso/{i:03}"), b.to_be_bytes().to_vec());
            }
            store.write(batch).expect("write");
        }
        done.store(true, Ordering::Release);
    });
}

/// `write_if` applies its batch only when every condition holds, exactly
/// (a value, or absence), and writes nothing otherwise.
pub fn conditional_writes<S: Store + ?Sized>(store: &S) {
    let one = |k: &str, v: &str| {
        let mut b = WriteBatch::new();
        b.put(k.as_bytes(), v.as_bytes());
        b
    };
    let cas = |expect: &[(&str, Option<&str>)], batch: WriteBatch| {
        let expect: Vec<(&[u8], Option<&[u8]>)> = expect
            .iter()
            .map(|(k, v)| (k.as_bytes(), v.map(str::as_bytes)))
            .collect();
        store.write_if(&expect, &batch).expect("write_if")
    };
    assert!(cas(&[("cas/a", None)], one("cas/a", "1")));
    assert!(
        !cas(&[("cas/a", None)], one("cas/a", "2")),
        "a present key is not absent"
    );
    assert_eq!(get(store, b"cas/a").as_deref(), Some(&b"1"[..]));
    assert!(
        !cas(&[("cas/a", Some(""))], one("cas/a", "3")),
        "empty is not 1"
    );
    assert!(
        !cas(&[("cas/a", Some("10"))], one("cas/a", "3")),
        "10 is not 1"
    );
    assert!(cas(&[("cas/a", Some("1"))], one("cas/a", "2")));
    assert_eq!(get(store, b"cas/a").as_deref(), Some(&b"2"[..]));
    // Several conditions: one that fails stops the whole batch.
    let mut two = one("cas/b", "x");
    two.delete(b"cas/a".to_vec());
    assert!(!cas(
        &[("cas/a", Some("2")), ("cas/c", Some("?"))],
        two.clone()
    ));
    assert_eq!(get(store, b"cas/b"), None);
    assert_eq!(get(store, b"cas/a").as_deref(), Some(&b"2"[..]));
    assert!(cas(&[("cas/a", Some("2")), ("cas/c", None)], two));
    assert_eq!(get(store, b"cas/b").as_deref(), Some(&b"x"[..]));
    assert_eq!(get(store, b"cas/a"), None);
    // The empty value is a value, not absence.
    assert!(cas(&[("cas/e", None)], one("cas/e", "")));
    assert!(!cas(&[("cas/e", None)], WriteBatch::new()));
    assert!(cas(&[("cas/e", Some(""))], WriteBatch::new()));
    // No condition: a plain write.
    assert!(cas(&[], one("cas/f", "f")));
    assert_eq!(get(store, b"cas/f").as_deref(), Some(&b"f"[..]));
}

/// A group of conditional batches ([`Store::write_if_group`]): each is
/// checked after the ones before it, one whose condition fails is not
/// written and does not stop the others, and the answers say which were.
pub fn conditional_write_groups<S: Store + ?Sized>(store: &S) {
    let one = |k: &str, v: &str| {
        let mut b = WriteBatch::new();
        b.put(k.as_bytes(), v.as_bytes());
        b
    };
    put(store, b"grp/a", b"1");
    let mut two = one("grp/b", "2");
    two.delete(b"grp/a".to_vec());
    let batches = [
        one("grp/a", "2"),
        one("grp/a", "3"),
        one("grp/c", "x"),
        two,
        one("grp/d", "d"),
    ];
    type Expect<'a> = [(&'a [u8], Option<&'a [u8]>)];
    let expects: [&Expect; 5] = [
        // Holds: a is 1.
        &[(b"grp/a", Some(b"1"))],
        // Fails: the batch before moved a to 2.
        &[(b"grp/a", Some(b"1"))],
        // Holds: c is absent.
        &[(b"grp/c", None)],
        // Holds against the group's own writes: a is 2, c is x.
        &[(b"grp/a", Some(b"2")), (b"grp/c", Some(b"x"))],
        // Fails: c is present.
        &[(b"grp/c", None)],
    ];
    let group: Vec<Conditional<'_>> = expects.iter().copied().zip(batches.iter()).collect();
    let applied = store.write_if_group(&group).expect("write_if_group");
    assert_eq!(applied, vec![true, false, true, true, false]);
    assert_eq!(get(store, b"grp/a"), None);
    assert_eq!(get(store, b"grp/b").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(store, b"grp/c").as_deref(), Some(&b"x"[..]));
    assert_eq!(get(store, b"grp/d"), None);
    // A group whose conditions all fail writes nothing.
    let group: Vec<Conditional<'_>> = vec![(&[(b"grp/c", None)], &batches[4])];
    assert_eq!(
        store.write_if_group(&group).expect("write_if_group"),
        vec![false]
    );
    assert_eq!(get(store, b"grp/d"), None);
    assert_eq!(
        store.write_if_group(&[]).expect("an empty group"),
        Vec::<bool>::new()
    );
}

/// Threads that each add one to a counter by reading it and writing it
/// back with `write_if`, trying again when it moved, lose no addition: of
/// two writers that read the same value, only one succeeds.
pub fn conditional_writes_race<S: Store + ?Sized>(store: &S) {
    const THREADS: u64 = 4;
    const ADDS: u64 = 12;
    let lost = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let lost = &lost;
            scope.spawn(move || {
                for i in 0..ADDS {
                    loop {
                        let held = get(store, b"race/n");
                        let n = held.as_deref().map_or(0, |v| {
                            u64::from_be_bytes(v.try_into().expect("an 8-byte counter"))
                        });
                        let mut batch = WriteBatch::new();
                        batch.put(b"race/n".to_vec(), (n + 1).to_be_bytes().to_vec());
                        batch.put(format!("race/by/{t}/{i}"), n.to_be_bytes().to_vec());
                        if store
                            .write_if(&[(b"race/n", held.as_deref())], &batch)
                            .expect("write_if")
                        {
                            break;
                        }
                        lost.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let n = get(store, b"race/n").expect("the counter");
    assert_eq!(
        u64::from_be_bytes(n.try_into().expect("8 bytes")),
        THREADS * ADDS
    );
    // Every addition saw a different value of the counter.
    let seen: std::collections::BTreeSet<Vec<u8>> = scan(store, b"race/by/")
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(seen.len() as u64, THREADS * ADDS);
    eprintln!(
        "conditional_writes_race: {} conditional writes found the counter moved",
        lost.load(Ordering::Relaxed)
    );
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

#[derive(Clone, Debug)]
enum Action {
    Write(Vec<Op>),
    Get(Vec<u8>),
    GetMany(Vec<Vec<u8>>),
    Scan(Vec<u8>),
}

/// Short keys over a small alphabet with both byte edges, so that keys
/// collide and share prefixes often.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0x00u8, 0x01, 0x7F, 0xFF]), 0..4)
}

fn action() -> impl Strategy<Value = Action> {
    let value = prop::collection::vec(any::<u8>(), 0..12);
    let op = prop_oneof![
        2 => (key(), value).prop_map(|(k, v)| Op::Put(k, v)),
        1 => key().prop_map(Op::Delete),
    ];
    prop_oneof![
        4 => prop::collection::vec(op, 0..6).prop_map(Action::Write),
        1 => key().prop_map(Action::Get),
        1 => prop::collection::vec(key(), 0..4).prop_map(Action::GetMany),
        2 => key().prop_map(Action::Scan),
    ]
}

/// Random sequences of batches, gets and scans give the same answers and
/// counts as a `BTreeMap`. Each case starts by deleting every key of
/// `store` (opening a fresh store per case is slow for some backends).
pub fn random_ops_match_oracle<S: Store + ?Sized>(store: &S, cases: u32) {
    let mut config = Config::with_cases(cases);
    config.failure_persistence = None;
    let mut runner = TestRunner::new(config);
    let strategy = prop::collection::vec(action(), 1..40);
    let result = runner.run(&strategy, |actions| {
        let mut clear = WriteBatch::new();
        for (k, _) in store.scan_prefix(b"").expect("scan_prefix") {
            clear.delete(k);
        }
        store.write(clear).expect("write");
        let start = store.io_counts();
        let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut counts = IoCounts::default();
        for action in actions {
            match action {
                Action::Write(ops) => {
                    let mut batch = WriteBatch::new();
                    for op in ops {
                        match op {
                            Op::Put(k, v) => {
                                counts.bytes_written += (k.len() + v.len()) as u64;
                                batch.put(k.clone(), v.clone());
                                oracle.insert(k, v);
                            }
                            Op::Delete(k) => {
                                counts.bytes_written += k.len() as u64;
                                batch.delete(k.clone());
                                oracle.remove(&k);
                            }
                        }
                        counts.writes += 1;
                    }
                    store.write(batch).expect("write");
                }
                Action::Get(k) => {
                    let want = oracle.get(&k).cloned();
                    counts.reads += 1;
                    counts.bytes_read += want.as_ref().map_or(0, |v| v.len() as u64);
                    prop_assert_eq!(store.get(&k).expect("get"), want, "get({:02x?})", k);
                }
                Action::GetMany(ks) => {
                    let refs: Vec<&[u8]> = ks.iter().map(Vec::as_slice).collect();
                    let want: Vec<Option<Vec<u8>>> =
                        ks.iter().map(|k| oracle.get(k).cloned()).collect();
                    counts.reads += ks.len() as u64;
                    counts.bytes_read += want.iter().flatten().map(|v| v.len() as u64).sum::<u64>();
                    prop_assert_eq!(store.get_many(&refs).expect("get_many"), want);
                }
                Action::Scan(prefix) => {
                    let want: Vec<(Vec<u8>, Vec<u8>)> = oracle
                        .iter()
                        .filter(|(k, _)| k.starts_with(&prefix))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    counts.scans += 1;
                    counts.scanned += want.len() as u64;
                    counts.bytes_read += want
                        .iter()
                        .map(|(k, v)| (k.len() + v.len()) as u64)
                        .sum::<u64>();
                    let got = store.scan_prefix(&prefix).expect("scan_prefix");
                    prop_assert_eq!(got, want, "scan_prefix({:02x?})", prefix);
                }
            }
        }
        prop_assert_eq!(store.io_counts().since(&start), counts, "io counts");
        let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.into_iter().collect();
        prop_assert_eq!(store.scan_prefix(b"").expect("scan_prefix"), all);
        Ok(())
    });
    if let Err(err) = result {
        panic!(
            "{} store differs from the BTreeMap oracle: {err}",
            store.backend()
        );
    }
}
