//! Crash-safe file writes and private directories.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use rand_core::{OsRng, RngCore};

use crate::error::{ClientError, Result};

/// Replaces `path` atomically with what `fill` writes: `fill` writes a
/// temporary file in the same directory, which is synced, renamed over
/// `path`, and the directory synced. After a crash `path` holds the old or
/// the new contents, never a mix; a failure leaves no temporary. New files
/// are readable by their owner only.
fn replace_atomic<T>(path: &Path, fill: impl FnOnce(&mut File, &Path) -> Result<T>) -> Result<T> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{:016x}", OsRng.next_u64()));
    let written = (|| -> Result<T> {
        let mut f = private_options()
            .open(&tmp)
            .map_err(|e| ClientError::io("create", &tmp, &e))?;
        let out = fill(&mut f, &tmp)?;
        f.sync_all()
            .map_err(|e| ClientError::io("write", &tmp, &e))?;
        fs::rename(&tmp, path).map_err(|e| ClientError::io("write", path, &e))?;
        Ok(out)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let out = written?;
    sync_dir(dir)?;
    Ok(out)
}

/// Replaces `path` with `bytes` atomically ([`replace_atomic`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_atomic(path, |f, tmp| {
        f.write_all(bytes)
            .map_err(|e| ClientError::io("write", tmp, &e))
    })
}

/// Bytes read or written at a time by [`copy_atomic`] and [`hash_file`].
const PIECE: usize = 1 << 20;

/// The size and SHA-256 of the file at `path`, read in pieces: memory
/// stays bounded whatever its size.
pub(crate) fn hash_file(path: &Path) -> Result<(u64, [u8; 32])> {
    let mut f = File::open(path).map_err(|e| ClientError::io("read", path, &e))?;
    copy_hashed(&mut f, path, &mut std::io::sink(), path)
}

/// Copies `from` to `to` as [`write_atomic`] writes, in pieces so that
/// memory stays bounded whatever the size; returns the size and SHA-256
/// of what was copied.
pub(crate) fn copy_atomic(from: &Path, to: &Path) -> Result<(u64, [u8; 32])> {
    let mut src = File::open(from).map_err(|e| ClientError::io("read", from, &e))?;
    replace_atomic(to, |dst, tmp| copy_hashed(&mut src, from, dst, tmp))
}

/// Copies `src` to `dst` in pieces, hashing what passes.
fn copy_hashed(
    src: &mut impl std::io::Read,
    src_path: &Path,
    dst: &mut impl Write,
    dst_path: &Path,
) -> Result<(u64, [u8; 32])> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; PIECE];
    let mut size = 0u64;
    loop {
        let n = src
            .read(&mut buf)
            .map_err(|e| ClientError::io("read", src_path, &e))?;
        if n == 0 {
            return Ok((size, hasher.finalize().into()));
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])
            .map_err(|e| ClientError::io("write", dst_path, &e))?;
        size += n as u64;
    }
}

/// Makes a rename or a new entry in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| ClientError::io("sync", dir, &e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o
}

/// Refuses `path` when other users can reach it (any group or other
/// permission bit), as ssh refuses a private key others can read. A path
/// that does not exist passes (its absence is another check's business).
/// Only on Unix; elsewhere nothing is checked.
pub(crate) fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match fs::metadata(path) {
            Ok(m) => {
                let mode = m.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(ClientError::TooOpen {
                        path: path.to_path_buf(),
                        mode,
                        dir: m.is_dir(),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ClientError::io("read", path, &e)),
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Makes `dir` private to its owner (mode 0700). Only on Unix.
pub(crate) fn make_private_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| ClientError::io("protect", dir, &e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Creates `dir` and its parents; the last component is private to its
/// owner where it is new.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
        .map_err(|e| ClientError::io("create", dir, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn pieces_copy_and_hash_like_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("big");
        // Several pieces and a partial one.
        let bytes: Vec<u8> = (0..(2 * PIECE + 123)).map(|i| (i * 7) as u8).collect();
        fs::write(&from, &bytes).unwrap();
        let whole = (bytes.len() as u64, sesame_crypto::hash::sha256(&bytes));
        assert_eq!(hash_file(&from).unwrap(), whole);
        let to = dir.path().join("copy");
        assert_eq!(copy_atomic(&from, &to).unwrap(), whole);
        assert_eq!(fs::read(&to).unwrap(), bytes);
        // No temporary left beside the copy.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
        assert!(copy_atomic(&dir.path().join("absent"), &to).is_err());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
