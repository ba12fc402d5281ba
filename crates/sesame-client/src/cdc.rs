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
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let cut = cut(rest);
        let (chunk, tail) = rest.split_at(cut);
        out.push(chunk);
        rest = tail;
    }
    out
}

/// The length of the first chunk of `data` (not empty).
fn cut(data: &[u8]) -> usize {
    if data.len() <= MIN_CHUNK {
        return data.len();
    }
    let end = data.len().min(MAX_CHUNK);
    let mut hash: u64 = 0;
    for (i, &b) in data.iter().enumerate().take(end) {
        hash = (hash << 1).wrapping_add(GEAR[usize::from(b)]);
        if i + 1 >= MIN_CHUNK && hash >> (64 - CUT_BITS) == 0 {
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
