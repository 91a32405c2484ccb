//! Liveness: a link whose peer goes silent (its socket stays open, no FIN)
//! is declared down from the missing hellos, and the dialler reconnects
//! with backoff once the peer answers again; a peer router that stops and
//! comes back on the same port is re-linked too. Flows work again after.

mod support;

use meshlink_link::{ConnectorConfig, LinkState, RouterConfig};
use support::*;

fn up(s: &meshlink_link::RouterStatus, name: &str) -> bool {
    s.links.get(name).is_some_and(|l| l.state == LinkState::Up)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_detected_and_the_link_reconnects_when_it_answers() {
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
    let relay = Relay::start(role_addr(&b, "inter-router").await).await;

    let a = router("a");
    let mut cfg = RouterConfig::default();
    add_link(&mut cfg, "to-b", relay.addr, site.client("a"));
    assert!(a.apply(&cfg).is_empty());
    let first = wait_status(&a, "link up", |s| up(s, "to-b")).await.links["to-b"].clone();
    wait_status(&b, "b sees a", |s| s.up_links_to("a") == 1).await;

    // The path goes silent: both sides notice from the missing hellos.
    relay.freeze(true);
    let down = wait_status(&a, "link down", |s| !up(s, "to-b")).await;
    let err = down.links["to-b"].last_error.clone().unwrap_or_default();
    assert!(
        err.contains("no hello from the peer") || err.contains("took no data"),
        "{err}"
    );
    wait_status(&b, "b drops a", |s| s.up_links_to("a") == 0).await;

    // The path answers again: the dialler reconnects on a new connection.
    relay.freeze(false);
    let again = wait_status(&a, "link up again", |s| up(s, "to-b"))
        .await
        .links["to-b"]
        .clone();
    assert_ne!(again.connection, first.connection);
    assert!(again.reconnects >= 1, "{again:?}");
    wait_watch(a.routes(), "route to echo again", |r| {
        r.destinations.contains_key("echo")
    })
    .await;
    let data = pattern(5, 10_000);
    assert_eq!(
        round_trip(a.open_flow("echo").await.unwrap(), &data).await,
        data
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_router_that_stops_and_returns_is_relinked() {
    let site = Site::new("b");
    let b = router("b");
    assert!(b.apply(&acceptor_config(&site, 0)).is_empty());
    let addr = role_addr(&b, "inter-router").await;

    let a = router("a");
    let mut cfg = RouterConfig::default();
    add_link(&mut cfg, "to-b", addr, site.client("a"));
    assert!(a.apply(&cfg).is_empty());
    wait_status(&a, "link up", |s| up(s, "to-b")).await;

    assert!(b.shutdown(DEADLINE).await, "b stops within the deadline");
    wait_status(&a, "link down", |s| !up(s, "to-b")).await;
    wait_watch(a.routes(), "b's routes withdrawn", |r| {
        r.next_hop.is_empty()
    })
    .await;

    // A new router b on the same port: the dialler finds it.
    let b2 = router("b");
    assert!(b2.apply(&acceptor_config(&site, addr.port())).is_empty());
    assert_eq!(role_addr(&b2, "inter-router").await, addr);
    let s = wait_status(&a, "link up again", |s| up(s, "to-b")).await;
    assert_eq!(s.links["to-b"].peer.as_deref(), Some("b"));
    assert!(s.links["to-b"].reconnects >= 1);
}
