//! The `Meter`: one place where every layer reports what a protocol run
//! cost.
//!
//! A [`Meter`] is a cheap, cloneable handle on shared counters. Channels
//! report bytes, rounds, the time spent inside calls, the server's handling
//! time, store I/O and the server's primitive calls. A [`Span`] brackets a
//! measured operation on the client thread and yields a [`Snapshot`]:
//!
//! - client time = wall time of the span minus the time spent inside
//!   channel calls (transport and server);
//! - server time = the time the server spent handling the span's requests;
//! - client primitives = the primitive calls on the client thread, less the
//!   server's calls made on that same thread (the in-process channel runs
//!   the server half on the caller's thread).

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex,
};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sesame_crypto::counter::{self, PrimitiveCounts};

use crate::store::IoCounts;

#[derive(Debug, Default)]
struct Inner {
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    rounds: AtomicU64,
    call_ns: AtomicU64,
    server_ns: AtomicU64,
    server: Mutex<ServerTotals>,
}

#[derive(Clone, Copy, Debug, Default)]
struct ServerTotals {
    io: IoCounts,
    primitives: PrimitiveCounts,
    primitives_on_client_thread: PrimitiveCounts,
}

/// Shared counters that channels and servers report to.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    inner: Arc<Inner>,
}

/// What a server reports about the handling of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerReport {
    /// Time spent handling the request.
    pub handle_ns: u64,
    /// Store operations made while handling it.
    pub io: IoCounts,
    /// Primitive calls made while handling it.
    pub primitives: PrimitiveCounts,
}

impl ServerReport {
    /// Runs `handle` (a server half answering requests) and reports it:
    /// the time it took, the store operations `io` counted across it and
    /// the primitive calls it made on this thread. Every place a server
    /// half runs (the in-process channel, the networked server's calls and
    /// uploads) measures it this way.
    pub fn measure<T>(io: impl Fn() -> IoCounts, handle: impl FnOnce() -> T) -> (T, ServerReport) {
        let start = Instant::now();
        let before = io();
        let (out, primitives) = counter::measure(handle);
        let report = ServerReport {
            handle_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
            io: io().since(&before),
            primitives,
        };
        (out, report)
    }
}

impl Meter {
    /// A meter with all counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one round trip: `up` bytes sent, `down` bytes received, and
    /// `elapsed` spent inside the call (transport and server).
    pub fn record_round(&self, up: usize, down: usize, elapsed: Duration) {
        let i = &self.inner;
        i.rounds.fetch_add(1, Ordering::Relaxed);
        i.bytes_up.fetch_add(up as u64, Ordering::Relaxed);
        i.bytes_down.fetch_add(down as u64, Ordering::Relaxed);
        i.call_ns.fetch_add(nanos(elapsed), Ordering::Relaxed);
    }

    /// Records the server's report for one request. `on_client_thread` says
    /// the server ran on the caller's thread, so that its primitive calls are
    /// not counted twice.
    pub fn record_server(&self, report: &ServerReport, on_client_thread: bool) {
        self.inner
            .server_ns
            .fetch_add(report.handle_ns, Ordering::Relaxed);
        let mut s = self
            .inner
            .server
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.io.add(&report.io);
        s.primitives.add(&report.primitives);
        if on_client_thread {
            s.primitives_on_client_thread.add(&report.primitives);
        }
    }

    /// Starts measuring an operation on the current thread.
    pub fn span(&self) -> Span {
        Span {
            meter: self.clone(),
            base: self.totals(),
            primitives: counter::snapshot(),
            start: Instant::now(),
        }
    }

    fn totals(&self) -> Totals {
        let i = &self.inner;
        let s = *i
            .server
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Totals {
            bytes_up: i.bytes_up.load(Ordering::Relaxed),
            bytes_down: i.bytes_down.load(Ordering::Relaxed),
            rounds: i.rounds.load(Ordering::Relaxed),
            call_ns: i.call_ns.load(Ordering::Relaxed),
            server_ns: i.server_ns.load(Ordering::Relaxed),
            server: s,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Totals {
    bytes_up: u64,
    bytes_down: u64,
    rounds: u64,
    call_ns: u64,
    server_ns: u64,
    server: ServerTotals,
}

/// An operation being measured; see [`Meter::span`].
#[derive(Debug)]
pub struct Span {
    meter: Meter,
    base: Totals,
    primitives: PrimitiveCounts,
    start: Instant,
}

impl Span {
    /// Ends the measurement.
    pub fn finish(self) -> Snapshot {
        let wall = nanos(self.start.elapsed());
        let thread_primitives = counter::snapshot().since(&self.primitives);
        let now = self.meter.totals();
        let b = &self.base;
        let server_here = now
            .server
            .primitives_on_client_thread
            .since(&b.server.primitives_on_client_thread);
        let call_ns = now.call_ns - b.call_ns;
        Snapshot {
            wall_ns: wall,
            client_ns: wall.saturating_sub(call_ns),
            server_ns: now.server_ns - b.server_ns,
            bytes_up: now.bytes_up - b.bytes_up,
            bytes_down: now.bytes_down - b.bytes_down,
            rounds: now.rounds - b.rounds,
            store: now.server.io.since(&b.server.io),
            client_primitives: thread_primitives.since(&server_here),
            server_primitives: now.server.primitives.since(&b.server.primitives),
        }
    }
}

/// What one measured operation cost. Serializes to JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Wall-clock time of the whole operation on the client.
    pub wall_ns: u64,
    /// Client computation: wall time less time spent inside channel calls.
    pub client_ns: u64,
    /// Server computation: time spent handling the requests.
    pub server_ns: u64,
    /// Bytes sent from client to server (encoded requests).
    pub bytes_up: u64,
    /// Bytes sent from server to client (encoded responses, results
    /// included).
    pub bytes_down: u64,
    /// Request/response round trips.
    pub rounds: u64,
    /// Store operations made by the server.
    pub store: IoCounts,
    /// Primitive calls made by the client.
    pub client_primitives: PrimitiveCounts,
    /// Primitive calls made by the server.
    pub server_primitives: PrimitiveCounts,
}

impl Snapshot {
    /// Bytes in both directions.
    pub fn bytes(&self) -> u64 {
        self.bytes_up + self.bytes_down
    }

    /// Adds `other` into `self` (for totals over many operations).
    pub fn add(&mut self, other: &Snapshot) {
        self.wall_ns += other.wall_ns;
        self.client_ns += other.client_ns;
        self.server_ns += other.server_ns;
        self.bytes_up += other.bytes_up;
        self.bytes_down += other.bytes_down;
        self.rounds += other.rounds;
        self.store.add(&other.store);
        self.client_primitives.add(&other.client_primitives);
        self.server_primitives.add(&other.server_primitives);
    }

    /// JSON text of the snapshot.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_crypto::counter::{record, Primitive};

    #[test]
    fn span_separates_client_and_server_figures() {
        let m = Meter::new();
        let span = m.span();
        record(Primitive::Prf, 5); // client work
        record(Primitive::Hash, 2); // server work on this thread
        let mut server = PrimitiveCounts::default();
        server.total[Primitive::ALL
            .iter()
            .position(|&k| k == Primitive::Hash)
            .unwrap()] = 2;
        server.pure = server.total;
        m.record_round(10, 20, Duration::from_micros(50));
        m.record_server(
            &ServerReport {
                handle_ns: 1000,
                io: IoCounts {
                    reads: 3,
                    ..IoCounts::default()
                },
                primitives: server,
            },
            true,
        );
        let s = span.finish();
        assert_eq!((s.bytes_up, s.bytes_down, s.rounds), (10, 20, 1));
        assert_eq!(s.server_ns, 1000);
        assert_eq!(s.store.reads, 3);
        assert_eq!(s.client_primitives.total(Primitive::Prf), 5);
        assert_eq!(s.client_primitives.total(Primitive::Hash), 0);
        assert_eq!(s.server_primitives.total(Primitive::Hash), 2);
        let json = s.to_json();
        let back: Snapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn spans_only_see_their_own_rounds() {
        let m = Meter::new();
        m.record_round(1, 1, Duration::ZERO);
        let span = m.span();
        m.record_round(7, 9, Duration::ZERO);
        let s = span.finish();
        assert_eq!((s.bytes_up, s.bytes_down, s.rounds), (7, 9, 1));
    }
}
