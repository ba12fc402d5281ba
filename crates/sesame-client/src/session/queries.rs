//! Searching, reading documents back, and checking the profile.

use std::collections::{BTreeSet, HashSet};

use rand_core::RngCore;
use sesame_sse::query::{Query, QueryResult};
use zeroize::{Zeroize, Zeroizing};

use crate::doc_service::{DocClient, DocId};
use crate::error::{ClientError, Result};
use crate::intents::{Intent, IntentOp};
use crate::state::{digest_matches, DocumentInfo};
use crate::tokenize::query_keyword;

/// Documents whose keywords `check` searches for.
use super::*;

impl Session {
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
    /// one keyword (`"Größe"` finds documents holding "größe"). While
    /// updates are pending that cannot be sent, the answer is the state
    /// the server has; [`Session::answer`] says how many documents wait.
    pub fn search(&mut self, keyword: &str) -> Result<Vec<DocumentInfo>> {
        let word = query_keyword(keyword)?;
        Ok(self.answer(&Query::Exact(word.into_bytes()))?.documents)
    }

    /// As [`Session::query`], for a query already parsed
    /// ([`crate::parse_query`]): a caller that checks the query before
    /// opening the profile parses it once. The whole search is one pass:
    /// the kind is checked against the scheme, interrupted operations are
    /// completed ([`QueryHits::resumed`] says how many documents), and the
    /// query runs. Interrupted operations that cannot be sent because the
    /// server refuses writes or cannot be reached are kept, and the query
    /// answers from the state the server has ([`QueryHits::pending`] says
    /// how many documents wait), or, for a scheme whose search writes, is
    /// [`ClientError::PendingFirst`].
    pub fn answer(&mut self, query: &Query) -> Result<QueryHits> {
        self.shared_op(|s| s.answer_once(query))
    }

    fn answer_once(&mut self, query: &Query) -> Result<QueryHits> {
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
        let (resumed, committed) = self.recover_for_read()?;
        let pending = committed.as_ref().map_or(0, |c| c.pending);
        if self.state.catalog.is_empty() {
            return Ok(QueryHits {
                kind,
                documents: Vec::new(),
                scores: Vec::new(),
                false_positives_removed: 0,
                resumed,
                pending,
            });
        }
        let result = match committed {
            Some(committed) => self.run_committed_query(committed, query)?,
            None => self.run_query(query)?,
        };
        let mut documents = Vec::with_capacity(result.ids.len());
        let mut scores = Vec::new();
        for (i, id) in result.ids.iter().enumerate() {
            // An identifier the catalog lacks belongs to a document that
            // was removed (schemes without deletion) or never completed.
            if let Some(doc) = self.state.catalog.get(id)? {
                documents.push(doc);
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
            resumed,
            pending,
        })
    }

    /// Runs `query` with the scheme client as the server's index has it
    /// (pending intents not sent: [`Session::recover_for_read`]). Only
    /// schemes whose search writes nothing get here; the state is not
    /// saved, and one that changed anyway is refused rather than lost.
    fn run_committed_query(
        &mut self,
        mut committed: super::intents::Committed,
        query: &Query,
    ) -> Result<QueryResult> {
        let mut channel =
            self.backend
                .index_channel(&self.index, self.state.generation, &self.scheme)?;
        let result = committed
            .client
            .query(&mut self.rng, channel.as_mut(), query)?;
        let after = Zeroizing::new(committed.client.save_state()?);
        if *after != *committed.state {
            return Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                "a search of scheme {} changed its client state, which it says it never does; \
                 its answer is not used while updates are pending",
                self.scheme.descriptor.name
            ))));
        }
        Ok(result)
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
        // state: sesame-sse's tests/scheme_flags.rs checks that claim of
        // every scheme. Debug builds check it again here and keep a
        // changed state; release builds skip it, since serializing the
        // whole client state per search was a fifth of a point query's
        // time in `sesame sql` (docs/performance.md).
        if !cfg!(debug_assertions) {
            return Ok(result);
        }
        let after = Zeroizing::new(self.client.save_state()?);
        if *after != self.state.client {
            self.state.client.zeroize();
            self.state.client = after.to_vec();
            self.save()?;
        }
        Ok(result)
    }

    // ---- reading and checking -----------------------------------------

    /// The decrypted content of document `id`. It sends no pending
    /// intent: a document of a pending add is not in the catalog yet
    /// ([`Session::pending_documents`]).
    pub fn get(&mut self, id: DocId) -> Result<Vec<u8>> {
        self.refresh()?;
        let Some(doc) = self.state.catalog.get(&id)? else {
            return Err(ClientError::UnknownDocument(id));
        };
        let mut channel = self.backend.document_channel(&self.index)?;
        let blob = self.fetch_blob(channel.as_mut(), id)?;
        let mut record =
            crate::stored::check_digest(&doc, self.open_document(id, &doc.path, &blob)?)?;
        Ok(std::mem::take(&mut record.content))
    }

    /// Checks the index: completes interrupted operations, checks the
    /// store for damage it can detect, fetches and decrypts every document
    /// (and compares it with its recorded hash), compares the stored
    /// documents with the catalog, and searches for keywords of up to
    /// `CHECK_PROBES` (32) documents (spread over the catalog) to see that
    /// each is found. Schemes whose search writes are not probed (a check
    /// changes nothing). Problems are returned, one line each; an `Err` is
    /// a check that could not run at all.
    pub fn check(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<CheckReport> {
        self.refresh()?;
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
        } else if let Err(e) =
            self.backend
                .verify_index(&self.index, self.state.generation, &self.scheme)
        {
            report.problems.push(format!("the index's entries: {e}"));
        }
        let mut channel = self.backend.document_channel(&self.index)?;
        let stored: HashSet<DocId> = DocClient::list(channel.as_mut())?.into_iter().collect();
        drop(channel);
        let mut extra = 0;
        for id in &stored {
            if !self.state.catalog.contains_key(id)? {
                extra += 1;
            }
        }
        if extra > 0 {
            report.problems.push(format!(
                "{extra} stored document(s) belong to no document of the index"
            ));
        }
        let docs = self.documents()?;
        let step = (docs.len() / CHECK_PROBES).max(1);
        let mut probes: Vec<(DocId, Vec<String>)> = Vec::new();
        let mut problems = Vec::new();
        let mut verified = 0;
        let mut position = 0usize;
        let extract = std::sync::Arc::clone(&self.extract);
        self.fetch_documents(&docs, Phase::Fetching, progress, &mut |doc, record| {
            position += 1;
            match record {
                Ok(r) => {
                    let digest = sesame_crypto::hash::sha256(&r.content);
                    if doc.digest.is_some_and(|d| !digest_matches(&d, &digest)) {
                        problems.push(format!(
                            "document {} ({}) does not hold what was added",
                            doc.id, doc.path
                        ));
                    } else {
                        verified += 1;
                    }
                    if (position - 1).is_multiple_of(step) && probes.len() < CHECK_PROBES {
                        let words = extract(&r.path, &r.content);
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

    /// Merges the index's packed deltas into their chunks
    /// ([`crate::backend::Backend::compact_index`]: the embedded store;
    /// nothing over a server); how many chunks were rewritten.
    pub(crate) fn compact_entries(&mut self) -> Result<usize> {
        self.backend
            .compact_index(&self.index, self.state.generation, &self.scheme)
    }
}
