//! The link metrics as an operator scrapes them from the process registry:
//! link up, flows opened and active by routing key, bytes by direction,
//! reconnects and route changes.

mod support;

use std::sync::Arc;

use meshlink_link::{
    ConnectorConfig, LinkMetrics, LinkState, ListenerConfig, Router, RouterConfig, RouterOptions,
};
use meshlink_runtime::MetricsRegistry;
use support::*;

fn has_line(text: &str, prefix: &str) -> bool {
    text.lines().any(|l| l.starts_with(prefix))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_flow_and_route_metrics_are_exported() {
    let site = Site::new("b");
    let b = router("b");
    let mut b_cfg = acceptor_config(&site, 0);
    b_cfg.connectors.push(ConnectorConfig {
        name: "echo".into(),
        routing_key: "echo".into(),
        targets: vec![meshlink_link::ConnectorTarget {
            host: "127.0.0.1".into(),
            port: echo_server().await.port(),
        }],
    });
    assert!(b.apply(&b_cfg).is_empty());
    let b_addr = role_addr(&b, "inter-router").await;

    let registry = MetricsRegistry::new();
    let metrics = Arc::new(LinkMetrics::default());
    registry.register_with("link", |r| metrics.register(r));
    let a = Router::start(
        RouterOptions {
            router_id: "a".into(),
            site: "site-a".into(),
            edge: false,
        },
        metrics,
    )
    .unwrap();
    let mut cfg = RouterConfig::default();
    add_link(&mut cfg, "to-b", b_addr, site.client("a"));
    cfg.listeners.push(ListenerConfig {
        name: "echo".into(),
        routing_key: "echo".into(),
        host: "127.0.0.1".into(),
        port: 0,
    });
    assert!(a.apply(&cfg).is_empty());
    let s = wait_status(&a, "link up and listener bound", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
            && s.listeners.contains_key("echo")
    })
    .await;
    wait_watch(a.routes(), "route to echo", |r| {
        r.destinations.contains_key("echo")
    })
    .await;
    let addr = s.listeners["echo"].addr().unwrap();
    let data = pattern(4, 1000);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert_eq!(round_trip(tcp, &data).await, data);

    // The flow ends at the router just after the client saw its end:
    // poll the scrape until the active gauge is back at 0.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let text = loop {
        let text = registry.encode();
        if has_line(&text, "meshlink_link_flows_active{routing_key=\"echo\"} 0") {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    for line in [
        "meshlink_link_up{link=\"to-b\"} 1",
        "meshlink_link_flows_opened_total{routing_key=\"echo\"} 1",
        "meshlink_link_flow_bytes_total{routing_key=\"echo\",direction=\"to_connector\"} 1000",
        "meshlink_link_flow_bytes_total{routing_key=\"echo\",direction=\"to_listener\"} 1000",
        "meshlink_link_route_changes_total ",
    ] {
        assert!(has_line(&text, line), "missing {line:?} in\n{text}");
    }

    // The link goes down and comes back: up follows, reconnects counts.
    assert!(b.shutdown(DEADLINE).await);
    wait_status(&a, "link down", |s| s.links["to-b"].state != LinkState::Up).await;
    assert!(has_line(
        &registry.encode(),
        "meshlink_link_up{link=\"to-b\"} 0"
    ));
    let b2 = router("b");
    assert!(b2.apply(&acceptor_config(&site, b_addr.port())).is_empty());
    wait_status(&a, "link up again", |s| {
        s.links["to-b"].state == LinkState::Up
    })
    .await;
    let text = registry.encode();
    assert!(
        has_line(&text, "meshlink_link_reconnects_total{link=\"to-b\"} 1"),
        "{text}"
    );
    assert!(
        has_line(&text, "meshlink_link_up{link=\"to-b\"} 1"),
        "{text}"
    );
}
