//! An import's range entries made ahead, on a thread of their own, while
//! the keyword index is written.
//!
//! A first import keeps its range changes aside and builds each empty
//! range index at the end (module `ranges`). Most of that build is the
//! client's work: each record's ORE ciphertext and sealed record. Those
//! depend only on the record (its value and payload) and on fresh
//! randomness, not on the other records, so they are made as each batch
//! goes in, by a copy of each index's client
//! ([`sesame_range::RangeClient::entry_maker`]) on a thread of its own,
//! which keeps them with the pairs in the [`Spill`]: the batches' keyword
//! updates leave a core idle while the store writes them (the importing
//! thread and the store's writer take turns), and that core makes the
//! entries. The build at the end then only merges, orders and sends
//! ([`sesame_range::RangeClient::build_made`]).
//!
//! The server receives exactly what the build sent before: each record's
//! ciphertext with its own fresh randomness, the same sealed records, in
//! the same value order, in the same rounds; only when the ciphertexts
//! were drawn changes. The entries never leave the client before the
//! build: they are kept in memory and in the spill's sealed file as the
//! pairs are.
//!
//! Only an index empty when the first batch goes in, whose protocol
//! builds from entries, is made ahead; the entries are used only if its
//! client's state at the build is still the one its maker copied (else
//! the build encrypts, as before, from the pairs kept beside them). On
//! one core nothing is made ahead (there is no idle core to make them
//! on). A crash loses nothing: the indexes stay marked dirty until the
//! build ends, and are rebuilt from the records.

use std::sync::mpsc;
use std::thread::JoinHandle;

use rand_chacha::ChaCha20Rng;
use rand_core::{CryptoRngCore, SeedableRng};
use sesame_range::EntryMaker;
use zeroize::Zeroize;

use super::{RangeIndex, RangeState, Spill};
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};

/// One pair of a batch for the making thread: range index `index`'s
/// (`value`, `id`), with the payload its record carries in that index.
pub(crate) struct Job {
    pub index: usize,
    pub value: u64,
    pub id: DocId,
    pub payload: Vec<u8>,
}

/// The making thread of an import (module documentation).
pub(crate) struct Ahead {
    /// Batches of pairs to the thread (a rendezvous: at most one batch
    /// waits while the thread works on another).
    sender: Option<mpsc::SyncSender<Vec<Job>>>,
    thread: Option<JoinHandle<Result<Spill>>>,
    /// By range index: the digest of its client's saved state when its
    /// maker copied it, where it has one.
    copied: Vec<Option<[u8; 32]>>,
}

fn stopped() -> ClientError {
    ClientError::InvalidArgument(
        "the thread making an import's range entries stopped; run the same import again \
         (its range indexes are rebuilt from the records)"
            .into(),
    )
}

fn state_digest(index: &RangeIndex) -> Result<[u8; 32]> {
    let mut saved = index.client.save_state()?;
    let digest = sesame_crypto::hash::sha256(&saved);
    saved.zeroize();
    Ok(digest)
}

impl Ahead {
    /// Starts the making thread for the empty indexes of `indexes` whose
    /// protocol builds from entries, taking `spill` (its pairs so far are
    /// kept), its randomness seeded from `rng`. `None` (and `spill` left
    /// as it was) where no index is made ahead.
    pub(crate) fn start(
        indexes: &[RangeIndex],
        states: &[RangeState],
        spill: &mut Spill,
        rng: &mut dyn CryptoRngCore,
    ) -> Result<Option<Ahead>> {
        let mut makers: Vec<Option<Box<dyn EntryMaker>>> = Vec::with_capacity(indexes.len());
        let mut copied = Vec::with_capacity(indexes.len());
        for (index, state) in indexes.iter().zip(states) {
            let maker = if state.records == 0 {
                index.client.entry_maker()?
            } else {
                None
            };
            copied.push(maker.as_ref().map(|_| state_digest(index)).transpose()?);
            makers.push(maker);
        }
        if makers.iter().all(Option::is_none) {
            return Ok(None);
        }
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        let mut ahead_rng = ChaCha20Rng::from_seed(seed);
        seed.zeroize();
        let mut spill = std::mem::take(spill);
        let (sender, batches) = mpsc::sync_channel::<Vec<Job>>(1);
        let thread = std::thread::Builder::new()
            .name("sesame-range-ahead".into())
            .spawn(move || -> Result<Spill> {
                for jobs in batches {
                    for job in jobs {
                        match makers.get_mut(job.index).and_then(Option::as_mut) {
                            Some(maker) => {
                                let entry = maker.entry(&mut ahead_rng, job.value, &job.payload)?;
                                spill.push_made(
                                    &mut ahead_rng,
                                    job.index,
                                    job.value,
                                    job.id,
                                    entry,
                                )?;
                            }
                            None => spill.push(&mut ahead_rng, job.index, job.value, job.id)?,
                        }
                    }
                }
                Ok(spill)
            })
            .map_err(|e| ClientError::InvalidArgument(format!("starting a thread: {e}")))?;
        Ok(Some(Ahead {
            sender: Some(sender),
            thread: Some(thread),
            copied,
        }))
    }

    /// Whether range index `index`'s entries are made ahead (its jobs
    /// need their payloads).
    pub(crate) fn makes(&self, index: usize) -> bool {
        matches!(self.copied.get(index), Some(Some(_)))
    }

    /// Hands a batch's pairs to the thread; waits while it still works
    /// on the batch before the last. A thread that stopped on an error
    /// gives that error.
    pub(crate) fn send(&mut self, jobs: Vec<Job>) -> Result<()> {
        let sent = self.sender.as_ref().map(|s| s.send(jobs));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => self.join().map(|_| ()).and(Err(stopped())),
        }
    }

    /// Waits for the thread to keep every pair sent; returns the spill
    /// and, by range index of `indexes`, whether its pairs carry entries
    /// its client made (its state unchanged since its maker's copy).
    pub(crate) fn finish(mut self, indexes: &[RangeIndex]) -> Result<(Spill, Vec<bool>)> {
        let spill = self.join()?;
        let made = indexes
            .iter()
            .enumerate()
            .map(|(i, index)| match self.copied.get(i) {
                Some(Some(digest)) => state_digest(index).map(|now| now == *digest),
                _ => Ok(false),
            })
            .collect::<Result<Vec<bool>>>()?;
        Ok((spill, made))
    }

    fn join(&mut self) -> Result<Spill> {
        self.sender = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(kept)) => kept,
            _ => Err(stopped()),
        }
    }
}

impl Drop for Ahead {
    /// An import that stopped early: the thread ends once its batches
    /// are done, and is waited for (its pairs are dropped).
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}
