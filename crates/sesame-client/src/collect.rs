//! Finding and reading the files to add.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{ClientError, Result};

/// Largest document accepted (64 MiB): a document must fit one message of
/// the wire encoding with room to spare.
pub const MAX_DOCUMENT: u64 = 64 << 20;

/// A file to add, read into memory.
#[derive(Clone)]
pub(crate) struct NewFile {
    /// The path as given or found under a given directory.
    pub path: PathBuf,
    /// Its bytes.
    pub content: Vec<u8>,
}

/// The regular files named by `paths`: each path is a file or a directory
/// walked recursively in name order. Symbolic links to files are followed;
/// links to directories are not (no cycles), and `skip` (the profile
/// directory) is never entered. A path that does not exist or cannot be
/// read is an error before anything is read.
pub(crate) fn list_files(paths: &[PathBuf], skip: &Path) -> Result<Vec<PathBuf>> {
    let skip = fs::canonicalize(skip).ok();
    let mut out = Vec::new();
    for path in paths {
        let meta = fs::metadata(path).map_err(|e| ClientError::io("read", path, &e))?;
        if meta.is_dir() {
            walk(path, skip.as_deref(), &mut out)?;
        } else if meta.is_file() {
            out.push(path.clone());
        } else {
            return Err(ClientError::Io {
                action: "add",
                path: path.clone(),
                message: "not a regular file or directory".into(),
            });
        }
    }
    Ok(out)
}

fn walk(dir: &Path, skip: Option<&Path>, out: &mut Vec<PathBuf>) -> Result<()> {
    if let (Some(skip), Ok(here)) = (skip, fs::canonicalize(dir)) {
        if here == skip {
            return Ok(());
        }
    }
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| ClientError::io("read", dir, &e))?
        .collect::<std::io::Result<_>>()
        .map_err(|e| ClientError::io("read", dir, &e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| ClientError::io("read", &path, &e))?;
        if kind.is_dir() {
            walk(&path, skip, out)?;
        } else if kind.is_file()
            || (kind.is_symlink() && fs::metadata(&path).is_ok_and(|m| m.is_file()))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads one file, refusing those over `max` bytes (at most
/// [`MAX_DOCUMENT`]; less under a server whose messages are smaller). The
/// size is checked again after reading, in case the file grew meanwhile.
pub(crate) fn read_file(path: &Path, max: u64) -> Result<NewFile> {
    let too_large = |size: u64| ClientError::DocumentTooLarge {
        path: path.to_path_buf(),
        size,
        max,
    };
    let size = fs::metadata(path)
        .map_err(|e| ClientError::io("read", path, &e))?
        .len();
    if size > max {
        return Err(too_large(size));
    }
    let content = fs::read(path).map_err(|e| ClientError::io("read", path, &e))?;
    if content.len() as u64 > max {
        return Err(too_large(content.len() as u64));
    }
    Ok(NewFile {
        path: path.to_path_buf(),
        content,
    })
}
