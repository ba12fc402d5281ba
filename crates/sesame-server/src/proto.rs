//! The gRPC protocol `sesame.v1.Sesame`: messages and method paths.
//!
//! The messages are written by hand with `prost`'s derive (no `protoc` at
//! build time); `proto/sesame.proto` in this crate is the same protocol as
//! a `.proto` file, for other languages. A test checks that every message
//! and method named there exists here.
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

    /// Every method path, for metrics and the protocol test.
    pub const ALL: [&str; 12] = [
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
    ];
}

/// `Health` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthRequest {}

/// `Health` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthResponse {
    /// `serving`, or `shutting-down`.
    #[prost(string, tag = "1")]
    pub status: String,
    /// The server's version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// The store backend (`redb`, `postgres`, `memory`).
    #[prost(string, tag = "3")]
    pub store: String,
    /// The largest gRPC message the server accepts, in bytes (0 from
    /// servers that do not say).
    #[prost(uint64, tag = "4")]
    pub max_message_bytes: u64,
    /// Scheme messages one `Call` may carry (0 from servers that do not
    /// say).
    #[prost(uint64, tag = "5")]
    pub max_messages_per_call: u64,
}

/// `CreateIndex` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateIndexRequest {
    /// Name: 1 to 64 characters of `a-z 0-9 - _`.
    #[prost(string, tag = "1")]
    pub index: String,
    /// Registered scheme name (`pibas`, `2lev`, `fast`, ...).
    #[prost(string, tag = "2")]
    pub scheme: String,
    /// Scheme parameters, `a=1,b=2` (may be empty).
    #[prost(string, tag = "3")]
    pub params: String,
}

/// What the server knows about an index.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IndexInfo {
    /// Name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// Scheme it is bound to.
    #[prost(string, tag = "2")]
    pub scheme: String,
    /// Scheme parameters, `a=1,b=2`.
    #[prost(string, tag = "3")]
    pub params: String,
    /// Creation time, seconds since the Unix epoch.
    #[prost(uint64, tag = "4")]
    pub created_unix: u64,
    /// Documents stored.
    #[prost(uint64, tag = "5")]
    pub documents: u64,
    /// Committed calls that wrote to the index.
    #[prost(uint64, tag = "6")]
    pub updates: u64,
    /// Committed bulk uploads.
    #[prost(uint64, tag = "7")]
    pub uploads: u64,
    /// Generation of the last committed bulk upload.
    #[prost(uint64, tag = "8")]
    pub generation: u64,
}

/// `DropIndex` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropIndexRequest {
    /// Name.
    #[prost(string, tag = "1")]
    pub index: String,
}

/// `DropIndex` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropIndexResponse {
    /// Store entries removed (index entries, documents, records).
    #[prost(uint64, tag = "1")]
    pub removed: u64,
}

/// `ListIndexes` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListIndexesRequest {}

/// `ListIndexes` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListIndexesResponse {
    /// The tenant's indexes, by name.
    #[prost(message, repeated, tag = "1")]
    pub indexes: Vec<IndexInfo>,
}

/// `Call` request: scheme messages for one generation of one index,
/// applied in order and committed together (all or nothing), under the
/// index's lock, so that no search sees part of them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CallRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// The scheme the client speaks; must be the index's.
    #[prost(string, tag = "2")]
    pub scheme: String,
    /// Generation of the index (a static scheme's rebuild makes a new one).
    #[prost(uint64, tag = "3")]
    pub generation: u64,
    /// Empty, or 16 bytes naming the request: a request that wrote is
    /// remembered, and a repeat is refused with `ALREADY_EXISTS` whose
    /// details carry the first answer (an encoded [`CallResponse`]).
    #[prost(bytes = "vec", tag = "4")]
    pub request_id: Vec<u8>,
    /// The scheme messages (versioned wire encoding).
    #[prost(bytes = "vec", repeated, tag = "5")]
    pub messages: Vec<Vec<u8>>,
}

/// `Call` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CallResponse {
    /// One scheme response per request message, in order.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub messages: Vec<Vec<u8>>,
    /// The server's handling report: wire-encoded
    /// `sesame_core::ServerReport` (time, store I/O, primitive calls).
    #[prost(bytes = "vec", tag = "2")]
    pub report: Vec<u8>,
}

/// First message of an `Upload` stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UploadStart {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// The scheme the client speaks; must be the index's.
    #[prost(string, tag = "2")]
    pub scheme: String,
    /// Generation being built.
    #[prost(uint64, tag = "3")]
    pub generation: u64,
    /// Empty, or 16 bytes naming the upload (a committed upload is
    /// remembered like a call).
    #[prost(bytes = "vec", tag = "4")]
    pub request_id: Vec<u8>,
}

/// One message of an `Upload` stream: the start, then scheme messages,
/// then `commit`. Nothing is visible until the commit; a stream that ends
/// without one is discarded.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UploadRequest {
    /// Only in the first message.
    #[prost(message, optional, tag = "1")]
    pub start: Option<UploadStart>,
    /// A scheme message, answered by one [`UploadResponse`].
    #[prost(bytes = "vec", tag = "2")]
    pub message: Vec<u8>,
    /// Commit everything sent so far, in one transaction.
    #[prost(bool, tag = "3")]
    pub commit: bool,
}

/// One answer on an `Upload` stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UploadResponse {
    /// The scheme's response to one message.
    #[prost(bytes = "vec", tag = "1")]
    pub message: Vec<u8>,
    /// Set on the answer to `commit`: the upload is durable.
    #[prost(bool, tag = "2")]
    pub committed: bool,
    /// Handling report for the message (see [`CallResponse::report`]).
    #[prost(bytes = "vec", tag = "3")]
    pub report: Vec<u8>,
}

/// An encrypted document.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Document {
    /// Identifier.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Ciphertext (the server never sees a key).
    #[prost(bytes = "vec", tag = "2")]
    pub blob: Vec<u8>,
}

/// `PutDocuments` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutDocumentsRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// Empty, or 16 bytes naming the request (see [`CallRequest::request_id`]).
    #[prost(bytes = "vec", tag = "2")]
    pub request_id: Vec<u8>,
    /// The documents; an existing identifier is replaced.
    #[prost(message, repeated, tag = "3")]
    pub documents: Vec<Document>,
}

/// `PutDocuments` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutDocumentsResponse {
    /// Documents that were not there before.
    #[prost(uint64, tag = "1")]
    pub added: u64,
}

/// `GetDocuments` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetDocumentsRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// Identifiers.
    #[prost(uint64, repeated, tag = "2")]
    pub ids: Vec<u64>,
}

/// A document that may be missing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MaybeDocument {
    /// Whether it is stored.
    #[prost(bool, tag = "1")]
    pub found: bool,
    /// Its ciphertext, if found.
    #[prost(bytes = "vec", tag = "2")]
    pub blob: Vec<u8>,
}

/// `GetDocuments` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetDocumentsResponse {
    /// One per identifier asked for, in order.
    #[prost(message, repeated, tag = "1")]
    pub documents: Vec<MaybeDocument>,
}

/// `DeleteDocuments` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteDocumentsRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// Empty, or 16 bytes naming the request.
    #[prost(bytes = "vec", tag = "2")]
    pub request_id: Vec<u8>,
    /// Identifiers.
    #[prost(uint64, repeated, tag = "3")]
    pub ids: Vec<u64>,
}

/// `DeleteDocuments` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteDocumentsResponse {
    /// Whether each document was there, in order.
    #[prost(bool, repeated, tag = "1")]
    pub deleted: Vec<bool>,
}

/// `ListDocuments` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListDocumentsRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
}

/// `ListDocuments` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListDocumentsResponse {
    /// Identifiers, ascending.
    #[prost(uint64, repeated, tag = "1")]
    pub ids: Vec<u64>,
}

/// `DropGenerations` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropGenerationsRequest {
    /// Index name.
    #[prost(string, tag = "1")]
    pub index: String,
    /// The generation to keep.
    #[prost(uint64, tag = "2")]
    pub keep: u64,
}

/// `DropGenerations` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DropGenerationsResponse {
    /// Index entries removed.
    #[prost(uint64, tag = "1")]
    pub removed: u64,
}

/// `Stats` request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatsRequest {}

/// `Stats` response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatsResponse {
    /// The tenant's indexes.
    #[prost(message, repeated, tag = "1")]
    pub indexes: Vec<IndexInfo>,
    /// Seconds since the server started.
    #[prost(uint64, tag = "2")]
    pub uptime_seconds: u64,
    /// Requests the server has answered since it started (all tenants).
    #[prost(uint64, tag = "3")]
    pub requests: u64,
    /// The store backend.
    #[prost(string, tag = "4")]
    pub store: String,
}
