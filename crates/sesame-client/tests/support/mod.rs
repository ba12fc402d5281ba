//! What the SDK's integration tests share: a Sesame server in process,
//! over TLS on loopback, with one tenant. Each test binary uses a part
//! of it (`mod support;`).

#![allow(dead_code)]

use std::sync::Arc;

use rand_core::OsRng;
use sesame_client::ServerBinding;
use sesame_core::Store;
use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};

/// A server over `store` on a free loopback port, TLS with a throwaway
/// CA, one tenant with a fresh token, after `configure` has set what the
/// test needs; the binding a client of that tenant uses, with a fresh
/// index prefix (so that profiles of one test never share names).
pub(crate) fn serve(
    store: Arc<dyn Store>,
    configure: impl FnOnce(&mut ServerConfig),
) -> (RunningServer, ServerBinding) {
    let certs = sesame_server::certs::localhost().unwrap();
    let token = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    configure(&mut config);
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new().with("alice", &token).unwrap();
    let server = RunningServer::start(config, store).unwrap();
    let binding = ServerBinding {
        url: server.url(),
        token,
        ca_pem: Some(certs.ca_pem.into_bytes()),
        index_prefix: ServerBinding::fresh_prefix(&mut OsRng),
    };
    (server, binding)
}

/// A test's server over `store` (as [`serve`]), its binding, and a
/// scratch directory for the devices' profiles.
pub(crate) struct Setup<S> {
    pub(crate) _server: RunningServer,
    pub(crate) binding: ServerBinding,
    /// The server's store, for the test to fail or inspect.
    pub(crate) store: Arc<S>,
    pub(crate) tmp: tempfile::TempDir,
}

/// [`serve`] over `store`, with a scratch directory.
pub(crate) fn setup<S: Store + 'static>(
    store: Arc<S>,
    configure: impl FnOnce(&mut ServerConfig),
) -> Setup<S> {
    let (server, binding) = serve(store.clone(), configure);
    Setup {
        _server: server,
        binding,
        store,
        tmp: tempfile::tempdir().unwrap(),
    }
}

/// A new profile at `dir` on keyword scheme `scheme` (default
/// parameters), passphrase `pw`, with the fast test KDF.
pub(crate) fn profile_at(dir: &std::path::Path, scheme: &str) -> sesame_client::Profile {
    sesame_client::Profile::create_with_kdf(
        dir,
        "pw",
        scheme,
        &sesame_core::Params::new(),
        sesame_client::insecure::fast_kdf(),
    )
    .unwrap()
}

/// An embedded backend over `store` (which the test keeps, to tamper
/// with or inspect).
pub(crate) fn memory_backend<S: Store + 'static>(
    store: &Arc<S>,
) -> Box<dyn sesame_client::Backend> {
    let store: Arc<dyn Store> = store.clone();
    Box::new(sesame_client::EmbeddedBackend::over(store))
}

/// Every key and value of `store` under `prefix`.
pub(crate) fn snapshot(
    store: &dyn Store,
    prefix: &[u8],
) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    store.scan_prefix(prefix).unwrap().into_iter().collect()
}
