//! The gRPC protocol `sesame.v1.Sesame`: messages and method paths.
//!
//! The messages are generated from `proto/sesame.proto` in this crate, the
//! file other languages generate their clients from, by a pure-Rust
//! protobuf compiler (`scripts/gen-proto.sh`; no `protoc` to install), into
//! `sesame.v1.rs`. Tests check that the generated file is the `.proto`
//! file's as it is and that every method named there has its path here.
//!
//! Scheme messages travel as opaque bytes: each is a versioned wire message
//! of the index's scheme (`sesame_core::wire`, first byte the wire version),
//! which only the scheme's server half decodes.

/// The fully qualified service name.
pub const SERVICE: &str = "sesame.v1.Sesame";

/// Method paths, `/sesame.v1.Sesame/Method`.
pub mod path {
    /// Liveness and version; needs no token.
    pub const HEALTH: &str = "/sesame.v1.Sesame/Health";
    /// Creates a named index bound to a scheme.
    pub const CREATE_INDEX: &str = "/sesame.v1.Sesame/CreateIndex";
    /// Removes an index, its entries, documents and replay records.
    pub const DROP_INDEX: &str = "/sesame.v1.Sesame/DropIndex";
    /// The tenant's indexes.
    pub const LIST_INDEXES: &str = "/sesame.v1.Sesame/ListIndexes";
    /// One or more scheme messages, applied atomically.
    pub const CALL: &str = "/sesame.v1.Sesame/Call";
    /// A streamed bulk upload (a static scheme's setup), committed at the end.
    pub const UPLOAD: &str = "/sesame.v1.Sesame/Upload";
    /// Stores encrypted documents.
    pub const PUT_DOCUMENTS: &str = "/sesame.v1.Sesame/PutDocuments";
    /// Fetches encrypted documents.
    pub const GET_DOCUMENTS: &str = "/sesame.v1.Sesame/GetDocuments";
    /// Deletes documents.
    pub const DELETE_DOCUMENTS: &str = "/sesame.v1.Sesame/DeleteDocuments";
    /// Lists document identifiers.
    pub const LIST_DOCUMENTS: &str = "/sesame.v1.Sesame/ListDocuments";
    /// Removes every generation of an index but one.
    pub const DROP_GENERATIONS: &str = "/sesame.v1.Sesame/DropGenerations";
    /// Counters of the tenant's indexes and of the server.
    pub const STATS: &str = "/sesame.v1.Sesame/Stats";
    /// Reads records kept beside an index.
    pub const READ_RECORDS: &str = "/sesame.v1.Sesame/ReadRecords";
    /// Writes records kept beside an index, compare-and-swap.
    pub const WRITE_RECORDS: &str = "/sesame.v1.Sesame/WriteRecords";
    /// Merges a packed generation's deltas into their chunks.
    pub const COMPACT_INDEX: &str = "/sesame.v1.Sesame/CompactIndex";

    /// Every method path, for metrics and the protocol test.
    pub const ALL: [&str; 15] = [
        HEALTH,
        CREATE_INDEX,
        DROP_INDEX,
        LIST_INDEXES,
        CALL,
        UPLOAD,
        PUT_DOCUMENTS,
        GET_DOCUMENTS,
        DELETE_DOCUMENTS,
        LIST_DOCUMENTS,
        DROP_GENERATIONS,
        STATS,
        READ_RECORDS,
        WRITE_RECORDS,
        COMPACT_INDEX,
    ];
}

/// The messages, generated from `proto/sesame.proto` by
/// `scripts/gen-proto.sh` (`protogen/`: `protox`, then `prost-build`) into
/// `sesame.v1.rs`; each carries the comment the `.proto` file gives it.
/// The file names the `.proto` file's SHA-256, which
/// `tests::the_messages_are_generated_from_the_proto_file` checks.
mod generated {
    #![allow(missing_docs, unreachable_pub, clippy::all)]
    include!("sesame.v1.rs");
}

pub use generated::*;

/// The server's default limit on a gRPC message, in bytes (64 MiB); a
/// client assumes it of a server that does not say its own.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in messages were generated from the `.proto` file as it
    /// is: a changed `.proto` file fails here until `scripts/gen-proto.sh`
    /// runs again.
    #[test]
    fn the_messages_are_generated_from_the_proto_file() {
        use sha2::Digest;
        let proto = include_bytes!("../proto/sesame.proto");
        let digest = hex::encode(sha2::Sha256::digest(proto));
        let generated = include_str!("sesame.v1.rs");
        let head: String = generated.lines().take(3).collect();
        assert!(
            head.contains(&format!("proto-sha256: {digest}")),
            "proto/sesame.proto changed since src/sesame.v1.rs was generated: \
             run scripts/gen-proto.sh"
        );
        let mut edited = proto.to_vec();
        edited.extend_from_slice(b"\n");
        let other = hex::encode(sha2::Sha256::digest(&edited));
        assert!(!head.contains(&other));
    }

    /// Every `rpc` of the `.proto` file has its method path here.
    #[test]
    fn every_method_of_the_proto_file_has_a_path() {
        let text = include_str!("../proto/sesame.proto");
        let methods: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("rpc "))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert_eq!(methods.len(), path::ALL.len());
        for m in methods {
            let want = format!("/{SERVICE}/{m}");
            assert!(path::ALL.contains(&want.as_str()), "{want}");
        }
    }

    /// The generated messages encode as the protocol says (field numbers
    /// and types): a `CallRequest` known byte for byte.
    #[test]
    fn a_call_request_encodes_as_the_protocol_says() {
        use prost::Message;
        let r = CallRequest {
            index: "ix".into(),
            scheme: "fast".into(),
            generation: 3,
            request_id: vec![7; 2],
            messages: vec![vec![1, 2], vec![]],
        };
        let bytes = r.encode_to_vec();
        assert_eq!(
            bytes,
            [
                0x0a, 2, b'i', b'x', 0x12, 4, b'f', b'a', b's', b't', 0x18, 3, 0x22, 2, 7, 7, 0x2a,
                2, 1, 2, 0x2a, 0
            ]
        );
        assert_eq!(CallRequest::decode(bytes.as_slice()).ok(), Some(r));
    }
}
