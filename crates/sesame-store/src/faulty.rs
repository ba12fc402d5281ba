//! A memory store whose writes fail on demand, for tests of what a failed
//! write leaves behind (feature `test-suite`).

use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sesame_core::{Result, Store, WriteBatch};

use crate::MemoryStore;

/// How a failing write fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The write is refused and nothing is applied (a full disk).
    Refused,
    /// The write is applied and then reported failed (the answer is lost,
    /// as over a connection that drops).
    AnswerLost,
    /// The write is applied and then reported unavailable, as a Redis
    /// Cluster write whose replica did not confirm it
    /// ([`sesame_core::Error::StoreUnavailable`]: the caller sends it
    /// again).
    Unconfirmed,
}

/// A hook that sees every write before it is applied; its error refuses
/// the write.
pub type WriteHook = Arc<dyn Fn(&WriteBatch) -> Result<()> + Send + Sync>;

/// A [`MemoryStore`] whose writes, once [`FaultyStore::fail`] is called,
/// fail after a countdown with "No space left on device", until
/// [`FaultyStore::heal`]; and whose writes a test can watch, delay or
/// refuse one by one ([`FaultyStore::on_write`]).
pub struct FaultyStore {
    inner: MemoryStore,
    /// 0: writes work; 1: [`Fault::Refused`]; 2: [`Fault::AnswerLost`];
    /// 3: [`Fault::Unconfirmed`].
    mode: AtomicU8,
    /// Writes that still succeed before the fault applies (-1: none).
    countdown: AtomicI64,
    /// Writes the fault still applies to before the store heals (-1:
    /// every one).
    times: AtomicI64,
    hook: Mutex<Option<WriteHook>>,
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("inner", &self.inner)
            .field("mode", &self.mode)
            .field("countdown", &self.countdown)
            .finish_non_exhaustive()
    }
}

impl Default for FaultyStore {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultyStore {
    /// An empty store whose writes work.
    pub fn new() -> Self {
        FaultyStore {
            inner: MemoryStore::new(),
            mode: AtomicU8::new(0),
            countdown: AtomicI64::new(-1),
            times: AtomicI64::new(-1),
            hook: Mutex::new(None),
        }
    }

    /// From now on, `hook` sees every write first (from any thread); an
    /// error it returns refuses the write, and nothing of it is applied.
    pub fn on_write(&self, hook: impl Fn(&WriteBatch) -> Result<()> + Send + Sync + 'static) {
        *self.hook.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(hook));
    }

    /// From now on, after `after` more writes succeed, every write fails
    /// with `fault`.
    pub fn fail(&self, fault: Fault, after: i64) {
        self.fail_times(fault, after, -1);
    }

    /// As [`FaultyStore::fail`], for `times` writes only (then writes work
    /// again; -1: until [`FaultyStore::heal`]).
    pub fn fail_times(&self, fault: Fault, after: i64, times: i64) {
        self.countdown.store(after, Ordering::SeqCst);
        self.times.store(times, Ordering::SeqCst);
        self.mode.store(
            match fault {
                Fault::Refused => 1,
                Fault::AnswerLost => 2,
                Fault::Unconfirmed => 3,
            },
            Ordering::SeqCst,
        );
    }

    /// The store underneath, whose writes never fail (to damage or inspect
    /// what the code under test wrote).
    pub fn inner(&self) -> &MemoryStore {
        &self.inner
    }

    /// Writes work again.
    pub fn heal(&self) {
        self.mode.store(0, Ordering::SeqCst);
    }
}

impl Store for FaultyStore {
    crate::forward_store!(|s| s.inner;
        get, get_many, scan_prefix, scan_from, ordered_probes, io_counts);
    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_if(&[], &batch).map(|_| ())
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let hook = self
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(hook) = hook {
            hook(batch)?;
        }
        let mode = self.mode.load(Ordering::SeqCst);
        if mode != 0 && self.countdown.fetch_sub(1, Ordering::SeqCst) <= 0 {
            if self.times.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.heal();
            }
            if mode == 3 {
                // A conditional write whose condition fails is answered
                // as it is: nothing was applied to confirm.
                if !self.inner.write_if(expect, batch)? {
                    return Ok(false);
                }
                return Err(sesame_core::Error::StoreUnavailable(
                    "the write reached the master but only 0 of 1 replicas within 1000 ms; \
                     it may be lost if that master fails now (retry the request)"
                        .into(),
                ));
            }
            if mode == 2 {
                self.inner.write_if(expect, batch)?;
            }
            return Err(sesame_core::Error::StoreFull(
                "write: No space left on device (os error 28)".into(),
            ));
        }
        self.inner.write_if(expect, batch)
    }
    fn backend(&self) -> &'static str {
        "faulty-memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_refuse_or_lose_the_answer_after_the_countdown() {
        let s = FaultyStore::new();
        s.fail(Fault::Refused, 1);
        assert!(s.put(b"a", b"1").is_ok());
        assert!(s.put(b"b", b"2").is_err());
        assert_eq!(s.get(b"b").ok().flatten(), None);
        s.fail(Fault::AnswerLost, 0);
        assert!(s.put(b"c", b"3").is_err());
        assert_eq!(s.get(b"c").ok().flatten(), Some(b"3".to_vec()));
        s.heal();
        assert!(s.put(b"d", b"4").is_ok());
        // Once: applied, reported unavailable; then writes work again.
        s.fail_times(Fault::Unconfirmed, 0, 1);
        assert!(matches!(
            s.put(b"u", b"1"),
            Err(sesame_core::Error::StoreUnavailable(_))
        ));
        assert_eq!(s.get(b"u").ok().flatten(), Some(b"1".to_vec()));
        assert!(s.put(b"v", b"2").is_ok());
        // A hook refuses what it errs on; nothing of that write is applied.
        s.on_write(|b| {
            if b.len() > 1 {
                Err(sesame_core::Error::StoreFull("hook".into()))
            } else {
                Ok(())
            }
        });
        let mut two = WriteBatch::new();
        two.put(b"e".as_slice(), b"5".as_slice())
            .put(b"f".as_slice(), b"6".as_slice());
        assert!(s.write(two).is_err());
        assert_eq!(s.get(b"e").ok().flatten(), None);
        assert!(s.put(b"g", b"7").is_ok());
    }
}
