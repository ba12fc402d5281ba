//! The command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Encrypted document search: documents and their index are encrypted
/// before they are stored; searches reveal only what the chosen scheme
/// leaks.
#[derive(Debug, Parser)]
#[command(name = "sesame", version)]
#[command(after_help = "Environment:\n  \
    SESAME_HOME        profile directory when --dir is not given (default ./.sesame)\n  \
    SESAME_PASSPHRASE  passphrase, instead of a prompt on the terminal\n  \
    SESAME_KEY_FILE    key file, instead of --key-file\n  \
    SESAME_NEW_PASSPHRASE  at `passwd`: the new passphrase, instead of a prompt\n  \
    SESAME_KDF=fast    at `init`: INSECURE minimal Argon2id cost, for tests only\n  \
    SESAME_TOKEN       at `init --server`: the tenant's token, instead of --token-file or a prompt\n  \
    SESAME_KDF_MAX_MIB, SESAME_KDF_MAX_PASSES  the largest Argon2id memory (MiB, default 1024)\n                     \
    and passes (default 8) accepted from a header made elsewhere (`init --join`, a newer header)")]
pub(crate) struct Cli {
    /// Profile directory [default: $SESAME_HOME, or ./.sesame]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Key file needed with the passphrase (or SESAME_KEY_FILE). At `init`,
    /// a file that does not exist is made (32 random bytes, mode 600):
    /// keep a copy, the profile cannot be opened without it.
    #[arg(long, global = true, value_name = "FILE")]
    pub key_file: Option<PathBuf>,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create a profile: asks for a passphrase, derives the keys, and binds
    /// the profile's index to a scheme.
    Init(InitArgs),
    /// Encrypt and index files; directories are added recursively.
    ///
    /// `add` is a sync: a file the index holds unchanged (same path, same
    /// content) is skipped, a changed file replaces its old version. An
    /// interrupted `add` is completed by running it again; every file ends
    /// up in the index exactly once.
    Add {
        /// Files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Remove documents from the index and the store.
    Rm {
        /// Document ids (as `list` prints them) or the paths they were
        /// added from.
        #[arg(required = true, value_name = "ID|PATH", allow_hyphen_values = true)]
        documents: Vec<String>,
    },
    /// Give back the store file's free space: rewrite the profile's store
    /// into a fresh file holding the same pairs, and put it in place of
    /// the old one (a crash leaves one or the other). Copy-on-write commits
    /// leave free pages behind, which the store reuses but never returns;
    /// a large `add` can leave the file several times its live data. A
    /// profile on a server has no store here.
    Compact {
        /// Instead of the profile's store, a server's redb store file (of
        /// a stopped `sesame serve`: the running server holds its lock).
        #[arg(long, value_name = "FILE")]
        store: Option<PathBuf>,
    },
    /// Check the profile: the store, every document (decrypted and
    /// compared with what was added), and searches for a sample of their
    /// keywords. Exit status 1 when something is wrong.
    Check,
    /// List the documents matching a query (their ids and paths).
    ///
    /// Query forms: `word` (exact), `abc*` (prefix), `a?c*` (wildcard),
    /// `a b c` (documents holding all), `top:K a b` (the K best, ranked).
    /// Keywords are lower-cased and split like the documents. A form the
    /// index's scheme does not answer is refused with the forms it does.
    Search {
        /// The query: one or more words (quote patterns with `*` or `?` so
        /// the shell leaves them alone).
        #[arg(required = true, value_name = "QUERY")]
        query: Vec<String>,
    },
    /// Decrypt a document to standard output.
    Get {
        /// The document id, as `search` or `list` print it.
        #[arg(value_name = "DOC_ID", allow_hyphen_values = true)]
        id: String,
    },
    /// List the documents of the index.
    List,
    /// For a profile on a server: the devices sharing the index, and the
    /// shared state each last wrote (version and digest), as the newest
    /// state this device saw lists them. Run it on two devices and compare:
    /// the same version with another digest, or another last write of one
    /// device, means the server showed them different histories. The
    /// server's state is checked first; a refused one is reported after
    /// the list (exit status 1).
    Devices,
    /// Back the profile up into DIR (a new directory): a consistent copy of
    /// its files (already encrypted) with a manifest authenticated under
    /// the profile's key. Refused while another command uses the profile.
    Backup {
        /// Where the backup goes (new or empty).
        #[arg(value_name = "DIR")]
        out: std::path::PathBuf,
    },
    /// Restore a backup into the profile directory (`--dir`, which must be
    /// new or empty): the backup is checked whole before anything is
    /// written, then opened with the passphrase.
    Restore {
        /// The backup directory.
        #[arg(value_name = "BACKUP")]
        backup: std::path::PathBuf,
    },
    /// Move the index to fresh keys: a new generation of the index is
    /// built from the stored documents under new scheme keys, switched to
    /// atomically, and the old one dropped. Safe to interrupt and run
    /// again.
    Rekey {
        /// Move the whole profile to a new master key instead: every
        /// document and state sealed again under it (each index rebuilt
        /// with fresh scheme keys too), the header switched last. An old
        /// header then opens nothing with its passphrase. Safe to
        /// interrupt: run it again to complete it (other commands are
        /// refused until then). Tables are made again under the new key
        /// with their records (not those made by earlier builds under
        /// `t-<table>` names, which are refused).
        #[arg(long)]
        master: bool,
    },
    /// Change the profile's passphrase: asks for the current one, then the
    /// new one twice (or reads `SESAME_NEW_PASSPHRASE`). Only the profile
    /// header is rewritten, in one atomic step: the keys, the index and the
    /// documents stay as they are. A key file the profile needs stays
    /// needed unless --new-key-file or --no-key-file says otherwise.
    Passwd {
        /// From now on, need this key file (made if absent, as at `init`).
        #[arg(long, value_name = "FILE", conflicts_with = "no_key_file")]
        new_key_file: Option<PathBuf>,
        /// From now on, need the passphrase alone.
        #[arg(long)]
        no_key_file: bool,
    },
    /// Encrypted tables of structured records: create, list, show,
    /// delete records, drop (see also `import` and `query`).
    #[command(subcommand)]
    Table(TableCommand),
    /// Import records into a table from a CSV file (a header line naming
    /// the columns) or JSON Lines (one object per line).
    ///
    /// Every record is checked before anything is sent; an interrupted
    /// import is completed by running it again, and each record ends up in
    /// the table once (records are named by the schema's key, else by the
    /// file's name and line).
    Import {
        /// The table.
        #[arg(value_name = "TABLE")]
        table: String,
        /// The file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// csv or jsonl [default: from the file's extension]
        #[arg(long, value_name = "FORMAT")]
        format: Option<String>,
    },
    /// Query a table: `=`, `<`, `<=`, `>`, `>=`, `between A and B`,
    /// `like "abc*"`, combined with `and`, `or` and parentheses; strings in
    /// double quotes (`carrier = "UA" and dep_delay between 10 and 20`).
    Query {
        /// The table.
        #[arg(value_name = "TABLE")]
        table: String,
        /// The query (quote it for the shell).
        #[arg(value_name = "QUERY", allow_hyphen_values = true)]
        query: String,
        /// Print at most N records (the count of all matches is still
        /// given).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// table, json or csv.
        #[arg(long, value_name = "FORMAT", default_value = "table")]
        format: String,
        /// Say which index answers each part and what its scheme lets the
        /// server learn, without running the query.
        #[arg(long)]
        explain: bool,
    },
    /// List the searchable-encryption schemes: kind, paper, queries,
    /// leakage.
    Schemes {
        /// Print every field of every scheme in full.
        #[arg(long)]
        long: bool,
    },
    /// Run a benchmark experiment (see `sesame bench list`).
    Bench(sesame_bench::BenchArgs),
    /// Run the Sesame server: many tenants' encrypted indexes and
    /// documents, over gRPC and TLS.
    Serve(ServeArgs),
    /// Serve the profile's tables to PostgreSQL clients (psql, psycopg,
    /// JDBC, node-postgres): SCRAM-SHA-256 with one password; every
    /// predicate goes to the encrypted index that answers it.
    Sql {
        /// The address to listen on (off loopback only with TLS).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5433")]
        listen: std::net::SocketAddr,
        /// A file holding the password (mode 600); else SESAME_SQL_PASSWORD.
        #[arg(long, value_name = "FILE")]
        password_file: Option<PathBuf>,
        /// PEM certificate chain: TLS (with --tls-key).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// PEM private key of --tls-cert.
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Manage tenants' tokens for `sesame serve --tokens`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Make a private CA and a server certificate (for `sesame serve
    /// --tls-cert/--tls-key` and `sesame init --ca`).
    Cert(CertArgs),
}

/// `sesame table ...`
#[derive(Debug, Subcommand)]
pub(crate) enum TableCommand {
    /// Create a table from a schema file (TOML: fields, their types, and
    /// per field the query kinds and schemes; see docs/tables.md).
    Create {
        /// Its name (a-z, 0-9 and _).
        #[arg(value_name = "TABLE")]
        table: String,
        /// The schema file.
        #[arg(long, value_name = "FILE")]
        schema: PathBuf,
    },
    /// List the tables.
    List,
    /// Show a table's fields, indexes and record count.
    Show {
        /// The table.
        #[arg(value_name = "TABLE")]
        table: String,
        /// Also say where the table's bytes go in the store: its records,
        /// its keyword index and each range index, with bytes per record.
        #[arg(long)]
        space: bool,
    },
    /// Delete the records matching a query.
    Delete {
        /// The table.
        #[arg(value_name = "TABLE")]
        table: String,
        /// The query, as for `sesame query`.
        #[arg(value_name = "QUERY", allow_hyphen_values = true)]
        query: String,
    },
    /// Remove a table: its records and every index.
    Drop {
        /// The table.
        #[arg(value_name = "TABLE")]
        table: String,
    },
}

/// Arguments of `sesame serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7443", value_name = "ADDR")]
    pub listen: String,

    /// The store: a redb file (PATH or redb:PATH), postgres://... or memory.
    #[arg(long, value_name = "STORE")]
    pub store: String,

    /// The server's certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// The server's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// Tenants and their token hashes (see `sesame token new`). Without it,
    /// one tenant `default` gets a token valid for this run, printed once.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<std::path::PathBuf>,

    /// Serve without TLS. Refused on any address but loopback.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub insecure_plaintext: bool,

    /// FOR RESEARCH AND DEBUGGING ONLY, never in production: write the
    /// server's view (every request, response and store key, what an
    /// attacker who controls the server would see) to this new file, one
    /// JSON line per operation (docs/attacks.md).
    #[arg(long, value_name = "FILE")]
    pub record_view: Option<std::path::PathBuf>,

    /// Address of the admin port: Prometheus metrics at /metrics. Off by
    /// default; an address that is not loopback needs --admin-token-file.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<String>,

    /// File holding the admin port's bearer token (16 characters or more;
    /// the file must be private to its owner, mode 600): requests without
    /// `Authorization: Bearer TOKEN` get 401.
    #[arg(long, value_name = "FILE", requires = "admin")]
    pub admin_token_file: Option<std::path::PathBuf>,

    /// Largest request or response, in bytes.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub max_message: usize,

    /// Indexes a tenant may hold.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_indexes: usize,

    /// Longest a request may take, in seconds.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub request_timeout: u64,

    /// Longest a new connection may take to finish its TLS handshake, in
    /// seconds; connections that never do are closed then.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub handshake_timeout: u64,

    /// Longest a connection may stay without a request, in seconds; it is
    /// closed then (HTTP/2 pings do not count as requests).
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub idle_timeout: u64,

    /// Connections open at once (TLS handshakes included); over it, a new
    /// connection takes the place of the oldest on which no request has
    /// carried a valid token, or is closed at once when every connection
    /// has.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections: usize,

    /// Connections open at once from one IP address; over it, a new one
    /// takes the place of that address's oldest connection without a valid
    /// token, or is closed at once.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_connections_per_peer: usize,

    /// Longest a connection may stay open before a request on it carries
    /// a valid token, in seconds; it is closed then.
    #[arg(long, default_value_t = 20, value_name = "SECONDS")]
    pub auth_timeout: u64,

    /// Bytes of uploads the server holds in memory before their commit,
    /// all tenants together; beyond, uploads are refused.
    #[arg(long, default_value_t = 2 << 30, value_name = "BYTES")]
    pub max_buffer: usize,

    /// The same, for one tenant.
    #[arg(long, default_value_t = 1 << 30, value_name = "BYTES")]
    pub max_tenant_buffer: usize,
}

/// `sesame token ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Make a token for a tenant: prints it once, and appends its hash to
    /// the tokens file (created if absent).
    New {
        /// The tenant (1 to 64 characters of a-z, 0-9, - and _).
        #[arg(value_name = "TENANT")]
        tenant: String,
        /// The tokens file of the server.
        #[arg(long, value_name = "FILE")]
        tokens: std::path::PathBuf,
    },
}

/// Arguments of `sesame cert`.
#[derive(Debug, clap::Args)]
pub(crate) struct CertArgs {
    /// Directory for ca.pem, server.pem and server.key (made if absent).
    #[arg(value_name = "DIR")]
    pub out: std::path::PathBuf,

    /// Names the certificate is for (DNS names or IP addresses).
    #[arg(long = "name", value_name = "NAME", default_values = ["localhost", "127.0.0.1"])]
    pub names: Vec<String>,
}

/// Arguments of `sesame init`.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// The scheme of the index (see `sesame schemes`).
    #[arg(long, default_value = "pibas", value_name = "NAME")]
    pub scheme: String,

    /// Scheme parameters, as name=value pairs separated by commas.
    #[arg(long, default_value = "", value_name = "a=1,b=2")]
    pub params: String,

    /// INSECURE, for tests only: derive the key with Argon2id at its
    /// minimum cost (8 KiB, one pass) so that a stolen profile can be
    /// brute-forced cheaply. Same as SESAME_KDF=fast.
    #[arg(long)]
    pub insecure_fast_kdf: bool,

    /// Keep the index and the documents on this Sesame server
    /// (https://host:port) instead of in the profile.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,

    /// The tenant's token on the server. Discouraged: every local user
    /// can read a command line (`ps`); prefer --token-file, SESAME_TOKEN
    /// or the prompt (asked when none is given and stdin is a terminal).
    #[arg(
        long,
        value_name = "TOKEN",
        requires = "server",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,

    /// A file holding the tenant's token (its first line; private to its
    /// owner, mode 600).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,

    /// A CA certificate (PEM) to trust for the server, instead of the
    /// public roots.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub ca: Option<std::path::PathBuf>,

    /// Join, as another device, the profile that this index of the server
    /// belongs to (its name on the server, as `init` printed it on the
    /// first device: `p1a2b3c4d-default`); asks for that profile's
    /// passphrase.
    #[arg(long, value_name = "INDEX", requires = "server")]
    pub join: Option<String>,
}
