//! `meshlink-proxy`: parses flags, sets up logging, runs the proxy until
//! SIGTERM/SIGINT, drains, and exits 0; or (`wait`) holds an application
//! until a sidecar is ready, then runs it.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use meshlink_proxy::options::RunArgs;
use meshlink_proxy::wait::WaitArgs;
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
    Run(Box<RunArgs>),
    /// Waits until a sidecar's /ready answers 200, then runs COMMAND (after
    /// `--`) in its place, or exits 0 without one; exits 1 at --timeout.
    Wait(WaitArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    meshlink_runtime::init_tracing("info");
    let args = match cli.command {
        Command::Run(args) => *args,
        Command::Wait(args) => return wait(args),
    };
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

/// `meshlink-proxy wait`: see [`meshlink_proxy::wait`].
fn wait(args: WaitArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let admin = args.admin_addr;
    let waited = runtime.block_on(meshlink_proxy::wait::until_ready(
        admin,
        args.timeout,
        args.interval,
        |waited, reason| {
            eprintln!(
                "meshlink-proxy wait: the sidecar at {admin} is not ready after {}s: {reason}",
                waited.as_secs()
            );
        },
    ));
    drop(runtime);
    if let Err(e) = waited {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    let Some((program, rest)) = args.command.split_first() else {
        return ExitCode::SUCCESS;
    };
    use std::os::unix::process::CommandExt as _;
    let e = std::process::Command::new(program).args(rest).exec();
    eprintln!("error: cannot run {program}: {e}");
    ExitCode::from(127)
}
