//! HMAC-SHA256 as a PRF on inputs of any length.

use core::fmt;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::hash::Sha256Midstate;
use crate::key::Key;
use crate::prf::Prf;

/// SHA-256 block length: HMAC keys are padded (or hashed) to this length.
const BLOCK_LEN: usize = 64;

/// HMAC-SHA256 (RFC 2104) as a PRF `{0,1}* -> {0,1}^256`.
///
/// Stores the key, padded to the SHA-256 block as HMAC prescribes (`K0`
/// of FIPS 198-1), and the SHA-256 states after `K0 ^ ipad` and `K0 ^
/// opad`, computed once ([`Sha256Midstate`]): an evaluation is then the
/// compressions of the message and of the inner hash alone, two fewer than
/// keying HMAC again. All three are wiped on drop (the `hmac` crate's own
/// precomputed states cannot be wiped, so they are not kept).
pub struct HmacPrf {
    k0: [u8; BLOCK_LEN],
    inner: Sha256Midstate,
    outer: Sha256Midstate,
}

impl HmacPrf {
    /// Output length in bytes.
    pub const OUTPUT_LEN: usize = 32;

    /// Keys HMAC with a 256-bit key.
    pub fn new(key: &Key<32>) -> Self {
        let mut k0 = [0u8; BLOCK_LEN];
        k0[..32].copy_from_slice(key.as_bytes());
        Self::keyed(k0)
    }

    /// The PRF of the padded key `k0` (wiped here once copied).
    fn keyed(mut k0: [u8; BLOCK_LEN]) -> Self {
        let mut pad = k0.map(|b| b ^ 0x36);
        let inner = Sha256Midstate::after(&pad);
        pad = k0.map(|b| b ^ 0x5c);
        let outer = Sha256Midstate::after(&pad);
        pad.zeroize();
        let prf = HmacPrf { k0, inner, outer };
        k0.zeroize();
        prf
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
        Ok(Self::keyed(k0))
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
        let mut inner = self.inner.finish(parts);
        let out = self.outer.finish(&[&inner]);
        inner.zeroize();
        out
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
        self.inner.wipe();
        self.outer.wipe();
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

    /// What dropping the PRF runs leaves its padded key and its keyed
    /// states zero.
    #[test]
    fn wipe_zeroes_the_padded_key() {
        let mut prf = HmacPrf::new(&Key::<32>::from_bytes([3; 32]));
        assert!(prf.k0.iter().any(|b| *b != 0));
        assert!(!prf.inner.is_zero() && !prf.outer.is_zero());
        prf.wipe();
        assert!(prf.k0.iter().all(|b| *b == 0));
        assert!(prf.inner.is_zero() && prf.outer.is_zero());
    }

    /// The keyed states give the `hmac` crate's HMAC-SHA256, for keys of
    /// every kind `from_slice` takes and messages across several blocks.
    #[test]
    fn keyed_states_give_the_hmac_crate_bytes() {
        let message: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        for key_len in [1, 20, 32, 63, 64, 65, 131] {
            let key: Vec<u8> = (0..key_len).map(|i| (i * 3 + 1) as u8).collect();
            let prf = HmacPrf::from_slice(&key).expect("non-empty");
            for len in (0..message.len()).step_by(7) {
                let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("any length");
                mac.update(&message[..len]);
                let expected: [u8; 32] = mac.finalize().into_bytes().into();
                assert_eq!(prf.eval_bytes(&message[..len]), expected, "{key_len} {len}");
                let (a, b) = message[..len].split_at(len / 3);
                assert_eq!(prf.eval_concat(&[a, b]), expected, "{key_len} {len}");
            }
        }
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
