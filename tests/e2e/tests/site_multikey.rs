//! Skupper's MultiKeyListener (`skupper.io/v2alpha1`) with the real
//! binaries, each site a control plane plus a router on its own loopback
//! address, the documents applied as Skupper writes them:
//! - `priority`: flows go to the first routing key with a reachable
//!   Connector; when its site's router dies they go to the next key, and
//!   back when it returns; status names the reachable keys in order;
//! - `weighted`: flows are shared among the keys by weight (3:1), and go
//!   to the other key alone when one Connector is deleted.

use std::net::SocketAddr;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::site::{Site, condition, free_port_on};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);

fn connector(name: &str, port: u16) -> String {
    format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: {name}}}\nspec: {{routingKey: {name}, host: 127.0.0.1, port: {port}}}\n"
    )
}

fn name_via(site: &Site, port: u16) -> Option<String> {
    let addr: SocketAddr = format!("{}:{port}", site.host()).parse().unwrap();
    http_get_at(addr, "/name")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text().trim().to_owned())
}

/// The MultiKeyListener `name` as the API serves it.
fn mkl(site: &Site, name: &str) -> Value {
    let (code, r) = site
        .cp
        .api("GET", &format!("/api/v1/multikeylisteners/{name}"), None);
    assert_eq!(code, 200, "{r}");
    r
}

/// Waits until `status.strategy` of MultiKeyListener `name` is `strategy`,
/// and returns the resource.
fn wait_reachable(site: &Site, name: &str, strategy: Value) -> Value {
    meshlink_e2e::eventually(
        &format!("MultiKeyListener {name} status.strategy = {strategy}"),
        DEADLINE,
        || {
            let r = mkl(site, name);
            (r["status"]["strategy"] == strategy).then_some(r)
        },
    )
}

fn operational_message(r: &Value) -> String {
    r["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Operational"))
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// `n` requests through the listener; each is a new connection, so a new
/// flow. Returns who answered each.
fn names(site: &Site, port: u16, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| meshlink_e2e::eventually("a request served", DEADLINE, || name_via(site, port)))
        .collect()
}

#[test]
fn priority_fails_over_to_the_next_key_when_a_site_goes_and_back_when_it_returns() {
    let a = Site::start("mk-a", 2);
    let b = Site::start("mk-b", 3);
    let mut c = Site::start("mk-c", 4);
    a.link_to(&b, None);
    c.link_to(&a, None);
    let primary = HttpApp::start("primary-in-c");
    let secondary = HttpApp::start("secondary-in-b");
    c.apply(&connector("db-primary", primary.port()));
    b.apply(&connector("db-secondary", secondary.port()));
    let port = free_port_on(a.host());
    // As Skupper writes it (`host` names the service; the port a string).
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata:\n  name: db\nspec:\n  host: db\n  port: \"{port}\"\n  strategy:\n    priority:\n      routingKeys:\n        - db-primary\n        - db-secondary\n"
    ));
    let both = json!({"priority": {"routingKeysReachable": ["db-primary", "db-secondary"]}});
    let r = wait_reachable(&a, "db", both.clone());
    assert_eq!(r["status"]["hasDestination"], true, "{r}");
    assert_eq!(condition(&r, "Operational"), Some(true), "{r}");
    assert_eq!(
        operational_message(&r),
        "new flows go to routing key \"db-primary\""
    );
    assert!(names(&a, port, 10).iter().all(|n| n == "primary-in-c"));
    // B's Connector sees the MultiKeyListener as a listener for its key.
    meshlink_e2e::eventually("db-secondary matched in B", DEADLINE, || {
        let (_, r) = b.cp.api("GET", "/api/v1/connectors/db-secondary", None);
        (r["status"]["hasMatchingListener"] == true).then_some(())
    });

    // C's router dies: its key is unreachable, new flows take the next.
    c.router.as_mut().unwrap().kill9();
    let r = wait_reachable(
        &a,
        "db",
        json!({"priority": {"routingKeysReachable": ["db-secondary"]}}),
    );
    assert!(
        operational_message(&r).starts_with("new flows go to routing key \"db-secondary\""),
        "{r}"
    );
    assert!(names(&a, port, 10).iter().all(|n| n == "secondary-in-b"));

    // It returns: new flows go back to the first key.
    c.spawn_router();
    c.router.as_mut().unwrap().wait_ready(DEADLINE);
    wait_reachable(&a, "db", both);
    assert!(names(&a, port, 10).iter().all(|n| n == "primary-in-c"));

    // `meshlink get multikeylisteners` shows the strategy and where flows go.
    let out = a.cp.cli(&["get", "multikeylisteners"]).success().stdout;
    let row = out.lines().find(|l| l.starts_with("db ")).expect(&out);
    for cell in [
        "Ready",
        &port.to_string(),
        "priority db-primary,db-secondary",
        "true",
    ] {
        assert!(row.contains(cell), "{cell:?} in {out}");
    }
    // No key reachable at all: status says so.
    b.cp.cli(&["delete", "connector", "db-secondary"]).success();
    c.cp.cli(&["delete", "connector", "db-primary"]).success();
    let r = wait_reachable(&a, "db", json!({"priority": {"routingKeysReachable": []}}));
    assert_eq!(r["status"]["hasDestination"], false, "{r}");
    assert_eq!(condition(&r, "Operational"), Some(false), "{r}");
    assert!(
        name_via(&a, port).is_none(),
        "a connection with no reachable key is closed"
    );
}

#[test]
fn weighted_shares_flows_by_weight_and_takes_the_other_key_when_one_goes() {
    let a = Site::start("mkw-a", 2);
    let b = Site::start("mkw-b", 3);
    a.link_to(&b, None);
    let heavy = HttpApp::start("heavy");
    let light = HttpApp::start("light");
    b.apply(&connector("heavy", heavy.port()));
    b.apply(&connector("light", light.port()));
    let port = free_port_on(a.host());
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata: {{name: web}}\nspec:\n  host: {host}\n  port: {port}\n  strategy:\n    weighted:\n      routingKeys: {{heavy: 3, light: 1}}\n",
        host = a.host()
    ));
    let r = wait_reachable(
        &a,
        "web",
        json!({"weighted": {"routingKeysReachable": {"heavy": 3, "light": 1}}}),
    );
    assert_eq!(
        operational_message(&r),
        "new flows are shared among \"heavy\" (weight 3), \"light\" (weight 1)"
    );
    let got = names(&a, port, 40);
    let heavy_count = got.iter().filter(|n| *n == "heavy").count();
    assert_eq!((heavy_count, 40 - heavy_count), (30, 10), "{got:?}");

    // One Connector goes: every flow takes the other key.
    b.cp.cli(&["delete", "connector", "heavy"]).success();
    wait_reachable(
        &a,
        "web",
        json!({"weighted": {"routingKeysReachable": {"light": 1}}}),
    );
    assert!(names(&a, port, 10).iter().all(|n| n == "light"));
}
