//! `sesame sql`: the PostgreSQL wire-protocol front of the profile's
//! tables (crate `sesame-sql`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::error::CliError;
use crate::open_profile;

/// `sesame sql --listen ADDR [--password-file F] [--tls-cert C --tls-key K]`
pub(crate) fn sql(
    dir: &Path,
    listen: SocketAddr,
    password_file: Option<PathBuf>,
    tls: Option<(PathBuf, PathBuf)>,
) -> Result<(), CliError> {
    // Everything that can be refused is refused before the passphrase is
    // asked.
    sesame_sql::check_listen(&listen, tls.is_some()).map_err(CliError::Usage)?;
    let password = sesame_sql::load_password(password_file.as_deref()).map_err(CliError::Usage)?;
    let profile = open_profile(dir)?;
    let config = sesame_sql::Config {
        listen,
        password,
        tls,
        max_connections: sesame_sql::DEFAULT_MAX_CONNECTIONS,
    };
    sesame_sql::run(profile, config, |addr| {
        // The first line tells scripts (and tests) where to connect.
        println!("listening on {addr}");
        let _ = std::io::Write::flush(&mut std::io::stdout());
    })
    .map_err(CliError::Other)
}
