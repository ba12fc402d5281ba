//! Pending intents: saved with the client state that follows them before
//! anything is sent, sent (again) until acknowledged, completed once; and
//! the resumption of what an interrupted command left.

use sesame_sse::query::QueryResult;
use zeroize::Zeroize;

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::intents::{Intent, IntentOp};
use crate::state::PendingRef;

/// Documents whose keywords `check` searches for.
use super::*;

impl Session {
    // ---- completing interrupted operations ----------------------------

    /// Completes, in order, the operations an interrupted command saved
    /// but did not finish (their requests are sent again; the server
    /// applies each once), and deletes the stored documents an
    /// interrupted add left without an index entry. Returns the documents
    /// completed. Every command on the index calls it first.
    pub fn resume_pending(&mut self) -> Result<usize> {
        self.shared_op(Self::recover)
    }

    /// As [`Session::resume_pending`], for a read
    /// ([`Session::recover_for_read`]): returns the documents still
    /// pending because they cannot be sent, which the read answers
    /// without.
    pub(crate) fn resume_pending_for_read(&mut self) -> Result<usize> {
        self.shared_op(|s| {
            s.recover_for_read()
                .map(|(_, committed)| committed.map_or(0, |c| c.pending))
        })
    }

    pub(super) fn recover(&mut self) -> Result<usize> {
        let mut done = 0;
        while let Some(pending) = self.state.pending.first().copied() {
            let intent = self.load_intent(&pending.id)?;
            if let IntentOp::Update { add, .. } = &intent.op {
                done += add.len();
            }
            self.complete_intent(intent)?;
        }
        if !self.state.reserved.is_empty() {
            let mut orphans: Vec<DocId> = Vec::new();
            for id in &self.state.reserved {
                if !self.state.catalog.contains_key(id)? {
                    orphans.push(*id);
                }
            }
            self.state.garbage.extend(orphans);
            self.state.reserved.clear();
            self.save()?;
        }
        // Deleting left-over documents may fail (a full disk): that must
        // not stop searches; they stay listed and go next time.
        let _ = self.collect_garbage();
        Ok(done)
    }

    /// As [`Session::recover`], for a read: when the oldest pending
    /// intent cannot be sent because the server refuses writes or cannot
    /// be reached ([`unsendable`]), the read goes on from the state the
    /// server has. Returns the documents completed, and the scheme client
    /// restored to the state before the oldest pending intent when that
    /// is what the read must use (the intents are kept for the next
    /// command). A scheme whose search writes, or an intent whose earlier
    /// state this device does not hold, cannot be read around:
    /// [`ClientError::PendingFirst`].
    pub(super) fn recover_for_read(&mut self) -> Result<(usize, Option<Committed>)> {
        let err = match self.recover() {
            Ok(done) => return Ok((done, None)),
            Err(e) => e,
        };
        let ClientError::Unacknowledged { documents, cause } = err else {
            return Err(err);
        };
        if !unsendable(&cause) {
            return Err(ClientError::Unacknowledged { documents, cause });
        }
        let refuse = |reason: &str, cause: Box<ClientError>| ClientError::PendingFirst {
            scheme: self.scheme.descriptor.name.to_owned(),
            documents,
            reason: reason.to_owned(),
            cause,
        };
        if self.client.search_writes() {
            return Err(refuse(
                "its search writes on the server (the searched keyword is re-keyed or its \
                 entries refreshed), after the pending update, so it cannot search without \
                 applying that update first",
                cause,
            ));
        }
        let Some(first) = self.state.pending.first().copied() else {
            return Err(ClientError::Unacknowledged { documents, cause });
        };
        let Some(before) = self.intents.load_before(&first.id) else {
            return Err(refuse(
                "this device does not hold the client state from before the pending update \
                 (it was saved by another device or by an older version), and the current \
                 state would search for entries the server does not have yet",
                cause,
            ));
        };
        let client =
            (self.scheme.restore_client)(&before).map_err(|_| ClientError::StateCorrupt {
                index: self.index.clone(),
                path: self.state_path.clone(),
            })?;
        // The completion of the intents before it, if any, is in memory
        // only: a read writes nothing while the server refuses writes.
        Ok((
            0,
            Some(Committed {
                client,
                state: before,
                pending: self.pending_documents(),
            }),
        ))
    }

    /// Writes format-2 intents (kept inside the state) as intent files.
    pub(super) fn adopt_legacy_intents(&mut self) -> Result<()> {
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
    pub(super) fn persist_intent(&mut self, intent: &Intent) -> Result<()> {
        let mark = self.staged_len();
        let saved = (|| {
            let sealed = self.intents.save(&mut self.rng, intent)?;
            if !self.client.search_writes() {
                // What a search answers from while this intent cannot be
                // sent (`committed_read`).
                self.intents
                    .save_before(&mut self.rng, &intent.id, &self.state.client)?;
            }
            self.stage_intent(&intent.id, sealed)?;
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
            self.unstage_to(mark);
            self.intents.remove(&intent.id);
            self.reload_client()?;
        }
        saved
    }

    /// Sends a saved intent (again, after an interruption) and completes
    /// it: the catalog changes of an update, the result of a search.
    pub(super) fn complete_intent(&mut self, mut intent: Intent) -> Result<Option<QueryResult>> {
        let requests = std::mem::take(&mut intent.requests);
        let sent = requests.len();
        let answers = if requests.is_empty() {
            Ok(Vec::new())
        } else {
            self.backend
                .update_job(
                    &self.index,
                    intent.generation,
                    &self.scheme,
                    intent.id,
                    requests,
                )
                .and_then(|job| job())
        };
        self.finish_intent(intent, sent, answers, true)
    }

    /// Sends a saved update on another thread and returns at once: the
    /// caller prepares the next update meanwhile. [`Session::settle`]
    /// waits for it and completes it; until then nothing else may reach
    /// the index.
    pub(super) fn send_behind(&mut self, mut intent: Intent) -> Result<()> {
        self.settle()?;
        let requests = std::mem::take(&mut intent.requests);
        let sent = requests.len();
        let job = self.backend.update_job(
            &self.index,
            intent.generation,
            &self.scheme,
            intent.id,
            requests,
        );
        let job = match job {
            Ok(job) => job,
            Err(e) => return self.finish_intent(intent, sent, Err(e), true).map(drop),
        };
        let thread = std::thread::Builder::new()
            .name("sesame-send".into())
            .spawn(job);
        match thread {
            Ok(thread) => {
                self.sending = Some(Sending {
                    intent,
                    sent,
                    thread: SendThread(Some(thread)),
                });
                Ok(())
            }
            Err(e) => {
                let e = ClientError::Core(sesame_core::Error::Transport(format!(
                    "cannot start the thread that sends an update: {e}"
                )));
                self.finish_intent(intent, sent, Err(e), true).map(drop)
            }
        }
    }

    /// Waits for the update [`Session::send_behind`] sent, if any, and
    /// completes it (the state saved).
    pub(super) fn settle(&mut self) -> Result<()> {
        self.settle_then(true)
    }

    /// As [`Session::settle`]; without `save`, the completion is saved by
    /// the caller's next save (the next intent's), which spares a save of
    /// the whole state per intent. Until then the intent stays pending in
    /// the saved state, and a crash sends it again: the server answers a
    /// repeat with its first answers.
    pub(super) fn settle_then(&mut self, save: bool) -> Result<()> {
        let Some(Sending {
            intent,
            sent,
            mut thread,
        }) = self.sending.take()
        else {
            return Ok(());
        };
        let answers = thread.join();
        self.finish_intent(intent, sent, answers, save).map(drop)
    }

    /// Completes a sent intent from the answers to its `sent` requests,
    /// and saves the state unless `save` is false (see
    /// [`Session::settle_then`]). Its file, and the answers the backend
    /// keeps, go after the first save that no longer refers to it.
    fn finish_intent(
        &mut self,
        intent: Intent,
        sent: usize,
        answers: Result<Vec<Vec<u8>>>,
        save: bool,
    ) -> Result<Option<QueryResult>> {
        let responses = answers
            .and_then(|responses| {
                if responses.len() == sent {
                    Ok(responses)
                } else {
                    Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                        "sent {sent} requests, got {} answers",
                        responses.len()
                    ))))
                }
            })
            .map_err(|cause| ClientError::Unacknowledged {
                documents: self.pending_documents(),
                cause: Box::new(cause),
            })?;
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
        self.stage_intent_done(&intent.id);
        self.completed.push(intent.id);
        if save {
            self.save()?;
        }
        Ok(result)
    }

    /// Brings the scheme client back to the last saved state (after a
    /// preparation that was not saved).
    pub(super) fn reload_client(&mut self) -> Result<()> {
        self.client = (self.scheme.restore_client)(&self.state.client).map_err(|_| {
            ClientError::StateCorrupt {
                index: self.index.clone(),
                path: self.state_path.clone(),
            }
        })?;
        Ok(())
    }

    /// Refuses prepared requests that no message to the server can carry.
    pub(super) fn check_sizes(&self, requests: &[Vec<u8>]) -> Result<()> {
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
}

/// The scheme client as the server's index has it, while pending
/// intents cannot be sent ([`Session::recover_for_read`]).
pub(super) struct Committed {
    /// Restored from the state before the oldest pending intent.
    pub client: Box<dyn sesame_sse::KeywordClient>,
    /// That state, to check that a search left it as it was.
    pub state: zeroize::Zeroizing<Vec<u8>>,
    /// Documents of the pending intents.
    pub pending: usize,
}

/// Whether `cause`, the failure to send an intent, says that the server
/// did not apply it for want of room or of a reachable store or server
/// (so that reading the state it has is what the user gets until it
/// can): a full store, a store or server unavailable, a transport error.
pub(super) fn unsendable(cause: &ClientError) -> bool {
    use sesame_core::Error as E;
    match cause {
        ClientError::Core(E::StoreFull(_) | E::StoreUnavailable(_) | E::StoreIo(_)) => true,
        ClientError::Core(E::Transport(_)) => true,
        ClientError::Core(E::Server(m)) => {
            m.ends_with("(RESOURCE_EXHAUSTED)") || m.ends_with("(UNAVAILABLE)")
        }
        ClientError::Unacknowledged { cause, .. } => unsendable(cause),
        _ => false,
    }
}

/// An update [`Session::send_behind`] sends on another thread.
pub(super) struct Sending {
    /// The intent, without its requests (the thread has them).
    intent: Intent,
    /// How many requests it sends.
    sent: usize,
    thread: SendThread,
}

/// The thread of a [`Sending`]. Dropped before it is joined (a session
/// dropped while it sends), it waits for the thread: the thread writes to
/// the store the session holds.
struct SendThread(Option<std::thread::JoinHandle<Result<Vec<Vec<u8>>>>>);

impl SendThread {
    /// The answers, once the thread is done.
    fn join(&mut self) -> Result<Vec<Vec<u8>>> {
        match self.0.take().map(std::thread::JoinHandle::join) {
            Some(Ok(answers)) => answers,
            Some(Err(_)) | None => Err(ClientError::Core(sesame_core::Error::Transport(
                "the thread sending an update stopped before it was answered".into(),
            ))),
        }
    }
}

impl Drop for SendThread {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}
