//! Requests carry search tokens, keys and labels: their `Debug` output
//! names the type and the size, never a byte of the contents.

use sesame_sse::{fast, kpr12, pibas};

/// The ways a byte 0xAB could show in a derived `Debug`: decimal in an
/// array, hex in a formatted buffer.
fn shows_secret(text: &str) -> bool {
    text.contains("171") || text.to_ascii_lowercase().contains("ab")
}

#[test]
fn request_debug_shows_no_token_bytes() {
    let fast = fast::Request::Search {
        tw: [0xAB; fast::LAMBDA],
        st: [0xAB; fast::LAMBDA],
    };
    let pibas = pibas::Request::Search {
        k1: [0xAB; 16],
        k2: [0xAB; 16],
    };
    let token = kpr12::SearchToken {
        label: [0xAB; 32],
        pad: [0xAB; 16],
        key: [0xAB; 32],
    };
    for text in [
        format!("{fast:?}"),
        format!("{pibas:?}"),
        format!("{token:?}"),
        format!("{fast:#?}"),
    ] {
        assert!(!shows_secret(&text), "{text}");
        assert!(text.contains("contents redacted"), "{text}");
        assert!(text.contains("bytes"), "{text}");
    }
    assert!(format!("{fast:?}").starts_with("sesame_sse::fast::Request"));
}
