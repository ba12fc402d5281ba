//! What a range protocol's server can tell from bytes alone: which
//! stored records each query returned (and, for scoring only, the values
//! the queries' intervals give them).

use std::collections::BTreeSet;

/// The sealed records of a Log-BRC build, one per record, from the
/// build's requests (Log-BRC's public message format): what names a
/// record in its answers.
pub(super) fn log_brc_records(requests: &[Vec<u8>]) -> Vec<Vec<u8>> {
    requests
        .iter()
        .filter_map(|r| sesame_core::wire::decode::<sesame_range::log_brc::Request>(r).ok())
        .flat_map(|r| match r {
            sesame_range::log_brc::Request::Records { records, .. } => {
                records.into_iter().map(|(_, sealed)| sealed).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// The value (from 1) of each record that `sets` (the records each query
/// returned) say it has, given the queries' intervals: the one value whose
/// intervals are exactly the queries that returned the record; 0 where
/// none is. For scoring only: the attacks never see the intervals.
pub(super) fn values_from_intervals(
    records: usize,
    sets: &[BTreeSet<usize>],
    queries: &[(u64, u64)],
    lo: u64,
    hi: u64,
) -> Vec<u64> {
    let mut returned: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); records];
    for (q, set) in sets.iter().enumerate() {
        for &r in set {
            if let Some(x) = returned.get_mut(r) {
                x.insert(q);
            }
        }
    }
    let holding: Vec<(u64, BTreeSet<usize>)> = (lo..=hi)
        .map(|v| {
            let qs = queries
                .iter()
                .enumerate()
                .filter(|(_, (a, b))| *a <= v && v <= *b)
                .map(|(q, _)| q)
                .collect();
            (v, qs)
        })
        .collect();
    returned
        .iter()
        .map(|qs| {
            holding
                .iter()
                .find(|(_, h)| h == qs)
                .map_or(0, |(v, _)| v - lo + 1)
        })
        .collect()
}

/// A fast hash for 16-byte windows of random bytes (no adversary chooses
/// them against this harness).
#[derive(Clone, Copy, Default)]
pub(super) struct Mix;

/// The state of [`Mix`].
#[derive(Default)]
pub(super) struct MixHasher(u64);

impl std::hash::BuildHasher for Mix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u128(&mut self, x: u128) {
        let x = (x as u64) ^ ((x >> 64) as u64).rotate_left(29);
        self.0 = (x ^ (x >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Which stored records each query returned, as the server can tell from
/// bytes alone: a record is named by the 16-byte windows of its insertion
/// request that no other insertion request holds (its sealed bytes are
/// random); a query returned it when its responses hold such a window.
/// No protocol layout is used.
pub(super) fn returned_records(
    insertions: &[Vec<u8>],
    responses: &[Vec<Vec<u8>>],
) -> (Vec<BTreeSet<usize>>, usize) {
    let window = |w: &[u8]| {
        let mut b = [0u8; 16];
        b.copy_from_slice(w);
        u128::from_le_bytes(b)
    };
    let mut owner: std::collections::HashMap<u128, Option<usize>, Mix> = Default::default();
    for (i, req) in insertions.iter().enumerate() {
        for w in req.windows(16) {
            owner
                .entry(window(w))
                .and_modify(|o| {
                    if *o != Some(i) {
                        *o = None;
                    }
                })
                .or_insert(Some(i));
        }
    }
    let mut seen = BTreeSet::new();
    let sets: Vec<BTreeSet<usize>> = responses
        .iter()
        .map(|rs| {
            let mut set = BTreeSet::new();
            for r in rs {
                for w in r.windows(16) {
                    if let Some(Some(i)) = owner.get(&window(w)) {
                        set.insert(*i);
                    }
                }
            }
            seen.extend(set.iter().copied());
            set
        })
        .collect();
    (sets, seen.len())
}
