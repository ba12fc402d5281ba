//! A session on one index: adding documents, searching, reading them back.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Meter, SchemeDescriptor, SchemeKind};
use sesame_crypto::Aes256GcmSiv;
use sesame_sse::{KeywordClient, KeywordScheme, Multimap, UpdateOp};
use zeroize::{Zeroize, Zeroizing};

use crate::backend::Backend;
use crate::collect::{self, NewFile};
use crate::doc_service::{DocClient, DocId};
use crate::error::{ClientError, Result};
use crate::profile::{find_scheme, new_client, Profile};
use crate::state::{DocumentInfo, IndexState, JournalEntry, PendingIntent, StateCipher};
use crate::tokenize::{query_keyword, tokenize_bytes};

/// Bytes of documents per request to the document service.
const BATCH_BYTES: u64 = 16 << 20;

/// Documents per pending intent of a dynamic scheme's updates.
const INTENT_DOCS: usize = 64;
/// Bytes of requests per pending intent.
const INTENT_BYTES: usize = 1 << 20;

/// What a long operation is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Reading and tokenizing the new files.
    Reading,
    /// Encrypting and storing the new documents.
    Storing,
    /// Fetching and decrypting the stored documents to rebuild a static
    /// index.
    Fetching,
    /// Building or updating the encrypted index.
    Indexing,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Reading => "reading",
            Phase::Storing => "storing",
            Phase::Fetching => "fetching",
            Phase::Indexing => "indexing",
        })
    }
}

/// Progress of a long operation: `done` of `total` steps of `phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// Steps done.
    pub done: u64,
    /// Steps in the phase.
    pub total: u64,
}

/// The answer to [`Session::query`].
#[derive(Clone, Debug, PartialEq)]
pub struct QueryHits {
    /// The kind of query answered.
    pub kind: sesame_core::QueryKind,
    /// Matching documents: best first for ranked queries, else by
    /// identifier.
    pub documents: Vec<DocumentInfo>,
    /// For ranked queries, the score of each document; empty otherwise.
    pub scores: Vec<f64>,
    /// Candidates the server returned that did not match after decryption
    /// (false positives of filter-based schemes), removed.
    pub false_positives_removed: usize,
}

/// What [`Session::add_documents`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddReport {
    /// The documents added, with their new identifiers.
    pub added: Vec<DocumentInfo>,
    /// Distinct keywords in the added documents.
    pub keywords: usize,
    /// (keyword, document) pairs added.
    pub pairs: usize,
    /// Whether the whole index was rebuilt (static schemes).
    pub rebuilt: bool,
    /// Documents in the index afterwards.
    pub indexed: usize,
    /// Documents of an earlier, interrupted add that this one found
    /// indexed already or completed (their updates sent again, or the same
    /// files given again); they are not in `added`.
    pub resumed: usize,
}

/// What an encrypted document holds.
#[derive(Serialize, Deserialize)]
struct DocRecord {
    path: String,
    content: Vec<u8>,
}

impl Drop for DocRecord {
    fn drop(&mut self) {
        self.content.zeroize();
    }
}

/// A session on one index of a profile.
///
/// Every operation that changes the client state writes it (encrypted,
/// atomically) before it returns.
pub struct Session {
    index: String,
    profile_id: String,
    profile_dir: PathBuf,
    state_path: PathBuf,
    cipher: StateCipher,
    docs: Aes256GcmSiv,
    scheme: KeywordScheme,
    state: IndexState,
    client: Box<dyn KeywordClient>,
    backend: Box<dyn Backend>,
    rng: OsRng,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("index", &self.index)
            .field("scheme", &self.scheme.descriptor.name)
            .field("documents", &self.state.catalog.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        profile: &Profile,
        index: &str,
        state: IndexState,
        backend: Box<dyn Backend>,
    ) -> Result<Session> {
        let scheme = find_scheme(&state.scheme)?;
        Self::with_scheme(profile, index, state, backend, scheme)
    }

    /// As [`Session::new`], with the scheme given rather than looked up.
    fn with_scheme(
        profile: &Profile,
        index: &str,
        state: IndexState,
        backend: Box<dyn Backend>,
        scheme: KeywordScheme,
    ) -> Result<Session> {
        let state_path = profile.state_path(index);
        let client =
            (scheme.restore_client)(&state.client).map_err(|_| ClientError::StateCorrupt {
                index: index.to_owned(),
                path: state_path.clone(),
            })?;
        Ok(Session {
            index: index.to_owned(),
            profile_id: profile.id().to_owned(),
            profile_dir: profile.dir().to_path_buf(),
            state_path,
            cipher: profile.state_cipher(),
            docs: Aes256GcmSiv::new(profile.doc_key()),
            scheme,
            state,
            client,
            backend,
            rng: OsRng,
        })
    }

    /// The index name.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// The descriptor of the index's scheme.
    pub fn scheme(&self) -> &'static SchemeDescriptor {
        self.scheme.descriptor
    }

    /// Whether the scheme is static (adding documents rebuilds the index).
    pub fn is_static(&self) -> bool {
        self.scheme.descriptor.kind == SchemeKind::StaticSse
    }

    /// The meter every channel of the session reports to.
    pub fn meter(&self) -> &Meter {
        self.backend.meter()
    }

    /// The documents of the index, by identifier.
    pub fn documents(&self) -> Vec<DocumentInfo> {
        self.state.catalog.values().cloned().collect()
    }

    /// The document `id`, if the index has it.
    pub fn document(&self, id: DocId) -> Option<&DocumentInfo> {
        self.state.catalog.get(&id)
    }

    /// Adds files and directories (walked recursively) as new documents.
    ///
    /// Every file is read before anything is sent, so a missing or
    /// unreadable file changes nothing. Each document gets a fresh
    /// identifier, is encrypted and stored, and is indexed: a dynamic scheme
    /// sends one update per document; a static scheme rebuilds the whole
    /// index, with fresh keys, over the stored documents and the new ones
    /// ([`AddReport::rebuilt`]). `progress` hears of each step.
    pub fn add_documents<P: AsRef<Path>>(
        &mut self,
        paths: &[P],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<AddReport> {
        if paths.is_empty() {
            return Err(ClientError::InvalidArgument("no files to add".into()));
        }
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let files = collect::list_files(&paths, &self.profile_dir)?;
        let total = files.len() as u64;
        let mut new: Vec<(NewFile, Vec<String>, [u8; 32])> = Vec::with_capacity(files.len());
        for (i, path) in files.iter().enumerate() {
            progress(Progress {
                phase: Phase::Reading,
                done: i as u64,
                total,
            });
            let file = collect::read_file(path)?;
            let keywords = tokenize_bytes(&file.content);
            let digest = sesame_crypto::hash::sha256(&file.content);
            new.push((file, keywords, digest));
        }
        progress(Progress {
            phase: Phase::Reading,
            done: total,
            total,
        });

        // Finish the updates an interrupted run left unacknowledged.
        let mut resumed: BTreeSet<DocId> = self.resume_pending_ids()?.into_iter().collect();
        let mut report = AddReport::default();
        if new.is_empty() {
            report.resumed = resumed.len();
            report.indexed = self.state.catalog.len();
            return Ok(report);
        }

        // The same files as an interrupted add: keep their identifiers and
        // skip those it indexed.
        let mut journal: HashMap<(String, [u8; 32]), u64> = self
            .state
            .journal
            .drain(..)
            .map(|e| ((e.path, e.digest), e.id))
            .collect();
        let mut next = self.state.next_doc;
        let mut chosen: Vec<(DocId, NewFile, Vec<String>, [u8; 32])> =
            Vec::with_capacity(new.len());
        for (file, keywords, digest) in new {
            let path = file.path.to_string_lossy().into_owned();
            let id = match journal.remove(&(path, digest)) {
                Some(id) if self.state.catalog.contains_key(&id) => {
                    resumed.insert(id);
                    continue;
                }
                Some(id) => id,
                None => {
                    let id = next;
                    next = next
                        .checked_add(1)
                        .filter(|&n| n < sesame_sse::common::PAD)
                        .ok_or_else(|| {
                            ClientError::InvalidArgument("document identifiers exhausted".into())
                        })?;
                    id
                }
            };
            chosen.push((id, file, keywords, digest));
        }
        // Reserve the identifiers first: whatever happens next, they are
        // never handed out again, and the journal lets a rerun resume.
        report.resumed = resumed.len();
        self.state.next_doc = next;
        self.state.journal = chosen
            .iter()
            .map(|(id, file, _, digest)| JournalEntry {
                id: *id,
                path: file.path.to_string_lossy().into_owned(),
                digest: *digest,
            })
            .collect();
        self.save()?;
        if chosen.is_empty() {
            report.indexed = self.state.catalog.len();
            return Ok(report);
        }

        let mut distinct = BTreeSet::new();
        let mut batch: Vec<(DocId, NewFile, Vec<String>)> = Vec::with_capacity(chosen.len());
        for (id, file, keywords, _) in chosen {
            report.pairs += keywords.len();
            distinct.extend(keywords.iter().cloned());
            report.added.push(DocumentInfo {
                id,
                path: file.path.to_string_lossy().into_owned(),
                size: file.content.len() as u64,
            });
            batch.push((id, file, keywords));
        }
        report.keywords = distinct.len();

        self.store_documents(&batch, progress)?;
        let docs: Vec<(DocumentInfo, Vec<String>)> = report
            .added
            .iter()
            .cloned()
            .zip(batch.into_iter().map(|(_, _, k)| k))
            .collect();
        if self.is_static() {
            self.rebuild(docs, progress)?;
            report.rebuilt = true;
        } else {
            self.update(docs, progress)?;
        }
        self.state.journal.clear();
        self.save()?;
        report.indexed = self.state.catalog.len();
        Ok(report)
    }

    /// Sends again, in order, the updates that were saved but not
    /// acknowledged (by a run that crashed or lost the server); each
    /// document enters the catalog once its update is acknowledged.
    /// Returns the documents completed. Called by every operation that
    /// uses the index.
    pub fn resume_pending(&mut self) -> Result<usize> {
        Ok(self.resume_pending_ids()?.len())
    }

    fn resume_pending_ids(&mut self) -> Result<Vec<DocId>> {
        let mut done = Vec::new();
        while let Some(intent) = self.state.pending.first().cloned() {
            self.send_intent(&intent)?;
            for d in intent.documents {
                done.push(d.id);
                self.state.catalog.insert(d.id, d);
            }
            self.state.pending.remove(0);
            self.save()?;
        }
        Ok(done)
    }

    /// Documents waiting in unacknowledged updates.
    pub fn pending_documents(&self) -> usize {
        self.state.pending.iter().map(|p| p.documents.len()).sum()
    }

    fn send_intent(&mut self, intent: &PendingIntent) -> Result<()> {
        if intent.requests.is_empty() {
            return Ok(());
        }
        let sent = self
            .backend
            .apply_update(
                &self.index,
                intent.generation,
                &self.scheme,
                intent.id,
                &intent.requests,
            )
            .and_then(|responses| {
                if responses.len() != intent.requests.len() {
                    return Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                        "sent {} update requests, got {} answers",
                        intent.requests.len(),
                        responses.len()
                    ))));
                }
                for r in &responses {
                    self.client.check_update_response(r)?;
                }
                Ok(())
            });
        sent.map_err(|cause| ClientError::Unacknowledged {
            documents: self.pending_documents(),
            cause: Box::new(cause),
        })
    }

    /// Answers a query of any kind ([`crate::parse_query`]: `word`,
    /// `abc*`, `a?c*`, `a b c`, `top:K a b`).
    ///
    /// A kind the index's scheme does not answer is
    /// [`ClientError::UnsupportedQuery`], before anything is sent. Ranked
    /// answers come best first, with their scores; the others by
    /// identifier. Candidates a filter-based scheme returned that did not
    /// match after decryption are removed and counted.
    pub fn query(&mut self, text: &str) -> Result<QueryHits> {
        let query = crate::tokenize::parse_query(text)?;
        let descriptor = self.scheme.descriptor;
        let kind = query.kind();
        if !descriptor.supports(kind) {
            return Err(ClientError::UnsupportedQuery {
                scheme: descriptor.name.to_owned(),
                kind: kind.to_string(),
                supported: descriptor
                    .queries
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        self.resume_pending()?;
        if self.state.catalog.is_empty() {
            return Ok(QueryHits {
                kind,
                documents: Vec::new(),
                scores: Vec::new(),
                false_positives_removed: 0,
            });
        }
        let mut channel =
            self.backend
                .index_channel(&self.index, self.state.generation, &self.scheme)?;
        let result = self.client.query(&mut self.rng, channel.as_mut(), &query)?;
        let after = Zeroizing::new(self.client.save_state()?);
        if *after != self.state.client {
            self.state.client.zeroize();
            self.state.client = after.to_vec();
            self.save()?;
        }
        let mut documents = Vec::with_capacity(result.ids.len());
        let mut scores = Vec::new();
        for (i, id) in result.ids.iter().enumerate() {
            // An identifier the catalog lacks belongs to an add that did
            // not complete; it names no document.
            if let Some(doc) = self.state.catalog.get(id) {
                documents.push(doc.clone());
                if let Some(s) = result.scores.get(i) {
                    scores.push(*s);
                }
            }
        }
        Ok(QueryHits {
            kind,
            documents,
            scores,
            false_positives_removed: result.false_positives_removed,
        })
    }

    /// The documents containing `keyword`, by identifier.
    ///
    /// The query goes through the document tokenizer: it must hold exactly
    /// one keyword (`"Größe"` finds documents holding "größe").
    pub fn search(&mut self, keyword: &str) -> Result<Vec<DocumentInfo>> {
        let word = query_keyword(keyword)?;
        self.resume_pending()?;
        if self.state.catalog.is_empty() {
            return Ok(Vec::new());
        }
        let mut channel =
            self.backend
                .index_channel(&self.index, self.state.generation, &self.scheme)?;
        let ids = self
            .client
            .search(&mut self.rng, channel.as_mut(), word.as_bytes())?;
        // Some schemes change their state on search.
        let after = Zeroizing::new(self.client.save_state()?);
        if *after != self.state.client {
            self.state.client.zeroize();
            self.state.client = after.to_vec();
            self.save()?;
        }
        // An identifier the catalog lacks belongs to an add that did not
        // complete; it names no document.
        Ok(ids
            .into_iter()
            .filter_map(|id| self.state.catalog.get(&id).cloned())
            .collect())
    }

    /// The decrypted content of document `id`.
    pub fn get(&mut self, id: DocId) -> Result<Vec<u8>> {
        if !self.state.catalog.contains_key(&id) {
            return Err(ClientError::UnknownDocument(id));
        }
        let mut channel = self.backend.document_channel(&self.index)?;
        let blob = DocClient::get(channel.as_mut(), id)?.ok_or(ClientError::DocumentMissing(id))?;
        let mut record = self.open_document(id, &blob)?;
        Ok(std::mem::take(&mut record.content))
    }

    fn doc_aad(&self, id: DocId) -> Vec<u8> {
        let mut aad = b"sesame-client/document/v1\0".to_vec();
        for part in [self.profile_id.as_str(), self.index.as_str()] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad.extend_from_slice(&id.to_be_bytes());
        aad
    }

    fn seal_document(&mut self, id: DocId, file: &NewFile) -> Result<Vec<u8>> {
        let record = DocRecord {
            path: file.path.to_string_lossy().into_owned(),
            content: file.content.clone(),
        };
        let plain = Zeroizing::new(wire::encode(&record)?);
        let aad = self.doc_aad(id);
        self.docs
            .seal(&mut self.rng, &aad, &plain)
            .map_err(|_| ClientError::InvalidArgument(format!("document {id} is too large")))
    }

    fn open_document(&self, id: DocId, blob: &[u8]) -> Result<DocRecord> {
        let plain = Zeroizing::new(
            self.docs
                .open(&self.doc_aad(id), blob)
                .map_err(|_| ClientError::DocumentCorrupt(id))?,
        );
        wire::decode(&plain).map_err(|_| ClientError::DocumentCorrupt(id))
    }

    fn store_documents(
        &mut self,
        batch: &[(DocId, NewFile, Vec<String>)],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let total = batch.len() as u64;
        let mut channel = self.backend.document_channel(&self.index)?;
        let mut pending = Vec::new();
        let mut bytes = 0u64;
        for (i, (id, file, _)) in batch.iter().enumerate() {
            let blob = self.seal_document(*id, file)?;
            bytes += blob.len() as u64;
            pending.push((*id, blob));
            if bytes >= BATCH_BYTES || i + 1 == batch.len() {
                DocClient::put(channel.as_mut(), std::mem::take(&mut pending))?;
                bytes = 0;
                progress(Progress {
                    phase: Phase::Storing,
                    done: i as u64 + 1,
                    total,
                });
            }
        }
        Ok(())
    }

    /// Static schemes: a fresh client (fresh keys) builds a new generation
    /// of the index over every document; the state switches to it in one
    /// atomic write; the old generation is dropped.
    fn rebuild(
        &mut self,
        new: Vec<(DocumentInfo, Vec<String>)>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let mut db = Multimap::new();
        let mut insert = |id: DocId, keywords: Vec<String>| {
            for w in keywords {
                db.entry(w.into_bytes()).or_default().push(id);
            }
        };

        let old: Vec<DocumentInfo> = self.state.catalog.values().cloned().collect();
        let total = old.len() as u64;
        let mut channel = self.backend.document_channel(&self.index)?;
        let mut done = 0u64;
        for chunk in chunk_by_size(&old) {
            progress(Progress {
                phase: Phase::Fetching,
                done,
                total,
            });
            let ids: Vec<DocId> = chunk.iter().map(|d| d.id).collect();
            let blobs = DocClient::get_many(channel.as_mut(), &ids)?;
            for (id, blob) in ids.into_iter().zip(blobs) {
                let blob = blob.ok_or(ClientError::DocumentMissing(id))?;
                let record = self.open_document(id, &blob)?;
                insert(id, tokenize_bytes(&record.content));
            }
            done += chunk.len() as u64;
        }
        if total > 0 {
            progress(Progress {
                phase: Phase::Fetching,
                done: total,
                total,
            });
        }
        let mut added = Vec::with_capacity(new.len());
        for (info, keywords) in new {
            insert(info.id, keywords);
            added.push(info);
        }

        progress(Progress {
            phase: Phase::Indexing,
            done: 0,
            total: 1,
        });
        let mut client = new_client(&self.scheme, &mut self.rng, &self.state.params)?;
        let generation = self.state.generation + 1;
        // Remnants of an earlier rebuild that did not complete go first, so
        // the new generation starts empty whatever the scheme's setup does.
        self.backend
            .drop_other_generations(&self.index, self.state.generation)?;
        let mut channel = self
            .backend
            .setup_channel(&self.index, generation, &self.scheme)?;
        let ch: &mut dyn sesame_core::Channel = channel.as_mut();
        client.setup(&mut self.rng, ch, &db)?;
        // Durable (and, on a server, visible) before the state switches.
        channel.commit()?;
        progress(Progress {
            phase: Phase::Indexing,
            done: 1,
            total: 1,
        });

        self.state.client.zeroize();
        self.state.client = client.save_state()?;
        self.state.generation = generation;
        for info in added {
            self.state.catalog.insert(info.id, info);
        }
        self.client = client;
        self.save()?;
        // Left-overs of an earlier failure go too; if this fails, the next
        // rebuild removes them.
        let _ = self.backend.drop_other_generations(&self.index, generation);
        Ok(())
    }

    /// Dynamic schemes: the updates of up to [`INTENT_DOCS`] documents are
    /// computed, saved together with the new client state as one pending
    /// intent (one atomic write), then sent; the documents enter the
    /// catalog when the server acknowledges. A crash before the save sent
    /// nothing; after it, the next operation sends the intent again.
    fn update(
        &mut self,
        new: Vec<(DocumentInfo, Vec<String>)>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let total = new.len() as u64;
        let mut docs = Vec::new();
        let mut requests = Vec::new();
        let mut bytes = 0;
        for (i, (info, keywords)) in new.into_iter().enumerate() {
            progress(Progress {
                phase: Phase::Indexing,
                done: i as u64,
                total,
            });
            let words: Vec<Vec<u8>> = keywords.into_iter().map(String::into_bytes).collect();
            if words.is_empty() {
                docs.push(info);
            } else {
                match self
                    .client
                    .prepare_update(&mut self.rng, UpdateOp::Add, info.id, &words)?
                {
                    Some(r) => {
                        bytes += r.iter().map(Vec::len).sum::<usize>();
                        requests.extend(r);
                        docs.push(info);
                    }
                    None => {
                        // A scheme whose updates need the server's answers:
                        // no intent can be computed ahead; update and save
                        // the state per document.
                        self.flush_intent(&mut docs, &mut requests)?;
                        let mut channel = self.backend.index_channel(
                            &self.index,
                            self.state.generation,
                            &self.scheme,
                        )?;
                        self.client.update(
                            &mut self.rng,
                            channel.as_mut(),
                            UpdateOp::Add,
                            info.id,
                            &words,
                        )?;
                        self.state.client.zeroize();
                        self.state.client = self.client.save_state()?;
                        self.state.catalog.insert(info.id, info);
                        self.save()?;
                        continue;
                    }
                }
            }
            if docs.len() >= INTENT_DOCS || bytes >= INTENT_BYTES {
                self.flush_intent(&mut docs, &mut requests)?;
                bytes = 0;
            }
        }
        self.flush_intent(&mut docs, &mut requests)?;
        progress(Progress {
            phase: Phase::Indexing,
            done: total,
            total,
        });
        Ok(())
    }

    /// Saves `docs` and `requests` as a pending intent with the client
    /// state that produced them, sends it, and on acknowledgement moves the
    /// documents into the catalog.
    fn flush_intent(
        &mut self,
        docs: &mut Vec<DocumentInfo>,
        requests: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        if docs.is_empty() && requests.is_empty() {
            return Ok(());
        }
        let mut id = [0u8; 16];
        self.rng.fill_bytes(&mut id);
        let intent = PendingIntent {
            id,
            generation: self.state.generation,
            requests: std::mem::take(requests),
            documents: std::mem::take(docs),
        };
        self.state.client.zeroize();
        self.state.client = self.client.save_state()?;
        self.state.pending.push(intent.clone());
        self.save()?;
        self.send_intent(&intent)?;
        for d in intent.documents {
            self.state.catalog.insert(d.id, d);
        }
        self.state.pending.retain(|p| p.id != id);
        self.save()
    }

    fn save(&mut self) -> Result<()> {
        self.cipher
            .save(&mut self.rng, &self.state_path, &self.index, &self.state)
    }
}

/// Splits documents into runs of at most [`BATCH_BYTES`] (by their sizes
/// in the catalog), each run at least one document.
fn chunk_by_size(docs: &[DocumentInfo]) -> Vec<&[DocumentInfo]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, d) in docs.iter().enumerate() {
        if i > start && bytes + d.size > BATCH_BYTES {
            out.push(&docs[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += d.size;
    }
    if start < docs.len() {
        out.push(&docs[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    //! The dynamic path, with a toy plaintext dynamic scheme (no dynamic
    //! scheme is registered yet).

    use std::sync::Arc;

    use rand_core::CryptoRngCore;
    use sesame_core::{
        channel, BackwardPrivacy, Channel, Handler, IoCounts, Params, QueryKind,
        Result as CoreResult, Store, Typed,
    };
    use sesame_store::MemoryStore;

    use super::*;
    use crate::backend::EmbeddedBackend;
    use crate::insecure;

    static TOY: SchemeDescriptor = SchemeDescriptor {
        name: "toy",
        title: "Toy dynamic scheme (plaintext)",
        citation: "nobody",
        kind: SchemeKind::DynamicSse,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Exact],
        leakage: "everything",
        doc: "none",
    };

    #[derive(Serialize, Deserialize)]
    enum Req {
        Add(DocId, Vec<Vec<u8>>),
        Search(Vec<u8>),
    }

    /// Counts its updates, so the state changes with each.
    struct ToyClient {
        updates: u64,
    }

    impl KeywordClient for ToyClient {
        fn descriptor(&self) -> &'static SchemeDescriptor {
            &TOY
        }
        fn setup(
            &mut self,
            _: &mut dyn CryptoRngCore,
            _: &mut dyn Channel,
            _: &Multimap,
        ) -> CoreResult<()> {
            panic!("a dynamic scheme is never set up by the SDK")
        }
        fn update(
            &mut self,
            _: &mut dyn CryptoRngCore,
            ch: &mut dyn Channel,
            op: UpdateOp,
            doc: DocId,
            words: &[Vec<u8>],
        ) -> CoreResult<()> {
            assert_eq!(op, UpdateOp::Add);
            self.updates += 1;
            channel::call::<_, Vec<DocId>, _>(ch, &Req::Add(doc, words.to_vec())).map(drop)
        }
        fn search(
            &mut self,
            _: &mut dyn CryptoRngCore,
            ch: &mut dyn Channel,
            w: &[u8],
        ) -> CoreResult<Vec<DocId>> {
            channel::call(ch, &Req::Search(w.to_vec()))
        }
        fn save_state(&self) -> CoreResult<Vec<u8>> {
            Ok(self.updates.to_le_bytes().to_vec())
        }
    }

    struct ToyServer(Arc<dyn Store>);

    impl Handler for ToyServer {
        type Request = Req;
        type Response = Vec<DocId>;
        fn handle(&mut self, r: Req) -> CoreResult<Vec<DocId>> {
            match r {
                Req::Add(doc, words) => {
                    for w in words {
                        let mut k = w;
                        k.push(0);
                        k.extend_from_slice(&doc.to_be_bytes());
                        self.0.put(&k, b"")?;
                    }
                    Ok(Vec::new())
                }
                Req::Search(mut w) => {
                    w.push(0);
                    let mut ids = Vec::new();
                    for (k, _) in self.0.scan_prefix(&w)? {
                        let b: [u8; 8] = k[w.len()..].try_into().unwrap();
                        ids.push(DocId::from_be_bytes(b));
                    }
                    Ok(ids)
                }
            }
        }
        fn io_counts(&self) -> IoCounts {
            self.0.io_counts()
        }
    }

    fn toy() -> KeywordScheme {
        KeywordScheme {
            descriptor: &TOY,
            params: &[],
            new_client: |_, _| Ok(Box::new(ToyClient { updates: 0 })),
            restore_client: |b| {
                let n = u64::from_le_bytes(
                    b.try_into()
                        .map_err(|_| sesame_core::Error::Malformed("toy state".into()))?,
                );
                Ok(Box::new(ToyClient { updates: n }))
            },
            new_server: |store| Box::new(Typed(ToyServer(store))),
        }
    }

    #[test]
    fn dynamic_schemes_update_per_document_and_persist_state() {
        let tmp = tempfile::tempdir().unwrap();
        let profile = Profile::create_with_kdf(
            tmp.path().join("p"),
            "pw",
            "pibas",
            &Params::new(),
            insecure::fast_kdf(),
        )
        .unwrap();
        let files: Vec<PathBuf> = ["fox dog", "dog cat", ""]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let p = tmp.path().join(format!("{i}.txt"));
                std::fs::write(&p, text).unwrap();
                p
            })
            .collect();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let state = IndexState::new("toy", &Params::new(), 0u64.to_le_bytes().to_vec());
        let backend = Box::new(EmbeddedBackend::over(store.clone()));
        let mut s = Session::with_scheme(&profile, "toy", state, backend, toy()).unwrap();
        assert!(!s.is_static());
        s.save().unwrap();

        let r = s.add_documents(&files[..2], &mut |_| {}).unwrap();
        assert!(!r.rebuilt);
        assert_eq!((r.added.len(), r.indexed, r.pairs), (2, 2, 4));
        let r = s.add_documents(&files[2..], &mut |_| {}).unwrap();
        assert!(!r.rebuilt);
        assert_eq!(r.indexed, 3);
        let ids = |hits: Vec<DocumentInfo>| hits.into_iter().map(|d| d.id).collect::<Vec<_>>();
        assert_eq!(ids(s.search("dog").unwrap()), [1, 2]);
        assert_eq!(ids(s.search("CAT").unwrap()), [2]);
        assert_eq!(s.get(3).unwrap(), b"");
        drop(s);

        // The state on disk has the catalog and the scheme's state (two
        // updates: the empty document sends none).
        let state = profile.load_state("toy").unwrap();
        assert_eq!(state.catalog.len(), 3);
        assert_eq!(state.client, 2u64.to_le_bytes());
        assert_eq!(state.next_doc, 4);
        assert_eq!(state.generation, 0);
        let backend = Box::new(EmbeddedBackend::over(store));
        let mut s = Session::with_scheme(&profile, "toy", state, backend, toy()).unwrap();
        assert_eq!(ids(s.search("fox").unwrap()), [1]);
    }
}
