//! `meshlink-cp`: parses flags, sets up logging, starts the control plane
//! and waits for SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use meshlink_cp::{ConfigOverrides, ControlPlane};

#[derive(Parser)]
#[command(name = "meshlink-cp", version, about = "meshlink control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the control plane until SIGTERM or SIGINT.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// YAML config file; keys are the flag names in camelCase (dataDir, apiAddr, ...).
    #[arg(long, env = "MESHLINK_CP_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory [default: ./meshlink-data].
    #[arg(long, env = "MESHLINK_CP_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Store URL: sqlite://PATH or postgres://USER@HOST:PORT/DB [default: sqlite://<data-dir>/store.db].
    #[arg(long, env = "MESHLINK_CP_STORE")]
    store: Option<String>,
    /// REST API address [default: 127.0.0.1:5681].
    #[arg(long, env = "MESHLINK_CP_API_ADDR")]
    api_addr: Option<SocketAddr>,
    /// xDS and Certify address [default: 0.0.0.0:5678].
    #[arg(long, env = "MESHLINK_CP_XDS_ADDR")]
    xds_addr: Option<SocketAddr>,
    /// Grant server address [default: 0.0.0.0:9090].
    #[arg(long, env = "MESHLINK_CP_GRANT_ADDR")]
    grant_addr: Option<SocketAddr>,
    /// Host other sites and proxies dial [default: first non-loopback IPv4, else 127.0.0.1].
    #[arg(long, env = "MESHLINK_CP_ADVERTISED_HOST")]
    advertised_host: Option<String>,
    /// Once listening, write the bound addresses here as JSON ({"apiAddr", "xdsAddr"}), atomically; useful with port 0.
    #[arg(long, env = "MESHLINK_CP_READY_FILE")]
    ready_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    meshlink_runtime::init_tracing("info");
    let Command::Run(args) = cli.command;
    let ready_file = args.ready_file.clone();
    let file = match &args.config {
        Some(path) => match ConfigOverrides::from_file(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => ConfigOverrides::default(),
    };
    let flags = ConfigOverrides {
        data_dir: args.data_dir,
        store: args.store,
        api_addr: args.api_addr,
        xds_addr: args.xds_addr,
        grant_addr: args.grant_addr,
        advertised_host: args.advertised_host,
    };
    let config = match flags.over(file).resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        let cp = match ControlPlane::start(config).await {
            Ok(cp) => cp,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        cp.shutdown.trigger_on_signals();
        if let Some(path) = &ready_file
            && let Err(e) = cp.write_ready_file(path)
        {
            eprintln!("error: {e}");
            let _ = cp.stop().await;
            return ExitCode::from(1);
        }
        match cp.wait().await {
            Ok(()) => {
                tracing::info!("control plane stopped");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        }
    })
}
