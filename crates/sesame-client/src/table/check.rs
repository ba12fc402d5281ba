//! The table check.

use super::*;

impl Table {
    /// Checks the table: every record is read and decrypted, and every
    /// range index answers its whole domain with exactly the records that
    /// have a value in its field. Returns the records read and the
    /// problems found (an empty list: none).
    pub fn check(&mut self) -> Result<(usize, Vec<String>)> {
        self.recover()?;
        let mut problems = Vec::new();
        let all = match self.fetch_all(&mut |_| {}) {
            Ok(all) => all,
            Err(e) => return Ok((0, vec![format!("table {}: records: {e}", self.name)])),
        };
        for i in 0..self.ranges.len() {
            let (Some(index), Some(state)) = (self.ranges.get(i), self.state.ranges.get(i)) else {
                continue;
            };
            let field = index.field;
            let bits = self.state.schema.fields.get(field).map_or(64, |f| f.bits);
            let hi = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            let want: BTreeSet<DocId> = all
                .iter()
                .filter(|(_, r)| matches!(r.values.get(field), Some(Some(_))))
                .map(|(id, _)| *id)
                .collect();
            let writes = index.query_writes();
            let label = state.field.clone();
            if writes {
                self.save_ranges(true)?;
            }
            let got = (|| -> Result<BTreeSet<DocId>> {
                let (Some(index), Some(state)) = (self.ranges.get_mut(i), self.state.ranges.get(i))
                else {
                    return Ok(BTreeSet::new());
                };
                let mut channel = index.channel(self.rows.backend.as_mut(), state)?;
                let answer = index.client.query(&mut self.rng, channel.as_mut(), 0, hi)?;
                let mut ids = BTreeSet::new();
                for (v, p) in &answer.records {
                    let binder = self.binder.as_ref();
                    ids.insert(index.open_payload(binder, state, *v, (0, hi), p)?.0);
                }
                Ok(ids)
            })();
            if writes && got.is_ok() {
                self.save_ranges(false)?;
            }
            match got {
                Ok(got) if got == want => {}
                Ok(got) => {
                    problems.push(format!(
                        "table {}: the range index of field {label} holds {} of the {} records \
                         with a value ({} others); it is marked for a rebuild from the records, \
                         which the next command on the table makes",
                        self.name,
                        got.intersection(&want).count(),
                        want.len(),
                        got.difference(&want).count()
                    ));
                    if let Some(s) = self.state.ranges.get_mut(i) {
                        s.dirty = true;
                    }
                    self.save()?;
                }
                Err(e) => {
                    problems.push(format!(
                        "table {}: the range index of field {label}: {e}; it is marked for a \
                         rebuild from the records, which the next command on the table makes",
                        self.name
                    ));
                    if let Some(s) = self.state.ranges.get_mut(i) {
                        s.dirty = true;
                    }
                    self.save()?;
                }
            }
        }
        Ok((all.len(), problems))
    }
}
