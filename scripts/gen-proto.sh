#!/usr/bin/env bash
# Regenerates crates/sesame-net/src/sesame.v1.rs, the protocol's messages,
# from crates/sesame-net/proto/sesame.proto (crates/sesame-net/protogen: a
# workspace of its own, so that no build of the project compiles the
# protobuf compiler). Run it after changing the .proto file; the test
# `proto::tests::the_messages_are_generated_from_the_proto_file` fails
# until then.
set -euo pipefail
cd "$(dirname "$0")/../crates/sesame-net/protogen"
cargo run --quiet --release --target-dir ../../../target/protogen
