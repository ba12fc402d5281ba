//! The allocator: jemalloc with one arena on Linux with glibc (the only
//! `unsafe` of the crate: the exported options below).
//!
//! glibc's allocator was a third of an import's time: in a profile of the
//! flights' import (`docs/performance.md`, "An import on jemalloc"),
//! `_int_malloc`, `unlink_chunk`, `_int_free`, `free` and `malloc` took 33%
//! of the calling thread's samples and 44% `malloc_consolidate` alone of
//! the threads that send intents, and their share grew with the heap (the
//! free lists of one fragmented arena): 2.0, 4.6 and 10.2 s of CPU for the
//! first 50,000, 100,000 and 200,000 flights with glibc, 1.5, 3.2 and 7.2
//! s with jemalloc (the same binary, jemalloc preloaded).
//!
//! One arena, as glibc's was capped to for an import: more arenas keep
//! more freed pages, and the flights' import peaked at 506 MB with
//! jemalloc's default (four arenas per core) and 496 MB with one per core,
//! against 374 MB with one; each thread keeps its own cache of small
//! blocks (jemalloc's tcache) in front of the arena. Freed pages are given
//! back to the system after a second (`dirty_decay_ms`), and at once
//! rather than kept as lazily freed (`muzzy_decay_ms:0`), so the resident
//! set follows the heap.
//!
//! A `_RJEM_MALLOC_CONF` in the environment is read by jemalloc after
//! these options and overrides them. Elsewhere than on Linux with glibc,
//! the system's allocator is used.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options: a pointer to a NUL-terminated string, laid out
/// as C's `const char *`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(transparent)]
struct Options(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, never written, which lives
// for the whole program: any thread may read it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
unsafe impl Sync for Options {}

/// jemalloc's options, read once when it starts (at the first allocation).
// SAFETY: jemalloc reads this symbol as its `malloc_conf`, a
// `const char *` (the layout of `Options`) to NUL-terminated options;
// nothing else in the program has this name.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: Options = Options(c"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// The options reach jemalloc: one arena for the threads (four per
    /// core without them; jemalloc may add one of its own for blocks of
    /// 8 MiB and more).
    #[test]
    fn jemalloc_runs_with_one_arena() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            return;
        }
        let arenas = tikv_jemalloc_ctl::opt::narenas::read().expect("jemalloc answers");
        assert_eq!(arenas, 1);
    }
}
