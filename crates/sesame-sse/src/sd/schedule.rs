//! SDd's merge schedule: the passes of a merge at each level and the
//! steps (positions read and written) each of its updates runs, fixed by
//! the level and the update count alone, so that what the server sees does
//! not depend on the keywords (module `sdd`).

use std::ops::Range;

use super::*;

/// One step of a merge, as positions (buffer, index): which it reads and
/// writes follows from the level and the step number alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// Reads `a` and `b`, writes the smaller to `to.0` and the larger to
    /// `to.1` (by keyword, or by label).
    Exchange {
        a: (u64, u64),
        b: (u64, u64),
        to: ((u64, u64), (u64, u64)),
        by_label: bool,
    },
    /// Reads the `len` entries of `array` from `start` (an aligned block),
    /// runs [`sort_block`] on them and writes them back.
    Block {
        array: u64,
        start: u64,
        len: u64,
        k: (u64, u64),
        top: u64,
        by_label: bool,
    },
    /// Reads `from` (NEW's array), writes it with its label to `to`
    /// (scratch).
    Count { from: (u64, u64), to: (u64, u64) },
    /// Reads `from` (scratch) and publishes it as a searchable entry.
    Publish { from: (u64, u64) },
    /// A whole merge of two buffers of `n` entries whose arrays fit in a
    /// block: reads both arrays, writes NEW's (`target`, in keyword order)
    /// and publishes its labelled entries in label order.
    Whole { from: [u64; 2], target: u64, n: u64 },
}

impl Op {
    /// The positions the step reads.
    pub(super) fn reads(&self) -> impl Iterator<Item = (u64, u64)> {
        positions(self.spans(false))
    }

    /// The positions the step writes.
    pub(super) fn writes(&self) -> impl Iterator<Item = (u64, u64)> {
        positions(self.spans(true))
    }

    /// What the step reads (or writes) as up to two runs of positions,
    /// `(buffer, range)`: no allocation per step.
    fn spans(&self, writes: bool) -> [(u64, Range<u64>); 2] {
        let one = |(b, p): (u64, u64)| (b, p..p + 1);
        let none = (0, 0..0);
        match (*self, writes) {
            (Op::Exchange { a, b, .. }, false) => [one(a), one(b)],
            (Op::Exchange { to, .. }, true) => [one(to.0), one(to.1)],
            (
                Op::Block {
                    array, start, len, ..
                },
                _,
            ) => [(array, start..start + len), none],
            (Op::Count { from, .. } | Op::Publish { from }, false) => [one(from), none],
            (Op::Count { from, to }, true) => [one(from), one(to)],
            (Op::Publish { .. }, true) => [none.clone(), none],
            (Op::Whole { from, n, .. }, false) => [(from[0], 0..n), (from[1], 0..n)],
            (Op::Whole { target, n, .. }, true) => [(target, 0..2 * n), none],
        }
    }
}

/// The positions of [`Op::spans`], in order.
fn positions(spans: [(u64, Range<u64>); 2]) -> impl Iterator<Item = (u64, u64)> {
    spans
        .into_iter()
        .flat_map(|(b, range)| range.map(move |p| (b, p)))
}

/// Log2 of the entries a merge unit holds in the client's hands at once.
pub(super) const BLOCK_BITS: u32 = 7;

/// One pass of a merge over arrays of `2n` entries, run in units of a
/// block (`min(2^BLOCK_BITS, 2n)` entries, or half as many
/// compare-exchanges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// Stage one of the bitonic merge: OLDEST's `c`-th entry against
    /// OLDER's `n - 1 - c`-th, the smaller to NEW's `c`, the larger to
    /// `c + n`.
    First,
    /// The compare-exchanges `(k, j)` of a bitonic network over a whole
    /// array (NEW's by keyword, the scratch by label), as in
    /// [`sort_block`].
    Wide { k: u64, j: u64, by_label: bool },
    /// The passes [`sort_block`] runs inside each aligned block.
    Block {
        k: (u64, u64),
        top: u64,
        by_label: bool,
    },
    /// NEW's array scanned in order, each entry labelled into the scratch.
    Count,
    /// The scratch array, in label order, published as NEW's entries.
    Publish,
    /// The whole merge at once ([`Op::Whole`]), for arrays of at most a
    /// block.
    Whole,
}

/// The fixed schedule of a merge at level `l`: its passes, each of
/// `2n / block` units. Compare-exchanges `j` apart for `j` below the block
/// size run inside a block in the client's hands: one read and one write
/// of each entry for up to `BLOCK_BITS` passes of the network.
pub(super) struct Schedule {
    n: u64,
    block: u64,
    passes: Vec<Pass>,
}

impl Schedule {
    pub(super) fn of(l: usize) -> Schedule {
        let n = 1u64 << l;
        let size = 2 * n;
        let block = size.min(1 << BLOCK_BITS);
        if size <= block {
            // Both inputs and NEW's array fit in the client's hands: the
            // network's passes would each read and write all of them.
            return Schedule {
                n,
                block,
                passes: vec![Pass::Whole],
            };
        }
        let mut passes = vec![Pass::First];
        // The rest of the bitonic merge into NEW's array, ascending.
        let mut h = n / 2;
        while h >= block {
            passes.push(Pass::Wide {
                k: size,
                j: h,
                by_label: false,
            });
            h /= 2;
        }
        if h >= 1 {
            passes.push(Pass::Block {
                k: (size, size),
                top: h,
                by_label: false,
            });
        }
        passes.push(Pass::Count);
        // The bitonic sort of the scratch by label: every `k` up to the
        // block size inside blocks, then per larger `k` the wide passes
        // and the rest inside blocks.
        passes.push(Pass::Block {
            k: (2, block),
            top: block / 2,
            by_label: true,
        });
        let mut k = 2 * block;
        while k <= size {
            let mut j = k / 2;
            while j >= block {
                passes.push(Pass::Wide {
                    k,
                    j,
                    by_label: true,
                });
                j /= 2;
            }
            passes.push(Pass::Block {
                k: (k, k),
                top: block / 2,
                by_label: true,
            });
            k *= 2;
        }
        passes.push(Pass::Publish);
        Schedule { n, block, passes }
    }

    /// Units of the whole merge.
    pub(super) fn len(&self) -> u64 {
        self.passes.len() as u64 * (2 * self.n / self.block)
    }

    /// Units done after `updates` updates: spread evenly over the merge's
    /// `n` updates, so that it ends after exactly `n`, half the time before
    /// its level could overflow.
    pub(super) fn done_after(&self, updates: u64) -> u64 {
        let done = u128::from(updates) * u128::from(self.len()) / u128::from(self.n);
        u64::try_from(done).map_or(self.len(), |d| d.min(self.len()))
    }

    /// The steps of unit `u` of merge `m`.
    pub(super) fn unit(&self, m: &Merge, u: u64) -> Vec<Op> {
        let per = 2 * self.n / self.block;
        let (n, block) = (self.n, self.block);
        let Some(&pass) = self.passes.get((u / per) as usize) else {
            return Vec::new();
        };
        let x = u % per;
        let pairs = x * block / 2..(x + 1) * block / 2;
        let entries = x * block..(x + 1) * block;
        match pass {
            Pass::First => pairs
                .map(|c| Op::Exchange {
                    a: (m.from[0], c),
                    b: (m.from[1], n - 1 - c),
                    to: ((m.target, c), (m.target, c + n)),
                    by_label: false,
                })
                .collect(),
            Pass::Wide { k, j, by_label } => {
                let array = if by_label { m.scratch } else { m.target };
                pairs
                    .map(|c| {
                        let i = (c / j) * 2 * j + c % j;
                        let (lo, hi) = if i & k == 0 { (i, i + j) } else { (i + j, i) };
                        Op::Exchange {
                            a: (array, i),
                            b: (array, i + j),
                            to: ((array, lo), (array, hi)),
                            by_label,
                        }
                    })
                    .collect()
            }
            Pass::Block { k, top, by_label } => vec![Op::Block {
                array: if by_label { m.scratch } else { m.target },
                start: entries.start,
                len: block,
                k,
                top,
                by_label,
            }],
            Pass::Count => entries
                .map(|p| Op::Count {
                    from: (m.target, p),
                    to: (m.scratch, p),
                })
                .collect(),
            Pass::Publish => entries
                .map(|p| Op::Publish {
                    from: (m.scratch, p),
                })
                .collect(),
            Pass::Whole => vec![Op::Whole {
                from: m.from,
                target: m.target,
                n,
            }],
        }
    }
}
