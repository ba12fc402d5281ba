//! The saved form of a client: scheme name, parameters, master key and
//! (for stateful schemes) state, in the wire encoding.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Error, Result};
use sesame_crypto::Key;
use zeroize::{Zeroize, Zeroizing};

/// Master key bytes inside a saved client; wiped on drop.
#[derive(Serialize, Deserialize)]
pub(crate) struct KeyBytes(pub(crate) [u8; 32]);

impl Drop for KeyBytes {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl KeyBytes {
    pub(crate) fn of(key: &Key<32>) -> Self {
        KeyBytes(*key.as_bytes())
    }

    pub(crate) fn key(&self) -> Key<32> {
        Key::from_bytes(self.0)
    }
}

/// The state of a stateless scheme.
#[derive(Serialize, Deserialize)]
pub(crate) struct NoState;

/// A saved client: `scheme` names the scheme so that restoring the wrong
/// scheme fails cleanly.
#[derive(Serialize, Deserialize)]
pub(crate) struct Saved<P, S> {
    pub(crate) scheme: String,
    pub(crate) params: P,
    pub(crate) key: KeyBytes,
    pub(crate) state: S,
}

/// Encodes a saved client.
pub(crate) fn save<P: Serialize, S: Serialize>(
    scheme: &str,
    params: P,
    key: &Key<32>,
    state: S,
) -> Result<Zeroizing<Vec<u8>>> {
    let saved = Saved {
        scheme: scheme.to_owned(),
        params,
        key: KeyBytes::of(key),
        state,
    };
    Ok(Zeroizing::new(wire::encode(&saved)?))
}

/// Decodes a saved client of `scheme`.
pub(crate) fn restore<P: DeserializeOwned, S: DeserializeOwned>(
    scheme: &str,
    bytes: &[u8],
) -> Result<Saved<P, S>> {
    let saved: Saved<P, S> = wire::decode(bytes)?;
    if saved.scheme != scheme {
        return Err(Error::InvalidArgument(format!(
            "saved client is of scheme {:?}, not {scheme:?}",
            saved.scheme
        )));
    }
    Ok(saved)
}
