//! What the SDK's integration tests share: a Sesame server in process,
//! over TLS on loopback, with one tenant. Each test binary uses a part
//! of it (`mod support;`).

#![allow(dead_code)]

use std::sync::Arc;

use rand_core::OsRng;
use sesame_client::ServerBinding;
use sesame_core::Store;
use sesame_server::{RunningServer, ServerConfig, Tokens};

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
    let mut config = sesame_server::certs::loopback_config(&certs, &[("alice", &token)]).unwrap();
    configure(&mut config);
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

/// A table without a key (its records are named by an import): a string
/// field `name` with an equality index and an integer `n` with a range
/// index (`bplus-clww`, 16 bits), so that the records an import removes
/// leave the range index too.
pub(crate) fn keyless_schema() -> sesame_client::Schema {
    sesame_client::Schema::from_toml(
        r#"
equality = "fast"
[fields.name]
type = "string"
index = ["equality"]
[fields.n]
type = "integer"
index = ["range"]
range = "bplus-clww"
bits = 16
"#,
    )
    .unwrap()
}

/// A table keyed by integer `id` whose equality indexes run on
/// `equality`, with an integer `v` of `bits` bits indexed by range
/// protocol `range`, and the fields `more` declares (TOML) after them.
pub(crate) fn range_schema(
    range: &str,
    equality: &str,
    bits: u32,
    more: &str,
) -> sesame_client::Schema {
    sesame_client::Schema::from_toml(&format!(
        "key = \"id\"\nequality = \"{equality}\"\n[fields.id]\ntype = \"integer\"\n\
         [fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"{range}\"\n\
         bits = {bits}\n{more}"
    ))
    .unwrap()
}

/// A table keyed by integer `id` with strings `carrier` and `origin`
/// (`origin` with an equality index), the fields `more` declares (TOML),
/// and a verified group over `carrier` and `origin`.
pub(crate) fn verified_schema(more: &str) -> sesame_client::Schema {
    sesame_client::Schema::from_toml(&format!(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.carrier]\ntype = \"string\"\n\
         [fields.origin]\ntype = \"string\"\nindex = [\"equality\"]\n{more}\
         [verified]\nfields = [\"carrier\", \"origin\"]\n"
    ))
    .unwrap()
}

/// The first device of a profile on a server: its default index created
/// there on `scheme`, the profile at `dir` bound to `binding`
/// (passphrase `pw`, fast test KDF).
pub(crate) fn server_profile(
    binding: &ServerBinding,
    dir: &std::path::Path,
    scheme: &str,
) -> sesame_client::Profile {
    sesame_client::NetworkBackend::connect(binding)
        .unwrap()
        .create_index(
            sesame_client::DEFAULT_INDEX,
            scheme,
            &sesame_core::Params::new(),
        )
        .unwrap();
    sesame_client::Profile::create_with_server(
        dir,
        "pw",
        scheme,
        &sesame_core::Params::new(),
        sesame_client::insecure::fast_kdf(),
        binding,
    )
    .unwrap()
}

/// Writes file `root/f{i}.txt` holding `words` (space-separated) and
/// records in `oracle` that each word finds it; its path.
pub(crate) fn write_indexed_file(
    root: &std::path::Path,
    i: usize,
    words: Vec<String>,
    oracle: &mut std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> std::path::PathBuf {
    let path = root.join(format!("f{i}.txt"));
    std::fs::write(&path, words.join(" ")).unwrap();
    for w in words {
        oracle
            .entry(w)
            .or_default()
            .insert(path.to_string_lossy().into_owned());
    }
    path
}

/// Adds the files under `path` to `p`'s default index (in a session of
/// its own); what the add did.
pub(crate) fn add(p: &sesame_client::Profile, path: &std::path::Path) -> sesame_client::AddReport {
    p.session(sesame_client::DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[path], &mut |_| {})
        .unwrap()
}

/// Inserts into `t` one record per row of `(field, text)` cells; what
/// the insert did.
pub(crate) fn insert_rows(
    t: &mut sesame_client::Table,
    rows: impl IntoIterator<Item = Vec<(&'static str, String)>>,
) -> sesame_client::InsertReport {
    let records = rows
        .into_iter()
        .map(|cells| {
            t.record_from_cells(cells.iter().map(|(k, v)| (*k, v.as_str())), None)
                .unwrap()
        })
        .collect();
    t.insert(records, &mut |_| {}).unwrap()
}

/// Asserts that `r` is [`sesame_client::ClientError::PassphraseChanged`]
/// (another device rotated the master key): `what` says which command.
pub(crate) fn assert_passphrase_changed<T>(r: sesame_client::Result<T>, what: &str) {
    let err = r.map(drop).unwrap_err();
    assert!(
        matches!(err, sesame_client::ClientError::PassphraseChanged { .. }),
        "{what}: {err:?}"
    );
}
