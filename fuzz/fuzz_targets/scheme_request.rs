//! Scheme messages a client sends, handled by each scheme's server half.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_server::hostile::scheme_request(data);
});
