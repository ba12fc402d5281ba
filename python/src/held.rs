//! A table kept open between calls by a `with` block (`with table: ...`),
//! with the chunk memo `sesame sql` keeps.
//!
//! Outside a `with` block each call of a `Table` opens the table and
//! closes it, so a CLI on the same profile can write between two calls;
//! nothing held in memory can outlive a call, and a memo would only add
//! a probe per chunk read (`sesame_store::packed::ChunkMemo`). Inside
//! one the table stays open, as `sesame sql` keeps its tables: the
//! profile's store is locked against other processes until the block
//! ends (their writes are refused as busy, never lost or interleaved),
//! and its packed index chunks stay in memory between queries, up to
//! [`HELD_CHUNK_MEMO_BYTES`].
//!
//! Never stale: the memo is dropped on every write of the store through
//! the open table (its write count; `docs/storage.md`, "Chunks kept in
//! memory by a long-running reader"), and every handle of the same
//! `Profile` object (`profile.table(name)` called again) goes through the
//! one open table while the block lasts; another process cannot write
//! until the block ends, and the memo ends with it. Tests:
//! `test_a_held_table_sees_every_write_through_its_chunk_memo` and
//! `test_a_held_table_keeps_other_processes_out_until_its_block_ends`
//! (`python/tests/test_sesame.py`).

use std::sync::{mpsc, Arc, Mutex, PoisonError};

use sesame_client::{chunk_memo_bytes, set_chunk_memo_bytes, Table};

/// The packed chunks a held table keeps in memory: the bound `sesame
/// sql` uses (`sesame_sql::CHUNK_MEMO_BYTES`, 256 MiB).
pub(crate) const HELD_CHUNK_MEMO_BYTES: usize = 256 << 20;

/// A call run on the held table.
type Job = Box<dyn FnOnce(&mut Table) + Send>;

/// The table a `with` block holds open, on a thread of its own (a table
/// is not `Send`; calls reach it through a channel, one at a time, as
/// `sesame sql`'s statements reach its engine).
pub(crate) struct Held {
    /// Its name.
    pub(crate) name: String,
    /// The `with` blocks it is in (nested blocks, or blocks of two
    /// handles of the same table).
    pub(crate) blocks: usize,
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    /// Opens `name` of `profile` with the chunk memo.
    pub(crate) fn open(
        profile: Arc<Mutex<sesame_client::Profile>>,
        name: &str,
    ) -> Result<Self, String> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (opened, open_result) = mpsc::sync_channel::<Result<(), String>>(1);
        let table_name = name.to_owned();
        let thread = std::thread::Builder::new()
            .name("sesame-table".into())
            .spawn(move || {
                let table = {
                    let profile = profile.lock().unwrap_or_else(PoisonError::into_inner);
                    // The memo's size is read when the store is opened;
                    // every other open of this process keeps the setting
                    // it had.
                    let before = chunk_memo_bytes();
                    set_chunk_memo_bytes(HELD_CHUNK_MEMO_BYTES);
                    let table = Table::open(&profile, &table_name);
                    set_chunk_memo_bytes(before);
                    table
                };
                let mut table = match table {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = opened.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = opened.send(Ok(()));
                while let Ok(job) = rx.recv() {
                    job(&mut table);
                }
            })
            .map_err(|e| format!("cannot start the table's thread: {e}"))?;
        let held = Held {
            name: name.to_owned(),
            blocks: 1,
            jobs: Some(jobs),
            thread: Some(thread),
        };
        open_result
            .recv()
            .map_err(|_| "the table's thread stopped while opening it".to_owned())??;
        Ok(held)
    }

    /// Runs `op` on the held table.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut Table) -> sesame_client::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let stopped = || {
            format!(
                "the thread holding table {:?} stopped; leave the `with` block and enter it again",
                self.name
            )
        };
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(Box::new(move |t| {
                let _ = tx.send(op(t));
            }))
            .map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())?.map_err(|e| e.to_string())
    }
}

impl Drop for Held {
    /// Closes the table (its store's lock with it) before returning.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The error of a call that needs the store while a `with` block of
/// another table holds it.
pub(crate) fn busy(held: &str, wanted: &str) -> String {
    format!(
        "table {held:?} of this profile is held open by a `with` block; leave the block \
         before using {wanted}"
    )
}
