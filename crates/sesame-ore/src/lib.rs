#![doc = include_str!("../README.md")]

/// `Debug` for a keyed scheme: its type name and the listed fields, the
/// key printed as `[redacted]`.
macro_rules! redacted_key_debug {
    ($t:ident { $($field:ident),* }) => {
        impl core::fmt::Debug for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($t))
                    $(.field(stringify!($field), &self.$field))*
                    .field("key", &"[redacted]")
                    .finish()
            }
        }
    };
}

/// The accessors every [`OreScheme`] implements alike: `descriptor`, the
/// module's `DESCRIPTOR`, and `bits`, read from the named field.
macro_rules! descriptor_and_bits {
    ($($bits:ident).+) => {
        fn descriptor(&self) -> &'static sesame_core::SchemeDescriptor {
            &DESCRIPTOR
        }

        fn bits(&self) -> u32 {
            self.$($bits).+
        }
    };
}

pub mod api;
pub mod bclo;
pub mod cloz;
pub mod clww;
pub mod fh_ope;
pub mod hg;
pub mod insecure;
pub mod lewi_wu;
mod saved;

pub use api::{CiphertextType, Comparator, DynOre, LeftRight, OreInput, OreScheme};

use rand_core::CryptoRngCore;
use sesame_core::{Params, Result};

/// A registered scheme: its descriptor, its parameters, and how to create
/// or restore a client as a [`DynOre`] (the registry entry of the ORE
/// family). ORE schemes have no server half: the structure that stores
/// their ciphertexts compares them (the `bplus-*` range protocols).
pub type OreEntry = sesame_core::Entry<dyn DynOre>;

const BITS: (&str, &str) = ("bits", "32 (plaintext width, 1..=64)");

fn bits(params: &Params) -> Result<u32> {
    params.get_or("bits", 32u32)
}

fn new_plain(_rng: &mut dyn CryptoRngCore, p: &Params) -> Result<Box<dyn DynOre>> {
    p.only("plain", &["bits"])?;
    Ok(Box::new(insecure::plain::Plain::new(bits(p)?)?))
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
            descriptor: &insecure::plain::DESCRIPTOR,
            params: &[BITS],
            new_client: new_plain,
            restore_client: restore_as::<insecure::plain::Plain>,
            new_server: None,
        },
        OreEntry {
            descriptor: &bclo::DESCRIPTOR,
            params: &[BITS, ("range", "48 (ciphertext width, bits..=96)")],
            new_client: new_bclo,
            restore_client: restore_as::<bclo::Bclo>,
            new_server: None,
        },
        OreEntry {
            descriptor: &clww::DESCRIPTOR,
            params: &[BITS],
            new_client: new_clww,
            restore_client: restore_as::<clww::Clww>,
            new_server: None,
        },
        OreEntry {
            descriptor: &lewi_wu::DESCRIPTOR,
            params: &[BITS, ("block", "2 (block width d, 1..=16)")],
            new_client: new_lewi_wu,
            restore_client: restore_as::<lewi_wu::LewiWu>,
            new_server: None,
        },
        OreEntry {
            descriptor: &cloz::DESCRIPTOR,
            params: &[BITS],
            new_client: new_cloz,
            restore_client: restore_as::<cloz::ClozPairing>,
            new_server: None,
        },
        OreEntry {
            descriptor: &insecure::CLOZ_INSECURE_DESCRIPTOR,
            params: &[BITS],
            new_client: new_cloz_insecure,
            restore_client: restore_as::<insecure::ClozInsecure>,
            new_server: None,
        },
        OreEntry {
            descriptor: &fh_ope::DESCRIPTOR,
            params: &[BITS, ("cipher_bits", "64 (ciphertext width, 2..=64)")],
            new_client: new_fh_ope,
            restore_client: restore_as::<fh_ope::FhOpe>,
            new_server: None,
        },
    ]
}

/// The scheme called `name` (case-insensitive).
pub fn scheme(name: &str) -> Option<OreEntry> {
    schemes()
        .into_iter()
        .find(|s| s.descriptor.name.eq_ignore_ascii_case(name))
}
