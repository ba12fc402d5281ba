//! Crash-safe file writes and private directories.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use rand_core::{OsRng, RngCore};

use crate::error::{ClientError, Result};

/// Replaces `path` with `bytes` atomically: the bytes go to a temporary
/// file in the same directory, which is synced, renamed over `path`, and
/// the directory synced. After a crash `path` holds the old or the new
/// contents, never a mix. New files are readable by their owner only.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{:016x}", OsRng.next_u64()));
    let written = (|| {
        let mut f = private_options()
            .open(&tmp)
            .map_err(|e| ClientError::io("create", &tmp, &e))?;
        f.write_all(bytes)
            .map_err(|e| ClientError::io("write", &tmp, &e))?;
        f.sync_all()
            .map_err(|e| ClientError::io("write", &tmp, &e))?;
        fs::rename(&tmp, path).map_err(|e| ClientError::io("write", path, &e))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(dir)
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
}
