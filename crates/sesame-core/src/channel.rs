//! Channels: how a scheme's client half talks to its server half.
//!
//! A [`Channel`] carries one encoded request to a server and brings back
//! its encoded response; each call is one round. The same scheme code runs
//! over [`LocalChannel`] (in-process: tests and benchmarks) and over the
//! network, because a scheme sees only this trait. Every byte is counted:
//! the in-process channel really encodes and decodes each message.

use std::time::Instant;

use rand_core::CryptoRngCore;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};
use crate::meter::{Meter, ServerReport};
use crate::store::IoCounts;
use crate::wire;

/// The server half of a protocol, as the transport sees it: bytes in, bytes
/// out, one request at a time.
pub trait Service: Send {
    /// Handles one encoded request.
    fn handle(&mut self, request: &[u8]) -> Result<Vec<u8>>;

    /// Store operations made so far, for metering.
    fn io_counts(&self) -> IoCounts;

    /// Whether every key this server writes keeps the first value written
    /// under it (deletions aside). The host then refuses a write that would
    /// change a stored value as a conflict (two clients updating from the
    /// same state, a stale update sent again) instead of overwriting it.
    /// Servers that rewrite entries (re-encryption, merges, refreshes) say
    /// `false`, the default.
    fn write_once(&self) -> bool {
        false
    }

    /// Whether the host may keep this server's pairs packed, many to a
    /// stored value (`sesame_store::packed`): the server reads its pairs
    /// by point lookups of keys that do not cluster (pseudorandom labels),
    /// so one probe per lookup finds them as fast, and batches of new
    /// pairs cost one stored value per few kilobytes instead of one per
    /// pair. `false`, the default, keeps one stored pair per pair.
    fn packable(&self) -> bool {
        false
    }
}

impl<S: Service + ?Sized> Service for Box<S> {
    fn handle(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        (**self).handle(request)
    }

    fn io_counts(&self) -> IoCounts {
        (**self).io_counts()
    }

    fn write_once(&self) -> bool {
        (**self).write_once()
    }

    fn packable(&self) -> bool {
        (**self).packable()
    }
}

/// A typed server half: a scheme's `Server` implements this, and
/// [`Typed`] turns it into a [`Service`].
pub trait Handler: Send {
    /// The scheme's request type.
    type Request: DeserializeOwned;
    /// The scheme's response type.
    type Response: Serialize;

    /// Answers one request.
    fn handle(&mut self, request: Self::Request) -> Result<Self::Response>;

    /// Store operations made so far, for metering.
    fn io_counts(&self) -> IoCounts;

    /// See [`Service::write_once`]; `false` by default.
    fn write_once(&self) -> bool {
        false
    }

    /// See [`Service::packable`]; `false` by default.
    fn packable(&self) -> bool {
        false
    }
}

/// Adapts a [`Handler`] to a [`Service`] with the wire encoding.
#[derive(Debug)]
pub struct Typed<H>(pub H);

impl<H: Handler> Service for Typed<H> {
    fn handle(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let request = wire::decode(request)?;
        let response = self.0.handle(request)?;
        wire::encode(&response)
    }

    fn io_counts(&self) -> IoCounts {
        self.0.io_counts()
    }

    fn write_once(&self) -> bool {
        self.0.write_once()
    }

    fn packable(&self) -> bool {
        self.0.packable()
    }
}

/// A client's link to a server.
pub trait Channel {
    /// Sends one encoded request and returns the encoded response.
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>>;

    /// The meter this channel reports to.
    fn meter(&self) -> &Meter;
}

impl<C: Channel + ?Sized> Channel for &mut C {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        (**self).call(request)
    }
    fn meter(&self) -> &Meter {
        (**self).meter()
    }
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        (**self).call(request)
    }
    fn meter(&self) -> &Meter {
        (**self).meter()
    }
}

/// Encodes `request`, sends it, and decodes the response.
///
/// A response that does not decode as `Resp` is [`Error::Malformed`]; the
/// server's data is never trusted.
pub fn call<Req, Resp, C>(channel: &mut C, request: &Req) -> Result<Resp>
where
    Req: Serialize + ?Sized,
    Resp: DeserializeOwned,
    C: Channel + ?Sized,
{
    let bytes = wire::encode(request)?;
    let response = channel.call(&bytes)?;
    wire::decode(&response)
}

/// What the server observed in one round, for leakage analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Index of the round, from 0.
    pub round: u64,
    /// The request bytes as the server received them.
    pub request: Vec<u8>,
    /// Size of the response.
    pub response_len: usize,
    /// Store operations the request caused.
    pub io: IoCounts,
}

/// An in-process channel: runs the server half on the caller's thread.
///
/// Each call counts the request and response bytes, one round, the
/// server's handling time, its store operations and its primitive calls.
/// A server error reaches the client as [`Error::Server`], as it would over
/// the network, except the store's own errors ([`Error::StoreIo`],
/// [`Error::StoreFull`], [`Error::StoreUnavailable`],
/// [`Error::StoreCorrupt`], [`Error::StoreBusy`], [`Error::StoreForeign`]),
/// which pass unchanged: in process the store is the caller's own (an
/// embedded profile's file), and its errors say what to do about it.
#[derive(Debug)]
pub struct LocalChannel<S> {
    service: S,
    meter: Meter,
    transcript: Option<Vec<Observation>>,
    rounds: u64,
}

impl<S: Service> LocalChannel<S> {
    /// A channel to `service` reporting to a fresh meter.
    pub fn new(service: S) -> Self {
        Self::with_meter(service, Meter::new())
    }

    /// A channel to `service` reporting to `meter`.
    pub fn with_meter(service: S, meter: Meter) -> Self {
        Self {
            service,
            meter,
            transcript: None,
            rounds: 0,
        }
    }

    /// Starts recording what the server observes.
    pub fn record_transcript(&mut self) {
        self.transcript.get_or_insert_with(Vec::new);
    }

    /// Takes the recorded observations.
    pub fn take_transcript(&mut self) -> Vec<Observation> {
        self.transcript
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The server half.
    pub fn service(&self) -> &S {
        &self.service
    }

    /// The server half, mutably.
    pub fn service_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// Consumes the channel into its server half.
    pub fn into_service(self) -> S {
        self.service
    }
}

impl<S: Service> Channel for LocalChannel<S> {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let start = Instant::now();
        let service = &mut self.service;
        let (result, report) = {
            let io = std::cell::RefCell::new(&mut *service);
            ServerReport::measure(
                || io.borrow().io_counts(),
                || io.borrow_mut().handle(request),
            )
        };
        let io = report.io;
        let response = result.map_err(|e| match e {
            e @ (Error::Server(_)
            | Error::StoreIo(_)
            | Error::StoreFull(_)
            | Error::StoreUnavailable(_)
            | Error::StoreCorrupt(_)
            | Error::StoreBusy(_)
            | Error::StoreForeign(_)) => e,
            other => Error::Server(other.to_string()),
        });
        let down = match &response {
            Ok(r) => r.len(),
            Err(e) => e.to_string().len(),
        };
        self.meter
            .record_round(request.len(), down, start.elapsed());
        self.meter.record_server(&report, true);
        if let Some(t) = &mut self.transcript {
            t.push(Observation {
                round: self.rounds,
                request: request.to_vec(),
                response_len: down,
                io,
            });
        }
        self.rounds += 1;
        response
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}

/// The randomness and the channel one step of a client runs with: what
/// every keyword scheme's and range protocol's step takes (`sesame-sse`
/// and `sesame-range` re-export it from their `api` modules).
pub struct Io<'a> {
    /// The client's randomness.
    pub rng: &'a mut dyn CryptoRngCore,
    /// The channel to the server half.
    pub channel: &'a mut dyn Channel,
}

impl Io<'_> {
    /// The same randomness and channel for a nested step.
    pub fn reborrow(&mut self) -> Io<'_> {
        Io {
            rng: &mut *self.rng,
            channel: &mut *self.channel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use sesame_crypto::counter::{record, Primitive};

    #[derive(Serialize, Deserialize)]
    enum Req {
        Echo(Vec<u8>),
        Fail,
    }

    struct EchoServer;

    impl Handler for EchoServer {
        type Request = Req;
        type Response = Vec<u8>;
        fn handle(&mut self, r: Req) -> Result<Vec<u8>> {
            record(Primitive::Hash, 1);
            match r {
                Req::Echo(v) => Ok(v),
                Req::Fail => Err(Error::InvalidArgument("no".into())),
            }
        }
        fn io_counts(&self) -> IoCounts {
            IoCounts::default()
        }
    }

    #[test]
    fn local_channel_counts_encoded_bytes_and_rounds() {
        let mut ch = LocalChannel::new(Typed(EchoServer));
        ch.record_transcript();
        let span = ch.meter().span();
        let out: Vec<u8> = call(&mut ch, &Req::Echo(vec![7; 100])).unwrap();
        assert_eq!(out, vec![7; 100]);
        let s = span.finish();
        // version byte + variant + length + 100 bytes.
        assert_eq!(s.bytes_up, 103);
        assert_eq!(s.bytes_down, 102);
        assert_eq!(s.rounds, 1);
        assert_eq!(s.server_primitives.total(Primitive::Hash), 1);
        assert_eq!(s.client_primitives.total(Primitive::Hash), 0);
        assert_eq!(ch.take_transcript().len(), 1);
    }

    #[test]
    fn server_errors_and_garbage_reach_the_client_as_errors() {
        let mut ch = LocalChannel::new(Typed(EchoServer));
        let r: Result<Vec<u8>> = call(&mut ch, &Req::Fail);
        assert!(matches!(r, Err(Error::Server(_))));
        assert!(matches!(ch.call(&[9, 9, 9]), Err(Error::Server(_))));
        // A response that is not the expected type.
        let r: Result<(u64, u64, u64)> = call(&mut ch, &Req::Echo(vec![]));
        assert!(matches!(r, Err(Error::Malformed(_))));
    }
}
