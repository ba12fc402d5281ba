//! The server over PostgreSQL (when `SESAME_TEST_POSTGRES` is set).

use rand_core::OsRng;
use sesame_core::{Meter, Params};
use sesame_net::blocking::Connection;
use sesame_sse::KeywordClient;

use crate::support::*;

#[test]
fn postgres_backend_end_to_end() {
    let Some(store) = postgres_store() else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: server-over-PostgreSQL test skipped: SESAME_TEST_POSTGRES is not set"
        );
        return;
    };
    let f = start_with(store, |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    static_round_trip(&conn, "pg");
    let mut c = conn.client();
    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
    for d in 1..=20 {
        fast_update(
            &conn,
            "dyn",
            &mut fast,
            d,
            &["all", if d % 2 == 0 { "even" } else { "odd" }],
        );
    }
    let mut ch = conn.index_channel("dyn", "fast", 0, Meter::new());
    assert_eq!(fast.search(&mut OsRng, &mut ch, b"all").unwrap().len(), 20);
    assert_eq!(
        fast.search(&mut OsRng, &mut ch, b"even").unwrap(),
        (1..=10).map(|i| i * 2).collect::<Vec<_>>()
    );
    assert_eq!(f.server.bound().addr.ip().to_string(), "127.0.0.1");
}

/// Two servers over one PostgreSQL namespace write one index at once:
/// four clients (each with its own keys) add to it, each call through
/// the other server than the previous one. Each add is counted once in the
/// index's metadata (a commit that met another server's ran again), and
/// each client finds exactly its documents through either server.
#[test]
fn two_servers_on_one_postgres_write_one_index_at_once() {
    const CLIENTS: u64 = 4;
    const ADDS: u64 = 15;
    let Some(spec) = postgres_spec() else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: two-servers-over-PostgreSQL test skipped: SESAME_TEST_POSTGRES is not set"
        );
        return;
    };
    let fixtures: Vec<Fixture> = (0..2)
        .map(|_| start_with(sesame_store::open_store(&spec).unwrap(), |_| {}))
        .collect();
    let conns: Vec<Connection> = fixtures
        .iter()
        .map(|f| Connection::connect(&f.alice).unwrap())
        .collect();
    let mut c = conns[0].client();
    conns[0]
        .block_on(c.create_index("shared", "fast", ""))
        .unwrap();
    let start = std::sync::Barrier::new(CLIENTS as usize);
    let mut clients: Vec<Box<dyn KeywordClient>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let (conns, start) = (&conns, &start);
                scope.spawn(move || {
                    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
                    start.wait();
                    for d in 1..=ADDS {
                        let conn = &conns[((k + d) % 2) as usize];
                        fast_update(conn, "shared", &mut fast, d, &["all", &format!("c{k}")]);
                    }
                    fast
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for conn in &conns {
        let mut c = conn.client();
        let stats = conn.block_on(c.stats()).unwrap();
        let shared = stats.indexes.iter().find(|x| x.index == "shared").unwrap();
        assert_eq!(
            shared.updates,
            CLIENTS * ADDS,
            "a commit was lost or counted twice"
        );
    }
    for (k, fast) in clients.iter_mut().enumerate() {
        let mut ch = conns[k % 2].index_channel("shared", "fast", 0, Meter::new());
        let mine = fast
            .search(&mut OsRng, &mut ch, format!("c{k}").as_bytes())
            .unwrap();
        assert_eq!(mine, (1..=ADDS).collect::<Vec<_>>(), "client {k}");
        assert_eq!(
            fast.search(&mut OsRng, &mut ch, b"all").unwrap().len() as u64,
            ADDS
        );
    }
}
