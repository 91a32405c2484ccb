//! Credential rotation: renewing a RouterAccess server credential and a
//! Link client credential keeps the link that is up (same connection, no
//! reconnect, flows keep working), and the next handshakes present the new
//! certificates on both sides.

mod support;

use meshlink_link::{ConnectorConfig, LinkState, Router, RouterConfig};
use support::*;

fn serial_of(pem: &meshlink_link::CredentialPem) -> String {
    meshlink_link::LinkCredential::from_pem(pem)
        .unwrap()
        .serial_hex()
        .to_owned()
}

async fn up(r: &Router, name: &str) -> meshlink_link::LinkStatus {
    wait_status(r, &format!("{name} up"), |s| {
        s.links.get(name).is_some_and(|l| l.state == LinkState::Up)
    })
    .await
    .links[name]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_the_link_and_new_handshakes_present_the_new_certificates() {
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
    let addr = role_addr(&b, "inter-router").await;
    let old_server = serial_of(&b_cfg.credentials["skupper-site-server"]);

    let a = router("a");
    let mut a_cfg = RouterConfig::default();
    add_link(&mut a_cfg, "to-b", addr, site.client("a"));
    assert!(a.apply(&a_cfg).is_empty());
    let before = up(&a, "to-b").await;
    assert_eq!(
        before.peer_certificate_serial.as_deref(),
        Some(&*old_server)
    );
    wait_watch(a.routes(), "route to echo", |r| {
        r.destinations.contains_key("echo")
    })
    .await;
    // A flow opened before the rotation and used after it.
    let open_flow = a.open_flow("echo").await.unwrap();

    // Renew both credentials.
    let new_server_pem = site.server("127.0.0.1");
    let new_server = serial_of(&new_server_pem);
    b_cfg
        .credentials
        .insert("skupper-site-server".into(), new_server_pem);
    assert!(b.apply(&b_cfg).is_empty());
    let new_client_pem = site.client("a");
    let new_client = serial_of(&new_client_pem);
    a_cfg
        .credentials
        .insert("to-b-secret".into(), new_client_pem);
    assert!(a.apply(&a_cfg).is_empty());

    // A second link from a: a new handshake both ways.
    let mut with_second = a_cfg.clone();
    with_second.links.push(meshlink_link::LinkConfig {
        name: "to-b-2".into(),
        ..a_cfg.links[0].clone()
    });
    assert!(a.apply(&with_second).is_empty());
    let second = up(&a, "to-b-2").await;
    assert_eq!(
        second.peer_certificate_serial.as_deref(),
        Some(&*new_server)
    );
    let s = wait_status(&b, "b to see a's new certificate", |s| {
        s.links.get("inter-router/a").is_some_and(|l| {
            l.connection != before.connection
                && l.peer_certificate_serial.as_deref() == Some(&*new_client)
        })
    })
    .await;
    assert_eq!(s.links["inter-router/a"].state, LinkState::Up);

    // The first link was never dropped, and its flow still works.
    let after = a.status().borrow().links["to-b"].clone();
    assert_eq!(after.state, LinkState::Up);
    assert_eq!(after.connection, before.connection);
    assert_eq!(after.reconnects, 0);
    let data = pattern(3, 50_000);
    assert_eq!(round_trip(open_flow, &data).await, data);
}
