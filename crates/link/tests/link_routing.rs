//! Link-state routing over real links: A reaches a connector in C through
//! B (transit, both ways), and flows for a key with connectors in two
//! sites are balanced over both and fail over to the one left when the
//! other's router stops (or refuses: its target is down), the client's
//! first bytes included.

mod support;

use std::collections::BTreeSet;

use meshlink_link::{ConnectorConfig, LinkState, ListenerConfig, Router, RouterConfig};
use support::*;
use tokio::net::TcpStream;

fn connector(key: &str, port: u16) -> ConnectorConfig {
    ConnectorConfig {
        name: format!("{key}-connector"),
        routing_key: key.into(),
        targets: vec![meshlink_link::ConnectorTarget {
            host: "127.0.0.1".into(),
            port,
        }],
    }
}

async fn up(r: &Router, link: &str) {
    wait_status(r, &format!("{link} up"), |s| {
        s.links.get(link).is_some_and(|l| l.state == LinkState::Up)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaches_a_connector_in_c_through_b_and_back() {
    // A and C both dial B: the line A - B - C. Neither knows the other.
    let site_b = Site::new("b");
    let echo = echo_server().await.port();
    let b = router("b");
    assert!(b.apply(&acceptor_config(&site_b, 0)).is_empty());
    let b_addr = role_addr(&b, "inter-router").await;

    let c = router("c");
    let mut c_cfg = RouterConfig::default();
    add_link(&mut c_cfg, "to-b", b_addr, site_b.client("c"));
    c_cfg.connectors.push(connector("db", echo));
    assert!(c.apply(&c_cfg).is_empty());

    let a = router("a");
    let mut a_cfg = RouterConfig::default();
    add_link(&mut a_cfg, "to-b", b_addr, site_b.client("a"));
    a_cfg.connectors.push(connector("back", echo));
    a_cfg.listeners.push(ListenerConfig {
        name: "db".into(),
        routing_key: "db".into(),
        host: "127.0.0.1".into(),
        port: 0,
    });
    assert!(a.apply(&a_cfg).is_empty());
    up(&a, "to-b").await;
    up(&c, "to-b").await;

    let routes = wait_watch(a.routes(), "a to learn db at c", |r| {
        r.destinations.get("db").is_some_and(|d| d[0].router == "c")
    })
    .await;
    assert_eq!(routes.next_hop["c"], "b", "{routes:?}");
    assert_eq!(routes.destinations["db"][0].cost, 2);

    // Through a's TCP listener, and with the API; each lands at c.
    let addr = wait_status(&a, "listener bound", |s| {
        s.listeners.get("db").and_then(|l| l.addr()).is_some()
    })
    .await
    .listeners["db"]
        .addr()
        .unwrap();
    let data = pattern(21, 200_000);
    let tcp = TcpStream::connect(addr).await.unwrap();
    assert_eq!(round_trip(tcp, &data).await, data);
    let flow = a.open_flow("db").await.unwrap();
    assert_eq!(flow.destination, "c");
    assert_eq!(round_trip(flow, &data).await, data);

    // And the other way: c reaches a's connector through b.
    wait_watch(c.routes(), "c to learn back at a", |r| {
        r.destinations.contains_key("back")
    })
    .await;
    let flow = c.open_flow("back").await.unwrap();
    assert_eq!(flow.destination, "a");
    assert_eq!(round_trip(flow, &data).await, data);

    // b sees the whole network.
    let view = b.network_view();
    let sites: BTreeSet<_> = view
        .sites
        .iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    assert_eq!(sites, BTreeSet::from(["a".into(), "b".into(), "c".into()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_are_balanced_over_two_sites_and_fail_over_when_one_stops() {
    let (site_b, site_c) = (Site::new("b"), Site::new("c"));
    let echo = echo_server().await.port();
    let a = router("a");
    let mut a_cfg = RouterConfig::default();
    let mut others = Vec::new();
    for (id, site) in [("b", &site_b), ("c", &site_c)] {
        let r = router(id);
        let mut cfg = acceptor_config(site, 0);
        cfg.connectors.push(connector("svc", echo));
        assert!(r.apply(&cfg).is_empty());
        add_link(
            &mut a_cfg,
            &format!("to-{id}"),
            role_addr(&r, "inter-router").await,
            site.client("a"),
        );
        others.push(r);
    }
    assert!(a.apply(&a_cfg).is_empty());
    wait_watch(a.routes(), "svc at b and c", |r| {
        r.destinations.get("svc").is_some_and(|d| d.len() == 2)
    })
    .await;

    let mut seen = BTreeSet::new();
    for i in 0..10 {
        let flow = a.open_flow("svc").await.unwrap();
        seen.insert(flow.destination.clone());
        let data = pattern(i, 5_000);
        assert_eq!(round_trip(flow, &data).await, data);
    }
    assert_eq!(seen, BTreeSet::from(["b".into(), "c".into()]));

    // c's router stops: its destination goes, every new flow reaches b.
    let c = others.pop().unwrap();
    assert!(c.shutdown(DEADLINE).await);
    wait_watch(a.routes(), "svc only at b", |r| {
        r.destinations
            .get("svc")
            .is_some_and(|d| d.len() == 1 && d[0].router == "b")
    })
    .await;
    for i in 0..10 {
        let flow = a.open_flow("svc").await.unwrap();
        assert_eq!(flow.destination, "b");
        let data = pattern(100 + i, 5_000);
        assert_eq!(round_trip(flow, &data).await, data);
    }
}

fn edge_router(id: &str) -> Router {
    Router::start(
        meshlink_link::RouterOptions {
            router_id: id.into(),
            site: format!("site-{id}"),
            edge: true,
        },
        std::sync::Arc::new(meshlink_link::LinkMetrics::default()),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_router_never_carries_transit_and_edges_do_not_link() {
    // a and c are interior routers linked only through the edge router e.
    let site_a = Site::new("a");
    let site_c = Site::new("c");
    let echo = echo_server().await.port();
    let (a, c) = (router("a"), router("c"));
    assert!(a.apply(&acceptor_config(&site_a, 0)).is_empty());
    let mut c_cfg = acceptor_config(&site_c, 0);
    c_cfg.connectors.push(connector("db", echo));
    assert!(c.apply(&c_cfg).is_empty());
    let e = edge_router("e");
    let mut e_cfg = RouterConfig::default();
    add_link(
        &mut e_cfg,
        "to-a",
        role_addr(&a, "inter-router").await,
        site_a.client("e"),
    );
    add_link(
        &mut e_cfg,
        "to-c",
        role_addr(&c, "inter-router").await,
        site_c.client("e"),
    );
    assert!(e.apply(&e_cfg).is_empty());
    up(&e, "to-a").await;
    up(&e, "to-c").await;

    // e itself reaches db at c; a never learns a route through e.
    wait_watch(e.routes(), "e to learn db", |r| {
        r.destinations.contains_key("db")
    })
    .await;
    let flow = e.open_flow("db").await.unwrap();
    let data = pattern(31, 1_000);
    assert_eq!(round_trip(flow, &data).await, data);
    let routes = a.routes().borrow().clone();
    assert!(!routes.destinations.contains_key("db"), "{routes:?}");
    assert!(!routes.next_hop.contains_key("c"), "{routes:?}");
    let err = a.open_flow("db").await.unwrap_err();
    assert!(
        err.to_string().contains("no router has a connector"),
        "{err}"
    );

    // Two edge routers refuse to link, naming why.
    let site_f = Site::new("f");
    let f = edge_router("f");
    assert!(f.apply(&acceptor_config(&site_f, 0)).is_empty());
    let mut e2 = e_cfg.clone();
    add_link(
        &mut e2,
        "to-f",
        role_addr(&f, "inter-router").await,
        site_f.client("e"),
    );
    assert!(e.apply(&e2).is_empty());
    let s = wait_status(&e, "edge-edge link refused", |s| {
        s.links.get("to-f").is_some_and(|l| {
            l.state == LinkState::Down
                && l.last_error
                    .as_deref()
                    .is_some_and(|m| m.contains("link refused"))
        })
    })
    .await;
    eprintln!("{}", s.links["to-f"].last_error.as_deref().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_refused_by_a_dead_connector_target_fails_over_to_another_site() {
    let (site_b, site_c) = (Site::new("b"), Site::new("c"));
    let echo = echo_server().await.port();
    // c's connector points at a port nothing listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let a = router("a");
    let mut a_cfg = RouterConfig::default();
    let mut others = Vec::new();
    for (id, site, port) in [("b", &site_b, echo), ("c", &site_c, dead)] {
        let r = router(id);
        let mut cfg = acceptor_config(site, 0);
        cfg.connectors.push(connector("svc", port));
        assert!(r.apply(&cfg).is_empty());
        let addr = role_addr(&r, "inter-router").await;
        add_link(&mut a_cfg, &format!("to-{id}"), addr, site.client("a"));
        others.push(r);
    }
    assert!(a.apply(&a_cfg).is_empty());
    wait_watch(a.routes(), "svc at b and c", |r| {
        r.destinations.get("svc").is_some_and(|d| d.len() == 2)
    })
    .await;
    for i in 0..6 {
        let flow = a.open_flow("svc").await.unwrap();
        assert_eq!(flow.destination, "b", "flow {i} failed over from c");
        let data = pattern(200 + i, 2_000);
        assert_eq!(round_trip(flow, &data).await, data);
    }

    // Through a listener, with a client that sends at once: the bytes it
    // sent before the flow was opened travel with the flow header, and
    // reach b whole when c refused the flow first.
    a_cfg.listeners.push(ListenerConfig {
        name: "svc".into(),
        routing_key: "svc".into(),
        host: "127.0.0.1".into(),
        port: 0,
    });
    assert!(a.apply(&a_cfg).is_empty());
    let s = wait_status(&a, "listener svc bound", |s| {
        s.listeners.get("svc").and_then(|b| b.addr()).is_some()
    })
    .await;
    let addr = s.listeners["svc"].addr().unwrap();
    for i in 0..6 {
        let data = pattern(300 + i, 3_000);
        let client = TcpStream::connect(addr).await.unwrap();
        assert_eq!(round_trip(client, &data).await, data, "client {i}");
    }
}
