//! The store's identity: 16 random bytes made with the store (by the
//! first server to start on it), kept in it, and said in `Health`, so
//! that a client given several server URLs can check that they share one
//! store (`docs/scaling.md`, "Servers on one store").

use rand_core::{OsRng, RngCore};
use sesame_core::{Store, WriteBatch};

use crate::error::EngineError;

/// Where the store keeps its identity.
pub(super) const STORE_ID_KEY: &[u8] = b"s/store-id";

/// The store's identity, hex, made and kept on first use. Servers that
/// start at once on a new store agree: the first write wins, the others
/// read it.
pub(super) fn store_id(store: &dyn Store) -> Result<String, EngineError> {
    if let Some(id) = store.get(STORE_ID_KEY)? {
        return Ok(hex::encode(id));
    }
    let mut fresh = [0u8; 16];
    OsRng.fill_bytes(&mut fresh);
    let mut batch = WriteBatch::new();
    batch.put(STORE_ID_KEY, fresh.as_slice());
    store.write_if(&[(STORE_ID_KEY, None)], &batch)?;
    match store.get(STORE_ID_KEY)? {
        Some(id) => Ok(hex::encode(id)),
        None => Err(EngineError::Internal(
            "the store's identity was written but reads back as absent".into(),
        )),
    }
}
