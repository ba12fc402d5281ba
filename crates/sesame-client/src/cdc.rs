//! Content-defined chunking: cut points that depend on the bytes around
//! them (a gear rolling hash over the last 64 bytes), so that bytes
//! inserted or removed in one place move the cuts near it only, and the
//! chunks of unchanged regions stay the same. The shared client state is
//! sealed and stored in such chunks, so that a commit re-sends what
//! changed rather than the whole state (`session::shared`).

/// The fewest bytes of a chunk (but the last).
pub(crate) const MIN_CHUNK: usize = 4 << 10;
/// The most bytes of a chunk.
pub(crate) const MAX_CHUNK: usize = 64 << 10;
/// Bits of the hash that must be zero for a cut: about one cut per
/// `2^CUT_BITS` bytes past [`MIN_CHUNK`] (12 KiB chunks on average).
const CUT_BITS: u32 = 13;

/// 256 fixed pseudo-random words (SplitMix64 from a fixed seed).
const fn gear() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut x: u64 = 0x5345_5341_4d45_4344; // "SESAMECD"
    let mut i = 0;
    while i < 256 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        table[i] = z ^ (z >> 31);
        i += 1;
    }
    table
}

static GEAR: [u64; 256] = gear();

/// The chunks of `data`, in order: each at least [`MIN_CHUNK`] bytes
/// (but the last) and at most [`MAX_CHUNK`]. Empty data has no chunk.
pub(crate) fn chunks(data: &[u8]) -> Vec<&[u8]> {
    chunks_at(data, 0)
}

/// As [`chunks`], with every size `2^level` times larger (a cut where
/// `level` more bits of the hash are zero): the chunks of a level are
/// the same for the same bytes, so a store that keeps its number of
/// chunks bounded moves to the next level only when its data doubles.
pub(crate) fn chunks_at(data: &[u8], level: u32) -> Vec<&[u8]> {
    let level = level.min(MAX_LEVEL);
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let cut = cut(rest, level);
        let (chunk, tail) = rest.split_at(cut);
        out.push(chunk);
        rest = tail;
    }
    out
}

/// The highest level [`chunks_at`] takes.
pub(crate) const MAX_LEVEL: u32 = 12;

/// The average bytes of a chunk of `level` (about).
pub(crate) fn average(level: u32) -> usize {
    (MIN_CHUNK + (1 << CUT_BITS)) << level.min(MAX_LEVEL)
}

/// The most bytes of a chunk of `level`.
pub(crate) fn max_at(level: u32) -> usize {
    MAX_CHUNK << level.min(MAX_LEVEL)
}

/// The length of the first chunk of `data` (not empty) at `level`.
fn cut(data: &[u8], level: u32) -> usize {
    let min = MIN_CHUNK << level;
    if data.len() <= min {
        return data.len();
    }
    let end = data.len().min(MAX_CHUNK << level);
    let shift = 64 - (CUT_BITS + level);
    let mut hash: u64 = 0;
    for (i, &b) in data.iter().enumerate().take(end) {
        hash = (hash << 1).wrapping_add(GEAR[usize::from(b)]);
        if i + 1 >= min && hash >> shift == 0 {
            return i + 1;
        }
    }
    end
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rand::{RngCore, SeedableRng};

    fn random(n: usize, seed: u64) -> Vec<u8> {
        let mut data = vec![0u8; n];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
        data
    }

    #[test]
    fn chunks_cover_the_data_within_their_bounds() {
        for n in [0, 1, MIN_CHUNK, MIN_CHUNK + 1, 300_000] {
            let data = random(n, n as u64);
            let parts = chunks(&data);
            assert_eq!(parts.concat(), data);
            for (i, p) in parts.iter().enumerate() {
                assert!(p.len() <= MAX_CHUNK);
                assert!(p.len() >= MIN_CHUNK || i + 1 == parts.len());
            }
        }
        // Bytes that never cut (zeros) are cut at the maximum.
        let zeros = vec![0u8; 3 * MAX_CHUNK];
        assert!(chunks(&zeros).iter().all(|c| c.len() == MAX_CHUNK));
        // A level up: fewer, larger chunks, within its bounds.
        let data = random(1 << 20, 3);
        let (low, high) = (chunks_at(&data, 0), chunks_at(&data, 3));
        assert_eq!(high.concat(), data);
        assert!(
            high.len() * 4 < low.len(),
            "{} vs {}",
            high.len(),
            low.len()
        );
        assert!(high.iter().all(|c| c.len() <= max_at(3)));
    }

    #[test]
    fn an_insertion_changes_only_the_chunks_around_it() {
        let data = random(1 << 20, 7);
        let mut edited = data.clone();
        edited.splice(500_000..500_000, random(100, 8));
        let before: std::collections::HashSet<&[u8]> = chunks(&data).into_iter().collect();
        let after = chunks(&edited);
        let new = after.iter().filter(|c| !before.contains(*c)).count();
        assert!(new <= 3, "{new} of {} chunks changed", after.len());
    }
}
