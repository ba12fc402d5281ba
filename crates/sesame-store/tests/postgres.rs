//! `PostgresStore` beyond the generic suite: data survives reopening,
//! namespaces are separate, and a namespace that is not ours is refused
//! and left untouched. Skipped (with a note) without
//! `SESAME_TEST_POSTGRES`.

#![allow(clippy::unwrap_used)]

use sesame_core::{Error, Store};
use sesame_store::{open_store, PostgresStore};

fn url() -> Option<String> {
    let url = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: PostgreSQL store tests skipped: SESAME_TEST_POSTGRES is not set"
        );
    }
    url
}

/// `SESAME_TEST_POSTGRES` without the note.
fn url_quiet() -> Option<String> {
    std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
}

fn spec(url: &str, ns: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}namespace={ns}")
}

fn fresh(tag: &str) -> String {
    format!(
        "{tag}{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// Runs SQL on the test database.
fn sql(url: &str, text: &str) {
    let mut c = postgres_client(url);
    c.batch_execute(text).unwrap();
}

fn postgres_client(url: &str) -> postgres::Client {
    use std::str::FromStr;
    postgres::Config::from_str(url)
        .unwrap()
        .connect(postgres::NoTls)
        .unwrap()
}

#[test]
fn data_survives_reopening_and_namespaces_are_separate() {
    let Some(url) = url() else { return };
    let (a, b) = (fresh("a"), fresh("b"));
    let s = PostgresStore::open(&spec(&url, &a)).unwrap();
    s.put(b"k", b"v1").unwrap();
    let t = open_store(&spec(&url, &b)).unwrap();
    assert_eq!(t.backend(), "postgres");
    assert_eq!(t.get(b"k").unwrap(), None);
    t.put(b"k", b"v2").unwrap();
    drop(s);
    let s = PostgresStore::open(&spec(&url, &a)).unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(s.namespace(), a);
    s.destroy().unwrap();
    // Destroyed: a new, empty store opens under the same name.
    let s = PostgresStore::open(&spec(&url, &a)).unwrap();
    assert_eq!(s.get(b"k").unwrap(), None);
    s.destroy().unwrap();
    drop(t);
    PostgresStore::open(&spec(&url, &b))
        .unwrap()
        .destroy()
        .unwrap();
}

#[test]
fn a_namespace_that_is_not_ours_is_refused_and_left_untouched() {
    let Some(url) = url() else { return };
    // A table of another program under our table's name, no marker.
    let ns = fresh("f");
    sql(
        &url,
        &format!("CREATE TABLE sesame_kv_{ns} (x int); INSERT INTO sesame_kv_{ns} VALUES (7)"),
    );
    let err = PostgresStore::open(&spec(&url, &ns)).unwrap_err();
    assert!(
        matches!(&err, Error::StoreForeign(m) if m.contains("without the Sesame marker")),
        "{err:?}"
    );
    let mut c = postgres_client(&url);
    let n: i64 = c
        .query_one(&format!("SELECT count(*) FROM sesame_kv_{ns}"), &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "left untouched");
    sql(&url, &format!("DROP TABLE sesame_kv_{ns}"));

    // A marker of another format version.
    let ns = fresh("v");
    PostgresStore::open(&spec(&url, &ns)).unwrap();
    sql(
        &url,
        &format!("UPDATE sesame_meta SET format = 'sesame-store/9' WHERE namespace = '{ns}'"),
    );
    let err = PostgresStore::open(&spec(&url, &ns)).unwrap_err();
    assert!(
        matches!(&err, Error::StoreForeign(m) if m.contains("sesame-store/9")),
        "{err:?}"
    );
    sql(
        &url,
        &format!("UPDATE sesame_meta SET format = 'sesame-store/1' WHERE namespace = '{ns}'"),
    );
    // A marker whose table is gone.
    sql(&url, &format!("DROP TABLE sesame_kv_{ns}"));
    let err = PostgresStore::open(&spec(&url, &ns)).unwrap_err();
    assert!(matches!(&err, Error::StoreCorrupt(_)), "{err:?}");
    sql(
        &url,
        &format!("DELETE FROM sesame_meta WHERE namespace = '{ns}'"),
    );
}

#[test]
fn a_lost_connection_is_replaced() {
    let Some(url) = url() else { return };
    let ns = fresh("c");
    let app = format!("sesame_{ns}");
    let s = PostgresStore::open(&format!("{}&application_name={app}", spec(&url, &ns))).unwrap();
    s.put(b"k", b"v").unwrap();
    // The database server closes this store's connections.
    sql(
        &url,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{app}'"
        ),
    );
    // The first operation may see the closed connection; the next works.
    let _ = s.get(b"k");
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    s.destroy().unwrap();
}

/// The TLS endpoint of the test server (`.ci/run` starts one on loopback
/// with a certificate from a throwaway CA): `SESAME_TEST_POSTGRES_TLS`
/// (`postgres://...?sslmode=require&sslrootcert=CA.pem`).
fn tls_url() -> Option<String> {
    let url = std::env::var("SESAME_TEST_POSTGRES_TLS")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: PostgreSQL TLS tests skipped: SESAME_TEST_POSTGRES_TLS is not set"
        );
    }
    url
}

/// Over TLS with the CA the spec names, the store works (the server sees
/// an SSL connection); with the public roots instead of that CA, or a
/// name the certificate does not carry, the connection is refused: the
/// certificate is verified.
#[test]
fn tls_connections_verify_the_server() {
    let Some(url) = tls_url() else { return };
    let ns = fresh("tls");
    let s = PostgresStore::open(&spec(&url, &ns)).unwrap();
    s.put(b"k", b"over tls").unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"over tls"[..]));
    // While the store holds its connection, the server lists it as an SSL
    // session (asked over the plain test connection, when there is one).
    if let Some(admin) = url_quiet() {
        let mut c = postgres_client(&admin);
        let ssl_sessions: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
                 WHERE ssl AND application_name = 'sesame'",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(ssl_sessions >= 1, "no SSL session of the store");
        sql(
            &admin,
            &format!(
                "DROP TABLE IF EXISTS sesame_kv_{ns}; DELETE FROM sesame_meta WHERE namespace = '{ns}'"
            ),
        );
    }
    drop(s);
    // Without the private CA: the public roots do not know it.
    let no_ca: String = url
        .split('&')
        .filter(|p| !p.starts_with("sslrootcert="))
        .collect::<Vec<_>>()
        .join("&");
    let err = PostgresStore::open(&spec(&no_ca, &fresh("tls"))).unwrap_err();
    assert!(
        matches!(err, Error::StoreIo(_)) && err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
    // A name the certificate does not carry, at the right address.
    let other = format!(
        "{}&hostaddr=127.0.0.1",
        url.replace("@127.0.0.1:", "@wrong-name.example:")
    );
    assert_ne!(other, url);
    let err = PostgresStore::open(&spec(&other, &fresh("tls"))).unwrap_err();
    assert!(
        matches!(err, Error::StoreIo(_)) && err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
}
