//! The passphrase key derivation: Argon2id (RFC 9106).

use argon2::{Algorithm, Argon2, Version};
use serde::{Deserialize, Serialize};
use sesame_crypto::Key;
use zeroize::Zeroize;

use crate::error::{ClientError, Result};

/// Bytes of the random salt stored in the profile header.
pub(crate) const SALT_LEN: usize = 16;

/// Argon2id cost parameters, stored in the profile header so that a
/// profile opens with the parameters it was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KdfParams {
    /// Memory in KiB.
    pub m_kib: u32,
    /// Passes over the memory.
    pub t: u32,
    /// Lanes.
    pub p: u32,
}

impl Default for KdfParams {
    /// 64 MiB, 3 passes, 1 lane: about a quarter of a second on a laptop,
    /// within RFC 9106's second recommended option.
    fn default() -> Self {
        KdfParams {
            m_kib: 64 * 1024,
            t: 3,
            p: 1,
        }
    }
}

/// Largest memory cost accepted from a header (4 GiB), so that a hostile
/// header cannot make the client allocate without bound.
const MAX_M_KIB: u32 = 4 << 20;
const MAX_T: u32 = 64;
const MAX_P: u32 = 16;

impl KdfParams {
    /// Checks that the parameters are within the accepted ranges.
    pub fn validate(&self) -> Result<()> {
        let ok = (1..=MAX_P).contains(&self.p)
            && (1..=MAX_T).contains(&self.t)
            && self.m_kib >= 8 * self.p
            && self.m_kib <= MAX_M_KIB;
        if ok {
            Ok(())
        } else {
            Err(ClientError::InvalidArgument(format!(
                "Argon2id parameters m={} KiB, t={}, p={} are out of range \
                 (1 <= p <= {MAX_P}, 1 <= t <= {MAX_T}, 8p <= m <= {MAX_M_KIB})",
                self.m_kib, self.t, self.p
            )))
        }
    }

    /// Derives the 32-byte master key from `passphrase` and `salt`.
    pub(crate) fn derive(&self, passphrase: &str, salt: &[u8]) -> Result<Key<32>> {
        self.validate()?;
        let params = argon2::Params::new(self.m_kib, self.t, self.p, Some(32))
            .map_err(|e| ClientError::InvalidArgument(format!("Argon2id parameters: {e}")))?;
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
        let mut out = [0u8; 32];
        let result = argon.hash_password_into(passphrase.as_bytes(), salt, &mut out);
        let key = Key::from_bytes(out);
        out.zeroize();
        result.map_err(|e| ClientError::InvalidArgument(format!("Argon2id: {e}")))?;
        Ok(key)
    }
}

/// The largest Argon2id costs this device accepts in a header it did not
/// make itself: the server's (`init --join`), or a newer header another
/// device put on the server. A local setting: the server chooses those
/// costs, and [`KdfParams::validate`] alone would let it make a device
/// fill 4 GiB 64 times over before the passphrase is even checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KdfLimit {
    /// Largest memory, in KiB.
    pub max_m_kib: u32,
    /// Largest number of passes.
    pub max_t: u32,
}

impl Default for KdfLimit {
    /// 1 GiB and 8 passes: sixteen times this build's default memory and
    /// more than twice its passes, a few seconds on a laptop at most.
    fn default() -> Self {
        KdfLimit {
            max_m_kib: 1 << 20,
            max_t: 8,
        }
    }
}

impl KdfLimit {
    /// Refuses `params` beyond the limit, saying how to raise it.
    pub fn check(&self, params: &KdfParams) -> Result<()> {
        if params.m_kib <= self.max_m_kib && params.t <= self.max_t {
            return Ok(());
        }
        Err(ClientError::InvalidArgument(format!(
            "the profile header from the server asks for Argon2id m={} MiB, t={} passes, more \
             than this device accepts (m <= {} MiB, t <= {}): a server could use such costs to \
             make a device spend minutes and gigabytes; if you chose them yourself, raise the \
             limit (sesame: SESAME_KDF_MAX_MIB, SESAME_KDF_MAX_PASSES)",
            params.m_kib / 1024,
            params.t,
            self.max_m_kib / 1024,
            self.max_t
        )))
    }
}

impl std::fmt::Display for KdfParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "argon2id m={} KiB t={} p={}", self.m_kib, self.t, self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivation_depends_on_passphrase_salt_and_params() {
        let p = crate::insecure::fast_kdf();
        let a = p.derive("pw", &[1; 16]).unwrap();
        assert_eq!(a, p.derive("pw", &[1; 16]).unwrap());
        assert_ne!(a, p.derive("pw2", &[1; 16]).unwrap());
        assert_ne!(a, p.derive("pw", &[2; 16]).unwrap());
        let q = KdfParams { t: 2, ..p };
        assert_ne!(a, q.derive("pw", &[1; 16]).unwrap());
    }

    #[test]
    fn out_of_range_params_are_refused() {
        for bad in [
            KdfParams {
                m_kib: 4,
                t: 1,
                p: 1,
            },
            KdfParams {
                m_kib: 64,
                t: 0,
                p: 1,
            },
            KdfParams {
                m_kib: 64,
                t: 1,
                p: 0,
            },
            KdfParams {
                m_kib: u32::MAX,
                t: 1,
                p: 1,
            },
        ] {
            assert!(matches!(
                bad.validate(),
                Err(ClientError::InvalidArgument(_))
            ));
        }
        assert!(KdfParams::default().validate().is_ok());
    }

    #[test]
    fn the_limit_refuses_costs_beyond_it_and_accepts_the_default() {
        let limit = KdfLimit::default();
        assert!(limit.check(&KdfParams::default()).is_ok());
        for bad in [
            KdfParams {
                m_kib: (1 << 20) + 1,
                t: 1,
                p: 1,
            },
            KdfParams {
                m_kib: 4 << 20,
                t: 64,
                p: 1,
            },
            KdfParams {
                m_kib: 64,
                t: 9,
                p: 1,
            },
        ] {
            let err = limit.check(&bad).unwrap_err();
            assert!(err.to_string().contains("SESAME_KDF_MAX_MIB"), "{err}");
        }
        let raised = KdfLimit {
            max_m_kib: 4 << 20,
            max_t: 64,
        };
        assert!(raised
            .check(&KdfParams {
                m_kib: 4 << 20,
                t: 64,
                p: 1
            })
            .is_ok());
    }
}
