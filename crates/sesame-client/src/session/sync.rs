//! Adding and removing documents: a dynamic scheme's updates as pending
//! intents, a static scheme's rebuilds as new generations, and rekeying.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_core::RngCore;
use sesame_sse::{Multimap, UpdateOp};
use zeroize::Zeroize;

use crate::collect::{self, NewFile};
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::intents::{Intent, IntentOp};
use crate::scheme::new_client;
use crate::state::{digest_matches, DocumentInfo};
use crate::stored::StoredGate;
use crate::tokenize::tokenize_bytes;

/// Documents whose keywords `check` searches for.
use super::*;

impl Session {
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
        self.sync_incoming(incoming, false, progress)
    }

    /// Syncs named items whose keywords the caller gives (the records of
    /// a table): as [`Session::add_documents`] does for files, an item
    /// whose name the index holds with the same content is skipped, one
    /// with other content replaces the old, a new name is added, and an
    /// interrupted call run again adds each item exactly once. The
    /// session's keyword extractor must give the same keywords for the
    /// content (it is what deletions and rebuilds use). With `new_names`
    /// the caller vouches that the index holds none of the items' names
    /// (a first import into an empty table): the pass over the catalog
    /// that finds the names it holds is skipped, unless the index is
    /// shared or a pending operation was completed first.
    pub(crate) fn put_items(
        &mut self,
        items: Vec<Item>,
        new_names: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<AddReport> {
        let mut incoming = Vec::with_capacity(items.len());
        for item in items {
            let max = self.max_document(&item.name);
            if item.content.len() as u64 > max {
                return Err(ClientError::DocumentTooLarge {
                    path: PathBuf::from(&item.name),
                    size: item.content.len() as u64,
                    max,
                });
            }
            let digest = sesame_crypto::hash::sha256(&item.content);
            incoming.push(Incoming {
                file: NewFile {
                    path: PathBuf::from(item.name),
                    content: item.content,
                },
                keywords: item.keywords,
                digest,
            });
        }
        self.sync_incoming(incoming, new_names, progress)
    }

    /// Runs the sync; with a shared state, again from the start when
    /// another device changed the index under it (what the first attempt
    /// completed shows as unchanged in the report of the next).
    fn sync_incoming(
        &mut self,
        incoming: Vec<Incoming>,
        new_names: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<AddReport> {
        if !self.is_shared() {
            return self.sync_once(incoming, new_names, progress);
        }
        self.shared_op(|s| s.sync_once(incoming.clone(), false, progress))
    }

    fn sync_once(
        &mut self,
        incoming: Vec<Incoming>,
        new_names: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<AddReport> {
        let mut report = AddReport {
            resumed: self.recover()?,
            ..AddReport::default()
        };

        // Compare with the catalog: skip, replace or add.
        // One pass over the catalog, keeping the entries of these paths
        // only (the catalog may be far larger than memory holds); none
        // when the caller vouches that the names are new.
        let paths: Vec<String> = incoming
            .iter()
            .map(|item| item.file.path.to_string_lossy().into_owned())
            .collect();
        let mut by_path: HashMap<String, Vec<DocumentInfo>> = HashMap::new();
        let held = if new_names && report.resumed == 0 {
            Vec::new()
        } else {
            self.state
                .catalog
                .with_paths(&paths.iter().map(String::as_str).collect())?
        };
        for doc in held {
            by_path.entry(doc.path.clone()).or_default().push(doc);
        }
        let current: Vec<Vec<DocumentInfo>> = paths
            .iter()
            .map(|p| by_path.get(p).cloned().unwrap_or_default())
            .collect();
        drop(by_path);
        let mut fresh: Vec<(Incoming, bool)> = Vec::new();
        let mut removes: Vec<DocumentInfo> = Vec::new();
        for (item, existing) in incoming.into_iter().zip(current) {
            let mut kept = false;
            for doc in existing.iter() {
                let same = !kept
                    && self
                        .stored_digest(doc)
                        .is_ok_and(|d| digest_matches(&d, &item.digest));
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
        let ids = self.reserve_ids(fresh.len())?;

        let (files, fresh): (Vec<NewFile>, Vec<_>) = fresh
            .into_iter()
            .map(|(item, replaces)| (item.file, (item.keywords, item.digest, replaces)))
            .unzip();
        let to_store: Vec<(DocId, &NewFile)> = ids.iter().copied().zip(&files).collect();
        let mut adds = Vec::with_capacity(fresh.len());
        for ((id, file), (keywords, digest, replaces)) in ids.into_iter().zip(&files).zip(fresh) {
            let info = DocumentInfo {
                id,
                path: file.path.to_string_lossy().into_owned(),
                size: file.content.len() as u64,
                digest: Some(digest),
            };
            report.pairs += keywords.len();
            if replaces {
                report.replaced.push(info.clone());
            } else {
                report.added.push(info.clone());
            }
            adds.push((info, keywords));
        }
        report.keywords = adds
            .iter()
            .flat_map(|(_, keywords)| keywords.iter().map(String::as_str))
            .collect::<HashSet<&str>>()
            .len();

        // The documents are stored on another thread while the index is
        // built or updated. A saved intent, or a rebuilt generation the
        // state switches to, never names a document that is not stored:
        // both wait for theirs (`wait_stored`).
        let writer = self.doc_writer()?;
        let gate = Arc::new(StoredGate::default());
        progress(Progress {
            phase: Phase::Storing,
            done: 0,
            total: to_store.len() as u64,
        });
        self.stored_gate = Some(Arc::clone(&gate));
        let (stored, indexed) = std::thread::scope(|scope| {
            let storing = scope.spawn(|| {
                let stored = writer.store(&to_store, &mut |n| {
                    if let Some(&(id, _)) = n.checked_sub(1).and_then(|i| to_store.get(i)) {
                        gate.advance(id + 1);
                    }
                });
                gate.end();
                stored
            });
            let indexed = if self.rebuilds() {
                self.rebuild(adds, &removes, progress).map(|()| true)
            } else {
                self.update(adds, removes, progress).map(|()| false)
            };
            let stored = storing
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (stored, indexed)
        });
        self.stored_gate = None;
        // The storing thread's error is the cause of a wait's failure.
        stored?;
        report.rebuilt = indexed?;
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

    /// Reserves the next `n` document identifiers: saved in the state
    /// before anything is stored under them, so that they are never
    /// handed out again and an interrupted run's documents are cleaned up
    /// by the next command.
    pub(super) fn reserve_ids(&mut self, n: usize) -> Result<Vec<DocId>> {
        let first = self.state.next_doc;
        let next = first
            .checked_add(n as u64)
            .filter(|&end| n == 0 || end < sesame_sse::common::PAD)
            .ok_or_else(|| ClientError::InvalidArgument("document identifiers exhausted".into()))?;
        let ids: Vec<DocId> = (first..next).collect();
        self.state.next_doc = next;
        self.state.reserved.clone_from(&ids);
        self.save()?;
        Ok(ids)
    }

    /// Removes documents, each named by its identifier or by the path it
    /// was added from (every document of that path). A name that matches
    /// no document is an error before anything changes. Dynamic schemes
    /// with deletion delete the documents' pairs from the index; static
    /// schemes rebuild without them; schemes without deletion leave their
    /// entries on the server and forget the documents on the client. The
    /// stored documents are deleted in every case.
    pub fn remove_documents(&mut self, names: &[String]) -> Result<RemoveReport> {
        self.shared_op(|s| s.remove_once(names))
    }

    fn remove_once(&mut self, names: &[String]) -> Result<RemoveReport> {
        self.recover()?;
        let mut ids = BTreeSet::new();
        for name in names {
            let by_id = match name.trim().parse::<DocId>() {
                Ok(id) if self.state.catalog.contains_key(&id)? => Some(id),
                _ => None,
            };
            match by_id {
                Some(id) => {
                    ids.insert(id);
                }
                None => {
                    let at: Vec<DocId> = self
                        .state
                        .documents_at(name)?
                        .iter()
                        .map(|d| d.id)
                        .collect();
                    if at.is_empty() {
                        return Err(ClientError::NotInIndex(name.clone()));
                    }
                    ids.extend(at);
                }
            }
        }
        let mut removes: Vec<DocumentInfo> = Vec::new();
        for id in &ids {
            removes.extend(self.state.catalog.get(id)?);
        }
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
        self.shared_op(|s| {
            s.recover()?;
            s.rebuild(Vec::new(), &[], progress)?;
            Ok(s.state.catalog.len())
        })
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
            let extract = std::sync::Arc::clone(&self.extract);
            self.fetch_documents(&removes, Phase::Fetching, progress, &mut |_, record| {
                remove_keywords.push(match record {
                    Ok(r) => extract(&r.path, &r.content),
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
        // An update still being sent is completed either way.
        let settled = self.settle();
        let done = done.and(settled);
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
        // A scheme that gains from it prepares documents together
        // (`KeywordClient::batches_updates`): their updates wait here, and
        // are prepared before the batch is ever saved.
        let batched = self.client.batches_updates();
        let mut pending = Pending::default();
        for (i, group) in groups.into_iter().enumerate() {
            progress(Progress {
                phase: Phase::Indexing,
                done: i as u64,
                total,
            });
            for (doc, keywords) in group.removes {
                if !keywords.is_empty() && self.client.supports_deletion() {
                    if batched {
                        pending.push(UpdateOp::Delete, doc.id, keywords);
                    } else {
                        self.prepare(&mut batch, UpdateOp::Delete, doc.id, keywords)?;
                    }
                }
                batch.remove.push(doc.id);
            }
            if let Some((info, keywords)) = group.add {
                if !keywords.is_empty() {
                    if batched {
                        pending.push(UpdateOp::Add, info.id, keywords);
                    } else {
                        self.prepare(&mut batch, UpdateOp::Add, info.id, keywords)?;
                    }
                }
                batch.add.push(info);
            }
            let full = batch.add.len() + batch.remove.len() >= self.intent_docs;
            if full || pending.keywords >= BATCH_KEYWORDS {
                self.prepare_pending(&mut batch, &mut pending)?;
            }
            if pending.updates.is_empty() && (full || batch.bytes >= INTENT_BYTES) {
                self.flush_behind(&mut batch)?;
            }
        }
        self.prepare_pending(&mut batch, &mut pending)?;
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

    /// Prepares the updates waiting in `pending`, in order, with one call
    /// ([`KeywordClient::prepare_updates`]), and adds their requests to
    /// `batch`.
    fn prepare_pending(&mut self, batch: &mut Batch, pending: &mut Pending) -> Result<()> {
        if pending.updates.is_empty() {
            return Ok(());
        }
        let taken = std::mem::take(pending);
        let updates: Vec<(UpdateOp, DocId, &[Vec<u8>])> = taken
            .updates
            .iter()
            .map(|(op, doc, words)| (*op, *doc, words.as_slice()))
            .collect();
        let prepared = self
            .client
            .prepare_updates(&mut self.rng, &updates)?
            .ok_or_else(|| {
                ClientError::Core(sesame_core::Error::Unsupported(format!(
                    "{} cannot prepare its updates",
                    self.scheme.descriptor.name
                )))
            })?;
        for requests in prepared {
            self.check_sizes(&requests)?;
            batch.bytes += requests.iter().map(Vec::len).sum::<usize>();
            batch.requests.extend(requests);
        }
        Ok(())
    }

    /// Waits until the documents `ids` are stored, where an add stores
    /// them on another thread.
    fn wait_stored(&self, ids: impl Iterator<Item = DocId>) -> Result<()> {
        match (&self.stored_gate, ids.max()) {
            (Some(gate), Some(last)) => gate.wait(last),
            _ => Ok(()),
        }
    }

    /// Saves the batch as a pending intent with the client state that
    /// produced it, sends it, and completes it (after the update sent
    /// before it).
    fn flush(&mut self, batch: &mut Batch) -> Result<()> {
        // The completion of the update before is saved with this one.
        self.settle_then(batch.is_empty())?;
        match self.save_batch(batch)? {
            Some(intent) => self.complete_intent(intent).map(drop),
            None => Ok(()),
        }
    }

    /// As [`Session::flush`], but the batch is sent on another thread
    /// while the caller prepares the next one: the scheme's client work
    /// and the store's commits use both cores. The intent is saved first,
    /// with the client state that produced it, exactly as `flush` saves
    /// it; the next batch is saved only once this one is completed.
    fn flush_behind(&mut self, batch: &mut Batch) -> Result<()> {
        // The completion of the update before is saved with this one.
        self.settle_then(batch.is_empty())?;
        match self.save_batch(batch)? {
            Some(intent) => self.send_behind(intent),
            None => Ok(()),
        }
    }

    /// Saves a non-empty batch as a pending intent, once its documents
    /// are stored.
    fn save_batch(&mut self, batch: &mut Batch) -> Result<Option<Intent>> {
        if batch.is_empty() {
            return Ok(None);
        }
        self.wait_stored(batch.add.iter().map(|d| d.id))?;
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
        Ok(Some(intent))
    }

    // ---- static rebuilds ----------------------------------------------

    /// Static schemes: a fresh client (fresh keys) builds a new generation
    /// of the index over every document but `removes`, and `adds`; the
    /// state switches to it in one atomic write; the old generation is
    /// dropped, and so are the removed documents.
    pub(super) fn rebuild(
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
            .filter(|d| d.as_ref().map_or(true, |d| !gone.contains(&d.id)))
            .collect::<Result<_>>()?;
        // Gathered by hash, then sorted once into the multimap: a B-tree
        // insert per pair compared keywords about 16 times each.
        let mut db: HashMap<Vec<u8>, Vec<DocId>> = HashMap::new();
        let insert = |db: &mut HashMap<Vec<u8>, Vec<DocId>>, id: DocId, keywords: Vec<String>| {
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
        let db: Multimap = db.into_iter().collect();

        progress(Progress {
            phase: Phase::Indexing,
            done: 0,
            total: 1,
        });
        let mut client = new_client(&self.scheme, &mut self.rng, &self.state.params)?;
        let generation = self.reserve_generation()?;
        if !self.is_shared() {
            // Remnants of an earlier rebuild that did not complete go
            // first, so the new generation starts empty whatever the
            // scheme's setup does. (A shared state's generations are
            // reserved, so never built twice; and a newer one may be
            // another device's rebuild in progress.)
            self.backend
                .drop_other_generations(&self.index, self.state.generation)?;
        }
        let mut channel = self
            .backend
            .setup_channel(&self.index, generation, &self.scheme)?;
        let ch: &mut dyn sesame_core::Channel = channel.as_mut();
        client.setup(&mut self.rng, ch, &db)?;
        // Durable (and, on a server, visible) before the state switches.
        channel.commit()?;
        self.wait_stored(added.iter().map(|d| d.id))?;
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
        let _ = if self.is_shared() {
            self.backend.drop_older_generations(&self.index, generation)
        } else {
            self.backend.drop_other_generations(&self.index, generation)
        };
        Ok(())
    }
}
