//! Tenants and their bearer tokens.
//!
//! The server keeps only a SHA-256 hash of each token, in a tokens file:
//!
//! ```text
//! # sesame tokens: TENANT SHA256(TOKEN) in hex
//! alice 5c6e…
//! bob   0b2f…
//! ```
//!
//! A token is 32 random bytes, written `sst1_` + 64 hex digits
//! ([`Tokens::generate`]). A fast hash is enough because tokens are random
//! and long: there is no dictionary to try. The check compares the hash of
//! the presented token against every entry in constant time.

use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::keys::check_name;

/// Prefix of the tokens this server makes.
pub const TOKEN_PREFIX: &str = "sst1_";

/// The tenants a server knows, by token hash.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("tenants", &self.tenants())
            .finish()
    }
}

/// SHA-256 of a token.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// No tenants.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tenant with a token given in clear.
    pub fn with(mut self, tenant: &str, token: &str) -> Result<Self, String> {
        check_name("tenant", tenant).map_err(|e| e.to_string())?;
        self.entries.push((hash_token(token), tenant.to_owned()));
        Ok(self)
    }

    /// A fresh random token.
    pub fn generate(rng: &mut dyn CryptoRngCore) -> String {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
    }

    /// The tokens-file line for `tenant` and `token`.
    pub fn line(tenant: &str, token: &str) -> String {
        format!("{tenant} {}", hex::encode(hash_token(token)))
    }

    /// Parses a tokens file. Blank lines and lines starting with `#` are
    /// skipped; every other line is `TENANT HASH`. A tenant may have
    /// several tokens; a hash may appear only once.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut tokens = Tokens::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |m: String| format!("line {}: {m}", n + 1);
            let mut parts = line.split_whitespace();
            let (Some(tenant), Some(hash), None) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(at("expected `TENANT SHA256-HEX`".into()));
            };
            check_name("tenant", tenant).map_err(|e| at(e.to_string()))?;
            let hash: [u8; 32] = hex::decode(hash)
                .ok()
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| at("the hash is not 64 hex digits".into()))?;
            if tokens.entries.iter().any(|(h, _)| *h == hash) {
                return Err(at("this token hash appears twice".into()));
            }
            tokens.entries.push((hash, tenant.to_owned()));
        }
        Ok(tokens)
    }

    /// The tenant whose token this is. Compares against every entry in
    /// constant time.
    pub fn authenticate(&self, token: &str) -> Option<&str> {
        let presented = hash_token(token);
        let mut found = None;
        for (hash, tenant) in &self.entries {
            if bool::from(hash.ct_eq(&presented)) {
                found = Some(tenant.as_str());
            }
        }
        found
    }

    /// The tenants, sorted, each once.
    pub fn tenants(&self) -> Vec<&str> {
        let mut t: Vec<&str> = self.entries.iter().map(|(_, t)| t.as_str()).collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// Whether no tenant is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_authenticate_and_refuse() {
        let a = Tokens::generate(&mut rand_core::OsRng);
        let b = Tokens::generate(&mut rand_core::OsRng);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        let text = format!(
            "# comment\n\n{}\n  {}  \n",
            Tokens::line("alice", &a),
            Tokens::line("bob", &b)
        );
        let t = Tokens::parse(&text).unwrap();
        assert_eq!(t.authenticate(&a), Some("alice"));
        assert_eq!(t.authenticate(&b), Some("bob"));
        assert_eq!(t.authenticate("sst1_nope"), None);
        assert_eq!(t.authenticate(""), None);
        assert_eq!(t.tenants(), ["alice", "bob"]);
        for bad in [
            "alice",
            "alice 00",
            "Alice 0000000000000000000000000000000000000000000000000000000000000000",
            "a b c",
        ] {
            assert!(Tokens::parse(bad).is_err(), "{bad}");
        }
        let twice = format!("{}\n{}", Tokens::line("a", &a), Tokens::line("b", &a));
        assert!(Tokens::parse(&twice).unwrap_err().contains("line 2"));
    }
}
