//! `CompactIndex` from the client's side: the deltas of a packed index on
//! the server merged into their chunks, request after request.

use tonic::Code;

use super::{status_error, NetworkBackend};
use crate::error::{ClientError, Result};

/// `CompactIndex` requests in a row that may merge nothing (another
/// commit came first each time) before a compaction gives up.
const COMPACT_IDLE_REQUESTS: u32 = 16;

impl NetworkBackend {
    /// Merges the deltas of generation `generation` of index `index` into
    /// their chunks on the server: `CompactIndex` until the server answers
    /// that no delta is left. Each request merges for a bounded time, in
    /// atomic batches (`crates/sesame-server/src/engine/compact.rs`), so a
    /// request cut short leaves a valid layout and the next one goes on.
    /// Returns the chunks written; a server from before the request has
    /// nothing merged (`Ok(0)`).
    ///
    /// Not [`Backend::compact_index`]: an import through a server does not
    /// run it, because the merged layout measured slower for point queries
    /// on the server than the layout with deltas (`docs/performance.md`,
    /// "The flights' import over loopback TLS").
    pub fn compact_on_server(&self, index: &str, generation: u64) -> Result<usize> {
        let index = self.remote(index)?;
        let index = index.as_str();
        let mut written = 0u64;
        let mut idle = 0;
        loop {
            let r = match self
                .conn
                .with_retries(|mut c| async move { c.compact_index(index, generation).await })
            {
                Ok(r) => r,
                // A server from before the request knows no such method.
                Err(s)
                    if s.code() == Code::Unimplemented && s.message().starts_with("no method") =>
                {
                    return Ok(0)
                }
                Err(s) => return Err(status_error(&s)),
            };
            written = written.saturating_add(r.chunks_written);
            if r.done {
                return Ok(usize::try_from(written).unwrap_or(usize::MAX));
            }
            idle = if r.chunks_written == 0 { idle + 1 } else { 0 };
            if idle >= COMPACT_IDLE_REQUESTS {
                return Err(ClientError::Core(sesame_core::Error::Server(format!(
                    "the server merged nothing in {COMPACT_IDLE_REQUESTS} compaction requests in \
                     a row (other clients keep writing the index); the index answers as \
                     before: compact it again later"
                ))));
            }
        }
    }
}
