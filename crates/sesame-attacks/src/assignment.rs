//! The assignment problem: give each row of a cost matrix its own column
//! so that the total cost is least (H. W. Kuhn, "The Hungarian method for
//! the assignment problem", 1955; J. Munkres, 1957). The cumulative
//! attack ([`crate::ordered::cumulative`]) uses it as Naveed, Kamara and
//! Wright do.
//!
//! This is the shortest-augmenting-path form with row and column
//! potentials: rows are added one at a time, each along the cheapest path
//! of reduced costs to a free column, in `O(n²·m)` for `n` rows and `m ≥ n`
//! columns.

/// For each row of `cost` (`n` rows of `m` costs, `n ≤ m`), the column
/// it gets, each column at most once, minimising the sum of the chosen
/// costs. `None` when the rows are not all of one length, there are more
/// rows than columns, or a cost is not finite.
pub fn minimum(cost: &[Vec<f64>]) -> Option<Vec<usize>> {
    let n = cost.len();
    let Some(first) = cost.first() else {
        return Some(Vec::new());
    };
    let m = first.len();
    if n > m
        || cost
            .iter()
            .any(|r| r.len() != m || r.iter().any(|c| !c.is_finite()))
    {
        return None;
    }
    // Index 0 is a virtual column from which each new row starts;
    // `owner[j]` is the row (from 1) holding column `j`, 0 for none.
    let mut row_pot = vec![0.0f64; n + 1];
    let mut col_pot = vec![0.0f64; m + 1];
    let mut owner = vec![0usize; m + 1];
    let mut back = vec![0usize; m + 1];
    for row in 1..=n {
        owner[0] = row;
        let mut col = 0;
        let mut slack = vec![f64::INFINITY; m + 1];
        let mut reached = vec![false; m + 1];
        loop {
            reached[col] = true;
            let r = owner[col];
            let mut delta = f64::INFINITY;
            let mut next = None;
            for j in 1..=m {
                if reached[j] {
                    continue;
                }
                let reduced = cost[r - 1][j - 1] - row_pot[r] - col_pot[j];
                if reduced < slack[j] {
                    slack[j] = reduced;
                    back[j] = col;
                }
                if slack[j] < delta {
                    delta = slack[j];
                    next = Some(j);
                }
            }
            // With n ≤ m finite costs, an unreached column always exists.
            let next = next?;
            for j in 0..=m {
                if reached[j] {
                    row_pot[owner[j]] += delta;
                    col_pot[j] -= delta;
                } else {
                    slack[j] -= delta;
                }
            }
            col = next;
            if owner[col] == 0 {
                break;
            }
        }
        // Shift the rows along the path back to the virtual column.
        while col != 0 {
            let prev = back[col];
            owner[col] = owner[prev];
            col = prev;
        }
    }
    let mut out = vec![0usize; n];
    for (j, &r) in owner.iter().enumerate().skip(1) {
        if r != 0 {
            out[r - 1] = j - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn total(cost: &[Vec<f64>], a: &[usize]) -> f64 {
        a.iter().enumerate().map(|(i, &j)| cost[i][j]).sum()
    }

    /// The least total over every injective assignment, by enumeration.
    fn brute(cost: &[Vec<f64>], row: usize, used: &mut Vec<bool>) -> f64 {
        if row == cost.len() {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        for j in 0..used.len() {
            if !used[j] {
                used[j] = true;
                best = best.min(cost[row][j] + brute(cost, row + 1, used));
                used[j] = false;
            }
        }
        best
    }

    #[test]
    fn a_known_instance() {
        // Greedy (row by row, cheapest free column) would pay 1 + 7 + 9.
        let cost = vec![
            vec![1.0, 2.0, 3.0],
            vec![2.0, 4.0, 7.0],
            vec![3.0, 6.0, 9.0],
        ];
        let a = minimum(&cost).expect("square and finite");
        assert_eq!(total(&cost, &a), 3.0 + 4.0 + 3.0);
        let mut cols = a.clone();
        cols.sort_unstable();
        assert_eq!(cols, vec![0, 1, 2]);
    }

    /// Square and rectangular random matrices: the same least total as
    /// enumeration, and no column twice.
    #[test]
    fn matches_enumeration_on_random_matrices() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        for case in 0..200 {
            let n = rng.gen_range(1..=6);
            let m = rng.gen_range(n..=7);
            let cost: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    (0..m)
                        .map(|_| f64::from(rng.gen_range(-20..50i32)) / 4.0)
                        .collect()
                })
                .collect();
            let a = minimum(&cost).expect("n ≤ m, finite");
            let mut seen = vec![false; m];
            for &j in &a {
                assert!(!seen[j], "case {case}: column {j} twice");
                seen[j] = true;
            }
            let want = brute(&cost, 0, &mut vec![false; m]);
            assert!((total(&cost, &a) - want).abs() < 1e-9, "case {case}");
        }
    }

    #[test]
    fn refuses_what_has_no_assignment() {
        assert_eq!(minimum(&[]), Some(vec![]));
        assert_eq!(minimum(&[vec![1.0], vec![2.0]]), None);
        assert_eq!(minimum(&[vec![1.0, 2.0], vec![2.0]]), None);
        assert_eq!(minimum(&[vec![f64::NAN, 2.0]]), None);
        assert_eq!(minimum(&[vec![]]), None);
    }
}
