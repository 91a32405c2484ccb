//! Issue 35 §2 with the real binaries (a control plane and a router on a
//! loopback address of their own): what the router cannot reach or bind
//! shows on the object itself.
//! - a Connector whose target port is closed is `Ready=False`
//!   (`TargetUnreachable`, the OS error, since when), `get connectors`
//!   shows `Error` and `network status` flags it; once something listens
//!   there it becomes `Ready=True` with no client traffic at all (the
//!   site has no Listener: the router's own probe found it);
//! - a MultiKeyListener on a port already taken is `Ready=False`
//!   (`BindFailed`, the OS error) until the port is free.

use std::net::TcpListener;
use std::time::Duration;

use meshlink_e2e::site::{Site, free_port_on};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);

fn ready(r: &Value) -> Value {
    r["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until `path`'s `Ready` satisfies `want`; returns the condition.
fn wait_ready(site: &Site, path: &str, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    meshlink_e2e::eventually(what, DEADLINE, || {
        let (code, r) = site.cp.api("GET", path, None);
        let c = ready(&r);
        (code == 200 && want(&c)).then_some(c)
    })
}

/// The row of `meshlink get <plural>` for `name`.
fn row(site: &Site, plural: &str, name: &str) -> String {
    let out = site.cp.cli(&["get", plural]).success().stdout;
    out.lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
        .to_owned()
}

#[test]
fn a_connector_to_a_closed_port_is_not_ready_until_something_listens_there() {
    let a = Site::start("target-a", 2);
    let port = free_port_on(a.host());
    let target = format!("{}:{port}", a.host());
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: db}}\nspec: {{routingKey: db, host: {}, port: {port}}}\n",
        a.host()
    ));
    let c = wait_ready(&a, "/api/v1/connectors/db", "Connector db not Ready", |c| {
        c["reason"] == "TargetUnreachable"
    });
    assert_eq!(c["status"], "False", "{c}");
    let message = c["message"].as_str().unwrap();
    for part in [target.as_str(), "refused", "failing since"] {
        assert!(
            message.to_lowercase().contains(part),
            "{part:?} in {message}"
        );
    }
    let cells = row(&a, "connectors", "db");
    assert!(
        cells.contains("Error") && cells.contains(&target),
        "{cells}"
    );
    let out = a.cp.cli(&["network", "status"]).success().stdout;
    assert!(out.contains("NOT READY (this site)"), "{out}");
    let flagged = out
        .lines()
        .find(|l| l.starts_with("Connector "))
        .unwrap_or_else(|| panic!("no Connector flagged in {out}"));
    assert!(
        flagged.contains("db") && flagged.contains("TargetUnreachable"),
        "{out}"
    );

    // Something listens there now. No client connects anywhere: the site
    // has no Listener, so only the router's probe can notice.
    let _server = TcpListener::bind((a.host(), port)).expect("bind the target port");
    let c = wait_ready(&a, "/api/v1/connectors/db", "Connector db Ready", |c| {
        c["status"] == "True"
    });
    assert_eq!(c["reason"], "TargetReachable", "{c}");
    let out = a.cp.cli(&["network", "status"]).success().stdout;
    assert!(!out.contains("NOT READY"), "{out}");
    assert!(row(&a, "connectors", "db").contains("Ready"));
}

#[test]
fn a_multikeylistener_on_a_taken_port_is_not_ready_with_the_bind_error() {
    let a = Site::start("target-b", 3);
    let port = free_port_on(a.host());
    let taken = TcpListener::bind((a.host(), port)).expect("take the port");
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata: {{name: db}}\nspec:\n  host: {}\n  port: {port}\n  strategy:\n    priority:\n      routingKeys: [db-primary, db-secondary]\n",
        a.host()
    ));
    let c = wait_ready(
        &a,
        "/api/v1/multikeylisteners/db",
        "MultiKeyListener db BindFailed",
        |c| c["reason"] == "BindFailed",
    );
    assert_eq!(c["status"], "False", "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("port {port} on {} is not bound", a.host()))
            && message.contains("in use"),
        "{message}"
    );
    assert!(row(&a, "multikeylisteners", "db").contains("Error"));
    let out = a.cp.cli(&["network", "status"]).success().stdout;
    assert!(
        out.lines()
            .any(|l| l.starts_with("MultiKeyListener ") && l.contains("BindFailed")),
        "{out}"
    );

    // The port is free: the router binds it (retrying every second), and
    // Ready says where flows go again (no Connector serves either key).
    drop(taken);
    let c = wait_ready(
        &a,
        "/api/v1/multikeylisteners/db",
        "MultiKeyListener db bound",
        |c| c["reason"] != "BindFailed" && !c.is_null(),
    );
    assert_eq!(c["reason"], "NoMatchingConnectors", "{c}");
}
