//! Plaintext bits from CLWW's leakage (after P. Grubbs, K. Sekniqi,
//! V. Bindschaedler, M. Naveed, T. Ristenpart, "Leakage-Abuse Attacks
//! against Order-Revealing Encryption", S&P 2017, §6, on the ORE of
//! Chenette, Lewi, Weis, Wu, FSE 2016).
//!
//! A CLWW ciphertext is one symbol per plaintext bit; two ciphertexts
//! first differ where their plaintexts first differ, so comparing them
//! reveals that position (the "most significant differing bit") besides
//! the order. Sort a column's distinct ciphertexts; for two neighbours
//! first differing at position `p`, the smaller has bit `p` clear and the
//! larger has it set, and both share every bit before `p`. At a position
//! `p`, the column splits into runs of neighbours whose first difference
//! lies after `p`: a run shares bit `p`, which is set when the run starts
//! at a difference at `p` and clear when it ends at one. Every bit so
//! determined is right (the inference is exact); the others stay unknown.
//!
//! Deviation: the paper combines this leakage with auxiliary data (a
//! known distribution) to guess the remaining bits as well; we report
//! only the bits the leakage alone determines, so our figure is a lower
//! bound of what the paper's attack names. We compare no figure of the
//! paper.

use std::cmp::Ordering;

/// What the attack learnt of one plaintext: the bits it determined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bits {
    width: u32,
    known: u64,
    value: u64,
}

impl Bits {
    /// Bit `i`, counting from the most significant (`0`), if determined.
    pub fn bit(&self, i: u32) -> Option<bool> {
        if i >= self.width {
            return None;
        }
        let m = 1u64 << (self.width - 1 - i);
        (self.known & m != 0).then_some(self.value & m != 0)
    }

    /// How many bits were determined.
    pub fn known(&self) -> usize {
        self.known.count_ones() as usize
    }

    fn set(&mut self, i: u32, v: bool) {
        let m = 1u64 << (self.width - 1 - i);
        self.known |= m;
        if v {
            self.value |= m;
        }
    }
}

/// For each entry of `column` (`width`-bit plaintexts, at most 64), the
/// bits its ciphertext's order and first differing positions determine.
/// `cmp` is the scheme's comparison; `first_difference` the position
/// (from the most significant, `0`) at which two ciphertexts first
/// differ, `None` when they are equal.
pub fn attack<C>(
    column: &[C],
    width: u32,
    cmp: &dyn Fn(&C, &C) -> Ordering,
    first_difference: &dyn Fn(&C, &C) -> Option<u32>,
) -> Vec<Bits> {
    let width = width.clamp(1, 64);
    let mut order: Vec<usize> = (0..column.len()).collect();
    order.sort_by(|&a, &b| cmp(&column[a], &column[b]));
    // Distinct ciphertexts in order, and each entry's place among them.
    let mut distinct: Vec<usize> = Vec::new();
    let mut place = vec![0usize; column.len()];
    for &i in &order {
        match distinct.last() {
            Some(&last) if cmp(&column[last], &column[i]) == Ordering::Equal => {}
            _ => distinct.push(i),
        }
        place[i] = distinct.len() - 1;
    }
    // First differing position between neighbours (`width` if the
    // comparison and the positions disagree: nothing is inferred there).
    let diff: Vec<u32> = distinct
        .windows(2)
        .map(|w| {
            first_difference(&column[w[0]], &column[w[1]])
                .filter(|p| *p < width)
                .unwrap_or(width)
        })
        .collect();
    let m = distinct.len();
    let mut learnt = vec![
        Bits {
            width,
            ..Bits::default()
        };
        m
    ];
    for p in 0..width {
        let mut start = 0;
        while start < m {
            // The run: neighbours whose first difference is after `p`.
            let mut end = start;
            while end + 1 < m && diff[end] > p {
                end += 1;
            }
            let set = start > 0 && diff[start - 1] == p;
            let clear = end + 1 < m && diff[end] == p;
            if set != clear {
                for b in &mut learnt[start..=end] {
                    b.set(p, set);
                }
            }
            start = end + 1;
        }
    }
    (0..column.len()).map(|i| learnt[place[i]]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_difference(width: u32) -> impl Fn(&u64, &u64) -> Option<u32> {
        move |a, b| {
            let x = a ^ b;
            (x != 0).then(|| x.leading_zeros() - (64 - width))
        }
    }

    fn right(got: &[Bits], values: &[u64], width: u32) -> usize {
        got.iter()
            .zip(values)
            .map(|(g, v)| {
                (0..width)
                    .filter(|i| g.bit(*i) == Some((v >> (width - 1 - i)) & 1 == 1))
                    .count()
            })
            .sum()
    }

    /// A column holding every 5-bit value: the leakage determines every
    /// bit of every entry.
    #[test]
    fn a_dense_column_gives_every_bit() {
        let values: Vec<u64> = (0..32).chain([7, 7, 30]).collect();
        let got = attack(&values, 5, &|a: &u64, b| a.cmp(b), &first_difference(5));
        assert_eq!(right(&got, &values, 5), values.len() * 5);
        assert!(got.iter().all(|g| g.known() == 5));
    }

    /// One distinct value: no difference, nothing learnt. Two values
    /// differing only at the last bit: that bit alone.
    #[test]
    fn without_differences_nothing_is_learnt() {
        let same = vec![9u64; 10];
        let got = attack(&same, 8, &|a: &u64, b| a.cmp(b), &first_difference(8));
        assert!(got.iter().all(|g| g.known() == 0));
        let two = vec![0b1010_1010u64, 0b1010_1011];
        let got = attack(&two, 8, &|a: &u64, b| a.cmp(b), &first_difference(8));
        assert_eq!(got[0].known(), 1);
        assert_eq!(got[0].bit(7), Some(false));
        assert_eq!(got[1].bit(7), Some(true));
        assert_eq!(got[1].bit(0), None);
    }

    /// Whatever is claimed is right, on a sparse random column.
    #[test]
    fn every_claimed_bit_is_right() {
        let mut x = 12345u64;
        let values: Vec<u64> = (0..200)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 40) & 0xfff
            })
            .collect();
        let got = attack(&values, 12, &|a: &u64, b| a.cmp(b), &first_difference(12));
        let known: usize = got.iter().map(Bits::known).sum();
        assert_eq!(right(&got, &values, 12), known);
        assert!(known > 0);
    }
}
