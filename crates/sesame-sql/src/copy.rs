//! `COPY t [(columns)] FROM STDIN (FORMAT csv [, HEADER])`: the bulk path.
//!
//! The data is written to a file in the profile's `sql-copy/` directory
//! (a header line naming the columns, then the rows as sent), named after
//! the table and the SHA-256 of its content, and imported by the table's
//! own import ([`Table::import`](sesame_client::table::Table::import)).
//! The import names each record after its file and content (or by its key
//! field), so the same `COPY` run again after a crash (the file is written
//! again under the same name) neither loses nor duplicates a row: what the
//! first run inserted is found unchanged, the rest is inserted. The file
//! is removed once the import has succeeded. The same consequence holds on
//! purpose: the same data copied twice into a table without a key is held
//! once.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::copy::CopyHandler;
use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::api::ClientInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::PgWireBackendMessage;
use sha2::{Digest, Sha256};
use sqlparser::ast::{self, Statement};

use crate::engine::{table_name, Engine};
use crate::error::{SqlError, INTERNAL};
use crate::handler::Conn;

/// The most bytes one COPY may send (the file it is written to).
pub(crate) const MAX_COPY_BYTES: u64 = 64 << 30;

struct Pending {
    table: String,
    columns: Vec<String>,
    header: bool,
    /// Buffered: a client may send a row per `CopyData` message (psql
    /// does), which unbuffered was a write system call per row.
    file: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    hash: Sha256,
    bytes: u64,
}

/// A connection's COPY in progress.
pub(crate) struct CopyIn {
    dir: PathBuf,
    pending: Mutex<Option<Pending>>,
}

impl CopyIn {
    pub(crate) fn new(dir: PathBuf) -> Self {
        CopyIn {
            dir,
            pending: Mutex::new(None),
        }
    }

    /// Starts a `COPY ... FROM STDIN`.
    pub(crate) async fn start(
        &self,
        stmt: &Statement,
        engine: &Engine,
    ) -> Result<Response, SqlError> {
        let Statement::Copy {
            source,
            to,
            target,
            options,
            legacy_options,
            ..
        } = stmt
        else {
            return Err(SqlError::unsupported("not a COPY"));
        };
        let (
            ast::CopySource::Table {
                table_name: name,
                columns,
            },
            false,
            ast::CopyTarget::Stdin,
        ) = (source, to, target)
        else {
            return Err(SqlError::unsupported(
                "COPY table FROM STDIN (FORMAT csv, HEADER) only",
            ));
        };
        let mut csv = false;
        let mut header = false;
        for o in options {
            match o {
                ast::CopyOption::Format(f) if f.value.eq_ignore_ascii_case("csv") => csv = true,
                ast::CopyOption::Header(h) => header = *h,
                ast::CopyOption::Delimiter(',') | ast::CopyOption::Quote('"') => {}
                other => {
                    return Err(SqlError::unsupported(format!(
                        "COPY option {other} is not supported (FORMAT csv, HEADER)"
                    )))
                }
            }
        }
        for o in legacy_options {
            match o {
                ast::CopyLegacyOption::Csv(_) => csv = true,
                ast::CopyLegacyOption::Header => header = true,
                other => {
                    return Err(SqlError::unsupported(format!(
                        "COPY option {other} is not supported (FORMAT csv, HEADER)"
                    )))
                }
            }
        }
        if !csv {
            return Err(SqlError::unsupported(
                "COPY takes FORMAT csv (the text format is not supported)",
            ));
        }
        let table = table_name(name);
        let t = table.clone();
        let schema = engine.call(move |db| db.schema(&t)).await??;
        let columns: Vec<String> = if columns.is_empty() {
            schema.fields.iter().map(|f| f.name.clone()).collect()
        } else {
            columns.iter().map(crate::plan::ident).collect()
        };
        for c in &columns {
            if schema.field(c).is_none() {
                return Err(SqlError::new(
                    crate::error::NO_COLUMN,
                    format!("column {c:?} of relation {table:?} does not exist"),
                ));
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| SqlError::new(INTERNAL, format!("{}: {e}", self.dir.display())))?;
        let path = self.dir.join(format!(
            "{table}.{}.partial",
            std::process::id() as u64 * 1_000_000 + u64::from(rand_u32())
        ));
        let file = std::fs::File::create(&path)
            .map_err(|e| SqlError::new(INTERNAL, format!("{}: {e}", path.display())))?;
        let n = columns.len();
        if let Ok(mut p) = self.pending.lock() {
            *p = Some(Pending {
                table,
                columns,
                header,
                file: std::io::BufWriter::with_capacity(1 << 20, file),
                path,
                hash: Sha256::new(),
                bytes: 0,
            });
        }
        Ok(Response::CopyIn(CopyResponse::new(
            0,
            n,
            futures::stream::empty(),
        )))
    }

    fn take(&self) -> Option<Pending> {
        self.pending.lock().ok().and_then(|mut p| p.take())
    }

    fn data(&self, bytes: &[u8]) -> Result<(), SqlError> {
        let mut guard = self
            .pending
            .lock()
            .map_err(|_| SqlError::new(INTERNAL, "COPY state poisoned"))?;
        let Some(p) = guard.as_mut() else {
            return Err(SqlError::new(crate::error::PROTOCOL, "no COPY in progress"));
        };
        p.bytes += bytes.len() as u64;
        if p.bytes > MAX_COPY_BYTES {
            return Err(SqlError::new("54000", "COPY data too large"));
        }
        p.hash.update(bytes);
        p.file
            .write_all(bytes)
            .map_err(|e| SqlError::new(INTERNAL, format!("{}: {e}", p.path.display())))
    }

    /// Ends the COPY: writes the final file and imports it.
    async fn finish(&self, engine: &Engine) -> Result<usize, SqlError> {
        let Some(p) = self.take() else {
            return Err(SqlError::new(crate::error::PROTOCOL, "no COPY in progress"));
        };
        let Pending {
            table,
            columns,
            header,
            file,
            path,
            hash,
            ..
        } = p;
        let io = |e: std::io::Error| SqlError::new(INTERNAL, format!("COPY: {e}"));
        // Files are read and written on a blocking thread, not on the
        // runtime's workers that serve the other connections.
        let name = table.clone();
        let work = tokio::task::spawn_blocking(move || {
            let result = (|| {
                file.into_inner().map_err(|e| io(e.into_error()))?;
                let digest = hex::encode(hash.finalize());
                let dest = path.with_file_name(format!(
                    "{name}-{}.csv",
                    digest.get(..32).unwrap_or(&digest)
                ));
                let raw = std::fs::File::open(&path).map_err(io)?;
                let mut reader = std::io::BufReader::new(raw);
                let mut out = std::io::BufWriter::new(std::fs::File::create(&dest).map_err(io)?);
                let mut w = csv::Writer::from_writer(Vec::new());
                w.write_record(&columns)
                    .map_err(|e| SqlError::new(INTERNAL, e.to_string()))?;
                let head = w
                    .into_inner()
                    .map_err(|e| SqlError::new(INTERNAL, e.to_string()))?;
                out.write_all(&head).map_err(io)?;
                if header {
                    // The client's header line is replaced by the names.
                    let mut skip = csv::ReaderBuilder::new()
                        .has_headers(false)
                        .from_path(&path)
                        .map_err(|e| SqlError::new(INTERNAL, e.to_string()))?;
                    let mut first = csv::ByteRecord::new();
                    skip.read_byte_record(&mut first)
                        .map_err(|e| SqlError::new(crate::error::BAD_VALUE, e.to_string()))?;
                    let at = skip.position().byte();
                    std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(at)).map_err(io)?;
                }
                std::io::copy(&mut reader, &mut out).map_err(io)?;
                out.flush().map_err(io)?;
                drop(out);
                Ok::<_, SqlError>(dest)
            })();
            let _ = std::fs::remove_file(&path);
            result
        });
        let dest = work
            .await
            .map_err(|e| SqlError::new(INTERNAL, format!("COPY: {e}")))??;
        let d = dest.clone();
        let n = engine.call(move |db| db.import(&table, &d)).await?;
        if n.is_ok() {
            let _ = std::fs::remove_file(&dest);
        }
        n
    }
}

fn pg(e: SqlError) -> PgWireError {
    e.into()
}

fn rand_u32() -> u32 {
    let mut h = Sha256::new();
    h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
    h.update(format!("{:?}", std::thread::current().id()).as_bytes());
    let d = h.finalize();
    u32::from_le_bytes([d[0], d[1], d[2], d[3]]) % 1_000_000
}

#[async_trait]
impl CopyHandler for Conn {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.copy.data(&copy_data.data).map_err(pg)
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let n = self.copy.finish(&self.engine).await.map_err(pg)?;
        client
            .send(PgWireBackendMessage::CommandComplete(
                Tag::new("COPY").with_rows(n).into(),
            ))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(p) = self.copy.take() {
            let _ = std::fs::remove_file(&p.path);
        }
        pg(SqlError::new(
            "57014",
            format!("COPY from stdin failed: {}", fail.message),
        ))
    }
}

/// The settings `sesame import` opens a table's store with, in force
/// while a COPY's import opens its table (`Db::import`); `sesame sql`'s
/// own come back when this is dropped. `sesame sql` serves with a
/// gigabyte of redb page cache and a chunk memo (`crate::CHUNK_MEMO_BYTES`)
/// for its queries; an import under those ran at 1.2 times the CPU time
/// of `sesame import` (the cache's fresh pages zeroed as it filled to a
/// gigabyte; every write dropping the memo) with a peak of 966 against
/// 263 MB (`docs/performance.md`, "COPY at the import's speed"). The
/// settings are read when a store is opened, and every table of `sesame
/// sql` is opened on its engine thread, so none opens under the wrong
/// ones.
pub(crate) struct ImportSettings {
    cache: usize,
    memo: usize,
}

impl ImportSettings {
    /// Applies the import's settings until the value is dropped.
    pub(crate) fn apply() -> Self {
        let saved = ImportSettings {
            cache: sesame_store::RedbStore::cache_bytes(),
            memo: sesame_client::chunk_memo_bytes(),
        };
        sesame_store::RedbStore::set_cache_bytes(sesame_client::table::import::IMPORT_CACHE_BYTES);
        sesame_client::set_chunk_memo_bytes(0);
        saved
    }
}

impl Drop for ImportSettings {
    fn drop(&mut self) {
        sesame_store::RedbStore::set_cache_bytes(self.cache);
        sesame_client::set_chunk_memo_bytes(self.memo);
    }
}

/// Held by the tests that change or swap the process-wide settings
/// (they run on threads of one process).
#[cfg(test)]
pub(crate) static SETTINGS_IN_TESTS: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_client::table::import::IMPORT_CACHE_BYTES;
    use sesame_store::RedbStore;

    /// A COPY's import opens its table's store as `sesame import` does:
    /// redb's 32 MiB page cache (not `sesame sql`'s gigabyte) and no
    /// chunk memo (every write of the import would drop it); the serving
    /// settings are back afterwards.
    #[test]
    fn a_copy_imports_with_the_import_settings_and_serves_with_its_own_after() {
        let _alone = SETTINGS_IN_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let serving_cache = 1 << 30;
        RedbStore::set_cache_bytes(serving_cache);
        sesame_client::set_chunk_memo_bytes(crate::CHUNK_MEMO_BYTES);
        {
            let _import = ImportSettings::apply();
            assert_eq!(
                RedbStore::cache_bytes(),
                IMPORT_CACHE_BYTES,
                "a COPY's import opens its store with another page cache than `sesame import`"
            );
            assert_eq!(
                sesame_client::chunk_memo_bytes(),
                0,
                "a COPY's import opens its store with a chunk memo"
            );
        }
        assert_eq!(RedbStore::cache_bytes(), serving_cache);
        assert_eq!(sesame_client::chunk_memo_bytes(), crate::CHUNK_MEMO_BYTES);
    }
}
