//! A redb store on a filesystem that fills up: the write that does not
//! fit fails with a clear error and changes nothing; reads keep working;
//! once space returns, writes work again; everything committed before is
//! still there after a reopen.
//!
//! Needs root (it mounts a small tmpfs); elsewhere it says so and returns.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use sesame_core::{Error, Store, WriteBatch};
use sesame_store::RedbStore;

/// A tmpfs of `size` mounted on `dir` until dropped.
struct Tmpfs<'a>(&'a Path);

impl<'a> Tmpfs<'a> {
    fn mount(dir: &'a Path, size: &str) -> Option<Self> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

#[test]
fn a_full_disk_fails_the_write_only() {
    if !is_root() {
        eprintln!("full_disk: skipped (mounting a tmpfs needs root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(dir.path(), "8m") else {
        eprintln!("full_disk: skipped (mount -t tmpfs failed)");
        return;
    };
    let path = dir.path().join("store.redb");
    let store = RedbStore::open(&path).unwrap();
    let value = vec![0x5a; 64 << 10];
    // Bounded: 8 MiB cannot take 400 writes of 64 KiB.
    let mut written = 0;
    let err = loop {
        assert!(written < 400, "the tmpfs never filled up");
        let mut batch = WriteBatch::default();
        batch.put(key(written), value.clone());
        match store.write(batch) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
    };
    assert!(written > 10, "only {written} writes fitted");
    assert!(
        matches!(&err, Error::StoreFull(m) if m.contains("space")),
        "{err:?}"
    );
    // Reads keep working, and see every committed write.
    for i in [0, written / 2, written - 1] {
        assert_eq!(
            store.get(&key(i)).unwrap().as_deref(),
            Some(&value[..]),
            "{i}"
        );
    }
    assert_eq!(
        store.get(&key(written)).unwrap(),
        None,
        "the failed write left nothing"
    );
    // Space returns (a file beside the store is removed, or other data):
    // a small write works again.
    let mut freed = 0;
    for i in (0..written).rev().take(written / 2) {
        let mut batch = WriteBatch::default();
        batch.delete(key(i));
        if store.write(batch).is_ok() {
            freed += 1;
        }
    }
    let mut ok = false;
    for attempt in 0..20 {
        let mut batch = WriteBatch::default();
        batch.put(format!("after{attempt}").into_bytes(), b"small".to_vec());
        if store.write(batch).is_ok() {
            ok = true;
            break;
        }
    }
    assert!(
        ok,
        "no write succeeded after freeing space ({freed} deletes went through)"
    );
    assert_eq!(store.get(&key(0)).unwrap().as_deref(), Some(&value[..]));
    drop(store);
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(store.get(&key(0)).unwrap().as_deref(), Some(&value[..]));
}
