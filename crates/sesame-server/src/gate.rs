//! Who may hold a connection: the places of the accept loop
//! ([`crate::accept`]), per server and per peer address, and what each
//! connection has shown of itself.
//!
//! - at most `max_connections` connections are open, and at most
//!   `max_connections_per_peer` from one IP address: over the per-peer
//!   limit a new connection takes the place of that address's oldest
//!   unauthenticated connection (closed), or is closed at once when every
//!   connection from that address has presented a valid token;
//! - a connection is *unauthenticated* until a request on it carries a
//!   valid token ([`ConnState::authenticated`], set by the service);
//! - when every place is taken, a new connection takes the place of the
//!   oldest unauthenticated one, which is closed; only when every open
//!   connection has shown a valid token is a new one closed at once. A
//!   flood of connections that never present a token therefore cannot
//!   lock out clients that do: their connections are never evicted, and a
//!   new one gets a place;
//! - an unauthenticated connection is closed `auth_timeout` after it was
//!   accepted, whatever it sends.
//!
//! Requests count as activity, not bytes: HTTP/2 pings and settings keep
//! no connection open past the idle deadline ([`FrameWatch`]).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::Instant;

/// What one connection has shown: whether a request carried a valid
/// token, its requests in flight and the time of the last one; and
/// whether it was evicted.
#[derive(Debug)]
pub struct ConnState {
    seq: u64,
    peer: IpAddr,
    accepted: Instant,
    authenticated: AtomicBool,
    in_flight: AtomicUsize,
    /// Milliseconds after `accepted` of the last request's start or end.
    last_request_ms: AtomicU64,
    evicted: AtomicBool,
    released: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// The peer's address.
    pub fn peer(&self) -> IpAddr {
        self.peer
    }

    /// Whether a request on this connection carried a valid token.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    /// When it was accepted.
    pub fn accepted(&self) -> Instant {
        self.accepted
    }

    /// A request starts on this connection (`authenticated`: it carries a
    /// valid token); the guard ends it.
    pub fn request(self: &Arc<Self>, authenticated: bool) -> RequestGuard {
        if authenticated {
            self.authenticated.store(true, Ordering::Release);
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        RequestGuard(self.clone())
    }

    /// Records activity now (a request, or its body's frames).
    pub fn touch(&self) {
        let ms = u64::try_from(self.accepted.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_request_ms.store(ms, Ordering::Release);
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The time of the last activity.
    pub fn last_request(&self) -> Instant {
        self.accepted
            + std::time::Duration::from_millis(self.last_request_ms.load(Ordering::Acquire))
    }

    /// Whether it was evicted (its place given to a newer connection).
    /// Until it is, `cx` is woken when it is.
    pub fn poll_evicted(&self, cx: &mut Context<'_>) -> bool {
        if self.evicted.load(Ordering::Acquire) {
            return true;
        }
        *self.waker.lock().unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
        self.evicted.load(Ordering::Acquire)
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        if let Some(w) = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            w.wake();
        }
    }
}

/// A request in flight on a connection.
#[derive(Debug)]
pub struct RequestGuard(Arc<ConnState>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug, Default)]
struct Places {
    per_peer: HashMap<IpAddr, usize>,
    /// Every connection holding a place, oldest first.
    open: BTreeMap<u64, Arc<ConnState>>,
    next: u64,
}

/// The places of one listener. See the [module docs](self).
#[derive(Debug)]
pub struct Gate {
    max_connections: usize,
    max_per_peer: usize,
    places: Mutex<Places>,
}

/// Why a connection was not given a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its peer address holds its limit.
    PerPeer,
    /// Every place is held by a connection that presented a valid token.
    Full,
}

impl Gate {
    /// Places for `max_connections` connections, `max_per_peer` from one
    /// address (both at least 1).
    pub fn new(max_connections: usize, max_per_peer: usize) -> Arc<Self> {
        Arc::new(Gate {
            max_connections: max_connections.max(1),
            max_per_peer: max_per_peer.max(1),
            places: Mutex::new(Places::default()),
        })
    }

    /// A place for a connection from `peer`, taking that of the oldest
    /// unauthenticated connection (which is closed) when all are held.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Place, Refused> {
        let mut places = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        if places.per_peer.get(&peer).copied().unwrap_or(0) >= self.max_per_peer {
            // The peer's own oldest connection without a token makes room
            // (clients behind one address with a flood among them).
            let oldest = places
                .open
                .values()
                .find(|c| c.peer == peer && !c.is_authenticated())
                .cloned()
                .ok_or(Refused::PerPeer)?;
            Self::release_locked(&mut places, &oldest);
            oldest.evict();
        }
        if places.open.len() >= self.max_connections {
            let oldest = places
                .open
                .values()
                .find(|c| !c.is_authenticated())
                .cloned()
                .ok_or(Refused::Full)?;
            Self::release_locked(&mut places, &oldest);
            oldest.evict();
        }
        let seq = places.next;
        places.next += 1;
        let state = Arc::new(ConnState {
            seq,
            peer,
            accepted: Instant::now(),
            authenticated: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            last_request_ms: AtomicU64::new(0),
            evicted: AtomicBool::new(false),
            released: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        places.open.insert(seq, state.clone());
        *places.per_peer.entry(peer).or_default() += 1;
        Ok(Place {
            gate: self.clone(),
            state,
        })
    }

    /// Connections holding a place now.
    pub fn open(&self) -> usize {
        self.places
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .len()
    }

    fn release_locked(places: &mut Places, state: &ConnState) {
        if state.released.swap(true, Ordering::AcqRel) {
            return;
        }
        places.open.remove(&state.seq);
        if let Some(n) = places.per_peer.get_mut(&state.peer) {
            *n -= 1;
            if *n == 0 {
                places.per_peer.remove(&state.peer);
            }
        }
    }
}

/// A connection's place; given back when dropped.
#[derive(Debug)]
pub struct Place {
    gate: Arc<Gate>,
    state: Arc<ConnState>,
}

impl Place {
    /// The connection's state.
    pub fn state(&self) -> &Arc<ConnState> {
        &self.state
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut places = self
            .gate
            .places
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Gate::release_locked(&mut places, &self.state);
    }
}

/// Follows the HTTP/2 frames a client sends (after the 24-byte
/// preface) and tells when a frame that belongs to a request starts:
/// `HEADERS` (a new request) or `DATA` (its body). Pings, settings and
/// window updates are not activity.
#[derive(Debug)]
pub struct FrameWatch {
    /// Bytes of the preface still to skip.
    preface: usize,
    /// Bytes of the current frame's header read so far.
    header: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to skip.
    payload: usize,
}

impl Default for FrameWatch {
    fn default() -> Self {
        FrameWatch {
            preface: 24,
            header: [0; 9],
            have: 0,
            payload: 0,
        }
    }
}

impl FrameWatch {
    /// Reads `bytes` (the next the client sent); whether a request frame
    /// started in them.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        let mut request = false;
        while !bytes.is_empty() {
            if self.preface > 0 {
                let n = self.preface.min(bytes.len());
                self.preface -= n;
                bytes = &bytes[n..];
            } else if self.payload > 0 {
                let n = self.payload.min(bytes.len());
                self.payload -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == 9 {
                    self.have = 0;
                    let h = self.header;
                    self.payload =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    // 0x0 DATA, 0x1 HEADERS.
                    if h[3] <= 1 {
                        request = true;
                    }
                }
            }
        }
        request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, len: usize) -> Vec<u8> {
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            0,
            0,
            0,
            0,
            1,
        ];
        f.extend(std::iter::repeat_n(0, len));
        f
    }

    #[test]
    fn only_headers_and_data_frames_are_requests() {
        let mut w = FrameWatch::default();
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 12)); // SETTINGS
        assert!(!w.feed(&bytes));
        for _ in 0..3 {
            assert!(!w.feed(&frame(0x6, 8))); // PING
            assert!(!w.feed(&frame(0x8, 4))); // WINDOW_UPDATE
        }
        // A HEADERS frame fed one byte at a time.
        let headers = frame(0x1, 40);
        let seen: Vec<bool> = headers.iter().map(|b| w.feed(&[*b])).collect();
        assert_eq!(seen.iter().filter(|s| **s).count(), 1);
        assert!(w.feed(&frame(0x0, 100)));
        assert!(!w.feed(&frame(0x6, 8)));
    }

    #[test]
    fn per_peer_limits_and_eviction_of_the_oldest_unauthenticated() {
        let evicted = |p: &Option<Place>| {
            p.as_ref()
                .is_some_and(|p| p.state().evicted.load(Ordering::Acquire))
        };
        let gate = Gate::new(3, 2);
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let c = IpAddr::from([10, 0, 0, 3]);
        // Two from `a`; the second presents a token, the first does not: a
        // third from `a` takes the first's place, a fourth is refused.
        let a1 = gate.admit(a).ok();
        let a2 = gate.admit(a).ok();
        let _r2 = a2.as_ref().map(|p| p.state().request(true));
        let a3 = gate.admit(a).ok();
        assert!(evicted(&a1) && a3.is_some());
        let _r3 = a3.as_ref().map(|p| p.state().request(true));
        assert_eq!(gate.admit(a).err(), Some(Refused::PerPeer));
        // The server is full with `b`'s, which has no token: `c` takes
        // its place; then every place holds a token and `c` is refused.
        let b1 = gate.admit(b).ok();
        assert_eq!(gate.open(), 3);
        let c1 = gate.admit(c).ok();
        assert!(evicted(&b1) && c1.is_some());
        assert_eq!(gate.open(), 3);
        let _rc = c1.as_ref().map(|p| p.state().request(true));
        assert_eq!(gate.admit(c).err(), Some(Refused::Full));
        // Places are given back once, when dropped or evicted.
        drop((a1, b1));
        assert_eq!(gate.open(), 3);
        drop(c1);
        assert!(gate.admit(c).is_ok());
    }
}
