//! The PostgreSQL backend: one table per store, one transaction per batch.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, NoTls, Statement};
use sesame_core::{Conditional, Error, IoCounter, IoCounts, Result, Store, WriteBatch};

use crate::prefix_end;
use crate::remote::collapse;
use crate::FORMAT_VERSION;

/// The table that holds one format marker per namespace.
pub const META_TABLE: &str = "sesame_meta";

/// The namespace a spec without `namespace=` names.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Connections a store opens at most; callers beyond wait for one.
const MAX_CONNECTIONS: usize = 16;

/// Rows per statement when a batch is written (bounded by bytes too).
const CHUNK_ROWS: usize = 10_000;
/// Bytes of keys and values per statement when a batch is written.
const CHUNK_BYTES: usize = 32 << 20;

/// Times a batch is retried when PostgreSQL aborts it for a deadlock or a
/// serialization failure with a concurrent batch.
const RETRIES: usize = 5;

/// Key of the advisory lock held while a namespace is created or checked.
const INIT_LOCK: i64 = 0x5345_5341_4d45_0001;

/// A store in a PostgreSQL table: the server backend for deployments that
/// already run PostgreSQL.
///
/// Each store is one table `sesame_kv_<namespace>` (`key bytea PRIMARY KEY,
/// value bytea NOT NULL`) in the database the URL names, with its format
/// marker in the shared table [`META_TABLE`] (`namespace`, `format` =
/// [`FORMAT_VERSION`]). Several stores can share one database under
/// different namespaces.
///
/// Each [`Store::write`] is one transaction: the batch is collapsed to the
/// last operation per key (the same result as applying it in order), then
/// written with one `DELETE ... WHERE key = ANY($1)` and one
/// `INSERT ... SELECT unnest(...) ON CONFLICT DO UPDATE` per chunk. With
/// PostgreSQL's default `synchronous_commit = on`, a batch is durable when
/// `write` returns. Reads are single statements, so each sees one committed
/// state. Connections come from a small pool (at most 16); after a
/// connection failure the pooled connections are dropped, and a read is
/// tried once more on a fresh one (a write's error goes to the caller: its
/// commit may or may not have happened).
///
/// TLS: with `sslmode=require` in the spec, every connection uses TLS
/// (rustls) and verifies the server's certificate and name, against the CA
/// file `sslrootcert=PATH` or else the public web roots (libpq's
/// `verify-full`). A TCP host that is not on this machine is refused
/// without TLS unless the spec says `sslmode=disable` (the clients encrypt
/// what the store holds, but not the database password or the access
/// pattern); Unix sockets and loopback need no TLS.
pub struct PostgresStore {
    config: postgres::Config,
    tls: Option<crate::postgres_tls::RustlsConnect>,
    namespace: String,
    table: String,
    label: String,
    pool: Mutex<Pool>,
    freed: Condvar,
    io: IoCounter,
}

#[derive(Default)]
struct Pool {
    idle: Vec<Conn>,
    open: usize,
}

struct Conn {
    client: Client,
    get: Statement,
    get_many: Statement,
    scan: Statement,
    scan_from: Statement,
    /// The statements a conditional write runs.
    writes: Stmts,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// What a spec asks beyond the driver's parameters.
struct SpecExtras {
    /// The driver's URL, without `namespace=` and `sslrootcert=`.
    url: String,
    namespace: String,
    /// `sslrootcert=PATH`, if given.
    ca_file: Option<String>,
    /// The `sslmode=` value as written, if given.
    ssl_mode: Option<String>,
}

/// Splits `namespace=NAME` off the query of a `postgres://` URL.
#[cfg(test)]
fn split_namespace(spec: &str) -> Result<(String, String)> {
    split_spec(spec).map(|s| (s.url, s.namespace))
}

/// Splits `namespace=NAME` and `sslrootcert=PATH` off the query of a
/// `postgres://` URL, and notes `sslmode`.
fn split_spec(spec: &str) -> Result<SpecExtras> {
    let (base, query) = match spec.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (spec, None),
    };
    let mut namespace = None;
    let mut ca_file = None;
    let mut ssl_mode = None;
    let mut rest = Vec::new();
    for part in query.into_iter().flat_map(|q| q.split('&')) {
        if let Some(ns) = part.strip_prefix("namespace=") {
            namespace = Some(ns.to_owned());
        } else if let Some(path) = part.strip_prefix("sslrootcert=") {
            ca_file = Some(path.to_owned());
        } else if !part.is_empty() {
            match part.strip_prefix("sslmode=") {
                // libpq's names for what `require` does here: the
                // certificate and the name are always verified.
                Some("verify-full" | "verify-ca") => {
                    ssl_mode = Some("require".to_owned());
                    rest.push("sslmode=require");
                }
                Some(mode) => {
                    ssl_mode = Some(mode.to_owned());
                    rest.push(part);
                }
                None => rest.push(part),
            }
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    let namespace = namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    crate::remote::check_namespace("PostgreSQL", &namespace)?;
    Ok(SpecExtras {
        url,
        namespace,
        ca_file,
        ssl_mode,
    })
}

/// The TLS connector a spec asks for: `sslmode=require` gives one
/// (trusting `sslrootcert` or the public roots); no TLS is refused for a
/// TCP host off this machine unless `sslmode=disable` says so.
fn choose_tls(
    ssl_mode: Option<&str>,
    ca_file: Option<&str>,
    config: &postgres::Config,
) -> Result<Option<crate::postgres_tls::RustlsConnect>> {
    let tls = match (ssl_mode, ca_file) {
        (Some("require"), _) => {
            let ca = ca_file
                .map(|path| {
                    std::fs::read(path)
                        .map_err(|e| Error::InvalidArgument(format!("sslrootcert {path}: {e}")))
                })
                .transpose()?;
            Some(crate::postgres_tls::RustlsConnect::new(ca.as_deref())?)
        }
        (_, Some(_)) => {
            return Err(Error::InvalidArgument(
                "sslrootcert is given without sslmode=require".into(),
            ))
        }
        _ => None,
    };
    if tls.is_none() && ssl_mode != Some("disable") {
        let remote: Vec<&str> = config
            .get_hosts()
            .iter()
            .filter_map(|h| match h {
                postgres::config::Host::Tcp(name) if !crate::remote::is_local(name) => {
                    Some(name.as_str())
                }
                _ => None,
            })
            .collect();
        if !remote.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "PostgreSQL store on {}: a connection off this machine must use TLS: add \
                 sslmode=require (and sslrootcert=CA.pem for a private CA), or \
                 sslmode=disable to send it in the clear deliberately",
                remote.join(",")
            )));
        }
    }
    Ok(tls)
}

/// Where the store is, without the password.
fn describe(config: &postgres::Config, namespace: &str) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    format!(
        "PostgreSQL store {}{}{}/{} namespace {namespace}",
        config
            .get_user()
            .map(|u| format!("{u}@"))
            .unwrap_or_default(),
        if hosts.is_empty() {
            "localhost".to_owned()
        } else {
            hosts.join(",")
        },
        if ports.is_empty() {
            String::new()
        } else {
            format!(":{}", ports.join(","))
        },
        config.get_dbname().unwrap_or("")
    )
}

/// Maps a PostgreSQL error met on the store `label`.
fn from_pg(label: &str, e: &postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let text = format!("{label}: {}: {}", db.severity(), db.message());
        if *code == SqlState::DISK_FULL
            || *code == SqlState::INSUFFICIENT_RESOURCES
            || *code == SqlState::OUT_OF_MEMORY
        {
            return Error::StoreFull(format!("{text} (the database server is out of space)"));
        }
        if *code == SqlState::PROGRAM_LIMIT_EXCEEDED {
            return Error::InvalidArgument(text);
        }
        if *code == SqlState::UNDEFINED_TABLE {
            return Error::StoreCorrupt(format!("{text} (the store's table is gone)"));
        }
        return Error::StoreIo(text);
    }
    // Connection-level errors: the chain holds the useful part.
    let text = sesame_core::error::chain(e);
    if e.is_closed() {
        // The connection broke: the server restarted or the network
        // failed; a commit in flight may or may not have been applied.
        return Error::StoreUnavailable(format!("{label}: {text}"));
    }
    Error::StoreIo(format!("{label}: {text}"))
}

fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

impl PostgresStore {
    /// Opens (creating it if absent) the store that the URL `spec` names:
    /// `postgres://[user[:password]@]host[:port]/dbname[?param=value&...]`,
    /// where a parameter `namespace=NAME` picks the store inside the
    /// database (default [`DEFAULT_NAMESPACE`]) and every other parameter
    /// goes to the PostgreSQL driver (`host=/run/postgresql` for a Unix
    /// socket, `connect_timeout=5`, ...).
    ///
    /// A namespace whose marker is of another format, or whose table exists
    /// without a marker, gives [`Error::StoreForeign`] and is left
    /// untouched; a database that cannot be reached gives
    /// [`Error::StoreIo`].
    pub fn open(spec: &str) -> Result<Self> {
        let SpecExtras {
            url,
            namespace,
            ca_file,
            ssl_mode,
        } = split_spec(spec)?;
        let mut config = postgres::Config::from_str(&url).map_err(|e| {
            Error::InvalidArgument(format!("PostgreSQL store URL is not understood: {e}"))
        })?;
        let tls = choose_tls(ssl_mode.as_deref(), ca_file.as_deref(), &config)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("sesame");
        }
        let label = describe(&config, &namespace);
        let table = format!("sesame_kv_{namespace}");
        let store = PostgresStore {
            config,
            tls,
            namespace,
            table,
            label,
            pool: Mutex::new(Pool::default()),
            freed: Condvar::new(),
            io: IoCounter::default(),
        };
        store.init()?;
        Ok(store)
    }

    /// The store's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Removes the store: its table and its marker. Other namespaces of the
    /// database are untouched. For tests and for tearing down a deployment.
    pub fn destroy(self) -> Result<()> {
        let mut client = self.connect_raw()?;
        let sql = format!(
            "DROP TABLE IF EXISTS {table}; DELETE FROM {META_TABLE} WHERE namespace = '{ns}'",
            table = self.table,
            ns = self.namespace
        );
        client
            .batch_execute(&sql)
            .map_err(|e| from_pg(&self.label, &e))
    }

    fn connect_raw(&self) -> Result<Client> {
        match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        }
        .map_err(|e| from_pg(&self.label, &e))
    }

    /// Creates the marker table, and the namespace's table and marker if
    /// they are absent; refuses a namespace that is not ours.
    fn init(&self) -> Result<()> {
        let map = |e: postgres::Error| from_pg(&self.label, &e);
        let mut client = self.connect_raw()?;
        let mut txn = client.transaction().map_err(map)?;
        txn.execute("SELECT pg_advisory_xact_lock($1)", &[&INIT_LOCK])
            .map_err(map)?;
        txn.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {META_TABLE} \
             (namespace text PRIMARY KEY, format text NOT NULL)"
        ))
        .map_err(map)?;
        let marker = txn
            .query_opt(
                &format!("SELECT format FROM {META_TABLE} WHERE namespace = $1"),
                &[&self.namespace],
            )
            .map_err(|e| {
                if e.code() == Some(&SqlState::UNDEFINED_COLUMN) {
                    Error::StoreForeign(format!(
                        "{}: table {META_TABLE} exists with another layout; it belongs to \
                         another program and was left untouched",
                        self.label
                    ))
                } else {
                    map(e)
                }
            })?;
        let table_exists: bool = txn
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&self.table])
            .map_err(map)?
            .get(0);
        match marker {
            Some(row) => {
                let format: String = row.get(0);
                if format != FORMAT_VERSION {
                    return Err(Error::StoreForeign(format!(
                        "{}: Sesame store format {:?} is not the one this build reads \
                         ({FORMAT_VERSION})",
                        self.label,
                        format.chars().take(64).collect::<String>()
                    )));
                }
                if !table_exists {
                    return Err(Error::StoreCorrupt(format!(
                        "{}: the Sesame marker is present but table {} is missing",
                        self.label, self.table
                    )));
                }
            }
            None if table_exists => {
                return Err(Error::StoreForeign(format!(
                    "{}: table {} exists without the Sesame marker; left untouched",
                    self.label, self.table
                )))
            }
            None => {
                txn.batch_execute(&format!(
                    "CREATE TABLE {} (key bytea PRIMARY KEY, value bytea NOT NULL)",
                    self.table
                ))
                .map_err(map)?;
                txn.execute(
                    &format!("INSERT INTO {META_TABLE} (namespace, format) VALUES ($1, $2)"),
                    &[&self.namespace, &FORMAT_VERSION],
                )
                .map_err(map)?;
            }
        }
        txn.commit().map_err(map)?;
        // The first connection joins the pool.
        let conn = self.prepare(client)?;
        let mut pool = self.lock_pool();
        pool.open += 1;
        pool.idle.push(conn);
        Ok(())
    }

    fn prepare(&self, mut client: Client) -> Result<Conn> {
        // The statements, in `Conn`'s order; `{t}` is the table.
        const SQL: [&str; 10] = [
            "SELECT value FROM {t} WHERE key = $1",
            "SELECT key, value FROM {t} WHERE key = ANY($1)",
            "SELECT key, value FROM {t} WHERE key >= $1 AND key < $2 ORDER BY key",
            "SELECT key, value FROM {t} WHERE key >= $1 ORDER BY key",
            "INSERT INTO {t} (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            "DELETE FROM {t} WHERE key = ANY($1)",
            "SELECT key, value FROM {t} WHERE key = ANY($1) FOR UPDATE",
            "UPDATE {t} SET value = $2 WHERE key = $1 AND value = $3",
            "INSERT INTO {t} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            "SELECT pg_advisory_xact_lock(l) FROM unnest($1::int8[]) AS l",
        ];
        let mut prepared = Vec::with_capacity(SQL.len());
        for sql in SQL {
            let sql = sql.replace("{t}", &self.table);
            prepared.push(client.prepare(&sql).map_err(|e| from_pg(&self.label, &e))?);
        }
        let Ok(
            [get, get_many, scan, scan_from, upsert, delete, get_for_update, swap, insert_new, lock_keys],
        ) = <[Statement; 10]>::try_from(prepared)
        else {
            unreachable!("one statement is prepared per SQL text")
        };
        Ok(Conn {
            client,
            get,
            get_many,
            scan,
            scan_from,
            writes: Stmts {
                upsert,
                delete,
                get_for_update,
                swap,
                insert_new,
                lock_keys,
            },
        })
    }

    // No code panics while it holds the pool lock, short of running out of
    // memory; a poisoned lock is safe to take over.
    fn lock_pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes an idle connection, opens one if fewer than the maximum are
    /// open, or waits for one.
    fn take(&self) -> Result<Conn> {
        let mut pool = self.lock_pool();
        loop {
            if let Some(conn) = pool.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(conn);
                }
                pool.open -= 1;
                continue;
            }
            if pool.open < MAX_CONNECTIONS {
                pool.open += 1;
                drop(pool);
                let made = self.connect_raw().and_then(|c| self.prepare(c));
                if made.is_err() {
                    self.lock_pool().open -= 1;
                    self.freed.notify_one();
                }
                return made;
            }
            pool = self
                .freed
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Returns a connection to the pool, or drops it if the server closed
    /// it.
    fn give_back(&self, conn: Conn) {
        let mut pool = self.lock_pool();
        if conn.client.is_closed() {
            pool.open -= 1;
        } else {
            pool.idle.push(conn);
        }
        drop(pool);
        self.freed.notify_one();
    }

    /// Drops a connection that failed below SQL (reset, closed), and the
    /// idle ones too: when the server went away, they are dead as well.
    fn discard(&self, conn: Conn) {
        let mut pool = self.lock_pool();
        let mut idle = std::mem::take(&mut pool.idle);
        pool.open -= 1 + idle.len();
        drop(pool);
        idle.push(conn);
        close_off_runtime(idle);
        self.freed.notify_all();
    }

    /// Runs the read `f` on a pooled connection; after a connection
    /// failure (the database restarted, the connection was closed) it runs
    /// once more on a fresh connection.
    fn with_conn<T>(
        &self,
        f: impl Fn(&mut Conn) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut attempt = 0;
        loop {
            let mut conn = self.take()?;
            match f(&mut conn) {
                Ok(v) => {
                    self.give_back(conn);
                    return Ok(v);
                }
                Err(e) if e.as_db_error().is_none() => {
                    self.discard(conn);
                    if attempt > 0 {
                        return Err(from_pg(&self.label, &e));
                    }
                    attempt += 1;
                }
                Err(e) => {
                    self.give_back(conn);
                    return Err(from_pg(&self.label, &e));
                }
            }
        }
    }
}

/// The advisory lock that serialises conditional writes expecting `key`
/// of the namespace `namespace`: a stable 64-bit FNV-1a hash of both (a
/// collision only makes two unrelated writes wait for each other).
fn condition_lock(namespace: &str, key: &[u8]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in namespace.as_bytes().iter().chain(&[0]).chain(key) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(h.to_ne_bytes())
}

/// One conditional batch of a group, its writes collapsed ([`collapse`]).
type Collapsed<'a> = (
    &'a [(&'a [u8], Option<&'a [u8]>)],
    BTreeMap<&'a [u8], Option<&'a [u8]>>,
);

/// Applies each batch of `group` in one transaction if every key of its
/// `expect` holds its value (`None`: absent), after the batches before it;
/// one commit for all. A batch of several whose condition fails is rolled
/// back to a savepoint taken before it; a single batch rolls back the
/// transaction. An SQL error anywhere rolls everything back.
fn write_collapsed(
    conn: &mut Conn,
    namespace: &str,
    group: &[Collapsed<'_>],
) -> std::result::Result<Vec<bool>, postgres::Error> {
    let Conn {
        client,
        writes: stmts,
        ..
    } = conn;
    let mut txn = client.transaction()?;
    if let [(expect, last)] = group {
        if !apply_collapsed(&mut txn, stmts, namespace, expect, last)? {
            txn.rollback()?;
            return Ok(vec![false]);
        }
        txn.commit()?;
        return Ok(vec![true]);
    }
    let mut applied = Vec::with_capacity(group.len());
    for (expect, last) in group {
        let mut savepoint = txn.transaction()?;
        let holds = apply_collapsed(&mut savepoint, stmts, namespace, expect, last)?;
        if holds {
            savepoint.commit()?;
        } else {
            savepoint.rollback()?;
        }
        applied.push(holds);
    }
    txn.commit()?;
    Ok(applied)
}

/// The prepared statements a conditional write runs.
struct Stmts {
    upsert: Statement,
    delete: Statement,
    /// The rows of keys, locked until the transaction ends.
    get_for_update: Statement,
    /// Sets `$1` to `$2` where it holds `$3`: one row, or none.
    swap: Statement,
    /// Inserts `$1` = `$2` where `$1` is absent: one row, or none.
    insert_new: Statement,
    /// Advisory locks, one per `int8` of `$1`, until the transaction ends.
    lock_keys: Statement,
}

/// Writes `last` inside `txn` if every key of `expect` holds its value;
/// `Ok(false)` when one does not (the caller rolls back what was written).
fn apply_collapsed(
    txn: &mut postgres::Transaction<'_>,
    conn: &Stmts,
    namespace: &str,
    expect: &[(&[u8], Option<&[u8]>)],
    last: &BTreeMap<&[u8], Option<&[u8]>>,
) -> std::result::Result<bool, postgres::Error> {
    // A condition on a key the batch puts is the put itself, in one
    // statement that checks and writes: an `UPDATE ... WHERE value = old`
    // (which, under READ COMMITTED, waits for a writer of the row and
    // checks the row as it left it) or an `INSERT ... ON CONFLICT DO
    // NOTHING`; either touches one row or none. The server's commit token
    // is such a key, so its commits cost no statement more than before.
    let mut done: Vec<&[u8]> = Vec::new();
    let mut rest: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    for &(key, want) in expect {
        let Some(Some(new)) = last.get(key) else {
            rest.push((key, want));
            continue;
        };
        let rows = match want {
            Some(old) => txn.execute(&conn.swap, &[&key, new, &old])?,
            None => txn.execute(&conn.insert_new, &[&key, new])?,
        };
        if rows != 1 {
            return Ok(false);
        }
        done.push(key);
    }
    let expect = rest.as_slice();
    if !expect.is_empty() {
        // A key expected present is locked with its row (`FOR UPDATE`
        // waits for a writer of the row, then reads the row as that
        // writer left it). A row lock cannot hold a key that is absent, so
        // keys expected absent are locked by advisory locks first, in a
        // fixed order; under READ COMMITTED the read that follows sees
        // every write committed before they were granted.
        let mut locks: Vec<i64> = expect
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| condition_lock(namespace, k))
            .collect();
        if !locks.is_empty() {
            locks.sort_unstable();
            locks.dedup();
            txn.execute(&conn.lock_keys, &[&locks])?;
        }
        let keys: Vec<&[u8]> = expect.iter().map(|(k, _)| *k).collect();
        let rows = txn.query(&conn.get_for_update, &[&keys])?;
        let mut held: HashMap<Vec<u8>, Vec<u8>> = HashMap::with_capacity(rows.len());
        for row in rows {
            held.insert(row.get(0), row.get(1));
        }
        if expect
            .iter()
            .any(|(k, want)| held.get(*k).map(Vec::as_slice) != *want)
        {
            return Ok(false);
        }
    }
    let deletes: Vec<&[u8]> = last
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| *k)
        .collect();
    for chunk in deletes.chunks(CHUNK_ROWS) {
        txn.execute(&conn.delete, &[&chunk])?;
    }
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut values: Vec<&[u8]> = Vec::new();
    let mut bytes = 0usize;
    for (k, v) in last {
        let Some(v) = v else { continue };
        if done.contains(k) {
            continue;
        }
        keys.push(k);
        values.push(v);
        bytes += k.len() + v.len();
        if keys.len() >= CHUNK_ROWS || bytes >= CHUNK_BYTES {
            txn.execute(&conn.upsert, &[&keys, &values])?;
            keys.clear();
            values.clear();
            bytes = 0;
        }
    }
    if !keys.is_empty() {
        txn.execute(&conn.upsert, &[&keys, &values])?;
    }
    Ok(true)
}

/// Closes `conns` on a thread of their own, and waits for it. The
/// blocking `postgres::Client` runs a runtime of its own to close itself,
/// which panics (and, inside a destructor, aborts the process) when the
/// caller is itself a thread of an async runtime: as when a server drops
/// its store at shutdown.
fn close_off_runtime(conns: Vec<Conn>) {
    if conns.is_empty() {
        return;
    }
    let closer = std::thread::Builder::new()
        .name("sesame-pg-close".into())
        .spawn(move || drop(conns));
    // Without a thread (out of resources) the connections were dropped
    // with the failed spawn's closure; nothing more can be done here.
    if let Ok(handle) = closer {
        let _ = handle.join();
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.lock_pool().idle);
        close_off_runtime(idle);
    }
}

impl Store for PostgresStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = self.with_conn(|c| {
            let row = c.client.query_opt(&c.get, &[&key])?;
            Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
        })?;
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.with_conn(|c| c.client.query(&c.get_many, &[&keys]))?;
        let mut found: HashMap<Vec<u8>, Vec<u8>> = HashMap::with_capacity(rows.len());
        for row in rows {
            found.insert(row.get(0), row.get(1));
        }
        let values: Vec<Option<Vec<u8>>> = keys.iter().map(|k| found.get(*k).cloned()).collect();
        crate::counted_reads(&self.io, values)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        crate::write_unconditional(self, &batch)
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        if batch.is_empty() && expect.is_empty() {
            return Ok(true);
        }
        crate::write_if_alone(self, expect, batch)
    }

    /// One transaction and one commit for the whole group, each batch
    /// between savepoints ([`write_collapsed`]).
    fn write_if_group(&self, group: &[Conditional<'_>]) -> Result<Vec<bool>> {
        let collapsed: Vec<Collapsed<'_>> = group
            .iter()
            .map(|(expect, batch)| (*expect, collapse(batch)))
            .collect();
        let mut attempt = 0;
        let applied = loop {
            let mut conn = self.take()?;
            let outcome = write_collapsed(&mut conn, &self.namespace, &collapsed);
            match outcome {
                Ok(applied) => {
                    self.give_back(conn);
                    break applied;
                }
                Err(e) if retryable(&e) && attempt < RETRIES => {
                    self.give_back(conn);
                    attempt += 1;
                }
                // A failure below SQL: whether the commit happened is
                // unknown, so the error goes to the caller (whose retry
                // is idempotent); the connection goes.
                Err(e) if e.as_db_error().is_none() => {
                    self.discard(conn);
                    return Err(from_pg(&self.label, &e));
                }
                Err(e) => {
                    self.give_back(conn);
                    return Err(from_pg(&self.label, &e));
                }
            }
        };
        crate::counted_group(&self.io, group, applied)
    }

    /// PostgreSQL commits several transactions at once (and groups their
    /// WAL flushes itself): a few groups in flight keep it busy.
    fn commit_groups(&self) -> usize {
        4
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = prefix_end(prefix);
        let rows = self.with_conn(|c| match &end {
            Some(end) => c.client.query(&c.scan, &[&prefix, &end.as_slice()]),
            None => c.client.query(&c.scan_from, &[&prefix]),
        })?;
        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
            rows.into_iter().map(|r| (r.get(0), r.get(1))).collect();
        crate::counted_scan(&self.io, pairs)
    }

    fn io_counts(&self) -> IoCounts {
        self.io.counts()
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_is_split_off_the_url() {
        let (url, ns) =
            split_namespace("postgres://u@h/db?namespace=abc&connect_timeout=3").unwrap();
        assert_eq!(
            (url.as_str(), ns.as_str()),
            ("postgres://u@h/db?connect_timeout=3", "abc")
        );
        let (url, ns) = split_namespace("postgres://u@h/db").unwrap();
        assert_eq!(
            (url.as_str(), ns.as_str()),
            ("postgres://u@h/db", "default")
        );
        let (url, ns) = split_namespace("postgres://u@h/db?namespace=x_1").unwrap();
        assert_eq!((url.as_str(), ns.as_str()), ("postgres://u@h/db", "x_1"));
        for bad in ["", "A", "a-b", "a;drop", &"a".repeat(41)] {
            let spec = format!("postgres://h/db?namespace={bad}");
            assert!(
                matches!(split_namespace(&spec), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
        }
    }

    /// Which specs get TLS, and which are refused before any connection.
    #[test]
    fn tls_is_required_off_this_machine() {
        let tls = |spec: &str| {
            let extras = split_spec(spec).unwrap();
            let config = postgres::Config::from_str(&extras.url).unwrap();
            choose_tls(
                extras.ssl_mode.as_deref(),
                extras.ca_file.as_deref(),
                &config,
            )
            .map(|t| t.is_some())
        };
        for local in [
            "postgres://u@localhost/db",
            "postgres://u@127.0.0.1:5432/db",
            "postgres://u@[::1]/db",
            "postgres://u@%2Frun%2Fpostgresql/db",
        ] {
            assert!(!tls(local).unwrap(), "{local}");
        }
        let err = tls("postgres://u@db.example.com/db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("must use TLS") && err.contains("db.example.com"),
            "{err}"
        );
        assert!(!tls("postgres://u@db.example.com/db?sslmode=disable").unwrap());
        assert!(tls("postgres://u@db.example.com/db?sslmode=require").unwrap());
        // libpq's names for full verification mean the same here.
        let extras = split_spec("postgres://u@h/db?sslmode=verify-full").unwrap();
        assert_eq!(extras.url, "postgres://u@h/db?sslmode=require");
        assert!(tls("postgres://u@h/db?sslmode=verify-full").unwrap());
        // A CA file: read, and only with TLS.
        let err = tls("postgres://u@h/db?sslmode=require&sslrootcert=/no/such/ca.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/no/such/ca.pem"), "{err}");
        let err = tls("postgres://u@h/db?sslrootcert=/tmp/ca.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("without sslmode=require"), "{err}");
        let dir = std::env::temp_dir().join(format!("sesame-pg-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("ca.pem");
        std::fs::write(&not_pem, "not a certificate").unwrap();
        let err = tls(&format!(
            "postgres://u@h/db?sslmode=require&sslrootcert={}",
            not_pem.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("no certificate"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_label_hides_the_password() {
        let config =
            postgres::Config::from_str("postgres://me:secret@db.example:5433/idx").unwrap();
        let label = describe(&config, "ns");
        assert!(!label.contains("secret"), "{label}");
        assert!(label.contains("me@db.example:5433/idx"), "{label}");
    }

    #[test]
    fn an_unreachable_server_is_a_store_io_error() {
        // Port 1 on loopback: nothing listens there.
        let err =
            PostgresStore::open("postgres://nobody@127.0.0.1:1/db?connect_timeout=2").unwrap_err();
        assert!(
            matches!(&err, Error::StoreIo(m) if m.contains("127.0.0.1")),
            "{err:?}"
        );
    }
}
