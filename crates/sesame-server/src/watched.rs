//! A store that remembers its failures.
//!
//! The server wraps its store in [`Watched`], which passes every call
//! through and counts the calls that failed in the store itself (an I/O
//! error, damage, a foreign file), keeping the last such message. The
//! count is exported as `sesame_store_errors_total`, and the shutdown line
//! says whether the server ran clean: a final flush that succeeds does not
//! undo the requests that failed before it ([`shutdown_line`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use sesame_core::{Conditional, Error, Result, Store, WriteBatch};

/// A store whose failures are counted. See the [module docs](self).
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    errors: AtomicU64,
    /// Writes the store refused before applying anything (out of space).
    refused: AtomicU64,
    /// Writes that failed without the store confirming them: applied or
    /// not (a Redis Cluster write its replicas did not confirm, a
    /// connection lost during a commit).
    unconfirmed: AtomicU64,
    last: Mutex<Option<String>>,
}

/// The store failures a server met while serving, by what they mean for
/// the requests that met them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// Writes refused before anything was applied (the store out of
    /// space).
    pub refused: u64,
    /// Writes that failed unconfirmed: each may or may not have been
    /// applied; a retry with the same request id completes it or is
    /// answered from its replay record.
    pub unconfirmed: u64,
    /// Failed reads, scans and flushes (they change nothing).
    pub other: u64,
}

impl<S: Store> Watched<S> {
    /// Watches `inner`.
    pub fn new(inner: S) -> Self {
        Watched {
            inner,
            errors: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            unconfirmed: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    /// How many calls failed in the store so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// The failures so far, by kind.
    pub fn failures(&self) -> Failures {
        let refused = self.refused.load(Ordering::Relaxed);
        let unconfirmed = self.unconfirmed.load(Ordering::Relaxed);
        Failures {
            refused,
            unconfirmed,
            other: self.errors().saturating_sub(refused + unconfirmed),
        }
    }

    /// The message of the last call that failed in the store.
    pub fn last_error(&self) -> Option<String> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Counts `r` if it is a failure of the store (not a busy store, which
    /// is a normal answer under load, and not an error of the caller).
    fn seen<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(
            e @ (Error::StoreIo(_)
            | Error::StoreFull(_)
            | Error::StoreUnavailable(_)
            | Error::StoreCorrupt(_)
            | Error::StoreForeign(_)),
        ) = &r
        {
            self.errors.fetch_add(1, Ordering::Relaxed);
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
        }
        r
    }

    /// Counts `r` as [`Watched::seen`] does, and as a write refused (out of
    /// space: nothing applied) or unconfirmed (anything else).
    fn seen_write<T>(&self, r: Result<T>) -> Result<T> {
        let before = self.errors();
        let r = self.seen(r);
        if self.errors() != before {
            if matches!(r, Err(Error::StoreFull(_))) {
                self.refused.fetch_add(1, Ordering::Relaxed);
            } else {
                self.unconfirmed.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }
}

/// Methods of [`Store`] for [`Watched`] that make the same call on the
/// wrapped store and hand its answer to `$watch` (`seen` or
/// `seen_write`): one line per method, the signature and the call made
/// from it.
macro_rules! watched {
    ($watch:ident: $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        fn $name(&self, $($arg: $ty),*) -> $ret {
            self.$watch(self.inner.$name($($arg),*))
        }
    )*};
}

impl<S: Store> Store for Watched<S> {
    watched! { seen:
        fn get(key: &[u8]) -> Result<Option<Vec<u8>>>;
        fn get_many(keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
        fn scan_prefix(prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
        fn scan_from(prefix: &[u8], from: &[u8], descending: bool, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
        fn flush() -> Result<()>;
    }
    watched! { seen_write:
        fn write(batch: WriteBatch) -> Result<()>;
        fn write_if(expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool>;
        fn write_if_group(group: &[Conditional<'_>]) -> Result<Vec<bool>>;
    }
    // A health probe that fails is a report, not a failed request: it
    // and the rest pass through uncounted.
    sesame_store::forward_store!(|s| s.inner; commit_groups, ordered_probes, io_counts, backend, health, verify);
}

/// The server's last log line: whether the final flush succeeded, and
/// whether store operations failed while it served (`failures`, with the
/// last message) or the store is unhealthy now (`health`). A write the
/// store refused (out of space) was not applied; one that failed
/// unconfirmed (its replicas did not confirm it, the connection broke
/// during the commit) may have been, and the line says so.
pub fn shutdown_line(failures: Failures, last: Option<&str>, health: &Result<()>) -> String {
    let mut line = String::from("stopped; the final flush succeeded");
    let errors = failures.refused + failures.unconfirmed + failures.other;
    if errors == 0 && health.is_ok() {
        line.push_str(" and no store operation failed while serving");
        return line;
    }
    if errors > 0 {
        let s = |n: u64| if n == 1 { "" } else { "s" };
        let mut parts = Vec::new();
        if failures.refused > 0 {
            let n = failures.refused;
            parts.push(format!("{n} write{} refused (not applied)", s(n)));
        }
        if failures.unconfirmed > 0 {
            let n = failures.unconfirmed;
            parts.push(format!(
                "{n} write{} not confirmed by the store (each may have been applied: a \
                 client's retry with the same request id completes it or gets its first answer)",
                s(n)
            ));
        }
        if failures.other > 0 {
            let n = failures.other;
            parts.push(format!("{n} read{} (nothing changed)", s(n)));
        }
        line.push_str(&format!(
            ", but {errors} store operation{} failed while serving: {}",
            s(errors),
            parts.join(", ")
        ));
        if let Some(last) = last {
            line.push_str(&format!("; the last: {last}"));
        }
    }
    if let Err(e) = health {
        line.push_str(&format!("; the store is unhealthy now: {e}"));
    }
    line.push_str("; see the store errors logged above");
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_core::IoCounts;
    use sesame_store::MemoryStore;

    /// Fails every write with a full disk, a busy store, or (`unconfirmed`)
    /// a write its replicas did not confirm.
    struct Failing {
        busy: bool,
        unconfirmed: bool,
    }

    impl Store for Failing {
        fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
        fn write(&self, _: WriteBatch) -> Result<()> {
            if self.busy {
                Err(Error::StoreBusy("locked".into()))
            } else if self.unconfirmed {
                Err(Error::StoreUnavailable(
                    "the write reached the master but only 0 of 1 replicas".into(),
                ))
            } else {
                Err(Error::StoreFull(
                    "No space left on device (os error 28)".into(),
                ))
            }
        }
        fn scan_prefix(&self, _: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            Ok(Vec::new())
        }
        fn io_counts(&self) -> IoCounts {
            IoCounts::default()
        }
        fn backend(&self) -> &'static str {
            "failing"
        }
    }

    #[test]
    fn failures_of_the_store_are_counted_and_the_last_is_kept() {
        let w = Watched::new(Failing {
            busy: false,
            unconfirmed: false,
        });
        assert!(w.put(b"k", b"v").is_err());
        assert!(w.get(b"k").is_ok());
        assert!(w.delete(b"k").is_err());
        assert_eq!(w.errors(), 2);
        assert!(w.last_error().is_some_and(|m| m.contains("os error 28")));
    }

    #[test]
    fn a_busy_store_and_successes_are_not_failures() {
        let w = Watched::new(Failing {
            busy: true,
            unconfirmed: false,
        });
        assert!(w.put(b"k", b"v").is_err());
        let ok = Watched::new(MemoryStore::new());
        ok.put(b"k", b"v").unwrap();
        assert_eq!(ok.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!((w.errors(), ok.errors()), (0, 0));
        assert_eq!(w.last_error(), None);
    }

    /// Packed indexes probe the store on every lookup: the wrapper passes
    /// the bounded probe through and says so. Without the forwarding each
    /// probe was the default's full scan (an Aura add over the server
    /// timed out); here it would return three pairs to the store's count.
    #[test]
    fn bounded_probes_pass_through() {
        let w = Watched::new(MemoryStore::new());
        for k in [b"a1", b"a2", b"a3", b"b1"] {
            w.put(k, b"v").unwrap();
        }
        assert!(w.ordered_probes());
        let before = w.io_counts();
        let got = w.scan_from(b"a", b"a2", true, 1).unwrap();
        assert_eq!(got, vec![(b"a2".to_vec(), b"v".to_vec())]);
        let counts = w.io_counts().since(&before);
        assert_eq!((counts.scans, counts.scanned), (1, 1));
        assert!(!Watched::new(Failing {
            busy: false,
            unconfirmed: false
        })
        .ordered_probes());
    }

    #[test]
    fn the_shutdown_line_tells_a_clean_run_from_one_with_store_errors() {
        let clean = shutdown_line(Failures::default(), None, &Ok(()));
        assert!(clean.contains("no store operation failed"), "{clean}");
        let three = Failures {
            refused: 3,
            ..Failures::default()
        };
        let failed = shutdown_line(three, Some("disk full"), &Ok(()));
        assert!(failed.contains("but 3 store operations failed"), "{failed}");
        assert!(failed.contains("the last: disk full"), "{failed}");
        assert!(!failed.contains("no store operation failed"), "{failed}");
        let sick = shutdown_line(
            Failures::default(),
            None,
            &Err(Error::StoreIo("gone".into())),
        );
        assert!(sick.contains("unhealthy now"), "{sick}");
        assert!(!sick.contains("no store operation failed"), "{sick}");
    }

    /// A write the store applied but whose replica confirmation failed is
    /// not reported as "not applied": only refused writes are.
    #[test]
    fn the_shutdown_line_does_not_call_unconfirmed_writes_not_applied() {
        let w = Watched::new(Failing {
            busy: false,
            unconfirmed: true,
        });
        assert!(w.put(b"k", b"v").is_err());
        let line = shutdown_line(w.failures(), w.last_error().as_deref(), &Ok(()));
        assert!(!line.contains("not applied"), "{line}");
        assert!(line.contains("may have been applied"), "{line}");
        let full = Watched::new(Failing {
            busy: false,
            unconfirmed: false,
        });
        assert!(full.put(b"k", b"v").is_err());
        let line = shutdown_line(full.failures(), full.last_error().as_deref(), &Ok(()));
        assert!(line.contains("1 write refused (not applied)"), "{line}");
    }
}
