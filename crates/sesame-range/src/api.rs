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

/// The randomness and the channel one step runs with (one type for
/// every scheme crate, from `sesame-core`).
pub use sesame_core::Io;

/// The client half of a range protocol: keys, client state, and the
/// protocol driven over a [`Channel`].
///
/// Values are integers in `0..2^bits`, where `bits` is a protocol
/// parameter (default 32). Records are byte strings, encrypted by the
/// client before they reach the server (see [`crate::record`]).
///
/// A protocol implements the `*_checked` steps; the public operations
/// ([`build`](RangeClient::build), [`insert`](RangeClient::insert),
/// [`delete`](RangeClient::delete), [`query`](RangeClient::query)) check
/// their input first, the same way for every protocol: a value must fit in
/// `bits` bits (else [`Error::InvalidArgument`], before any message is
/// sent), a record must fit [`max_record`](RangeClient::max_record) (an
/// insert fails, a delete finds nothing), and a query with `lo > hi` is
/// empty without a round.
pub trait RangeClient: Send {
    /// The protocol's descriptor.
    fn descriptor(&self) -> &'static SchemeDescriptor;

    /// Value width: values are `0..2^bits`.
    fn bits(&self) -> u32;

    /// Builds the structure from `records` on an empty server (the
    /// construction stage), after checking every record.
    fn build(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        records: &[Record],
    ) -> Result<()> {
        for (value, data) in records {
            self.check_record(*value, data)?;
        }
        self.build_checked(Io { rng, channel }, records)
    }

    /// Inserts `value` with its record `data`. Inserting a pair that is
    /// already present stores it a second time.
    fn insert(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<()> {
        self.check_record(value, data)?;
        self.insert_checked(Io { rng, channel }, value, data)
    }

    /// Deletes one occurrence of the pair (`value`, `data`); returns
    /// whether there was one.
    fn delete(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<bool> {
        check_value(value, self.bits())?;
        if self.max_record().is_some_and(|max| data.len() > max) {
            // A record the protocol cannot store was never inserted.
            return Ok(false);
        }
        self.delete_checked(Io { rng, channel }, value, data)
    }

    /// The records with values in `[lo, hi]` (both included); an empty
    /// answer when `lo > hi`.
    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<RangeAnswer> {
        check_value(lo, self.bits())?;
        check_value(hi, self.bits())?;
        if lo > hi {
            return Ok(RangeAnswer::default());
        }
        self.query_checked(Io { rng, channel }, lo, hi)
    }

    /// Fails unless `value` fits in [`bits`](RangeClient::bits) bits and
    /// `data` in [`max_record`](RangeClient::max_record).
    fn check_record(&self, value: u64, data: &[u8]) -> Result<()> {
        check_value(value, self.bits())?;
        match self.max_record() {
            Some(max) if data.len() > max => Err(Error::InvalidArgument(format!(
                "a record of {} bytes exceeds record_size={max}",
                data.len()
            ))),
            _ => Ok(()),
        }
    }

    /// [`build`](RangeClient::build) on checked records. The default
    /// inserts them one by one, as seed 004 requires of every protocol but
    /// Logarithmic-BRC, which builds in one batch.
    fn build_checked(&mut self, mut io: Io<'_>, records: &[Record]) -> Result<()> {
        for (value, data) in records {
            self.insert_checked(io.reborrow(), *value, data)?;
        }
        Ok(())
    }

    /// [`insert`](RangeClient::insert) of a checked record.
    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()>;

    /// [`delete`](RangeClient::delete) of a checked pair.
    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool>;

    /// [`query`](RangeClient::query) of a checked interval, `lo <= hi`.
    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer>;

    /// Whether a query may change the server's structure or the client
    /// state (POPE splits buffers, Path ORAM rewrites paths). A caller
    /// that must survive a crash mid-query (a table marks the index while
    /// it runs) asks. The default says it may.
    fn query_writes(&self) -> bool {
        true
    }

    /// Whether [`build`](RangeClient::build) may be called again on the
    /// structure it built, with records whose values are all at least
    /// the largest built before (a build in pieces, in value order), and
    /// give what one build of all of them would: the same entries and the
    /// same messages (a B+ tree's bulk load appends along its right edge;
    /// the default build is insertions one by one). A caller with more
    /// records than it can hold in memory builds in pieces where this
    /// says so. A protocol whose build writes its whole structure at once
    /// (Logarithmic-BRC, Kerschbaum-Tueno) says not.
    fn builds_in_pieces(&self) -> bool {
        true
    }

    /// The largest record the protocol stores, if it has a limit below
    /// what a message carries (Path ORAM's `record_size`).
    fn max_record(&self) -> Option<usize> {
        None
    }

    /// The one payload length this client takes, where it takes no other
    /// (a B+ tree whose records travel in its ciphertexts' nonces: the
    /// layout's `payload`, `docs/schemes/bplus_ore.md`, "Records in the
    /// nonce"); `None` where any length up to
    /// [`max_record`](RangeClient::max_record) goes.
    fn payload_len(&self) -> Option<usize> {
        None
    }

    /// Whether every record reaches the server sealed
    /// ([`crate::record::RecordKey`]: AES-256-GCM-SIV over the value and
    /// the record) under a key of this client alone, drawn when the
    /// client is made: then a record the server moves from another
    /// structure (another client's, an earlier build's), alters or makes
    /// up does not open, and a query fails with [`Error::Crypto`] instead
    /// of answering with it. A caller may then leave out a binding of its
    /// own. The default says not (the plaintext baseline stores records
    /// in the clear; Path ORAM seals blocks, not records).
    fn seals_records(&self) -> bool {
        false
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

/// The answer made of the sealed records a server returned for `[lo, hi]`:
/// `open` decrypts each; a record outside the interval fails the query (a
/// server that answers with other records is caught, not believed).
pub fn open_answer<S: AsRef<[u8]>>(
    sealed: &[S],
    lo: u64,
    hi: u64,
    mut open: impl FnMut(&[u8]) -> Result<Record>,
) -> Result<RangeAnswer> {
    let mut records = Vec::with_capacity(sealed.len());
    for s in sealed {
        let (value, data) = open(s.as_ref())?;
        if value < lo || value > hi {
            return Err(Error::Protocol(format!(
                "the server returned a record with value {value} outside [{lo}, {hi}]"
            )));
        }
        records.push((value, data));
    }
    Ok(RangeAnswer::from_records(records, 0))
}
