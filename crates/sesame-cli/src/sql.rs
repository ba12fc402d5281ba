//! `sesame sql`: the PostgreSQL wire-protocol front of the profile's
//! tables (crate `sesame-sql`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::error::CliError;
use crate::open_profile;

/// redb's page cache in `sesame sql` (1 GiB, redb's own default): the
/// embedded store's pages that queries read stay in memory, so a point
/// query that touches a few hundred scattered pages reads none of them
/// from the file again. The cache fills as pages are read or written
/// (a large COPY's pages included), up to this size; the other commands
/// keep 128 MiB, which bounds an import's memory. `SESAME_SQL_CACHE_MIB`
/// sets another size.
const SQL_CACHE_BYTES: usize = 1 << 30;

/// The catalog cache of each table `sesame sql` opens (256 MiB, against
/// 16 MiB for the other commands): a point query's records lie scattered
/// over the table, and each one whose catalog block is not in memory
/// costs the decryption of a block of 1,024 entries (the flights' point
/// queries: 15.4 ms against 2.3 ms with the catalog in memory). The
/// flights' whole catalog fits.
const SQL_CATALOG_CACHE_BYTES: usize = 256 << 20;

/// The page cache: `SESAME_SQL_CACHE_MIB` (mebibytes) when set, else
/// [`SQL_CACHE_BYTES`].
fn cache_bytes() -> Result<usize, CliError> {
    match std::env::var("SESAME_SQL_CACHE_MIB") {
        Err(_) => Ok(SQL_CACHE_BYTES),
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|mib| mib.checked_mul(1 << 20))
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "SESAME_SQL_CACHE_MIB={v:?}: the page cache in mebibytes (a whole number, \
                     for example 1024)"
                ))
            }),
    }
}

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
    // A long-running reader of one profile: a page cache that holds the
    // pages its queries read (see `SQL_CACHE_BYTES`).
    sesame_store::RedbStore::set_cache_bytes(cache_bytes()?);
    sesame_client::set_catalog_cache_bytes(SQL_CATALOG_CACHE_BYTES);
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
