//! `sesame`: encrypted document search from the command line.
//!
//! ```text
//! sesame init [--scheme NAME] [--params a=1,b=2]   create a profile
//! sesame add PATH...                              encrypt and index files (a sync)
//! sesame rm ID|PATH...                            remove documents
//! sesame check                                    verify the profile
//! sesame search QUERY...                          ids and paths of matching documents
//! sesame get DOC_ID                               a decrypted document, to stdout
//! sesame list                                     the documents of the index
//! sesame schemes [--long]                         the registered schemes
//! sesame bench EXPERIMENT [...]                   the benchmark harness
//! sesame serve --store STORE [...]                the server
//! sesame token new TENANT --tokens FILE           a tenant's token
//! sesame cert DIR                                 a private CA and server certificate
//! ```
//!
//! Every command takes `--dir DIR` (default `$SESAME_HOME`, else
//! `./.sesame`). The passphrase comes from `SESAME_PASSPHRASE` or a prompt
//! on the terminal. Every error is one line on standard error, `error: ...`,
//! and a non-zero exit status (2 for a mistake on the command line or in
//! the environment, 1 otherwise). See
//! `docs/cli.md`.

mod args;
mod error;
mod malloc;
mod passphrase;
mod progress;
mod schemes;
mod serve;
mod sql;
mod tables;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use sesame_client::{
    insecure, ClientError, KdfParams, NetworkBackend, Profile, ServerBinding, DEFAULT_INDEX,
};
use sesame_core::Params;

use crate::args::{Cli, Command, InitArgs};
use crate::error::{one_line, CliError};

fn main() -> ExitCode {
    quiet_panics();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// A panic (a defect, never the answer to bad input) is reported as one
/// line without its message or location, which could hold data and mean
/// nothing to a user; `SESAME_DEBUG_PANICS=1` keeps the standard report.
fn quiet_panics() {
    if std::env::var_os("SESAME_DEBUG_PANICS").is_some_and(|v| v == "1") {
        return;
    }
    std::panic::set_hook(Box::new(|_| {
        eprintln!(
            "error: internal error in sesame (a defect; nothing was half-written: every \
             change is committed atomically). Run the command again; if it recurs, \
             SESAME_DEBUG_PANICS=1 shows the details for a report"
        );
    }));
}

/// Help and version go out as clap writes them; a usage mistake is one
/// line, like every other error.
fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        _ => {
            let text = e.render().to_string();
            // Keep what precedes clap's "Usage:" block, on one line.
            let message = text.split("\nUsage:").next().unwrap_or(&text);
            let message = one_line(message.trim_start_matches("error:").trim());
            eprintln!("error: {message} (see `sesame --help`)");
            ExitCode::from(2)
        }
    }
}

/// The key file given with `--key-file` or `SESAME_KEY_FILE`, if any.
static KEY_FILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// The contents of the key file given, if any: refused when others can
/// read it or when it is too short.
fn key_file() -> Result<Option<zeroize::Zeroizing<Vec<u8>>>, CliError> {
    match KEY_FILE.get().and_then(Option::as_ref) {
        Some(path) => read_key_file(path).map(Some),
        None => Ok(None),
    }
}

fn read_key_file(path: &std::path::Path) -> Result<zeroize::Zeroizing<Vec<u8>>, CliError> {
    serve::refuse_open(path, 0o077, "the key file")?;
    std::fs::read(path)
        .map(zeroize::Zeroizing::new)
        .map_err(|e| error::file_error("read", path, &e))
}

/// Makes a new key file at `path` (32 random bytes, mode 600) if there is
/// none, saying so; returns its contents.
fn make_key_file(path: &std::path::Path) -> Result<zeroize::Zeroizing<Vec<u8>>, CliError> {
    if !path.exists() {
        use rand_core::RngCore;
        let mut bytes = zeroize::Zeroizing::new(vec![0u8; 32]);
        rand_core::OsRng.fill_bytes(&mut bytes);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let io = |e: std::io::Error| error::file_error("write", path, &e);
        let mut f = options.open(path).map_err(io)?;
        std::io::Write::write_all(&mut f, &bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
        eprintln!(
            "made a new key file {}: keep a copy somewhere safe; without it the profile cannot \
             be opened",
            path.display()
        );
    }
    read_key_file(path)
}

fn run(cli: Cli) -> Result<(), CliError> {
    let dir = profile_dir(cli.dir);
    let key_path = cli.key_file.or_else(|| {
        std::env::var_os("SESAME_KEY_FILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let _ = KEY_FILE.set(key_path);
    match cli.command {
        Command::Init(args) => init(&dir, args),
        Command::Add { paths } => add(&dir, &paths),
        Command::Rm { documents } => rm(&dir, &documents),
        Command::Check => check(&dir),
        Command::Compact { store } => compact(&dir, store.as_deref()),
        Command::Search { query } => search(&dir, &query.join(" ")),
        Command::Get { id } => get(&dir, &id),
        Command::List => list(&dir),
        Command::Devices => devices(&dir),
        Command::Passwd {
            new_key_file,
            no_key_file,
        } => passwd(&dir, new_key_file.as_deref(), no_key_file),
        Command::Rekey { master: false } => rekey(&dir),
        Command::Rekey { master: true } => rekey_master(&dir),
        Command::Backup { out } => backup(&dir, &out),
        Command::Restore { backup } => restore(&dir, &backup),
        Command::Schemes { long } => {
            let all = schemes::all();
            let text = if long {
                schemes::long(&all)
            } else {
                schemes::table(&all)
            };
            write_stdout(text.as_bytes())
        }
        Command::Table(cmd) => tables::table(&dir, cmd),
        Command::Import {
            table,
            file,
            format,
        } => tables::import(&dir, &table, &file, format.as_deref()),
        Command::Query {
            table,
            query,
            limit,
            format,
            explain,
        } => tables::query(&dir, &table, &query, limit, &format, explain),
        // `bench sql` runs this binary's `sesame sql` beside PostgreSQL
        // (crates/sesame-bench/src/sql.rs); not one of `bench all`'s.
        Command::Bench(args) if args.experiment == "sql" => {
            let exe = std::env::current_exe().map_err(|e| sesame_bench::BenchError::Io {
                action: "find",
                path: PathBuf::from("the sesame binary"),
                source: e,
            })?;
            Ok(sesame_bench::sql::run(&args, &exe)?)
        }
        Command::Bench(args) => Ok(sesame_bench::run(&args)?),
        Command::Serve(args) => serve::serve(args),
        Command::Sql {
            listen,
            password_file,
            tls_cert,
            tls_key,
        } => sql::sql(&dir, listen, password_file, tls_cert.zip(tls_key)),
        Command::Token(cmd) => serve::token(cmd),
        Command::Cert(args) => serve::cert(args),
    }
}

/// `--dir`, else `$SESAME_HOME`, else `./.sesame`.
fn profile_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("SESAME_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| PathBuf::from(".sesame"))
}

/// Whether the insecure test-only key derivation was asked for.
fn fast_kdf(args: &InitArgs) -> Result<bool, CliError> {
    match std::env::var("SESAME_KDF").as_deref() {
        Ok("fast") => Ok(true),
        Ok("") | Err(std::env::VarError::NotPresent) => Ok(args.insecure_fast_kdf),
        Ok(other) => Err(CliError::Usage(format!(
            "SESAME_KDF={other:?} is not understood (the only value is \"fast\", for tests)"
        ))),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(CliError::Usage("SESAME_KDF is not valid UTF-8".into()))
        }
    }
}

fn init(dir: &std::path::Path, args: InitArgs) -> Result<(), CliError> {
    // Refuse what can be refused before the passphrase is asked.
    if Profile::exists(dir) {
        return Err(ClientError::ProfileExists(dir.to_path_buf()).into());
    }
    let params = Params::parse(&args.params).map_err(|e| {
        let e = e.to_string();
        CliError::Usage(format!(
            "--params: {}",
            e.trim_start_matches("invalid argument: ")
        ))
    })?;
    sesame_client::check_scheme(&args.scheme, &params)?;
    let binding = server_binding(&args)?;
    if let (Some(remote), Some(binding)) = (&args.join, &binding) {
        return join(dir, binding, remote);
    }
    let fast = fast_kdf(&args)?;
    let key_path = KEY_FILE.get().cloned().flatten();
    let pass = passphrase::passphrase(true)?;
    let key = key_path.as_deref().map(make_key_file).transpose()?;
    let kdf = if fast {
        eprintln!("warning: INSECURE key derivation (SESAME_KDF=fast): for tests only");
        insecure::fast_kdf()
    } else {
        KdfParams::default()
    };
    let d = sesame_sse::scheme(&args.scheme)
        .map(|s| s.descriptor)
        .ok_or_else(|| CliError::Other(format!("scheme {} vanished", args.scheme)))?;
    let profile = match &binding {
        None => match &key {
            Some(key) => {
                Profile::create_with_key_file(dir, &pass, &args.scheme, &params, kdf, key)?
            }
            None => Profile::create_with_kdf(dir, &pass, &args.scheme, &params, kdf)?,
        },
        Some(binding) => {
            // The server's index first: a server that cannot be reached, a
            // wrong token or a name taken leave no profile behind.
            let backend = NetworkBackend::connect(binding)?;
            backend.create_index(DEFAULT_INDEX, d.name, &params)?;
            let made = match &key {
                Some(key) => Profile::create_with_server_and_key_file(
                    dir,
                    &pass,
                    &args.scheme,
                    &params,
                    kdf,
                    binding,
                    key,
                ),
                None => {
                    Profile::create_with_server(dir, &pass, &args.scheme, &params, kdf, binding)
                }
            };
            match made {
                Ok(p) => {
                    // The first session shares the index's state (and the
                    // header) on the server, so another device can join.
                    drop(p.session(DEFAULT_INDEX)?);
                    p
                }
                Err(e) => {
                    let _ = backend.drop_index(DEFAULT_INDEX);
                    return Err(e.into());
                }
            }
        }
    };
    if binding.is_some() && key.is_none() {
        eprintln!(
            "warning: the profile's header (its master key sealed under a key derived from the \
             passphrase, and the salt) is kept on the server so that other devices can join: \
             whoever runs the server can guess passphrases against it offline, each guess \
             costing one Argon2id ({}). Use a long random passphrase, or a key file \
             (--key-file FILE), which never leaves this machine: then no guess of the \
             passphrase alone opens the server's copy",
            kdf
        );
    }
    let place = match &binding {
        Some(b) => format!(
            "; on server {} as index {}{DEFAULT_INDEX}: another device joins with `sesame init \
             --server {} --join {}{DEFAULT_INDEX}`",
            b.url, b.index_prefix, b.url, b.index_prefix
        ),
        None => String::new(),
    };
    let mut out = format!(
        "created profile {} (scheme {}, {}{place}; key derivation {})\n",
        dir.display(),
        d.name,
        d.kind,
        profile.kdf()
    );
    if !params.is_empty() {
        out.push_str(&format!("scheme parameters: {params}\n"));
    }
    write_stdout(out.as_bytes())
}

/// `sesame init --server URL --join INDEX`: this directory becomes
/// another device of the profile that index `remote` belongs to.
fn join(dir: &std::path::Path, binding: &ServerBinding, remote: &str) -> Result<(), CliError> {
    let key = key_file()?;
    let pass = passphrase::passphrase(false)?;
    let (profile, index) = Profile::join_with_limit(
        dir,
        &pass,
        key.as_deref().map(|k| &k[..]),
        binding,
        remote,
        kdf_limit()?,
    )?;
    let session = profile.session(&index)?;
    let out = format!(
        "joined profile {} as another device: index {index} (scheme {}, {} documents) on \
         server {}\n",
        dir.display(),
        session.scheme().name,
        session.documents()?.len(),
        binding.url
    );
    write_stdout(out.as_bytes())
}

/// The server binding `init` was asked for, checked before the passphrase
/// is asked.
fn server_binding(args: &InitArgs) -> Result<Option<ServerBinding>, CliError> {
    let Some(url) = &args.server else {
        return Ok(None);
    };
    let token = passphrase::token(args.token.as_deref(), args.token_file.as_deref())?;
    let ca_pem = match &args.ca {
        Some(path) => Some(std::fs::read(path).map_err(|e| error::file_error("read", path, &e))?),
        None => None,
    };
    let binding = ServerBinding {
        url: url.clone(),
        token: token.to_string(),
        ca_pem,
        // Several profiles can share a tenant: each has its own names.
        index_prefix: ServerBinding::fresh_prefix(&mut rand_core::OsRng),
    };
    // The URL's form (https, or http to loopback) is checked here.
    sesame_net::client::endpoint(&binding.client_config()).map_err(|e| {
        CliError::Usage(format!(
            "--server: {}",
            e.to_string().trim_start_matches("invalid argument: ")
        ))
    })?;
    Ok(Some(binding))
}

/// `sesame backup DIR`.
fn backup(dir: &std::path::Path, out: &std::path::Path) -> Result<(), CliError> {
    if !Profile::exists(dir) {
        return Err(ClientError::NoProfile(dir.to_path_buf()).into());
    }
    let pass = passphrase::passphrase(false)?;
    let profile = Profile::open_with_key_file(dir, &pass, key_file()?.as_deref().map(|k| &k[..]))?;
    let report = profile.backup(out)?;
    write_stdout(
        format!(
            "backed up {} files ({} bytes) of {} into {}; restore with `sesame --dir NEW restore {}`\n",
            report.files,
            report.bytes,
            dir.display(),
            out.display(),
            out.display()
        )
        .as_bytes(),
    )
}

/// `sesame --dir NEW restore BACKUP`.
fn restore(dir: &std::path::Path, backup: &std::path::Path) -> Result<(), CliError> {
    if !backup.join(sesame_client::MANIFEST).is_file() {
        return Err(CliError::Usage(format!(
            "{} is not a Sesame backup (no {})",
            backup.display(),
            sesame_client::MANIFEST
        )));
    }
    let pass = passphrase::passphrase(false)?;
    let key = key_file()?;
    let profile =
        sesame_client::restore_with_key_file(backup, dir, &pass, key.as_deref().map(|k| &k[..]))?;
    let documents = profile.session(DEFAULT_INDEX)?.documents()?.len();
    write_stdout(
        format!(
            "restored {} into {} ({documents} documents in the default index)\n",
            backup.display(),
            dir.display()
        )
        .as_bytes(),
    )
}

/// `sesame passwd`: the current passphrase opens the profile, the new one
/// replaces it (same Argon2id cost).
fn passwd(
    dir: &std::path::Path,
    new_key_file: Option<&std::path::Path>,
    no_key_file: bool,
) -> Result<(), CliError> {
    if !Profile::exists(dir) {
        return Err(ClientError::NoProfile(dir.to_path_buf()).into());
    }
    let old = passphrase::passphrase(false)?;
    let profile = Profile::open_with_limit(
        dir,
        &old,
        key_file()?.as_deref().map(|k| &k[..]),
        kdf_limit()?,
    )?;
    let new = passphrase::new_passphrase()?;
    match (new_key_file, no_key_file) {
        (Some(path), _) => {
            let key = make_key_file(path)?;
            profile.change_key_file(&new, profile.kdf(), Some(&key))?;
        }
        (None, true) => profile.change_key_file(&new, profile.kdf(), None)?,
        (None, false) => profile.change_passphrase(&new, profile.kdf())?,
    }
    write_stdout(
        format!(
            "passphrase changed for the profile in {}; the old one no longer opens it\n",
            dir.display()
        )
        .as_bytes(),
    )
}

/// Opens the profile (asking for the passphrase) and its default index.
fn open(dir: &std::path::Path) -> Result<sesame_client::Session, CliError> {
    Ok(open_profile(dir)?.session(DEFAULT_INDEX)?)
}

/// Opens the profile, asking for the passphrase.
pub(crate) fn open_profile(dir: &std::path::Path) -> Result<Profile, CliError> {
    if !Profile::exists(dir) {
        return Err(ClientError::NoProfile(dir.to_path_buf()).into());
    }
    let pass = passphrase::passphrase(false)?;
    Ok(Profile::open_with_limit(
        dir,
        &pass,
        key_file()?.as_deref().map(|k| &k[..]),
        kdf_limit()?,
    )?)
}

/// The largest Argon2id costs accepted in a header from the server
/// (`init --join`, a newer header another device put there):
/// `KdfLimit::default()`, raised or lowered by `SESAME_KDF_MAX_MIB` and
/// `SESAME_KDF_MAX_PASSES`.
fn kdf_limit() -> Result<sesame_client::KdfLimit, CliError> {
    let mut limit = sesame_client::KdfLimit::default();
    let var = |name: &str| -> Result<Option<u32>, CliError> {
        match std::env::var(name) {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Ok(v) if v.is_empty() => Ok(None),
            Ok(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| CliError::Usage(format!("{name}={v:?} is not a whole number"))),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(CliError::Usage(format!("{name} is not valid UTF-8")))
            }
        }
    };
    if let Some(mib) = var("SESAME_KDF_MAX_MIB")? {
        limit.max_m_kib = mib.saturating_mul(1024);
    }
    if let Some(t) = var("SESAME_KDF_MAX_PASSES")? {
        limit.max_t = t;
    }
    Ok(limit)
}

fn add(dir: &std::path::Path, paths: &[PathBuf]) -> Result<(), CliError> {
    // A path that is not there is reported before the passphrase is asked.
    for p in paths {
        if let Err(e) = std::fs::metadata(p) {
            return Err(error::file_error("read", p, &e));
        }
    }
    let profile = open_profile(dir)?;
    let store = profile.store_path();
    let file_len = || std::fs::metadata(&store).map_or(0, |m| m.len());
    let len_before = file_len();
    let mut session = profile.session(DEFAULT_INDEX)?;
    let mut bar = progress::Bar::new();
    let report = session.add_documents(paths, &mut |p| bar.update(p));
    bar.finish();
    let report = report?;
    if report.resumed > 0 {
        eprintln!(
            "completed an interrupted add or removal first: {} (not added again)",
            count(report.resumed, "document")
        );
    }
    let mut out = format!(
        "added {}, replaced {}, unchanged {}, removed {} ({} distinct keywords, {} \
         keyword-document pairs)\n",
        count(report.added.len(), "document"),
        report.replaced.len(),
        report.unchanged,
        report.removed.len(),
        report.keywords,
        report.pairs
    );
    if report.rebuilt {
        out.push_str(&format!(
            "{}: index rebuilt over {}\n",
            rebuild_reason(&session),
            count(report.indexed, "document")
        ));
    } else if report.added.len() + report.replaced.len() + report.removed.len() > 0 {
        out.push_str(&format!(
            "dynamic scheme: updates sent; {} indexed\n",
            count(report.indexed, "document")
        ));
    }
    write_stdout(out.as_bytes())?;
    // Only a hint, and only after an add that grew the file by more than
    // the threshold: the store's accounting walks its whole tree, a cost
    // a small add into a large store should not pay.
    let grew = file_len().saturating_sub(len_before) > COMPACT_HINT_BYTES;
    if let Some(Ok(Some(space))) = grew.then(|| session.store_space()) {
        let used = space.allocated_pages * space.page_size;
        let spare = space.disk_bytes.saturating_sub(used);
        if spare > COMPACT_HINT_BYTES && spare > used / 2 {
            eprintln!(
                "note: the store takes {} on disk for {} of pages in use; `sesame compact` \
                 gives the rest back",
                mb(space.disk_bytes),
                mb(used)
            );
        }
    }
    Ok(())
}

/// Growth of the store file, and free bytes in it, above which `add`
/// suggests `compact` (when the free bytes also exceed half the pages in
/// use).
const COMPACT_HINT_BYTES: u64 = 64 << 20;

/// Bytes as megabytes, one decimal.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn compact(dir: &std::path::Path, store: Option<&std::path::Path>) -> Result<(), CliError> {
    let (what, spaces) = match store {
        // A server's store: no profile, no passphrase; the file must
        // already be a Sesame store (`open` creates none here).
        Some(file) => {
            if !file.is_file() {
                return Err(error::file_error(
                    "open",
                    file,
                    &std::io::Error::from(std::io::ErrorKind::NotFound),
                ));
            }
            let failed = |e| CliError::Other(format!("store {}: {e}", file.display()));
            let spaces = sesame_store::RedbStore::open(file)
                .and_then(|redb| redb.vacuum())
                .map_err(failed)?;
            (file.display().to_string(), Some(spaces))
        }
        None => {
            let mut session = open(dir)?;
            (dir.display().to_string(), session.compact_store()?)
        }
    };
    let out = match spaces {
        None => format!(
            "{what}: the index is on a server, which keeps its own store; nothing to compact \
             here\n"
        ),
        Some((before, after)) => format!(
            "{what}: store rewritten: {} on disk, was {} (file length {}, was {}); {} of keys \
             and values kept\n",
            mb(after.disk_bytes),
            mb(before.disk_bytes),
            mb(after.file_bytes),
            mb(before.file_bytes),
            mb(after.stored_bytes)
        ),
    };
    write_stdout(out.as_bytes())
}

/// Why a change rebuilt the whole index.
fn rebuild_reason(session: &sesame_client::Session) -> &'static str {
    if session.is_static() {
        "static scheme"
    } else {
        "updates of this scheme read the server between writes, so each change rebuilds its index"
    }
}

fn rm(dir: &std::path::Path, documents: &[String]) -> Result<(), CliError> {
    let mut session = open(dir)?;
    let report = session.remove_documents(documents)?;
    let mut out = String::new();
    for d in &report.removed {
        out.push_str(&format!("removed\t{}\t{}\n", d.id, d.path));
    }
    let rebuilt = format!("{}: index rebuilt without them", rebuild_reason(&session));
    let how = if report.rebuilt {
        rebuilt.as_str()
    } else if report.index_entries_deleted {
        "their index entries were deleted"
    } else {
        "this scheme cannot delete index entries: they stay on the server, and the documents \
         are no longer shown"
    };
    out.push_str(&format!(
        "removed {} ({how}); {} indexed\n",
        count(report.removed.len(), "document"),
        count(report.indexed, "document")
    ));
    write_stdout(out.as_bytes())
}

fn rekey(dir: &std::path::Path) -> Result<(), CliError> {
    let mut session = open(dir)?;
    let before = session.generation();
    let mut bar = progress::Bar::new();
    let done = session.rekey(&mut |p| bar.update(p));
    bar.finish();
    let done = done?;
    write_stdout(
        format!(
            "{}: re-indexed {} under fresh keys (generation {before} replaced by {}); the old \
             index is gone\n",
            dir.display(),
            count(done, "document"),
            session.generation()
        )
        .as_bytes(),
    )
}

/// `sesame rekey --master`.
fn rekey_master(dir: &std::path::Path) -> Result<(), CliError> {
    let profile = open_profile(dir)?;
    let mut bar = progress::Bar::new();
    let done = profile.rotate_master(&mut |p| bar.update(p));
    bar.finish();
    let done = done?;
    let resumed = if done.resumed {
        " (completing an interrupted rotation)"
    } else {
        ""
    };
    let tables = if done.tables > 0 {
        format!(
            ", {} made again with {} under fresh names and keys",
            count(done.tables, "table"),
            count(done.records, "record")
        )
    } else {
        String::new()
    };
    write_stdout(
        format!(
            "{}: moved to a new master key{resumed}: {} sealed again in {} under fresh keys\
             {tables} (header version {}); an older header opens nothing the profile now \
             holds\n",
            dir.display(),
            count(done.documents, "document"),
            match done.indexes {
                1 => "1 index".to_owned(),
                n => format!("{n} indexes"),
            },
            done.header_version
        )
        .as_bytes(),
    )?;
    Ok(())
}

fn check(dir: &std::path::Path) -> Result<(), CliError> {
    let profile = open_profile(dir)?;
    let mut session = profile.session(DEFAULT_INDEX)?;
    let mut bar = progress::Bar::new();
    let report = session.check(&mut |p| bar.update(p));
    bar.finish();
    let report = report?;
    if report.resumed > 0 {
        eprintln!(
            "completed an interrupted add or removal first: {}",
            count(report.resumed, "document")
        );
    }
    // The tables: every record read, every range index answering its
    // whole domain with exactly the records that have a value there.
    drop(session);
    let mut problems = report.problems.clone();
    let mut records = 0;
    let names = sesame_client::table::tables(&profile)?;
    for name in &names {
        match sesame_client::table::Table::open(&profile, name).and_then(|mut t| t.check()) {
            Ok((n, found)) => {
                records += n;
                problems.extend(found);
            }
            Err(e) => problems.push(format!("table {name}: {e}")),
        }
    }
    let mut out = String::new();
    for p in &problems {
        out.push_str(&format!("problem: {p}\n"));
    }
    out.push_str(&format!(
        "{}: {}, {} verified, {} searched; {} ({}); {}\n",
        dir.display(),
        count(report.documents, "document"),
        report.verified,
        count(report.searches, "keyword"),
        count(names.len(), "table"),
        count(records, "record"),
        if problems.is_empty() {
            "no problem found".to_owned()
        } else {
            count(problems.len(), "problem")
        }
    ));
    write_stdout(out.as_bytes())?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Reported)
    }
}

/// `n` and `what`, plural when `n` is not 1.
pub(crate) fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", plural(n))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn search(dir: &std::path::Path, text: &str) -> Result<(), CliError> {
    // A malformed query is refused before the passphrase is asked; the
    // session answers the parsed query in one pass.
    let query = sesame_client::parse_query(text)?;
    let mut session = open(dir)?;
    let hits = session.answer(&query)?;
    let resumed = hits.resumed;
    if resumed > 0 {
        eprintln!(
            "completed {resumed} document{} of an interrupted add",
            plural(resumed)
        );
    }
    warn_pending(hits.pending, "document");
    let removed = hits.false_positives_removed;
    if removed > 0 {
        eprintln!(
            "removed {removed} false positive{} after decryption",
            plural(removed)
        );
    }
    if hits.documents.is_empty() {
        eprintln!("no documents match {}", short_quote(text));
    }
    let ranked = hits.kind == sesame_core::QueryKind::Ranked;
    let mut out = String::new();
    for (i, h) in hits.documents.iter().enumerate() {
        match hits.scores.get(i).filter(|_| ranked) {
            Some(score) => out.push_str(&format!("{}\t{score:.4}\t{}\n", h.id, h.path)),
            None => out.push_str(&format!("{}\t{}\n", h.id, h.path)),
        }
    }
    write_stdout(out.as_bytes())
}

/// `text` quoted, cut to 60 characters (a query may be long).
fn short_quote(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head:?}... ({} characters)", text.chars().count())
    }
}

fn get(dir: &std::path::Path, id: &str) -> Result<(), CliError> {
    let id: u64 = id.trim().parse().map_err(|_| {
        CliError::Usage(format!(
            "document id {id:?} is not a number (see `sesame search` or `sesame list`)"
        ))
    })?;
    let mut session = open(dir)?;
    let content = session.get(id)?;
    warn_pending(session.pending_documents(), "document");
    write_stdout(&content)
}

/// The one-line warning of a read answered from the state the server has
/// while `n` documents (or records: `what`) wait in saved updates not yet
/// sent.
pub(crate) fn warn_pending(n: usize, what: &str) {
    if n > 0 {
        eprintln!(
            "warning: {} {} pending: not yet on the server; they will be sent by the next \
             command that can",
            count(n, what),
            if n == 1 { "is" } else { "are" }
        );
    }
}

fn list(dir: &std::path::Path) -> Result<(), CliError> {
    let session = open(dir)?;
    warn_pending(session.pending_documents(), "document");
    let mut out = String::new();
    for d in session.documents()? {
        out.push_str(&format!("{}\t{}\t{}\n", d.id, d.size, d.path));
    }
    write_stdout(out.as_bytes())
}

/// `sesame devices`: refreshes from the server (which checks that its
/// state continues what this device saw), then lists what this device saw;
/// a refused state is the error, after the list.
fn devices(dir: &std::path::Path) -> Result<(), CliError> {
    let profile = open_profile(dir)?;
    let checked = profile.session(DEFAULT_INDEX).map(drop);
    let Some(view) = sesame_client::shared_view(profile.dir(), DEFAULT_INDEX)? else {
        checked?;
        return Err(CliError::Other(
            "this profile's index is not shared: its client state is kept on this machine only \
             (devices share an index of a profile on a server)"
                .into(),
        ));
    };
    let short = |d: &str| d.get(..16).unwrap_or(d).to_owned();
    let mut out = format!(
        "index {DEFAULT_INDEX}: newest state seen: version {}, digest {}\n",
        view.version,
        view.digest
            .as_deref()
            .map_or("(not read yet)".into(), short)
    );
    out.push_str("device            last wrote  digest\n");
    for d in &view.devices {
        out.push_str(&format!(
            "{}  version {:<4}  {}{}\n",
            short(&d.device),
            d.version,
            short(&d.digest),
            if d.this_device { "  (this device)" } else { "" }
        ));
    }
    if !view.devices.iter().any(|d| d.this_device) {
        out.push_str(&format!(
            "{}  (this device: no write yet)\n",
            short(&view.device)
        ));
    }
    write_stdout(out.as_bytes())?;
    checked?;
    Ok(())
}

/// Writes to standard output; a closed pipe (`sesame get 1 | head`) is not
/// an error.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::Other(format!(
            "cannot write to standard output: {}",
            one_line(&e.to_string())
        ))),
    }
}
