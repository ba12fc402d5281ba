//! The entries an SDd update (or setup) seals and opens, each batch in one
//! call of `sesame-crypto`'s batched AES-GCM-SIV (`Aes256GcmSiv::seal_each`,
//! `open_each`: the messages' key schedules expanded side by side). Each
//! entry's nonce is drawn from the caller's RNG where the entry is queued,
//! in the order the entries were sealed one at a time before, so the bytes
//! sent are the same (`seeded_updates_exchange_the_same_bytes`).

use std::ops::Range;

use rand_core::CryptoRngCore;
use sesame_core::{Error, Result};
use sesame_crypto::aead::{Aes256GcmSiv, OpenItem, SealItem};

use super::{Entry, KeyCache, SddClient};
use crate::common::Sealed;
use crate::sd::levels::{Update, LABEL_LEN};

/// Where a sealed entry goes.
enum To {
    /// The array entry at this position.
    Positional(u64),
    /// The searchable entry under this label.
    Labelled([u8; LABEL_LEN]),
}

/// One entry to seal.
struct Job {
    buffer: u64,
    to: To,
    nonce: [u8; Aes256GcmSiv::NONCE_LEN],
    /// Its plaintext in [`Seals::plain`].
    plain: Range<usize>,
}

/// The associated data of a job: the buffer (a searchable entry) or
/// [`positional_ad`] (an array entry).
fn ad(job: &Job) -> ([u8; ARRAY_AD.len() + 16], usize) {
    match job.to {
        To::Positional(p) => (positional_ad(job.buffer, p), ARRAY_AD.len() + 16),
        To::Labelled(_) => {
            let mut ad = [0u8; ARRAY_AD.len() + 16];
            ad[..8].copy_from_slice(&job.buffer.to_le_bytes());
            (ad, 8)
        }
    }
}

/// The entries queued to seal, in the order their nonces were drawn,
/// their plaintexts one after the other in one buffer.
#[derive(Default)]
pub(super) struct Seals {
    jobs: Vec<Job>,
    plain: Vec<u8>,
}

/// Sealed array entries (buffer, position, entry) and searchable entries
/// (buffer, label, entry), each in the order queued.
pub(super) type SealedEntries = (Vec<(u64, u64, Sealed)>, Vec<(u64, [u8; LABEL_LEN], Sealed)>);

impl Seals {
    /// Room for `n` entries.
    pub(super) fn with_capacity(n: usize) -> Self {
        Seals {
            jobs: Vec::with_capacity(n),
            plain: Vec::with_capacity(n * (LABEL_LEN + 64)),
        }
    }

    /// Entries queued.
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Queues the plaintext `self.plain[start..]`.
    fn push(&mut self, rng: &mut dyn CryptoRngCore, buffer: u64, to: To, start: usize) {
        let mut nonce = [0u8; Aes256GcmSiv::NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        self.jobs.push(Job {
            buffer,
            to,
            nonce,
            plain: start..self.plain.len(),
        });
    }

    /// A searchable entry of `buffer` under `label`: the sealed update
    /// (the buffer as associated data), what a search opens.
    pub(super) fn labelled(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        buffer: u64,
        label: [u8; LABEL_LEN],
        u: &Update,
    ) {
        let start = self.plain.len();
        u.encode_into(&mut self.plain);
        self.push(rng, buffer, To::Labelled(label), start);
    }

    /// An array entry of `buffer` at `position`: the label it will have
    /// (zeros before the count scan) and the update, with the buffer and
    /// position as associated data.
    pub(super) fn positional(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        buffer: u64,
        position: u64,
        entry: &Entry,
    ) {
        let start = self.plain.len();
        self.plain.extend_from_slice(&entry.label);
        entry.update.encode_into(&mut self.plain);
        self.push(rng, buffer, To::Positional(position), start);
    }

    /// Seals every queued entry in one batch, under the keys of its
    /// buffer (derived into `cache` if they are not there yet).
    pub(super) fn seal(self, client: &SddClient, cache: &mut KeyCache) -> Result<SealedEntries> {
        for job in &self.jobs {
            cache.get(client, job.buffer);
        }
        let ads: Vec<_> = self.jobs.iter().map(ad).collect();
        let items = self
            .jobs
            .iter()
            .zip(&ads)
            .map(|(job, (ad, len))| {
                Ok(SealItem {
                    aead: &cache.peek(job.buffer)?.aead,
                    nonce: job.nonce,
                    aad: &ad[..*len],
                    plaintext: &self.plain[job.plain.clone()],
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let sealed = Aes256GcmSiv::seal_each(&items)?;
        let positional_jobs = self
            .jobs
            .iter()
            .filter(|job| matches!(job.to, To::Positional(_)))
            .count();
        let mut positional = Vec::with_capacity(positional_jobs);
        let mut labelled = Vec::with_capacity(self.jobs.len() - positional_jobs);
        for (job, sealed) in self.jobs.into_iter().zip(sealed) {
            match job.to {
                To::Positional(p) => positional.push((job.buffer, p, Sealed(sealed))),
                To::Labelled(label) => labelled.push((job.buffer, label, Sealed(sealed))),
            }
        }
        Ok((positional, labelled))
    }
}

/// The associated data of an array entry.
fn positional_ad(buffer: u64, position: u64) -> [u8; ARRAY_AD.len() + 16] {
    let mut ad = [0u8; ARRAY_AD.len() + 16];
    ad[..ARRAY_AD.len()].copy_from_slice(ARRAY_AD);
    ad[ARRAY_AD.len()..ARRAY_AD.len() + 8].copy_from_slice(&buffer.to_le_bytes());
    ad[ARRAY_AD.len() + 8..].copy_from_slice(&position.to_le_bytes());
    ad
}

/// The prefix of an array entry's associated data.
const ARRAY_AD: &[u8] = b"sesame-sse/sdd/array\0";

/// Opens fetched array entries `(buffer, position, sealed)` in one batch.
/// Format-1 arrays held the searchable entry's bytes (no label, the
/// buffer alone as associated data): an entry that does not open as an
/// array entry is tried as one of those.
pub(super) fn open_positional(
    client: &SddClient,
    cache: &mut KeyCache,
    fetched: &[((u64, u64), Sealed)],
) -> Result<Vec<Entry>> {
    for ((b, _), _) in fetched {
        cache.get(client, *b);
    }
    let ads: Vec<_> = fetched
        .iter()
        .map(|((b, p), _)| positional_ad(*b, *p))
        .collect();
    let items = fetched
        .iter()
        .zip(&ads)
        .map(|(((b, _), sealed), ad)| {
            Ok(OpenItem {
                aead: &cache.peek(*b)?.aead,
                aad: ad,
                ciphertext: sealed,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let opened = Aes256GcmSiv::open_each(&items);
    let mut out = Vec::with_capacity(fetched.len());
    for (((b, _), sealed), plain) in fetched.iter().zip(opened) {
        out.push(match plain {
            Ok(plain) => {
                let (label, update) = plain
                    .split_first_chunk::<LABEL_LEN>()
                    .ok_or_else(|| Error::Protocol("SDd array entry too short".into()))?;
                Entry {
                    label: *label,
                    update: Update::decode(update)?,
                }
            }
            Err(_) => {
                let plain = cache.peek(*b)?.aead.open(&b.to_le_bytes(), sealed)?;
                Entry {
                    label: [0; LABEL_LEN],
                    update: Update::decode(&plain)?,
                }
            }
        });
    }
    Ok(out)
}
