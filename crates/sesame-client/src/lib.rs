#![doc = include_str!("../README.md")]

mod backend;
mod backup;
mod cdc;
mod collect;
pub mod doc_service;
mod documents;
mod error;
mod fsutil;
pub mod hostile;
pub mod insecure;
mod intents;
pub mod intercept;
mod kdf;
mod lock;
mod network;
mod profile;
mod progress;
mod scheme;
mod session;
mod state;
mod stored;
pub mod table;
pub mod tokenize;

pub use backend::{
    chunk_memo_bytes, set_chunk_memo_bytes, Backend, EmbeddedBackend, IndexRecord,
    IndexRecordWrite, SetupChannel, UpdateJob,
};
pub use backup::{restore, restore_with_key_file, BackupReport, MANIFEST};
pub use collect::MAX_DOCUMENT;
pub use doc_service::DocId;
pub use error::{ClientError, Result};
pub use kdf::{KdfLimit, KdfParams};
pub use network::{NetworkBackend, ServerBinding, SERVER_FILE};
pub use profile::{
    check_scheme, MasterRotation, Profile, DEFAULT_INDEX, HEADER_FILE, INDEX_DIR, MIN_KEY_FILE,
    STORE_FILE,
};
pub use session::shared::{shared_view, DeviceWrite, SharedView};
pub use session::{AddReport, CheckReport, Phase, Progress, QueryHits, RemoveReport, Session};
pub use state::{set_catalog_cache_bytes, DocumentInfo};
pub use table::{Answer, InsertReport, Record, Schema, Table};
pub use tokenize::{parse_query, query_keyword, tokenize, tokenize_bytes};
