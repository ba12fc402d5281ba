//! `sesame sql` against a real PostgreSQL client (the `postgres` crate):
//! an in-process server on 127.0.0.1 port 0 over a fresh profile, the
//! table of `tests/sql/schema.toml`, rows loaded through INSERT, and each
//! answer compared with one computed from the loaded rows.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;

use postgres::{Client, NoTls, SimpleQueryMessage};
use sesame_client::table::{Schema, Table};
use sesame_client::{insecure, Profile};
use sesame_core::Params;

const PASSWORD: &str = "correct horse";

const SCHEMA: &str = r#"
key = "id"
nulls = [""]
[fields.id]
type = "integer"
index = ["equality"]
[fields.name]
type = "string"
index = ["equality", "prefix"]
prefix_max = 4
[fields.city]
type = "string"
index = ["equality"]
[fields.qty]
type = "integer"
index = ["range"]
bits = 16
[fields.ts]
type = "timestamp"
index = ["range"]
[fields.note]
type = "string"
"#;

/// (id, name, city, qty, note)
fn rows() -> Vec<(i64, String, Option<&'static str>, i64, String)> {
    let cities = [Some("sf"), Some("la"), None, Some("ny")];
    (1..=40)
        .map(|i| {
            (
                i,
                format!("{}{i}", if i % 3 == 0 { "ann" } else { "bob" }),
                cities[(i % 4) as usize],
                (i * 7) % 23,
                format!("n{i}"),
            )
        })
        .collect()
}

/// Starts a server over a fresh profile holding table `t` with [`rows`].
fn server() -> (SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = Profile::create_with_kdf(
        dir.path().join("p"),
        "pass",
        "fast",
        &Params::new(),
        insecure::fast_kdf(),
    )
    .expect("profile");
    Table::create(&profile, "t", Schema::from_toml(SCHEMA).expect("schema")).expect("table");
    Table::create(&profile, "u", Schema::from_toml(SCHEMA).expect("schema")).expect("table");
    let (tx, rx) = mpsc::channel();
    let config = sesame_sql::Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        password: PASSWORD.into(),
        tls: None,
        max_connections: 128,
    };
    std::thread::spawn(move || {
        let _ = sesame_sql::run(profile, config, |addr| {
            let _ = tx.send(addr);
        });
    });
    let addr = rx.recv().expect("the server starts");
    let mut c = connect(addr, PASSWORD).expect("connect");
    let values: Vec<String> = rows()
        .iter()
        .map(|(id, name, city, qty, note)| {
            format!(
                "({id}, '{name}', {}, {qty}, '{note}')",
                city.map_or("NULL".into(), |c| format!("'{c}'"))
            )
        })
        .collect();
    let n = c
        .execute(
            &format!(
                "INSERT INTO t (id, name, city, qty, note) VALUES {}",
                values.join(", ")
            ),
            &[],
        )
        .expect("insert");
    assert_eq!(n, 40);
    (addr, dir)
}

fn connect(addr: SocketAddr, password: &str) -> Result<Client, postgres::Error> {
    Client::connect(
        &format!(
            "host={} port={} user=app dbname=sesame password='{password}'",
            addr.ip(),
            addr.port()
        ),
        NoTls,
    )
}

/// The text cells of a simple query's rows.
fn cells(c: &mut Client, sql: &str) -> Vec<Vec<Option<String>>> {
    c.simple_query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}

fn code(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_default()
}

/// The first column of `sql`'s rows, as integers (extended protocol).
fn ids(c: &mut Client, sql: &str) -> Vec<i64> {
    c.query(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Runs `sql`, which must be refused as unsupported (SQLSTATE `0A000`,
/// the connection kept); its message.
fn refused(c: &mut Client, sql: &str) -> String {
    let e = c.simple_query(sql).map(drop).expect_err(sql);
    assert_eq!(code(&e), "0A000", "{sql}: {e}");
    e.as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default()
}

#[test]
fn answers_equal_those_computed_from_the_rows() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let all = rows();

    // Equality through the keyword index, range through the range index.
    let got: Vec<i64> = c
        .query("SELECT id FROM t WHERE city = 'sf' ORDER BY id", &[])
        .expect("select")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let want: Vec<i64> = all
        .iter()
        .filter(|r| r.2 == Some("sf"))
        .map(|r| r.0)
        .collect();
    assert_eq!(got, want);

    let got = cells(
        &mut c,
        "SELECT id, qty FROM t WHERE qty BETWEEN 5 AND 12 AND (name LIKE 'ann%' OR id IN (1, 2, 4)) \
         ORDER BY qty DESC, id LIMIT 5 OFFSET 1",
    );
    let mut want: Vec<(i64, i64)> = all
        .iter()
        .filter(|r| (5..=12).contains(&r.3) && (r.1.starts_with("ann") || [1, 2, 4].contains(&r.0)))
        .map(|r| (r.0, r.3))
        .collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let want: Vec<Vec<Option<String>>> = want
        .into_iter()
        .skip(1)
        .take(5)
        .map(|(i, q)| vec![Some(i.to_string()), Some(q.to_string())])
        .collect();
    assert_eq!(got, want);

    // Aggregates and GROUP BY.
    let got = cells(
        &mut c,
        "SELECT count(*), count(city), min(qty), max(qty), sum(qty) FROM t WHERE qty >= 10",
    );
    let m: Vec<_> = all.iter().filter(|r| r.3 >= 10).collect();
    let want = vec![vec![
        Some(m.len().to_string()),
        Some(m.iter().filter(|r| r.2.is_some()).count().to_string()),
        m.iter().map(|r| r.3).min().map(|v| v.to_string()),
        m.iter().map(|r| r.3).max().map(|v| v.to_string()),
        Some(m.iter().map(|r| r.3).sum::<i64>().to_string()),
    ]];
    assert_eq!(got, want);
    let got = cells(
        &mut c,
        "SELECT city, count(*) FROM t WHERE qty < 100 GROUP BY city ORDER BY city",
    );
    let mut groups = std::collections::BTreeMap::new();
    for r in &all {
        *groups.entry(r.2).or_insert(0) += 1;
    }
    let mut want: Vec<Vec<Option<String>>> = groups
        .iter()
        .filter(|(k, _)| k.is_some())
        .map(|(k, n)| vec![k.map(str::to_owned), Some(n.to_string())])
        .collect();
    want.push(vec![None, Some(groups[&None].to_string())]);
    assert_eq!(got, want);

    // Parameters through the extended protocol.
    let got: Vec<i64> = c
        .query("SELECT qty FROM t WHERE id = $1", &[&7i64])
        .expect("bound select")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(got, vec![(7 * 7) % 23]);

    // UPDATE of a non-key field, DELETE, then the count.
    assert_eq!(
        c.execute("UPDATE t SET note = 'changed' WHERE city = 'la'", &[])
            .expect("update"),
        all.iter().filter(|r| r.2 == Some("la")).count() as u64
    );
    let notes = cells(&mut c, "SELECT DISTINCT note FROM t WHERE city = 'la'");
    assert_eq!(notes, vec![vec![Some("changed".to_owned())]]);
    let gone = c
        .execute("DELETE FROM t WHERE qty < 5", &[])
        .expect("delete");
    assert_eq!(gone, all.iter().filter(|r| r.3 < 5).count() as u64);
    assert_eq!(
        cells(&mut c, "SELECT count(*) FROM t"),
        vec![vec![Some((40 - gone).to_string())]]
    );
}

#[test]
fn a_predicate_no_index_answers_is_refused_until_the_session_allows_a_scan() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let message = refused(&mut c, "SELECT id FROM t WHERE note = 'n3'");
    assert!(message.contains("note"), "{message}");
    assert!(message.contains("equality index"), "{message}");
    refused(&mut c, "SELECT id FROM t WHERE note IS NULL");

    c.batch_execute("SET sesame.allow_scan = on").expect("set");
    assert_eq!(
        cells(&mut c, "SELECT id FROM t WHERE note = 'n3'"),
        vec![vec![Some("3".to_owned())]]
    );
    assert_eq!(
        cells(&mut c, "SELECT count(*) FROM t WHERE note IS NULL"),
        vec![vec![Some("0".to_owned())]]
    );
    let plan: Vec<String> = cells(&mut c, "EXPLAIN SELECT * FROM t WHERE note = 'n3'")
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    assert!(
        plan.iter().any(|l| l.contains("SCAN")),
        "{}",
        plan.join("\n")
    );
}

/// `IS NULL` on an equality or prefix field is answered by the field's
/// null keyword in the keyword index (written by INSERT and UPDATE,
/// removed by DELETE), never by a scan; on a field with neither it is
/// refused.
#[test]
fn is_null_is_answered_by_the_null_keyword() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let all = rows();
    let null_city: Vec<i64> = all.iter().filter(|r| r.2.is_none()).map(|r| r.0).collect();
    assert!(!null_city.is_empty());
    assert_eq!(
        ids(&mut c, "SELECT id FROM t WHERE city IS NULL ORDER BY id"),
        null_city
    );
    let want: Vec<i64> = all
        .iter()
        .filter(|r| r.2.is_none() || r.1.starts_with("ann"))
        .map(|r| r.0)
        .collect();
    assert_eq!(
        ids(
            &mut c,
            "SELECT id FROM t WHERE city IS NULL OR name LIKE 'ann%' ORDER BY id"
        ),
        want
    );
    // Prefix and equality field, never null here.
    assert!(ids(&mut c, "SELECT id FROM t WHERE name IS NULL").is_empty());
    assert_eq!(
        cells(&mut c, "SELECT count(*) FROM t WHERE city IS NULL"),
        vec![vec![Some(null_city.len().to_string())]]
    );
    let plan: Vec<String> = cells(&mut c, "EXPLAIN SELECT * FROM t WHERE city IS NULL")
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    let text = plan.join("\n");
    assert!(text.contains("null keyword"), "{text}");
    assert!(!text.contains("SCAN"), "{text}");
    // A range-only field has no null keyword: refused, naming the index
    // that would answer.
    let message = refused(&mut c, "SELECT id FROM t WHERE qty IS NULL");
    assert!(message.contains("equality index"), "{message}");
    // UPDATE to NULL gives the record its null keyword (and takes its
    // value's away); DELETE removes it.
    assert_eq!(
        c.execute("UPDATE t SET city = NULL WHERE id = 1", &[])
            .expect("update"),
        1
    );
    let mut want = null_city.clone();
    want.insert(0, 1);
    assert_eq!(
        ids(&mut c, "SELECT id FROM t WHERE city IS NULL ORDER BY id"),
        want
    );
    let was = all
        .iter()
        .find(|r| r.0 == 1)
        .and_then(|r| r.2)
        .expect("a city");
    assert!(!ids(&mut c, &format!("SELECT id FROM t WHERE city = '{was}'")).contains(&1));
    assert_eq!(
        c.execute("DELETE FROM t WHERE city IS NULL", &[])
            .expect("delete"),
        want.len() as u64
    );
    assert!(ids(&mut c, "SELECT id FROM t WHERE city IS NULL").is_empty());
    assert_eq!(
        cells(&mut c, "SELECT count(*) FROM t"),
        vec![vec![Some((40 - want.len()).to_string())]]
    );
}

/// `IS NOT NULL` on an equality field without a range index is the
/// complement of its null keyword's records within the table's catalog
/// (the client's list of its records): answered, never a scan; on a
/// stored-only field it is refused, naming the indexes that would answer.
#[test]
fn is_not_null_is_the_catalog_but_the_null_keyword() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let all = rows();
    let with_city: Vec<i64> = all.iter().filter(|r| r.2.is_some()).map(|r| r.0).collect();
    assert_eq!(
        ids(
            &mut c,
            "SELECT id FROM t WHERE city IS NOT NULL ORDER BY id"
        ),
        with_city
    );
    let want: Vec<i64> = all
        .iter()
        .filter(|r| r.2.is_some() && r.3 < 10)
        .map(|r| r.0)
        .collect();
    assert_eq!(
        ids(
            &mut c,
            "SELECT id FROM t WHERE city IS NOT NULL AND qty < 10 ORDER BY id"
        ),
        want
    );
    assert_eq!(
        cells(&mut c, "SELECT count(*) FROM t WHERE city IS NOT NULL"),
        vec![vec![Some(with_city.len().to_string())]]
    );
    let text = cells(&mut c, "EXPLAIN SELECT * FROM t WHERE city IS NOT NULL")
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("null keyword"), "{text}");
    assert!(text.contains("catalog"), "{text}");
    assert!(!text.contains("SCAN"), "{text}");
    let message = refused(&mut c, "SELECT id FROM t WHERE note IS NOT NULL");
    assert!(
        message.contains("equality index") && message.contains("range index"),
        "{message}"
    );
}

#[test]
fn explain_names_the_index_and_what_the_server_learns() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let plan: Vec<String> = cells(
        &mut c,
        "EXPLAIN SELECT * FROM t WHERE qty > 3 AND city = 'sf'",
    )
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .collect();
    let text = plan.join("\n");
    assert!(text.contains("answered by: range index"), "{text}");
    assert!(text.contains("answered by: keyword index"), "{text}");
    assert!(text.contains("the server learns:"), "{text}");
    assert!(!text.contains("SCAN"), "{text}");
}

#[test]
fn a_wrong_password_is_refused_and_bad_input_keeps_the_connection() {
    let (addr, _dir) = server();
    let e = connect(addr, "wrong")
        .map(drop)
        .expect_err("wrong password");
    assert_eq!(code(&e), "28P01", "{e}");

    let mut c = connect(addr, PASSWORD).expect("connect");
    for (sql, want) in [
        ("SELEC id FROM t", "42601"),
        ("SELECT id FROM t WHERE", "42601"),
        ("SELECT nope FROM t", "42703"),
        ("SELECT id FROM nowhere", "42P01"),
        ("CREATE INDEX i ON t (id)", "0A000"),
        ("SELECT id FROM t WHERE id = 'x'", "22P02"),
    ] {
        let e = c.simple_query(sql).map(drop).expect_err(sql);
        assert_eq!(code(&e), want, "{sql}: {e}");
        // Still usable.
        assert_eq!(cells(&mut c, "SELECT 1"), vec![vec![Some("1".to_owned())]]);
    }
    // A statement over the 1 MiB this front end reads: refused, and the
    // connection stays usable.
    let long = format!("SELECT id FROM t WHERE name = '{}'", "x".repeat(2 << 20));
    let e = c.simple_query(&long).map(drop).expect_err("too long");
    assert_eq!(code(&e), "54000", "{e}");
    assert_eq!(cells(&mut c, "SELECT 1"), vec![vec![Some("1".to_owned())]]);
    let e = c
        .simple_query("SELECT id FROM t WHERE id = 1 ORDER")
        .map(drop)
        .expect_err("syntax");
    let position = e.as_db_error().and_then(|d| d.position().cloned());
    assert!(position.is_some(), "a syntax error has a position: {e}");
}

#[test]
fn a_garbage_start_up_packet_closes_only_its_connection() {
    let (addr, _dir) = server();
    let mut good = connect(addr, PASSWORD).expect("connect");
    let mut raw = std::net::TcpStream::connect(addr).expect("tcp");
    raw.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .expect("timeout");
    // A length of 2 GiB and a protocol no server speaks.
    raw.write_all(&[0x7f, 0xff, 0xff, 0xff, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3])
        .expect("write");
    let mut buf = [0u8; 64];
    // The server closes it (end of stream or a reset), never answers rows.
    match raw.read(&mut buf) {
        Ok(n) => assert!(
            n == 0 || buf[0] == b'E',
            "unexpected answer {:?}",
            &buf[..n]
        ),
        Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "not closed: {e}"),
    }
    assert_eq!(
        cells(&mut good, "SELECT count(*) FROM t"),
        vec![vec![Some("40".to_owned())]]
    );
}

#[test]
fn sixty_four_connections_at_once() {
    let (addr, _dir) = server();
    let threads: Vec<_> = (0..64)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = connect(addr, PASSWORD).expect("connect");
                let id = i % 40 + 1;
                let got: Vec<i64> = c
                    .query(&format!("SELECT id FROM t WHERE id = {id}"), &[])
                    .expect("select")
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                assert_eq!(got, vec![id]);
                c
            })
        })
        .collect();
    let clients: Vec<Client> = threads
        .into_iter()
        .map(|t| t.join().expect("a connection's thread"))
        .collect();
    assert_eq!(clients.len(), 64);
}

#[test]
fn two_tables_answer_in_turn() {
    // The embedded store admits one open handle per process: the second
    // table's statements once failed with "the profile store ... is in
    // use by another Sesame process".
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    for round in 0..2 {
        c.batch_execute(&format!(
            "INSERT INTO u (id, name, qty) VALUES ({}, 'x', 1)",
            round + 1
        ))
        .expect("insert into u");
        assert_eq!(
            cells(&mut c, "SELECT count(*) FROM t WHERE qty >= 0"),
            vec![vec![Some("40".to_owned())]]
        );
        assert_eq!(
            cells(&mut c, "SELECT count(*) FROM u"),
            vec![vec![Some((round + 1).to_string())]]
        );
    }
}

#[test]
fn copy_run_again_holds_each_row_once() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let data = "id,name,city,qty,note\n101,zed,sf,3,a\n102,zoe,,4,b\n103,zed,la,5,\"c, d\"\n";
    for _ in 0..2 {
        let mut w = c
            .copy_in("COPY u (id, name, city, qty, note) FROM STDIN (FORMAT csv, HEADER)")
            .expect("copy");
        w.write_all(data.as_bytes()).expect("write");
        assert_eq!(w.finish().expect("finish"), 3);
        assert_eq!(
            cells(&mut c, "SELECT count(*) FROM u"),
            vec![vec![Some("3".to_owned())]]
        );
    }
    assert_eq!(
        cells(&mut c, "SELECT note FROM u WHERE id = 103"),
        vec![vec![Some("c, d".to_owned())]]
    );
    assert_eq!(
        cells(
            &mut c,
            "SELECT id FROM u WHERE qty IS NOT NULL AND name = 'zed' ORDER BY id"
        ),
        vec![vec![Some("101".to_owned())], vec![Some("103".to_owned())]]
    );
}

#[test]
fn timestamp_and_integer_parameters_are_read_as_typed() {
    // Binary timestamptz parameters once failed with "Failed to parse
    // parameter: invalid utf-8 sequence".
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    let at = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
    let ins = c
        .prepare_typed(
            "INSERT INTO u (id, name, ts) VALUES ($1, $2, $3)",
            &[
                postgres::types::Type::INT8,
                postgres::types::Type::TEXT,
                postgres::types::Type::TIMESTAMPTZ,
            ],
        )
        .expect("prepare insert");
    for (id, secs) in [
        (1i64, 1_700_000_000u64),
        (2, 1_700_000_100),
        (3, 1_800_000_000),
    ] {
        c.execute(&ins, &[&id, &"x", &at(secs)]).expect("insert");
    }
    let got: Vec<(i64, std::time::SystemTime)> = c
        .query(
            "SELECT id, ts FROM u WHERE ts BETWEEN $1 AND $2 ORDER BY id",
            &[&at(1_700_000_000), &at(1_700_000_100)],
        )
        .expect("query")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(got, vec![(1, at(1_700_000_000)), (2, at(1_700_000_100))]);
    assert_eq!(
        cells(&mut c, "SELECT ts FROM u WHERE id = 3"),
        vec![vec![Some("2027-01-15 08:00:00+00".to_owned())]]
    );
}

#[test]
fn a_large_answer_streams_in_batches_with_its_limit_and_offset() {
    // More rows than one batch of the engine (1024): the answer is
    // fetched, decrypted and sent a batch at a time.
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    for chunk in (1..=2500).collect::<Vec<i64>>().chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|i| format!("({i}, 'n', {})", i % 7))
            .collect();
        c.batch_execute(&format!(
            "INSERT INTO u (id, name, qty) VALUES {}",
            values.join(", ")
        ))
        .expect("insert");
    }
    let all: Vec<i64> = c
        .query("SELECT id FROM u", &[])
        .expect("all")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(all.len(), 2500);
    let want: Vec<i64> = all
        .iter()
        .copied()
        .filter(|i| i % 7 >= 3)
        .skip(700)
        .take(400)
        .collect();
    let got: Vec<i64> = c
        .query("SELECT id FROM u WHERE qty >= 3 LIMIT 400 OFFSET 700", &[])
        .expect("limit")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn create_table_carries_its_index_kinds() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    c.batch_execute(
        "CREATE TABLE f (id bigint PRIMARY KEY, dest text, delay bigint, price numeric(8, 2), \
         note text) WITH (prefix = 'dest:3', range = 'delay:16, price:24', \
         keyword_scheme = 'fast')",
    )
    .expect("create");
    c.batch_execute(
        "INSERT INTO f VALUES (1, 'SFO', 5, 1.50, 'a'), (2, 'SEA', -3, 2.25, 'b'), \
         (3, 'LAX', 12, 9.99, 'c')",
    )
    .expect("insert");
    assert_eq!(
        cells(
            &mut c,
            "SELECT id FROM f WHERE dest LIKE 'S%' AND delay > 0"
        ),
        vec![vec![Some("1".to_owned())]]
    );
    assert_eq!(
        cells(
            &mut c,
            "SELECT id, price FROM f WHERE price BETWEEN 2 AND 10 ORDER BY price"
        ),
        vec![
            vec![Some("2".to_owned()), Some("2.25".to_owned())],
            vec![Some("3".to_owned()), Some("9.99".to_owned())]
        ]
    );
    refused(&mut c, "SELECT id FROM f WHERE note = 'a'");
    let e = c
        .simple_query("CREATE TABLE g (id bigint) WITH (range = 'nope')")
        .map(drop)
        .expect_err("no such column");
    assert_eq!(code(&e), "42703", "{e}");
    c.batch_execute("DROP TABLE f").expect("drop");
    let e = c
        .simple_query("SELECT id FROM f WHERE id = 1")
        .map(drop)
        .expect_err("dropped");
    assert_eq!(code(&e), "42P01", "{e}");
}

#[test]
fn psql_describe_of_any_oid_answers_and_keeps_the_server() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    for oid in ["-9223372036854775808", "16384", "99999999"] {
        let _ = c.simple_query(&format!(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) \
             FROM pg_catalog.pg_attribute a WHERE a.attrelid = '{oid}' AND a.attnum > 0"
        ));
        let _ = c.simple_query(&format!(
            "SELECT c.relchecks, c.relkind FROM pg_catalog.pg_class c WHERE c.oid = '{oid}'"
        ));
    }
    let mut other = connect(addr, PASSWORD).expect("connect");
    assert_eq!(
        cells(&mut other, "SELECT count(*) FROM t"),
        vec![vec![Some("40".to_owned())]]
    );
}

/// Every file of the profile (but its lock files) with its bytes.
fn profile_files(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read the profile") {
            let path = e.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_none_or(|x| x != "lock") {
                out.insert(path.clone(), std::fs::read(&path).expect("read a file"));
            }
        }
    }
    out
}

#[test]
fn reads_write_nothing() {
    // A query changes no byte of the profile: not the store file (no
    // write transaction, no fsync), not the tables' or indexes' state,
    // whichever protocol and whichever index answers it.
    let (addr, dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    assert_eq!(ids(&mut c, "SELECT id FROM t WHERE id = 7"), vec![7]);
    let before = profile_files(dir.path());
    for sql in [
        "SELECT * FROM t WHERE id = 7",
        "SELECT * FROM t WHERE qty BETWEEN 3 AND 9",
        "SELECT * FROM t WHERE name LIKE 'ann%' OR city = 'sf'",
        "SELECT count(*) FROM t WHERE qty > 4",
        "SELECT id FROM t WHERE qty < 10 ORDER BY qty, id LIMIT 3",
        "SELECT city, count(*) FROM t WHERE id IN (1, 2, 3) GROUP BY city",
        "SELECT * FROM t WHERE city IS NULL",
        "SELECT * FROM t",
        "EXPLAIN SELECT * FROM t WHERE id = 7",
    ] {
        c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        c.query(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let bound = c
        .query(
            "SELECT id FROM t WHERE qty BETWEEN $1 AND $2",
            &[&3i64, &9i64],
        )
        .expect("a prepared statement");
    assert!(!bound.is_empty());
    let after = profile_files(dir.path());
    let changed: Vec<_> = before
        .iter()
        .filter(|(p, bytes)| after.get(*p) != Some(*bytes))
        .map(|(p, _)| p.display().to_string())
        .chain(
            after
                .keys()
                .filter(|p| !before.contains_key(*p))
                .map(|p| p.display().to_string()),
        )
        .collect();
    assert!(changed.is_empty(), "queries changed {changed:?}");
}

/// `sesame sql` keeps the keyword index's chunks in memory between
/// statements (`sesame_store::packed::ChunkMemo`): every equality after
/// each INSERT, DELETE and UPDATE of the same server answers as the rows
/// now are, never as a chunk held before the write.
#[test]
fn equalities_after_each_write_see_it_through_the_chunk_memo() {
    let (addr, _dir) = server();
    let mut c = connect(addr, PASSWORD).expect("connect");
    // The rows of `t` by id: (name, city).
    let mut now: std::collections::BTreeMap<i64, (String, Option<String>)> = rows()
        .into_iter()
        .map(|(id, name, city, _, _)| (id, (name, city.map(str::to_owned))))
        .collect();
    let check = |c: &mut Client,
                 now: &std::collections::BTreeMap<i64, (String, Option<String>)>| {
        for name in ["ann3", "bob4", "zed", "zoe"] {
            let want: Vec<i64> = now
                .iter()
                .filter(|(_, (n, _))| n == name)
                .map(|(id, _)| *id)
                .collect();
            let sql = format!("SELECT id FROM t WHERE name = '{name}' ORDER BY id");
            assert_eq!(ids(c, &sql), want, "{sql}");
        }
        for city in ["sf", "la", "ny", "rome"] {
            let want: Vec<i64> = now
                .iter()
                .filter(|(_, (_, ct))| ct.as_deref() == Some(city))
                .map(|(id, _)| *id)
                .collect();
            let sql = format!("SELECT id FROM t WHERE city = '{city}' ORDER BY id");
            assert_eq!(ids(c, &sql), want, "{sql}");
        }
    };
    check(&mut c, &now);
    for round in 0..4i64 {
        let id = 100 + round;
        c.batch_execute(&format!(
            "INSERT INTO t (id, name, city, qty) VALUES ({id}, 'zed', 'rome', 1)"
        ))
        .expect("insert");
        now.insert(id, ("zed".into(), Some("rome".into())));
        check(&mut c, &now);
        let gone = 4 + round;
        c.batch_execute(&format!("DELETE FROM t WHERE id = {gone}"))
            .expect("delete");
        now.remove(&gone);
        check(&mut c, &now);
        let moved = 9 + round * 2;
        c.batch_execute(&format!("UPDATE t SET city = 'rome' WHERE id = {moved}"))
            .expect("update");
        if let Some(row) = now.get_mut(&moved) {
            row.1 = Some("rome".into());
        }
        check(&mut c, &now);
    }
}
