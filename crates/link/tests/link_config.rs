//! Applying configurations at runtime: adding or removing a link or a
//! listener leaves the others alone (same connection, same port, open
//! flows keep working), a removed link leaves no status behind, and an
//! invalid item is reported with its field path while its last good
//! version keeps running.

mod support;

use meshlink_link::{ConnectorConfig, LinkState, ListenerConfig, RouterConfig};
use support::*;
use tokio::net::TcpStream;

fn listener(name: &str, key: &str) -> ListenerConfig {
    ListenerConfig {
        name: name.into(),
        routing_key: key.into(),
        host: "127.0.0.1".into(),
        port: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_and_removing_links_and_listeners_leaves_the_others_alone() {
    let (site_b, site_c) = (Site::new("b"), Site::new("c"));
    let echo = echo_server().await;
    let (b, c) = (router("b"), router("c"));
    for (r, site) in [(&b, &site_b), (&c, &site_c)] {
        let mut cfg = acceptor_config(site, 0);
        cfg.connectors.push(ConnectorConfig {
            name: "echo".into(),
            routing_key: format!("echo-{}", r.id()),
            targets: vec![meshlink_link::ConnectorTarget {
                host: "127.0.0.1".into(),
                port: echo.port(),
            }],
        });
        assert!(r.apply(&cfg).is_empty());
    }
    let a = router("a");
    let mut cfg = RouterConfig::default();
    add_link(
        &mut cfg,
        "to-b",
        role_addr(&b, "inter-router").await,
        site_b.client("a"),
    );
    cfg.listeners.push(listener("l-b", "echo-b"));
    assert!(a.apply(&cfg).is_empty());
    let s = wait_status(&a, "to-b up, l-b bound", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
            && s.listeners.get("l-b").and_then(|l| l.addr()).is_some()
    })
    .await;
    let (conn_b, l_b) = (
        s.links["to-b"].connection,
        s.listeners["l-b"].addr().unwrap(),
    );
    wait_watch(a.routes(), "route to echo-b", |r| {
        r.destinations.contains_key("echo-b")
    })
    .await;
    let flow = TcpStream::connect(l_b).await.unwrap();

    // Add a link to c and a listener for it.
    let mut more = cfg.clone();
    add_link(
        &mut more,
        "to-c",
        role_addr(&c, "inter-router").await,
        site_c.client("a"),
    );
    more.listeners.push(listener("l-c", "echo-c"));
    assert!(a.apply(&more).is_empty());
    let s = wait_status(&a, "to-c up, l-c bound", |s| {
        s.links
            .get("to-c")
            .is_some_and(|l| l.state == LinkState::Up)
            && s.listeners.get("l-c").and_then(|l| l.addr()).is_some()
    })
    .await;
    assert_eq!(s.links["to-b"].connection, conn_b);
    assert_eq!(s.listeners["l-b"].addr(), Some(l_b));

    // Remove them again: to-b and l-b are untouched, to-c leaves no trace.
    assert!(a.apply(&cfg).is_empty());
    let s = wait_status(&a, "to-c and l-c gone", |s| {
        !s.links.contains_key("to-c") && !s.listeners.contains_key("l-c")
    })
    .await;
    assert_eq!(s.links["to-b"].connection, conn_b);
    assert_eq!(s.links["to-b"].state, LinkState::Up);
    assert_eq!(s.listeners["l-b"].addr(), Some(l_b));
    wait_status(&c, "c drops a", |s| s.up_links_to("a") == 0).await;
    let data = pattern(11, 30_000);
    assert_eq!(
        round_trip(flow, &data).await,
        data,
        "the open flow survived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_item_is_reported_and_its_last_good_version_keeps_running() {
    let site = Site::new("b");
    let b = router("b");
    assert!(b.apply(&acceptor_config(&site, 0)).is_empty());
    let a = router("a");
    let mut cfg = RouterConfig::default();
    add_link(
        &mut cfg,
        "to-b",
        role_addr(&b, "inter-router").await,
        site.client("a"),
    );
    assert!(a.apply(&cfg).is_empty());
    let conn = wait_status(&a, "to-b up", |s| {
        s.links
            .get("to-b")
            .is_some_and(|l| l.state == LinkState::Up)
    })
    .await
    .links["to-b"]
        .connection;

    let mut bad = cfg.clone();
    bad.links[0].cost = 0;
    bad.listeners.push(listener("", "echo"));
    let errors: Vec<String> = a.apply(&bad).iter().map(|e| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            "links[0].cost: must be at least 1",
            "listeners[0].name: is empty; give each item a name"
        ]
    );
    let s = a.status().borrow().clone();
    assert_eq!(s.links["to-b"].connection, conn);
    assert_eq!(s.links["to-b"].cost, 1);
    assert!(s.listeners.is_empty());
}
