//! Tables on a real `sesame serve`, through the binary: a table is shared
//! by the devices of a profile (a second device sees it, adds to it, and
//! cannot destroy it by creating one of the same name); a create the
//! server refuses (its index limit) or a create killed part-way leaves no
//! index behind that the tenant cannot get rid of; and the server's store
//! holds neither a table's name nor a field's name.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::{Server, Site};

/// `sesame --dir DIR init` on the server (fast).
fn init(site: &Site, dir: &str, server: &Server) {
    let out = site.ok(&support::server_init(
        &["--dir", dir],
        &server.url(),
        &["--scheme", "fast", "--token", &site.token],
    ));
    assert!(out.contains("on server https://localhost:"), "{out}");
}

/// A second device `dir` joining profile `first`'s default index.
fn join(site: &Site, first: &str, dir: &str, server: &Server) {
    let binding: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.path(&format!("{first}/server.json"))).unwrap())
            .unwrap();
    let remote = format!("{}default", binding["index_prefix"].as_str().unwrap());
    let out = site.ok(&support::server_init(
        &["--dir", dir],
        &server.url(),
        &["--token", &site.token, "--join", &remote],
    ));
    assert!(out.contains("joined profile"), "{out}");
}

const SCHEMA: &str = "key = \"id\"\n[fields.id]\ntype = \"integer\"\n\
    [fields.carrier]\ntype = \"string\"\nindex = [\"equality\"]\n\
    [fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 12\n";

/// A schema with `n` range fields (a table of `n + 1` indexes).
fn wide_schema(n: usize) -> String {
    let mut s = String::from("key = \"id\"\n[fields.id]\ntype = \"integer\"\n");
    for i in 0..n {
        s.push_str(&format!(
            "[fields.r{i}]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 8\n"
        ));
    }
    s
}

/// The keys of `query` on table `t` of profile `dir`, sorted.
fn keys(site: &Site, dir: &str, table: &str, query: &str) -> Vec<i64> {
    let out = site.ok(&["--dir", dir, "query", table, query, "--format", "csv"]);
    let mut keys: Vec<i64> = out
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    keys.sort();
    keys
}

/// Issue 43, item 1: a second device of the profile sees the first
/// device's table, cannot destroy it with a create of the same name, and
/// what either device imports the other finds; `check` covers tables.
#[test]
fn a_second_device_shares_the_table_and_cannot_destroy_it() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    init(&site, "a", &server);
    join(&site, "a", "b", &server);
    std::fs::write(site.path("s.toml"), SCHEMA).unwrap();
    site.ok(&["--dir", "a", "table", "create", "t", "--schema", "s.toml"]);
    std::fs::write(
        site.path("a.csv"),
        "id,carrier,v\n1,UA,10\n2,AA,20\n3,UA,30\n",
    )
    .unwrap();
    site.ok(&["--dir", "a", "import", "t", "a.csv"]);

    // The second device: its create of the same name is refused and
    // changes nothing; it sees the table and adds to it.
    let err = site.fails(&["--dir", "b", "table", "create", "t", "--schema", "s.toml"]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(keys(&site, "a", "t", "v > 0"), vec![1, 2, 3]);
    assert_eq!(site.ok(&["--dir", "b", "table", "list"]), "t\n");
    let shown = site.ok(&["--dir", "b", "table", "show", "t"]);
    assert!(shown.contains("3 records in table t"), "{shown}");
    std::fs::write(site.path("b.csv"), "id,carrier,v\n4,AA,40\n").unwrap();
    site.ok(&["--dir", "b", "import", "t", "b.csv"]);
    for dir in ["a", "b", "a"] {
        assert_eq!(keys(&site, dir, "t", "v > 0"), vec![1, 2, 3, 4], "{dir}");
        assert_eq!(
            keys(&site, dir, "t", "carrier = \"UA\""),
            vec![1, 3],
            "{dir}"
        );
    }
    // The first device again, then the second: turns keep working.
    std::fs::write(site.path("a2.csv"), "id,carrier,v\n5,UA,50\n").unwrap();
    site.ok(&["--dir", "a", "import", "t", "a2.csv"]);
    assert_eq!(keys(&site, "b", "t", "v >= 40"), vec![4, 5]);
    let out = site.ok(&["--dir", "a", "check"]);
    assert!(out.contains("1 table"), "{out}");
    assert!(out.contains("no problem found"), "{out}");
    // A drop from one device is seen by the other.
    site.ok(&["--dir", "b", "table", "drop", "t"]);
    assert_eq!(site.ok(&["--dir", "a", "table", "list"]), "");
    let err = site.fails(&["--dir", "a", "query", "t", "v > 0"]);
    assert!(err.contains("no table named"), "{err}");
}

/// Issue 43, item 3: a create the server refuses (a table of 7 indexes
/// under `--max-indexes 6`, the profile's own index included) leaves
/// nothing, and creates killed at random points leave nothing the next
/// create or drop of that name does not remove: the tenant's room for
/// indexes is whole afterwards.
#[test]
fn refused_and_killed_creates_leave_no_index_behind() {
    let site = Site::new();
    let server = Server::start_with(&site, 0, &["--max-indexes", "6"]);
    init(&site, "a", &server);
    std::fs::write(site.path("w.toml"), wide_schema(6)).unwrap();
    let err = site.fails(&["--dir", "a", "table", "create", "w", "--schema", "w.toml"]);
    assert!(err.contains("at most 6 indexes"), "{err}");
    assert_eq!(site.ok(&["--dir", "a", "table", "list"]), "");
    // The room is whole: a table of five indexes fits beside the profile's.
    std::fs::write(site.path("k.toml"), wide_schema(4)).unwrap();
    site.ok(&["--dir", "a", "table", "create", "k", "--schema", "k.toml"]);
    site.ok(&["--dir", "a", "table", "drop", "k"]);

    // Creates killed part-way, then the create run again: one table.
    let mut killed = 0;
    for delay in [20u64, 60, 120, 250, 400] {
        let mut child = site.spawn(&["--dir", "a", "table", "create", "k", "--schema", "k.toml"]);
        std::thread::sleep(Duration::from_millis(delay));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        let out = site.run(&["--dir", "a", "table", "create", "k", "--schema", "k.toml"]);
        if !out.status.success() {
            // The killed create had completed: the table is there.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("already exists"), "{err}");
        }
        assert_eq!(site.ok(&["--dir", "a", "table", "list"]), "k\n");
        site.ok(&["--dir", "a", "table", "drop", "k"]);
    }
    // Drops killed part-way, then the drop run again.
    for delay in [10u64, 40, 100] {
        site.ok(&["--dir", "a", "table", "create", "k", "--schema", "k.toml"]);
        let mut child = site.spawn(&["--dir", "a", "table", "drop", "k"]);
        std::thread::sleep(Duration::from_millis(delay));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = site.run(&["--dir", "a", "table", "drop", "k"]);
        assert_eq!(site.ok(&["--dir", "a", "table", "list"]), "");
    }
    // Nothing left over: the largest table that fits still fits.
    site.ok(&["--dir", "a", "table", "create", "k", "--schema", "k.toml"]);
    eprintln!("{killed} table commands killed while running");
    assert!(killed > 0, "no command was killed while running");
}

/// Issue 37, item 12: the names the server sees are opaque: neither a
/// table's name nor a field's name is in the server's store file (nor in
/// an embedded profile's store file).
#[test]
fn the_store_holds_neither_table_nor_field_names() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    init(&site, "a", &server);
    site.ok(&["--dir", "e", "init", "--scheme", "fast"]);
    let schema = "key = \"id\"\n[fields.id]\ntype = \"integer\"\n\
        [fields.quokkafield]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 12\n\
        [fields.wombatfield]\ntype = \"string\"\nindex = [\"equality\"]\n";
    std::fs::write(site.path("s.toml"), schema).unwrap();
    std::fs::write(
        site.path("r.csv"),
        "id,quokkafield,wombatfield\n1,5,x\n2,7,y\n",
    )
    .unwrap();
    for dir in ["a", "e"] {
        site.ok(&[
            "--dir",
            dir,
            "table",
            "create",
            "zanzibartable",
            "--schema",
            "s.toml",
        ]);
        site.ok(&["--dir", dir, "import", "zanzibartable", "r.csv"]);
        assert_eq!(
            keys(&site, dir, "zanzibartable", "quokkafield > 6"),
            vec![2]
        );
    }
    drop(server);
    for file in ["server.redb", "e/store.redb"] {
        let bytes = std::fs::read(site.path(file)).unwrap();
        for name in ["zanzibartable", "quokkafield", "wombatfield"] {
            assert!(
                !bytes.windows(name.len()).any(|w| w == name.as_bytes()),
                "{file} holds {name:?}"
            );
        }
    }
}
