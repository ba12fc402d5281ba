//! Records the server reads back from its store, and the tokens file.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_server::hostile::stored_record(data);
});
