//! BCLO exactly as the `pyope` Python package (0.2.2, MIT) computes it,
//! for the cross-check against an implementation written elsewhere
//! (`tests/pyope_crosscheck.rs`). Not for use: [`super::Bclo`] is the
//! scheme.
//!
//! What `pyope` does, and this module repeats:
//!
//! - coins for a node are the bits (most significant first) of AES-256-CTR
//!   with a zero initial counter block, keyed by `HMAC-SHA256(key,
//!   decimal(data))`, where `data` is the node's range midpoint for an
//!   interior node and the plaintext for a leaf (the two share one input
//!   space: a plaintext equal to some midpoint gets that node's coins);
//! - the range `[a, b]` splits at `mid = a - 1 + ceil((b - a + 1) / 2)`;
//!   the number of domain points at or below `mid` is sampled with
//!   [`crate::hg::pyope::rhyper`] (NumPy's HYP/HRUA in `f64`);
//! - when that number is 0, `pyope` still sends the first domain point
//!   down (a quirk kept here);
//! - a leaf's ciphertext is uniform in its range by bisection, one coin bit
//!   per halving.

use ctr::cipher::{KeyIvInit, StreamCipher};
use sesame_core::{Error, Result};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::HmacPrf;
use zeroize::Zeroizing;

use crate::hg::pyope::{rhyper, Bits};

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;

/// An inclusive range of integers, as `pyope.ope.ValueRange`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRange {
    /// First value.
    pub start: i128,
    /// Last value (inclusive).
    pub end: i128,
}

impl ValueRange {
    /// `[start, end]`.
    pub fn new(start: i128, end: i128) -> Result<Self> {
        if start > end {
            return Err(Error::InvalidArgument(format!(
                "range [{start}, {end}] is empty"
            )));
        }
        Ok(ValueRange { start, end })
    }

    fn size(&self) -> i128 {
        self.end - self.start + 1
    }

    /// Where `pyope` splits an output range: its middle, rounded up.
    fn mid(&self) -> i128 {
        self.start - 1 + (self.size() + 1) / 2
    }

    fn contains(&self, x: i128) -> bool {
        self.start <= x && x <= self.end
    }
}

/// `pyope.ope.OPE(key, in_range, out_range)`.
pub struct PyopeOpe {
    hmac: HmacPrf,
    in_range: ValueRange,
    out_range: ValueRange,
}

impl core::fmt::Debug for PyopeOpe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PyopeOpe")
            .field("in_range", &self.in_range)
            .field("out_range", &self.out_range)
            .finish_non_exhaustive()
    }
}

/// `pyope`'s `tape_gen`: the bits of AES-256-CTR keyed by an HMAC.
struct PyTape {
    cipher: Aes256Ctr,
    block: [u8; 16],
    pos: usize,
}

impl PyTape {
    fn new(hmac: &HmacPrf, data: i128) -> Self {
        let key = Zeroizing::new(hmac.eval_bytes(data.to_string().as_bytes()));
        PyTape {
            cipher: Aes256Ctr::new(key.as_ref().into(), &[0u8; 16].into()),
            block: [0; 16],
            pos: 128,
        }
    }
}

impl Bits for PyTape {
    fn bit(&mut self) -> u8 {
        if self.pos == 128 {
            counter::record(Primitive::Prf, 1);
            self.block = [0; 16];
            self.cipher.apply_keystream(&mut self.block);
            self.pos = 0;
        }
        let b = (self.block[self.pos / 8] >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        b
    }
}

impl PyopeOpe {
    /// The cipher for `key` (any non-empty byte string, as `pyope`
    /// accepts), plaintexts in `in_range` and ciphertexts in `out_range`.
    /// Ranges must be smaller than `2^53` (`pyope`'s float arithmetic).
    pub fn new(key: &[u8], in_range: ValueRange, out_range: ValueRange) -> Result<Self> {
        if in_range.size() > out_range.size() {
            return Err(Error::InvalidArgument(
                "the input range is larger than the output range".into(),
            ));
        }
        if out_range.size() >= 1 << 53 {
            return Err(Error::InvalidArgument(
                "pyope's arithmetic is exact only for ranges below 2^53".into(),
            ));
        }
        let hmac = HmacPrf::from_slice(key)
            .map_err(|e| Error::InvalidArgument(format!("pyope key: {e}")))?;
        Ok(PyopeOpe {
            hmac,
            in_range,
            out_range,
        })
    }

    /// `OPE.encrypt(plaintext)`.
    pub fn encrypt(&self, plaintext: i128) -> Result<i128> {
        if !self.in_range.contains(plaintext) {
            return Err(Error::InvalidArgument(
                "plaintext is not within the input range".into(),
            ));
        }
        let (mut inr, mut outr) = (self.in_range, self.out_range);
        loop {
            let (in_size, mid) = (inr.size(), outr.mid());
            if in_size == 1 {
                return Ok(sample_uniform(
                    outr,
                    &mut PyTape::new(&self.hmac, plaintext),
                ));
            }
            let x = sample_hgd(inr, outr, mid, &mut PyTape::new(&self.hmac, mid));
            (inr, outr) = descend(inr, outr, x, mid, plaintext <= x);
        }
    }

    /// `OPE.decrypt(ciphertext)`; [`Error::Crypto`] where `pyope` raises
    /// `InvalidCiphertextError`.
    pub fn decrypt(&self, ciphertext: i128) -> Result<i128> {
        if !self.out_range.contains(ciphertext) {
            return Err(Error::Crypto);
        }
        let (mut inr, mut outr) = (self.in_range, self.out_range);
        loop {
            let (in_size, mid) = (inr.size(), outr.mid());
            if in_size == 1 {
                let c = sample_uniform(outr, &mut PyTape::new(&self.hmac, inr.start));
                return if c == ciphertext {
                    Ok(inr.start)
                } else {
                    Err(Error::Crypto)
                };
            }
            if in_size < 1 {
                return Err(Error::Crypto);
            }
            let x = sample_hgd(inr, outr, mid, &mut PyTape::new(&self.hmac, mid));
            (inr, outr) = descend(inr, outr, x, mid, ciphertext <= mid);
        }
    }
}

/// One step down the recursion: the input range split after `x` and the
/// output range after `mid`, keeping the lower parts (`low`) or the upper
/// ones (`pyope`'s two branches, shared by encryption and decryption).
fn descend(
    inr: ValueRange,
    outr: ValueRange,
    x: i128,
    mid: i128,
    low: bool,
) -> (ValueRange, ValueRange) {
    if low {
        (
            ValueRange {
                start: inr.start,
                end: x,
            },
            ValueRange {
                start: outr.start,
                end: mid,
            },
        )
    } else {
        (
            ValueRange {
                start: x + 1,
                end: inr.end,
            },
            ValueRange {
                start: mid + 1,
                end: outr.end,
            },
        )
    }
}

fn sample_hgd(inr: ValueRange, outr: ValueRange, nsample: i128, coins: &mut PyTape) -> i128 {
    let (in_size, out_size) = (inr.size(), outr.size());
    let index = nsample - outr.start + 1;
    if in_size == out_size {
        return inr.start + index - 1;
    }
    let n = rhyper(index, in_size, out_size - in_size, coins);
    if n == 0 {
        inr.start
    } else {
        inr.start + n - 1
    }
}

fn sample_uniform(range: ValueRange, coins: &mut PyTape) -> i128 {
    let mut cur = range;
    while cur.size() > 1 {
        let mid = (cur.start + cur.end).div_euclid(2);
        if coins.bit() == 0 {
            cur.end = mid;
        } else {
            cur.start = mid + 1;
        }
    }
    cur.start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_decryption_on_pyope_defaults() {
        let ope = PyopeOpe::new(
            b"key",
            ValueRange::new(0, (1 << 15) - 1).unwrap(),
            ValueRange::new(0, (1 << 31) - 1).unwrap(),
        )
        .unwrap();
        let mut prev = -1;
        for m in (0..(1 << 15)).step_by(997) {
            let c = ope.encrypt(m).unwrap();
            assert!(c > prev);
            prev = c;
            assert_eq!(ope.decrypt(c).unwrap(), m);
        }
        assert!(ope.encrypt(1 << 15).is_err());
    }
}
