//! The client half of POPE: the record key, `L`, and the descent that
//! flushes buffers and splits leaves on the way to a query's endpoints.

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Params, Result, SchemeDescriptor};

use super::{Flush, Request, Response, Split, AAD, DESCRIPTOR, MAX_L, MAX_RETRIES, NOMINAL_ENTRY};
use crate::api::{bits_param, Io, RangeAnswer, RangeClient, Record};
use crate::paged::PageConfig;
use crate::record::RecordKey;

/// A point of the strict total order on (value, ciphertext): `tie` 0 is
/// below every ciphertext of the value, 2 above, 1 a ciphertext.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    value: u64,
    tie: u8,
    bytes: Vec<u8>,
}

impl Key {
    fn entry(value: u64, sealed: Vec<u8>) -> Self {
        Key {
            value,
            tie: 1,
            bytes: sealed,
        }
    }
    fn below(value: u64) -> Self {
        Key {
            value,
            tie: 0,
            bytes: Vec::new(),
        }
    }
    fn above(value: u64) -> Self {
        Key {
            value,
            tie: 2,
            bytes: Vec::new(),
        }
    }
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    key: [u8; 32],
    bits: u32,
    l: u32,
}

/// The client half of POPE: the record key and `L`.
pub struct PopeClient {
    key: RecordKey,
    bits: u32,
    l: u32,
}

impl std::fmt::Debug for PopeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopeClient")
            .field("bits", &self.bits)
            .field("l", &self.l)
            .finish_non_exhaustive()
    }
}

fn check_l(l: u64) -> Result<u32> {
    if !(2..=MAX_L as u64).contains(&l) {
        return Err(Error::InvalidArgument(format!(
            "l={l}: must be in 2..={MAX_L}"
        )));
    }
    Ok(l as u32)
}

/// Records found by a query with their nodes.
type Located = Vec<(u64, Vec<u8>, Record)>;

impl PopeClient {
    /// A client with a fresh key. Parameters: `bits` (value width, default
    /// 32) and `l` (default: the records of 54 bytes a page holds, at
    /// least 2).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params, page: &PageConfig) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["bits", "l"])?;
        let default = (page.page_size / NOMINAL_ENTRY).max(2) as u64;
        let l = check_l(params.get_or("l", default)?)?;
        Ok(PopeClient {
            key: RecordKey::generate(rng),
            bits: bits_param(params)?,
            l,
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if !(1..=64).contains(&s.bits) {
            return Err(Error::Malformed("POPE state with bad bits".into()));
        }
        Ok(PopeClient {
            key: RecordKey::from_bytes(&s.key)?,
            bits: s.bits,
            l: check_l(u64::from(s.l)).map_err(|_| Error::Malformed("POPE state l".into()))?,
        })
    }

    /// `L`: labels per node and the client's working set.
    pub fn l(&self) -> usize {
        self.l as usize
    }

    fn key_of(&self, sealed: &[u8]) -> Result<Key> {
        let (value, _) = self.key.open(AAD, sealed)?;
        Ok(Key::entry(value, sealed.to_vec()))
    }

    /// Assigns each record of the buffer `flush` names to a child (or
    /// bucket) by the sorted `labels`, fetching it chunk by chunk from
    /// `chunk` (the first) on, then sends the whole assignment; returns
    /// whether the tree was restructured. `len` is the buffer's length.
    fn flush(
        &self,
        channel: &mut dyn Channel,
        flush: Flush,
        labels: &[Key],
        mut chunk: Vec<Vec<u8>>,
        len: u64,
    ) -> Result<bool> {
        let len = usize::try_from(len).map_err(|_| Error::Protocol("POPE buffer size".into()))?;
        let mut assign = Vec::with_capacity(len.min(1 << 20));
        loop {
            if chunk.is_empty() || chunk.len() > self.l() || assign.len() + chunk.len() > len {
                return Err(Error::Protocol("bad POPE chunk size".into()));
            }
            for s in &chunk {
                let k = self.key_of(s)?;
                assign.push(labels.partition_point(|x| *x < k) as u32);
            }
            if assign.len() == len {
                break;
            }
            let request = Request::Next {
                flush: flush.clone(),
                offset: assign.len() as u64,
            };
            match channel::call(channel, &request)? {
                Response::Chunk(next) => chunk = next,
                other => return Err(Error::unexpected("POPE", &other)),
            }
        }
        match channel::call(channel, &Request::Partition { flush, assign })? {
            Response::Flushed { restructured } => Ok(restructured),
            other => Err(Error::unexpected("POPE", &other)),
        }
    }

    /// Descends to the leaf of `key`, flushing buffers and splitting leaves
    /// on the way; returns the path from the root.
    fn descend(
        &self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        key: &Key,
    ) -> Result<Vec<u64>> {
        'restart: for _ in 0..MAX_RETRIES * 1024 {
            let mut path: Vec<u64> = Vec::new();
            loop {
                let view = match channel::call(
                    channel,
                    &Request::Visit {
                        path: path.clone(),
                        l: self.l,
                    },
                )? {
                    Response::Node(v) => v,
                    other => return Err(Error::unexpected("POPE", &other)),
                };
                if path.is_empty() {
                    path.push(view.id);
                } else if path.last() != Some(&view.id) {
                    return Err(Error::Protocol("POPE visited the wrong node".into()));
                }
                if view.children.is_empty() {
                    if view.len <= u64::from(self.l) {
                        return Ok(path);
                    }
                    let seed = rng.next_u64();
                    let pivots = match channel::call(
                        channel,
                        &Request::Pivots {
                            path: path.clone(),
                            l: self.l,
                            seed,
                        },
                    )? {
                        Response::Chunk(p) => p,
                        other => return Err(Error::unexpected("POPE", &other)),
                    };
                    if pivots.len() != self.l() {
                        return Err(Error::Protocol("wrong number of POPE pivots".into()));
                    }
                    let mut keyed: Vec<(Key, u32)> = pivots
                        .iter()
                        .enumerate()
                        .map(|(i, s)| Ok((self.key_of(s)?, i as u32)))
                        .collect::<Result<_>>()?;
                    keyed.sort();
                    let order = keyed.iter().map(|(_, i)| *i).collect();
                    let labels: Vec<Key> = keyed.into_iter().map(|(k, _)| k).collect();
                    let flush = Flush {
                        path: path.clone(),
                        l: self.l,
                        split: Some(Split { seed, order }),
                    };
                    let request = Request::Next {
                        flush: flush.clone(),
                        offset: 0,
                    };
                    let chunk = match channel::call(channel, &request)? {
                        Response::Chunk(c) => c,
                        other => return Err(Error::unexpected("POPE", &other)),
                    };
                    self.flush(channel, flush, &labels, chunk, view.len)?;
                    continue 'restart;
                }
                if view.labels.len() + 1 != view.children.len() || view.labels.len() > self.l() {
                    return Err(Error::Protocol("malformed POPE node".into()));
                }
                let labels: Vec<Key> = view
                    .labels
                    .iter()
                    .map(|s| self.key_of(s))
                    .collect::<Result<_>>()?;
                if view.len > 0 {
                    let flush = Flush {
                        path: path.clone(),
                        l: self.l,
                        split: None,
                    };
                    if self.flush(channel, flush, &labels, view.chunk, view.len)? {
                        continue 'restart;
                    }
                }
                let child = labels.partition_point(|x| x < key);
                let Some(&id) = view.children.get(child) else {
                    return Err(Error::Protocol("malformed POPE node".into()));
                };
                path.push(id);
            }
        }
        Err(Error::Protocol("POPE tree keeps changing".into()))
    }

    /// The records with values in `[lo, hi]` with their nodes, and the
    /// number of records outside the interval the server returned.
    fn locate(
        &self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<(Located, u64)> {
        if lo > hi {
            return Ok((Vec::new(), 0));
        }
        let (klo, khi) = (Key::below(lo), Key::above(hi));
        let mut left = self.descend(rng, channel, &klo)?;
        let mut right = self.descend(rng, channel, &khi)?;
        for _ in 0..MAX_RETRIES {
            let request = Request::Collect {
                left: left.clone(),
                right: right.clone(),
            };
            match channel::call(channel, &request)? {
                Response::Records(items) => {
                    let mut found = Vec::new();
                    let mut discarded = 0u64;
                    for (node, sealed) in items {
                        let record = self.key.open(AAD, &sealed)?;
                        if record.0 >= lo && record.0 <= hi {
                            found.push((node, sealed, record));
                        } else {
                            discarded += 1;
                        }
                    }
                    return Ok((found, discarded));
                }
                Response::Stale => {
                    left = self.descend(rng, channel, &klo)?;
                    right = self.descend(rng, channel, &khi)?;
                }
                other => return Err(Error::unexpected("POPE", &other)),
            }
        }
        Err(Error::Protocol("POPE tree keeps changing".into()))
    }
}

impl RangeClient for PopeClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn seals_records(&self) -> bool {
        true
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()> {
        let sealed = self.key.seal(io.rng, AAD, value, data)?;
        match channel::call(io.channel, &Request::Insert { sealed })? {
            Response::Done => Ok(()),
            other => Err(Error::unexpected("POPE", &other)),
        }
    }

    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool> {
        let (found, _) = self.locate(io.rng, io.channel, value, value)?;
        let Some((node, sealed, _)) = found.into_iter().find(|(_, _, r)| r.1 == data) else {
            return Ok(false);
        };
        match channel::call(io.channel, &Request::Remove { node, sealed })? {
            Response::Done => Ok(true),
            other => Err(Error::unexpected("POPE", &other)),
        }
    }

    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer> {
        let (found, discarded) = self.locate(io.rng, io.channel, lo, hi)?;
        let records = found.into_iter().map(|(_, _, r)| r).collect();
        Ok(RangeAnswer::from_records(records, discarded))
    }

    fn client_storage_bytes(&self) -> u64 {
        32 + 4 + 4
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            key: *self.key.to_bytes(),
            bits: self.bits,
            l: self.l,
        })
    }
}
