//! Insecure settings, for tests only.
//!
//! Nothing here may protect real data: it exists so that test suites and
//! scripted demos do not spend a quarter of a second and 64 MiB on every
//! key derivation.

use crate::kdf::KdfParams;

/// Argon2id at its minimum cost (8 KiB, one pass): derives a key in
/// microseconds, so a stolen profile header can be brute-forced just as
/// fast. **For tests only.**
pub fn fast_kdf() -> KdfParams {
    KdfParams {
        m_kib: 8,
        t: 1,
        p: 1,
    }
}
