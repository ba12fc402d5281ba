//! What the range tests share: the plaintext oracle, value bounds and page
//! configurations. Each test binary uses part of it.
#![allow(dead_code)]

use sesame_range::{CachePolicy, PageConfig};

/// A (value, record) pair.
pub(crate) type Record = (u64, Vec<u8>);

/// The records of `records` with values in `[lo, hi]`, sorted: what every
/// protocol must answer.
pub(crate) fn oracle(records: &[Record], lo: u64, hi: u64) -> Vec<Record> {
    let mut out: Vec<Record> = records
        .iter()
        .filter(|(v, _)| lo <= *v && *v <= hi)
        .cloned()
        .collect();
    out.sort();
    out
}

/// The largest `bits`-bit value.
pub(crate) fn max_value(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Pages of `page_size` bytes behind a cache of `cache_blocks` pages.
pub(crate) fn pages(page_size: usize, cache_blocks: usize, policy: CachePolicy) -> PageConfig {
    PageConfig {
        page_size,
        cache_blocks,
        policy,
    }
}

/// 256-byte pages and no cache: every node access reaches the store.
pub(crate) fn tiny_pages() -> PageConfig {
    pages(256, 0, CachePolicy::Lru)
}
