//! The document service: encrypted documents stored beside the index.
//!
//! The client compresses each document, pads it to a length class and
//! encrypts it (AES-256-GCM-SIV under the profile's document key; see
//! `stored::pack`) before it leaves; the server half keeps the blobs in a
//! [`Store`] under its own key space and never sees a key or a plaintext.
//! Requests and responses cross a [`Channel`] in the versioned wire
//! encoding, like a scheme's messages, so the same code runs in-process
//! and over a network.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Handler, IoCounts, Result, Store, WriteBatch};
use sesame_store::documents;

/// A document identifier (the same identifiers the index returns).
pub type DocId = u64;

/// A request to the document service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DocRequest {
    /// Stores (or replaces) encrypted documents.
    PutDocs(Vec<(DocId, Vec<u8>)>),
    /// Returns one encrypted document.
    GetDoc(DocId),
    /// Returns several encrypted documents, in order.
    GetDocs(Vec<DocId>),
    /// Removes one document.
    DeleteDoc(DocId),
    /// Lists the identifiers of every stored document.
    ListDocIds,
    /// Removes several documents; missing ones are skipped.
    DeleteDocs(Vec<DocId>),
    /// Returns several encrypted documents, in order, each paired with the
    /// most bytes its blob may have (what the client recorded when it
    /// stored it): a stored document claiming more is refused before its
    /// pieces are read ([`documents::read_within`]).
    GetDocsWithin(Vec<(DocId, u64)>),
}

/// A response of the document service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DocResponse {
    /// The documents are stored.
    Stored,
    /// The document asked for, if stored.
    Doc(Option<Vec<u8>>),
    /// The documents asked for, in order.
    Docs(Vec<Option<Vec<u8>>>),
    /// Whether a document was there to delete.
    Deleted(bool),
    /// The stored identifiers, ascending.
    DocIds(Vec<DocId>),
    /// How many of the documents were there to delete.
    DeletedCount(u64),
}

/// The server half of the document service. Documents are stored in the
/// layout of [`sesame_store::documents`] (in pieces of one redb page), the
/// layout the server uses too.
pub struct DocServer {
    store: Arc<dyn Store>,
    prefix: Vec<u8>,
}

impl std::fmt::Debug for DocServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocServer").finish_non_exhaustive()
    }
}

impl DocServer {
    /// A server keeping documents in `store` under `prefix` (an index's
    /// document key space: `d/<index>/` in an embedded profile).
    pub fn new(store: Arc<dyn Store>, prefix: impl Into<Vec<u8>>) -> Self {
        DocServer {
            store,
            prefix: prefix.into(),
        }
    }

    /// Deletes the stored documents of `ids` in one batch; how many were
    /// stored (an identifier named twice counts once).
    fn delete(&self, ids: &[DocId]) -> Result<u64> {
        let mut batch = WriteBatch::new();
        let was = documents::delete(self.store.as_ref(), &self.prefix, ids, &mut batch)?;
        if !batch.is_empty() {
            self.store.write(batch)?;
        }
        Ok(was.into_iter().filter(|&w| w).count() as u64)
    }
}

impl Handler for DocServer {
    type Request = DocRequest;
    type Response = DocResponse;

    fn handle(&mut self, request: DocRequest) -> Result<DocResponse> {
        let store = self.store.as_ref();
        let prefix = self.prefix.as_slice();
        match request {
            DocRequest::PutDocs(docs) => {
                let docs: Vec<(DocId, &[u8])> = docs
                    .iter()
                    .map(|(id, blob)| (*id, blob.as_slice()))
                    .collect();
                let new = documents::new_documents(store, prefix, &docs)?.map_err(
                    |documents::Conflict(id)| {
                        Error::Protocol(format!(
                            "document {id} already holds other content; nothing was stored"
                        ))
                    },
                )?;
                if !new.is_empty() {
                    let mut batch = WriteBatch::new();
                    documents::put(&mut batch, prefix, new);
                    store.write(batch)?;
                }
                Ok(DocResponse::Stored)
            }
            DocRequest::GetDoc(id) => Ok(DocResponse::Doc(
                documents::read(store, prefix, &[id])?.pop().flatten(),
            )),
            DocRequest::GetDocs(ids) => {
                Ok(DocResponse::Docs(documents::read(store, prefix, &ids)?))
            }
            DocRequest::GetDocsWithin(docs) => Ok(DocResponse::Docs(documents::read_within(
                store, prefix, &docs,
            )?)),
            DocRequest::DeleteDoc(id) => Ok(DocResponse::Deleted(self.delete(&[id])? > 0)),
            DocRequest::DeleteDocs(ids) => Ok(DocResponse::DeletedCount(self.delete(&ids)?)),
            DocRequest::ListDocIds => Ok(DocResponse::DocIds(documents::list(store, prefix)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

/// The client half of the document service: typed calls over a channel.
/// It moves ciphertexts only; encryption happens in the session.
#[derive(Debug)]
pub struct DocClient;

impl DocClient {
    /// Stores encrypted documents.
    pub fn put(channel: &mut dyn Channel, docs: Vec<(DocId, Vec<u8>)>) -> Result<()> {
        match channel::call(channel, &DocRequest::PutDocs(docs))? {
            DocResponse::Stored => Ok(()),
            other => Err(Error::unexpected("document service", &other)),
        }
    }

    /// One encrypted document, if stored.
    pub fn get(channel: &mut dyn Channel, id: DocId) -> Result<Option<Vec<u8>>> {
        match channel::call(channel, &DocRequest::GetDoc(id))? {
            DocResponse::Doc(d) => Ok(d),
            other => Err(Error::unexpected("document service", &other)),
        }
    }

    /// Several encrypted documents, in the order asked.
    pub fn get_many(channel: &mut dyn Channel, ids: &[DocId]) -> Result<Vec<Option<Vec<u8>>>> {
        match channel::call(channel, &DocRequest::GetDocs(ids.to_vec()))? {
            DocResponse::Docs(d) if d.len() == ids.len() => Ok(d),
            DocResponse::Docs(d) => Err(Error::Protocol(format!(
                "asked for {} documents, got {}",
                ids.len(),
                d.len()
            ))),
            other => Err(Error::unexpected("document service", &other)),
        }
    }

    /// Several encrypted documents, in the order asked, each no larger
    /// than the bytes paired with it: a document claiming or holding more
    /// is refused ([`sesame_core::Error::StoreCorrupt`] from an embedded
    /// store, before its pieces are read; [`Error::Protocol`] for an
    /// answer that carries it).
    pub fn get_within(
        channel: &mut dyn Channel,
        docs: &[(DocId, u64)],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let blobs = match channel::call(channel, &DocRequest::GetDocsWithin(docs.to_vec()))? {
            DocResponse::Docs(d) if d.len() == docs.len() => d,
            DocResponse::Docs(d) => {
                return Err(Error::Protocol(format!(
                    "asked for {} documents, got {}",
                    docs.len(),
                    d.len()
                )))
            }
            other => return Err(Error::unexpected("document service", &other)),
        };
        for (&(id, max), blob) in docs.iter().zip(&blobs) {
            if let Some(blob) = blob.as_ref().filter(|b| b.len() as u64 > max) {
                return Err(Error::Protocol(format!(
                    "document {id}: the answer holds {} bytes, more than the {max} bytes the \
                     client's catalog recorded for it; nothing of it was used",
                    blob.len()
                )));
            }
        }
        Ok(blobs)
    }

    /// Removes a document; whether it was there.
    pub fn delete(channel: &mut dyn Channel, id: DocId) -> Result<bool> {
        match channel::call(channel, &DocRequest::DeleteDoc(id))? {
            DocResponse::Deleted(d) => Ok(d),
            other => Err(Error::unexpected("document service", &other)),
        }
    }

    /// Removes several documents; how many were there.
    pub fn delete_many(channel: &mut dyn Channel, ids: &[DocId]) -> Result<u64> {
        match channel::call(channel, &DocRequest::DeleteDocs(ids.to_vec()))? {
            DocResponse::DeletedCount(n) => Ok(n),
            other => Err(Error::unexpected("document service", &other)),
        }
    }

    /// The identifiers of every stored document.
    pub fn list(channel: &mut dyn Channel) -> Result<Vec<DocId>> {
        match channel::call(channel, &DocRequest::ListDocIds)? {
            DocResponse::DocIds(ids) => Ok(ids),
            other => Err(Error::unexpected("document service", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_core::{wire, LocalChannel, Typed};
    use sesame_store::MemoryStore;

    #[test]
    fn put_get_list_delete_round_trip() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut ch = LocalChannel::new(Typed(DocServer::new(store.clone(), "d/x/")));
        DocClient::put(&mut ch, vec![(2, b"two".to_vec()), (1, b"one".to_vec())]).unwrap();
        assert_eq!(DocClient::get(&mut ch, 1).unwrap(), Some(b"one".to_vec()));
        assert_eq!(DocClient::get(&mut ch, 3).unwrap(), None);
        assert_eq!(
            DocClient::get_many(&mut ch, &[2, 9]).unwrap(),
            vec![Some(b"two".to_vec()), None]
        );
        assert_eq!(DocClient::list(&mut ch).unwrap(), vec![1, 2]);
        assert!(DocClient::delete(&mut ch, 1).unwrap());
        assert!(!DocClient::delete(&mut ch, 1).unwrap());
        assert_eq!(DocClient::list(&mut ch).unwrap(), vec![2]);
        DocClient::put(&mut ch, vec![(3, b"three".to_vec())]).unwrap();
        assert_eq!(DocClient::delete_many(&mut ch, &[2, 3, 4, 3]).unwrap(), 2);
        assert!(DocClient::list(&mut ch).unwrap().is_empty());
        // Documents of several pieces come back whole, and their deletion
        // leaves no piece behind.
        let big: Vec<u8> = (0..30_000u32).map(|i| (i % 251) as u8).collect();
        DocClient::put(&mut ch, vec![(5, big.clone()), (6, big[..4_100].to_vec())]).unwrap();
        assert_eq!(
            DocClient::get_many(&mut ch, &[6, 5]).unwrap(),
            vec![Some(big[..4_100].to_vec()), Some(big.clone())]
        );
        let keys = store.scan_prefix(b"d/x/").unwrap().len();
        assert!(keys > 3, "{keys} keys");
        assert_eq!(DocClient::delete_many(&mut ch, &[5, 6]).unwrap(), 2);
        // Only the heads' end marker is left.
        assert_eq!(store.scan_prefix(b"d/x/").unwrap().len(), 1);
    }

    #[test]
    fn a_stored_document_is_never_overwritten_with_other_content() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut ch = LocalChannel::new(Typed(DocServer::new(store, "d/x/")));
        DocClient::put(&mut ch, vec![(1, b"one".to_vec())]).unwrap();
        // The same bytes again: a repeat, accepted.
        DocClient::put(&mut ch, vec![(1, b"one".to_vec())]).unwrap();
        // Other bytes under the same id: refused, and nothing of the
        // request is stored.
        let err = DocClient::put(&mut ch, vec![(2, b"two".to_vec()), (1, b"uno".to_vec())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("already holds other content"), "{err}");
        assert_eq!(DocClient::get(&mut ch, 1).unwrap(), Some(b"one".to_vec()));
        assert_eq!(DocClient::get(&mut ch, 2).unwrap(), None);
        // One request naming a new id twice with other bytes: refused too
        // (the second would have left the first's extra pieces).
        let err = DocClient::put(&mut ch, vec![(3, vec![1; 9_000]), (3, vec![2; 100])])
            .unwrap_err()
            .to_string();
        assert!(err.contains("already holds other content"), "{err}");
        assert_eq!(DocClient::get(&mut ch, 3).unwrap(), None);
    }

    #[test]
    fn a_read_within_refuses_documents_larger_than_their_bounds() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut ch = LocalChannel::new(Typed(DocServer::new(store, "d/x/")));
        DocClient::put(&mut ch, vec![(1, vec![1; 100]), (2, vec![2; 9_000])]).unwrap();
        assert_eq!(
            DocClient::get_within(&mut ch, &[(2, 9_000), (1, 100), (3, 0)]).unwrap(),
            vec![Some(vec![2; 9_000]), Some(vec![1; 100]), None]
        );
        for (id, max) in [(1, 99), (2, 8_999)] {
            let err = DocClient::get_within(&mut ch, &[(id, max)])
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("document {id}: its head")), "{err}");
        }

        // A service that answers more than asked for, whatever its store
        // says (a server over the network): refused by the client half.
        struct Larger;
        impl Handler for Larger {
            type Request = DocRequest;
            type Response = DocResponse;
            fn handle(&mut self, _: DocRequest) -> Result<DocResponse> {
                Ok(DocResponse::Docs(vec![Some(vec![0; 101])]))
            }
            fn io_counts(&self) -> IoCounts {
                IoCounts::default()
            }
        }
        let mut ch = LocalChannel::new(Typed(Larger));
        let err = DocClient::get_within(&mut ch, &[(7, 100)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("document 7: the answer holds 101 bytes"),
            "{err}"
        );
        assert_eq!(
            DocClient::get_within(&mut ch, &[(7, 101)]).unwrap(),
            vec![Some(vec![0; 101])]
        );
    }

    #[test]
    fn messages_round_trip_on_the_wire() {
        for m in [
            DocRequest::PutDocs(vec![(7, vec![1, 2, 3])]),
            DocRequest::GetDoc(u64::MAX),
            DocRequest::GetDocs(vec![1, 2]),
            DocRequest::DeleteDoc(0),
            DocRequest::ListDocIds,
            DocRequest::DeleteDocs(vec![3, 4]),
            DocRequest::GetDocsWithin(vec![(5, 4_096), (u64::MAX, 0)]),
        ] {
            let bytes = wire::encode(&m).unwrap();
            assert_eq!(wire::decode::<DocRequest>(&bytes).unwrap(), m);
        }
    }
}
