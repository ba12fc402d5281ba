//! Document-service messages between the SDK and the store or server.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_client::hostile::document_messages(data);
});
