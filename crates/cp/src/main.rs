//! `meshlink-cp`: parses flags, sets up logging, starts the control plane
//! and waits for SIGTERM/SIGINT.
//!
//! Exit codes: 0 after a clean drain; 1 on a start-up or runtime failure,
//! or when the drain did not finish within `--drain-timeout` (the rest was
//! forced); 2 for bad flags or config; 130 when a second SIGTERM/SIGINT cut
//! the drain short.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use meshlink_cp::{ConfigOverrides, ControlPlane};

/// jemalloc returns freed memory to the OS (background purging threads and a
/// few seconds of decay, set at build time in `.cargo/config.toml`); the
/// system allocator kept the peak of a reconnect storm for good. The
/// `system-allocator` feature leaves it out, for heap profilers that hook
/// `malloc` (heaptrack; docs/BENCHMARKS.md).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// How long shutdown waits for open streams and in-flight requests before forcing the exit [default: 10s].
    #[arg(long, env = "MESHLINK_CP_DRAIN_TIMEOUT", value_name = "DURATION")]
    drain_timeout: Option<String>,
    /// New ADS streams admitted at once (token-bucket size) [default: 5000].
    #[arg(long, env = "MESHLINK_CP_XDS_STREAM_BURST", value_name = "N")]
    xds_stream_burst: Option<u32>,
    /// New ADS streams admitted per second after the burst [default: 5000].
    #[arg(long, env = "MESHLINK_CP_XDS_STREAMS_PER_SECOND", value_name = "N")]
    xds_streams_per_second: Option<f64>,
    /// This replica's name among control planes sharing a store [default: <hostname>:<xds port>].
    #[arg(long, env = "MESHLINK_CP_INSTANCE")]
    instance: Option<String>,
    /// How long the leader's lease lasts without renewal; singleton jobs run every two leases [default: 15s].
    #[arg(long, env = "MESHLINK_CP_LEADER_LEASE", value_name = "DURATION")]
    leader_lease: Option<String>,
    /// How long a Dataplane labelled meshlink.dev/lifecycle=ephemeral may stay offline before the leader deletes it [default: 72h].
    #[arg(long, env = "MESHLINK_CP_DATAPLANE_GC_GRACE", value_name = "DURATION")]
    dataplane_gc_grace: Option<String>,
    /// Longest wait for a request header on the REST API and grant ports (from the accept, or the first byte of a later request) [default: 10s].
    #[arg(
        long,
        env = "MESHLINK_CP_HTTP_HEADER_READ_TIMEOUT",
        value_name = "DURATION"
    )]
    http_header_read_timeout: Option<String>,
    /// Longest wait between requests on a kept-alive REST API or grant connection [default: 120s].
    #[arg(long, env = "MESHLINK_CP_HTTP_IDLE_TIMEOUT", value_name = "DURATION")]
    http_idle_timeout: Option<String>,
    /// Most connections open at once on each of the REST API and grant ports [default: 4096].
    #[arg(long, env = "MESHLINK_CP_HTTP_MAX_CONNECTIONS", value_name = "N")]
    http_max_connections: Option<usize>,
    /// Change-feed history kept by count: the last N changes stay, whatever their age (0: by age only) [default: 10000].
    #[arg(long, env = "MESHLINK_CP_FEED_RETAIN_REVISIONS", value_name = "N")]
    feed_retain_revisions: Option<u64>,
    /// Change-feed history kept by age; a watcher further behind than both bounds gets 410 Gone and lists again (0s: by count only) [default: 10m].
    #[arg(long, env = "MESHLINK_CP_FEED_RETAIN_FOR", value_name = "DURATION")]
    feed_retain_for: Option<String>,
    /// Where virtual IPs of mesh services come from, for transparent proxying: comma-separated CIDRs, disjoint, holding no address of this host [default: 240.0.0.0/4].
    #[arg(long, env = "MESHLINK_CP_VIP_RANGE", value_name = "CIDRS")]
    vip_range: Option<String>,
    /// The DNS domain of mesh service names: sidecars answer `<service>.<domain>` with the service's virtual IP [default: mesh].
    #[arg(long, env = "MESHLINK_CP_DNS_DOMAIN", value_name = "DOMAIN")]
    dns_domain: Option<String>,
    /// Once listening, write the bound addresses here as JSON ({"apiAddr", "xdsAddr"}), atomically; useful with port 0.
    #[arg(long, env = "MESHLINK_CP_READY_FILE")]
    ready_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    meshlink_runtime::init_tracing("info");
    // One descriptor per REST, grant and xDS connection.
    if let Err(e) = meshlink_runtime::raise_open_files_limit() {
        tracing::warn!(error = %e, "keeping the open-files limit; connections beyond it will fail to be accepted");
    }
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
        drain_timeout: args.drain_timeout,
        xds_stream_burst: args.xds_stream_burst,
        xds_streams_per_second: args.xds_streams_per_second,
        instance: args.instance,
        leader_lease: args.leader_lease,
        dataplane_gc_grace: args.dataplane_gc_grace,
        http_header_read_timeout: args.http_header_read_timeout,
        http_idle_timeout: args.http_idle_timeout,
        http_max_connections: args.http_max_connections,
        feed_retain_revisions: args.feed_retain_revisions,
        feed_retain_for: args.feed_retain_for,
        vip_range: args.vip_range,
        dns_domain: args.dns_domain,
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
    let code = rt.block_on(async move {
        let cp = match ControlPlane::start(config).await {
            Ok(cp) => cp,
            Err(e) => {
                eprintln!("error: {e}");
                // A setting this host cannot use is a bad setting, as
                // one refused before start.
                let code = if matches!(e, meshlink_cp::CpError::Config(_)) {
                    2
                } else {
                    1
                };
                return ExitCode::from(code);
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
    });
    // The drain already waited; do not wait again for blocking work (store
    // calls) that a forced exit left behind.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}
