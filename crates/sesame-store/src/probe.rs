//! A copy-on-write view of a file, so that redb can open a file we have not
//! yet recognised without changing a byte of it.
//!
//! redb writes to every file it opens (it sets a "recovery required" flag in
//! the header, repairs after a crash, and saves allocator state on close).
//! Before we know that a file is a Sesame store, redb gets this backend
//! instead: reads come from the file, opened read-only; writes land in memory
//! and are dropped with the backend.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::sync::{Mutex, PoisonError};

use redb::backends::FileBackend;
use redb::{DatabaseError, StorageBackend};

const CHUNK: u64 = 4096;

/// A redb backend over a read-only file whose writes stay in memory.
#[derive(Debug)]
pub(crate) struct ProbeBackend {
    file: FileBackend,
    overlay: Mutex<Overlay>,
}

#[derive(Debug)]
struct Overlay {
    /// The length redb sees.
    len: u64,
    /// File bytes at or after this offset were cut off by `set_len` and read
    /// as zeros.
    file_end: u64,
    /// Chunks written by redb, by chunk index.
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl ProbeBackend {
    /// Wraps `file`, which may be opened read-only. Takes redb's lock on the
    /// file, so a store that has it open is not read mid-write.
    pub(crate) fn new(file: File) -> Result<Self, DatabaseError> {
        let file_len = file.metadata()?.len();
        Ok(Self {
            file: FileBackend::new(file)?,
            overlay: Mutex::new(Overlay {
                len: file_len,
                file_end: file_len,
                chunks: BTreeMap::new(),
            }),
        })
    }
}

fn out_of_range(offset: u64, len: usize, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read or write of {len} bytes at {offset} past the end ({size} bytes)"),
    )
}

impl Overlay {
    /// Copies the current bytes of chunk `index` into `out` (a chunk-sized
    /// buffer).
    fn fill_chunk(&self, file: &FileBackend, index: u64, out: &mut [u8]) -> io::Result<()> {
        if let Some(chunk) = self.chunks.get(&index) {
            out.copy_from_slice(chunk);
            return Ok(());
        }
        out.fill(0);
        let start = index * CHUNK;
        let readable = self.file_end.min(start + CHUNK);
        if readable > start {
            let n = usize::try_from(readable - start).map_err(io::Error::other)?;
            out[..n].copy_from_slice(&file.read(start, n)?);
        }
        Ok(())
    }
}

impl StorageBackend for ProbeBackend {
    fn len(&self) -> io::Result<u64> {
        Ok(self
            .overlay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len)
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let overlay = self.overlay.lock().unwrap_or_else(PoisonError::into_inner);
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= overlay.len)
            .ok_or_else(|| out_of_range(offset, len, overlay.len))?;
        let first = offset / CHUNK;
        let last = end.div_ceil(CHUNK);
        if end <= overlay.file_end && overlay.chunks.range(first..last).next().is_none() {
            return self.file.read(offset, len);
        }
        let mut out = Vec::with_capacity(len);
        let mut chunk = vec![0; CHUNK as usize];
        for index in first..last {
            overlay.fill_chunk(&self.file, index, &mut chunk)?;
            let start = index * CHUNK;
            let from = offset.max(start) - start;
            let to = end.min(start + CHUNK) - start;
            out.extend_from_slice(&chunk[from as usize..to as usize]);
        }
        Ok(out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut overlay = self.overlay.lock().unwrap_or_else(PoisonError::into_inner);
        if len < overlay.len {
            let keep = len.div_ceil(CHUNK);
            overlay.chunks.split_off(&keep);
            let tail = (len % CHUNK) as usize;
            if tail != 0 {
                let index = len / CHUNK;
                let mut chunk = vec![0; CHUNK as usize];
                overlay.fill_chunk(&self.file, index, &mut chunk)?;
                chunk[tail..].fill(0);
                overlay.chunks.insert(index, chunk);
            }
            overlay.file_end = overlay.file_end.min(len);
        }
        overlay.len = len;
        Ok(())
    }

    fn sync_data(&self, _eventual: bool) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut overlay = self.overlay.lock().unwrap_or_else(PoisonError::into_inner);
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&end| end <= overlay.len)
            .ok_or_else(|| out_of_range(offset, data.len(), overlay.len))?;
        let mut index = offset / CHUNK;
        while index * CHUNK < end {
            let start = index * CHUNK;
            let mut chunk = vec![0; CHUNK as usize];
            overlay.fill_chunk(&self.file, index, &mut chunk)?;
            let from = offset.max(start);
            let to = end.min(start + CHUNK);
            chunk[(from - start) as usize..(to - start) as usize]
                .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
            overlay.chunks.insert(index, chunk);
            index += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn backend(content: &[u8]) -> (tempfile::NamedTempFile, ProbeBackend) {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(content).unwrap();
        tmp.flush().unwrap();
        let file = File::open(tmp.path()).unwrap();
        (tmp, ProbeBackend::new(file).unwrap())
    }

    #[test]
    fn writes_stay_in_memory() {
        let content: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let (tmp, b) = backend(&content);
        let mut model = content.clone();

        b.write(4090, &[0xAA; 20]).unwrap();
        model[4090..4110].fill(0xAA);
        assert_eq!(b.read(0, 10_000).unwrap(), model);
        assert_eq!(b.read(4095, 3).unwrap(), model[4095..4098]);

        b.set_len(5000).unwrap();
        model.truncate(5000);
        b.set_len(12_000).unwrap();
        model.resize(12_000, 0);
        assert_eq!(b.read(0, 12_000).unwrap(), model);

        b.write(11_000, &[7; 1000]).unwrap();
        model[11_000..12_000].fill(7);
        assert_eq!(b.read(0, 12_000).unwrap(), model);
        assert!(b.read(11_999, 2).is_err());
        assert!(b.write(11_999, &[1, 2]).is_err());

        assert_eq!(std::fs::read(tmp.path()).unwrap(), content);
    }
}
