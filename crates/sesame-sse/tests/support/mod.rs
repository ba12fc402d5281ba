//! What the scheme tests share: a scheme's server on a store, behind an
//! in-process channel, and a client set up on an empty index over it.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Service, Store};
use sesame_sse::{KeywordClient, KeywordScheme, Multimap};
use sesame_store::MemoryStore;

/// The channel of the tests: in process, to a scheme's server.
pub(crate) type Chan = LocalChannel<Box<dyn Service>>;

/// `scheme`'s server on `store` (default server parameters), behind an
/// in-process channel.
pub(crate) fn channel(scheme: &KeywordScheme, store: Arc<dyn Store>) -> Chan {
    LocalChannel::new(scheme.server(store, &sesame_core::Params::new()).unwrap())
}

/// `scheme`'s server on a fresh memory store.
pub(crate) fn memory_channel(scheme: &KeywordScheme) -> Chan {
    channel(scheme, Arc::new(MemoryStore::new()))
}

/// The client `new` makes (from a generator seeded with `seed`), set up on
/// an empty index of the scheme named `name` on a fresh memory store.
pub(crate) fn fresh<C: KeywordClient + ?Sized>(
    name: &str,
    seed: u64,
    new: impl FnOnce(&mut ChaCha20Rng) -> Box<C>,
) -> (Box<C>, Chan, ChaCha20Rng) {
    let s = sesame_sse::scheme(name).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut c = new(&mut rng);
    let mut ch = memory_channel(&s);
    c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    (c, ch, rng)
}
