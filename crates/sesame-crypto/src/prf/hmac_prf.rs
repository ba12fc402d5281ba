//! HMAC-SHA256 as a PRF on inputs of any length.

use core::fmt;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::prf::Prf;

/// SHA-256 block length: HMAC keys are padded (or hashed) to this length.
const BLOCK_LEN: usize = 64;

/// HMAC-SHA256 (RFC 2104) as a PRF `{0,1}* -> {0,1}^256`.
///
/// Stores only the key, padded to the SHA-256 block as HMAC prescribes
/// (`K0` of FIPS 198-1), and wipes it on drop. The `hmac` crate's
/// precomputed inner and outer states cannot be wiped, so they are rebuilt
/// on each call: two extra SHA-256 compressions per evaluation, the price of
/// keeping no unwipeable copy of key-equivalent state.
pub struct HmacPrf {
    k0: [u8; BLOCK_LEN],
}

impl HmacPrf {
    /// Output length in bytes.
    pub const OUTPUT_LEN: usize = 32;

    /// Keys HMAC with a 256-bit key.
    pub fn new(key: &Key<32>) -> Self {
        let mut k0 = [0u8; BLOCK_LEN];
        k0[..32].copy_from_slice(key.as_bytes());
        HmacPrf { k0 }
    }

    /// Keys HMAC with a key of any non-empty length, as RFC 2104 allows
    /// (keys longer than 64 bytes are hashed first). Prefer [`HmacPrf::new`]
    /// with a full-length random key; this exists for interoperability and
    /// known-answer tests.
    pub fn from_slice(key: &[u8]) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidParameter {
                what: "HMAC key",
                reason: "must not be empty",
            });
        }
        let mut k0 = [0u8; BLOCK_LEN];
        if key.len() > BLOCK_LEN {
            let mut digest = Sha256::digest(key);
            k0[..32].copy_from_slice(&digest);
            digest.as_mut_slice().zeroize();
        } else {
            k0[..key.len()].copy_from_slice(key);
        }
        Ok(HmacPrf { k0 })
    }

    /// HMAC-SHA256 of `input`; one counted call.
    pub fn eval_bytes(&self, input: &[u8]) -> [u8; 32] {
        counter::record(Primitive::Prf, 1);
        self.eval_parts_uncounted(&[input])
    }

    /// HMAC-SHA256 of the concatenation of `parts`, without copying them;
    /// one counted call. The caller must make the concatenation unambiguous.
    pub fn eval_concat(&self, parts: &[&[u8]]) -> [u8; 32] {
        counter::record(Primitive::Prf, 1);
        self.eval_parts_uncounted(parts)
    }

    /// A fresh HMAC state under this key, not counted: for primitives of
    /// this crate that feed it themselves and count the call.
    pub(crate) fn mac_uncounted(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as Mac>::new_from_slice(&self.k0).expect("HMAC accepts keys of any length")
    }

    pub(crate) fn eval_parts_uncounted(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.mac_uncounted();
        for p in parts {
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }
}

impl Prf for HmacPrf {
    type Key = Key<32>;
    type Input = [u8];
    type Output = [u8; 32];

    fn new(key: &Key<32>) -> Self {
        HmacPrf::new(key)
    }

    fn eval(&self, input: &[u8]) -> [u8; 32] {
        self.eval_bytes(input)
    }
}

impl HmacPrf {
    /// Overwrites the padded key with zeros: what dropping it does.
    fn wipe(&mut self) {
        self.k0.zeroize();
    }
}

impl Drop for HmacPrf {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for HmacPrf {}

impl fmt::Debug for HmacPrf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacPrf([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dropping the PRF runs leaves its padded key zero.
    #[test]
    fn wipe_zeroes_the_padded_key() {
        let mut prf = HmacPrf::new(&Key::<32>::from_bytes([3; 32]));
        assert!(prf.k0.iter().any(|b| *b != 0));
        prf.wipe();
        assert!(prf.k0.iter().all(|b| *b == 0));
    }

    #[test]
    fn padded_key_equals_short_key() {
        // `new` pads a 32-byte key exactly as `from_slice` does.
        let key = Key::<32>::from_bytes([3; 32]);
        let a = HmacPrf::new(&key);
        let b = HmacPrf::from_slice(&[3; 32]).expect("non-empty");
        assert_eq!(a.eval_bytes(b"x"), b.eval_bytes(b"x"));
        assert_eq!(a.eval_concat(&[b"ab", b"c"]), a.eval_bytes(b"abc"));
        assert!(HmacPrf::from_slice(&[]).is_err());
        assert_eq!(format!("{a:?}"), "HmacPrf([redacted])");
    }
}
