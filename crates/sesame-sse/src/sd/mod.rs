//! The two dynamic schemes with small client storage of Demertzis, Ghareh
//! Chamani, Papadopoulos and Papamanthou, "Dynamic Searchable Encryption
//! with Small Client Storage", NDSS 2020: [`sda`] (amortised: an update
//! that fills a level rebuilds it) and [`sdd`] (de-amortised: merges
//! advance a fixed number of entries per update). Both keep a sequence of
//! levels of static, PiBas-shaped encrypted indexes; `levels` holds the
//! entry encoding, the level keys and the search filter they share. See
//! `docs/schemes/sda_sdd.md`.

mod levels;
pub mod sda;
pub mod sdd;

pub use levels::LABEL_LEN;
