#![doc = include_str!("../README.md")]

pub mod api;
pub mod bclo;
pub mod cloz;
pub mod clww;
pub mod fh_ope;
pub mod hg;
pub mod insecure;
pub mod lewi_wu;
pub mod plain;
mod saved;

pub use api::{CiphertextType, DynOre, LeftRight, OreInput, OreScheme};

use rand_core::CryptoRngCore;
use sesame_core::{Params, Registry, Result, SchemeDescriptor};

/// A registered scheme: its descriptor, its parameters, and how to create
/// or restore a client as a [`DynOre`].
#[derive(Clone, Copy, Debug)]
pub struct OreEntry {
    /// The descriptor.
    pub descriptor: &'static SchemeDescriptor,
    /// Parameter names with their default and meaning.
    pub params: &'static [(&'static str, &'static str)],
    /// A client with a fresh key.
    pub new: fn(&mut dyn CryptoRngCore, &Params) -> Result<Box<dyn DynOre>>,
    /// A client restored from [`DynOre::save`].
    pub restore: fn(&[u8]) -> Result<Box<dyn DynOre>>,
}

const BITS: (&str, &str) = ("bits", "32 (plaintext width, 1..=64)");

fn bits(params: &Params) -> Result<u32> {
    params.get_or("bits", 32u32)
}

fn new_plain(_rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("plain", &["bits"])?;
    Ok(Box::new(plain::Plain::new(bits(p)?)?))
}

fn new_bclo(rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("bclo", &["bits", "range"])?;
    let params = bclo::BcloParams {
        bits: bits(p)?,
        range_bits: p.get_or("range", 48u32)?,
    };
    Ok(Box::new(bclo::Bclo::generate(rng, params)?))
}

fn new_clww(rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("clww", &["bits"])?;
    Ok(Box::new(clww::Clww::generate(rng, bits(p)?)?))
}

fn new_lewi_wu(rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("lewi-wu", &["bits", "block"])?;
    let params = lewi_wu::LewiWuParams {
        bits: bits(p)?,
        block_bits: p.get_or("block", 2u32)?,
    };
    Ok(Box::new(lewi_wu::LewiWu::generate(rng, params)?))
}

fn new_cloz(rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("cloz", &["bits"])?;
    Ok(Box::new(cloz::ClozPairing::generate(rng, bits(p)?)?))
}

fn new_cloz_insecure(rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("cloz-insecure", &["bits"])?;
    Ok(Box::new(insecure::ClozInsecure::generate(rng, bits(p)?)?))
}

fn new_fh_ope(_rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("fh-ope", &["bits", "cipher_bits"])?;
    let params = fh_ope::FhOpeParams {
        bits: bits(p)?,
        cipher_bits: p.get_or("cipher_bits", 64u32)?,
    };
    Ok(Box::new(fh_ope::FhOpe::new(params)?))
}

fn restore_as<S: OreScheme + 'static>(bytes: &[u8]) -> Result<Box<dyn DynOre>> {
    Ok(Box::new(S::restore(bytes)?))
}

/// Every scheme, in the order of seed 004 (baseline first).
pub fn schemes() -> Vec<OreEntry> {
    vec![
        OreEntry {
            descriptor: &plain::DESCRIPTOR,
            params: &[BITS],
            new: new_plain,
            restore: restore_as::<plain::Plain>,
        },
        OreEntry {
            descriptor: &bclo::DESCRIPTOR,
            params: &[BITS, ("range", "48 (ciphertext width, bits..=96)")],
            new: new_bclo,
            restore: restore_as::<bclo::Bclo>,
        },
        OreEntry {
            descriptor: &clww::DESCRIPTOR,
            params: &[BITS],
            new: new_clww,
            restore: restore_as::<clww::Clww>,
        },
        OreEntry {
            descriptor: &lewi_wu::DESCRIPTOR,
            params: &[BITS, ("block", "2 (block width d, 1..=16)")],
            new: new_lewi_wu,
            restore: restore_as::<lewi_wu::LewiWu>,
        },
        OreEntry {
            descriptor: &cloz::DESCRIPTOR,
            params: &[BITS],
            new: new_cloz,
            restore: restore_as::<cloz::ClozPairing>,
        },
        OreEntry {
            descriptor: &insecure::CLOZ_INSECURE_DESCRIPTOR,
            params: &[BITS],
            new: new_cloz_insecure,
            restore: restore_as::<insecure::ClozInsecure>,
        },
        OreEntry {
            descriptor: &fh_ope::DESCRIPTOR,
            params: &[BITS, ("cipher_bits", "64 (ciphertext width, 2..=64)")],
            new: new_fh_ope,
            restore: restore_as::<fh_ope::FhOpe>,
        },
    ]
}

/// The scheme called `name` (case-insensitive).
pub fn scheme(name: &str) -> Option<OreEntry> {
    schemes()
        .into_iter()
        .find(|s| s.descriptor.name.eq_ignore_ascii_case(name))
}

/// The descriptors of every scheme, as a [`Registry`].
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.extend(schemes().into_iter().map(|s| s.descriptor));
    r
}
