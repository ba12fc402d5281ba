//! Counting of primitive calls.
//!
//! Every primitive in this crate reports each call here, by [`Primitive`]
//! kind. Two figures are kept per kind, as in Bogatov, Kollios and Reyzin
//! (VLDB 2019, Table 4):
//!
//! - **total**: every call, including calls a primitive makes inside
//!   another primitive (a PRG built on a PRF counts both);
//! - **pure**: only calls made from outside any primitive, that is the
//!   calls a scheme makes itself.
//!
//! Counters are thread-local plain integers, so counting costs a few
//! instructions and needs no synchronisation; it stays on in benchmarks.
//! A measurement takes a [`snapshot`] before and after and subtracts
//! ([`PrimitiveCounts::since`]). Work done on another thread is counted on
//! that thread.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

/// The kinds of primitive that are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Primitive {
    /// Pseudorandom function evaluation (one output).
    Prf,
    /// Pseudorandom generator: one request for output bytes.
    Prg,
    /// Pseudorandom permutation evaluation (forward or inverse).
    Prp,
    /// Symmetric (authenticated) encryption or decryption of one message.
    Ske,
    /// Cryptographic hash evaluation (plain or keyed).
    Hash,
    /// Hypergeometric sample (BCLO OPE).
    HgSample,
    /// Property-preserving hash evaluation or comparison (CLOZ ORE).
    Pph,
    /// Pairing evaluation.
    Pairing,
    /// Scalar multiplication / exponentiation in a prime-order group.
    GroupExp,
    /// Public-key encryption or decryption.
    Pke,
    /// Tree traversal step of a stateful scheme (FH-OPE).
    Traversal,
}

impl Primitive {
    /// Every kind, in a fixed order.
    pub const ALL: [Primitive; KINDS] = [
        Primitive::Prf,
        Primitive::Prg,
        Primitive::Prp,
        Primitive::Ske,
        Primitive::Hash,
        Primitive::HgSample,
        Primitive::Pph,
        Primitive::Pairing,
        Primitive::GroupExp,
        Primitive::Pke,
        Primitive::Traversal,
    ];

    /// A short lower-case name used in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Primitive::Prf => "prf",
            Primitive::Prg => "prg",
            Primitive::Prp => "prp",
            Primitive::Ske => "ske",
            Primitive::Hash => "hash",
            Primitive::HgSample => "hg",
            Primitive::Pph => "pph",
            Primitive::Pairing => "pairing",
            Primitive::GroupExp => "group_exp",
            Primitive::Pke => "pke",
            Primitive::Traversal => "traversal",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Number of primitive kinds.
pub const KINDS: usize = 11;

/// The counters of one thread. Pure counts are derived as `total - nested`,
/// so a top-level call (the common case) updates a single counter.
struct Counters {
    total: [Cell<u64>; KINDS],
    /// Calls made inside another primitive.
    nested: [Cell<u64>; KINDS],
    depth: Cell<u32>,
}

thread_local! {
    static COUNTERS: Counters = const {
        Counters {
            total: [const { Cell::new(0) }; KINDS],
            nested: [const { Cell::new(0) }; KINDS],
            depth: Cell::new(0),
        }
    };
}

/// Records `n` calls of `kind` made at the current nesting depth.
///
/// Use this for a leaf primitive that calls no other counted primitive.
#[inline]
pub fn record(kind: Primitive, n: u64) {
    let i = kind.index();
    COUNTERS.with(|c| {
        c.total[i].set(c.total[i].get().wrapping_add(n));
        if c.depth.get() != 0 {
            c.nested[i].set(c.nested[i].get().wrapping_add(n));
        }
    });
}

/// Records one call of `kind` and marks the current thread as inside a
/// primitive until the returned guard is dropped, so that primitives called
/// meanwhile count as total but not as pure.
#[inline]
pub fn enter(kind: Primitive) -> Nested {
    record(kind, 1);
    COUNTERS.with(|c| c.depth.set(c.depth.get() + 1));
    Nested { _private: () }
}

/// Guard returned by [`enter`]; leaving the primitive when dropped.
#[must_use = "the primitive is left when this guard is dropped"]
pub struct Nested {
    _private: (),
}

impl Drop for Nested {
    #[inline]
    fn drop(&mut self) {
        COUNTERS.with(|c| c.depth.set(c.depth.get().saturating_sub(1)));
    }
}

/// Counts of primitive calls by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimitiveCounts {
    /// Every call, nested ones included, indexed like [`Primitive::ALL`].
    pub total: [u64; KINDS],
    /// Calls made from outside any primitive, indexed like [`Primitive::ALL`].
    pub pure: [u64; KINDS],
}

impl PrimitiveCounts {
    /// Total calls of `kind`.
    pub fn total(&self, kind: Primitive) -> u64 {
        self.total[kind.index()]
    }

    /// Pure calls of `kind`.
    pub fn pure(&self, kind: Primitive) -> u64 {
        self.pure[kind.index()]
    }

    /// The calls made between `earlier` and `self`.
    pub fn since(&self, earlier: &PrimitiveCounts) -> PrimitiveCounts {
        let mut out = PrimitiveCounts::default();
        for i in 0..KINDS {
            out.total[i] = self.total[i].wrapping_sub(earlier.total[i]);
            out.pure[i] = self.pure[i].wrapping_sub(earlier.pure[i]);
        }
        out
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &PrimitiveCounts) {
        for i in 0..KINDS {
            self.total[i] = self.total[i].wrapping_add(other.total[i]);
            self.pure[i] = self.pure[i].wrapping_add(other.pure[i]);
        }
    }

    /// Kinds with a non-zero total, with (total, pure).
    pub fn nonzero(&self) -> impl Iterator<Item = (Primitive, u64, u64)> + '_ {
        Primitive::ALL
            .iter()
            .map(|&k| (k, self.total(k), self.pure(k)))
            .filter(|&(_, t, _)| t != 0)
    }
}

/// The counts of the current thread so far.
pub fn snapshot() -> PrimitiveCounts {
    let mut out = PrimitiveCounts::default();
    COUNTERS.with(|c| {
        for i in 0..KINDS {
            out.total[i] = c.total[i].get();
            out.pure[i] = c.total[i].get().wrapping_sub(c.nested[i].get());
        }
    });
    out
}

/// Adds calls made on another thread (measured there with [`measure`]) to
/// the current thread's counts, at the current nesting depth: work a
/// primitive's caller split across threads counts as if it ran here.
pub fn absorb(counts: &PrimitiveCounts) {
    COUNTERS.with(|c| {
        let inside = c.depth.get() != 0;
        for i in 0..KINDS {
            c.total[i].set(c.total[i].get().wrapping_add(counts.total[i]));
            let nested = if inside {
                counts.total[i]
            } else {
                counts.total[i].wrapping_sub(counts.pure[i])
            };
            c.nested[i].set(c.nested[i].get().wrapping_add(nested));
        }
    });
}

/// Runs `f` and returns its result with the primitive calls it made.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, PrimitiveCounts) {
    let before = snapshot();
    let out = f();
    (out, snapshot().since(&before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absorbed_counts_add_up_as_if_made_here() {
        let ((), there) = std::thread::spawn(|| {
            measure(|| {
                record(Primitive::Prf, 3);
                let _g = enter(Primitive::Prg);
                record(Primitive::Prf, 2);
            })
        })
        .join()
        .unwrap();
        let ((), here) = measure(|| absorb(&there));
        assert_eq!(here, there);
        assert_eq!(here.total(Primitive::Prf), 5);
        assert_eq!(here.pure(Primitive::Prf), 3);
        assert_eq!(here.pure(Primitive::Prg), 1);
        let ((), inside) = measure(|| {
            let _g = enter(Primitive::Ske);
            absorb(&there);
        });
        assert_eq!(inside.total(Primitive::Prf), 5);
        assert_eq!(inside.pure(Primitive::Prf), 0);
    }

    #[test]
    fn nested_calls_count_in_total_but_not_pure() {
        let ((), c) = measure(|| {
            let _outer = enter(Primitive::Prg);
            record(Primitive::Prf, 3);
        });
        assert_eq!(c.total(Primitive::Prg), 1);
        assert_eq!(c.pure(Primitive::Prg), 1);
        assert_eq!(c.total(Primitive::Prf), 3);
        assert_eq!(c.pure(Primitive::Prf), 0);
        let ((), c) = measure(|| record(Primitive::Prf, 2));
        assert_eq!(c.pure(Primitive::Prf), 2);
    }

    #[test]
    fn all_lists_every_kind_in_index_order() {
        for (i, k) in Primitive::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
