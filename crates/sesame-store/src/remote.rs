//! What the network stores (PostgreSQL, Redis Cluster) do alike: check
//! their specs (whether a host is this machine, namespace names) and
//! reduce a batch to its last operation per key.

use std::collections::BTreeMap;

use sesame_core::{Error, Result, WriteBatch, WriteOp};

/// Whether a TCP host name or address is this machine.
pub(crate) fn is_local(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Namespaces (a table name in PostgreSQL, a key prefix in Redis): 1 to
/// 40 characters of `a-z`, `0-9` and `_`. `engine` names the store in the
/// error.
pub(crate) fn check_namespace(engine: &str, ns: &str) -> Result<()> {
    let ok = !ns.is_empty()
        && ns.len() <= 40
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{engine} store namespace {ns:?} must be 1 to 40 characters of a-z, 0-9 and _"
        )))
    }
}

/// The batch reduced to its last operation per key, in key order.
pub(crate) fn collapse(batch: &WriteBatch) -> BTreeMap<&[u8], Option<&[u8]>> {
    let mut last = BTreeMap::new();
    for op in batch.ops() {
        match op {
            WriteOp::Put { key, value } => last.insert(key.as_slice(), Some(value.as_slice())),
            WriteOp::Delete { key } => last.insert(key.as_slice(), None),
        };
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_namespaces() {
        assert!(is_local("localhost") && is_local("127.0.0.1") && is_local("::1"));
        assert!(!is_local("db.example.org") && !is_local("10.0.0.5"));
        assert!(check_namespace("X", "tenant_1").is_ok());
        for bad in ["", "Upper", "a-b", &"a".repeat(41)] {
            let e = check_namespace("X", bad).unwrap_err().to_string();
            assert!(e.contains("X store namespace"), "{e}");
        }
    }

    #[test]
    fn collapse_keeps_the_last_operation_per_key() {
        let mut b = WriteBatch::new();
        b.put(b"a".as_slice(), b"1".as_slice())
            .delete(b"a".as_slice())
            .put(b"b".as_slice(), b"2".as_slice())
            .put(b"b".as_slice(), b"3".as_slice())
            .delete(b"c".as_slice());
        let last = collapse(&b);
        let want: BTreeMap<&[u8], Option<&[u8]>> = [
            (b"a".as_slice(), None),
            (b"b".as_slice(), Some(b"3".as_slice())),
            (b"c".as_slice(), None),
        ]
        .into_iter()
        .collect();
        assert_eq!(last, want);
    }
}
