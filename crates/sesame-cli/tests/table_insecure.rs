//! Tables never hand the server what they claim to hide: a schema that
//! names an insecure baseline (`bplus-plain`, which stores the range
//! values in the clear) is refused at `table create`, naming the scheme,
//! unless it says `insecure = true`; such a table then says INSECURE in
//! `table show` and `query --explain`. The test plays whoever reads the
//! server's store: it looks for a distinctive value in `store.redb`.
//! Records themselves are stored once, sealed, whatever the range scheme:
//! a range payload holds an identifier and a tag.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const PASS: &str = "test passphrase";
/// A value no encrypted store may hold in the clear.
const SSN: &str = "078-05-1120";
/// A range value no encrypted store may hold in the clear.
const AGE: &str = "987654321987";

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sesame"))
        .args(args)
        .current_dir(dir)
        .env_remove("SESAME_HOME")
        .env("SESAME_PASSPHRASE", PASS)
        .env("SESAME_KDF", "fast")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "sesame {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether the profile's store file holds `needle` in the clear.
fn store_holds(dir: &Path, needle: &str) -> bool {
    store_holds_bytes(dir, needle.as_bytes())
}

fn store_holds_bytes(dir: &Path, needle: &[u8]) -> bool {
    let bytes = fs::read(dir.join(".sesame/store.redb")).unwrap();
    bytes.windows(needle.len()).any(|w| w == needle)
}

/// Whether the store holds the range field's encoded `AGE` in any of the
/// ways a page may write a `u64`: little- or big-endian, or as a varint.
fn store_holds_age(dir: &Path, schema_text: &str) -> bool {
    let schema = sesame_client::table::schema::Schema::from_toml(schema_text).unwrap();
    let field = schema.field("age").unwrap();
    let v = field.encode(&field.parse_literal(AGE).unwrap()).unwrap();
    let mut varint = Vec::new();
    let mut rest = v;
    loop {
        let byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            varint.push(byte);
            break;
        }
        varint.push(byte | 0x80);
    }
    [v.to_le_bytes().to_vec(), v.to_be_bytes().to_vec(), varint]
        .iter()
        .any(|needle| store_holds_bytes(dir, needle))
}

fn schema(insecure: bool) -> String {
    format!(
        "{}key = \"id\"\n\
         [fields.id]\ntype = \"integer\"\n\
         [fields.ssn]\ntype = \"string\"\n\
         [fields.age]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"bplus-plain\"\nbits = 64\n",
        if insecure { "insecure = true\n" } else { "" }
    )
}

#[test]
fn a_plaintext_range_scheme_is_refused_unless_the_schema_says_insecure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    ok(dir, &["init"]);
    fs::write(
        dir.join("people.csv"),
        format!("id,ssn,age\n1,{SSN},{AGE}\n"),
    )
    .unwrap();

    // Without the opt-in: refused, naming the scheme, and nothing made.
    fs::write(dir.join("plain.toml"), schema(false)).unwrap();
    let out = run(
        dir,
        &["table", "create", "people", "--schema", "plain.toml"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a bplus-plain table was created: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        err.contains("bplus-plain") && err.contains("INSECURE") && err.contains("insecure = true"),
        "{err}"
    );
    assert!(ok(dir, &["table", "list"]).trim().is_empty());

    // With it: created, and said loudly wherever the table is described.
    fs::write(dir.join("insecure.toml"), schema(true)).unwrap();
    let created = ok(
        dir,
        &["table", "create", "people", "--schema", "insecure.toml"],
    );
    assert!(
        created.contains("INSECURE") && created.contains("bplus-plain"),
        "{created}"
    );
    ok(dir, &["import", "people", "people.csv"]);
    let show = ok(dir, &["table", "show", "people"]);
    assert!(
        show.contains("INSECURE") && show.contains("bplus-plain"),
        "{show}"
    );
    let explain = ok(dir, &["query", "people", "age > 30", "--explain"]);
    assert!(
        explain.contains("INSECURE") && explain.contains("bplus-plain"),
        "{explain}"
    );
    // What it says is true: the store holds the range value in the clear
    // (the record itself is sealed: a range payload is an identifier and
    // a tag).
    assert!(store_holds_age(dir, &schema(true)));
    assert!(!store_holds(dir, SSN));
}

#[test]
fn a_default_table_keeps_its_values_out_of_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    ok(dir, &["init"]);
    fs::write(
        dir.join("people.toml"),
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.ssn]\ntype = \"string\"\n\
         index = [\"equality\"]\n[fields.age]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 64\n",
    )
    .unwrap();
    fs::write(
        dir.join("people.csv"),
        format!("id,ssn,age\n1,{SSN},{AGE}\n"),
    )
    .unwrap();
    let created = ok(
        dir,
        &["table", "create", "people", "--schema", "people.toml"],
    );
    assert!(!created.contains("INSECURE"), "{created}");
    ok(dir, &["import", "people", "people.csv"]);
    let explain = ok(dir, &["query", "people", "age > 30", "--explain"]);
    assert!(!explain.contains("INSECURE"), "{explain}");
    assert!(!store_holds(dir, SSN));
    assert!(!store_holds_age(
        dir,
        &fs::read_to_string(dir.join("people.toml")).unwrap()
    ));
}
