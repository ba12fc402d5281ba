//! The profile lock: one process at a time changes a profile.
//!
//! A session holds an exclusive advisory lock (`flock`) on its index's
//! lock file, `DIR/indexes/NAME.lock`, for as long as it lives, whatever
//! the profile's kind (embedded or bound to a server). A second process is refused at once with
//! [`ClientError::ProfileBusy`] instead of interleaving its updates with
//! the first one's (two processes starting from the same client state would
//! reuse document identifiers and scheme counters). The operating system
//! releases the lock when the holder exits, also when it is killed, so a
//! crash never leaves the profile locked. The lock file holds nothing and
//! is not part of the profile's data.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::error::{ClientError, Result};

/// An exclusive lock on a profile, released when dropped.
#[derive(Debug)]
pub(crate) struct ProfileLock {
    _file: File,
}

impl ProfileLock {
    /// Takes the lock at `path`, or fails at once with
    /// [`ClientError::ProfileBusy`] (naming `profile`) if another holder
    /// has it.
    pub(crate) fn acquire(path: &Path, profile: &Path) -> Result<Self> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .map_err(|e| ClientError::io("open", path, &e))?;
        match file.try_lock() {
            Ok(()) => Ok(ProfileLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(ClientError::ProfileBusy(profile.to_path_buf())),
            Err(TryLockError::Error(e)) => Err(ClientError::io("lock", path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = ProfileLock::acquire(&path, dir.path()).unwrap();
        assert!(matches!(
            ProfileLock::acquire(&path, dir.path()),
            Err(ClientError::ProfileBusy(_))
        ));
        drop(first);
        ProfileLock::acquire(&path, dir.path()).unwrap();
    }
}
