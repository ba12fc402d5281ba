//! Where the passphrase comes from: `SESAME_PASSPHRASE`, or a prompt on
//! the terminal.

use std::io::IsTerminal;

use zeroize::Zeroizing;

use crate::error::CliError;

/// The environment variable holding the passphrase.
pub const ENV: &str = "SESAME_PASSPHRASE";

/// The environment variable holding the new passphrase of `passwd`.
pub const NEW_ENV: &str = "SESAME_NEW_PASSPHRASE";

/// The new passphrase of `passwd`: from [`NEW_ENV`], or asked twice on the
/// terminal.
pub fn new_passphrase() -> Result<Zeroizing<String>, CliError> {
    if let Some(p) = std::env::var_os(NEW_ENV) {
        return p
            .into_string()
            .map(Zeroizing::new)
            .map_err(|_| CliError::Usage(format!("{NEW_ENV} is not valid UTF-8")));
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "no new passphrase: set {NEW_ENV} or run sesame in a terminal"
        )));
    }
    let prompt_err = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot read the passphrase from the terminal ({e}); set {NEW_ENV} instead"
        ))
    };
    let first = Zeroizing::new(rpassword::prompt_password("New passphrase: ").map_err(prompt_err)?);
    let again =
        Zeroizing::new(rpassword::prompt_password("Repeat passphrase: ").map_err(prompt_err)?);
    if *again != *first {
        return Err(CliError::Usage("the passphrases do not match".into()));
    }
    Ok(first)
}

/// The passphrase, asked once (or twice, with `confirm`, for a new
/// profile).
pub fn passphrase(confirm: bool) -> Result<Zeroizing<String>, CliError> {
    if let Some(p) = std::env::var_os(ENV) {
        return p
            .into_string()
            .map(Zeroizing::new)
            .map_err(|_| CliError::Usage(format!("{ENV} is not valid UTF-8")));
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "no passphrase: set {ENV} or run sesame in a terminal"
        )));
    }
    let prompt_err = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot read the passphrase from the terminal ({e}); set {ENV} instead"
        ))
    };
    let first = Zeroizing::new(
        rpassword::prompt_password(if confirm {
            "New passphrase: "
        } else {
            "Passphrase: "
        })
        .map_err(prompt_err)?,
    );
    if confirm {
        let again =
            Zeroizing::new(rpassword::prompt_password("Repeat passphrase: ").map_err(prompt_err)?);
        if *again != *first {
            return Err(CliError::Usage("the passphrases do not match".into()));
        }
    }
    Ok(first)
}
