//! A table's state shared by the devices of a profile, and the list of
//! the profile's tables.
//!
//! On a server that keeps records beside an index (`ReadRecords`,
//! `WriteRecords`), a table's state (its schema, its range indexes' and
//! verified group's client states, its next row number) is a record
//! `table` beside the table's keyword index, sealed under the profile's
//! state key with the profile id, the index's (opaque) name, the record's
//! version and the table's *incarnation* (16 random bytes drawn when the
//! table is created) as associated data. Every write is a compare-and-swap
//! on the version this device read, so a device never overwrites a state
//! it has not seen; a device notes the version and incarnation it saw last
//! (`tables/NAME.shared`) and refuses an older version of the same
//! incarnation (the server rolled it back). A table dropped and created
//! again is another incarnation: a device drops its copy of the old one.
//!
//! The profile's list of tables is a record `tables` beside the profile's
//! default index, sealed the same way, so `table list` on every device
//! shows the tables any device made.
//!
//! A state larger than a quarter of what one message carries is kept in
//! chunk records (`tc-<random>-<k>`), written before the commit that
//! refers to them and deleted after the commit that replaces it.

use std::collections::BTreeSet;
use std::path::Path;

use rand_core::{CryptoRngCore, RngCore};
use serde::{Deserialize, Serialize};
use sesame_core::wire;
use zeroize::Zeroizing;

use crate::backend::{Backend, IndexRecordWrite};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::state::StateCipher;

/// The record holding a table's state, beside its keyword index.
pub(crate) const TABLE_RECORD: &str = "table";
/// The record holding the profile's list of tables, beside its default
/// index.
const CATALOG_RECORD: &str = "tables";
/// Associated-data labels.
const TABLE_LABEL: &str = "table-record/v1";
const CATALOG_LABEL: &str = "table-catalog/v1";
/// `expected` of a write that accepts any version (chunks).
const ANY_VERSION: u64 = u64::MAX;
const INLINE: u8 = 0;
const CHUNKED: u8 = 1;
/// Attempts of a catalog change that keeps finding it changed.
const ATTEMPTS: usize = 16;

/// A table's incarnation: drawn at random when it is created.
pub(crate) type Incarnation = [u8; 16];

/// The version and incarnation of a table's record this device holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub version: u64,
    pub incarnation: Incarnation,
    /// The chunk records of that version (`prefix`, count), if chunked.
    pub chunks: Chunks,
}

/// What the server holds of a table.
pub(crate) enum Found {
    /// The backend keeps no records (the embedded store), or the table's
    /// keyword index is not there.
    NoRecords,
    /// The keyword index is there without a table record: the remnant of
    /// a create that did not finish, or a table this device has not
    /// shared yet.
    Absent,
    /// The table's state.
    Table(Seen, Zeroizing<Vec<u8>>),
}

/// Chunk records: their names' prefix and their number.
type Chunks = Option<(String, u32)>;

fn damaged(what: &str) -> ClientError {
    ClientError::SharedStateCorrupt {
        index: what.to_owned(),
    }
}

fn context(index: &str, version: u64, incarnation: &[u8]) -> Vec<u8> {
    let mut c = (index.len() as u64).to_be_bytes().to_vec();
    c.extend_from_slice(index.as_bytes());
    c.extend_from_slice(&version.to_be_bytes());
    c.extend_from_slice(incarnation);
    c
}

/// Reassembles a record value: inline, or from its chunks.
fn get_value(
    backend: &mut dyn Backend,
    index: &str,
    value: &[u8],
    what: &str,
) -> Result<(Vec<u8>, Chunks)> {
    let (&tag, rest) = value.split_first().ok_or_else(|| damaged(what))?;
    match tag {
        INLINE => Ok((rest.to_vec(), None)),
        CHUNKED => {
            let (count, prefix) = rest.split_first_chunk::<4>().ok_or_else(|| damaged(what))?;
            let count = u32::from_be_bytes(*count);
            let prefix = std::str::from_utf8(prefix).map_err(|_| damaged(what))?;
            let names: Vec<String> = (0..count).map(|k| format!("{prefix}{k}")).collect();
            let mut out = Vec::new();
            for name in names {
                let records = backend
                    .read_records(index, &[name], &[])?
                    .unwrap_or_default();
                match records.into_iter().next() {
                    Some(r) if r.version > 0 => out.extend_from_slice(&r.value),
                    _ => return Err(damaged(what)),
                }
            }
            Ok((out, Some((prefix.to_owned(), count))))
        }
        _ => Err(damaged(what)),
    }
}

/// The record value for `bytes`: the bytes when small, else chunk records
/// written now under a fresh prefix.
fn put_value(backend: &mut dyn Backend, index: &str, bytes: &[u8]) -> Result<(Vec<u8>, Chunks)> {
    let chunk_max = crate::session::shared::chunk_max(backend)?;
    if bytes.len() <= chunk_max / 4 {
        let mut value = vec![INLINE];
        value.extend_from_slice(bytes);
        return Ok((value, None));
    }
    let mut nonce = [0u8; 4];
    rand_core::OsRng.fill_bytes(&mut nonce);
    let prefix = format!("tc-{}-", hex::encode(nonce));
    let mut count = 0u32;
    for (k, chunk) in bytes.chunks(chunk_max).enumerate() {
        let write = IndexRecordWrite {
            name: format!("{prefix}{k}"),
            expected: ANY_VERSION,
            value: Some(chunk.to_vec()),
        };
        if backend.write_records(index, vec![write])?.is_some() {
            return Err(ClientError::Core(sesame_core::Error::Protocol(
                "the server refused a write of any version".into(),
            )));
        }
        count += 1;
    }
    let mut value = vec![CHUNKED];
    value.extend_from_slice(&count.to_be_bytes());
    value.extend_from_slice(prefix.as_bytes());
    Ok((value, Some((prefix, count))))
}

/// Deletes chunk records (best effort: they are not referred to).
fn delete_chunks(backend: &mut dyn Backend, index: &str, chunks: &Chunks) {
    if let Some((prefix, count)) = chunks {
        let writes: Vec<IndexRecordWrite> = (0..*count)
            .map(|k| IndexRecordWrite {
                name: format!("{prefix}{k}"),
                expected: ANY_VERSION,
                value: None,
            })
            .collect();
        for w in writes {
            let _ = backend.write_records(index, vec![w]);
        }
    }
}

/// Reads table `what`'s record beside its keyword index `index`.
pub(crate) fn read(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    index: &str,
    what: &str,
) -> Result<Found> {
    let Some(records) = backend.read_records(index, &[TABLE_RECORD.to_owned()], &[])? else {
        return Ok(Found::NoRecords);
    };
    let Some(record) = records.into_iter().next() else {
        return Err(ClientError::Core(sesame_core::Error::Protocol(
            "the server answered no table record".into(),
        )));
    };
    if record.version == 0 {
        return Ok(Found::Absent);
    }
    let (bytes, chunks) = get_value(backend, index, &record.value, what)?;
    let (said, rest) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| damaged(what))?;
    let (incarnation, sealed) = rest
        .split_first_chunk::<16>()
        .ok_or_else(|| damaged(what))?;
    if u64::from_be_bytes(*said) != record.version {
        return Err(damaged(what));
    }
    let plain = cipher
        .open_bound(
            TABLE_LABEL,
            &context(index, record.version, incarnation),
            sealed,
        )
        .ok_or_else(|| damaged(what))?;
    Ok(Found::Table(
        Seen {
            version: record.version,
            incarnation: *incarnation,
            chunks,
        },
        plain,
    ))
}

/// Writes `plain` as the next version of the table's record if it is
/// still at `seen.version` (0: there is none); `Ok(false)` when another
/// device wrote it first (nothing changed). On success `seen` is the new
/// version.
pub(crate) fn write(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    rng: &mut dyn CryptoRngCore,
    index: &str,
    seen: &mut Seen,
    plain: &[u8],
) -> Result<bool> {
    let next = seen.version + 1;
    let sealed = cipher.seal_bound(
        rng,
        TABLE_LABEL,
        &context(index, next, &seen.incarnation),
        plain,
    )?;
    let mut bytes = next.to_be_bytes().to_vec();
    bytes.extend_from_slice(&seen.incarnation);
    bytes.extend_from_slice(&sealed);
    let (value, chunks) = put_value(backend, index, &bytes)?;
    let write = IndexRecordWrite {
        name: TABLE_RECORD.into(),
        expected: seen.version,
        value: Some(value.clone()),
    };
    match backend.write_records(index, vec![write])? {
        None => {}
        // A retried request whose first try was applied.
        Some(current)
            if current
                .first()
                .is_some_and(|c| c.version == next && c.value == value) => {}
        Some(_) => {
            delete_chunks(backend, index, &chunks);
            return Ok(false);
        }
    }
    let old = std::mem::replace(&mut seen.chunks, chunks);
    delete_chunks(backend, index, &old);
    seen.version = next;
    Ok(true)
}

/// `tables/NAME.shared`: the version and incarnation of the table's record
/// this device saw last (not secret).
#[derive(Serialize, Deserialize)]
struct Note {
    version: u64,
    incarnation: String,
}

/// The note at `path`, if there is one.
pub(crate) fn read_note(path: &Path) -> Result<Option<(u64, Incarnation)>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let bad = || ClientError::ProfileCorrupt {
                path: path.to_path_buf(),
                reason: "not a table note of this build".into(),
            };
            let n: Note = serde_json::from_slice(&bytes).map_err(|_| bad())?;
            let incarnation: Incarnation = hex::decode(&n.incarnation)
                .ok()
                .and_then(|i| i.try_into().ok())
                .ok_or_else(bad)?;
            Ok(Some((n.version, incarnation)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ClientError::io("read", path, &e)),
    }
}

/// Writes the note at `path`.
pub(crate) fn write_note(path: &Path, seen: &Seen) -> Result<()> {
    let json = serde_json::to_vec(&Note {
        version: seen.version,
        incarnation: hex::encode(seen.incarnation),
    })
    .map_err(|e| ClientError::InvalidArgument(format!("table note: {e}")))?;
    fsutil::write_atomic(path, &json)
}

/// The profile's list of tables as the server holds it, and its record's
/// version; `None` when the backend keeps no records beside `index`.
fn read_catalog(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    index: &str,
) -> Result<Option<(u64, BTreeSet<String>)>> {
    let what = "the profile's list of tables";
    let Some(records) = backend.read_records(index, &[CATALOG_RECORD.to_owned()], &[])? else {
        return Ok(None);
    };
    let Some(record) = records.into_iter().next() else {
        return Ok(None);
    };
    if record.version == 0 {
        return Ok(Some((0, BTreeSet::new())));
    }
    let plain = cipher
        .open_bound(
            CATALOG_LABEL,
            &context(index, record.version, &[]),
            &record.value,
        )
        .ok_or_else(|| damaged(what))?;
    let names: BTreeSet<String> = wire::decode(&plain).map_err(|_| damaged(what))?;
    Ok(Some((record.version, names)))
}

/// The tables of the profile's list beside `index` (empty when the
/// backend keeps no records).
pub(crate) fn catalog(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    index: &str,
) -> Result<BTreeSet<String>> {
    Ok(read_catalog(backend, cipher, index)?
        .map(|(_, names)| names)
        .unwrap_or_default())
}

/// Adds `table` to the profile's list (`add`), or takes it out;
/// compare-and-swap, again while other devices change it. Nothing when
/// the backend keeps no records.
pub(crate) fn change_catalog(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    rng: &mut dyn CryptoRngCore,
    index: &str,
    table: &str,
    add: bool,
) -> Result<()> {
    for _ in 0..ATTEMPTS {
        let Some((version, mut names)) = read_catalog(backend, cipher, index)? else {
            return Ok(());
        };
        let changed = if add {
            names.insert(table.to_owned())
        } else {
            names.remove(table)
        };
        if !changed {
            return Ok(());
        }
        let plain = Zeroizing::new(wire::encode(&names)?);
        let next = version + 1;
        let value = cipher.seal_bound(rng, CATALOG_LABEL, &context(index, next, &[]), &plain)?;
        let write = IndexRecordWrite {
            name: CATALOG_RECORD.into(),
            expected: version,
            value: Some(value),
        };
        if backend.write_records(index, vec![write])?.is_none() {
            return Ok(());
        }
    }
    Err(ClientError::StateContended {
        index: "the profile's list of tables".into(),
        attempts: ATTEMPTS,
    })
}

/// Seals the profile's list of tables beside `index` under `new` (a new
/// master key's state cipher), listing `names`, unless it opens under
/// `new` already (an interrupted rotation got that far) or the backend
/// keeps no records; compare-and-swap on the version read under `old`.
pub(crate) fn reseal_catalog(
    backend: &mut dyn Backend,
    old: &StateCipher,
    new: &StateCipher,
    rng: &mut dyn CryptoRngCore,
    index: &str,
    names: &BTreeSet<String>,
) -> Result<()> {
    match read_catalog(backend, new, index) {
        // No records, or sealed under the new key already.
        Ok(None) => return Ok(()),
        Ok(Some((version, _))) if version > 0 => return Ok(()),
        _ => {}
    }
    let (version, _) = match read_catalog(backend, old, index)? {
        Some(found) => found,
        None => return Ok(()),
    };
    let plain = Zeroizing::new(wire::encode(names)?);
    let next = version + 1;
    let value = new.seal_bound(rng, CATALOG_LABEL, &context(index, next, &[]), &plain)?;
    let write = IndexRecordWrite {
        name: CATALOG_RECORD.into(),
        expected: version,
        value: Some(value),
    };
    match backend.write_records(index, vec![write])? {
        None => Ok(()),
        Some(_) => Err(ClientError::StateContended {
            index: "the profile's list of tables".into(),
            attempts: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use rand_core::OsRng;
    use sesame_core::{Channel, Meter, Service, Store};
    use sesame_crypto::Key;
    use sesame_sse::KeywordScheme;

    use super::*;
    use crate::backend::{IndexRecord, SetupChannel};

    /// Records beside indexes, in memory, with compare-and-swap, behind a
    /// server whose messages are small (chunks of 4 KiB).
    #[derive(Default)]
    struct Records {
        map: BTreeMap<(String, String), (u64, Vec<u8>)>,
        meter: Meter,
    }

    fn none<T>() -> Result<T> {
        Err(ClientError::InvalidArgument("records only".into()))
    }

    impl Backend for Records {
        fn index_channel(
            &mut self,
            _: &str,
            _: u64,
            _: &KeywordScheme,
        ) -> Result<Box<dyn Channel>> {
            none()
        }
        fn document_channel(&mut self, _: &str) -> Result<Box<dyn Channel + Send>> {
            none()
        }
        fn drop_other_generations(&mut self, _: &str, _: u64) -> Result<()> {
            Ok(())
        }
        fn meter(&self) -> &Meter {
            &self.meter
        }
        fn hosted_channel(
            &mut self,
            _: &str,
            _: u64,
            _: &str,
            _: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
        ) -> Result<Box<dyn Channel>> {
            none()
        }
        fn hosted_transaction(
            &mut self,
            _: &str,
            _: u64,
            _: &str,
            _: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
        ) -> Result<Box<dyn SetupChannel>> {
            none()
        }
        fn remove_index(&mut self, _: &str) -> Result<()> {
            Ok(())
        }
        fn max_message(&mut self) -> Result<Option<usize>> {
            Ok(Some(8192))
        }
        fn read_records(
            &mut self,
            index: &str,
            names: &[String],
            _: &[u64],
        ) -> Result<Option<Vec<IndexRecord>>> {
            Ok(Some(
                names
                    .iter()
                    .map(|n| {
                        let (version, value) = self
                            .map
                            .get(&(index.to_owned(), n.clone()))
                            .cloned()
                            .unwrap_or_default();
                        IndexRecord {
                            name: n.clone(),
                            version,
                            value,
                        }
                    })
                    .collect(),
            ))
        }
        fn write_records(
            &mut self,
            index: &str,
            writes: Vec<IndexRecordWrite>,
        ) -> Result<Option<Vec<IndexRecord>>> {
            let names: Vec<String> = writes.iter().map(|w| w.name.clone()).collect();
            let current = self.read_records(index, &names, &[])?.unwrap_or_default();
            if writes
                .iter()
                .zip(&current)
                .any(|(w, c)| w.expected != ANY_VERSION && w.expected != c.version)
            {
                return Ok(Some(current));
            }
            for (w, c) in writes.into_iter().zip(current) {
                let key = (index.to_owned(), w.name);
                match w.value {
                    Some(v) => {
                        self.map.insert(key, (c.version + 1, v));
                    }
                    None => {
                        self.map.remove(&key);
                    }
                }
            }
            Ok(None)
        }
    }

    fn chunk_records(b: &Records) -> usize {
        b.map.keys().filter(|(_, n)| n.starts_with("tc-")).count()
    }

    #[test]
    fn a_large_state_is_chunked_read_whole_and_its_old_chunks_go() {
        let mut b = Records::default();
        let cipher = StateCipher::new(&Key::from_bytes([7; 32]), "profile");
        let mut rng = OsRng;
        let mut seen = Seen {
            version: 0,
            incarnation: [1; 16],
            chunks: None,
        };
        let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        assert!(write(&mut b, &cipher, &mut rng, "ix", &mut seen, &big).unwrap());
        let first = chunk_records(&b);
        assert!(first >= 5, "{first} chunks");
        let Found::Table(got, plain) = read(&mut b, &cipher, "ix", "t").unwrap() else {
            panic!("no table")
        };
        assert_eq!((got.version, &plain[..]), (1, &big[..]));
        assert_eq!(got.chunks, seen.chunks);

        // A writer that read an older version is refused and leaves no chunk.
        let mut stale = Seen {
            version: 0,
            incarnation: [1; 16],
            chunks: None,
        };
        assert!(!write(&mut b, &cipher, &mut rng, "ix", &mut stale, &big).unwrap());
        assert_eq!(chunk_records(&b), first);

        // The next version's chunks replace the old ones; a small state is
        // held inline, with no chunk left.
        assert!(write(&mut b, &cipher, &mut rng, "ix", &mut seen, &big[..9_000]).unwrap());
        assert!(chunk_records(&b) < first);
        let Found::Table(got, plain) = read(&mut b, &cipher, "ix", "t").unwrap() else {
            panic!("no table")
        };
        assert_eq!((got.version, &plain[..]), (2, &big[..9_000]));
        assert!(write(&mut b, &cipher, &mut rng, "ix", &mut seen, b"small").unwrap());
        assert_eq!(chunk_records(&b), 0);

        // A chunk altered on the server does not open.
        assert!(write(&mut b, &cipher, &mut rng, "ix", &mut seen, &big).unwrap());
        if let Some((_, (_, v))) = b.map.iter_mut().find(|((_, n), _)| n.starts_with("tc-")) {
            v[10] ^= 1;
        }
        assert!(matches!(
            read(&mut b, &cipher, "ix", "t"),
            Err(ClientError::SharedStateCorrupt { .. })
        ));
        // Nor does the record of another index.
        let record = b
            .map
            .get(&("ix".into(), TABLE_RECORD.into()))
            .cloned()
            .unwrap();
        b.map.insert(("other".into(), TABLE_RECORD.into()), record);
        assert!(matches!(
            read(&mut b, &cipher, "other", "t"),
            Err(ClientError::SharedStateCorrupt { .. })
        ));
    }
}
