//! Link transport micro-benchmark: new flows per second and single-flow
//! throughput through a loopback link (client → listener on router A →
//! TLS 1.3 link → router B → connector → server) against a direct TCP
//! connection, side by side in one run, plus the process RSS with 1,000
//! open flows. Everything runs in this one process on a 2-worker tokio
//! runtime: client, servers and both routers share the machine's cores.
//!
//! Run with `bench/link-flows.sh` (or `cargo bench -p meshlink-link
//! --bench link_pair`); `ROUNDS`, `FLOW_SECS`, `WORKERS` and `BULK_MIB`
//! change the defaults. It prints medians, ratios, CPU per unit of work
//! and the load average; it asserts nothing about them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use meshlink_identity::SiteCa;
use meshlink_link::{
    ConnectorConfig, CredentialPem, LinkConfig, LinkMetrics, LinkState, ListenerConfig, RoleConfig,
    Router, RouterConfig, RouterOptions,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of this process, from /proc/self/stat.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // USER_HZ = 100 on Linux
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn loadavg() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap();
    l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Reads one byte, answers one byte, closes: one request per connection.
async fn one_byte_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 1];
                if s.read_exact(&mut b).await.is_ok() {
                    let _ = s.write_all(&b).await;
                }
            });
        }
    });
    addr
}

/// Reads to the end and answers with the byte count (8 bytes, BE).
async fn sink_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let mut n = 0u64;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                let _ = s.write_all(&n.to_be_bytes()).await;
            });
        }
    });
    addr
}

/// Closed-loop flows for `secs` with `workers` in parallel; flows/s.
async fn flows_per_sec(addr: SocketAddr, workers: u64, secs: u64) -> (f64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let done = done.clone();
        set.spawn(async move {
            while Instant::now() < end {
                let mut s = TcpStream::connect(addr).await.unwrap();
                s.set_nodelay(true).unwrap();
                s.write_all(b"x").await.unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while set.join_next().await.is_some() {}
    let n = done.load(Ordering::Relaxed);
    (n as f64 / start.elapsed().as_secs_f64(), n)
}

/// One flow sending `mib` MiB to the sink; MiB/s.
async fn throughput(addr: SocketAddr, mib: u64) -> f64 {
    let chunk = vec![7u8; 64 * 1024];
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    for _ in 0..mib * 16 {
        s.write_all(&chunk).await.unwrap();
    }
    s.shutdown().await.unwrap();
    let mut n = [0u8; 8];
    s.read_exact(&mut n).await.unwrap();
    assert_eq!(u64::from_be_bytes(n), mib << 20, "the sink got every byte");
    mib as f64 / start.elapsed().as_secs_f64()
}

fn cred(ca: &SiteCa, server: bool) -> CredentialPem {
    let day = Duration::from_secs(86_400);
    let (cert, key) = if server {
        ca.issue_server_cert(&["127.0.0.1".into()], day, SystemTime::now())
    } else {
        ca.issue_client_cert("a", day, SystemTime::now())
    }
    .unwrap();
    CredentialPem {
        tls_crt: cert.cert_pem,
        tls_key: key,
        ca_crt: ca.cert_pem().to_owned(),
    }
}

async fn wait(r: &Router, pred: impl Fn(&meshlink_link::RouterStatus) -> bool) {
    let mut rx = r.status();
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|s| pred(s)))
        .await
        .expect("router set-up timed out")
        .unwrap();
}

/// Routers A and B linked on loopback; returns A's listener addresses for
/// `one-byte` and `sink`.
async fn link_pair(
    one_byte: SocketAddr,
    sink: SocketAddr,
    a_metrics: Arc<LinkMetrics>,
) -> (Router, Router, SocketAddr, SocketAddr) {
    let ca = SiteCa::load(
        &SiteCa::generate("b", SiteCa::DEFAULT_NAME, Duration::from_secs(86_400 * 365)).unwrap(),
    )
    .unwrap();
    let metrics = || Arc::new(LinkMetrics::default());
    let b = Router::start(
        RouterOptions {
            router_id: "b".into(),
            site: "b".into(),
            edge: false,
        },
        metrics(),
    )
    .unwrap();
    let mut bc = RouterConfig::default();
    bc.credentials.insert("server".into(), cred(&ca, true));
    bc.roles.push(RoleConfig {
        name: "inter-router".into(),
        host: "127.0.0.1".into(),
        port: 0,
        credential: "server".into(),
    });
    for (key, addr) in [("one-byte", one_byte), ("sink", sink)] {
        bc.connectors.push(ConnectorConfig {
            name: key.into(),
            routing_key: key.into(),
            targets: vec![meshlink_link::ConnectorTarget {
                host: "127.0.0.1".into(),
                port: addr.port(),
            }],
        });
    }
    assert!(b.apply(&bc).is_empty());
    wait(&b, |s| {
        s.roles.get("inter-router").and_then(|r| r.addr()).is_some()
    })
    .await;
    let role = b.status().borrow().roles["inter-router"].addr().unwrap();

    let a = Router::start(
        RouterOptions {
            router_id: "a".into(),
            site: "a".into(),
            edge: false,
        },
        a_metrics,
    )
    .unwrap();
    let mut ac = RouterConfig::default();
    ac.credentials.insert("client".into(), cred(&ca, false));
    ac.links.push(LinkConfig {
        name: "to-b".into(),
        host: "127.0.0.1".into(),
        port: role.port(),
        cost: 1,
        credential: "client".into(),
    });
    for key in ["one-byte", "sink"] {
        ac.listeners.push(ListenerConfig {
            name: key.into(),
            routing_key: key.into(),
            host: "127.0.0.1".into(),
            port: 0,
        });
    }
    assert!(a.apply(&ac).is_empty());
    wait(&a, |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
            && s.listeners.len() == 2
            && s.listeners.values().all(|l| l.addr().is_some())
    })
    .await;
    let mut routes = a.routes();
    routes
        .wait_for(|r| {
            r.destinations.contains_key("sink") && r.destinations.contains_key("one-byte")
        })
        .await
        .unwrap();
    let s = a.status().borrow().clone();
    (
        a,
        b,
        s.listeners["one-byte"].addr().unwrap(),
        s.listeners["sink"].addr().unwrap(),
    )
}

fn main() {
    let rounds = env("ROUNDS", 5);
    let secs = env("FLOW_SECS", 3);
    let workers = env("WORKERS", 8);
    let mib = env("BULK_MIB", 512);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let load_start = loadavg();
        let (one_byte, sink) = (one_byte_server().await, sink_server().await);
        let a_metrics = Arc::new(LinkMetrics::default());
        let (_a, _b, link_one_byte, link_sink) = link_pair(one_byte, sink, a_metrics.clone()).await;
        let mut rows: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
            ("new flows per second", vec![], vec![]),
            ("CPU per new flow (µs, whole process)", vec![], vec![]),
            ("single-flow throughput (MiB/s)", vec![], vec![]),
            ("CPU per MiB (ms, whole process)", vec![], vec![]),
        ];
        for round in 0..rounds {
            for (i, (fa, ta)) in [(one_byte, sink), (link_one_byte, link_sink)].into_iter().enumerate() {
                let c0 = cpu();
                let (rate, n) = flows_per_sec(fa, workers, secs).await;
                let per_flow = (cpu() - c0).as_secs_f64() * 1e6 / n as f64;
                let c1 = cpu();
                let mibs = throughput(ta, mib).await;
                let per_mib = (cpu() - c1).as_secs_f64() * 1e3 / mib as f64;
                for (row, v) in rows.iter_mut().zip([rate, per_flow, mibs, per_mib]) {
                    if i == 0 { row.1.push(v) } else { row.2.push(v) }
                }
                eprintln!("round {round} {}: {rate:.0} flows/s, {per_flow:.0} µs CPU/flow, {mibs:.0} MiB/s, {per_mib:.2} ms CPU/MiB", if i == 0 { "direct" } else { "link" });
            }
        }
        // RSS with 1,000 open flows through the link.
        let idle = rss_kib();
        let mut open = Vec::new();
        for _ in 0..1000 {
            let mut s = TcpStream::connect(link_sink).await.unwrap();
            s.write_all(b"x").await.unwrap();
            open.push(s);
        }
        // Wait until router A has opened all of them on the link.
        let active = a_metrics.flows_active.get_or_create(&meshlink_link::metrics::KeyLabels { routing_key: "sink".into() }).clone();
        let deadline = Instant::now() + Duration::from_secs(30);
        while active.get() < 1000 {
            assert!(Instant::now() < deadline, "only {} flows opened", active.get());
            tokio::task::yield_now().await;
        }
        let busy = rss_kib();
        drop(open);
        println!("| figure | direct | link | link / direct |");
        println!("|---|---|---|---|");
        for (name, d, l) in rows {
            let (d, l) = (median(d), median(l));
            println!("| {name} | {d:.1} | {l:.1} | {:.2} |", l / d);
        }
        println!();
        println!("process RSS (client, servers, routers A and B): {} KiB idle after the rounds, {} KiB with 1,000 open flows ({:.1} KiB per flow)", idle, busy, (busy as f64 - idle as f64) / 1000.0);
        println!("rounds {rounds}, {workers} workers x {secs} s per flow run, {mib} MiB per throughput run; load average {load_start} -> {}", loadavg());
    });
}
