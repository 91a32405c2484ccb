//! `meshlink-proxy`: parses flags, sets up logging, runs the proxy until
//! SIGTERM/SIGINT, drains, and exits 0.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use meshlink_proxy::options::RunArgs;
use meshlink_runtime::Shutdown;

/// jemalloc returns freed memory to the OS (background purging threads and a
/// few seconds of decay, set at build time in `.cargo/config.toml`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "meshlink-proxy", version, about = "meshlink data-plane proxy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the proxy until SIGTERM or SIGINT, then drains.
    Run(RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    meshlink_runtime::init_tracing("info");
    let Command::Run(args) = cli.command;
    let options = match args.validate() {
        Ok(o) => o,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let mut builder = if options.worker_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(options.worker_threads);
        b
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        shutdown.trigger_on_signals();
        match meshlink_proxy::run(options, shutdown).await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        }
    })
}
