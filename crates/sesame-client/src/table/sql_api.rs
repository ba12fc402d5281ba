//! Reading a query's records a batch at a time, for `sesame sql`: the
//! same plan, indexes and checks as [`Table::query`], with the matching
//! records fetched and decrypted `batch` at a time and handed on, so
//! that an answer of any size is held a batch at a time, and the reader
//! can stop the fetching (a client that went away).

use super::*;

impl Table {
    /// Answers a query (`None`: every record) as [`Table::query`] does and
    /// hands the matching records to `each`, in insertion order, until
    /// `each` returns `false`: `first` records in the first batch, then
    /// twice as many in each next one, at most `most`. Returns how many
    /// records matched in all.
    ///
    /// A small first batch lets the reader start on the first rows (a
    /// connection encoding and sending them) while the next are fetched
    /// and decrypted; growing batches keep the cost per batch (one
    /// store read, one hand-over) small for a large answer.
    pub fn query_batches(
        &mut self,
        text: Option<&str>,
        first: usize,
        most: usize,
        each: &mut dyn FnMut(Vec<Record>) -> bool,
    ) -> Result<usize> {
        let docs: Vec<DocumentInfo> = match text {
            None => {
                self.rows.resume_pending()?;
                self.rows.state.catalog.values().collect::<Result<_>>()?
            }
            Some(text) => {
                let plan = self.plan(text)?;
                self.matching_docs(&plan)?
            }
        };
        let total = docs.len();
        let mut handed = Ok(());
        for chunk in growing_chunks(&docs, first, most) {
            match self.fetch_records(chunk) {
                Ok(records) => {
                    if !each(records) {
                        break;
                    }
                }
                Err(e) => {
                    handed = Err(e);
                    break;
                }
            }
        }
        // The range payloads of records not handed (a reader that
        // stopped) are not kept past the answer.
        self.covered.clear();
        handed.map(|()| total)
    }
}

/// `items` cut into consecutive chunks of `first`, then twice as many
/// each time, at most `most` (both at least one).
fn growing_chunks<T>(items: &[T], first: usize, most: usize) -> impl Iterator<Item = &[T]> {
    let most = most.max(1);
    let mut size = first.clamp(1, most);
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        size = size.saturating_mul(2).min(most);
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    /// A profile in a fresh temporary folder and its table `t` holding
    /// `n` records: `id` (the key), `c` = `id % 3` (equality), `v` = `id`
    /// (range).
    fn table(n: i64) -> (tempfile::TempDir, Profile, Table) {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = Profile::create_with_kdf(
            tmp.path().join("p"),
            "pw",
            "fast",
            &sesame_core::Params::new(),
            crate::insecure::fast_kdf(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let schema = Schema::from_toml(
            "key = \"id\"\n[fields.id]\ntype = \"integer\"\nindex = [\"equality\"]\n\
             [fields.c]\ntype = \"integer\"\nindex = [\"equality\"]\n\
             [fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 16\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut t = Table::create(&p, "t", schema).unwrap_or_else(|e| panic!("{e}"));
        let records = (0..n)
            .map(|i| {
                let (id, c) = (i.to_string(), (i % 3).to_string());
                t.record_from_cells(
                    [("id", id.as_str()), ("c", c.as_str()), ("v", id.as_str())],
                    None,
                )
                .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        t.insert(records, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        (tmp, p, t)
    }

    fn batches(
        t: &mut Table,
        text: Option<&str>,
        first: usize,
        most: usize,
    ) -> (Vec<usize>, Vec<Record>) {
        let (mut sizes, mut all) = (Vec::new(), Vec::new());
        let total = t
            .query_batches(text, first, most, &mut |records| {
                sizes.push(records.len());
                all.extend(records);
                true
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(total, all.len());
        (sizes, all)
    }

    /// Whatever the accesses (the keyword index, whose hits carry their
    /// catalog entries; the range index; both combined), the batches hold
    /// the records a plaintext oracle over every record finds, in
    /// insertion order, after writes that replace and delete records.
    #[test]
    fn batches_answer_as_an_oracle_after_replacements_and_deletions() {
        let (_tmp, _p, mut t) = table(200);
        let replaced = (0..200)
            .filter(|i| i % 10 == 0)
            .map(|i: i64| {
                let (id, v) = (i.to_string(), (1000 + i).to_string());
                t.record_from_cells([("id", id.as_str()), ("c", "5"), ("v", v.as_str())], None)
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        t.insert(replaced, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.delete("c = 2 and v < 50")
                .unwrap_or_else(|e| panic!("{e}")),
            15
        );
        let all = t.records().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.len(), 185);
        let int = |r: &Record, i: usize| match r.values.get(i) {
            Some(Some(Value::Int(n))) => *n,
            other => panic!("{other:?}"),
        };
        type Pred = fn(i64, i64, i64) -> bool;
        let cases: [(&str, Pred); 8] = [
            ("c = 1", |_, c, _| c == 1),
            ("c = 5", |_, c, _| c == 5),
            ("c = 2", |_, c, _| c == 2),
            ("v between 20 and 120", |_, _, v| (20..=120).contains(&v)),
            ("c = 1 or v >= 1100", |_, c, v| c == 1 || v >= 1100),
            ("c = 0 and v < 100", |_, c, v| c == 0 && v < 100),
            ("id = 7", |id, _, _| id == 7),
            ("id = 10", |id, _, _| id == 10),
        ];
        for (text, pred) in cases {
            // `records` reads the catalog in identifier order: the
            // insertion order every answer keeps.
            let want: Vec<&Record> = all
                .iter()
                .filter(|r| pred(int(r, 0), int(r, 1), int(r, 2)))
                .collect();
            let (_, got) = batches(&mut t, Some(text), 1024, 1024);
            let got: Vec<&Record> = got.iter().collect();
            assert!(!got.is_empty(), "{text}");
            assert_eq!(got, want, "{text}");
        }
    }

    /// Batches start small and double up to the most, and together hold
    /// every matching record once, in the order one batch holds them.
    #[test]
    fn growing_batches_hand_every_record_once_in_order() {
        let (_tmp, _p, mut t) = table(120);
        for text in [Some("c = 1"), Some("v between 5 and 100"), None] {
            let (whole_sizes, whole) = batches(&mut t, text, 1024, 1024);
            assert_eq!(whole_sizes.len(), 1, "{text:?}");
            let (sizes, got) = batches(&mut t, text, 3, 16);
            assert_eq!(got, whole, "{text:?}");
            let n = whole.len();
            let mut want = Vec::new();
            let (mut size, mut left) = (3, n);
            while left > 0 {
                want.push(size.min(left));
                left -= size.min(left);
                size = (size * 2).min(16);
            }
            assert_eq!(sizes, want, "{text:?}");
        }
        // A reader that stops after the first batch is handed no more.
        let mut seen = Vec::new();
        let total = t
            .query_batches(Some("c = 1"), 2, 8, &mut |records| {
                seen.push(records.len());
                false
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((seen, total), (vec![2], 40));
    }

    #[test]
    fn growing_chunks_cover_the_items_and_never_pass_the_most() {
        let items: Vec<u32> = (0..100).collect();
        let sizes: Vec<usize> = growing_chunks(&items, 5, 32).map(<[u32]>::len).collect();
        assert_eq!(sizes, [5, 10, 20, 32, 32, 1]);
        let joined: Vec<u32> = growing_chunks(&items, 5, 32).flatten().copied().collect();
        assert_eq!(joined, items);
        // Sizes of zero are taken as one; a first above the most is the most.
        let sizes: Vec<usize> = growing_chunks(&items[..4], 0, 0)
            .map(<[u32]>::len)
            .collect();
        assert_eq!(sizes, [1, 1, 1, 1]);
        let sizes: Vec<usize> = growing_chunks(&items, 64, 8).map(<[u32]>::len).collect();
        assert_eq!(
            sizes,
            [8; 12].iter().copied().chain([4]).collect::<Vec<_>>()
        );
        assert_eq!(growing_chunks(&items[..0], 1, 1).count(), 0);
    }
}
