//! Backups of a profile, and restoring one into a new directory.
//!
//! A backup is a directory holding a consistent copy of the profile's
//! files (header, server binding, index states, saved operations and, for
//! an embedded profile, `store.redb`) and, written last, `backup.json`: the
//! size and SHA-256 digest of every file, authenticated with a key derived
//! from the profile's master key. Everything in it is already encrypted
//! (states, documents and index entries under the profile's keys; the
//! header holds the master key sealed under the passphrase), so the
//! backup needs no further encryption; its directory is private to its
//! owner like the profile's.
//!
//! Consistency: [`Profile::backup`] holds the lock of every index and the
//! header lock while it copies, so no session changes the profile
//! meanwhile (a running `add` makes the backup fail with
//! [`ClientError::ProfileBusy`]; run it again when the `add` has ended).
//!
//! [`restore`] checks the authentication tag and every digest before it
//! writes anything, copies the files into a new directory with the header
//! last (an interrupted restore leaves no profile), and opens the result
//! with the passphrase. A restored server profile reaches the same server
//! index; a restored embedded profile carries its whole store.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sesame_crypto::hash::KeyedHash;
use sesame_crypto::Key;

use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::profile::{Profile, HEADER_FILE, INDEX_DIR};

/// Name of the manifest in a backup directory.
pub const MANIFEST: &str = "backup.json";

/// Format tag of the manifest.
const FORMAT: &str = "sesame-backup/1";

/// Domain of the manifest's authentication tag.
const TAG_DOMAIN: &str = "sesame-client/backup/v1/manifest";

/// What [`Profile::backup`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// Files copied (the manifest not counted).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format: String,
    /// The profile's identifier.
    profile: String,
    /// Relative path (with `/`) → size and SHA-256 (hex) of each file.
    files: BTreeMap<String, FileEntry>,
    /// Keyed hash of everything above, hex.
    tag: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    size: u64,
    sha256: String,
}

impl Manifest {
    fn tag(&self, key: &Key<32>) -> [u8; 32] {
        let mut parts: Vec<Vec<u8>> = vec![
            self.format.as_bytes().to_vec(),
            self.profile.as_bytes().to_vec(),
        ];
        for (path, entry) in &self.files {
            parts.push(path.as_bytes().to_vec());
            parts.push(entry.size.to_le_bytes().to_vec());
            parts.push(entry.sha256.as_bytes().to_vec());
        }
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        KeyedHash::new(key).hash(TAG_DOMAIN, &refs)
    }
}

/// The profile files to copy, as paths relative to the profile directory:
/// regular files only, no lock files and no temporaries (names starting
/// with a dot).
fn profile_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries = fs::read_dir(&here).map_err(|e| ClientError::io("read", &here, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| ClientError::io("read", &here, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name.ends_with(".lock") {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| ClientError::io("read", &entry.path(), &e))?;
            if kind.is_dir() {
                stack.push(rel.join(&name));
            } else if kind.is_file() {
                out.push(rel.join(&name));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `rel` with `/` separators, as the manifest names files.
fn manifest_name(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// A manifest path back to a relative path; refuses anything that could
/// leave the directory.
fn relative_path(name: &str) -> Option<PathBuf> {
    let ok = !name.is_empty()
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'));
    ok.then(|| name.split('/').collect())
}

/// Refuses a destination that exists and is not an empty directory.
fn check_fresh(dest: &Path) -> Result<()> {
    match fs::read_dir(dest) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(ClientError::InvalidArgument(format!(
                "{} is not empty: give a new directory",
                dest.display()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ClientError::io("read", dest, &e)),
    }
}

/// Copies `from` to `to` (a new private file, synced, its directories
/// made private), in pieces; returns its manifest entry.
fn copy_private(from: &Path, to: &Path) -> Result<FileEntry> {
    if let Some(parent) = to.parent() {
        fsutil::create_private_dir(parent)?;
    }
    let (size, digest) = fsutil::copy_atomic(from, to)?;
    Ok(FileEntry {
        size,
        sha256: hex::encode(digest),
    })
}

impl Profile {
    /// Writes a backup of the profile into `dest` (a new or empty
    /// directory), holding every index lock and the header lock while it
    /// copies. The manifest goes last: a directory without it is not a
    /// backup.
    pub fn backup(&self, dest: &Path) -> Result<BackupReport> {
        check_fresh(dest)?;
        let _header = self.header_lock()?;
        let _locks = self
            .indexes()?
            .iter()
            .map(|i| self.lock(i))
            .collect::<Result<Vec<_>>>()?;
        fsutil::create_private_dir(dest)?;
        fsutil::make_private_dir(dest)?;
        let mut files = BTreeMap::new();
        let mut bytes = 0u64;
        for rel in profile_files(self.dir())? {
            let entry = copy_private(&self.dir().join(&rel), &dest.join(&rel))?;
            bytes += entry.size;
            files.insert(manifest_name(&rel), entry);
        }
        if !files.contains_key(HEADER_FILE) {
            return Err(ClientError::ProfileIncomplete(self.dir().join(HEADER_FILE)));
        }
        let mut manifest = Manifest {
            format: FORMAT.into(),
            profile: self.id().to_owned(),
            files,
            tag: String::new(),
        };
        manifest.tag = hex::encode(manifest.tag(&self.backup_key()));
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| ClientError::InvalidArgument(format!("backup manifest: {e}")))?;
        fsutil::write_atomic(&dest.join(MANIFEST), &json)?;
        Ok(BackupReport {
            files: manifest.files.len(),
            bytes,
        })
    }
}

/// Restores the backup in `backup` into `dest` (a new or empty directory)
/// and opens it with `passphrase`. The manifest's tag and every file's
/// size and digest are checked before anything is written; a damaged or
/// incomplete backup is [`ClientError::ProfileCorrupt`] naming the file.
pub fn restore(backup: &Path, dest: &Path, passphrase: &str) -> Result<Profile> {
    restore_with_key_file(backup, dest, passphrase, None)
}

/// As [`restore`], for a profile that needs its key file.
pub fn restore_with_key_file(
    backup: &Path,
    dest: &Path,
    passphrase: &str,
    key_file: Option<&[u8]>,
) -> Result<Profile> {
    let manifest_path = backup.join(MANIFEST);
    let damaged = |path: &Path, reason: String| ClientError::ProfileCorrupt {
        path: path.to_path_buf(),
        reason,
    };
    let text = match fs::read(&manifest_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(
                &manifest_path,
                "missing: not a complete Sesame backup".into(),
            ))
        }
        Err(e) => return Err(ClientError::io("read", &manifest_path, &e)),
    };
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| damaged(&manifest_path, e.to_string()))?;
    if manifest.format != FORMAT {
        return Err(damaged(
            &manifest_path,
            format!("format {:?}, this build reads {FORMAT:?}", manifest.format),
        ));
    }
    check_fresh(dest)?;
    // The backup's own header opens with the passphrase: the key of the
    // tag comes from its master key.
    let source = Profile::open_with_key_file(backup, passphrase, key_file)?;
    let want = Key::<32>::from_bytes(manifest.tag(&source.backup_key()));
    let got = hex::decode(&manifest.tag)
        .ok()
        .and_then(|t| Key::<32>::from_slice(&t).ok());
    if got.as_ref() != Some(&want) || manifest.profile != source.id() {
        return Err(damaged(
            &manifest_path,
            "its authentication tag does not match: the backup was altered".into(),
        ));
    }
    // Every file present, of its size and digest, and nothing else: read
    // in pieces, so that memory stays bounded whatever the store's size.
    let differs = |path: &Path| {
        damaged(
            path,
            "its contents differ from the backup's manifest".into(),
        )
    };
    let mut contents = Vec::with_capacity(manifest.files.len());
    for (name, entry) in &manifest.files {
        let rel = relative_path(name)
            .ok_or_else(|| damaged(&manifest_path, format!("a bad file name {name:?}")))?;
        let path = backup.join(&rel);
        let (size, digest) = fsutil::hash_file(&path)?;
        if size != entry.size || hex::encode(digest) != entry.sha256 {
            return Err(differs(&path));
        }
        contents.push((rel, entry));
    }
    let present = profile_files(backup)?;
    if present.len() != manifest.files.len() + 1 {
        let extra: Vec<String> = present
            .iter()
            .map(|p| manifest_name(p))
            .filter(|n| n != MANIFEST && !manifest.files.contains_key(n))
            .collect();
        return Err(damaged(
            backup,
            format!("files not in the manifest: {}", extra.join(", ")),
        ));
    }
    drop(source);
    fsutil::create_private_dir(&dest.join(INDEX_DIR))?;
    fsutil::make_private_dir(dest)?;
    // The header last: until it is there, `dest` is no profile. Each copy
    // is checked against the manifest again (the backup could change
    // between the check and the copy).
    if !manifest.files.contains_key(HEADER_FILE) {
        return Err(damaged(
            &manifest_path,
            format!("the backup has no {HEADER_FILE}"),
        ));
    }
    let (header, rest): (Vec<_>, Vec<_>) = contents
        .into_iter()
        .partition(|(rel, _)| rel == Path::new(HEADER_FILE));
    for (rel, entry) in rest.into_iter().chain(header) {
        let copied = copy_private(&backup.join(&rel), &dest.join(&rel))?;
        if copied != *entry {
            let _ = fs::remove_file(dest.join(&rel));
            return Err(differs(&backup.join(&rel)));
        }
        // A restored copy is another device of a shared index: it gets
        // its own identifier (the original may still be in use), keeping
        // the version it had seen.
        if rel.extension().is_some_and(|e| e == "shared") {
            crate::session::shared::renew_device(&dest.join(&rel))?;
        }
    }
    Profile::open_with_key_file(dest, passphrase, key_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_names_cannot_leave_the_directory() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", ".", "a\\b"] {
            assert!(relative_path(bad).is_none(), "{bad}");
        }
        assert_eq!(
            relative_path("indexes/default.state"),
            Some(PathBuf::from("indexes").join("default.state"))
        );
    }
}
