//! Responses the server sends to a client: protobuf, reports, scheme responses.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_server::hostile::client_response(data);
});
