//! The interface every order-preserving and order-revealing scheme
//! implements, its object-safe form, and the plaintext encodings.

use core::cmp::Ordering;
use core::fmt::Debug;

use rand_core::CryptoRngCore;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sesame_core::{wire, Error, Result, SchemeDescriptor};
use zeroize::Zeroizing;

/// Bounds every ciphertext type meets: cloneable, comparable for equality
/// of bytes (not of plaintexts), with a stable wire encoding, and movable
/// between threads.
pub trait CiphertextType:
    Clone + Debug + PartialEq + Eq + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<T> CiphertextType for T where
    T: Clone + Debug + PartialEq + Eq + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// An order-preserving or order-revealing encryption scheme over the
/// integers `0..2^bits` (`bits <= 64`).
///
/// - [`encrypt`](OreScheme::encrypt) takes `&mut self` because stateful
///   schemes (FH-OPE) update their client state; the others do not;
/// - [`compare`](OreScheme::compare) is the scheme's `Cmp`: for every scheme
///   but FH-OPE it uses no secret (the server can run it); FH-OPE compares
///   with the client state, as in seed 004 (three traversals);
/// - [`decrypt`](OreScheme::decrypt) exists where the scheme allows it
///   ([`can_decrypt`](OreScheme::can_decrypt)); otherwise it returns
///   [`Error::Unsupported`];
/// - [`save`](OreScheme::save) returns everything needed to restore the
///   client (keys and state), to be persisted like any client state.
///
/// Plaintexts of other types go through [`OreInput`]
/// ([`encrypt_value`](OreScheme::encrypt_value)).
pub trait OreScheme: Send {
    /// A full ciphertext (for left/right schemes, both halves).
    type Ciphertext: CiphertextType;

    /// The scheme's descriptor.
    fn descriptor(&self) -> &'static SchemeDescriptor;

    /// Plaintext width: plaintexts are `0..2^bits`.
    fn bits(&self) -> u32;

    /// Encrypts `x`; fails if `x >= 2^bits`.
    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        x: u64,
    ) -> Result<Self::Ciphertext>;

    /// The order of the plaintexts of `a` and `b`.
    fn compare(&self, a: &Self::Ciphertext, b: &Self::Ciphertext) -> Result<Ordering>;

    /// Whether [`decrypt`](OreScheme::decrypt) is supported.
    fn can_decrypt(&self) -> bool;

    /// The plaintext of `c`.
    fn decrypt(&self, c: &Self::Ciphertext) -> Result<u64>;

    /// Size of `c` in bits as the scheme defines it (packed, without the
    /// wire encoding's length prefixes), the figure of seed 004 Table 4.
    fn ciphertext_bits(&self, c: &Self::Ciphertext) -> u64;

    /// Size in bits of the client state beyond the keys (FH-OPE's tree);
    /// zero for stateless schemes.
    fn state_bits(&self) -> u64 {
        0
    }

    /// Keys, parameters and state, encoded; [`OreScheme::restore`] reads it.
    fn save(&self) -> Result<Zeroizing<Vec<u8>>>;

    /// The client saved by [`OreScheme::save`].
    fn restore(bytes: &[u8]) -> Result<Self>
    where
        Self: Sized;

    /// Encrypts a typed plaintext through its order-preserving encoding.
    fn encrypt_value<T: OreInput, R: CryptoRngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        x: T,
    ) -> Result<Self::Ciphertext>
    where
        Self: Sized,
    {
        check_width::<T>(self.bits())?;
        self.encrypt(rng, x.to_ore())
    }

    /// Decrypts into a typed plaintext.
    fn decrypt_value<T: OreInput>(&self, c: &Self::Ciphertext) -> Result<T>
    where
        Self: Sized,
    {
        let v = self.decrypt(c)?;
        T::from_ore(v).ok_or(Error::Crypto)
    }
}

/// The public comparison of an order-revealing scheme, as a server runs it
/// on the ciphertexts it stores. It is built from the scheme's public
/// parameters alone and holds no key; every scheme's
/// [`OreScheme::compare`] is its comparator's.
///
/// A ciphertext has a left part (what a query sends) and a right part
/// (what is stored and compared against); for schemes without halves both
/// are the ciphertext itself.
pub trait Comparator: Send + Sync + 'static {
    /// A full ciphertext, as an insertion sends it.
    type Ciphertext: CiphertextType;
    /// The part compared from the query's side.
    type Left: CiphertextType;
    /// The part stored.
    type Right: CiphertextType;

    /// The left part of a ciphertext.
    fn left(c: &Self::Ciphertext) -> &Self::Left;

    /// The right part of a ciphertext, as stored.
    fn right(c: &Self::Ciphertext) -> Self::Right;

    /// The order of the plaintext of `left` relative to that of `right`.
    fn compare(&self, left: &Self::Left, right: &Self::Right) -> Result<Ordering>;
}

/// Schemes whose ciphertexts have a left (query) and a right (stored)
/// half, as in Lewi and Wu's framework: a left half compares against a
/// right half; right halves alone reveal nothing (they are semantically
/// secure); left halves cannot be compared with each other.
pub trait LeftRight: OreScheme {
    /// The left half: what a query sends.
    type Left: CiphertextType;
    /// The right half: what a server stores.
    type Right: CiphertextType;

    /// The left half of the encryption of `x` alone.
    fn encrypt_left<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, x: u64) -> Result<Self::Left>;

    /// The left half of a full ciphertext.
    fn left(c: &Self::Ciphertext) -> &Self::Left;

    /// The right half of a full ciphertext.
    fn right(c: &Self::Ciphertext) -> &Self::Right;

    /// The order of the plaintext of `left` relative to that of `right`.
    fn compare_left_right(&self, left: &Self::Left, right: &Self::Right) -> Result<Ordering>;
}

/// Fails unless a `T` fits in `bits`-bit plaintexts.
pub(crate) fn check_width<T: OreInput>(bits: u32) -> Result<()> {
    if T::BITS > bits {
        return Err(Error::InvalidArgument(format!(
            "{}-bit values do not fit a scheme set up for {bits}-bit plaintexts",
            T::BITS
        )));
    }
    Ok(())
}

/// Fails unless `x < 2^bits`.
pub(crate) fn check_plaintext(x: u64, bits: u32) -> Result<()> {
    if bits < 64 && x >> bits != 0 {
        return Err(Error::InvalidArgument(format!(
            "plaintext {x} does not fit in {bits} bits"
        )));
    }
    Ok(())
}

/// Fails unless `bits` is in `1..=64`.
pub(crate) fn check_bits(bits: u32) -> Result<()> {
    if !(1..=64).contains(&bits) {
        return Err(Error::InvalidArgument(format!(
            "plaintext width {bits} is not in 1..=64 bits"
        )));
    }
    Ok(())
}

/// A plaintext type with an order-preserving encoding into `u64`.
///
/// Unsigned integers map to themselves; signed integers flip their sign
/// bit, so that `i32::MIN` maps to 0 and `i32::MAX` to `2^32 - 1`.
pub trait OreInput: Copy {
    /// Width of the encoding.
    const BITS: u32;

    /// The order-preserving encoding, in `0..2^BITS`.
    fn to_ore(self) -> u64;

    /// The value encoded as `v`; `None` if `v >= 2^BITS`.
    fn from_ore(v: u64) -> Option<Self>;
}

impl OreInput for u64 {
    const BITS: u32 = 64;
    fn to_ore(self) -> u64 {
        self
    }
    fn from_ore(v: u64) -> Option<Self> {
        Some(v)
    }
}

impl OreInput for u32 {
    const BITS: u32 = 32;
    fn to_ore(self) -> u64 {
        u64::from(self)
    }
    fn from_ore(v: u64) -> Option<Self> {
        u32::try_from(v).ok()
    }
}

impl OreInput for u16 {
    const BITS: u32 = 16;
    fn to_ore(self) -> u64 {
        u64::from(self)
    }
    fn from_ore(v: u64) -> Option<Self> {
        u16::try_from(v).ok()
    }
}

impl OreInput for i32 {
    const BITS: u32 = 32;
    fn to_ore(self) -> u64 {
        u64::from((self as u32) ^ 0x8000_0000)
    }
    fn from_ore(v: u64) -> Option<Self> {
        u32::try_from(v).ok().map(|u| (u ^ 0x8000_0000) as i32)
    }
}

impl OreInput for i64 {
    const BITS: u32 = 64;
    fn to_ore(self) -> u64 {
        (self as u64) ^ (1 << 63)
    }
    fn from_ore(v: u64) -> Option<Self> {
        Some((v ^ (1 << 63)) as i64)
    }
}

/// The object-safe form of [`OreScheme`]: ciphertexts travel as their wire
/// encoding ([`sesame_core::wire`]), so the CLI, the server and the
/// benchmark harness can hold any scheme as `Box<dyn DynOre>`.
pub trait DynOre: Send {
    /// The scheme's descriptor.
    fn descriptor(&self) -> &'static SchemeDescriptor;
    /// Plaintext width in bits.
    fn bits(&self) -> u32;
    /// Encrypts `x`, returning the encoded ciphertext.
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, x: u64) -> Result<Vec<u8>>;
    /// Compares two encoded ciphertexts.
    fn compare(&self, a: &[u8], b: &[u8]) -> Result<Ordering>;
    /// Whether decryption is supported.
    fn can_decrypt(&self) -> bool;
    /// Decrypts an encoded ciphertext.
    fn decrypt(&self, c: &[u8]) -> Result<u64>;
    /// Size in bits of an encoded ciphertext, as the scheme counts it.
    fn ciphertext_bits(&self, c: &[u8]) -> Result<u64>;
    /// Size in bits of the client state beyond the keys.
    fn state_bits(&self) -> u64;
    /// Keys, parameters and state, encoded.
    fn save(&self) -> Result<Zeroizing<Vec<u8>>>;
}

impl<S: OreScheme> DynOre for S {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        OreScheme::descriptor(self)
    }

    fn bits(&self) -> u32 {
        OreScheme::bits(self)
    }

    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, x: u64) -> Result<Vec<u8>> {
        let c = OreScheme::encrypt(self, rng, x)?;
        wire::encode(&c)
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Result<Ordering> {
        let a: S::Ciphertext = wire::decode(a)?;
        let b: S::Ciphertext = wire::decode(b)?;
        OreScheme::compare(self, &a, &b)
    }

    fn can_decrypt(&self) -> bool {
        OreScheme::can_decrypt(self)
    }

    fn decrypt(&self, c: &[u8]) -> Result<u64> {
        let c: S::Ciphertext = wire::decode(c)?;
        OreScheme::decrypt(self, &c)
    }

    fn ciphertext_bits(&self, c: &[u8]) -> Result<u64> {
        let c: S::Ciphertext = wire::decode(c)?;
        Ok(OreScheme::ciphertext_bits(self, &c))
    }

    fn state_bits(&self) -> u64 {
        OreScheme::state_bits(self)
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_encodings_preserve_order() {
        let xs = [i32::MIN, -5, -1, 0, 1, 7, i32::MAX];
        for w in xs.windows(2) {
            assert!(w[0].to_ore() < w[1].to_ore());
        }
        assert_eq!(i32::MIN.to_ore(), 0);
        assert_eq!(i32::MAX.to_ore(), u64::from(u32::MAX));
        for x in xs {
            assert_eq!(i32::from_ore(x.to_ore()), Some(x));
        }
        assert_eq!(i32::from_ore(1 << 32), None);
        let ys = [i64::MIN, -1, 0, i64::MAX];
        for w in ys.windows(2) {
            assert!(w[0].to_ore() < w[1].to_ore());
        }
        assert_eq!(i64::from_ore(i64::MIN.to_ore()), Some(i64::MIN));
    }

    #[test]
    fn widths_are_checked() {
        assert!(check_plaintext(255, 8).is_ok());
        assert!(check_plaintext(256, 8).is_err());
        assert!(check_plaintext(u64::MAX, 64).is_ok());
        assert!(check_width::<u32>(32).is_ok());
        assert!(check_width::<u64>(32).is_err());
        assert!(check_bits(0).is_err() && check_bits(65).is_err() && check_bits(64).is_ok());
    }
}
