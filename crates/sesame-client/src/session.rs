//! A session on one index: adding (syncing) and removing documents,
//! searching, reading documents back, checking the profile.
//!
//! Every operation that changes the index is a *pending intent* first
//! ([`crate::intents`]): its requests and the client state that follows
//! are saved together before anything is sent, the server applies the
//! requests once whatever number of times they arrive, and the operation
//! is completed by whichever command runs next if this one is interrupted.
//! Every command starts by completing what an interrupted one left
//! ([`Session::resume_pending`]).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use rand_core::{OsRng, RngCore};
use sesame_core::{Meter, QueryKind, SchemeDescriptor, SchemeKind};
use sesame_crypto::Aes256GcmSiv;
use sesame_sse::query::{Query, QueryResult};
use sesame_sse::{KeywordClient, KeywordScheme, Multimap, UpdateOp};
use zeroize::{Zeroize, Zeroizing};

use crate::backend::Backend;
use crate::collect::{self, NewFile};
use crate::doc_service::{DocClient, DocId};
use crate::error::{ClientError, Result};
use crate::intents::{Intent, IntentFiles, IntentOp};
use crate::lock::ProfileLock;
use crate::profile::{find_scheme, new_client, Profile};
use crate::state::{DocumentInfo, IndexState, PendingRef, StateCipher};
use crate::tokenize::{query_keyword, tokenize_bytes};

/// Documents per pending intent of a dynamic scheme's updates.
const INTENT_DOCS: usize = 64;
/// Bytes of requests per pending intent (one document's requests may be
/// more: they are saved and sent together, in calls under the limit).
const INTENT_BYTES: usize = 1 << 20;
/// Documents whose keywords `check` searches for.
const CHECK_PROBES: usize = 32;

/// What a long operation is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Reading and tokenizing the new files.
    Reading,
    /// Encrypting and storing the new documents.
    Storing,
    /// Fetching and decrypting stored documents (a static index's rebuild,
    /// the keywords of documents to delete, a check).
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
    pub kind: QueryKind,
    /// Matching documents: best first for ranked queries, else by
    /// identifier.
    pub documents: Vec<DocumentInfo>,
    /// For ranked queries, the score of each document; empty otherwise.
    pub scores: Vec<f64>,
    /// Candidates the server returned that did not match after decryption
    /// (false positives of filter-based schemes), removed.
    pub false_positives_removed: usize,
}

/// What [`Session::add_documents`] did. `add` is a sync: a file whose path
/// and content the index already holds is skipped; a file whose content
/// changed replaces its old version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddReport {
    /// New documents (paths the index did not hold), with their new
    /// identifiers.
    pub added: Vec<DocumentInfo>,
    /// New versions of changed files, with their new identifiers.
    pub replaced: Vec<DocumentInfo>,
    /// Documents deleted: the old versions of changed files, and extra
    /// copies of a path (left by earlier builds).
    pub removed: Vec<DocumentInfo>,
    /// Files skipped because the index holds them unchanged.
    pub unchanged: usize,
    /// Distinct keywords in the added and replaced documents.
    pub keywords: usize,
    /// (keyword, document) pairs added.
    pub pairs: usize,
    /// Whether the whole index was rebuilt ([`Session::rebuilds`]).
    pub rebuilt: bool,
    /// Documents in the index afterwards.
    pub indexed: usize,
    /// Documents of an earlier, interrupted command that this one
    /// completed first.
    pub resumed: usize,
}

/// What [`Session::remove_documents`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveReport {
    /// The documents removed.
    pub removed: Vec<DocumentInfo>,
    /// Whether the scheme deleted their entries from the index; when it
    /// cannot (schemes without deletion), the entries stay on the server
    /// and the client no longer shows the documents.
    pub index_entries_deleted: bool,
    /// Whether the whole index was rebuilt ([`Session::rebuilds`]).
    pub rebuilt: bool,
    /// Documents in the index afterwards.
    pub indexed: usize,
}

/// What [`Session::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Documents in the catalog.
    pub documents: usize,
    /// Documents fetched, decrypted and compared with their recorded hash.
    pub verified: usize,
    /// Searches made to check that documents are found by their keywords.
    pub searches: usize,
    /// Interrupted operations completed before the check.
    pub resumed: usize,
    /// What is wrong, one line each; empty when the profile is sound.
    pub problems: Vec<String>,
}

/// A file to add, read and hashed.
struct Incoming {
    file: NewFile,
    keywords: Vec<String>,
    digest: [u8; 32],
}

/// The documents an update adds and removes, grouped so that a changed
/// file's old and new versions go in the same intent.
struct Group {
    removes: Vec<(DocumentInfo, Vec<String>)>,
    add: Option<(DocumentInfo, Vec<String>)>,
}

/// The intent being filled by an update.
#[derive(Default)]
struct Batch {
    requests: Vec<Vec<u8>>,
    add: Vec<DocumentInfo>,
    remove: Vec<DocId>,
    bytes: usize,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// A session on one index of a profile.
///
/// It holds the profile lock for as long as it lives. Every operation that
/// changes the client state writes it (encrypted, atomically) before it
/// returns.
pub struct Session {
    pub(crate) index: String,
    pub(crate) profile_id: String,
    profile_dir: PathBuf,
    state_path: PathBuf,
    cipher: StateCipher,
    pub(crate) docs: Aes256GcmSiv,
    scheme: KeywordScheme,
    pub(crate) state: IndexState,
    client: Box<dyn KeywordClient>,
    pub(crate) backend: Box<dyn Backend>,
    pub(crate) rng: OsRng,
    intents: IntentFiles,
    /// The server's message limit, if it has one.
    pub(crate) max_message: Option<usize>,
    _lock: ProfileLock,
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
        lock: ProfileLock,
    ) -> Result<Session> {
        let scheme = find_scheme(&state.scheme)?;
        Self::with_scheme(profile, index, state, backend, scheme, lock)
    }

    /// As [`Session::new`], with the scheme given rather than looked up.
    fn with_scheme(
        profile: &Profile,
        index: &str,
        state: IndexState,
        mut backend: Box<dyn Backend>,
        scheme: KeywordScheme,
        lock: ProfileLock,
    ) -> Result<Session> {
        let state_path = profile.state_path(index);
        let client =
            (scheme.restore_client)(&state.client).map_err(|_| ClientError::StateCorrupt {
                index: index.to_owned(),
                path: state_path.clone(),
            })?;
        let max_message = backend.max_message()?;
        let mut session = Session {
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
            intents: profile.intent_files(index),
            max_message,
            _lock: lock,
        };
        session.adopt_legacy_intents()?;
        let keep: Vec<[u8; 16]> = session.state.pending.iter().map(|p| p.id).collect();
        session.intents.sweep(&keep);
        Ok(session)
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

    /// Whether a change rebuilds the whole index ([`AddReport::rebuilt`]):
    /// static schemes, and dynamic schemes whose updates cannot be
    /// prepared ahead of sending them (SDa, SDd, KPR12 read the server
    /// between their writes), which the session keeps crash-safe this way.
    pub fn rebuilds(&self) -> bool {
        self.is_static() || !self.client.prepares_updates()
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

    /// Documents waiting in operations saved but not completed.
    pub fn pending_documents(&self) -> usize {
        self.state
            .pending
            .iter()
            .map(|p| p.documents as usize)
            .sum()
    }

    // ---- adding and removing ------------------------------------------

    /// Syncs files and directories (walked recursively) into the index.
    ///
    /// Every file is read (and its size checked against what the store
    /// accepts) before anything is saved or sent, so a missing, unreadable
    /// or too large file changes nothing. Then, per file: a path the index
    /// holds with the same content (SHA-256) is skipped; a path it holds
    /// with other content is replaced (the new version gets a fresh
    /// identifier, the old one is deleted through the scheme's deletion
    /// in the same operation); a new path is added. A dynamic scheme sends
    /// updates; a static scheme rebuilds the whole index with fresh keys
    /// ([`AddReport::rebuilt`]). Interrupted at any point, the same command
    /// run again completes the work and adds every file exactly once.
    /// `progress` hears of each step.
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
        let incoming = self.read_files(&files, progress)?;

        let mut report = AddReport {
            resumed: self.recover()?,
            ..AddReport::default()
        };

        // Compare with the catalog: skip, replace or add.
        let mut fresh: Vec<(Incoming, bool)> = Vec::new();
        let mut removes: Vec<DocumentInfo> = Vec::new();
        for item in incoming {
            let path = item.file.path.to_string_lossy().into_owned();
            let existing: Vec<DocumentInfo> = self
                .state
                .documents_at(&path)
                .into_iter()
                .cloned()
                .collect();
            let mut kept = false;
            for doc in existing.iter() {
                let same = !kept && self.stored_digest(doc).ok() == Some(item.digest);
                if same {
                    kept = true;
                } else {
                    removes.push(doc.clone());
                }
            }
            if kept {
                report.unchanged += 1;
            } else {
                fresh.push((item, !existing.is_empty()));
            }
        }
        report.removed.clone_from(&removes);
        if fresh.is_empty() && removes.is_empty() {
            report.indexed = self.state.catalog.len();
            return Ok(report);
        }

        // Reserve the identifiers first: whatever happens next they are
        // never handed out again, and an interrupted run's documents are
        // cleaned up by the next command.
        let mut next = self.state.next_doc;
        let mut ids = Vec::with_capacity(fresh.len());
        for _ in &fresh {
            ids.push(next);
            next = next
                .checked_add(1)
                .filter(|&n| n < sesame_sse::common::PAD)
                .ok_or_else(|| {
                    ClientError::InvalidArgument("document identifiers exhausted".into())
                })?;
        }
        self.state.next_doc = next;
        self.state.reserved.clone_from(&ids);
        self.save()?;

        let to_store: Vec<(DocId, &NewFile)> = ids
            .iter()
            .zip(&fresh)
            .map(|(id, (item, _))| (*id, &item.file))
            .collect();
        self.store_documents(&to_store, progress)?;

        let mut distinct = BTreeSet::new();
        let mut adds = Vec::with_capacity(fresh.len());
        for (id, (item, replaces)) in ids.into_iter().zip(fresh) {
            let info = DocumentInfo {
                id,
                path: item.file.path.to_string_lossy().into_owned(),
                size: item.file.content.len() as u64,
                digest: Some(item.digest),
            };
            report.pairs += item.keywords.len();
            distinct.extend(item.keywords.iter().cloned());
            if replaces {
                report.replaced.push(info.clone());
            } else {
                report.added.push(info.clone());
            }
            adds.push((info, item.keywords));
        }
        report.keywords = distinct.len();

        if self.rebuilds() {
            self.rebuild(adds, &removes, progress)?;
            report.rebuilt = true;
        } else {
            self.update(adds, removes, progress)?;
        }
        self.state.reserved.clear();
        self.save()?;
        let _ = self.collect_garbage();
        report.indexed = self.state.catalog.len();
        Ok(report)
    }

    /// Reads, tokenizes and hashes the files, refusing any that is larger
    /// than a document may be here. One worker thread per core takes the
    /// next file while this thread reports progress and puts the results
    /// back in order; the first failing file in order is the error, as if
    /// they had been read one by one.
    fn read_files(
        &mut self,
        files: &[PathBuf],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Incoming>> {
        // The same file named twice is added once.
        let mut seen = HashSet::new();
        let work: Vec<(&PathBuf, u64)> = files
            .iter()
            .filter(|p| seen.insert(*p))
            .map(|p| (p, self.max_document(&p.to_string_lossy())))
            .collect();
        let total = work.len() as u64;
        progress(Progress {
            phase: Phase::Reading,
            done: 0,
            total,
        });
        let workers = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, 8)
            .min(work.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut slots: Vec<Option<Result<Incoming>>> = (0..work.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Incoming>)>();
            for _ in 0..workers {
                let tx = tx.clone();
                let (next, work) = (&next, &work);
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(path, max)) = work.get(i) else {
                        break;
                    };
                    let read = collect::read_file(path, max).map(|file| {
                        let keywords = tokenize_bytes(&file.content);
                        let digest = sesame_crypto::hash::sha256(&file.content);
                        Incoming {
                            file,
                            keywords,
                            digest,
                        }
                    });
                    if tx.send((i, read)).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            for (done, (i, read)) in rx.into_iter().enumerate() {
                if let Some(slot) = slots.get_mut(i) {
                    *slot = Some(read);
                }
                progress(Progress {
                    phase: Phase::Reading,
                    done: done as u64 + 1,
                    total,
                });
            }
        });
        slots
            .into_iter()
            .map(|s| {
                s.unwrap_or_else(|| {
                    Err(ClientError::InvalidArgument(
                        "a file was not read (a reading thread stopped)".into(),
                    ))
                })
            })
            .collect()
    }

    /// Removes documents, each named by its identifier or by the path it
    /// was added from (every document of that path). A name that matches
    /// no document is an error before anything changes. Dynamic schemes
    /// with deletion delete the documents' pairs from the index; static
    /// schemes rebuild without them; schemes without deletion leave their
    /// entries on the server and forget the documents on the client. The
    /// stored documents are deleted in every case.
    pub fn remove_documents(&mut self, names: &[String]) -> Result<RemoveReport> {
        self.recover()?;
        let mut ids = BTreeSet::new();
        for name in names {
            let by_id = name
                .trim()
                .parse::<DocId>()
                .ok()
                .filter(|id| self.state.catalog.contains_key(id));
            match by_id {
                Some(id) => {
                    ids.insert(id);
                }
                None => {
                    let at: Vec<DocId> =
                        self.state.documents_at(name).iter().map(|d| d.id).collect();
                    if at.is_empty() {
                        return Err(ClientError::NotInIndex(name.clone()));
                    }
                    ids.extend(at);
                }
            }
        }
        let removes: Vec<DocumentInfo> = ids
            .iter()
            .filter_map(|id| self.state.catalog.get(id).cloned())
            .collect();
        let mut report = RemoveReport {
            removed: removes.clone(),
            ..RemoveReport::default()
        };
        if self.rebuilds() {
            self.rebuild(Vec::new(), &removes, &mut |_| {})?;
            report.rebuilt = true;
            report.index_entries_deleted = true;
        } else {
            report.index_entries_deleted = self.client.supports_deletion();
            self.update(Vec::new(), removes, &mut |_| {})?;
        }
        let _ = self.collect_garbage();
        report.indexed = self.state.catalog.len();
        Ok(report)
    }

    // ---- completing interrupted operations ----------------------------

    /// Completes, in order, the operations an interrupted command saved
    /// but did not finish (their requests are sent again; the server
    /// applies each once), and deletes the stored documents an
    /// interrupted add left without an index entry. Returns the documents
    /// completed. Every command on the index calls it first.
    pub fn resume_pending(&mut self) -> Result<usize> {
        self.recover()
    }

    /// Moves the index to fresh keys: a fresh scheme client (new random
    /// scheme keys) builds a new generation of the index from the stored
    /// documents (fetched, decrypted, tokenized again), the state switches
    /// to it in one atomic write, and the old generation is dropped after.
    /// Interrupted operations are completed first. A crash before the
    /// switch leaves the old index in use (the next rebuild drops the
    /// remnants); a crash after it leaves only old remnants. Running it
    /// again simply makes another generation. Works for every scheme; the
    /// document key and the profile's master key are not changed (see
    /// [`crate::Profile::change_passphrase`]). Returns the documents
    /// re-indexed.
    pub fn rekey(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<usize> {
        self.recover()?;
        self.rebuild(Vec::new(), &[], progress)?;
        Ok(self.state.catalog.len())
    }

    /// The index's generation (each rebuild or rekey makes a new one).
    pub fn generation(&self) -> u64 {
        self.state.generation
    }

    fn recover(&mut self) -> Result<usize> {
        let mut done = 0;
        while let Some(pending) = self.state.pending.first().copied() {
            let intent = self.intents.load(&pending.id)?;
            if let IntentOp::Update { add, .. } = &intent.op {
                done += add.len();
            }
            self.complete_intent(intent)?;
        }
        if !self.state.reserved.is_empty() {
            let catalog = &self.state.catalog;
            let orphans: Vec<DocId> = self
                .state
                .reserved
                .iter()
                .copied()
                .filter(|id| !catalog.contains_key(id))
                .collect();
            self.state.garbage.extend(orphans);
            self.state.reserved.clear();
            self.save()?;
        }
        // Deleting left-over documents may fail (a full disk): that must
        // not stop searches; they stay listed and go next time.
        let _ = self.collect_garbage();
        Ok(done)
    }

    /// Writes format-2 intents (kept inside the state) as intent files.
    fn adopt_legacy_intents(&mut self) -> Result<()> {
        if self.state.legacy.is_empty() {
            return Ok(());
        }
        for legacy in std::mem::take(&mut self.state.legacy) {
            let intent = Intent {
                id: legacy.id,
                generation: legacy.generation,
                requests: legacy.requests,
                op: IntentOp::Update {
                    add: legacy.documents,
                    remove: Vec::new(),
                },
            };
            self.intents.save(&mut self.rng, &intent)?;
            self.state.pending.push(PendingRef {
                id: intent.id,
                documents: intent.documents(),
            });
        }
        self.save()
    }

    /// Saves `intent` and the client state that follows it: the intent's
    /// file first, then the state that refers to it (one atomic rename).
    /// On failure the client goes back to the last saved state.
    fn persist_intent(&mut self, intent: &Intent) -> Result<()> {
        let saved = (|| {
            self.intents.save(&mut self.rng, intent)?;
            let after = self.client.save_state()?;
            let before = std::mem::replace(&mut self.state.client, after);
            self.state.pending.push(PendingRef {
                id: intent.id,
                documents: intent.documents(),
            });
            match self.save() {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.state.pending.pop();
                    let mut after = std::mem::replace(&mut self.state.client, before);
                    after.zeroize();
                    Err(e)
                }
            }
        })();
        if saved.is_err() {
            self.intents.remove(&intent.id);
            self.reload_client()?;
        }
        saved
    }

    /// Sends a saved intent (again, after an interruption) and completes
    /// it: the catalog changes of an update, the result of a search.
    fn complete_intent(&mut self, intent: Intent) -> Result<Option<QueryResult>> {
        let responses = if intent.requests.is_empty() {
            Vec::new()
        } else {
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
                    if responses.len() == intent.requests.len() {
                        Ok(responses)
                    } else {
                        Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                            "sent {} requests, got {} answers",
                            intent.requests.len(),
                            responses.len()
                        ))))
                    }
                });
            sent.map_err(|cause| ClientError::Unacknowledged {
                documents: self.pending_documents(),
                cause: Box::new(cause),
            })?
        };
        let result = match &intent.op {
            IntentOp::Update { add, remove } => {
                for r in &responses {
                    self.client.check_update_response(r)?;
                }
                for d in add {
                    self.state.catalog.insert(d.id, d.clone());
                }
                for id in remove {
                    self.state.catalog.remove(id);
                }
                self.state.garbage.extend(remove.iter().copied());
                None
            }
            IntentOp::Search { query, context } => {
                let result = self
                    .client
                    .resolve_query(&query.query(), context, &responses)?;
                let after = self.client.save_state()?;
                let mut before = std::mem::replace(&mut self.state.client, after);
                before.zeroize();
                Some(result)
            }
        };
        self.state.pending.retain(|p| p.id != intent.id);
        self.save()?;
        self.intents.remove(&intent.id);
        // The kept answers are no longer needed; if forgetting fails they
        // only take room.
        let _ = self.backend.forget(&self.index, intent.id);
        Ok(result)
    }

    /// Brings the scheme client back to the last saved state (after a
    /// preparation that was not saved).
    fn reload_client(&mut self) -> Result<()> {
        self.client = (self.scheme.restore_client)(&self.state.client).map_err(|_| {
            ClientError::StateCorrupt {
                index: self.index.clone(),
                path: self.state_path.clone(),
            }
        })?;
        Ok(())
    }

    /// Refuses prepared requests that no message to the server can carry.
    fn check_sizes(&self, requests: &[Vec<u8>]) -> Result<()> {
        let Some(max) = self.max_message.map(crate::network::max_request) else {
            return Ok(());
        };
        match requests.iter().find(|r| r.len() > max) {
            Some(r) => Err(ClientError::TooLarge {
                what: format!("a request of scheme {}", self.scheme.descriptor.name),
                size: r.len() as u64,
                max: max as u64,
            }),
            None => Ok(()),
        }
    }

    // ---- dynamic updates ----------------------------------------------

    /// Dynamic schemes: adds and removes documents through pending
    /// intents of up to [`INTENT_DOCS`] documents or [`INTENT_BYTES`] of
    /// requests; a changed file's old and new versions go in the same
    /// intent. On an error before an intent is saved, the client goes back
    /// to its last saved state (nothing unsaved was sent).
    fn update(
        &mut self,
        adds: Vec<(DocumentInfo, Vec<String>)>,
        removes: Vec<DocumentInfo>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let deletes = self.client.supports_deletion();
        let mut remove_keywords = Vec::with_capacity(removes.len());
        if deletes && !removes.is_empty() {
            // A document that cannot be read back (missing, damaged) can
            // only be forgotten on the client.
            self.fetch_documents(&removes, Phase::Fetching, progress, &mut |_, record| {
                remove_keywords.push(match record {
                    Ok(r) => tokenize_bytes(&r.content),
                    Err(_) => Vec::new(),
                });
                Ok(())
            })?;
        } else {
            remove_keywords.resize(removes.len(), Vec::new());
        }
        let mut removes: Vec<(DocumentInfo, Vec<String>)> =
            removes.into_iter().zip(remove_keywords).collect();
        let mut groups = Vec::with_capacity(adds.len() + removes.len());
        for (info, keywords) in adds {
            let (same, rest): (Vec<_>, Vec<_>) =
                removes.into_iter().partition(|(d, _)| d.path == info.path);
            removes = rest;
            groups.push(Group {
                removes: same,
                add: Some((info, keywords)),
            });
        }
        for r in removes {
            groups.push(Group {
                removes: vec![r],
                add: None,
            });
        }
        let done = self.update_groups(groups, progress);
        if done.is_err() {
            self.reload_client()?;
        }
        done
    }

    fn update_groups(
        &mut self,
        groups: Vec<Group>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let total = groups.len() as u64;
        let mut batch = Batch::default();
        for (i, group) in groups.into_iter().enumerate() {
            progress(Progress {
                phase: Phase::Indexing,
                done: i as u64,
                total,
            });
            for (doc, keywords) in group.removes {
                if !keywords.is_empty() && self.client.supports_deletion() {
                    self.prepare(&mut batch, UpdateOp::Delete, doc.id, keywords)?;
                }
                batch.remove.push(doc.id);
            }
            if let Some((info, keywords)) = group.add {
                if !keywords.is_empty() {
                    self.prepare(&mut batch, UpdateOp::Add, info.id, keywords)?;
                }
                batch.add.push(info);
            }
            if batch.add.len() + batch.remove.len() >= INTENT_DOCS || batch.bytes >= INTENT_BYTES {
                self.flush(&mut batch)?;
            }
        }
        self.flush(&mut batch)?;
        progress(Progress {
            phase: Phase::Indexing,
            done: total,
            total,
        });
        Ok(())
    }

    /// Adds the requests of one document's update to `batch`. A scheme
    /// whose updates read the server first gets the server up to date
    /// (the batch is sent) before it reads.
    fn prepare(
        &mut self,
        batch: &mut Batch,
        op: UpdateOp,
        doc: DocId,
        keywords: Vec<String>,
    ) -> Result<()> {
        let words: Vec<Vec<u8>> = keywords.into_iter().map(String::into_bytes).collect();
        let requests = match self.client.prepare_update(&mut self.rng, op, doc, &words)? {
            Some(r) => r,
            None => {
                self.flush(batch)?;
                let mut channel =
                    self.backend
                        .read_channel(&self.index, self.state.generation, &self.scheme)?;
                self.client
                    .prepare_update_interactive(&mut self.rng, channel.as_mut(), op, doc, &words)?
                    .ok_or_else(|| {
                        ClientError::Core(sesame_core::Error::Unsupported(format!(
                            "{} cannot update its index",
                            self.scheme.descriptor.name
                        )))
                    })?
            }
        };
        self.check_sizes(&requests)?;
        batch.bytes += requests.iter().map(Vec::len).sum::<usize>();
        batch.requests.extend(requests);
        Ok(())
    }

    /// Saves the batch as a pending intent with the client state that
    /// produced it, sends it, and completes it.
    fn flush(&mut self, batch: &mut Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let taken = std::mem::take(batch);
        let mut id = [0u8; 16];
        self.rng.fill_bytes(&mut id);
        let intent = Intent {
            id,
            generation: self.state.generation,
            requests: taken.requests,
            op: IntentOp::Update {
                add: taken.add,
                remove: taken.remove,
            },
        };
        self.persist_intent(&intent)?;
        self.complete_intent(intent).map(drop)
    }

    // ---- static rebuilds ----------------------------------------------

    /// Static schemes: a fresh client (fresh keys) builds a new generation
    /// of the index over every document but `removes`, and `adds`; the
    /// state switches to it in one atomic write; the old generation is
    /// dropped, and so are the removed documents.
    fn rebuild(
        &mut self,
        adds: Vec<(DocumentInfo, Vec<String>)>,
        removes: &[DocumentInfo],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let gone: HashSet<DocId> = removes.iter().map(|d| d.id).collect();
        let kept: Vec<DocumentInfo> = self
            .state
            .catalog
            .values()
            .filter(|d| !gone.contains(&d.id))
            .cloned()
            .collect();
        let mut db = Multimap::new();
        let insert = |db: &mut Multimap, id: DocId, keywords: Vec<String>| {
            for w in keywords {
                db.entry(w.into_bytes()).or_default().push(id);
            }
        };
        for (doc, keywords) in kept.iter().zip(self.stored_keywords(&kept, progress)?) {
            insert(&mut db, doc.id, keywords);
        }
        let mut added = Vec::with_capacity(adds.len());
        for (info, keywords) in adds {
            insert(&mut db, info.id, keywords);
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
        for id in &gone {
            self.state.catalog.remove(id);
        }
        self.state.garbage.extend(gone);
        self.state.reserved.clear();
        self.client = client;
        self.save()?;
        // Left-overs of an earlier failure go too; if this fails, the next
        // rebuild removes them.
        let _ = self.backend.drop_other_generations(&self.index, generation);
        Ok(())
    }

    // ---- searching ----------------------------------------------------

    /// Answers a query of any kind ([`crate::parse_query`]: `word`,
    /// `abc*`, `a?c*`, `a b c`, `top:K a b`).
    ///
    /// A kind the index's scheme does not answer is
    /// [`ClientError::UnsupportedQuery`], before anything is sent. Ranked
    /// answers come best first, with their scores; the others by
    /// identifier. Candidates a filter-based scheme returned that did not
    /// match after decryption are removed and counted. A search that
    /// writes on the server (some schemes re-key or refresh on search) is
    /// a pending intent like an update: interrupted, it is completed by the
    /// next command.
    pub fn query(&mut self, text: &str) -> Result<QueryHits> {
        let query = crate::tokenize::parse_query(text)?;
        self.answer(&query)
    }

    /// The documents containing `keyword`, by identifier.
    ///
    /// The query goes through the document tokenizer: it must hold exactly
    /// one keyword (`"Größe"` finds documents holding "größe").
    pub fn search(&mut self, keyword: &str) -> Result<Vec<DocumentInfo>> {
        let word = query_keyword(keyword)?;
        Ok(self.answer(&Query::Exact(word.into_bytes()))?.documents)
    }

    fn answer(&mut self, query: &Query) -> Result<QueryHits> {
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
        self.recover()?;
        if self.state.catalog.is_empty() {
            return Ok(QueryHits {
                kind,
                documents: Vec::new(),
                scores: Vec::new(),
                false_positives_removed: 0,
            });
        }
        let result = self.run_query(query)?;
        let mut documents = Vec::with_capacity(result.ids.len());
        let mut scores = Vec::new();
        for (i, id) in result.ids.iter().enumerate() {
            // An identifier the catalog lacks belongs to a document that
            // was removed (schemes without deletion) or never completed.
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

    fn run_query(&mut self, query: &Query) -> Result<QueryResult> {
        if self.client.search_writes() {
            let mut channel =
                self.backend
                    .index_channel(&self.index, self.state.generation, &self.scheme)?;
            self.client.initialise_server(channel.as_mut())?;
            drop(channel);
            let mut channel =
                self.backend
                    .read_channel(&self.index, self.state.generation, &self.scheme)?;
            let prepared = self
                .client
                .prepare_query(&mut self.rng, channel.as_mut(), query)
                .map_err(ClientError::from)
                .and_then(|p| self.check_sizes(&p.requests).map(|()| p));
            drop(channel);
            let prepared = match prepared {
                Ok(p) => p,
                Err(e) => {
                    self.reload_client()?;
                    return Err(e);
                }
            };
            let mut id = [0u8; 16];
            self.rng.fill_bytes(&mut id);
            let intent = Intent {
                id,
                generation: self.state.generation,
                requests: prepared.requests.clone(),
                op: IntentOp::Search {
                    query: query.into(),
                    context: prepared.context.clone(),
                },
            };
            self.persist_intent(&intent)?;
            return self.complete_intent(intent)?.ok_or_else(|| {
                ClientError::Core(sesame_core::Error::Protocol(
                    "a search completed without a result".into(),
                ))
            });
        }
        let mut channel =
            self.backend
                .index_channel(&self.index, self.state.generation, &self.scheme)?;
        let result = self.client.query(&mut self.rng, channel.as_mut(), query)?;
        // A scheme that says its search writes nothing keeps the same
        // state; should it change anyway, the new state is kept.
        let after = Zeroizing::new(self.client.save_state()?);
        if *after != self.state.client {
            self.state.client.zeroize();
            self.state.client = after.to_vec();
            self.save()?;
        }
        Ok(result)
    }

    // ---- reading and checking -----------------------------------------

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

    /// Checks the index: completes interrupted operations, checks the
    /// store for damage it can detect, fetches and decrypts every document
    /// (and compares it with its recorded hash), compares the stored
    /// documents with the catalog, and searches for keywords of up to
    /// [`CHECK_PROBES`] documents (spread over the catalog) to see that
    /// each is found. Schemes whose search writes are not probed (a check
    /// changes nothing). Problems are returned, one line each; an `Err` is
    /// a check that could not run at all.
    pub fn check(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<CheckReport> {
        let mut report = CheckReport {
            documents: self.state.catalog.len(),
            ..CheckReport::default()
        };
        match self.recover() {
            Ok(n) => report.resumed = n,
            Err(e) => report
                .problems
                .push(format!("an interrupted operation cannot be completed: {e}")),
        }
        if let Err(e) = self.backend.verify() {
            report.problems.push(format!("the store: {e}"));
        }
        let mut channel = self.backend.document_channel(&self.index)?;
        let stored: HashSet<DocId> = DocClient::list(channel.as_mut())?.into_iter().collect();
        drop(channel);
        let extra = stored
            .iter()
            .filter(|id| !self.state.catalog.contains_key(id))
            .count();
        if extra > 0 {
            report.problems.push(format!(
                "{extra} stored document(s) belong to no document of the index"
            ));
        }
        let docs = self.documents();
        let step = (docs.len() / CHECK_PROBES).max(1);
        let mut probes: Vec<(DocId, Vec<String>)> = Vec::new();
        let mut problems = Vec::new();
        let mut verified = 0;
        let mut position = 0usize;
        self.fetch_documents(&docs, Phase::Fetching, progress, &mut |doc, record| {
            position += 1;
            match record {
                Ok(r) => {
                    let digest = sesame_crypto::hash::sha256(&r.content);
                    if doc.digest.is_some_and(|d| d != digest) {
                        problems.push(format!(
                            "document {} ({}) does not hold what was added",
                            doc.id, doc.path
                        ));
                    } else {
                        verified += 1;
                    }
                    if (position - 1).is_multiple_of(step) && probes.len() < CHECK_PROBES {
                        let words = tokenize_bytes(&r.content);
                        let pick: Vec<String> = [0, words.len() / 2, words.len().saturating_sub(1)]
                            .iter()
                            .filter_map(|&i| words.get(i).cloned())
                            .collect::<BTreeSet<_>>()
                            .into_iter()
                            .collect();
                        probes.push((doc.id, pick));
                    }
                }
                Err(e) => problems.push(format!("document {} ({}): {e}", doc.id, doc.path)),
            }
            Ok(())
        })?;
        report.verified = verified;
        report.problems.extend(problems);
        if !self.client.search_writes() {
            for (id, words) in probes {
                for w in words {
                    report.searches += 1;
                    let found = self
                        .run_query(&Query::Exact(w.clone().into_bytes()))
                        .map(|r| r.ids.contains(&id));
                    match found {
                        Ok(true) => {}
                        Ok(false) => report.problems.push(format!(
                            "a search for {w:?} does not find document {id}, which holds it"
                        )),
                        Err(e) => report.problems.push(format!("a search for {w:?}: {e}")),
                    }
                }
            }
        }
        Ok(report)
    }

    pub(crate) fn save(&mut self) -> Result<()> {
        self.cipher
            .save(&mut self.rng, &self.state_path, &self.index, &self.state)
    }
}

#[cfg(test)]
mod tests {
    //! The dynamic path, with a toy plaintext dynamic scheme (no dynamic
    //! scheme is registered yet).

    use std::sync::Arc;

    use serde::{Deserialize, Serialize};

    use rand_core::CryptoRngCore;
    use sesame_core::{
        channel, wire, BackwardPrivacy, Channel, Handler, IoCounts, Params, QueryKind,
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
        fn prepares_updates(&self) -> bool {
            true
        }

        fn prepare_update(
            &mut self,
            _: &mut dyn CryptoRngCore,
            op: UpdateOp,
            doc: DocId,
            words: &[Vec<u8>],
        ) -> CoreResult<Option<Vec<Vec<u8>>>> {
            assert_eq!(op, UpdateOp::Add);
            self.updates += 1;
            Ok(Some(vec![wire::encode(&Req::Add(doc, words.to_vec()))?]))
        }
        fn check_update_response(&self, response: &[u8]) -> CoreResult<()> {
            wire::decode::<Vec<DocId>>(response).map(drop)
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
            new_server: Some(|store, _| Ok(Box::new(Typed(ToyServer(store))))),
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
        profile.save_state(&mut OsRng, "toy", &state).unwrap();
        let lock = profile.lock("toy").unwrap();
        let mut s = Session::with_scheme(&profile, "toy", state, backend, toy(), lock).unwrap();
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
        let lock = profile.lock("toy").unwrap();
        let mut s = Session::with_scheme(&profile, "toy", state, backend, toy(), lock).unwrap();
        assert_eq!(ids(s.search("fox").unwrap()), [1]);
    }
}
