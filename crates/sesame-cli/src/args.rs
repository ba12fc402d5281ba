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
    SESAME_KDF=fast    at `init`: INSECURE minimal Argon2id cost, for tests only")]
pub struct Cli {
    /// Profile directory [default: $SESAME_HOME, or ./.sesame]
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a profile: asks for a passphrase, derives the keys, and binds
    /// the profile's index to a scheme.
    Init(InitArgs),
    /// Encrypt and index files; directories are added recursively.
    Add {
        /// Files or directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// List the documents that contain a keyword (their ids and paths).
    Search {
        /// One keyword; matched after lower-casing, like the documents.
        #[arg(value_name = "KEYWORD")]
        keyword: String,
    },
    /// Decrypt a document to standard output.
    Get {
        /// The document id, as `search` or `list` print it.
        #[arg(value_name = "DOC_ID", allow_hyphen_values = true)]
        id: String,
    },
    /// List the documents of the index.
    List,
    /// List the searchable-encryption schemes: kind, paper, queries,
    /// leakage.
    Schemes {
        /// Print every field of every scheme in full.
        #[arg(long)]
        long: bool,
    },
    /// Run a benchmark experiment (see `sesame bench list`).
    Bench(sesame_bench::BenchArgs),
}

/// Arguments of `sesame init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
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
}
