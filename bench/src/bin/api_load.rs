//! `api-load`: measures apply throughput and `get` latency against a running
//! control plane through its REST API (the same calls `meshlink apply/get`
//! make). Prints one JSON line with the results.
//!
//! ```sh
//! api-load --server http://127.0.0.1:5681 --token $(cat meshlink-data/admin-token) --count 10000
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// REST API URL.
    #[arg(long, default_value = "http://127.0.0.1:5681")]
    server: String,
    /// Admin token.
    #[arg(long)]
    token: String,
    /// Number of Dataplanes to apply.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Requests in flight at once during the apply phase.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Number of single-resource `get` requests to time (sequential).
    #[arg(long, default_value_t = 2_000)]
    gets: usize,
    /// Mesh to use (created if missing).
    #[arg(long, default_value = "bench")]
    mesh: String,
}

fn dataplane(mesh: &str, i: usize) -> serde_json::Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": format!("dp-{i}"), "mesh": mesh, "labels": {"shard": (i % 16).to_string()}},
        "spec": {"networking": {"address": format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256),
            "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": format!("svc-{}", i % 100)}}],
            "outbound": [{"port": 20001, "tags": {"kuma.io/service": "backend"}}]}}})
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .expect("client");
    let put = |path: String, body: serde_json::Value| {
        let c = client.clone();
        let url = format!("{}{path}", args.server);
        let token = args.token.clone();
        async move {
            let r = c
                .put(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("PUT");
            assert!(r.status().is_success(), "PUT failed: {}", r.status());
        }
    };
    let mesh = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": args.mesh}, "spec": {}});
    put(format!("/api/v1/meshes/{}", args.mesh), mesh).await;

    let start = Instant::now();
    futures::stream::iter(0..args.count)
        .map(|i| {
            put(
                format!("/api/v1/dataplanes/dp-{i}?mesh={}", args.mesh),
                dataplane(&args.mesh, i),
            )
        })
        .buffer_unordered(args.concurrency)
        .collect::<Vec<()>>()
        .await;
    let apply_secs = start.elapsed().as_secs_f64();

    let mut lat = Vec::with_capacity(args.gets);
    for k in 0..args.gets {
        let i = (k * 7919) % args.count;
        let t = Instant::now();
        let r = client
            .get(format!(
                "{}/api/v1/dataplanes/dp-{i}?mesh={}",
                args.server, args.mesh
            ))
            .bearer_auth(&args.token)
            .send()
            .await
            .expect("GET");
        let _ = r.bytes().await.expect("body");
        lat.push(t.elapsed());
    }
    lat.sort();

    let t = Instant::now();
    let list: serde_json::Value = client
        .get(format!(
            "{}/api/v1/dataplanes?mesh={}",
            args.server, args.mesh
        ))
        .bearer_auth(&args.token)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("list body");
    let list_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(args.count));

    println!(
        "{}",
        json!({
            "count": args.count,
            "concurrency": args.concurrency,
            "apply_seconds": apply_secs,
            "apply_per_second": args.count as f64 / apply_secs,
            "get_p50_ms": percentile(&lat, 0.5),
            "get_p99_ms": percentile(&lat, 0.99),
            "list_all_ms": list_ms,
        })
    );
}
