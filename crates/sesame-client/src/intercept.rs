//! A backend that hands every call to another, except the calls a hook
//! takes.
//!
//! Tests and tools that play a misbehaving server or connection change one
//! or two calls of a real backend: a verified group's answers altered on
//! their way back, a connection that dies after N updates, a count of the
//! state bytes written. [`Intercepted`] forwards the whole of [`Backend`]
//! to the backend it wraps, and a [`Hook`] overrides only the calls it
//! changes. A wrapper written out by hand forwards only the methods it
//! names, and a provided method it forgets silently takes the trait's
//! default instead of the wrapped backend's: here a method added to
//! [`Backend`] is forwarded once, for every wrapper.
//!
//! What a hook sees are the calls made on the backend. A call the wrapped
//! backend makes of itself (an embedded setup channel opening its index
//! channel) is not seen. [`Backend::apply_update`] goes through
//! [`Hook::update_job`], as the trait's default does; that hook is handed
//! the call's arguments as one [`Update`], which [`Update::send`] passes
//! on unchanged. The hooked calls and the forwarded ones are each listed
//! once, by signature, and the methods are made from those lists.

use std::sync::Arc;

use sesame_core::{Channel, Meter, Params, Service, Store};
use sesame_sse::KeywordScheme;
use sesame_store::Space;

use crate::backend::{Backend, IndexRecord, IndexRecordWrite, SetupChannel, UpdateJob};
use crate::error::Result;

/// A hosted protocol's server half over a store, as
/// [`Backend::hosted_channel`] takes it.
pub type ServerHalf<'a> = &'a dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>;

/// The arguments of a [`Backend::update_job`] call, as a [`Hook`] is
/// handed them.
pub struct Update<'a> {
    /// The index.
    pub index: &'a str,
    /// Its generation.
    pub generation: u64,
    /// Its keyword scheme.
    pub scheme: &'a KeywordScheme,
    /// The pending intent the requests belong to.
    pub id: [u8; 16],
    /// The requests, in order.
    pub requests: Vec<Vec<u8>>,
}

impl Update<'_> {
    /// Makes the call on `inner` (the wrapped backend), unchanged.
    pub fn send(self, inner: &mut dyn Backend) -> Result<UpdateJob> {
        inner.update_job(
            self.index,
            self.generation,
            self.scheme,
            self.id,
            self.requests,
        )
    }
}

/// Declares [`Hook`] with one method per call of [`Backend`] it may take
/// (each default makes the call on the wrapped backend, unchanged), and
/// `hooked!`, the methods of [`Intercepted`] that hand those calls to the
/// hook: one list of signatures for both.
macro_rules! hooks {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        /// The calls an [`Intercepted`] backend lets a hook take. Each
        /// default makes the call on `inner`, the wrapped backend,
        /// unchanged.
        pub trait Hook {
            $($(#[$doc])*
            fn $name(&mut self, inner: &mut dyn Backend, $($arg: $ty),*) -> $ret {
                inner.$name($($arg),*)
            })*

            /// [`Backend::update_job`] (and so [`Backend::apply_update`]).
            fn update_job(&mut self, inner: &mut dyn Backend, update: Update<'_>) -> Result<UpdateJob> {
                update.send(inner)
            }
        }

        macro_rules! hooked {
            () => {$(
                fn $name(&mut self, $($arg: $ty),*) -> $ret {
                    self.hook.$name(self.inner.as_mut(), $($arg),*)
                }
            )*
            fn update_job(&mut self, index: &str, generation: u64, scheme: &KeywordScheme, id: [u8; 16], requests: Vec<Vec<u8>>) -> Result<UpdateJob> {
                let update = Update { index, generation, scheme, id, requests };
                self.hook.update_job(self.inner.as_mut(), update)
            }};
        }
    };
}

hooks! {
    /// [`Backend::index_channel`].
    fn index_channel(index: &str, generation: u64, scheme: &KeywordScheme) -> Result<Box<dyn Channel>>;
    /// [`Backend::read_channel`].
    fn read_channel(index: &str, generation: u64, scheme: &KeywordScheme) -> Result<Box<dyn Channel>>;
    /// [`Backend::document_channel`].
    fn document_channel(index: &str) -> Result<Box<dyn Channel + Send>>;
    /// [`Backend::max_message`].
    fn max_message() -> Result<Option<usize>>;
    /// [`Backend::hosted_channel`].
    fn hosted_channel(index: &str, generation: u64, scheme: &str, server: ServerHalf<'_>) -> Result<Box<dyn Channel>>;
    /// [`Backend::read_records`].
    fn read_records(index: &str, names: &[String], known: &[u64]) -> Result<Option<Vec<IndexRecord>>>;
    /// [`Backend::write_records`].
    fn write_records(index: &str, writes: Vec<IndexRecordWrite>) -> Result<Option<Vec<IndexRecord>>>;
}

/// The methods of [`Intercepted`] that call the wrapped backend as they
/// are, no hook taking them.
macro_rules! forwarded {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        fn $name(&mut self, $($arg: $ty),*) -> $ret {
            self.inner.$name($($arg),*)
        }
    )*};
}

/// `inner` with the calls `hook` takes handed to it (module docs).
pub struct Intercepted<H> {
    inner: Box<dyn Backend>,
    hook: H,
}

impl<H: Hook> Intercepted<H> {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Backend>, hook: H) -> Self {
        Self { inner, hook }
    }

    /// The hook, to read what it recorded.
    pub fn hook(&self) -> &H {
        &self.hook
    }
}

impl<H: Hook> Backend for Intercepted<H> {
    hooked!();

    forwarded! {
        fn drop_other_generations(index: &str, keep: u64) -> Result<()>;
        fn forget(index: &str, id: [u8; 16]) -> Result<()>;
        fn max_documents() -> Result<Option<usize>>;
        fn verify() -> Result<()>;
        fn verify_index(index: &str, generation: u64, scheme: &KeywordScheme) -> Result<()>;
        fn space() -> Result<Option<Space>>;
        fn index_bytes(index: &str) -> Result<Option<(u64, u64)>>;
        fn vacuum() -> Result<Option<(Space, Space)>>;
        fn hosted_transaction(index: &str, generation: u64, scheme: &str, server: ServerHalf<'_>) -> Result<Box<dyn SetupChannel>>;
        fn ensure_index(index: &str, scheme: &str, params: &Params) -> Result<()>;
        fn remove_index(index: &str) -> Result<()>;
        fn index_names() -> Result<Option<Vec<String>>>;
        fn drop_older_generations(index: &str, keep: u64) -> Result<()>;
        fn setup_channel(index: &str, generation: u64, scheme: &KeywordScheme) -> Result<Box<dyn SetupChannel>>;
    }

    fn pack_documents(&mut self, index: &str) {
        self.inner.pack_documents(index)
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::EmbeddedBackend;

    /// Counts update jobs and refuses record writes.
    #[derive(Default)]
    struct Counting {
        jobs: usize,
    }

    impl Hook for Counting {
        fn update_job(&mut self, inner: &mut dyn Backend, update: Update<'_>) -> Result<UpdateJob> {
            self.jobs += 1;
            update.send(inner)
        }

        fn write_records(
            &mut self,
            _: &mut dyn Backend,
            _: &str,
            _: Vec<IndexRecordWrite>,
        ) -> Result<Option<Vec<IndexRecord>>> {
            Err(crate::ClientError::InvalidArgument("refused".into()))
        }
    }

    #[test]
    fn hooks_take_their_calls_and_apply_update_goes_through_update_job() {
        let inner = EmbeddedBackend::over(Arc::new(sesame_store::MemoryStore::new()));
        let mut b = Intercepted::new(Box::new(inner), Counting::default());
        let scheme = sesame_sse::fast::scheme();
        b.apply_update("i", 0, &scheme, [0; 16], &[]).unwrap();
        assert!(
            b.update_job("i", 0, &scheme, [1; 16], Vec::new()).unwrap()()
                .unwrap()
                .is_empty()
        );
        assert_eq!(b.hook().jobs, 2);
        assert!(b.write_records("i", Vec::new()).is_err());
        // What no hook takes reaches the wrapped backend: the embedded
        // store lists no index names and keeps no records.
        assert_eq!(b.index_names().unwrap(), None);
        assert_eq!(b.read_records("i", &[], &[]).unwrap(), None);
    }
}
