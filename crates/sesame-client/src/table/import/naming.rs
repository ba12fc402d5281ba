//! The names of an import's records in a table without a key, and the
//! digests of keys an import checks for repeats (see the parent
//! module's documentation).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sesame_core::wire;
use sesame_crypto::hash::KeyedHash;

use crate::error::{ClientError, Result};
use crate::table::{Table, Value};

/// Names the records of one file of a table without a key (see the
/// module documentation).
pub(super) struct Naming {
    /// `NAME#SOURCE:`.
    pub(super) prefix: String,
    /// The file's name, for the names of earlier builds (`NAME:LINE`).
    pub(super) base: String,
    /// Repeats of each row digest so far.
    pub(super) seen: HashMap<[u8; 8], u32>,
}

impl Naming {
    pub(super) fn new(table: &Table, path: &Path, base: &str) -> Result<Naming> {
        let canonical: PathBuf =
            std::fs::canonicalize(path).map_err(|e| ClientError::io("read", path, &e))?;
        let source = table.name_digest(
            "sesame-client/import-source/v1",
            &[canonical.as_os_str().as_encoded_bytes()],
        );
        Ok(Naming {
            prefix: format!(
                "{base}#{}:",
                hex::encode(source.get(..6).unwrap_or_default())
            ),
            base: base.to_owned(),
            seen: HashMap::new(),
        })
    }

    /// The name of the next row, of values `values`, under the table's
    /// naming key `names`.
    pub(super) fn name(&mut self, names: &KeyedHash, values: &[Option<Value>]) -> Result<String> {
        let digest = names.hash("sesame-client/import-row/v1", &[&wire::encode(values)?]);
        let mut short = [0u8; 8];
        short.copy_from_slice(digest.get(..8).unwrap_or(&[0; 8]));
        let repeat = self.seen.entry(short).or_insert(0);
        let k = *repeat;
        *repeat += 1;
        Ok(if k == 0 {
            format!("{}{}", self.prefix, hex::encode(short))
        } else {
            format!("{}{}.{k}", self.prefix, hex::encode(short))
        })
    }

    /// Whether `name` is one of this source's records.
    pub(super) fn owns(&self, name: &str) -> bool {
        name.starts_with(&self.prefix)
    }
}

/// What the first pass of an import keeps of a key to refuse a repeat.
pub(super) fn key_digest(key: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(
        sesame_crypto::hash::sha256(key.as_bytes())
            .get(..16)
            .unwrap_or(&[0; 16]),
    );
    out
}
