//! Every request and response type of the static schemes round-trips
//! through the wire encoding, and truncated encodings are refused.

// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use sesame_core::wire;
use sesame_sse::{pibas, two_lev};

fn label() -> impl Strategy<Value = [u8; 16]> {
    any::<[u8; 16]>()
}

fn entries() -> impl Strategy<Value = Vec<([u8; 16], Vec<u8>)>> {
    prop::collection::vec((label(), prop::collection::vec(any::<u8>(), 0..40)), 0..8)
}

fn pibas_request() -> impl Strategy<Value = pibas::Request> {
    prop_oneof![
        (any::<bool>(), entries())
            .prop_map(|(reset, entries)| pibas::Request::Put { reset, entries }),
        (label(), label()).prop_map(|(k1, k2)| pibas::Request::Search { k1, k2 }),
    ]
}

fn pibas_response() -> impl Strategy<Value = pibas::Response> {
    prop_oneof![
        Just(pibas::Response::Stored),
        prop::collection::vec(any::<u64>(), 0..50).prop_map(pibas::Response::Ids),
    ]
}

fn two_lev_request() -> impl Strategy<Value = two_lev::Request> {
    prop_oneof![
        (
            any::<bool>(),
            entries(),
            prop::collection::vec(
                (any::<u64>(), prop::collection::vec(any::<u8>(), 0..40)),
                0..8
            )
        )
            .prop_map(|(reset, dict, array)| two_lev::Request::Put { reset, dict, array }),
        (label(), label()).prop_map(|(k1, k2)| two_lev::Request::Search { k1, k2 }),
    ]
}

fn two_lev_response() -> impl Strategy<Value = two_lev::Response> {
    prop_oneof![
        Just(two_lev::Response::Stored),
        prop::collection::vec(any::<u64>(), 0..50).prop_map(two_lev::Response::Ids),
    ]
}

fn round_trips<T>(value: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = wire::encode(value).unwrap();
    prop_assert_eq!(&wire::decode::<T>(&bytes).unwrap(), value);
    for cut in 0..bytes.len() {
        prop_assert!(wire::decode::<T>(&bytes[..cut]).is_err());
    }
    Ok(())
}

proptest! {
    #[test]
    fn pibas_messages_round_trip(q in pibas_request(), r in pibas_response()) {
        round_trips(&q)?;
        round_trips(&r)?;
    }

    #[test]
    fn two_lev_messages_round_trip(q in two_lev_request(), r in two_lev_response()) {
        round_trips(&q)?;
        round_trips(&r)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_servers_decoder(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = wire::decode::<pibas::Request>(&bytes);
        let _ = wire::decode::<two_lev::Request>(&bytes);
    }
}
