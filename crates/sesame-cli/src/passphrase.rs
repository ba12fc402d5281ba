//! Where the passphrase comes from: `SESAME_PASSPHRASE`, or a prompt on
//! the terminal; and the server token of `init --server`: `--token-file`,
//! `SESAME_TOKEN`, a prompt, or (discouraged, with a warning) `--token`.

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

/// The environment variable holding the tenant's token.
pub(crate) const TOKEN_ENV: &str = "SESAME_TOKEN";

/// The tenant's token of `init --server`: from `file` (its first line;
/// refused when others can read it), else `argv` (with a warning: any local
/// user can read a command line), else [`TOKEN_ENV`], else asked on the
/// terminal.
pub(crate) fn token(
    argv: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Zeroizing<String>, CliError> {
    let token = if let Some(path) = file {
        crate::serve::refuse_open(path, 0o077, "the token file")?;
        let bytes = Zeroizing::new(
            std::fs::read(path).map_err(|e| crate::error::file_error("read", path, &e))?,
        );
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            CliError::Usage(format!("the token file {} is not UTF-8", path.display()))
        })?;
        Zeroizing::new(text.lines().next().unwrap_or("").trim().to_owned())
    } else if let Some(t) = argv {
        eprintln!(
            "warning: --token puts the token on the command line, where every local user can \
             read it (ps, /proc); use --token-file FILE, {TOKEN_ENV} or the prompt instead"
        );
        Zeroizing::new(t.to_owned())
    } else if let Some(t) = std::env::var_os(TOKEN_ENV) {
        Zeroizing::new(
            t.into_string()
                .map_err(|_| CliError::Usage(format!("{TOKEN_ENV} is not valid UTF-8")))?,
        )
    } else if std::io::stdin().is_terminal() {
        Zeroizing::new(rpassword::prompt_password("Server token: ").map_err(|e| {
            CliError::Usage(format!(
                "cannot read the token from the terminal ({e}); use --token-file FILE instead"
            ))
        })?)
    } else {
        return Err(CliError::Usage(format!(
            "--server needs the tenant's token: --token-file FILE, {TOKEN_ENV}, or run sesame \
             in a terminal to be asked"
        )));
    };
    if token.trim().is_empty() {
        return Err(CliError::Usage("the server token is empty".into()));
    }
    Ok(token)
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
