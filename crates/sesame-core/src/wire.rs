//! The versioned wire encoding of every message that crosses a channel or
//! is stored by a server.
//!
//! A message is one version byte ([`WIRE_VERSION`]) followed by the
//! [postcard](https://docs.rs/postcard) encoding of the value. Postcard is
//! compact (variable-length integers, no field names), has a stable
//! documented format, and decodes untrusted input without panicking: a
//! truncated, oversized or otherwise malformed message gives
//! [`Error::Malformed`]. Messages longer than [`MAX_MESSAGE`] are refused
//! before decoding, and trailing bytes after a value are an error, so a
//! message has exactly one encoding.

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// Version of the wire format; the first byte of every message.
pub const WIRE_VERSION: u8 = 1;

/// Largest message accepted by [`decode`] (256 MiB).
pub const MAX_MESSAGE: usize = 256 << 20;

/// Encodes `value` as a versioned message.
///
/// The message's size is computed first (a pass that copies nothing), so
/// that it is written into one buffer of that size instead of one that
/// grows, and is copied, as it fills.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let size = postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())
        .map_err(|e| Error::Encode(e.to_string()))?;
    let mut out = Vec::with_capacity(1 + size);
    out.push(WIRE_VERSION);
    postcard::to_extend(value, out).map_err(|e| Error::Encode(e.to_string()))
}

/// Appends the encoding of `value`, without version byte, to `out`.
///
/// For records nested inside another message or stored by a server under a
/// versioned key space.
pub fn encode_raw_into<T: Serialize + ?Sized>(value: &T, out: Vec<u8>) -> Result<Vec<u8>> {
    postcard::to_extend(value, out).map_err(|e| Error::Encode(e.to_string()))
}

/// Decodes a versioned message produced by [`encode`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    if bytes.len() > MAX_MESSAGE {
        return Err(Error::Malformed(format!(
            "message of {} bytes exceeds the limit of {MAX_MESSAGE}",
            bytes.len()
        )));
    }
    match bytes.split_first() {
        None => Err(Error::Malformed("empty message".into())),
        Some((&WIRE_VERSION, body)) => decode_raw(body),
        Some((&v, _)) => Err(Error::Malformed(format!(
            "wire version {v}, expected {WIRE_VERSION}"
        ))),
    }
}

/// Decodes a value encoded by [`encode_raw_into`]; the whole input must be
/// consumed.
pub fn decode_raw<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| Error::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(Error::Malformed(format!(
            "{} trailing bytes after the message",
            rest.len()
        )));
    }
    Ok(value)
}

/// Unsigned LEB128 integers for the hand-laid forms beside postcard (a
/// table record's compact values, a catalog block's columns): seven bits a
/// byte, low bits first, and only the shortest form of a number reads
/// back, so that a form built of them has one encoding.
pub mod varint {
    /// Appends `n`.
    pub fn put(out: &mut Vec<u8>, mut n: u64) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// Takes a number from the front of `rest`; what is wrong where it is
    /// refused: cut short, over 64 bits, or longer than its shortest form.
    pub fn take(rest: &mut &[u8]) -> Result<u64, &'static str> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, after) = rest.split_first().ok_or("a number cut short")?;
            *rest = after;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err("a number over 64 bits");
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                if b == 0 && shift > 0 {
                    return Err("a number not in its shortest form");
                }
                return Ok(n);
            }
        }
        Err("a number over 64 bits")
    }
}

/// A `Vec<u8>` field through serde's byte-string methods
/// (`#[serde(with = "sesame_core::wire::bytes")]`): postcard writes the
/// same bytes as for a plain `Vec<u8>` (its length, then the bytes), so
/// messages and stored values keep their encoding, but copies them in one
/// piece instead of one element at a time (`tests::bytes_encode_as_a_vec`).
pub mod bytes {
    use serde::{de, Deserializer, Serializer};

    /// Writes `v` as a byte string.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    /// Reads a byte string (or a sequence of bytes, from formats that
    /// write one).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(Bytes)
    }

    struct Bytes;

    impl<'de> de::Visitor<'de> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> std::result::Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> std::result::Result<Vec<u8>, E> {
            Ok(v)
        }

        fn visit_seq<A: de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;

    /// A field through [`bytes`] encodes as a plain `Vec<u8>` does, and
    /// each reads the other's encoding.
    #[test]
    fn bytes_encode_as_a_vec() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Plain(Vec<u8>, u8);
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Fast(#[serde(with = "bytes")] Vec<u8>, u8);
        for n in [0usize, 1, 127, 128, 300, 70_000] {
            let v: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let plain = encode(&Plain(v.clone(), 9)).unwrap_or_default();
            let fast = encode(&Fast(v.clone(), 9)).unwrap_or_default();
            assert!(!plain.is_empty());
            assert_eq!(plain, fast, "{n} bytes");
            assert_eq!(decode::<Fast>(&plain).ok(), Some(Fast(v.clone(), 9)));
            assert_eq!(decode::<Plain>(&fast).ok(), Some(Plain(v, 9)));
        }
        // Cut short: an error, never a panic.
        let fast = encode(&Fast(vec![1; 300], 9)).unwrap_or_default();
        for cut in 0..fast.len() {
            assert!(decode::<Fast>(fast.get(..cut).unwrap_or_default()).is_err());
        }
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    enum Msg {
        A { label: Vec<u8>, n: u64 },
        B(Vec<Vec<u8>>),
        C,
    }

    fn arb_msg() -> impl Strategy<Value = Msg> {
        prop_oneof![
            (any::<Vec<u8>>(), any::<u64>()).prop_map(|(label, n)| Msg::A { label, n }),
            any::<Vec<Vec<u8>>>().prop_map(Msg::B),
            Just(Msg::C),
        ]
    }

    proptest! {
        #[test]
        fn round_trips(m in arb_msg()) {
            let bytes = encode(&m).unwrap();
            prop_assert_eq!(bytes[0], WIRE_VERSION);
            prop_assert_eq!(decode::<Msg>(&bytes).unwrap(), m);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in any::<Vec<u8>>()) {
            let _ = decode::<Msg>(&bytes);
        }

        #[test]
        fn truncation_is_an_error(m in arb_msg(), cut in 1usize..64) {
            let bytes = encode(&m).unwrap();
            let keep = bytes.len().saturating_sub(cut);
            prop_assert!(decode::<Msg>(&bytes[..keep]).is_err());
        }
    }

    #[test]
    fn rejects_other_versions_and_trailing_bytes() {
        let mut bytes = encode(&Msg::C).unwrap();
        bytes.push(0);
        assert!(matches!(decode::<Msg>(&bytes), Err(Error::Malformed(_))));
        bytes.pop();
        bytes[0] = 2;
        assert!(matches!(decode::<Msg>(&bytes), Err(Error::Malformed(_))));
        assert!(matches!(decode::<Msg>(&[]), Err(Error::Malformed(_))));
    }

    #[test]
    fn huge_length_prefix_is_an_error_not_an_allocation() {
        // Variant B with a claimed length of 2^63 elements.
        let bytes = [
            WIRE_VERSION,
            1,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0x7f,
        ];
        assert!(decode::<Msg>(&bytes).is_err());
    }
}
