//! A record's stored content: the compact form, and the forms of builds
//! before, which still read.
//!
//! The compact form ([`encode`]): a form byte ([`COMPACT`]), the number of
//! values (LEB128), two bits a value for its kind (absent, integer, text;
//! four values a byte, the first in the low bits), then each present
//! value: an integer as a zigzag LEB128 varint, a text as its length
//! (LEB128) and its UTF-8 bytes. The kinds take 3 bytes for the flights'
//! 11 fields where the postcard form spent two tags a field (an option's
//! and a variant's) and a byte for the empty key: 20 bytes fewer a
//! flights record (`docs/tables.md`, "Where a table's bytes go").
//!
//! The forms before: the postcard encoding (after the wire version byte,
//! `1`) of a [`Record`] with its key (the first builds) or with an empty
//! key (the key being the record's document path). The form byte is not
//! the wire version, so [`decode`] tells them apart by the first byte.
//!
//! The content is sealed (AEAD) before it is stored; a content that does
//! not decode (a damaged record the seal let through, which does not
//! happen without the key) is an error, never a panic
//! (`tests::no_input_panics_and_every_cut_is_refused`).

use sesame_core::{wire, Error};

use super::{Record, Value};

/// The compact form's first byte.
pub(super) const COMPACT: u8 = 0xc1;

/// The kind of an absent value, an integer and a text, two bits each.
const ABSENT: u8 = 0;
const INT: u8 = 1;
const TEXT: u8 = 2;

/// The compact content of `values` (module docs).
pub(super) fn encode(values: &[Option<Value>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + values.len().div_ceil(4) + 8 * values.len());
    out.push(COMPACT);
    put_varint(&mut out, values.len() as u64);
    let kinds = out.len();
    out.resize(kinds + values.len().div_ceil(4), 0);
    for (i, v) in values.iter().enumerate() {
        let kind = match v {
            None => ABSENT,
            Some(Value::Int(_)) => INT,
            Some(Value::Text(_)) => TEXT,
        };
        out[kinds + i / 4] |= kind << (2 * (i % 4));
    }
    for v in values.iter().flatten() {
        match v {
            Value::Int(n) => put_varint(&mut out, ((n << 1) ^ (n >> 63)) as u64),
            Value::Text(s) => {
                put_varint(&mut out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

/// The record stored at `path` as `content`, in any form: a record
/// stored without its key takes `path` as its key; one stored with it
/// (the first builds) keeps its own.
pub(super) fn decode(path: &str, content: &[u8]) -> sesame_core::Result<Record> {
    let mut record: Record = match content.first() {
        Some(&COMPACT) => Record {
            key: String::new(),
            values: decode_compact(&content[1..])?,
        },
        _ => wire::decode(content)?,
    };
    if record.key.is_empty() {
        path.clone_into(&mut record.key);
    }
    Ok(record)
}

fn malformed(what: &str) -> Error {
    Error::Malformed(format!("a stored record: {what}"))
}

fn decode_compact(mut rest: &[u8]) -> sesame_core::Result<Vec<Option<Value>>> {
    let count = take_varint(&mut rest)?;
    // Every value takes two bits of kinds at least: a count beyond the
    // bytes left is refused before anything is allocated for it.
    if count > 4 * rest.len() as u64 {
        return Err(malformed("more values than bytes"));
    }
    let count = count as usize;
    let (kinds, mut rest) = rest.split_at(count.div_ceil(4));
    let mut values = Vec::with_capacity(count);
    for i in 0..count {
        let kind = (kinds[i / 4] >> (2 * (i % 4))) & 3;
        values.push(match kind {
            ABSENT => None,
            INT => {
                let z = take_varint(&mut rest)?;
                Some(Value::Int(((z >> 1) as i64) ^ -((z & 1) as i64)))
            }
            TEXT => {
                let len = take_varint(&mut rest)?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= rest.len())
                    .ok_or_else(|| malformed("a text longer than the record"))?;
                let (text, after) = rest.split_at(len);
                rest = after;
                let text = std::str::from_utf8(text).map_err(|_| malformed("a text not UTF-8"))?;
                Some(Value::Text(text.to_owned()))
            }
            _ => return Err(malformed("an unknown kind")),
        });
    }
    // The unused bits of the last kinds byte, and the bytes after the
    // values, are refused: one record has one encoding.
    let used = 2 * count;
    if !used.is_multiple_of(8) && kinds.last().is_some_and(|k| k >> (used % 8) != 0) {
        return Err(malformed("stray kind bits"));
    }
    if !rest.is_empty() {
        return Err(malformed("bytes after the values"));
    }
    Ok(values)
}

fn put_varint(out: &mut Vec<u8>, n: u64) {
    sesame_core::wire::varint::put(out, n);
}

fn take_varint(rest: &mut &[u8]) -> sesame_core::Result<u64> {
    sesame_core::wire::varint::take(rest).map_err(malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            any::<i64>().prop_map(|n| Some(Value::Int(n))),
            ".{0,40}".prop_map(|s| Some(Value::Text(s))),
        ]
    }

    proptest! {
        /// Every list of values comes back from its compact form, under
        /// the path as key, and takes fewer bytes than the postcard form.
        #[test]
        fn values_round_trip_in_fewer_bytes(values in prop::collection::vec(value(), 0..40)) {
            let compact = encode(&values);
            let back = decode("k", &compact).unwrap();
            prop_assert_eq!(&back.values, &values);
            prop_assert_eq!(back.key.as_str(), "k");
            let before = wire::encode(&Record { key: String::new(), values }).unwrap();
            prop_assert!(compact.len() <= before.len());
        }

        /// No input panics; each cut of a valid content, and each byte
        /// added after it, is refused.
        #[test]
        fn no_input_panics_and_every_cut_is_refused(
            values in prop::collection::vec(value(), 1..12),
            noise in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut junk = vec![COMPACT];
            junk.extend_from_slice(&noise);
            let _ = decode("k", &junk);
            let compact = encode(&values);
            for n in 0..compact.len() {
                prop_assert!(decode("k", &compact[..n]).is_err(), "cut at {}", n);
            }
            let mut longer = compact.clone();
            longer.push(0);
            prop_assert!(decode("k", &longer).is_err());
        }
    }

    /// The forms of earlier builds still read: with the key, and with an
    /// empty key that the path replaces.
    #[test]
    fn the_postcard_forms_still_read() {
        let values = vec![Some(Value::Int(-3)), None, Some(Value::Text("UA".into()))];
        let keyed = Record {
            key: "own".into(),
            values: values.clone(),
        };
        assert_eq!(
            decode("path", &wire::encode(&keyed).unwrap()).unwrap(),
            keyed
        );
        let keyless = Record {
            key: String::new(),
            values: values.clone(),
        };
        let back = decode("path", &wire::encode(&keyless).unwrap()).unwrap();
        assert_eq!((back.key.as_str(), back.values), ("path", values));
    }

    /// A flights record (11 fields): 20 bytes fewer than the postcard
    /// form; a huge count, a kind of 3, stray kind bits and a number in a
    /// longer form than it needs are refused.
    #[test]
    fn a_flights_record_is_shorter_and_odd_encodings_are_refused() {
        let int = |n| Some(Value::Int(n));
        let text = |s: &str| Some(Value::Text(s.into()));
        let values = vec![
            text("UA"),
            int(1545),
            text("N14228"),
            text("EWR"),
            text("IAH"),
            int(517),
            int(2),
            int(11),
            int(227),
            int(1400),
            int(1_357_038_000),
        ];
        let compact = encode(&values);
        let before = wire::encode(&Record {
            key: String::new(),
            values,
        })
        .unwrap();
        assert_eq!(before.len() - compact.len(), 20);
        assert!(decode("k", &[COMPACT, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(decode("k", &[COMPACT, 1, 3]).is_err());
        assert!(decode("k", &[COMPACT, 1, 0b100]).is_err());
        assert!(decode("k", &[COMPACT, 1, INT, 0x80, 0x00]).is_err());
        assert_eq!(
            decode("k", &[COMPACT, 1, INT, 0x04]).unwrap().values,
            vec![int(2)]
        );
    }
}
