//! The binary tree over the value domain and the Best Range Cover of
//! Kiayias, Papadopoulos, Triandopoulos and Zacharias, "Delegatable
//! pseudorandom functions and applications", CCS 2013.
//!
//! The tree over `0..2^bits` has `bits + 1` levels: level 0 holds the
//! leaves (one value each) and the node (`level`, `index`) covers the
//! values `index·2^level ..= (index + 1)·2^level - 1`; the root is
//! (`bits`, 0). Arithmetic runs on `u128`, so `bits = 64` cannot overflow.

/// A node of the tree over the value domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Node {
    /// Height above the leaves (0 for a leaf).
    pub level: u32,
    /// Position among the nodes of its level, from the left.
    pub index: u64,
}

impl Node {
    /// The SSE keyword of the node: the level byte, then the index in big
    /// endian (9 bytes).
    pub fn keyword(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(9);
        // Levels are at most 64, so the byte is exact.
        k.push(self.level.min(255) as u8);
        k.extend_from_slice(&self.index.to_be_bytes());
        k
    }

    /// The values the node covers, both ends included.
    pub fn range(&self) -> (u64, u64) {
        let lo = u128::from(self.index) << self.level;
        let hi = lo + (1u128 << self.level) - 1;
        // The caller's node lies in a domain of at most 2^64 values.
        (clamp(lo), clamp(hi))
    }
}

fn clamp(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The `bits + 1` nodes on the path from the leaf of `value` to the root:
/// the keywords a record with this value is indexed under.
pub fn path(value: u64, bits: u32) -> Vec<Node> {
    (0..=bits)
        .map(|level| Node {
            level,
            index: value.checked_shr(level).unwrap_or(0),
        })
        .collect()
}

/// The Best Range Cover of `[lo, hi]` in the tree of `0..2^bits`: the
/// fewest disjoint nodes whose values are exactly those of the interval,
/// from left to right. Empty when `lo > hi`; `hi` beyond the domain is
/// clamped to its last value.
///
/// This is Kiayias et al.'s algorithm in its iterative form: from the left
/// end, take the highest node that starts there and ends inside the
/// interval, and continue after it. A node starting at `x` can be no higher
/// than the alignment of `x` allows, and no higher than the remaining
/// length allows; the greedy choice meets both bounds, and the cover it
/// produces is the unique minimal decomposition into dyadic intervals.
pub fn best_range_cover(lo: u64, hi: u64, bits: u32) -> Vec<Node> {
    let bits = bits.min(64);
    let max = (1u128 << bits) - 1;
    let hi = u128::from(hi).min(max);
    let mut x = u128::from(lo);
    if x > hi {
        return Vec::new();
    }
    let end = hi + 1;
    let mut cover = Vec::new();
    while x < end {
        let aligned = if x == 0 {
            bits
        } else {
            x.trailing_zeros().min(bits)
        };
        let fits = 127 - (end - x).leading_zeros();
        let level = aligned.min(fits);
        cover.push(Node {
            level,
            index: clamp(x >> level),
        });
        x += 1u128 << level;
    }
    cover
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fewest dyadic intervals tiling `[lo, hi]`, by dynamic
    /// programming over every tiling.
    fn brute_force_minimum(lo: u64, hi: u64, bits: u32) -> usize {
        let n = (hi - lo + 1) as usize;
        let mut best = vec![usize::MAX; n + 1];
        best[n] = 0;
        for start in (0..n).rev() {
            let x = lo + start as u64;
            for level in 0..=bits {
                let size = 1u64 << level;
                if !x.is_multiple_of(size) || start as u64 + size > n as u64 {
                    continue;
                }
                let rest = best[start + size as usize];
                if rest != usize::MAX {
                    best[start] = best[start].min(rest + 1);
                }
            }
        }
        best[0]
    }

    #[test]
    fn covers_are_exact_disjoint_and_minimal_on_a_small_domain() {
        let bits = 5;
        for lo in 0..32u64 {
            for hi in lo..32u64 {
                let cover = best_range_cover(lo, hi, bits);
                let mut values = Vec::new();
                for node in &cover {
                    assert!(node.level <= bits);
                    let (a, b) = node.range();
                    values.extend(a..=b);
                }
                // Left to right and disjoint: the values come out in order,
                // each once, and are exactly the interval.
                assert_eq!(values, (lo..=hi).collect::<Vec<_>>(), "[{lo}, {hi}]");
                assert_eq!(
                    cover.len(),
                    brute_force_minimum(lo, hi, bits),
                    "[{lo}, {hi}]"
                );
                assert!(cover.len() <= 2 * bits as usize);
            }
        }
    }

    #[test]
    fn edge_intervals_and_the_full_width_domain() {
        assert!(best_range_cover(5, 4, 8).is_empty());
        assert_eq!(
            best_range_cover(0, 255, 8),
            vec![Node { level: 8, index: 0 }]
        );
        assert_eq!(
            best_range_cover(0, u64::MAX, 64),
            vec![Node {
                level: 64,
                index: 0
            }]
        );
        assert_eq!(
            Node {
                level: 64,
                index: 0
            }
            .range(),
            (0, u64::MAX)
        );
        assert_eq!(
            best_range_cover(u64::MAX, u64::MAX, 64),
            vec![Node {
                level: 0,
                index: u64::MAX
            }]
        );
        // hi beyond the domain is clamped.
        assert_eq!(best_range_cover(0, 1000, 8), best_range_cover(0, 255, 8));
        assert!(best_range_cover(300, 1000, 8).is_empty());
        let cover = best_range_cover(1, u64::MAX - 1, 64);
        assert_eq!(cover.len(), 126);
        let total: u128 = cover.iter().map(|n| 1u128 << n.level).sum();
        assert_eq!(total, u128::from(u64::MAX) - 1);
    }

    #[test]
    fn paths_run_from_the_leaf_to_the_root() {
        let p = path(u64::MAX, 64);
        assert_eq!(p.len(), 65);
        assert_eq!(
            p[0],
            Node {
                level: 0,
                index: u64::MAX
            }
        );
        assert_eq!(
            p[64],
            Node {
                level: 64,
                index: 0
            }
        );
        let p = path(13, 4);
        let indices: Vec<u64> = p.iter().map(|n| n.index).collect();
        assert_eq!(indices, vec![13, 6, 3, 1, 0]);
        for node in path(200, 8) {
            let (a, b) = node.range();
            assert!(a <= 200 && 200 <= b);
        }
        assert_ne!(
            Node { level: 1, index: 2 }.keyword(),
            Node { level: 2, index: 1 }.keyword()
        );
    }
}
