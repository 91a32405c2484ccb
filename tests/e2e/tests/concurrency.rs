//! Optimistic concurrency: two clients updating one resource with the same
//! resourceVersion get exactly one success and one conflict.

use std::sync::{Arc, Barrier};

use meshlink_e2e::{ControlPlane, StoreKind, on_both_stores};
use serde_json::json;

const ROUNDS: usize = 20;

fn same_version_updates_have_one_winner(store: StoreKind) {
    let cp = Arc::new(ControlPlane::start(store));
    let site = |v: Option<&str>, link_access: &str| {
        let mut meta = json!({"name": "west"});
        if let Some(v) = v {
            meta["resourceVersion"] = json!(v);
        }
        json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site", "metadata": meta,
            "spec": {"linkAccess": link_access}})
    };
    assert_eq!(
        cp.api("PUT", "/api/v1/sites/west", Some(&site(None, "none")))
            .0,
        201
    );
    for round in 0..ROUNDS {
        let (_, current) = cp.api("GET", "/api/v1/sites/west", None);
        let version = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|client| {
                let cp = cp.clone();
                let barrier = barrier.clone();
                let body = site(Some(&version), &format!("r{round}-c{client}"));
                std::thread::spawn(move || {
                    barrier.wait();
                    cp.api("PUT", "/api/v1/sites/west", Some(&body))
                })
            })
            .collect();
        let mut codes: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap().0).collect();
        codes.sort();
        assert_eq!(codes, vec![200, 409], "round {round}: exactly one winner");
        let (_, after) = cp.api("GET", "/api/v1/sites/west", None);
        let winner = after["spec"]["linkAccess"].as_str().unwrap();
        assert!(winner.starts_with(&format!("r{round}-")), "{after}");
    }
}

on_both_stores!(same_version_updates_have_one_winner);
