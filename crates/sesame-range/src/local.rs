//! A range protocol run in process: its client, and its server half over a
//! [`PagedStore`] (page I/O counted) on a store, joined by a
//! [`LocalChannel`]. What the tests, the benchmark harness and an embedded
//! user need; a networked user gives the client a channel to the server
//! instead.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use sesame_core::{LocalChannel, Params, Result, Service, Store};

use crate::api::{RangeAnswer, RangeClient, RangeProtocol};
use crate::paged::{PageConfig, PagedStore};

/// A range protocol's client and server half in one process.
pub struct LocalRange {
    /// The protocol.
    pub protocol: RangeProtocol,
    /// The store under the server's pages (what survives a restart).
    pub store: Arc<dyn Store>,
    /// The page configuration.
    pub page: PageConfig,
    /// The channel to the server half (its meter counts rounds and bytes).
    pub channel: LocalChannel<Box<dyn Service>>,
    /// The client half.
    pub client: Box<dyn RangeClient>,
}

impl std::fmt::Debug for LocalRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRange")
            .field("protocol", &self.protocol.descriptor.name)
            .field("page", &self.page)
            .finish_non_exhaustive()
    }
}

impl LocalRange {
    /// A client with fresh keys for `params`, and a server half over
    /// `store` laid out for `page`.
    pub fn new(
        protocol: RangeProtocol,
        params: &Params,
        page: PageConfig,
        store: Arc<dyn Store>,
        rng: &mut dyn CryptoRngCore,
    ) -> Result<Self> {
        let client = (protocol.new_client)(rng, &page.with(params))?;
        let channel = LocalChannel::new(Self::server(protocol, &store, page)?);
        Ok(LocalRange {
            protocol,
            store,
            page,
            channel,
            client,
        })
    }

    fn server(
        protocol: RangeProtocol,
        store: &Arc<dyn Store>,
        page: PageConfig,
    ) -> Result<Box<dyn Service>> {
        let paged = PagedStore::new(Arc::clone(store), page)?;
        protocol.server(Arc::new(paged), &page.with(&Params::new()))
    }

    /// Restarts both halves: the client from its saved state, the server
    /// over the same store with a cold page cache.
    pub fn restart(&mut self) -> Result<()> {
        let saved = self.client.save_state()?;
        self.client = (self.protocol.restore_client)(&saved)?;
        self.channel = LocalChannel::new(Self::server(self.protocol, &self.store, self.page)?);
        Ok(())
    }

    /// Inserts `value` with its record `data`.
    pub fn insert(&mut self, rng: &mut dyn CryptoRngCore, value: u64, data: &[u8]) -> Result<()> {
        self.client.insert(rng, &mut self.channel, value, data)
    }

    /// The records with values in `[lo, hi]`.
    pub fn query(&mut self, rng: &mut dyn CryptoRngCore, lo: u64, hi: u64) -> Result<RangeAnswer> {
        self.client.query(rng, &mut self.channel, lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    use sesame_store::MemoryStore;

    use super::*;

    #[test]
    fn a_restarted_local_range_answers_as_before() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let protocol = crate::protocol("bplus-clww").unwrap_or_else(|| unreachable!());
        let mut params = Params::new();
        params.set("bits", 8);
        let mut r = LocalRange::new(protocol, &params, PageConfig::default(), store, &mut rng)
            .unwrap_or_else(|e| panic!("{e}"));
        for v in [5u64, 9, 200, 7] {
            r.insert(&mut rng, v, &[v as u8])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let before = r.query(&mut rng, 6, 100).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(before.records, vec![(7, vec![7]), (9, vec![9])]);
        r.restart().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.query(&mut rng, 6, 100).unwrap_or_else(|e| panic!("{e}")),
            before
        );
    }
}
