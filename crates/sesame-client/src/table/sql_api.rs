//! Reading a query's records a batch at a time, for `sesame sql`: the
//! same plan, indexes and checks as [`Table::query`], with the matching
//! records fetched and decrypted `batch` at a time and handed on, so
//! that an answer of any size is held a batch at a time, and the reader
//! can stop the fetching (a client that went away).

use super::*;

impl Table {
    /// Answers a query (`None`: every record) as [`Table::query`] does and
    /// hands the matching records to `each`, in insertion order, at most
    /// `batch` at a time, until `each` returns `false`. Returns how many
    /// records matched in all.
    pub fn query_batches(
        &mut self,
        text: Option<&str>,
        batch: usize,
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
        for chunk in docs.chunks(batch.max(1)) {
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
