//! Running a scheme in-process and turning meter snapshots into figures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sesame_core::{LocalChannel, NetworkModel, Service, Snapshot, Store};
use sesame_store::{MemoryStore, RedbStore};

use crate::error::BenchError;
use crate::result::Row;

/// An in-process channel to a boxed server half.
pub fn local_channel(service: Box<dyn Service>) -> LocalChannel<Box<dyn Service>> {
    LocalChannel::new(service)
}

/// A store backend the experiments run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// [`MemoryStore`].
    Memory,
    /// [`RedbStore`] in a fresh file under a temporary folder.
    Redb,
}

impl Backend {
    /// Both backends.
    pub const ALL: [Backend; 2] = [Backend::Memory, Backend::Redb];

    /// The backend's report name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Redb => "redb",
        }
    }

    /// A fresh, empty store; a redb file goes in `dir` as `file`. Returns
    /// the store and, for redb, the file's path.
    pub fn open(
        self,
        dir: &Path,
        file: &str,
    ) -> Result<(Arc<dyn Store>, Option<PathBuf>), BenchError> {
        match self {
            Backend::Memory => Ok((Arc::new(MemoryStore::new()), None)),
            Backend::Redb => {
                let path = dir.join(file);
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|e| BenchError::io("remove", &path, e))?;
                }
                let store = RedbStore::open(&path).map_err(|e| {
                    BenchError::scheme(format!("open redb store {}", path.display()), e)
                })?;
                Ok((Arc::new(store), Some(path)))
            }
        }
    }
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// Adds a snapshot's figures to `row`, each divided by `per` (the number of
/// operations the snapshot covers, so that figures are per operation):
/// `wall_ms`, `client_ms`, `server_ms`, `bytes_up`, `bytes_down`,
/// `rounds`, the store's `store_reads`, `store_writes`, `store_scans`,
/// `store_scanned`, `store_bytes_read`, `store_bytes_written`, the
/// primitive calls `client_<kind>` and `server_<kind>` (non-zero kinds
/// only), and the modelled times `lan_ms`, `wan103_ms`, `wan197_ms` of
/// [`NetworkModel::ALL`].
pub fn add_snapshot(row: &mut Row, s: &Snapshot, per: u64) {
    let per = per.max(1) as f64;
    let f = |x: u64| x as f64 / per;
    row.set("wall_ms", ms(f(s.wall_ns)))
        .set("client_ms", ms(f(s.client_ns)))
        .set("server_ms", ms(f(s.server_ns)))
        .set("bytes_up", f(s.bytes_up))
        .set("bytes_down", f(s.bytes_down))
        .set("rounds", f(s.rounds))
        .set("store_reads", f(s.store.reads))
        .set("store_writes", f(s.store.writes))
        .set("store_scans", f(s.store.scans))
        .set("store_scanned", f(s.store.scanned))
        .set("store_bytes_read", f(s.store.bytes_read))
        .set("store_bytes_written", f(s.store.bytes_written));
    for (kind, total, _) in s.client_primitives.nonzero() {
        row.set(&format!("client_{}", kind.name()), f(total));
    }
    for (kind, total, _) in s.server_primitives.nonzero() {
        row.set(&format!("server_{}", kind.name()), f(total));
    }
    for model in NetworkModel::ALL {
        let t = model.time(s);
        row.set(&format!("{}_ms", model.name), ms(t.as_nanos() as f64) / per);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_figures_are_per_operation() {
        let s = Snapshot {
            wall_ns: 4_000_000,
            client_ns: 2_000_000,
            server_ns: 1_000_000,
            bytes_up: 200,
            bytes_down: 2_000,
            rounds: 2,
            ..Snapshot::default()
        };
        let mut row = Row::new();
        add_snapshot(&mut row, &s, 2);
        assert_eq!(row.figures.get("client_ms"), Some(&1.0));
        assert_eq!(row.figures.get("rounds"), Some(&1.0));
        assert_eq!(row.figures.get("bytes_down"), Some(&1000.0));
        // wan103: 3 ms + 2 x 206 ms + 2200 B at 10 Mbit/s = 1.76 ms, per 2 ops.
        let wan = row.figures.get("wan103_ms").copied().unwrap();
        assert!((wan - (3.0 + 412.0 + 1.76) / 2.0).abs() < 1e-6, "{wan}");
        assert!(row.figures.get("lan_ms").is_some() && row.figures.get("wan197_ms").is_some());
    }
}
