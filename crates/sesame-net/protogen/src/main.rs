//! Writes `src/sesame.v1.rs` (the protocol's messages) from
//! `proto/sesame.proto` with a pure-Rust protobuf compiler (`protox`, then
//! `prost-build`): no `protoc` to install. The file's head names the
//! `.proto` file's SHA-256, which a test of sesame-net checks, so that the
//! messages cannot drift from the file other languages generate their
//! clients from.
//!
//! Run from anywhere: `scripts/gen-proto.sh`.

use std::path::Path;

use sha2::{Digest, Sha256};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let net = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let proto_dir = net.join("proto");
    let proto = proto_dir.join("sesame.proto");
    let out = tempfile_dir()?;
    let descriptors = protox::compile([&proto], [&proto_dir])?;
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(descriptors)?;
    let messages = std::fs::read_to_string(out.join("sesame.v1.rs"))?;
    std::fs::remove_dir_all(&out)?;
    let digest = hex::encode(Sha256::digest(std::fs::read(&proto)?));
    let head = format!(
        "// @generated from proto/sesame.proto by scripts/gen-proto.sh (protox,\n\
         // prost-build): do not edit; run the script again after changing the\n\
         // .proto file. proto-sha256: {digest}\n"
    );
    let target = net.join("src").join("sesame.v1.rs");
    std::fs::write(&target, head + &messages)?;
    println!("wrote {}", target.display());
    Ok(())
}

/// A fresh folder for prost-build's output.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("sesame-protogen-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
