//! Requests a client sends to the server (protobuf), run through the engine.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_server::hostile::server_request(data);
});
