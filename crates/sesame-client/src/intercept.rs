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
//! [`Hook::update_job`], as the trait's default does.

use std::sync::Arc;

use sesame_core::{Channel, Meter, Params, Service, Store};
use sesame_sse::KeywordScheme;
use sesame_store::Space;

use crate::backend::{Backend, IndexRecord, IndexRecordWrite, SetupChannel, UpdateJob};
use crate::error::Result;

/// A hosted protocol's server half over a store, as
/// [`Backend::hosted_channel`] takes it.
pub type ServerHalf<'a> = &'a dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>;

/// The calls an [`Intercepted`] backend lets a hook take. Each default
/// makes the call on `inner`, the wrapped backend, unchanged.
pub trait Hook {
    /// [`Backend::index_channel`].
    fn index_channel(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        inner.index_channel(index, generation, scheme)
    }

    /// [`Backend::read_channel`].
    fn read_channel(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        inner.read_channel(index, generation, scheme)
    }

    /// [`Backend::document_channel`].
    fn document_channel(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
    ) -> Result<Box<dyn Channel + Send>> {
        inner.document_channel(index)
    }

    /// [`Backend::max_message`].
    fn max_message(&mut self, inner: &mut dyn Backend) -> Result<Option<usize>> {
        inner.max_message()
    }

    /// [`Backend::update_job`] (and so [`Backend::apply_update`]).
    fn update_job(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: Vec<Vec<u8>>,
    ) -> Result<UpdateJob> {
        inner.update_job(index, generation, scheme, id, requests)
    }

    /// [`Backend::hosted_channel`].
    fn hosted_channel(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        generation: u64,
        scheme: &str,
        server: ServerHalf<'_>,
    ) -> Result<Box<dyn Channel>> {
        inner.hosted_channel(index, generation, scheme, server)
    }

    /// [`Backend::read_records`].
    fn read_records(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        names: &[String],
        known: &[u64],
    ) -> Result<Option<Vec<IndexRecord>>> {
        inner.read_records(index, names, known)
    }

    /// [`Backend::write_records`].
    fn write_records(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        writes: Vec<IndexRecordWrite>,
    ) -> Result<Option<Vec<IndexRecord>>> {
        inner.write_records(index, writes)
    }
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
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        self.hook
            .index_channel(self.inner.as_mut(), index, generation, scheme)
    }

    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel + Send>> {
        self.hook.document_channel(self.inner.as_mut(), index)
    }

    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        self.inner.drop_other_generations(index, keep)
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }

    fn read_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        self.hook
            .read_channel(self.inner.as_mut(), index, generation, scheme)
    }

    fn forget(&mut self, index: &str, id: [u8; 16]) -> Result<()> {
        self.inner.forget(index, id)
    }

    fn max_message(&mut self) -> Result<Option<usize>> {
        self.hook.max_message(self.inner.as_mut())
    }

    fn max_documents(&mut self) -> Result<Option<usize>> {
        self.inner.max_documents()
    }

    fn verify(&mut self) -> Result<()> {
        self.inner.verify()
    }

    fn verify_index(&mut self, index: &str, generation: u64, scheme: &KeywordScheme) -> Result<()> {
        self.inner.verify_index(index, generation, scheme)
    }

    fn space(&mut self) -> Result<Option<Space>> {
        self.inner.space()
    }

    fn index_bytes(&mut self, index: &str) -> Result<Option<(u64, u64)>> {
        self.inner.index_bytes(index)
    }

    fn vacuum(&mut self) -> Result<Option<(Space, Space)>> {
        self.inner.vacuum()
    }

    fn update_job(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: Vec<Vec<u8>>,
    ) -> Result<UpdateJob> {
        self.hook
            .update_job(self.inner.as_mut(), index, generation, scheme, id, requests)
    }

    fn hosted_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        server: ServerHalf<'_>,
    ) -> Result<Box<dyn Channel>> {
        self.hook
            .hosted_channel(self.inner.as_mut(), index, generation, scheme, server)
    }

    fn hosted_transaction(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        server: ServerHalf<'_>,
    ) -> Result<Box<dyn SetupChannel>> {
        self.inner
            .hosted_transaction(index, generation, scheme, server)
    }

    fn ensure_index(&mut self, index: &str, scheme: &str, params: &Params) -> Result<()> {
        self.inner.ensure_index(index, scheme, params)
    }

    fn remove_index(&mut self, index: &str) -> Result<()> {
        self.inner.remove_index(index)
    }

    fn index_names(&mut self) -> Result<Option<Vec<String>>> {
        self.inner.index_names()
    }

    fn read_records(
        &mut self,
        index: &str,
        names: &[String],
        known: &[u64],
    ) -> Result<Option<Vec<IndexRecord>>> {
        self.hook
            .read_records(self.inner.as_mut(), index, names, known)
    }

    fn write_records(
        &mut self,
        index: &str,
        writes: Vec<IndexRecordWrite>,
    ) -> Result<Option<Vec<IndexRecord>>> {
        self.hook.write_records(self.inner.as_mut(), index, writes)
    }

    fn drop_older_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        self.inner.drop_older_generations(index, keep)
    }

    fn setup_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn SetupChannel>> {
        self.inner.setup_channel(index, generation, scheme)
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
        fn update_job(
            &mut self,
            inner: &mut dyn Backend,
            index: &str,
            generation: u64,
            scheme: &KeywordScheme,
            id: [u8; 16],
            requests: Vec<Vec<u8>>,
        ) -> Result<UpdateJob> {
            self.jobs += 1;
            inner.update_job(index, generation, scheme, id, requests)
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
