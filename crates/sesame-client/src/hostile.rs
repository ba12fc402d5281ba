//! Entry points that feed untrusted bytes to the decoders of the client
//! SDK, for the fuzz targets in `fuzz/` and the test that replays their
//! corpus. Each must return normally whatever the input.
//!
//! | function | peer | decoders |
//! |---|---|---|
//! | [`document_messages`] | the server (or, embedded, the store) | document-service requests and responses, the document server over a fresh store |
//! | [`local_files`] | whoever can write the profile directory | the profile header, the server binding, a decrypted index state (formats 1 to 3), a shared record's state (`SSMSHR03`), a catalog run's block of either form, a decrypted pending intent, a shared-state note (`indexes/NAME.shared`) |

use std::sync::Arc;

use sesame_core::{wire, Handler, Store};
use sesame_store::MemoryStore;

use crate::doc_service::{DocRequest, DocResponse, DocServer};

/// Document-service messages: decoded as requests and responses; a
/// request is also handled by a document server over a fresh store.
pub fn document_messages(data: &[u8]) {
    let _ = wire::decode::<DocResponse>(data);
    if let Ok(request) = wire::decode::<DocRequest>(data) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut server = DocServer::new(store, Vec::new());
        let _ = server.handle(request);
    }
}

/// The files of a profile directory, as the SDK parses them.
pub fn local_files(data: &[u8]) {
    crate::profile::parse_header(data);
    crate::network::parse_binding(data);
    crate::state::parse_plain(data);
    crate::intents::parse_plain(data);
    let _ = crate::session::shared::parse_sidecar(data);
}

/// A decrypted index state with a catalog, a pending intent's reference,
/// a reserved identifier and a document to delete, wire-encoded: a seed
/// for [`local_files`].
pub fn sample_state() -> Vec<u8> {
    use crate::state::{DocumentInfo, IndexState, PendingRef};
    let mut s = IndexState::new("fast", &sesame_core::Params::new(), vec![1, 2, 3]);
    let doc = DocumentInfo {
        id: 1,
        path: "a.txt".into(),
        size: 3,
        digest: Some([9; 32]),
    };
    s.catalog.insert(1, doc);
    s.pending.push(PendingRef {
        id: [7; 16],
        documents: 1,
    });
    s.reserved.push(2);
    s.garbage.push(3);
    wire::encode(&s).unwrap_or_default()
}

/// A decrypted pending intent (an update adding one document and removing
/// another), wire-encoded: a seed for [`local_files`].
pub fn sample_intent() -> Vec<u8> {
    use crate::intents::{Intent, IntentOp};
    use crate::state::DocumentInfo;
    let intent = Intent {
        id: [7; 16],
        generation: 0,
        requests: vec![vec![1, 0, 1]],
        op: IntentOp::Update {
            add: vec![DocumentInfo {
                id: 2,
                path: "b.txt".into(),
                size: 3,
                digest: None,
            }],
            remove: vec![1],
        },
    };
    wire::encode(&intent).unwrap_or_default()
}
