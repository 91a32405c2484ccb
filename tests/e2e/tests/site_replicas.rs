//! A site router with three control-plane replicas on one PostgreSQL
//! database, the router given every one (`--cp URL1,URL2,URL3`). The
//! router reports to one replica at a time; only that replica writes
//! router status, so the Site's `Running` condition never flaps to "not
//! reporting" while the other replicas reconcile configuration changes,
//! nor when the replica holding the router is killed and the router moves
//! to another one. When the router itself stops, the Site says so.

use std::time::Duration;

use meshlink_e2e::proxy::Sidecar;
use meshlink_e2e::replicas::Replicas;
use meshlink_e2e::site::{condition, free_port_on, write_atomically};
use meshlink_e2e::{eventually, fresh_postgres_database};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);

/// Every status the Site `name` was written with after revision `from`,
/// from the watch API, and the revision reached.
fn site_history(cp: &meshlink_e2e::ControlPlane, name: &str, mut from: u64) -> (Vec<Value>, u64) {
    let mut statuses = Vec::new();
    loop {
        let (status, body) = cp.api(
            "GET",
            &format!("/api/v1/watch?from={from}&kind=Site&timeout=1s"),
            None,
        );
        assert_eq!(status, 200, "{body}");
        let events = body["events"].as_array().cloned().unwrap_or_default();
        if events.is_empty() {
            return (statuses, from);
        }
        for e in events {
            if e["resource"]["metadata"]["name"] == name {
                statuses.push(e["resource"]["status"].clone());
            }
        }
        from = body["revision"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| body["revision"].as_u64())
            .expect("revision");
    }
}

fn running(status: &Value) -> Option<bool> {
    condition(&serde_json::json!({ "status": status }), "Running")
}

fn apply(cp: &meshlink_e2e::ControlPlane, yaml: &str) {
    cp.cli_stdin(&["apply", "-f", "-"], Some(yaml)).success();
}

fn site(cp: &meshlink_e2e::ControlPlane) -> Value {
    let (code, s) = cp.api("GET", "/api/v1/sites/ha", None);
    assert_eq!(code, 200, "{s}");
    s
}

#[test]
fn only_the_replica_holding_the_router_writes_its_status() {
    let url = fresh_postgres_database();
    let mut r = Replicas::prepare(3, &url, "2s");
    r.start_all();
    apply(
        &r.cps[0],
        "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: ha}\nspec: {}\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("router.token");
    write_atomically(&token, &r.cps[0].router_token());
    let args: Vec<std::ffi::OsString> = vec![
        "--mode".into(),
        "router".into(),
        "--cp".into(),
        r.xds_urls().into(),
        "--cp-ca".into(),
        r.cps[0].data_dir().join("cp-tls").join("ca.pem").into(),
        "--token-file".into(),
        token.clone().into(),
        "--bind-host".into(),
        "127.0.0.1".into(),
    ];
    let mut router = Sidecar::spawn_args("ha", 0, &args);
    router.wait_ready(DEADLINE);
    eventually("the Site Running on every replica", DEADLINE, || {
        r.cps
            .iter()
            .all(|cp| condition(&site(cp), "Running") == Some(true))
            .then_some(())
    });
    // The traffic figures live in the replica holding the router's
    // stream; every replica answers with them (the others forward).
    let holders: Vec<String> = r
        .cps
        .iter()
        .map(|cp| {
            eventually("the router's traffic report", DEADLINE, || {
                let (code, t) = cp.api("GET", "/api/v1/traffic", None);
                assert_eq!(code, 200, "{t}");
                t["reportedTo"].as_str().map(str::to_owned)
            })
        })
        .collect();
    assert!(
        holders.windows(2).all(|w| w[0] == w[1]),
        "every replica names the same holder: {holders:?}"
    );
    let forwarded = r
        .cps
        .iter()
        .filter(|cp| cp.api("GET", "/api/v1/traffic", None).1["forwardedBy"].is_string())
        .count();
    assert_eq!(forwarded, 2, "the two replicas without the router forward");
    let from: u64 = site(&r.cps[0])["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("resourceVersion");

    // Configuration changes make both replicas recompute router status.
    for i in 0..5 {
        let (target, port) = (free_port_on("127.0.0.1"), free_port_on("127.0.0.1"));
        apply(
            &r.cps[i % 3],
            &format!(
                "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: c{i}}}\nspec: {{routingKey: k{i}, host: 127.0.0.1, port: {target}}}\n---\napiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: l{i}}}\nspec: {{routingKey: k{i}, host: 127.0.0.1, port: {port}}}\n"
            ),
        );
        eventually(&format!("connector c{i} matched"), DEADLINE, || {
            let (_, c) = r.cps[(i + 1) % 3].api("GET", &format!("/api/v1/connectors/c{i}"), None);
            (c["status"]["hasMatchingListener"] == true).then_some(())
        });
    }

    // The replica the router is on is killed: the router moves.
    let on = (0..3)
        .find(|&i| {
            let series = format!(
                "meshlink_proxy_cp_connected{{url=\"https://127.0.0.1:{}\"}}",
                r.cps[i].xds_port()
            );
            router.metric(&series) == 1.0
        })
        .expect("the router is connected to a replica");
    r.cps[on].kill9();
    let other = eventually("the router on another replica", DEADLINE, || {
        (0..3).filter(|&i| i != on).find(|&i| {
            let series = format!(
                "meshlink_proxy_cp_connected{{url=\"https://127.0.0.1:{}\"}}",
                r.cps[i].xds_port()
            );
            router.metric(&series) == 1.0
        })
    });
    let third = (0..3)
        .find(|&i| i != on && i != other)
        .expect("three replicas");
    // A configuration change after the move is reconciled by the survivor.
    apply(
        &r.cps[other],
        &format!(
            "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: after}}\nspec: {{routingKey: k0, host: 127.0.0.1, port: {}}}\n",
            free_port_on("127.0.0.1")
        ),
    );
    eventually("listener after matched", DEADLINE, || {
        let (_, l) = r.cps[other].api("GET", "/api/v1/listeners/after", None);
        (l["status"]["hasMatchingConnector"] == true).then_some(())
    });
    // The replica without the router agrees, and never wrote otherwise.
    eventually(
        "listener after matched on the third replica",
        DEADLINE,
        || {
            let (_, l) = r.cps[third].api("GET", "/api/v1/listeners/after", None);
            (l["status"]["hasMatchingConnector"] == true).then_some(())
        },
    );
    let (history, reached) = site_history(&r.cps[other], "ha", from);
    let flaps: Vec<&Value> = history
        .iter()
        .filter(|s| running(s) != Some(true))
        .collect();
    assert!(
        flaps.is_empty(),
        "the Site was written not Running while its router ran: {flaps:#?}"
    );

    // The router stops: the replica it reported to says so.
    router.kill9();
    eventually("the Site not Running", DEADLINE, || {
        (condition(&site(&r.cps[other]), "Running") == Some(false)).then_some(())
    });
    let (after, _) = site_history(&r.cps[other], "ha", reached);
    assert!(
        after.iter().any(|s| running(s) == Some(false)),
        "{after:#?}"
    );
}
