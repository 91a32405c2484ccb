//! `xds-load`: an xDS load generator. Simulates N Envoy proxies on delta
//! ADS streams against a running control plane and measures
//! 1. propagation: an endpoint change written through the REST API until
//!    every proxy ACKed it;
//! 2. control-plane RSS per connected proxy (with `--cp-pid`);
//! 3. a reconnect storm: all proxies drop and reconnect within `--storm-spread`,
//!    until every proxy holds the current config, and how many certificates
//!    are stale afterwards.
//!
//! Prints a table, then the results as one JSON line. `bench/xds-load.sh`
//! starts a control plane and runs it.
//!
//! ```sh
//! xds-load --admin-token-file meshlink-data/admin-token --ca meshlink-data/cp-tls/ca.pem -n 1000
//! ```

mod api;
mod certs;
mod fleet;
mod phases;
mod report;
mod resources;
mod state;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::api::Api;
use crate::fleet::{Fleet, FleetConfig};
use crate::phases::{Phases, StormMode};
use crate::state::ClientKind;

#[derive(Parser)]
#[command(
    name = "xds-load",
    about = "xDS load generator: N simulated Envoys on delta ADS"
)]
struct Args {
    /// REST API URL.
    #[arg(long, default_value = "http://127.0.0.1:5681")]
    api: String,
    /// File holding the admin token.
    #[arg(long, default_value = "meshlink-data/admin-token")]
    admin_token_file: PathBuf,
    /// xDS URL; several comma-separated URLs (replicas of one control
    /// plane) spread the connections over them.
    #[arg(long, default_value = "https://127.0.0.1:5678")]
    xds: String,
    /// The control plane's xDS CA (`<data-dir>/cp-tls/ca.pem`).
    #[arg(long, default_value = "meshlink-data/cp-tls/ca.pem")]
    ca: PathBuf,
    /// TLS server name to verify on the xDS port.
    #[arg(long, default_value = "localhost")]
    tls_name: String,
    /// Number of proxies.
    #[arg(short = 'n', default_value_t = 1000)]
    n: usize,
    /// HTTP/2 connections the streams are spread over (default: N/100,
    /// rounded up). Real proxies use one connection each.
    #[arg(long)]
    connections: Option<usize>,
    /// Mesh to create and use.
    #[arg(long, default_value = "bench")]
    mesh: String,
    /// Client kind announced in node metadata.
    #[arg(long, value_enum, default_value = "envoy")]
    client: ClientKind,
    /// Number of propagation rounds.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Reconnect storms to run, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "resume,fresh"
    )]
    storm: Vec<StormMode>,
    /// Window over which all proxies reconnect in a storm.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    storm_spread: Duration,
    /// Window over which proxies first connect.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    connect_spread: Duration,
    /// Deadline of each phase.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Requests in flight during setup.
    #[arg(long, default_value_t = 16)]
    setup_concurrency: usize,
    /// Control-plane pid, to read its RSS and CPU time from /proc.
    #[arg(long)]
    cp_pid: Option<String>,
    /// Once every proxy first holds its config, and after each storm, with
    /// every proxy still connected, wait this long and read the control
    /// plane's RSS again (`cp_rss_kib.all_connected_settled`,
    /// `cp_rss_kib_settled`): what the allocator keeps of the burst's
    /// freed memory is gone by then, so it is the steady cost of the
    /// connected proxies. 0 skips it.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    rss_settle: Duration,
    /// Dataplane certificate lifetime for the Mesh (default: the Mesh default).
    #[arg(long)]
    dp_cert_expiration: Option<String>,
    /// What to run: `setup` applies the Mesh and Dataplanes and exits;
    /// `xds` assumes they exist and runs the measured phases (so the
    /// control plane can be restarted in between); `all` does both.
    #[arg(long, value_enum, default_value = "all")]
    phase: Phase,
    /// Once every proxy holds its full configuration, keep them connected
    /// this long before the next phase (for a heap or CPU profile of the
    /// control plane with N proxies connected; prints when it starts).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    hold: Duration,
}

/// Which part of the benchmark to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Phase {
    /// Setup, then the measured phases.
    All,
    /// Only apply the Mesh and Dataplanes.
    Setup,
    /// Only the measured phases (tokens are issued first).
    Xds,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Runtime::new()
        .context("starting the runtime")?
        .block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let token = std::fs::read_to_string(&args.admin_token_file)
        .with_context(|| format!("--admin-token-file {}", args.admin_token_file.display()))?;
    let ca_pem =
        std::fs::read_to_string(&args.ca).with_context(|| format!("--ca {}", args.ca.display()))?;
    let n = args.n;
    let load_start = loadavg();
    let connections = args
        .connections
        .unwrap_or(n.div_ceil(100))
        .clamp(1, n.max(1));
    let api = Api::new(&args.api, token.trim().to_owned(), args.setup_concurrency)?;

    let t = Instant::now();
    if args.phase != Phase::Xds {
        api.apply_mesh(&args.mesh, args.dp_cert_expiration.as_deref())
            .await?;
        api.apply_backend(&args.mesh, 1, 8080).await?;
        api.apply_backend(&args.mesh, 2, 8080).await?;
        api.apply_proxies(&args.mesh, n, args.setup_concurrency)
            .await?;
    }
    let dataplanes_s = t.elapsed().as_secs_f64();
    if args.phase == Phase::Setup {
        eprintln!("setup: {n} dataplanes in {dataplanes_s:.1} s");
        return Ok(());
    }
    let t = Instant::now();
    let tokens = api
        .proxy_tokens(&args.mesh, n, args.setup_concurrency)
        .await?;
    let tokens_s = t.elapsed().as_secs_f64();
    eprintln!("setup: {n} dataplanes in {dataplanes_s:.1} s, tokens in {tokens_s:.1} s");

    let config = FleetConfig {
        xds_url: args.xds.clone(),
        ca_pem,
        domain: args.tls_name.clone(),
        connections,
        mesh: args.mesh.clone(),
        client: args.client,
    };
    let mut fleet = Fleet::new(config, tokens)?;
    let mut phases = Phases {
        api: &api,
        fleet: &mut fleet,
        mesh: &args.mesh,
        cp_pid: args.cp_pid.as_deref(),
        timeout: args.timeout,
        rss_settle: args.rss_settle,
        round: 0,
    };
    let idle = phases.sample();
    let initial = phases.initial(args.connect_spread).await?;
    let connected = phases.sample();
    // The same proxies, once the allocator has returned what the connect
    // burst freed (jemalloc's decay is 5 s): the steady cost per proxy.
    let connected_settled = if args.rss_settle.is_zero() {
        None
    } else {
        tokio::time::sleep(args.rss_settle).await;
        phases.sample().cp_rss_kib
    };
    if !args.hold.is_zero() {
        eprintln!("holding {n} connected proxies for {:?}", args.hold);
        tokio::time::sleep(args.hold).await;
    }
    let propagation = phases.propagation(args.rounds).await?;
    let after_propagation = phases.sample();
    let mut storms = Vec::new();
    for mode in &args.storm {
        storms.push(phases.storm(*mode, args.storm_spread).await?);
    }
    phases.fleet.stop().await;
    phases.fleet.drain();
    let disconnected = phases.sample();

    let per_proxy = |connected: Option<u64>| match (idle.cp_rss_kib, connected) {
        (Some(a), Some(b)) => {
            json!(((b as f64 - a as f64) / n.max(1) as f64 * 10.0).round() / 10.0)
        }
        _ => Value::Null,
    };
    let result = json!({
        "n": n, "connections": connections, "client": args.client.as_str(), "mesh": args.mesh,
        "cores": std::thread::available_parallelism().map(|c| c.get()).unwrap_or(0),
        "setup": {"dataplanes_s": report::round(dataplanes_s), "tokens_s": report::round(tokens_s)},
        "cp_rss_kib": {"before_connect": idle.cp_rss_kib, "all_connected": connected.cp_rss_kib,
            "after_propagation": after_propagation.cp_rss_kib, "all_disconnected": disconnected.cp_rss_kib,
            "per_proxy_kib": per_proxy(connected.cp_rss_kib),
            "all_connected_settled": connected_settled,
            "per_proxy_settled_kib": per_proxy(connected_settled)},
        "initial": initial, "propagation": propagation, "storms": storms,
        "loadavg": {"start": load_start, "end": loadavg()},
        "errors": phases.fleet.errors,
    });
    print_table(&result);
    println!("{result}");
    Ok(())
}

/// `/proc/loadavg`'s 1-, 5- and 15-minute averages: how busy the shared
/// machine was.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn print_table(r: &Value) {
    let fmt = |v: Option<&Value>, unit: &str| match v.and_then(Value::as_f64) {
        Some(x) if unit == "ms" => format!("{x:.0} ms"),
        Some(x) => format!("{x} {unit}"),
        None => "-".to_owned(),
    };
    println!(
        "xds-load: N={} over {} connections, client {}, load average {} -> {}",
        r["n"], r["connections"], r["client"], r["loadavg"]["start"], r["loadavg"]["end"]
    );
    let mut rows: Vec<(String, String)> = [
        (
            "initial: all N hold full config, from start",
            "/initial/ready_since_start/max_ms",
            "ms",
        ),
        (
            "initial: per proxy p50, from its own connect",
            "/initial/ready_since_own_connect/p50_ms",
            "ms",
        ),
        (
            "initial: per proxy p99, from its own connect",
            "/initial/ready_since_own_connect/p99_ms",
            "ms",
        ),
        (
            "propagation p50 (median of rounds)",
            "/propagation/median_p50_ms",
            "ms",
        ),
        (
            "propagation p90 (median of rounds)",
            "/propagation/median_p90_ms",
            "ms",
        ),
        (
            "propagation p99 (median of rounds)",
            "/propagation/median_p99_ms",
            "ms",
        ),
        (
            "propagation all N (median of rounds)",
            "/propagation/median_all_ms",
            "ms",
        ),
        (
            "propagation: cp CPU per proxy per change (median)",
            "/propagation/median_cp_cpu_us_per_proxy",
            "µs",
        ),
        ("cp RSS before connect", "/cp_rss_kib/before_connect", "KiB"),
        ("cp RSS all connected", "/cp_rss_kib/all_connected", "KiB"),
        (
            "cp RSS per connected proxy",
            "/cp_rss_kib/per_proxy_kib",
            "KiB",
        ),
        (
            "cp RSS per connected proxy, after --rss-settle",
            "/cp_rss_kib/per_proxy_settled_kib",
            "KiB",
        ),
    ]
    .into_iter()
    .map(|(label, ptr, unit)| (label.to_owned(), fmt(r.pointer(ptr), unit)))
    .collect();
    for s in r["storms"].as_array().into_iter().flatten() {
        let mode = s["mode"].as_str().unwrap_or("?");
        for (label, ptr, unit) in [
            (
                "all N current, from first reconnect",
                "/current_since_start/max_ms",
                "ms",
            ),
            (
                "per proxy p50, from its own reconnect",
                "/current_since_own_reconnect/p50_ms",
                "ms",
            ),
            (
                "per proxy p99, from its own reconnect",
                "/current_since_own_reconnect/p99_ms",
                "ms",
            ),
            (
                "proxies not current by the deadline",
                "/current_since_start/missing",
                "",
            ),
            ("stale certificates", "/certificates/stale", ""),
            ("cp CPU until all current", "/cpu/cp_cpu_s", "s"),
            ("cp RSS when all current", "/cp_rss_kib_after", "KiB"),
            (
                "cp RSS after --rss-settle, all connected",
                "/cp_rss_kib_settled",
                "KiB",
            ),
        ] {
            rows.push((
                format!("storm ({mode}): {label}"),
                fmt(s.pointer(ptr), unit),
            ));
        }
    }
    println!("{:<58} {:>12}", "figure", "value");
    for (label, value) in rows {
        println!("{label:<58} {value:>12}");
    }
    if let Some(errors) = r["errors"].as_object().filter(|e| !e.is_empty()) {
        println!("stream errors / NACKs:");
        for (msg, count) in errors {
            println!("  {count} x {msg}");
        }
    }
}
