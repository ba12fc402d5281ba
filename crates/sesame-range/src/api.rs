//! The interface every range protocol implements, and its registry entry.

use rand_core::CryptoRngCore;
use sesame_core::{Channel, Error, Params, Result, SchemeDescriptor};

use crate::paged::PageConfig;

/// A record as the client sees it: the indexed value and its payload.
pub type Record = (u64, Vec<u8>);

/// The answer to a range query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeAnswer {
    /// The records whose values lie in the interval, sorted by (value,
    /// payload). Duplicates (the same pair inserted twice) appear twice.
    pub records: Vec<Record>,
    /// Records the server returned that were outside the interval and that
    /// the client discarded after decrypting them (POPE's unsorted
    /// buffers); zero for exact protocols.
    pub discarded: u64,
}

impl RangeAnswer {
    /// An answer from unsorted records: sorts them.
    pub fn from_records(mut records: Vec<Record>, discarded: u64) -> Self {
        records.sort();
        RangeAnswer { records, discarded }
    }
}

/// The client half of a range protocol: keys, client state, and the
/// protocol driven over a [`Channel`].
///
/// Values are integers in `0..2^bits`, where `bits` is a protocol
/// parameter (default 32). Records are byte strings, encrypted by the
/// client before they reach the server (see [`crate::record`]).
pub trait RangeClient: Send {
    /// The protocol's descriptor.
    fn descriptor(&self) -> &'static SchemeDescriptor;

    /// Value width: values are `0..2^bits`.
    fn bits(&self) -> u32;

    /// Builds the structure from `records` on an empty server (the
    /// construction stage). The default inserts them one by one, as seed
    /// 004 requires of every protocol but Logarithmic-BRC, which builds in
    /// one batch.
    fn build(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        records: &[Record],
    ) -> Result<()> {
        for (value, data) in records {
            self.insert(rng, channel, *value, data)?;
        }
        Ok(())
    }

    /// Inserts `value` with its record `data`. Inserting a pair that is
    /// already present stores it a second time.
    fn insert(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<()>;

    /// Deletes one occurrence of the pair (`value`, `data`); returns
    /// whether there was one.
    fn delete(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<bool>;

    /// The records with values in `[lo, hi]` (both included); an empty
    /// answer when `lo > hi`.
    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<RangeAnswer>;

    /// Whether a query may change the server's structure or the client
    /// state (POPE splits buffers, Path ORAM rewrites paths). A caller
    /// that must survive a crash mid-query (a table marks the index while
    /// it runs) asks. The default says it may.
    fn query_writes(&self) -> bool {
        true
    }

    /// The largest record the protocol stores, if it has a limit below
    /// what a message carries (Path ORAM's `record_size`).
    fn max_record(&self) -> Option<usize> {
        None
    }

    /// Bytes of client storage: keys and persistent state (position map
    /// and stash for Path ORAM, counters, ...), as seed 004 reports it.
    fn client_storage_bytes(&self) -> u64;

    /// The client state (keys included) to persist.
    fn save_state(&self) -> Result<Vec<u8>>;
}

/// A registered range protocol: its descriptor, parameters and
/// constructors (the registry entry of the range family).
///
/// Besides the protocol's own parameters, every entry reads the server's
/// page configuration, [`PAGE_PARAMS`] (see [`PageConfig::from_params`]):
/// the server lays its data out for it, and some clients size their
/// messages by it. Give the server a [`crate::PagedStore`] with the same
/// configuration to count page I/O.
pub type RangeProtocol = sesame_core::Entry<dyn RangeClient>;

/// The parameter names of the page configuration, read by every range
/// protocol besides its own.
pub const PAGE_PARAMS: [&str; 3] = ["page_size", "cache_size", "cache_policy"];

/// Splits `params` into the protocol's own parameters and the page
/// configuration.
pub fn split_page(params: &Params) -> Result<(Params, PageConfig)> {
    Ok((
        params.without(&PAGE_PARAMS),
        PageConfig::from_params(params)?,
    ))
}

/// Reads the value width parameter `bits` (default 32, in `1..=64`).
pub fn bits_param(params: &Params) -> Result<u32> {
    let bits: u32 = params.get_or("bits", 32)?;
    if !(1..=64).contains(&bits) {
        return Err(Error::InvalidArgument(format!(
            "bits={bits}: the value width must be in 1..=64"
        )));
    }
    Ok(bits)
}

/// Fails unless `value < 2^bits`.
pub fn check_value(value: u64, bits: u32) -> Result<()> {
    if bits < 64 && value >> bits != 0 {
        return Err(Error::InvalidArgument(format!(
            "value {value} does not fit in {bits} bits"
        )));
    }
    Ok(())
}
