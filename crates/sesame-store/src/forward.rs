//! [`forward_store!`](crate::forward_store): the methods of a store that
//! wraps another and passes them on unchanged.

/// Writes, inside an `impl Store for Wrapper` block, the named `Store`
/// methods as calls of the same method on the wrapped store, which
/// `|s| expr` reaches from `s: &Self`. A wrapper that changes some
/// methods (fails writes, counts commits, removes a database when
/// dropped) writes those itself and forwards the rest; the name
/// `write_through_write_if` in the list writes `write` as a `write_if`
/// with no condition, so that a wrapper's own `write_if` sees every
/// write.
///
/// ```ignore
/// impl Store for Counting {
///     fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> { /* counts */ }
///     sesame_store::forward_store!(|s| s.inner; get, scan_prefix, io_counts, backend);
/// }
/// ```
#[macro_export]
macro_rules! forward_store {
    (|$s:ident| $inner:expr; $($method:ident),+ $(,)?) => {
        $( $crate::forward_store!(@one $s, $inner, $method); )+
    };
    (@one $s:ident, $inner:expr, get) => {
        fn get(&self, key: &[u8]) -> $crate::__core::Result<Option<Vec<u8>>> {
            let $s = self;
            $inner.get(key)
        }
    };
    (@one $s:ident, $inner:expr, get_many) => {
        fn get_many(&self, keys: &[&[u8]]) -> $crate::__core::Result<Vec<Option<Vec<u8>>>> {
            let $s = self;
            $inner.get_many(keys)
        }
    };
    (@one $s:ident, $inner:expr, write) => {
        fn write(&self, batch: $crate::__core::WriteBatch) -> $crate::__core::Result<()> {
            let $s = self;
            $inner.write(batch)
        }
    };
    // Not a forward: `write` as a `write_if` with no condition, for a
    // wrapper whose own `write_if` changes writes.
    (@one $s:ident, $inner:expr, write_through_write_if) => {
        fn write(&self, batch: $crate::__core::WriteBatch) -> $crate::__core::Result<()> {
            self.write_if(&[], &batch).map(drop)
        }
    };
    (@one $s:ident, $inner:expr, write_if) => {
        fn write_if(
            &self,
            expect: &[(&[u8], Option<&[u8]>)],
            batch: &$crate::__core::WriteBatch,
        ) -> $crate::__core::Result<bool> {
            let $s = self;
            $inner.write_if(expect, batch)
        }
    };
    (@one $s:ident, $inner:expr, write_if_group) => {
        fn write_if_group(
            &self,
            group: &[$crate::__core::Conditional<'_>],
        ) -> $crate::__core::Result<Vec<bool>> {
            let $s = self;
            $inner.write_if_group(group)
        }
    };
    (@one $s:ident, $inner:expr, scan_prefix) => {
        fn scan_prefix(&self, prefix: &[u8]) -> $crate::__core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let $s = self;
            $inner.scan_prefix(prefix)
        }
    };
    (@one $s:ident, $inner:expr, scan_from) => {
        fn scan_from(
            &self,
            prefix: &[u8],
            from: &[u8],
            descending: bool,
            limit: usize,
        ) -> $crate::__core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let $s = self;
            $inner.scan_from(prefix, from, descending, limit)
        }
    };
    (@one $s:ident, $inner:expr, commit_groups) => {
        fn commit_groups(&self) -> usize {
            let $s = self;
            $inner.commit_groups()
        }
    };
    (@one $s:ident, $inner:expr, ordered_probes) => {
        fn ordered_probes(&self) -> bool {
            let $s = self;
            $inner.ordered_probes()
        }
    };
    (@one $s:ident, $inner:expr, io_counts) => {
        fn io_counts(&self) -> $crate::__core::IoCounts {
            let $s = self;
            $inner.io_counts()
        }
    };
    (@one $s:ident, $inner:expr, write_marks) => {
        fn write_marks(&self) -> Option<$crate::__core::WriteMarks> {
            let $s = self;
            $inner.write_marks()
        }
    };
    (@one $s:ident, $inner:expr, backend) => {
        fn backend(&self) -> &'static str {
            let $s = self;
            $inner.backend()
        }
    };
    (@one $s:ident, $inner:expr, $other:ident) => {
        fn $other(&self) -> $crate::__core::Result<()> {
            let $s = self;
            $inner.$other()
        }
    };
}
