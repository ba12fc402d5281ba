//! `sesame bench` before the `sesame` CLI exists:
//! `cargo run --release -p sesame-bench --example bench -- sse-static --quick`
//! (without `--quick`: the standard scale; `--full`: the papers' sizes).

use clap::Parser;
use sesame_bench::BenchArgs;

/// Runs a Sesame benchmark experiment.
#[derive(Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match sesame_bench::run(&cli.args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
