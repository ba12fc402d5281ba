//! Generates the protocol's messages from `proto/sesame.proto` with a
//! pure-Rust protobuf compiler (`protox`), so that building needs no
//! `protoc`, and the Rust messages cannot drift from the file other
//! languages generate their clients from.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/sesame.proto");
    let descriptors = protox::compile(["proto/sesame.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
