//! Reads of a group's keys in order: one script per group, and the
//! registered groups a scan may have to read.

use sesame_core::{Error, Result};

use super::layout::lex_range;
use super::{RedisClusterStore, SCAN_CHUNK};

impl RedisClusterStore {
    /// Registered groups whose name starts with `start`.
    pub(super) fn groups_with(&self, start: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (min, max) = lex_range(start);
        self.trip(1);
        self.with_conn(|c| {
            redis::cmd("ZRANGEBYLEX")
                .arg(self.registry_key())
                .arg(min)
                .arg(max)
                .query(c)
        })
    }

    /// The pairs of one group with `prefix`, in key order.
    pub(super) fn scan_group(
        &self,
        group: Option<&[u8]>,
        prefix: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let keys = self.keys_named(group);
        let (min, max) = lex_range(prefix);
        self.trip(1);
        let flat: Vec<Option<Vec<u8>>> = self.with_conn(|c| {
            self.scan_script
                .key(&keys.values)
                .key(&keys.index)
                .arg(min)
                .arg(max)
                .arg(SCAN_CHUNK)
                .invoke(c)
        })?;
        let mut pairs = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            match (k, v) {
                (Some(k), Some(v)) => pairs.push((k, v)),
                _ => {
                    return Err(Error::StoreCorrupt(format!(
                        "{}: {} lists a key that {} lacks",
                        self.label, keys.index, keys.values
                    )))
                }
            }
        }
        Ok(pairs)
    }
}
