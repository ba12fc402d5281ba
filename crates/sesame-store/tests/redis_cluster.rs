//! `RedisClusterStore`: the generic store suite over a Redis Cluster, and
//! what the backend adds (namespaces, reopening, key groups across
//! masters, refused cross-group batches, `WAIT`). The cluster is the one
//! `SESAME_TEST_REDIS_CLUSTER` names, else a throwaway one that
//! `scripts/redis-cluster.sh` starts on loopback; without `redis-server`
//! the tests skip with a note (unless `SESAME_TEST_REDIS_CLUSTER_REQUIRE=1`).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::process::Command;

use sesame_core::{Error, IoCounter, IoCounts, Result, Store, WriteBatch};
use sesame_store::suite::Dropping;
use sesame_store::test_cluster::{
    fresh_namespace, own_cluster, own_tls_cluster, shared_url, with_namespace,
};
use sesame_store::{open_store, RedisClusterStore};

/// A store in a fresh namespace, destroyed when dropped.
type TempRedis = Dropping<RedisClusterStore>;

fn temp_redis() -> Option<TempRedis> {
    let url = shared_url()?;
    let spec = with_namespace(&url, &fresh_namespace("t"), "");
    let store = RedisClusterStore::open(&spec).expect("open Redis Cluster store");
    Some(Dropping::new(store, |s| drop(s.destroy())))
}

mod suite {
    sesame_store::store_suite!(optional super::temp_redis, 16);
}

/// The suite inside one group of the server's layout (`i/t/a/...`).
mod server_layout {
    sesame_store::store_suite!(optional super::Grouped::new, 8);
}

/// The suite's cases that hold for keys spread over an index's shards
/// (`e/t/a/...`): those whose batches never change a held value across
/// shards, and never need a condition or isolation across them.
mod spread_layout {
    use super::Grouped;
    macro_rules! spread_cases {
        ($($case:ident),* $(,)?) => {
            $(
                #[test]
                fn $case() {
                    let Some(store) = Grouped::spread() else { return };
                    sesame_store::suite::$case(&store);
                }
            )*
        };
    }
    spread_cases!(
        get_missing,
        put_get,
        overwrite,
        delete,
        empty_batch,
        scan_prefix_order_and_bounds,
        empty_key_and_value,
        large_value,
        io_counts,
    );
}

/// The suite again, with every key moved into one group of the server's
/// layout (or into the shards of a spread index); it counts its own
/// operations, as the suite sees them (the store's counts include the
/// prefix's bytes).
struct Grouped(TempRedis, IoCounter, &'static [u8]);

impl Grouped {
    fn new() -> Option<Self> {
        temp_redis().map(|t| Grouped(t, IoCounter::default(), b"i/t/a/"))
    }

    fn spread() -> Option<Self> {
        temp_redis().map(|t| Grouped(t, IoCounter::default(), b"e/t/a/"))
    }
}

impl Store for Grouped {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let v = self.0.get(&[self.2, key].concat())?;
        self.1.read(v.as_ref().map_or(0, Vec::len));
        Ok(v)
    }
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let full: Vec<Vec<u8>> = keys.iter().map(|k| [self.2, k].concat()).collect();
        let refs: Vec<&[u8]> = full.iter().map(Vec::as_slice).collect();
        let vs = self.0.get_many(&refs)?;
        for v in &vs {
            self.1.read(v.as_ref().map_or(0, Vec::len));
        }
        Ok(vs)
    }
    fn write(&self, batch: WriteBatch) -> Result<()> {
        if !batch.is_empty() {
            self.1.batch(&batch);
        }
        let mut out = WriteBatch::with_capacity(batch.len());
        for op in batch.into_ops() {
            match op {
                sesame_core::WriteOp::Put { key, value } => out.put([self.2, &key].concat(), value),
                sesame_core::WriteOp::Delete { key } => out.delete([self.2, &key].concat()),
            };
        }
        self.0.write(out)
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let keys: Vec<Vec<u8>> = expect.iter().map(|(k, _)| [self.2, k].concat()).collect();
        let full: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(expect)
            .map(|(k, (_, v))| (k.as_slice(), *v))
            .collect();
        let mut out = WriteBatch::with_capacity(batch.len());
        for op in batch.ops() {
            match op {
                sesame_core::WriteOp::Put { key, value } => {
                    out.put([self.2, key].concat(), value.clone())
                }
                sesame_core::WriteOp::Delete { key } => out.delete([self.2, key].concat()),
            };
        }
        let applied = self.0.write_if(&full, &out)?;
        for (_, v) in expect {
            self.1.read(v.map_or(0, <[u8]>::len));
        }
        if applied && !batch.is_empty() {
            self.1.batch(batch);
        }
        Ok(applied)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = self
            .0
            .scan_prefix(&[self.2, prefix].concat())?
            .into_iter()
            .map(|(mut k, v)| {
                k.drain(..self.2.len());
                (k, v)
            })
            .collect();
        let bytes = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.1.scan(pairs.len(), bytes);
        Ok(pairs)
    }
    fn io_counts(&self) -> IoCounts {
        self.1.counts()
    }
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
}

fn redis_cli(url: &str, args: &[&str]) -> String {
    let first = url
        .trim_start_matches("redis-cluster://")
        .split([',', '?'])
        .next()
        .unwrap();
    let (host, port) = first.rsplit_once(':').unwrap();
    let out = Command::new("redis-cli")
        .args(["-h", host, "-p", port])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn data_survives_reopening_and_namespaces_are_separate() {
    let Some(url) = shared_url() else { return };
    let (a, b) = (fresh_namespace("a"), fresh_namespace("b"));
    let s = RedisClusterStore::open(&with_namespace(&url, &a, "")).unwrap();
    s.put(b"k", b"v1").unwrap();
    s.put(b"x/t/i", b"meta").unwrap();
    let t = open_store(&with_namespace(&url, &b, "")).unwrap();
    assert_eq!(t.backend(), "redis-cluster");
    assert_eq!(t.get(b"k").unwrap(), None);
    assert!(t.scan_prefix(b"").unwrap().is_empty());
    t.put(b"k", b"v2").unwrap();
    drop(s);
    let s = RedisClusterStore::open(&with_namespace(&url, &a, "")).unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(
        s.scan_prefix(b"").unwrap(),
        vec![
            (b"k".to_vec(), b"v1".to_vec()),
            (b"x/t/i".to_vec(), b"meta".to_vec())
        ]
    );
    assert_eq!(s.namespace(), a);
    s.destroy().unwrap();
    let s = RedisClusterStore::open(&with_namespace(&url, &a, "")).unwrap();
    assert!(s.scan_prefix(b"").unwrap().is_empty(), "destroyed");
    s.destroy().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    drop(t);
    RedisClusterStore::open(&with_namespace(&url, &b, ""))
        .unwrap()
        .destroy()
        .unwrap();
}

#[test]
fn a_namespace_that_is_not_ours_is_refused_and_left_untouched() {
    let Some(url) = shared_url() else { return };
    let ns = fresh_namespace("f");
    // Another program's key under our home group's name, no marker.
    let home = format!("sesame{{{ns}}}:v");
    redis_cli(&url, &["-c", "HSET", &home, "x", "7"]);
    let err = RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap_err();
    assert!(
        matches!(&err, Error::StoreForeign(m) if m.contains("without the Sesame marker")),
        "{err:?}"
    );
    assert_eq!(redis_cli(&url, &["-c", "HGET", &home, "x"]), "7");
    redis_cli(&url, &["-c", "DEL", &home]);

    // A marker of another format.
    let ns = fresh_namespace("v");
    RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap();
    let marker = format!("sesame{{{ns}}}:format");
    redis_cli(&url, &["-c", "SET", &marker, "sesame-store/9"]);
    let err = RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap_err();
    assert!(
        matches!(&err, Error::StoreForeign(m) if m.contains("sesame-store/9")),
        "{err:?}"
    );
    redis_cli(&url, &["-c", "DEL", &marker]);
}

/// A batch keeps to one group; one that spans two is refused whole, and
/// nothing of it is written.
#[test]
fn a_batch_across_groups_is_refused_whole() {
    let Some(s) = temp_redis() else { return };
    let mut b = WriteBatch::new();
    b.put(b"x/t/a".as_slice(), b"1".as_slice())
        .put(b"i/t/a/0/k".as_slice(), b"2".as_slice())
        .delete(b"r/t/a/q".as_slice());
    s.write(b).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"x/t/b".as_slice(), b"1".as_slice())
        .put(b"i/t/a/0/j".as_slice(), b"2".as_slice());
    let err = s.write(b).unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported(m) if m.contains("t/a") && m.contains("t/b")),
        "{err:?}"
    );
    let mut b = WriteBatch::new();
    b.put(b"s/format".as_slice(), b"1".as_slice())
        .put(b"x/t/a".as_slice(), b"2".as_slice());
    assert!(matches!(s.write(b), Err(Error::Unsupported(_))));
    assert_eq!(
        s.scan_prefix(b"").unwrap(),
        vec![
            (b"i/t/a/0/k".to_vec(), b"2".to_vec()),
            (b"x/t/a".to_vec(), b"1".to_vec())
        ]
    );
}

/// A batch that deletes every key of a group (the server dropping an
/// index) empties that group only, also with absent keys among its
/// deletes; one that leaves a key behind leaves exactly that key; the
/// group takes writes again afterwards.
#[test]
fn dropping_a_whole_group_empties_that_group_only() {
    let Some(s) = temp_redis() else { return };
    let fill = |group: &str| {
        let mut b = WriteBatch::new();
        b.put(format!("x/{group}"), b"meta".to_vec())
            .put(format!("i/{group}/0/a"), b"1".to_vec())
            .put(format!("d/{group}/b1"), b"doc".to_vec());
        s.write(b).unwrap();
    };
    fill("t/a");
    fill("t/b");
    let drop = |group: &str, keep: Option<&str>| {
        let mut b = WriteBatch::new();
        for k in [
            format!("x/{group}"),
            format!("i/{group}/0/a"),
            format!("d/{group}/b1"),
            format!("r/{group}/absent"),
        ] {
            if keep != Some(k.as_str()) {
                b.delete(k);
            }
        }
        s.write(b).unwrap();
    };
    drop("t/a", None);
    assert!(s.scan_prefix(b"i/t/a/").unwrap().is_empty());
    assert_eq!(s.get(b"x/t/a").unwrap(), None);
    assert_eq!(s.scan_prefix(b"").unwrap().len(), 3, "t/b untouched");
    drop("t/b", Some("d/t/b/b1"));
    assert_eq!(
        s.scan_prefix(b"").unwrap(),
        vec![(b"d/t/b/b1".to_vec(), b"doc".to_vec())]
    );
    fill("t/a");
    assert_eq!(s.scan_prefix(b"x/t/").unwrap().len(), 1);
    assert_eq!(s.get(b"i/t/a/0/a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// Indexes land in different slots, on all three masters; our slot
/// numbers are Redis's; scans across groups merge in key order.
#[test]
fn indexes_spread_over_the_masters() {
    let Some(url) = shared_url() else { return };
    let Some(s) = temp_redis() else { return };
    let store = s.inner();
    let mut slots = BTreeSet::new();
    for i in 0..30 {
        let mut b = WriteBatch::new();
        b.put(format!("x/t/ix{i:02}"), vec![i as u8])
            .put(format!("i/t/ix{i:02}/0/label"), b"entry".to_vec());
        store.write(b).unwrap();
        slots.insert(store.slot_of(format!("x/t/ix{i:02}").as_bytes()));
    }
    assert!(slots.len() >= 25, "{} slots for 30 indexes", slots.len());
    // Three masters own 0-5460, 5461-10922 and 10923-16383 after the
    // script's create; each holds some index.
    let masters: BTreeSet<u16> = slots.iter().map(|s| s / 5462).collect();
    assert_eq!(masters.len(), 3, "{slots:?}");
    let tag = format!("{}/t/ix07", store.namespace());
    let redis_slot: u16 = redis_cli(&url, &["cluster", "keyslot", &format!("{{{tag}}}")])
        .parse()
        .unwrap();
    assert_eq!(redis_slot, store.slot_of(b"x/t/ix07"));
    let metas = store.scan_prefix(b"x/t/").unwrap();
    let names: Vec<Vec<u8>> = metas.iter().map(|(k, _)| k.clone()).collect();
    let want: Vec<Vec<u8>> = (0..30)
        .map(|i| format!("x/t/ix{i:02}").into_bytes())
        .collect();
    assert_eq!(names, want);
    assert_eq!(store.scan_prefix(b"i/t/ix1").unwrap().len(), 10);
    assert_eq!(store.scan_prefix(b"").unwrap().len(), 60);
    let sizes = store.group_sizes().unwrap();
    assert_eq!(sizes.len(), 31, "the home group and 30 indexes");
}

/// A pseudo-random 32-byte label (entries of a spread index are PRF
/// outputs).
fn label(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..4)
        .flat_map(|_| {
            x ^= x >> 31;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x.to_be_bytes()
        })
        .collect()
}

/// An index's spread entries (`e/t/a/...`) fill all of its shards, which
/// lie on all three masters, while its metadata stays in its group; a
/// commit with them applies the entries first and the group's part under
/// its condition, and deletes them last. What a failed condition, a put
/// that would change a held entry and a batch naming two indexes do.
#[test]
fn spread_entries_fill_every_shard_and_the_commit_comes_last() {
    let Some(s) = temp_redis() else { return };
    let store = s.inner();
    let entry = |i: u64| [&b"e/t/a/0/"[..], &label(i)].concat();
    let n = 3200u64;
    let mut b = WriteBatch::new();
    b.put(b"x/t/a".as_slice(), b"meta 1".as_slice())
        .put(b"c/t/a".as_slice(), b"token 1".as_slice());
    for i in 0..n {
        b.put(entry(i), i.to_be_bytes().to_vec());
    }
    assert!(store.write_if(&[(b"c/t/a", None)], &b).unwrap());
    let shards: Vec<(Vec<u8>, u64)> = store
        .group_sizes()
        .unwrap()
        .into_iter()
        .filter_map(|(g, size)| g.filter(|g| g.starts_with(b"t/a#")).map(|g| (g, size)))
        .collect();
    assert_eq!(shards.len(), usize::from(sesame_store::SPREAD_SHARDS));
    let total: u64 = shards.iter().map(|(_, size)| size).sum();
    assert_eq!(total, n);
    // 100 per shard on average; a shard below half of it would mean the
    // labels do not spread.
    assert!(shards.iter().all(|(_, size)| *size >= 50), "{shards:?}");
    let masters: BTreeSet<u16> = (0..n).map(|i| store.slot_of(&entry(i)) / 5462).collect();
    assert_eq!(masters.len(), 3, "the shards lie on every master");
    let mut per_master = [0u64; 3];
    for i in 0..n {
        per_master[usize::from(store.slot_of(&entry(i)) / 5462)] += 1;
    }
    let max = per_master.iter().max().copied().unwrap_or(0);
    eprintln!(
        "one index of {n} entries over 3 masters: {per_master:?}, max/mean {:.3}",
        max as f64 * 3.0 / n as f64
    );
    // The shards take one 32nd of the slots each: 10 or 11 per master
    // (1.03 at most), plus the labels' own spread over the shards.
    assert!(max * 3 <= n * 6 / 5, "{per_master:?}");
    assert_ne!(store.slot_of(&entry(0)), store.slot_of(b"x/t/a"));
    let scanned = store.scan_prefix(b"e/t/a/0/").unwrap();
    assert_eq!(scanned.len() as u64, n);
    assert!(scanned.windows(2).all(|w| w[0].0 < w[1].0), "key order");
    assert_eq!(
        store.get(&entry(7)).unwrap(),
        Some(7u64.to_be_bytes().to_vec())
    );

    // A commit whose condition fails: its group's part is not applied (its
    // entries may be: a retry writes the same ones again).
    let mut b = WriteBatch::new();
    b.put(b"x/t/a".as_slice(), b"meta 2".as_slice())
        .put(entry(n), b"new".to_vec());
    assert!(!store.write_if(&[(b"c/t/a", Some(b"stale"))], &b).unwrap());
    assert_eq!(
        store.get(b"x/t/a").unwrap().as_deref(),
        Some(&b"meta 1"[..])
    );
    // Its retry under the right condition applies it whole.
    assert!(store.write_if(&[(b"c/t/a", Some(b"token 1"))], &b).unwrap());
    assert_eq!(
        store.get(b"x/t/a").unwrap().as_deref(),
        Some(&b"meta 2"[..])
    );
    assert_eq!(store.get(&entry(n)).unwrap().as_deref(), Some(&b"new"[..]));

    // An entry keeps its first value: a batch that would change one is
    // not applied (write_if says false; write refuses), its group's part
    // neither.
    let mut b = WriteBatch::new();
    b.put(b"x/t/a".as_slice(), b"meta 3".as_slice())
        .put(entry(1), b"changed".to_vec())
        .put(entry(n + 1), b"fresh".to_vec());
    assert!(!store.write_if(&[], &b).unwrap());
    let err = store.write(b).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("write-once")),
        "{err:?}"
    );
    assert_eq!(
        store.get(b"x/t/a").unwrap().as_deref(),
        Some(&b"meta 2"[..])
    );
    assert_eq!(
        store.get(&entry(1)).unwrap(),
        Some(1u64.to_be_bytes().to_vec())
    );

    // Entries of one index with another index's group, or of two indexes:
    // refused whole.
    for other in [&b"x/t/b"[..], b"e/t/b/0/k", b"s/format"] {
        let mut b = WriteBatch::new();
        b.put(other, b"1".as_slice())
            .put(entry(n + 2), b"2".to_vec());
        let err = store.write(b).unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err:?}");
    }
    assert_eq!(store.get(&entry(n + 2)).unwrap(), None);

    // Entry deletes come after the group's part: a batch whose condition
    // fails deletes no entry.
    let mut b = WriteBatch::new();
    b.delete(entry(3))
        .put(b"x/t/a".as_slice(), b"meta 4".as_slice());
    assert!(!store.write_if(&[(b"c/t/a", Some(b"stale"))], &b).unwrap());
    assert_eq!(
        store.get(&entry(3)).unwrap(),
        Some(3u64.to_be_bytes().to_vec())
    );

    // Dropping the index: the group's part, then every shard emptied.
    let mut b = WriteBatch::new();
    for (k, _) in store.scan_prefix(b"e/t/a/").unwrap() {
        b.delete(k);
    }
    b.delete(b"x/t/a".as_slice()).delete(b"c/t/a".as_slice());
    store.write(b).unwrap();
    assert!(store.scan_prefix(b"").unwrap().is_empty());
    assert!(store
        .group_sizes()
        .unwrap()
        .iter()
        .all(|(_, size)| *size == 0));
}

/// A namespace made with `spread=off` keeps an index's entries in its
/// group (one slot, one master, every batch one script); the setting
/// belongs to the namespace: a spec without it keeps it, one that asks
/// for the other is refused.
#[test]
fn spread_off_keeps_an_index_on_one_master_for_good() {
    let Some(url) = shared_url() else { return };
    let ns = fresh_namespace("off");
    let store = RedisClusterStore::open(&with_namespace(&url, &ns, "spread=off")).unwrap();
    assert!(!store.spreads());
    let mut b = WriteBatch::new();
    b.put(b"x/t/a".as_slice(), b"meta".as_slice());
    for i in 0..200 {
        b.put([&b"e/t/a/0/"[..], &label(i)].concat(), b"v".to_vec());
    }
    store.write(b).unwrap();
    let groups: Vec<(Option<Vec<u8>>, u64)> = store
        .group_sizes()
        .unwrap()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(groups, vec![(Some(b"t/a".to_vec()), 201)]);
    assert_eq!(store.scan_prefix(b"e/t/a/0/").unwrap().len(), 200);
    let again = RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap();
    assert!(!again.spreads());
    assert_eq!(again.scan_prefix(b"e/t/a/").unwrap().len(), 200);
    let err = RedisClusterStore::open(&with_namespace(&url, &ns, "spread=on")).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("spread=off")),
        "{err:?}"
    );
    drop(again);
    store.destroy().unwrap();
    // A new namespace spreads unless told otherwise.
    let fresh = temp_redis().unwrap();
    assert!(fresh.inner().spreads());
}

/// A live replica that does not confirm in time (paused) makes a write
/// fail with `StoreUnavailable`, saying so. A read sent while the master
/// that holds its key is dead waits until a replica has taken over, then
/// answers; a store told not to wait (`failover_ms=0`) fails with
/// `StoreUnavailable`, the error its callers answer with "send it again",
/// never with another kind. Writes with `wait=1` go on once the promoted
/// replica's master sees it has no live replica, with nobody restarting
/// the killed node.
#[test]
fn a_read_during_a_failover_waits_it_out() {
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("fo"), "");
    let store = RedisClusterStore::open(&spec).unwrap();
    let impatient = RedisClusterStore::open(&format!("{spec}&failover_ms=0")).unwrap();
    let key = b"x/t/a";
    store.put(key, b"kept").unwrap();
    assert_eq!(impatient.get(key).unwrap().as_deref(), Some(&b"kept"[..]));
    let port = cluster
        .master_of_slot(store.slot_of(key))
        .expect("a master serves the slot");
    let unwaiting = RedisClusterStore::open(&format!("{spec}&wait=0")).unwrap();
    // A live replica that does not confirm (paused for less than the node
    // timeout) fails the write, and says so.
    let replica = cluster.replicas_of_slot(store.slot_of(key))[0];
    let hasty = RedisClusterStore::open(&format!("{spec}&wait_ms=50")).unwrap();
    cluster.signal_node(replica, "STOP").unwrap();
    let unconfirmed = hasty.put(key, b"kept");
    cluster.signal_node(replica, "CONT").unwrap();
    let err = unconfirmed.unwrap_err();
    assert!(
        matches!(&err, Error::StoreUnavailable(m) if m.contains("only 0 of its 1 live replicas")),
        "{err:?}"
    );
    let killed = std::time::Instant::now();
    cluster.kill_node(port).unwrap();
    match impatient.get(key) {
        Ok(v) => assert_eq!(v.as_deref(), Some(&b"kept"[..])),
        Err(e) => assert!(matches!(e, Error::StoreUnavailable(_)), "{e:?}"),
    }
    assert_eq!(store.get(key).unwrap().as_deref(), Some(&b"kept"[..]));
    let read_after = killed.elapsed();
    assert_ne!(cluster.master_of_slot(store.slot_of(key)), Some(port));
    // How long writes wait: with `wait=0` until the replica is master;
    // with `wait=1` also until the master sees it has no live replica (its
    // killed master is not one), then with the copies it has.
    let write_until_ok = |s: &RedisClusterStore, value: &[u8]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match s.put(key, value) {
                Ok(()) => return,
                Err(e) => {
                    assert!(matches!(e, Error::StoreUnavailable(_)), "{e:?}");
                    assert!(std::time::Instant::now() < deadline, "{e}");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    };
    write_until_ok(&unwaiting, b"after");
    let write_after = killed.elapsed();
    write_until_ok(&store, b"promoted");
    let waited_write_after = killed.elapsed();
    assert_eq!(store.get(key).unwrap().as_deref(), Some(&b"promoted"[..]));
    let restarted = std::time::Instant::now();
    cluster.restart_node(port).unwrap();
    write_until_ok(&store, b"replicated");
    let replicated_after = restarted.elapsed();
    assert_eq!(store.get(key).unwrap().as_deref(), Some(&b"replicated"[..]));
    eprintln!(
        "failover: a read answered {} ms after the master's SIGKILL, a write with wait=0 \
         {} ms after it, with wait=1 {} ms after it; a write with wait=1 {} ms after the \
         node's restart",
        read_after.as_millis(),
        write_after.as_millis(),
        waited_write_after.as_millis(),
        replicated_after.as_millis()
    );
}

/// A cluster that speaks only TLS and requires client certificates
/// (`REDIS_CLUSTER_TLS=1`): the store reaches it through
/// `rediss-cluster://` with the CA that signed its nodes' certificates and
/// its own client certificate, and passes the suite's cases there; a CA
/// that did not sign them, the system's roots, plaintext, no client
/// certificate and one from another CA are all refused with an error,
/// never a panic.
#[test]
fn a_tls_cluster_is_reached_over_tls_and_its_certificate_checked() {
    let Some(cluster) = own_tls_cluster() else {
        return;
    };
    let url = cluster.url().to_owned();
    assert!(url.starts_with("rediss-cluster://"), "{url}");
    let cases: [fn(&RedisClusterStore); 4] = [
        sesame_store::suite::put_get,
        sesame_store::suite::batch_applies_in_order,
        sesame_store::suite::conditional_writes,
        sesame_store::suite::scan_prefix_order_and_bounds,
    ];
    for case in cases {
        let store =
            RedisClusterStore::open(&with_namespace(&url, &fresh_namespace("tls"), "")).unwrap();
        assert!(format!("{store:?}").contains("(TLS)"), "{store:?}");
        case(&store);
        store.destroy().unwrap();
    }
    let ns = fresh_namespace("tls");
    let (seeds, params) = url.split_once("?ca=").expect("the script names its CA");
    let ca = params.split('&').next().unwrap();
    let tls_dir = std::path::Path::new(ca).parent().unwrap();
    let (cert, key) = (tls_dir.join("client.pem"), tls_dir.join("client.key"));
    let client = format!("cert={}&key={}", cert.display(), key.display());
    let other_ca = tls_dir.join("other-ca.pem");
    let refused = [
        format!("{seeds}?ca={}&{client}&namespace={ns}", other_ca.display()),
        format!("{seeds}?{client}&namespace={ns}"),
        format!(
            "{}?namespace={ns}",
            seeds.replacen("rediss-cluster://", "redis-cluster://", 1)
        ),
        // The nodes ask for a client certificate (mutual TLS): none, or
        // one from a CA they do not trust, is refused.
        format!("{seeds}?ca={ca}&namespace={ns}"),
        format!(
            "{seeds}?ca={ca}&cert={}&key={}&namespace={ns}",
            tls_dir.join("other-client.pem").display(),
            tls_dir.join("other-client.key").display()
        ),
    ];
    for (i, spec) in refused.iter().enumerate() {
        let err = RedisClusterStore::open(spec).unwrap_err();
        assert!(
            matches!(err, Error::StoreUnavailable(_) | Error::StoreIo(_)),
            "{spec}: {err:?}"
        );
        // The first two meet the nodes' certificate, the third TLS bytes.
        if i < 2 {
            assert!(err.to_string().contains("certificate"), "{spec}: {err}");
        }
    }
    for (missing, named) in [
        (
            format!("{seeds}?ca=/nonexistent/ca.pem&namespace={ns}"),
            "/nonexistent/ca.pem",
        ),
        (
            format!(
                "{seeds}?ca={ca}&cert=/nonexistent/c.pem&key={}",
                key.display()
            ),
            "/nonexistent/c.pem",
        ),
    ] {
        let err = RedisClusterStore::open(&missing).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains(named)),
            "{err:?}"
        );
    }
}

/// Write-once entries (`e/A/B/...`) are kept in memory after a read or a
/// put: a second read of a spread entry costs no round trip, a delete
/// through the same handle is seen at once, and `cache_mb=0` keeps
/// nothing (every read goes to Redis).
#[test]
fn write_once_entries_are_cached_and_a_delete_is_seen() {
    let Some(url) = shared_url() else { return };
    let ns = fresh_namespace("c");
    let store = RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap();
    let uncached = RedisClusterStore::open(&with_namespace(&url, &ns, "cache_mb=0")).unwrap();
    let key = b"e/t/a/0/label";
    store.put(key, b"v").unwrap();
    let before = store.round_trips();
    assert_eq!(store.get(key).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        store.get_many(&[key, b"e/t/a/0/none"]).unwrap(),
        vec![Some(b"v".to_vec()), None]
    );
    assert_eq!(
        store.round_trips() - before,
        1,
        "only the absent key was asked for"
    );
    let before = uncached.round_trips();
    assert_eq!(uncached.get(key).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(uncached.get(key).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(uncached.round_trips() - before, 2);
    // Keys in several groups and shards, over every master: one round
    // trip (one pipeline of an HMGET per group).
    let spread: Vec<Vec<u8>> = (0..40)
        .map(|i| format!("e/t/b/0/{i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = spread
        .iter()
        .map(Vec::as_slice)
        .chain([&b"x/t/b"[..], b"home"])
        .collect();
    let before = uncached.round_trips();
    assert_eq!(uncached.get_many(&refs).unwrap(), vec![None; refs.len()]);
    assert_eq!(uncached.round_trips() - before, 1);
    store.delete(key).unwrap();
    assert_eq!(store.get(key).unwrap(), None);
    assert_eq!(uncached.get(key).unwrap(), None);
    drop(uncached);
    store.destroy().unwrap();
}

/// `wait=N` asks for at most the live replicas a master has (see
/// `a_read_during_a_failover_waits_it_out` for a live replica that does
/// not confirm).
#[test]
fn more_replicas_than_a_shard_has_is_every_live_one() {
    let Some(url) = shared_url() else { return };
    let ns = fresh_namespace("w");
    let s = RedisClusterStore::open(&with_namespace(&url, &ns, "wait=0")).unwrap();
    assert_eq!(s.wait(), (0, sesame_store::DEFAULT_WAIT_MS));
    drop(s);
    let s = RedisClusterStore::open(&with_namespace(&url, &ns, "wait=1")).unwrap();
    s.put(b"a", b"1").unwrap();
    // Each master has one replica: `wait=3` asks for more than the shard
    // has, and a batch is acknowledged once every live replica has it.
    let strict = RedisClusterStore::open(&with_namespace(&url, &ns, "wait=3&wait_ms=50")).unwrap();
    strict.put(b"b", b"2").unwrap();
    assert_eq!(s.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    s.destroy().unwrap();
}

/// Figures for `docs/storage.md` (not run by default: `cargo test -p
/// sesame-store --features redis --test redis_cluster -- --ignored
/// --nocapture`): one batch of 100 000 pairs into one group, single-pair
/// commits with and without `WAIT`, point reads, a scan.
#[test]
#[ignore = "a measurement; run by hand"]
fn measure() {
    use std::time::Instant;
    let Some(url) = shared_url() else { return };
    let ns = fresh_namespace("m");
    let store = RedisClusterStore::open(&with_namespace(&url, &ns, "")).unwrap();
    let fast = RedisClusterStore::open(&with_namespace(&url, &ns, "wait=0")).unwrap();
    let key = |i: u64| {
        let mut k = b"i/t/a/0/".to_vec();
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for _ in 0..4 {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            k.extend_from_slice(&x.to_be_bytes());
        }
        k
    };
    const N: u64 = 100_000;
    let mut batch = WriteBatch::with_capacity(N as usize);
    for i in 0..N {
        batch.put(key(i), vec![7u8; 64]);
    }
    let t = Instant::now();
    store.write(batch).unwrap();
    let big = t.elapsed();
    let t = Instant::now();
    for i in 0..1000 {
        store.put(&key(N + i), &[1u8; 64]).unwrap();
    }
    let one_wait = t.elapsed() / 1000;
    let t = Instant::now();
    for i in 0..1000 {
        fast.put(&key(2 * N + i), &[1u8; 64]).unwrap();
    }
    let one_nowait = t.elapsed() / 1000;
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| key(i * 97)).collect();
    let t = Instant::now();
    for k in &keys {
        assert!(store.get(k).unwrap().is_some());
    }
    let gets = t.elapsed();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let t = Instant::now();
    assert_eq!(store.get_many(&refs).unwrap().len(), 1000);
    let get_many = t.elapsed();
    let t = Instant::now();
    let all = store.scan_prefix(b"i/t/a/0/").unwrap();
    let scan = t.elapsed();
    assert_eq!(all.len() as u64, N + 2000);
    // Dropping the whole group in one batch, as the server drops an index.
    let mut drop_all = WriteBatch::with_capacity(all.len());
    for (k, _) in &all {
        drop_all.delete(k.clone());
    }
    let t = Instant::now();
    store.write(drop_all).unwrap();
    let dropped = t.elapsed();
    assert!(store.scan_prefix(b"i/t/a/").unwrap().is_empty());
    eprintln!(
        "redis-cluster: one batch deleting all {} pairs of a group {dropped:?}",
        all.len()
    );
    eprintln!(
        "redis-cluster: batch of {N} pairs (40 B keys, 64 B values) {big:?}; one-pair commit \
         wait=1 {one_wait:?}, wait=0 {one_nowait:?}; 1000 gets {gets:?}; get_many of 1000 \
         {get_many:?}; scan of {} pairs {scan:?}",
        all.len()
    );
    // How indexes spread over three masters that own the slots as
    // `redis-cli --cluster create` assigns them (0-5460, 5461-10922,
    // 10923-16383): the busiest master's share against the mean.
    for n in [10usize, 100, 1_000, 10_000] {
        let mut per = [0usize; 3];
        for i in 0..n {
            let slot = store.slot_of(format!("x/tenant{}/index{i}", i % 7).as_bytes());
            per[match slot {
                0..=5460 => 0,
                5461..=10922 => 1,
                _ => 2,
            }] += 1;
        }
        let mean = n as f64 / 3.0;
        eprintln!(
            "{n} indexes over 3 masters: {per:?}, max/mean {:.3}",
            *per.iter().max().unwrap() as f64 / mean
        );
    }
    store.destroy().unwrap();
}
