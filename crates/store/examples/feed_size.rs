//! How big the store gets over a simulated day of control-plane writes,
//! with and without change-feed compaction (`bench/store-compaction.sh`
//! runs it on SQLite and PostgreSQL; docs/BENCHMARKS.md has the numbers).
//!
//! ```sh
//! cargo run --release -p meshlink-store --example feed_size -- \
//!     --store sqlite:///tmp/x/store.db [--no-compact] [--hours 24] \
//!     [--proxies 1000] [--storms 100] [--replicas 3]
//! ```
//!
//! The timeline is compressed: time is simulated (the [`Compactor`] takes
//! `now`), the writes are real. Every 5 simulated seconds each replica
//! writes its heartbeat and the leader renews its lease; every 30 s the
//! two singleton jobs record a claim and a result; `--storms` times a day,
//! evenly spread, all `--proxies` Dataplanes go offline and online again
//! (two status writes each, in flushes of up to 1,000 as the status task
//! does). One 5 s tick's writes go in one batch (each still its own
//! revision and feed row), so the run takes minutes, not a day of fsyncs.
//! Prints one JSON line per simulated hour: revision, feed rows and bytes
//! on disk (SQLite: the database file plus its WAL; PostgreSQL: the
//! database's `pg_database_size`, and the `changes` table alone). On
//! PostgreSQL it runs `VACUUM` every simulated 10 minutes, standing in for
//! autovacuum, which wakes once a real minute (a simulated half-hour here).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use meshlink_store::{BatchWrite, Compactor, ObjectKey, Retention};
use serde_json::json;

const TICK: Duration = Duration::from_secs(5);

struct Args {
    store: String,
    compact: bool,
    hours: u64,
    proxies: usize,
    storms: u64,
    replicas: usize,
}

fn args() -> Args {
    let mut a = Args {
        store: String::new(),
        compact: true,
        hours: 24,
        proxies: 1_000,
        storms: 100,
        replicas: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--store" => a.store = value(),
            "--no-compact" => a.compact = false,
            "--hours" => a.hours = value().parse().expect("--hours: a number"),
            "--proxies" => a.proxies = value().parse().expect("--proxies: a number"),
            "--storms" => a.storms = value().parse().expect("--storms: a number"),
            "--replicas" => a.replicas = value().parse().expect("--replicas: a number"),
            other => panic!("unknown flag {other}; see the example's doc comment"),
        }
    }
    assert!(!a.store.is_empty(), "--store URL is required");
    a
}

/// A Dataplane as the control plane stores it (spec and status), about
/// 1.3 KiB of JSON.
fn dataplane(i: usize, online: bool, generation: u64) -> serde_json::Value {
    json!({
        "type": "Dataplane", "mesh": "default", "name": format!("dp-{i}"),
        "spec": {"networking": {"address": format!("10.0.{}.{}", i / 250, i % 250),
            "inbound": [{"port": 8080, "servicePort": 8080,
                "tags": {"kuma.io/service": format!("svc-{}", i % 50), "kuma.io/protocol": "http"}}],
            "outbound": [{"port": 9000, "tags": {"kuma.io/service": "backend"}}]}},
        "status": {"conditions": [
            {"type": "Ready", "status": if online { "True" } else { "False" },
             "reason": if online { "Connected" } else { "Disconnected" },
             "message": "the proxy's ADS stream is open and its configuration was acknowledged",
             "lastTransitionTime": "2026-12-06T10:00:00Z"}],
            "subscription": {"controlPlaneInstanceId": "cp-1:5678", "generation": generation,
                "connectTime": "2026-12-06T10:00:00Z", "disconnectTime": null,
                "stats": {"responsesSent": 12, "responsesAcknowledged": 12}},
            "certificate": {"serial": "4f2a9c0e1b7d3a5f", "notAfter": "2026-12-07T10:00:00Z",
                "spiffeId": format!("spiffe://default/svc-{}", i % 50), "generation": generation}}
    })
}

fn put(kind: &str, mesh: &str, name: String, body: serde_json::Value) -> BatchWrite {
    BatchWrite::Put {
        key: ObjectKey::new(kind, mesh, name),
        labels: BTreeMap::new(),
        body,
    }
}

/// Bytes on disk: (whole store, the change feed's table or `None`).
async fn size(url: &str, pg: Option<&sqlx::PgPool>) -> (u64, Option<u64>) {
    if let Some(pool) = pg {
        let db: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(pool)
            .await
            .unwrap();
        let feed: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('changes')")
            .fetch_one(pool)
            .await
            .unwrap();
        return (db as u64, Some(feed as u64));
    }
    let path = url.strip_prefix("sqlite://").unwrap();
    let len = |p: String| std::fs::metadata(p).map_or(0, |m| m.len());
    (len(path.to_owned()) + len(format!("{path}-wal")), None)
}

#[tokio::main]
async fn main() {
    let a = args();
    let store = meshlink_store::open(&a.store)
        .await
        .expect("open the store");
    let pg = if a.store.starts_with("postgres") {
        Some(sqlx::PgPool::connect(&a.store).await.expect("connect"))
    } else {
        None
    };
    let started = Instant::now();
    let setup: Vec<BatchWrite> = (0..a.proxies)
        .map(|i| {
            put(
                "Dataplane",
                "default",
                format!("dp-{i}"),
                dataplane(i, true, 1),
            )
        })
        .collect();
    for chunk in setup.chunks(1_000) {
        store.write_batch(chunk).await.unwrap();
    }

    let retention = Retention::default();
    let mut compactor = Compactor::new(retention);
    let ticks = a.hours * 3600 / TICK.as_secs();
    let per_tick_storms = ticks.checked_div(a.storms).unwrap_or(u64::MAX);
    let compact_every = retention.interval().as_secs() / TICK.as_secs();
    let clock = Instant::now();
    let mut generation = 1;
    let (mut deleted, mut peak_rows) = (0, 0);
    for tick in 0..ticks {
        let t = TICK * u32::try_from(tick).unwrap();
        let mut writes: Vec<BatchWrite> = (0..a.replicas)
            .map(|r| {
                let body = json!({"instance": format!("cp-{r}:5678"), "version": "0.1.0",
                    "apiAddr": "10.0.0.1:5681", "xdsAddr": "10.0.0.1:5678", "grantAddr": "10.0.0.1:9090",
                    "started": "2026-12-06T00:00:00Z", "heartbeat": format!("t+{}s", t.as_secs()),
                    "connectedProxies": a.proxies / a.replicas.max(1), "incarnation": "9b1d3c6e-2f4a-4e8b-a1c5-7d9e0f2b4a6c"});
                put("internal.ControlPlane", "", format!("cp-{r}"), body)
            })
            .collect();
        writes.push(put(
            "internal.Leader",
            "",
            "control-plane".into(),
            json!({"holder": "cp-0:5678", "fencingToken": 1, "renewed": format!("t+{}s", t.as_secs())}),
        ));
        if tick % 6 == 0 {
            for job in ["dataplane-gc", "grant-expiry"] {
                let body = json!({"job": job, "periodSeconds": 30, "lastPeriod": tick / 6, "runs": tick / 6 + 1,
                    "instance": "cp-0:5678", "fencingToken": 1, "lastResult": "0 deleted"});
                writes.push(put("internal.JobRun", "", job.into(), body.clone()));
                writes.push(put("internal.JobRun", "", job.into(), body));
            }
        }
        store.write_batch(&writes).await.unwrap();
        if tick % per_tick_storms == per_tick_storms / 2 {
            for online in [false, true] {
                generation += 1;
                let statuses: Vec<BatchWrite> = (0..a.proxies)
                    .map(|i| {
                        let body = dataplane(i, online, generation);
                        put("Dataplane", "default", format!("dp-{i}"), body)
                    })
                    .collect();
                for chunk in statuses.chunks(1_000) {
                    store.write_batch(chunk).await.unwrap();
                }
            }
        }
        // Autovacuum wakes once a real minute, which is a simulated
        // half-hour here: stand in for it every simulated 10 minutes, in
        // both modes, so the objects table is not measured bloated.
        if let Some(pool) = &pg
            && tick % 120 == 0
        {
            sqlx::raw_sql("VACUUM").execute(pool).await.unwrap();
        }
        if a.compact
            && tick % compact_every == 0
            && let Some(done) = compactor.tick(&*store, clock + t, true).await.unwrap()
        {
            deleted += done.deleted;
        }
        let current = store.current_revision().await.unwrap();
        let rows = current - store.compacted_revision().await.unwrap();
        peak_rows = peak_rows.max(rows);
        if (tick + 1) % (3600 / TICK.as_secs()) == 0 {
            let (bytes, feed_bytes) = size(&a.store, pg.as_ref()).await;
            println!(
                "{}",
                json!({"backend": store.backend(), "compaction": a.compact, "hour": (tick + 1) * 5 / 3600,
                    "revision": current, "feed_rows": rows, "bytes": bytes, "feed_table_bytes": feed_bytes,
                    "elapsed_s": started.elapsed().as_secs()})
            );
        }
    }
    println!(
        "{}",
        json!({"backend": store.backend(), "compaction": a.compact, "summary": true,
            "revision": store.current_revision().await.unwrap(), "peak_feed_rows": peak_rows,
            "deleted": deleted, "retention": {"revisions": retention.revisions, "age_s": retention.age.as_secs()},
            "elapsed_s": started.elapsed().as_secs()})
    );
}
