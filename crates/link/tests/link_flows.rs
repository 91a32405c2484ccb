//! Flows over one link: both ways whichever side dialled, many at once
//! byte for byte with half-close, and a bulk flow that does not starve a
//! request/response flow. Real TLS 1.3 on loopback, real TCP servers.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use meshlink_link::{ConnectorConfig, LinkState, ListenerConfig, Router, RouterConfig};
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// Router `b` accepts; `a` dials it. `b` has a connector `echo-b`, `a`
/// has `echo-a` and a listener for `echo-b`.
struct Pair {
    a: Router,
    b: Router,
    a_cfg: RouterConfig,
    b_cfg: RouterConfig,
}

fn connector(key: &str, addr: std::net::SocketAddr) -> ConnectorConfig {
    ConnectorConfig {
        name: key.into(),
        routing_key: key.into(),
        targets: vec![meshlink_link::ConnectorTarget {
            host: addr.ip().to_string(),
            port: addr.port(),
        }],
    }
}

async fn pair() -> Pair {
    let site_b = Site::new("b");
    let b = router("b");
    let mut b_cfg = acceptor_config(&site_b, 0);
    b_cfg
        .connectors
        .push(connector("echo-b", echo_server().await));
    assert!(b.apply(&b_cfg).is_empty());
    let b_addr = role_addr(&b, "inter-router").await;

    let a = router("a");
    let mut a_cfg = RouterConfig::default();
    add_link(&mut a_cfg, "to-b", b_addr, site_b.client("a"));
    a_cfg
        .connectors
        .push(connector("echo-a", echo_server().await));
    a_cfg.listeners.push(ListenerConfig {
        name: "echo-b".into(),
        routing_key: "echo-b".into(),
        host: "127.0.0.1".into(),
        port: 0,
    });
    assert!(a.apply(&a_cfg).is_empty());
    wait_status(&a, "link to-b up", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
    wait_watch(a.routes(), "a to learn echo-b", |r| {
        r.destinations.contains_key("echo-b")
    })
    .await;
    wait_watch(b.routes(), "b to learn echo-a", |r| {
        r.destinations.contains_key("echo-a")
    })
    .await;
    Pair { a, b, a_cfg, b_cfg }
}

async fn listener_addr(r: &Router, name: &str) -> std::net::SocketAddr {
    let s = wait_status(r, "listener bound", |s| {
        s.listeners.get(name).and_then(|b| b.addr()).is_some()
    })
    .await;
    s.listeners[name].addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_go_both_ways_over_one_link_whichever_side_dialled() {
    let p = pair().await;
    // Dialler to acceptor, through a's TCP listener.
    let tcp = TcpStream::connect(listener_addr(&p.a, "echo-b").await)
        .await
        .unwrap();
    let data = pattern(1, 100_000);
    assert_eq!(round_trip(tcp, &data).await, data);
    // Acceptor to dialler, on the link b accepted.
    let flow = p.b.open_flow("echo-a").await.unwrap();
    assert_eq!(flow.destination, "a");
    let data = pattern(2, 100_000);
    assert_eq!(round_trip(flow, &data).await, data);
    // Only one connection carried both: b sees one link from a.
    let s = p.b.status().borrow().clone();
    assert_eq!(s.up_links_to("a"), 1, "{s:#?}");
    let _ = (p.a_cfg, p.b_cfg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_flows_arrive_byte_for_byte_with_half_close() {
    let p = pair().await;
    let addr = listener_addr(&p.a, "echo-b").await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..100u64 {
        // Half the flows start at a's listener, half at b towards a.
        let b_flow = if i % 2 == 1 {
            Some(p.b.open_flow("echo-a").await.unwrap())
        } else {
            None
        };
        tasks.spawn(async move {
            let data = pattern(i, 20_000 + (i as usize) * 1_000);
            let got = match b_flow {
                Some(flow) => round_trip(flow, &data).await,
                None => round_trip(TcpStream::connect(addr).await.unwrap(), &data).await,
            };
            assert!(
                got == data,
                "flow {i}: {} bytes back of {}",
                got.len(),
                data.len()
            );
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let s = p.a.status().borrow().clone();
    assert_eq!(s.links["to-b"].reconnects, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_flow_does_not_starve_a_request_response_flow() {
    let mut p = pair().await;
    // A sink on b's side that reads everything and counts it (from every
    // connection: the router's probe connects too).
    let sink = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = sink.local_addr().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = sink.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => counted.fetch_add(n as u64, Ordering::Relaxed),
                    };
                }
            });
        }
    });
    p.b_cfg.connectors.push(connector("bulk", sink_addr));
    assert!(p.b.apply(&p.b_cfg).is_empty());
    wait_watch(p.a.routes(), "a to learn bulk", |r| {
        r.destinations.contains_key("bulk")
    })
    .await;

    // The bulk flow sends as fast as it can until the small flow is done.
    let done = Arc::new(AtomicBool::new(false));
    let mut bulk = p.a.open_flow("bulk").await.unwrap();
    let stop = done.clone();
    let bulk_task = tokio::spawn(async move {
        let chunk = pattern(9, 256 * 1024);
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            bulk.write_all(&chunk).await.unwrap();
            sent += chunk.len() as u64;
        }
        bulk.shutdown().await.unwrap();
        sent
    });
    // Wait until the bulk flow is really moving data.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while received.load(Ordering::Relaxed) < 8 * 1024 * 1024 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "bulk flow never moved 8 MiB"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }

    // 50 request/response exchanges on a second flow while bulk runs.
    let before = received.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    let mut small = p.a.open_flow("echo-b").await.unwrap();
    for i in 0..50u64 {
        let req = pattern(100 + i, 512);
        small.write_all(&req).await.unwrap();
        let mut resp = vec![0u8; req.len()];
        small.read_exact(&mut resp).await.unwrap();
        assert_eq!(resp, req, "exchange {i}");
    }
    let small_time = started.elapsed();
    let during = received.load(Ordering::Relaxed) - before;
    done.store(true, Ordering::Relaxed);
    let sent = bulk_task.await.unwrap();
    // Not an assertion on time: printed so a run shows the fairness.
    eprintln!(
        "50 exchanges took {small_time:?} while the bulk flow moved {} MiB (total sent {} MiB)",
        during / (1 << 20),
        sent / (1 << 20)
    );
    assert!(during > 0, "the bulk flow was running during the exchanges");
}
