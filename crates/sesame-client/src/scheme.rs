//! Names a profile checks: index names, and the keyword schemes (and
//! their parameters) an index is bound to.

use rand_core::{CryptoRngCore, OsRng};
use sesame_core::Params;
use sesame_sse::KeywordScheme;

use crate::error::{ClientError, Result};

/// Index names are 1 to 64 characters of `a-z`, `0-9`, `-` and `_`: they
/// name a file and a store key prefix.
pub(crate) fn check_index_name(index: &str) -> Result<()> {
    let ok = !index.is_empty()
        && index.len() <= 64
        && index
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ClientError::InvalidArgument(format!(
            "index name {index:?} must be 1 to 64 characters of a-z, 0-9, - and _"
        )))
    }
}

/// Checks that `scheme` names a registered keyword scheme and that it
/// accepts `params`, without writing anything: lets a caller refuse a bad
/// name before it asks for a passphrase.
pub fn check_scheme(scheme: &str, params: &Params) -> Result<()> {
    let found = find_scheme(scheme)?;
    new_client(&found, &mut OsRng, params).map(drop)
}

/// The registered keyword scheme called `name`.
pub(crate) fn find_scheme(name: &str) -> Result<KeywordScheme> {
    sesame_sse::scheme(name).ok_or_else(|| ClientError::UnknownScheme {
        name: name.to_owned(),
        known: sesame_sse::schemes()
            .iter()
            .map(|s| s.descriptor.name.to_owned())
            .collect(),
    })
}

/// A fresh scheme client; bad parameters are the caller's mistake.
pub(crate) fn new_client(
    scheme: &KeywordScheme,
    rng: &mut dyn CryptoRngCore,
    params: &Params,
) -> Result<Box<dyn sesame_sse::KeywordClient>> {
    (scheme.new_client)(rng, params).map_err(|e| match e {
        sesame_core::Error::InvalidArgument(m) => {
            ClientError::InvalidArgument(format!("scheme parameters: {m}"))
        }
        other => ClientError::Core(other),
    })
}
