//! The server's view: everything a server half receives, sends and does
//! to its store, in order, as an attacker who controls the server would
//! record it (the input of leakage analysis).
//!
//! Wrap the server half's store in a [`RecordingStore`] and the server
//! half in a [`RecordingService`] sharing one [`View`]; every request and
//! response, and every key read, written, deleted or scanned between
//! them, is appended as an [`Event`]. Recording keeps every request, so it
//! is for research and debugging only: a production server must never run
//! with it.

use std::sync::{Arc, Mutex, PoisonError};

use crate::{IoCounts, Result, Service, Store, WriteBatch, WriteOp};

/// One thing the server saw or did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A request, as the server half received it.
    Request(Vec<u8>),
    /// The response it sent (or the error's text, for a request it
    /// refused).
    Response(Vec<u8>),
    /// A key read, and the size of the value found (`None`: absent).
    Read {
        /// The key.
        key: Vec<u8>,
        /// The value's size, if there was one.
        size: Option<usize>,
    },
    /// A key written, with the value's size.
    Write {
        /// The key.
        key: Vec<u8>,
        /// The value's size.
        size: usize,
    },
    /// A key deleted.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// A prefix scanned, and the number of entries found.
    Scan {
        /// The prefix.
        prefix: Vec<u8>,
        /// Entries found.
        found: usize,
    },
}

/// The recorded events, shared by a [`RecordingStore`] and a
/// [`RecordingService`].
#[derive(Clone, Debug, Default)]
pub struct View {
    events: Arc<Mutex<Vec<Event>>>,
    on: Arc<Mutex<bool>>,
}

impl View {
    /// A view that records nothing until [`View::start`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts (or resumes) recording.
    pub fn start(&self) {
        *self.on.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }

    /// Stops recording (what was recorded stays).
    pub fn stop(&self) {
        *self.on.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }

    /// Takes the events recorded so far.
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn push(&self, make: impl FnOnce() -> Vec<Event>) {
        if *self.on.lock().unwrap_or_else(PoisonError::into_inner) {
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(make());
        }
    }
}

/// A store that records every key its server half touches into a
/// [`View`].
#[derive(Debug)]
pub struct RecordingStore<S: ?Sized> {
    view: View,
    inner: Arc<S>,
}

impl<S: Store + ?Sized> RecordingStore<S> {
    /// `inner`, recorded into `view`.
    pub fn new(inner: Arc<S>, view: View) -> Self {
        RecordingStore { view, inner }
    }
}

/// The events of writing `batch`.
fn write_events(batch: &WriteBatch) -> Vec<Event> {
    batch
        .ops()
        .iter()
        .map(|op| match op {
            WriteOp::Put { key, value } => Event::Write {
                key: key.clone(),
                size: value.len(),
            },
            WriteOp::Delete { key } => Event::Delete { key: key.clone() },
        })
        .collect()
}

impl<S: Store + ?Sized> Store for RecordingStore<S> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let v = self.inner.get(key)?;
        self.view.push(|| {
            vec![Event::Read {
                key: key.to_vec(),
                size: v.as_ref().map(Vec::len),
            }]
        });
        Ok(v)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let values = self.inner.get_many(keys)?;
        self.view.push(|| {
            keys.iter()
                .zip(&values)
                .map(|(k, v)| Event::Read {
                    key: k.to_vec(),
                    size: v.as_ref().map(Vec::len),
                })
                .collect()
        });
        Ok(values)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let events = write_events(&batch);
        self.inner.write(batch)?;
        self.view.push(|| events);
        Ok(())
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let mut events: Vec<Event> = expect
            .iter()
            .map(|(k, v)| Event::Read {
                key: k.to_vec(),
                size: v.map(<[u8]>::len),
            })
            .collect();
        events.extend(write_events(batch));
        let applied = self.inner.write_if(expect, batch)?;
        if applied {
            self.view.push(|| events);
        }
        Ok(applied)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let found = self.inner.scan_prefix(prefix)?;
        self.view.push(|| {
            vec![Event::Scan {
                prefix: prefix.to_vec(),
                found: found.len(),
            }]
        });
        Ok(found)
    }

    crate::store::forward_store_calls! { |s| s.inner;
        fn io_counts(&self) -> IoCounts;
        fn flush(&self) -> Result<()>;
        fn backend(&self) -> &'static str;
    }
}

/// A recording as the attack library reads it
/// ([`sesame_attacks::view::Seen`]): responses by their size, the rest as
/// recorded.
pub fn seen(events: Vec<Event>) -> Vec<sesame_attacks::view::Seen> {
    use sesame_attacks::view::Seen;
    events
        .into_iter()
        .map(|e| match e {
            Event::Request(r) => Seen::Request(r),
            Event::Response(r) => Seen::Response(r.len()),
            Event::Read { key, size } => Seen::Read { key, size },
            Event::Write { key, size } => Seen::Write { key, size },
            Event::Delete { key } => Seen::Delete { key },
            Event::Scan { prefix, found } => Seen::Scan { prefix, found },
        })
        .collect()
}

/// A server half that records its requests and responses into a
/// [`View`] (its store is recorded by a [`RecordingStore`]).
pub struct RecordingService<S> {
    view: View,
    inner: S,
}

impl<S> std::fmt::Debug for RecordingService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingService").finish_non_exhaustive()
    }
}

impl<S: Service> RecordingService<S> {
    /// `inner`, recorded into `view`.
    pub fn new(inner: S, view: View) -> Self {
        RecordingService { view, inner }
    }
}

impl<S: Service> Service for RecordingService<S> {
    fn handle(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        self.view.push(|| vec![Event::Request(request.to_vec())]);
        let response = self.inner.handle(request);
        self.view.push(|| {
            vec![Event::Response(match &response {
                Ok(r) => r.clone(),
                Err(e) => e.to_string().into_bytes(),
            })]
        });
        response
    }

    fn io_counts(&self) -> IoCounts {
        self.inner.io_counts()
    }

    fn write_once(&self) -> bool {
        self.inner.write_once()
    }

    fn packable(&self) -> bool {
        self.inner.packable()
    }
}

/// The requests (`requests`) or the responses among recorded `events`, in
/// order: what a server received or sent, byte for byte.
pub fn messages(events: &[Event], requests: bool) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Request(r) if requests => Some(r.clone()),
            Event::Response(r) if !requests => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The keys written and the keys read (and found) among recorded
/// `events`, of those `entry` says hold index entries (the scheme's public
/// store layout).
pub fn entry_keys(
    events: &[Event],
    entry: fn(&[u8]) -> bool,
) -> (
    std::collections::BTreeSet<Vec<u8>>,
    std::collections::BTreeSet<Vec<u8>>,
) {
    let mut written = std::collections::BTreeSet::new();
    let mut read = std::collections::BTreeSet::new();
    for e in events {
        match e {
            Event::Write { key, .. } if entry(key) => {
                written.insert(key.clone());
            }
            Event::Read { key, size: Some(_) } if entry(key) => {
                read.insert(key.clone());
            }
            _ => {}
        }
    }
    (written, read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Channel;
    use crate::{Handler, LocalChannel, Typed};

    #[test]
    fn messages_and_entry_keys_pick_from_a_recording() {
        let events = vec![
            Event::Request(b"q1".to_vec()),
            Event::Read {
                key: b"e/1".to_vec(),
                size: Some(3),
            },
            Event::Read {
                key: b"e/2".to_vec(),
                size: None,
            },
            Event::Read {
                key: b"m/1".to_vec(),
                size: Some(1),
            },
            Event::Write {
                key: b"e/3".to_vec(),
                size: 4,
            },
            Event::Write {
                key: b"m/2".to_vec(),
                size: 4,
            },
            Event::Response(b"a1".to_vec()),
            Event::Request(b"q2".to_vec()),
        ];
        assert_eq!(
            messages(&events, true),
            vec![b"q1".to_vec(), b"q2".to_vec()]
        );
        assert_eq!(messages(&events, false), vec![b"a1".to_vec()]);
        let (written, read) = entry_keys(&events, |k| k.starts_with(b"e/"));
        assert_eq!(
            written.into_iter().collect::<Vec<_>>(),
            vec![b"e/3".to_vec()]
        );
        // A read that found nothing is not a read of an entry.
        assert_eq!(read.into_iter().collect::<Vec<_>>(), vec![b"e/1".to_vec()]);
    }

    /// A store over a map.
    #[derive(Default)]
    struct Map(Mutex<std::collections::BTreeMap<Vec<u8>, Vec<u8>>>);

    impl Store for Map {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(key)
                .cloned())
        }
        fn write(&self, batch: WriteBatch) -> Result<()> {
            let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            for op in batch.ops() {
                match op {
                    WriteOp::Put { key, value } => {
                        m.insert(key.clone(), value.clone());
                    }
                    WriteOp::Delete { key } => {
                        m.remove(key);
                    }
                }
            }
            Ok(())
        }
        fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            Ok(self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect())
        }
        fn io_counts(&self) -> IoCounts {
            IoCounts::default()
        }
        fn backend(&self) -> &'static str {
            "map"
        }
    }

    /// Puts `value` under `key`, then reads `key`.
    struct PutGet(Arc<dyn Store>);

    impl Handler for PutGet {
        type Request = (Vec<u8>, Vec<u8>);
        type Response = Option<Vec<u8>>;
        fn handle(&mut self, (key, value): (Vec<u8>, Vec<u8>)) -> Result<Option<Vec<u8>>> {
            self.0.put(&key, &value)?;
            self.0.get(&key)
        }
        fn io_counts(&self) -> IoCounts {
            IoCounts::default()
        }
    }

    #[test]
    fn the_view_has_requests_responses_and_keys_in_order() {
        let view = View::new();
        let store: Arc<dyn Store> =
            Arc::new(RecordingStore::new(Arc::new(Map::default()), view.clone()));
        let service = RecordingService::new(Typed(PutGet(store)), view.clone());
        let mut ch = LocalChannel::new(service);
        // Nothing is recorded before start.
        let _: Option<Vec<u8>> =
            crate::channel::call(&mut ch, &(b"k0".to_vec(), b"v".to_vec())).unwrap_or_default();
        assert!(view.take().is_empty());
        view.start();
        let request = crate::wire::encode(&(b"k1".to_vec(), b"abc".to_vec())).unwrap_or_default();
        let response = ch.call(&request).unwrap_or_default();
        let events = view.take();
        assert_eq!(
            events,
            vec![
                Event::Request(request),
                Event::Write {
                    key: b"k1".to_vec(),
                    size: 3
                },
                Event::Read {
                    key: b"k1".to_vec(),
                    size: Some(3)
                },
                Event::Response(response),
            ]
        );
        view.stop();
        let _ = ch.call(&crate::wire::encode(&(b"k2".to_vec(), b"x".to_vec())).unwrap_or_default());
        assert!(view.take().is_empty());
    }
}
