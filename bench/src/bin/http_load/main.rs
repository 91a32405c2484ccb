//! `http-load`: the load client and the app server of the data-plane proxy
//! benchmark (`bench/proxy-pair.sh`).
//!
//! ```sh
//! http-load serve --addr 127.0.0.1:27830 &
//! http-load latency --target 127.0.0.1:27830 --rate 1000 --connections 10 --duration 20s
//! http-load connect --target 127.0.0.1:27830 --workers 8 --duration 10s
//! http-load report < results.jsonl
//! ```
//!
//! `latency` and `connect` print one JSON line; `--tag k=v` adds fields to it
//! (`report` groups lines by `variant` and `round`).

mod connect;
mod hold;
mod http1;
mod latency;
mod report;
mod serve;
mod stats;

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::{Map, Value};

#[derive(Parser)]
#[command(about = "Load client and app server for the data-plane proxy benchmark")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tiny keep-alive HTTP/1.1 server: `200 OK` with a fixed body.
    Serve {
        /// Address to listen on.
        #[arg(long)]
        addr: SocketAddr,
        /// Response body size in bytes.
        #[arg(long, default_value_t = 64)]
        body_bytes: usize,
    },
    /// Open-loop latency at a fixed rate over keep-alive connections.
    Latency {
        /// Server or proxy address.
        #[arg(long)]
        target: SocketAddr,
        /// Requests per second, over all connections.
        #[arg(long, default_value_t = 1000)]
        rate: u64,
        /// Keep-alive connections (one thread each).
        #[arg(long, default_value_t = 10)]
        connections: usize,
        /// Measured time.
        #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Time before it whose requests are not recorded.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        /// Extra `key=value` fields for the JSON line (numbers stay numbers).
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// New connections per second, one request per connection.
    Connect {
        /// Server or proxy address.
        #[arg(long)]
        target: SocketAddr,
        /// Connections opened at once (closed loop, one thread each).
        #[arg(long, default_value_t = 8)]
        workers: usize,
        /// How long to run.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// Extra `key=value` fields for the JSON line.
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Opens N keep-alive connections (one request each), prints a JSON
    /// line, and holds them until stdin closes or `--hold` passes.
    Hold {
        /// Server or proxy address.
        #[arg(long)]
        target: SocketAddr,
        /// Connections to open and hold.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Longest time to hold them.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        hold: Duration,
        /// Extra `key=value` fields for the JSON line.
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Markdown table of medians from JSON lines on stdin.
    Report,
}

fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Serve { addr, body_bytes } => {
            tokio::runtime::Runtime::new()?.block_on(serve::serve(addr, body_bytes))
        }
        Command::Latency {
            target,
            rate,
            connections,
            duration,
            warmup,
            tags,
        } => {
            let plan = latency::Plan {
                target,
                rate,
                connections,
                duration,
                warmup,
            };
            print_line(tags, latency::run(&plan)?)
        }
        Command::Connect {
            target,
            workers,
            duration,
            tags,
        } => print_line(tags, connect::run(target, workers, duration)?),
        Command::Hold {
            target,
            count,
            hold,
            tags,
        } => hold::run(target, count, hold, tags),
        Command::Report => report::run(std::io::stdin().lock()),
    }
}

fn print_line(tags: Vec<String>, fields: Map<String, Value>) -> anyhow::Result<()> {
    let mut out = Map::new();
    for tag in tags {
        let (k, v) = tag
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--tag {tag:?}: expected key=value"))?;
        let v = v
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(v));
        out.insert(k.to_string(), v);
    }
    out.extend(fields);
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
