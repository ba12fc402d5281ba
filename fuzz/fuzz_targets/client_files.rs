//! Files of a client profile: header, server binding, decrypted state.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sesame_client::hostile::local_files(data);
});
