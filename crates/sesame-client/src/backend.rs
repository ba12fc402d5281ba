//! Where the server halves run: in-process over the profile's own store
//! ([`EmbeddedBackend`]), or on a Sesame server
//! ([`NetworkBackend`](crate::NetworkBackend)).
//!
//! A [`Session`](crate::Session) reaches its index and its documents only
//! through the channels a [`Backend`] hands out, so replacing the embedded
//! backend by a network one changes nothing above it.

use std::path::Path;
use std::sync::Arc;

use sesame_core::{Channel, LocalChannel, Meter, Prefixed, Store, Typed, WriteBatch};
use sesame_sse::KeywordScheme;
use sesame_store::RedbStore;

use crate::doc_service::DocServer;
use crate::error::{ClientError, Result};

/// The server side of a profile's indexes, as the session sees it.
///
/// An index lives in numbered *generations*: a static scheme's rebuild
/// writes a fresh generation, the client state switches to it in one
/// atomic write, and the old generations are dropped afterwards, so a crash
/// at any point leaves a complete index that matches the client state.
pub trait Backend {
    /// A channel to the server half of `scheme` for generation `generation`
    /// of index `index`.
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>>;

    /// A channel to the document service of index `index`.
    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel>>;

    /// Removes every generation of index `index` but `keep`.
    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()>;

    /// The meter every channel of this backend reports to.
    fn meter(&self) -> &Meter;

    /// Sends the requests of one update (a pending intent named `id`) and
    /// returns the responses, in order. A network backend applies them in
    /// one transaction and recognises a repeat of `id`; the default sends
    /// them one by one over [`Backend::index_channel`] (each request is
    /// idempotent, so a repeat after a crash is harmless).
    fn apply_update(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>> {
        let _ = id;
        let mut channel = self.index_channel(index, generation, scheme)?;
        requests
            .iter()
            .map(|r| channel.call(r).map_err(ClientError::from))
            .collect()
    }

    /// A channel for building generation `generation` of an index with a
    /// static scheme's setup. Nothing need be visible before
    /// [`SetupChannel::commit`]; the default is
    /// [`Backend::index_channel`], whose writes are visible at once (the
    /// client state switches to the new generation only after the commit
    /// anyway).
    fn setup_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn SetupChannel>> {
        Ok(Box::new(Immediate(
            self.index_channel(index, generation, scheme)?,
        )))
    }
}

/// A channel for a setup, committed at the end.
pub trait SetupChannel: Channel {
    /// Makes everything sent through the channel durable and visible.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// A setup channel whose writes need no commit.
struct Immediate(Box<dyn Channel>);

impl Channel for Immediate {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.0.call(request)
    }
    fn meter(&self) -> &Meter {
        self.0.meter()
    }
}

impl SetupChannel for Immediate {
    fn commit(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// The server halves run in this process over one [`Store`]: scheme
/// servers under `i/<index>/<generation>/`, documents under `d/<index>/`,
/// each reached through a [`LocalChannel`] (which still encodes and counts
/// every message).
pub struct EmbeddedBackend {
    store: Arc<dyn Store>,
    meter: Meter,
}

impl std::fmt::Debug for EmbeddedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBackend")
            .field("store", &self.store.backend())
            .finish_non_exhaustive()
    }
}

impl EmbeddedBackend {
    /// The backend over the redb store at `path`, created if absent. The
    /// store stays locked against other processes while the backend lives.
    pub fn open(path: &Path) -> Result<Self> {
        let store = RedbStore::open(path).map_err(|e| match e {
            sesame_core::Error::StoreBusy(_) => ClientError::StoreBusy(path.to_path_buf()),
            other => ClientError::Core(other),
        })?;
        Ok(Self::over(Arc::new(store)))
    }

    /// The backend over any store (a `MemoryStore` in tests).
    pub fn over(store: Arc<dyn Store>) -> Self {
        EmbeddedBackend {
            store,
            meter: Meter::new(),
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

/// Key prefix of every generation of an index.
fn index_prefix(index: &str) -> Vec<u8> {
    format!("i/{index}/").into_bytes()
}

/// Key prefix of one generation of an index.
fn generation_prefix(index: &str, generation: u64) -> Vec<u8> {
    format!("i/{index}/{generation}/").into_bytes()
}

impl Backend for EmbeddedBackend {
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        let view: Arc<dyn Store> = Arc::new(Prefixed::new(
            self.store.clone(),
            generation_prefix(index, generation),
        ));
        let server = (scheme.new_server)(view);
        Ok(Box::new(LocalChannel::with_meter(
            server,
            self.meter.clone(),
        )))
    }

    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel>> {
        let view: Arc<dyn Store> = Arc::new(Prefixed::new(
            self.store.clone(),
            format!("d/{index}/").into_bytes(),
        ));
        Ok(Box::new(LocalChannel::with_meter(
            Typed(DocServer::new(view)),
            self.meter.clone(),
        )))
    }

    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        let keep = generation_prefix(index, keep);
        let mut batch = WriteBatch::new();
        for (k, _) in self.store.scan_prefix(&index_prefix(index))? {
            if !k.starts_with(&keep) {
                batch.delete(k);
            }
        }
        if !batch.is_empty() {
            self.store.write(batch)?;
        }
        Ok(())
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}
