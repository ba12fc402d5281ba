//! Caps glibc's malloc arenas (the only `unsafe` of the crate).
//!
//! glibc gives threads that allocate at the same time arenas of their
//! own, up to eight per core, and keeps the memory freed in each for
//! reuse: an import's resident set was 1.8 times its heap (651 against
//! 361 MB on the flights, `docs/performance.md`, "An import's memory,
//! bounded"), the pages freed by its worker threads held in their arenas.
//! One arena for every thread: the pages one thread frees serve the next
//! allocation of any. Threads then share the arena's lock, but each keeps
//! a small cache of its own (glibc's tcache) in front of it. Measured on
//! the flights (`MALLOC_ARENA_MAX` set outside, the same binary): peak
//! resident set 439 MB with one arena, 634 MB with two and with glibc's
//! default; the time of an import of 150,000 generated rows was 1.19
//! times glibc's default's on that loaded machine (`docs/performance.md`,
//! "An import's memory: one malloc arena, the catalog in chunks"). `sesame sql` beside PostgreSQL (`sesame bench
//! sql`, quiet machine) took 20-30% longer with one arena (COPY 28.2 s
//! against 21.7 s with `MALLOC_ARENA_MAX=8`), so only `sesame import`
//! caps them. With the client's catalog on disk the cap is still what
//! keeps the flights under 400 MB: 367 MB with one arena, 568 MB with
//! `MALLOC_ARENA_MAX=8` (`docs/performance.md`, "An import's memory:
//! the catalog on disk"). It must run before any thread starts: the cap applies to
//! arenas made after it. A `MALLOC_ARENA_MAX` in the environment is left to
//! glibc, which reads it itself. Elsewhere than on glibc, nothing is done.

/// Caps the number of malloc arenas at one, unless `MALLOC_ARENA_MAX` is
/// set; whether the cap was set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn cap_arenas() -> bool {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return false;
    }
    // SAFETY: `mallopt` takes two integers and changes one parameter of
    // glibc's allocator under its own lock; M_ARENA_MAX is a parameter
    // glibc knows. No pointer is passed and nothing is returned but a
    // status.
    let done = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    done == 1
}

/// Nothing to cap off glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn cap_arenas() -> bool {
    false
}
