//! `feed-delay`: the change-feed delay between control-plane replicas
//! sharing one PostgreSQL store. Writes on one replica's REST API (one
//! Mesh at a time) while a long-poll watch runs on another; the delay of a
//! write is from the writer's acknowledgement to the watcher receiving it
//! (0 when the watch answered first). Prints the percentiles as one JSON
//! line.
//!
//! ```sh
//! feed-delay --writer http://127.0.0.1:5681 --watcher http://127.0.0.1:5682 --token T --count 500
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// REST API of the replica that takes the writes.
    #[arg(long)]
    writer: String,
    /// REST API of the replica that watches.
    #[arg(long)]
    watcher: String,
    /// Admin token (shared by the replicas).
    #[arg(long)]
    token: String,
    /// Writes to time.
    #[arg(long, default_value_t = 500)]
    count: usize,
    /// Pause between writes.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    gap: Duration,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let http = reqwest::Client::new();
    let arrived: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let from: serde_json::Value = http
        .get(format!("{}/api/v1/watch?timeout=1ms", args.watcher))
        .bearer_auth(&args.token)
        .send()
        .await?
        .json()
        .await?;
    let mut revision = from["revision"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| from["revision"].to_string());
    let watcher = {
        let (http, arrived, url, token) = (
            http.clone(),
            arrived.clone(),
            args.watcher.clone(),
            args.token.clone(),
        );
        tokio::spawn(async move {
            loop {
                let body: serde_json::Value = match http
                    .get(format!(
                        "{url}/api/v1/watch?from={revision}&kind=Mesh&timeout=10s"
                    ))
                    .bearer_auth(&token)
                    .send()
                    .await
                {
                    Ok(r) => match r.json().await {
                        Ok(b) => b,
                        Err(_) => continue,
                    },
                    Err(_) => continue,
                };
                let now = Instant::now();
                for e in body["events"].as_array().into_iter().flatten() {
                    if let Some(n) = e["resource"]["metadata"]["name"].as_str() {
                        arrived.lock().unwrap().entry(n.to_owned()).or_insert(now);
                    }
                }
                if let Some(r) = body["revision"].as_str() {
                    revision = r.to_owned();
                } else if let Some(r) = body["revision"].as_u64() {
                    revision = r.to_string();
                }
            }
        })
    };
    let mut acked = Vec::with_capacity(args.count);
    let run = format!("fd{}", std::process::id());
    for i in 0..args.count {
        let name = format!("{run}-{i}");
        let resp = http
            .post(format!("{}/api/v1/meshes", args.writer))
            .bearer_auth(&args.token)
            .json(
                &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
                "metadata": {"name": name}, "spec": {}}),
            )
            .send()
            .await?;
        anyhow::ensure!(
            resp.status().is_success(),
            "write failed: {}",
            resp.status()
        );
        acked.push((name, Instant::now()));
        tokio::time::sleep(args.gap).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while arrived.lock().unwrap().len() < args.count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watcher.abort();
    let arrived = arrived.lock().unwrap();
    let mut delays: Vec<f64> = acked
        .iter()
        .filter_map(|(n, at)| {
            arrived
                .get(n)
                .map(|a| a.saturating_duration_since(*at).as_secs_f64() * 1e3)
        })
        .collect();
    let missing = args.count - delays.len();
    delays.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({
            "writes": args.count,
            "missing": missing,
            "delay_ms_p50": percentile(&delays, 0.5),
            "delay_ms_p99": percentile(&delays, 0.99),
            "delay_ms_max": delays.last().copied().unwrap_or(f64::NAN),
        })
    );
    Ok(())
}
