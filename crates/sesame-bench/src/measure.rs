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

/// The calling thread's time on a CPU so far, in ns: the first field of
/// `/proc/thread-self/schedstat` (Linux); `None` where it cannot be read.
/// The kernel brings it up to date at its scheduler ticks, so a reading
/// lags by up to a tick (a few ms).
pub fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Spans shorter than this keep their wall-clock times in
/// [`without_waits`]: a tick's lag of the on-CPU reading would be too
/// large a share of them.
pub const ON_CPU_MIN_NS: u64 = 50_000_000;

/// The on-CPU time of the calling thread over a span, for
/// [`without_waits`].
#[derive(Clone, Copy, Debug)]
pub struct OnCpu(Option<u64>);

impl OnCpu {
    /// Starts counting now.
    pub fn start() -> Self {
        OnCpu(thread_cpu_ns())
    }

    /// The thread's on-CPU ns since [`OnCpu::start`], if both readings
    /// could be made.
    pub fn elapsed(&self) -> Option<u64> {
        Some(thread_cpu_ns()?.saturating_sub(self.0?))
    }
}

/// A snapshot's wall, client and server times without the time its thread
/// waited for a CPU: each multiplied by the share of the span the thread
/// was on one (`cpu_ns / wall_ns`, at most 1). On a machine whose cores
/// other work holds, a thread runs in time slices and waits between them:
/// the wait lengthens a wall-clock time by the load, while the
/// computation the figure measures is the time on the CPU. Only for a
/// span whose work all runs on the calling thread (client and server of
/// a local channel, no worker threads), of at least [`ON_CPU_MIN_NS`];
/// others, and spans without a reading, keep their times.
pub fn without_waits(s: &mut Snapshot, cpu_ns: Option<u64>) {
    let Some(cpu) = cpu_ns else {
        return;
    };
    if s.wall_ns < ON_CPU_MIN_NS || cpu >= s.wall_ns {
        return;
    }
    let share = cpu as f64 / s.wall_ns as f64;
    let scale = |ns: u64| (ns as f64 * share).round() as u64;
    s.wall_ns = scale(s.wall_ns);
    s.client_ns = scale(s.client_ns);
    s.server_ns = scale(s.server_ns);
}

/// A snapshot's wall, client and server times scaled to the median of
/// its operations timed one by one (`each_ns`, one sample per operation
/// of the span): each multiplied by `median * count / wall_ns` when that
/// is below 1. For a span too short for [`without_waits`] (a reading
/// lags by a scheduler tick) whose operations all do the same work: an
/// operation of tens of µs mostly runs inside one time slice, so the
/// waits for a CPU land on a few operations, which the median leaves
/// out. Sorts `each_ns`; a span without samples keeps its times.
pub fn without_bursts(s: &mut Snapshot, each_ns: &mut [f64]) {
    if each_ns.is_empty() || s.wall_ns == 0 {
        return;
    }
    let typical = median(each_ns) * each_ns.len() as f64;
    let share = typical / s.wall_ns as f64;
    if share.is_nan() || share >= 1.0 {
        return;
    }
    let scale = |ns: u64| (ns as f64 * share).round() as u64;
    s.wall_ns = scale(s.wall_ns);
    s.client_ns = scale(s.client_ns);
    s.server_ns = scale(s.server_ns);
}

/// The median of `v` (the mean of the middle two when their number is
/// even; NaN when empty); sorts `v`. One sample slowed by a burst of
/// other work does not move it.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half of a span spent waiting for a CPU is taken out of its times;
    /// a short span, or one without a reading, keeps them; the on-CPU
    /// clock advances with work on this thread.
    #[test]
    fn waits_for_a_cpu_are_left_out_of_a_span() {
        let span = Snapshot {
            wall_ns: 200_000_000,
            client_ns: 150_000_000,
            server_ns: 50_000_000,
            rounds: 3,
            ..Snapshot::default()
        };
        let mut s = span;
        without_waits(&mut s, Some(100_000_000));
        assert_eq!(
            (s.wall_ns, s.client_ns, s.server_ns, s.rounds),
            (100_000_000, 75_000_000, 25_000_000, 3)
        );
        for cpu in [None, Some(300_000_000)] {
            let mut s = span;
            without_waits(&mut s, cpu);
            assert_eq!(s, span);
        }
        let mut short = Snapshot {
            wall_ns: ON_CPU_MIN_NS - 1,
            ..Snapshot::default()
        };
        without_waits(&mut short, Some(1));
        assert_eq!(short.wall_ns, ON_CPU_MIN_NS - 1);
        if cfg!(target_os = "linux") {
            let on = OnCpu::start();
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < std::time::Duration::from_millis(60) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            assert!(x > 0 && on.elapsed().is_some_and(|ns| ns > 0));
        }
    }

    /// Ten operations of 40 µs whose span took twice that (two of them
    /// waited for a CPU) are brought back to 400 µs; a span no longer
    /// than its operations' median, or without samples, keeps its times.
    #[test]
    fn bursts_of_waiting_are_left_out_of_a_span_of_like_operations() {
        let span = Snapshot {
            wall_ns: 800_000,
            client_ns: 600_000,
            server_ns: 200_000,
            rounds: 10,
            ..Snapshot::default()
        };
        let mut each = [40_000.0; 10];
        each[3] = 200_000.0;
        each[7] = 200_000.0;
        let mut s = span;
        without_bursts(&mut s, &mut each);
        assert_eq!(
            (s.wall_ns, s.client_ns, s.server_ns, s.rounds),
            (400_000, 300_000, 100_000, 10)
        );
        let mut s = span;
        without_bursts(&mut s, &mut [80_000.0; 10]);
        assert_eq!(s, span);
        let mut s = span;
        without_bursts(&mut s, &mut []);
        assert_eq!(s, span);
    }

    /// Two configurations timed per operation, the paper's ratio between
    /// them 2: one operation of the first delayed a hundredfold (it waited
    /// for a CPU) turns the verdict of a mean, not of a median.
    #[test]
    fn a_verdict_from_medians_is_unchanged_by_one_outlier_sample() {
        let verdicts = |first: &[f64], of: fn(&mut [f64]) -> f64| {
            let mut rows = Vec::new();
            for (config, samples, paper) in [("a", first, 1.0), ("b", &[2.0; 9][..], 2.0)] {
                let mut row = Row::new().param("config", config);
                row.set("us", of(&mut samples.to_vec())).paper_any_scale(
                    "us",
                    paper,
                    "µs per deletion",
                    "Table IV",
                );
                rows.push(row);
            }
            let rs = crate::ResultSet {
                experiment: "t".into(),
                title: "t".into(),
                seed_paper: "p".into(),
                scale: "standard".into(),
                seed: 1,
                notes: vec![],
                display: vec![],
                rows,
                charts: vec![],
            };
            crate::fidelity::comparisons(&[rs])
                .into_iter()
                .map(|c| c.verdict)
                .collect::<Vec<_>>()
        };
        let mean = |v: &mut [f64]| v.iter().sum::<f64>() / v.len() as f64;
        let quiet = [1.0; 9];
        let mut loaded = quiet;
        loaded[4] = 100.0;
        assert_eq!(verdicts(&quiet, median), ["matches", "matches"]);
        assert_eq!(verdicts(&loaded, median), verdicts(&quiet, median));
        assert_eq!(verdicts(&quiet, mean), ["matches", "matches"]);
        assert_eq!(verdicts(&loaded, mean), ["differs", "differs"]);
    }

    #[test]
    fn the_median_ignores_one_outlier() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [1.0, 2.0, 3.0, 1000.0]), 2.5);
        assert_eq!(median(&mut [1.0, 1.1, 0.9, 50.0, 1.0]), 1.0);
        assert!(median(&mut []).is_nan());
    }

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
