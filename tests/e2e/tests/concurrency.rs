//! Optimistic concurrency: two clients updating one resource with the same
//! resourceVersion get exactly one success and one conflict.

use std::sync::{Arc, Barrier};

use meshlink_e2e::{ControlPlane, StoreKind, on_both_stores, tls_secret};
use serde_json::json;

const ROUNDS: usize = 20;

/// A Secret: no controller writes its status, so only the two clients
/// change its resourceVersion (a Site's would also move when the site
/// controller writes its status).
fn same_version_updates_have_one_winner(store: StoreKind) {
    let cp = Arc::new(ControlPlane::start(store));
    let secret = |v: Option<&str>, winner: &str| {
        let mut s = tls_secret("west", winner);
        if let Some(v) = v {
            s["metadata"]["resourceVersion"] = json!(v);
        }
        s
    };
    let (code, body) = cp.api("PUT", "/api/v1/secrets/west", Some(&secret(None, "none")));
    assert_eq!(code, 201, "{body}");
    for round in 0..ROUNDS {
        let (_, current) = cp.api("GET", "/api/v1/secrets/west", None);
        let version = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|client| {
                let cp = cp.clone();
                let barrier = barrier.clone();
                let body = secret(Some(&version), &format!("r{round}-c{client}"));
                std::thread::spawn(move || {
                    barrier.wait();
                    cp.api("PUT", "/api/v1/secrets/west", Some(&body))
                })
            })
            .collect();
        let mut codes: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap().0).collect();
        codes.sort();
        assert_eq!(codes, vec![200, 409], "round {round}: exactly one winner");
        let (_, after) = cp.api("GET", "/api/v1/secrets/west", None);
        let winner = after["metadata"]["labels"]["label"].as_str().unwrap();
        assert!(winner.starts_with(&format!("r{round}-")), "{after}");
    }
}

on_both_stores!(same_version_updates_have_one_winner);
