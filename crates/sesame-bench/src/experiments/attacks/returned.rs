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
///
/// Built once from the insertion requests, it reads each query's
/// responses as they come ([`Returned::query`]) and keeps only the set of
/// records they returned: a run holds one query's response bytes at a
/// time, never every query's, and its table of windows has one entry per
/// 16 bytes inserted, not one per byte (Path ORAM's insertions write
/// whole paths: a table of every window made the standard-scale run peak
/// at 3.5 GB and the full-scale one pass 24 GB).
pub(super) struct Returned {
    /// Each 16-byte window of an insertion request: the record it names,
    /// or `None` where more than one request holds it.
    owner: std::collections::HashMap<u128, Option<usize>, Mix>,
    /// Records some query returned so far.
    seen: BTreeSet<usize>,
}

fn window(w: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(w);
    u128::from_le_bytes(b)
}

impl Returned {
    /// The names of the records inserted by `insertions` (one request's
    /// bytes per record, in record order).
    ///
    /// The table holds the windows at offsets 0, 16, 32, ... of each
    /// request (one entry per 16 bytes inserted), each checked against
    /// every window, at every offset, of every other request: a window
    /// kept names its record exactly as before. A record whose sealed
    /// bytes run 31 bytes or more (every range protocol's: a nonce, the
    /// record and a tag) has a whole aligned window inside them, which a
    /// response holding those bytes at any offset shows.
    pub(super) fn new(insertions: &[Vec<u8>]) -> Returned {
        let mut owner: std::collections::HashMap<u128, Option<usize>, Mix> = Default::default();
        for (i, req) in insertions.iter().enumerate() {
            for w in req.chunks_exact(16) {
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
        for (i, req) in insertions.iter().enumerate() {
            for w in req.windows(16) {
                if let Some(o) = owner.get_mut(&window(w)) {
                    if o.is_some_and(|j| j != i) {
                        *o = None;
                    }
                }
            }
        }
        Returned {
            owner,
            seen: BTreeSet::new(),
        }
    }

    /// The records one query's `responses` returned.
    pub(super) fn query(&mut self, responses: &[Vec<u8>]) -> BTreeSet<usize> {
        let mut set = BTreeSet::new();
        for r in responses {
            for w in r.windows(16) {
                if let Some(Some(i)) = self.owner.get(&window(w)) {
                    set.insert(*i);
                }
            }
        }
        self.seen.extend(set.iter().copied());
        set
    }

    /// Windows in the table.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.owner.len()
    }

    /// How many distinct records the queries read so far returned.
    pub(super) fn identified(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Insertion requests as a range protocol's: record `i`'s request
    /// holds framing every request shares, its own 36 sealed bytes
    /// (random) and, like an ORAM path written back, fresh random bytes up
    /// to `len`.
    fn insertions(records: usize, len: usize, seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let sealed: Vec<Vec<u8>> = (0..records)
            .map(|_| (0..36).map(|_| rng.gen()).collect())
            .collect();
        let requests = (0..records)
            .map(|i| {
                let mut r = vec![7u8; 20 + i % 5];
                r.extend_from_slice(&sealed[i]);
                r.extend((r.len()..len).map(|_| rng.gen::<u8>()));
                r
            })
            .collect();
        (sealed, requests)
    }

    #[test]
    fn names_records_at_any_offset_of_a_response() {
        let (sealed, requests) = insertions(60, 600, 1);
        let mut returned = Returned::new(&requests);
        for shift in 0..17 {
            // A response holding records 3, 17 and 42 at shifting offsets
            // between other bytes.
            let mut response = vec![1u8; shift];
            for k in [3, 17, 42] {
                response.extend_from_slice(&sealed[k]);
                response.extend(std::iter::repeat_n(9u8, shift + 3));
            }
            assert_eq!(
                returned.query(&[response]),
                BTreeSet::from([3, 17, 42]),
                "shift {shift}"
            );
        }
        assert_eq!(returned.query(&[vec![0u8; 500]]), BTreeSet::new());
        assert_eq!(returned.identified(), 3);
    }

    #[test]
    fn the_table_is_bounded_by_the_insertions_bytes_over_16() {
        // The table of windows grows with the bytes inserted, one entry
        // per 16 of them, not one per byte: Path ORAM's insertions write
        // whole paths (the full-scale run's grew past 24 GB).
        let (_, requests) = insertions(200, 2000, 2);
        let bytes: usize = requests.iter().map(Vec::len).sum();
        let returned = Returned::new(&requests);
        assert!(
            returned.entries() <= bytes / 16 + requests.len(),
            "{} entries for {bytes} bytes inserted",
            returned.entries()
        );
    }
}
