//! Limits, deadlines, budgets, connections and shutdown.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand_core::OsRng;
use sesame_core::{Meter, Params};
use sesame_net::blocking::Connection;
use sesame_server::Limits;
use sesame_sse::Multimap;
use sesame_store::MemoryStore;
use tonic::Code;

use crate::support::*;

#[test]
fn limits_give_resource_exhausted_and_deadlines_deadline_exceeded() {
    let slow = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(slow.clone(), |c| {
        c.limits = Limits {
            max_indexes_per_tenant: 2,
            max_transaction_bytes: 64 << 10,
            ..Limits::default()
        };
        c.request_timeout = Duration::from_millis(300);
    });
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("a", "pibas", "")).unwrap();
    conn.block_on(c.create_index("b", "pibas", "")).unwrap();
    let err = conn.block_on(c.create_index("c", "pibas", "")).unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("at most 2"), "{}", err.message());

    // An upload larger than a transaction may be.
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload("a", "pibas", 1, Meter::new()).unwrap();
    let err = client
        .setup(&mut OsRng, &mut up, &database(3000, 20))
        .unwrap_err();
    assert!(err.to_string().contains("RESOURCE_EXHAUSTED"), "{err}");

    // A request slower than the server's deadline.
    slow.delay_ms.store(600, Ordering::Relaxed);
    let err = conn.block_on(c.get_documents("a", vec![1])).unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(
        err.message().contains("deadline of 300 ms"),
        "{}",
        err.message()
    );
    // Or than the client's, which the server hears (grpc-timeout).
    let mut hasty = c.with_timeout(Duration::from_millis(100));
    let err = conn
        .block_on(hasty.get_documents("a", vec![1]))
        .unwrap_err();
    assert!(
        matches!(err.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{err:?}"
    );
    slow.delay_ms.store(0, Ordering::Relaxed);
    assert!(conn.block_on(c.get_documents("a", vec![1])).is_ok());
}

#[test]
fn shutdown_lets_requests_in_flight_finish() {
    let slow = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(slow.clone(), |c| c.shutdown_grace = Duration::from_secs(5));
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("a", "pibas", "")).unwrap();
    slow.delay_ms.store(400, Ordering::Relaxed);
    let config = f.alice.clone();
    let slow_request = std::thread::spawn(move || {
        let conn = Connection::connect(&config).unwrap();
        let mut c = conn.client();
        conn.block_on(c.get_documents("a", vec![1]))
    });
    std::thread::sleep(Duration::from_millis(150));
    f.server.shutdown().unwrap();
    let r = slow_request.join().unwrap();
    assert!(r.is_ok(), "the request in flight finished: {r:?}");
    // And nothing listens any more.
    let err = conn.block_on(c.list_indexes()).unwrap_err();
    assert!(
        matches!(err.code(), Code::Unavailable | Code::Unknown),
        "{err:?}"
    );
}

/// A flood of connections that never start TLS neither blocks a real
/// client nor is held: each is closed at the handshake deadline.
#[test]
fn connections_that_never_finish_tls_are_closed_and_do_not_block_clients() {
    use std::io::Read;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.connections.handshake_timeout = Duration::from_secs(1);
    });
    let addr = f.server.bound().addr;
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    // A real client gets through during the flood.
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    // Every idle connection is closed by the server (EOF or reset), not
    // held: bounded by a read timeout well past the deadline.
    let mut closed = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Ok(0) => closed += 1,
            Err(e)
                if e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut =>
            {
                closed += 1
            }
            _ => {}
        }
    }
    assert_eq!(closed, 200, "idle connections still open");
    conn.block_on(c.list_indexes()).unwrap();
}

/// Uploads held before their commit are bounded per tenant and in all: an
/// upload over the budget is refused with RESOURCE_EXHAUSTED, what it held
/// is given back, and an upload within the budget still works.
#[test]
fn uncommitted_uploads_are_bounded() {
    let store = Arc::new(MemoryStore::new());
    let f = start_with(store.clone(), |c| {
        c.limits = Limits {
            max_tenant_buffer_bytes: 64 << 10,
            max_buffer_bytes: 96 << 10,
            ..Limits::default()
        };
    });
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("big", "pibas", "")).unwrap();
    let gauge = || -> u64 {
        admin_get(f.server.bound().admin.unwrap(), None)
            .lines()
            .find_map(|l| l.strip_prefix("sesame_uncommitted_bytes ")?.parse().ok())
            .unwrap()
    };
    // Far more than 64 KiB of entries: the budget is checked as each
    // message is buffered.
    let mut db = Multimap::new();
    for i in 0..4000u64 {
        db.insert(format!("word{i}").into_bytes(), vec![i + 1]);
    }
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload("big", "pibas", 1, Meter::new()).unwrap();
    let err = client.setup(&mut OsRng, &mut up, &db).unwrap_err();
    assert!(err.to_string().contains("not yet committed"), "{err}");
    drop(up);
    // Given back once the server has dropped the upload.
    let start = std::time::Instant::now();
    while gauge() != 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gauge(), 0);
    // Within the budget: works.
    static_round_trip(&conn, "small");
}

/// Over the connection limit a new connection takes the place of the
/// oldest one that presented no token (closed by the server); once the
/// idle connections holding the places reach their handshake deadline,
/// they are gone; an idle TLS connection is closed at the idle deadline.
#[test]
fn the_connection_limit_and_the_idle_deadline_hold() {
    use std::io::Read;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.connections.handshake_timeout = Duration::from_secs(1);
        c.connections.idle_timeout = Duration::from_secs(1);
        c.connections.max_connections = 20;
    });
    let addr = f.server.bound().addr;
    let mut held: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The 21st takes the place of the oldest, which the server closes.
    let _extra = std::net::TcpStream::connect(addr).unwrap();
    let oldest = &mut held[0];
    oldest
        .set_read_timeout(Some(Duration::from_millis(900)))
        .unwrap();
    let mut buf = [0u8; 8];
    let closed = match oldest.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(
        closed,
        "the oldest connection without a token kept its place"
    );
    // After the handshake deadline the places are free again.
    std::thread::sleep(Duration::from_millis(1200));
    drop(held);
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    // Idle past the idle deadline: the connection is closed, and the
    // client's next call reconnects.
    std::thread::sleep(Duration::from_millis(1500));
    conn.block_on(c.list_indexes())
        .or_else(|_| conn.block_on(c.list_indexes()))
        .unwrap();
}
