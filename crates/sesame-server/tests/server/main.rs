//! The server end to end over loopback TLS: scheme calls, uploads,
//! documents, tenants, limits, hostile input, concurrency, metrics and
//! shutdown. The same tests run over PostgreSQL when
//! `SESAME_TEST_POSTGRES` is set.
//!
//! One test binary, by concern: `calls` (scheme calls, uploads,
//! documents, replays, tenants, hostile requests, concurrency), `limits`
//! (limits, deadlines, budgets, connections, shutdown), `admin`
//! (configuration, admin port, health, store failures), `postgres`; the
//! fixtures they share are in `support`.

#![allow(clippy::unwrap_used)]

mod admin;
mod calls;
mod limits;
mod postgres;
mod support;
