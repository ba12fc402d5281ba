//! Where the buckets live: the [`PathIo`] an access sends its requests
//! through ([`ChannelIo`] over a channel) and the [`PathOramServer`]
//! that keeps them in a store.

use super::*;

/// Where an access sends its two requests: a channel to the server, or
/// the server itself in process (benchmarks of the ORAM logic alone).
pub trait PathIo {
    /// The buckets on the path to `leaf`, root first.
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>>;
    /// Writes the buckets on the path to `leaf`, root first.
    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()>;
    /// Writes consecutive buckets from heap index `first`.
    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()>;
}

/// [`PathIo`] over a [`Channel`]: each call is one round.
pub struct ChannelIo<'a>(pub &'a mut dyn Channel);

fn height_u8(height: u32) -> Result<u8> {
    u8::try_from(height).map_err(|_| Error::InvalidArgument("tree height too large".into()))
}

impl PathIo for ChannelIo<'_> {
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        let request = Request::ReadPath {
            height: height_u8(height)?,
            leaf: leaf.to_be_bytes(),
        };
        match channel::call(self.0, &request)? {
            Response::Path(buckets) => Ok(buckets.into_iter().map(|b| b.map(|b| b.0)).collect()),
            Response::Written => Err(Error::Protocol(
                "Path ORAM server answered Written to ReadPath".into(),
            )),
        }
    }

    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        let request = Request::WritePath {
            height: height_u8(height)?,
            leaf: leaf.to_be_bytes(),
            buckets: buckets.into_iter().map(Bytes).collect(),
        };
        match channel::call(self.0, &request)? {
            Response::Written => Ok(()),
            Response::Path(_) => Err(Error::Protocol(
                "Path ORAM server answered Path to WritePath".into(),
            )),
        }
    }

    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        let request = Request::PutBuckets {
            height: height_u8(height)?,
            first,
            buckets: buckets.into_iter().map(Bytes).collect(),
        };
        match channel::call(self.0, &request)? {
            Response::Written => Ok(()),
            Response::Path(_) => Err(Error::Protocol(
                "Path ORAM server answered Path to PutBuckets".into(),
            )),
        }
    }
}

/// The server half: one store value per bucket, key `b` || index.
pub struct PathOramServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for PathOramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathOramServer").finish_non_exhaustive()
    }
}

impl PathOramServer {
    /// A server keeping its buckets in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        PathOramServer { store }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The buckets on the path to `leaf` (one `get_many`).
    pub fn read(&self, height: u8, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        let h = check_path(height, leaf)?;
        let keys: Vec<[u8; 9]> = (0..=h)
            .map(|l| bucket_key(bucket_index(h, leaf, l)))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        self.store.get_many(&refs)
    }

    /// Writes the buckets on the path to `leaf` (one batch).
    pub fn write(&self, height: u8, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        let h = check_path(height, leaf)?;
        if buckets.len() != h as usize + 1 {
            return Err(Error::InvalidArgument(format!(
                "{} buckets for a path of {} buckets",
                buckets.len(),
                h + 1
            )));
        }
        let mut batch = WriteBatch::with_capacity(buckets.len());
        for (l, bucket) in (0..=h).zip(buckets) {
            batch.put(bucket_key(bucket_index(h, leaf, l)).to_vec(), bucket);
        }
        self.store.write(batch)
    }

    /// Writes consecutive buckets from heap index `first` (one batch).
    pub fn put_buckets(&self, height: u8, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        let h = check_path(height, 0)?;
        let total = (1u64 << (h + 1)) - 1;
        if first
            .checked_add(buckets.len() as u64)
            .is_none_or(|end| end > total)
        {
            return Err(Error::InvalidArgument(format!(
                "buckets {first}.. beyond the {total} buckets of the tree"
            )));
        }
        let mut batch = WriteBatch::with_capacity(buckets.len());
        for (i, bucket) in (first..).zip(buckets) {
            batch.put(bucket_key(i).to_vec(), bucket);
        }
        self.store.write(batch)
    }
}

impl PathIo for PathOramServer {
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        self.read(height_u8(height)?, leaf)
    }

    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        self.write(height_u8(height)?, leaf, buckets)
    }

    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        PathOramServer::put_buckets(self, height_u8(height)?, first, buckets)
    }
}

impl Handler for PathOramServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::ReadPath { height, leaf } => {
                let path = self.read(height, u32::from_be_bytes(leaf))?;
                Ok(Response::Path(
                    path.into_iter().map(|b| b.map(Bytes)).collect(),
                ))
            }
            Request::WritePath {
                height,
                leaf,
                buckets,
            } => {
                let buckets = buckets.into_iter().map(|b| b.0).collect();
                self.write(height, u32::from_be_bytes(leaf), buckets)?;
                Ok(Response::Written)
            }
            Request::PutBuckets {
                height,
                first,
                buckets,
            } => {
                let buckets = buckets.into_iter().map(|b| b.0).collect();
                PathOramServer::put_buckets(self, height, first, buckets)?;
                Ok(Response::Written)
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
