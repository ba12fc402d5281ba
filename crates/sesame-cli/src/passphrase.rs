//! Where the passphrase comes from: `SESAME_PASSPHRASE`, or a prompt on
//! the terminal.

use std::io::IsTerminal;

use zeroize::Zeroizing;

use crate::error::CliError;

/// The environment variable holding the passphrase.
pub(crate) const ENV: &str = "SESAME_PASSPHRASE";

/// The environment variable holding the new passphrase of `passwd`.
pub(crate) const NEW_ENV: &str = "SESAME_NEW_PASSPHRASE";

/// The new passphrase of `passwd`: from [`NEW_ENV`], or asked twice on the
/// terminal.
pub(crate) fn new_passphrase() -> Result<Zeroizing<String>, CliError> {
    ask(NEW_ENV, true, "New passphrase: ")
}

/// The passphrase, asked once (or twice, with `confirm`, for a new
/// profile).
pub(crate) fn passphrase(confirm: bool) -> Result<Zeroizing<String>, CliError> {
    ask(
        ENV,
        confirm,
        if confirm {
            "New passphrase: "
        } else {
            "Passphrase: "
        },
    )
}

/// A passphrase from the variable `env`, else from the terminal with
/// `prompt` (twice, compared, with `confirm`).
fn ask(env: &str, confirm: bool, prompt: &str) -> Result<Zeroizing<String>, CliError> {
    if let Some(p) = std::env::var_os(env) {
        return p
            .into_string()
            .map(Zeroizing::new)
            .map_err(|_| CliError::Usage(format!("{env} is not valid UTF-8")));
    }
    let what = if env == NEW_ENV {
        "no new passphrase"
    } else {
        "no passphrase"
    };
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "{what}: set {env} or run sesame in a terminal"
        )));
    }
    let prompt_err = |e: std::io::Error| {
        CliError::Usage(format!(
            "cannot read the passphrase from the terminal ({e}); set {env} instead"
        ))
    };
    let first = Zeroizing::new(rpassword::prompt_password(prompt).map_err(prompt_err)?);
    if confirm {
        let again =
            Zeroizing::new(rpassword::prompt_password("Repeat passphrase: ").map_err(prompt_err)?);
        if *again != *first {
            return Err(CliError::Usage("the passphrases do not match".into()));
        }
    }
    Ok(first)
}
