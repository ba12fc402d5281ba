//! Where the server keeps things in its store.
//!
//! | key                               | value                                  |
//! |-----------------------------------|----------------------------------------|
//! | `s/format`                        | the layout marker [`MARKER`]           |
//! | `n/<tenant>`                      | the tenant's index names and when each place was reserved (the index limit across servers) |
//! | `x/<tenant>/<index>`              | the index's [`IndexMeta`](crate::records::IndexMeta) |
//! | `i/<tenant>/<index>/<generation>/…` | the scheme server's entries          |
//! | `e/<tenant>/<index>/<generation>/…` | the same, for an index whose scheme writes each entry once (spread over a Redis Cluster's shards) |
//! | `…/<generation>/#…`, `…/<generation>/+` | a packed index's chunks and its pending record (`sesame_store::packed`) |
//! | `d/<tenant>/<index>/b<id>`        | an encrypted document (id big-endian)  |
//! | `r/<tenant>/<index>/<request id>` | a [`ReplayRecord`](crate::records::ReplayRecord) |
//! | `v/<tenant>/<index>/<name>`       | a client's record: version (8 bytes, big-endian), then its value |
//!
//! Tenant and index names are 1 to 64 characters of `a-z 0-9 - _`, so no
//! name contains `/` and one index's prefix never covers another's.

use crate::error::EngineError;

/// Key of the layout marker.
pub const MARKER_KEY: &[u8] = b"s/format";
/// The layout marker this build writes and reads.
pub const MARKER: &[u8] = b"sesame-server/1";

/// Checks a tenant or index name (`what` says which).
pub fn check_name(what: &str, name: &str) -> Result<(), EngineError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        let shown: String = name.chars().take(64).collect();
        Err(EngineError::InvalidArgument(format!(
            "{what} name {shown:?} must be 1 to 64 characters of a-z, 0-9, - and _"
        )))
    }
}

fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            k.push(b'/');
        }
        k.extend_from_slice(p);
    }
    k
}

/// `n/<tenant>`: the names of the tenant's indexes, each with the time
/// its place was reserved (one part after `n/`, so over a Redis Cluster
/// it lives in the home group, apart from every index).
pub fn tenant_key(tenant: &str) -> Vec<u8> {
    join(&[b"n", tenant.as_bytes()])
}

/// `x/<tenant>/`: every index of a tenant.
pub fn meta_prefix(tenant: &str) -> Vec<u8> {
    join(&[b"x", tenant.as_bytes(), b""])
}

/// `x/<tenant>/<index>`.
pub fn meta_key(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"x", tenant.as_bytes(), index.as_bytes()])
}

/// `c/<tenant>/<index>`: the index's commit token, 16 random bytes that
/// every commit replaces and is conditional on (absent for an index that
/// no commit has touched since this key was introduced).
pub fn commit_key(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"c", tenant.as_bytes(), index.as_bytes()])
}

/// `i/<tenant>/<index>/`: every generation of an index.
pub fn index_prefix(tenant: &str, index: &str) -> Vec<u8> {
    entries_prefix(false, tenant, index)
}

/// `i/<tenant>/<index>/<generation>/`.
pub fn generation_prefix(tenant: &str, index: &str, generation: u64) -> Vec<u8> {
    generation_prefix_in(false, tenant, index, generation)
}

/// The letter of an index's entries: `e` when they are spread (write-once
/// entries, which a Redis Cluster store puts in the index's shards), else
/// `i`.
fn entries_letter(spread: bool) -> &'static [u8] {
    if spread {
        b"e"
    } else {
        b"i"
    }
}

/// `i/<tenant>/<index>/` or, spread, `e/<tenant>/<index>/`.
pub fn entries_prefix(spread: bool, tenant: &str, index: &str) -> Vec<u8> {
    join(&[
        entries_letter(spread),
        tenant.as_bytes(),
        index.as_bytes(),
        b"",
    ])
}

/// [`entries_prefix`] followed by `<generation>/`.
pub fn generation_prefix_in(spread: bool, tenant: &str, index: &str, generation: u64) -> Vec<u8> {
    join(&[
        entries_letter(spread),
        tenant.as_bytes(),
        index.as_bytes(),
        generation.to_string().as_bytes(),
        b"",
    ])
}

/// `d/<tenant>/<index>/`: the documents, in the layout of
/// [`sesame_store::documents`] (the client's document service uses it too,
/// so an index moves between embedded and server mode unchanged).
pub fn doc_prefix(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"d", tenant.as_bytes(), index.as_bytes(), b""])
}

/// `r/<tenant>/<index>/`.
pub fn replay_prefix(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"r", tenant.as_bytes(), index.as_bytes(), b""])
}

/// `r/<tenant>/<index>/<request id>`.
pub fn replay_key(tenant: &str, index: &str, id: &[u8; 16]) -> Vec<u8> {
    let mut k = replay_prefix(tenant, index);
    k.extend_from_slice(id);
    k
}

/// `w/<tenant>/<index>/`: the sweeps of an index, the spread entries a
/// commit removed and that are deleted after it (`engine/sweep.rs`).
pub fn sweep_prefix(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"w", tenant.as_bytes(), index.as_bytes(), b""])
}

/// `v/<tenant>/<index>/`: the records kept beside an index.
pub fn record_prefix(tenant: &str, index: &str) -> Vec<u8> {
    join(&[b"v", tenant.as_bytes(), index.as_bytes(), b""])
}

/// `v/<tenant>/<index>/<name>`.
pub fn record_key(tenant: &str, index: &str, name: &str) -> Vec<u8> {
    let mut k = record_prefix(tenant, index);
    k.extend_from_slice(name.as_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_do_not_overlap() {
        assert_eq!(meta_key("t", "a"), b"x/t/a");
        assert_eq!(commit_key("t", "a"), b"c/t/a");
        assert_eq!(generation_prefix("t", "a", 7), b"i/t/a/7/");
        assert!(!generation_prefix("t", "ab", 1).starts_with(&index_prefix("t", "a")));
        assert!(!generation_prefix("t", "a", 10).starts_with(&generation_prefix("t", "a", 1)));
        assert_eq!(doc_prefix("t", "a"), b"d/t/a/");
        assert_eq!(record_key("t", "a", "state"), b"v/t/a/state");
        assert!(!record_key("t", "ab", "x").starts_with(&record_prefix("t", "a")));
    }

    #[test]
    fn names_are_checked() {
        for ok in ["a", "default", "my-index_2", &"z".repeat(64)] {
            assert!(check_name("index", ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "a/b", "a b", "é", &"z".repeat(65), ".."] {
            assert!(check_name("index", bad).is_err(), "{bad}");
        }
    }
}
