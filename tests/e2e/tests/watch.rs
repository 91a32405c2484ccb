//! Watch: a client watching from revision R sees every later change exactly
//! once, in order, including across a control-plane restart.

use std::time::{Duration, Instant};

use meshlink_e2e::{ControlPlane, StoreKind, on_both_stores, tls_secret};
use serde_json::Value;

/// Secrets, because no controller writes them: the only changes are the
/// test's own (a Site's status is written by the site controller).
fn secret(name: &str, label: &str) -> Value {
    tls_secret(name, label)
}

/// Long-polls from `from` until `want` events arrived, retrying through
/// control-plane restarts. Returns (revision, type, name) per event.
fn collect(server: String, token: String, from: u64, want: usize) -> Vec<(u64, String, String)> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut from = from;
    let mut seen = Vec::new();
    while seen.len() < want {
        assert!(
            Instant::now() < deadline,
            "watch timed out with {} of {want} events",
            seen.len()
        );
        let resp = client
            .get(format!("{server}/api/v1/watch?from={from}&timeout=5s"))
            .bearer_auth(&token)
            .send();
        let Ok(resp) = resp else {
            // The control plane is restarting: back off briefly and resume.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let v: Value = resp.json().unwrap();
        for e in v["events"].as_array().unwrap() {
            seen.push((
                e["revision"].as_str().unwrap().parse().unwrap(),
                e["type"].as_str().unwrap().to_string(),
                e["resource"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ));
        }
        from = v["revision"].as_str().unwrap().parse().unwrap();
    }
    seen
}

fn watch_sees_every_change_once_in_order_across_restart(store: StoreKind) {
    let mut cp = ControlPlane::start(store);
    let (_, list) = cp.api("GET", "/api/v1/secrets", None);
    let start: u64 = list["revision"].as_str().unwrap().parse().unwrap();

    let (server, token) = (cp.server(), cp.token().to_string());
    let watcher = std::thread::spawn(move || collect(server, token, start, 3 * 20));

    let mut expected = Vec::new();
    for i in 0..20 {
        let name = format!("s{i}");
        assert_eq!(
            cp.api(
                "PUT",
                &format!("/api/v1/secrets/{name}"),
                Some(&secret(&name, "a"))
            )
            .0,
            201
        );
        expected.push(("Created".to_string(), name.clone()));
        assert_eq!(
            cp.api(
                "PUT",
                &format!("/api/v1/secrets/{name}"),
                Some(&secret(&name, "b"))
            )
            .0,
            200
        );
        expected.push(("Updated".to_string(), name.clone()));
        if i == 10 {
            cp.kill9();
            cp.restart();
        }
        assert_eq!(
            cp.api("DELETE", &format!("/api/v1/secrets/{name}"), None).0,
            200
        );
        expected.push(("Deleted".to_string(), name));
    }
    let seen = watcher.join().unwrap();
    assert_eq!(
        seen.len(),
        expected.len(),
        "every change exactly once: {seen:?}"
    );
    // The control plane's own internal writes (heartbeats, the leader
    // lease) take revisions too and are not served, so revisions may skip;
    // they must still rise, and the list below must be exactly ours.
    let revisions: Vec<u64> = seen.iter().map(|(r, _, _)| *r).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]) && revisions.first() > Some(&start),
        "in revision order, after the start, no repeats: {revisions:?}"
    );
    let got: Vec<(String, String)> = seen.into_iter().map(|(_, t, n)| (t, n)).collect();
    assert_eq!(got, expected);
}

on_both_stores!(watch_sees_every_change_once_in_order_across_restart);
