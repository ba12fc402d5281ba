//! Where keys live: a key's group, a spread index's shards, the hash tag
//! and slot of a group, its two Redis keys, and the groups a prefix scan
//! reads.

use crate::prefix_end;

/// Shards of a spread index: keys `e/A/B/...` fall in one of these groups
/// of index `A/B`, chosen by their bytes after `e/A/B/`.
pub const SPREAD_SHARDS: u8 = 32;

/// The group of `key`: `A/B` for `c/A/B` and `c/A/B/...`; `None` (the
/// home group) otherwise. Keys `e/A/B/...` are the write-once entries of a
/// spread index: they fall in its shards (see [`Group`]).
#[cfg(test)]
pub(super) fn group_of(key: &[u8]) -> Option<Group<'_>> {
    group_in(key, true)
}

/// [`group_of`] in a namespace whose spread entries are kept in their
/// index's group (`spread=off`) when `spread` is false.
pub(super) fn group_in(key: &[u8], spread: bool) -> Option<Group<'_>> {
    let name = group_name(key)?;
    let rest = &key[2 + name.len()..];
    let shard = (spread && key[0] == b'e' && !rest.is_empty()).then(|| shard_of(&rest[1..]));
    Some(Group { name, shard })
}

/// `A/B` of `c/A/B` or `c/A/B/...`.
pub(super) fn group_name(key: &[u8]) -> Option<&[u8]> {
    if key.len() < 2 || key[0] == b'/' || key[1] != b'/' {
        return None;
    }
    let rest = &key[2..];
    let a = rest.iter().position(|&b| b == b'/')?;
    if a == 0 {
        return None;
    }
    let after = &rest[a + 1..];
    let b = after.iter().position(|&b| b == b'/').unwrap_or(after.len());
    if b == 0 {
        return None;
    }
    Some(&rest[..a + 1 + b])
}

/// The shard of a spread key's bytes after `e/A/B/`: FNV-1a (64 bits)
/// modulo [`SPREAD_SHARDS`]. Labels are PRF outputs, so shards fill evenly.
pub(super) fn shard_of(rest: &[u8]) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in rest {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The remainder is below SPREAD_SHARDS, so it fits.
    (h % u64::from(SPREAD_SHARDS)) as u8
}

/// A group other than the home group: `A/B`, or shard `n` of index `A/B`
/// (named `A/B#nn` in the registry and in its hash tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Group<'a> {
    pub(super) name: &'a [u8],
    pub(super) shard: Option<u8>,
}

impl Group<'_> {
    /// The group's name in the registry and its tag.
    pub(super) fn bytes(&self) -> Vec<u8> {
        let mut b = self.name.to_vec();
        if let Some(n) = self.shard {
            b.extend_from_slice(format!("#{n:02}").as_bytes());
        }
        b
    }
}

/// The registry names of index `name`'s shards.
pub(super) fn shard_names(name: &[u8]) -> Vec<Vec<u8>> {
    (0..SPREAD_SHARDS)
        .map(|shard| {
            Group {
                name,
                shard: Some(shard),
            }
            .bytes()
        })
        .collect()
}

/// Which groups a prefix scan must read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ScanPlan<'a> {
    /// Every key with the prefix is in this one group (`None`: home).
    One(Option<&'a [u8]>),
    /// Every key with the prefix is in a shard of this spread index.
    Shards(&'a [u8]),
    /// The home group and every registered group whose name starts with
    /// this.
    Many(&'a [u8]),
}

#[cfg(test)]
pub(super) fn scan_plan(prefix: &[u8]) -> ScanPlan<'_> {
    scan_plan_in(prefix, true)
}

/// [`scan_plan`] in a namespace with or without spread entries.
pub(super) fn scan_plan_in(prefix: &[u8], spread: bool) -> ScanPlan<'_> {
    if let Some(g) = group_name(prefix) {
        // `c/A/B/...`: the part after B is fixed, so is the group (or, for
        // `e/A/B/...`, the index whose shards hold it).
        if prefix.len() > 2 + g.len() {
            return if spread && prefix[0] == b'e' {
                ScanPlan::Shards(g)
            } else {
                ScanPlan::One(Some(g))
            };
        }
    }
    match prefix {
        [] | [_] => ScanPlan::Many(b""),
        [b'/', ..] => ScanPlan::One(None),
        [_, b'/', rest @ ..] => ScanPlan::Many(rest),
        _ => ScanPlan::One(None),
    }
}

/// The hash tag of a group: the namespace, then `/` and the group with
/// every byte outside `A-Z a-z 0-9 - _ . /` as `%XX` (so braces never end
/// the tag early, and distinct groups get distinct tags).
///
/// A shard's group (`A/B#nn`, `nn` below [`SPREAD_SHARDS`]) gets `~k` after
/// that, with the smallest `k` that puts it in the `nn`-th of
/// [`SPREAD_SHARDS`] equal runs of slots: an index's shards then cover the
/// slots evenly, and so the masters (`~` never appears unescaped in a
/// group, so tags stay distinct).
pub(super) fn tag(namespace: &str, group: Option<&[u8]>) -> String {
    let mut t = namespace.to_owned();
    if let Some(g) = group {
        t.push('/');
        for &b in g {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/') {
                t.push(char::from(b));
            } else {
                t.push_str(&format!("%{b:02X}"));
            }
        }
        if let Some(n) = shard_number(g) {
            let run = SLOTS / u16::from(SPREAD_SHARDS);
            // Each try lands in the run with probability 1/32; 4096 tries
            // all miss with probability below 10^-56.
            if let Some(k) = (0..4096u32).find(|k| slot(&format!("{t}~{k}")) / run == u16::from(n))
            {
                t.push_str(&format!("~{k}"));
            }
        }
    }
    t
}

/// Slots of a Redis Cluster.
pub(super) const SLOTS: u16 = 16384;

/// `nn` of a shard's group name `A/B#nn`.
pub(super) fn shard_number(group: &[u8]) -> Option<u8> {
    let [.., b'#', a, b] = group else {
        return None;
    };
    if !a.is_ascii_digit() || !b.is_ascii_digit() {
        return None;
    }
    let n = (a - b'0') * 10 + (b - b'0');
    (n < SPREAD_SHARDS).then_some(n)
}

/// Redis Cluster's slot of a hash tag: CRC16 (XMODEM) modulo 16384.
pub(super) fn slot(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in tag.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// The two Redis keys of a group.
#[derive(Clone)]
pub(super) struct GroupKeys {
    pub(super) values: String,
    pub(super) index: String,
    pub(super) slot: u16,
}

impl GroupKeys {
    pub(super) fn new(namespace: &str, group: Option<&[u8]>) -> Self {
        let t = tag(namespace, group);
        GroupKeys {
            values: format!("sesame{{{t}}}:v"),
            index: format!("sesame{{{t}}}:k"),
            slot: slot(&t),
        }
    }
}

/// `[prefix` and `(end` (or `+`): the lex range of keys with `prefix`.
pub(super) fn lex_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut min = Vec::with_capacity(prefix.len() + 1);
    if prefix.is_empty() {
        min.push(b'-');
    } else {
        min.push(b'[');
        min.extend_from_slice(prefix);
    }
    let max = match prefix_end(prefix) {
        Some(end) => {
            let mut m = Vec::with_capacity(end.len() + 1);
            m.push(b'(');
            m.extend_from_slice(&end);
            m
        }
        None => b"+".to_vec(),
    };
    (min, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn keys_fall_in_the_groups_the_docs_say() {
        let plain = |name: &'static [u8]| Some(Group { name, shard: None });
        assert_eq!(group_of(b"x/t/a"), plain(b"t/a"));
        assert_eq!(group_of(b"i/t/a/3/label"), plain(b"t/a"));
        assert_eq!(group_of(b"d/t/a/b\x00\x01"), plain(b"t/a"));
        // Spread entries: in a shard of their index, by the bytes after
        // `e/t/a/`; `e/t/a` itself is in the index's group.
        assert_eq!(group_of(b"e/t/a"), plain(b"t/a"));
        let g = group_of(b"e/t/a/3/label").expect("a group");
        assert_eq!((g.name, g.shard), (&b"t/a"[..], Some(shard_of(b"3/label"))));
        assert_eq!(
            g.bytes(),
            format!("t/a#{:02}", shard_of(b"3/label")).into_bytes()
        );
        let shards: BTreeSet<u8> = (0..2000u32)
            .map(|i| shard_of(format!("0/{i}").as_bytes()))
            .collect();
        assert_eq!(shards.len(), usize::from(SPREAD_SHARDS));
        assert!(shards.iter().all(|&s| s < SPREAD_SHARDS));
        for home in [
            &b""[..],
            b"s/format",
            b"x/t/",
            b"x//a",
            b"/t/a",
            b"xy/t/a",
            b"iso/000",
            b"t0/0001/b",
            b"\x01\xff",
        ] {
            assert_eq!(group_of(home), None, "{home:?}");
        }
    }

    /// Every key with a prefix lies in a group the plan reads.
    #[test]
    fn scan_plans_cover_every_matching_key() {
        let keys: Vec<&[u8]> = vec![
            b"x/t/a",
            b"x/t/ab",
            b"x/t/a/z",
            b"i/t/a/1/k",
            b"i/u/a/1/k",
            b"e/t/a/1/k",
            b"e/t/a/2/kk",
            b"e/t/a",
            b"e/t/ab/1/k",
            b"x/t/",
            b"x//a",
            b"s/format",
            b"iso/1",
            b"/t/a/b",
            b"",
            b"x",
        ];
        let prefixes: Vec<&[u8]> = vec![
            b"",
            b"x",
            b"x/",
            b"x/t",
            b"x/t/",
            b"x/t/a",
            b"x/t/a/",
            b"i/t/a/1/",
            b"e/t/a/",
            b"e/t/a/1/",
            b"e/t/a",
            b"e/",
            b"i/",
            b"/",
            b"/t/a/",
            b"is",
            b"x//",
        ];
        for p in &prefixes {
            let plan = scan_plan(p);
            for k in keys.iter().filter(|k| k.starts_with(p)) {
                let g = group_of(k);
                let covered = match plan {
                    ScanPlan::One(one) => {
                        one == g.map(|g| g.name) && g.is_none_or(|g| g.shard.is_none())
                    }
                    ScanPlan::Shards(name) => {
                        g.is_some_and(|g| g.name == name && g.shard.is_some())
                    }
                    ScanPlan::Many(start) => g.is_none_or(|g| g.bytes().starts_with(start)),
                };
                assert!(covered, "prefix {p:?} misses key {k:?} ({plan:?})");
            }
        }
        assert_eq!(scan_plan(b"i/t/a/1/"), ScanPlan::One(Some(&b"t/a"[..])));
        assert_eq!(scan_plan(b"e/t/a/"), ScanPlan::Shards(&b"t/a"[..]));
        assert_eq!(scan_plan(b"e/t/a"), ScanPlan::Many(&b"t/a"[..]));
        // spread=off: entries stay in their index's group.
        assert_eq!(
            scan_plan_in(b"e/t/a/", false),
            ScanPlan::One(Some(&b"t/a"[..]))
        );
        assert_eq!(
            group_in(b"e/t/a/3/label", false),
            Some(Group {
                name: b"t/a",
                shard: None
            })
        );
        assert_eq!(scan_plan(b"x/t/"), ScanPlan::Many(&b"t/"[..]));
        assert_eq!(scan_plan(b"iso/"), ScanPlan::One(None));
    }

    #[test]
    fn slots_match_redis_cluster() {
        // CRC16/XMODEM's check value (0x31C3, below 16384), and Redis's
        // own CLUSTER KEYSLOT answers.
        assert_eq!(slot("123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("bar"), 5061);
    }

    #[test]
    fn tags_escape_braces_and_keep_groups_apart() {
        assert_eq!(tag("ns", None), "ns");
        assert_eq!(tag("ns", Some(b"t/a")), "ns/t/a");
        assert_eq!(tag("ns", Some(b"t/{a}")), "ns/t/%7Ba%7D");
        assert_ne!(tag("ns", Some(b"t/%41")), tag("ns", Some(b"t/A")));
        // An index's shards: one in each 32nd of the slots.
        let runs: Vec<u16> = shard_names(b"t/a")
            .iter()
            .map(|g| slot(&tag("ns", Some(g))) / (SLOTS / u16::from(SPREAD_SHARDS)))
            .collect();
        assert_eq!(runs, (0..u16::from(SPREAD_SHARDS)).collect::<Vec<_>>());
        assert!(tag("ns", Some(b"t/a#07")).starts_with("ns/t/a%2307~"));
        assert_eq!(tag("ns", Some(b"t/a#32")), "ns/t/a%2332");
    }

    #[test]
    fn lex_ranges_bound_the_prefix() {
        assert_eq!(lex_range(b""), (b"-".to_vec(), b"+".to_vec()));
        assert_eq!(lex_range(b"ab"), (b"[ab".to_vec(), b"(ac".to_vec()));
        assert_eq!(lex_range(&[0xFF]), (vec![b'[', 0xFF], b"+".to_vec()));
    }
}
