//! Several `meshlink-cp` replicas on one PostgreSQL database, each with its
//! own data dir, ports and `--instance cp-N`.

use std::time::Duration;

use serde_json::Value;

use crate::{ControlPlane, StoreKind, eventually, free_port};

/// N replicas sharing one database. Killed on drop.
pub struct Replicas {
    /// The replicas, `cp-1` first.
    pub cps: Vec<ControlPlane>,
    /// The shared store's URL.
    pub store_url: String,
}

impl Replicas {
    /// `n` replicas on database `store_url` with `--leader-lease lease`,
    /// prepared (not started) with fixed xDS ports, so proxies can be
    /// given every URL up front.
    pub fn prepare(n: usize, store_url: &str, lease: &str) -> Replicas {
        let cps = (1..=n)
            .map(|i| {
                let mut cp = ControlPlane::prepare_on(
                    StoreKind::Postgres(store_url.to_owned()),
                    "127.0.0.1",
                    free_port(),
                );
                cp.add_args(&["--instance", &format!("cp-{i}"), "--leader-lease", lease]);
                cp
            })
            .collect();
        Replicas {
            cps,
            store_url: store_url.to_owned(),
        }
    }

    /// Starts every replica at once and waits until each is ready.
    pub fn start_all(&mut self) {
        for cp in &mut self.cps {
            cp.spawn();
        }
        for cp in &mut self.cps {
            cp.wait_ready();
        }
    }

    /// Every replica's xDS URL, comma-separated (for `--cp`).
    pub fn xds_urls(&self) -> String {
        self.cps
            .iter()
            .map(|c| format!("https://127.0.0.1:{}", c.xds_port()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `GET /api/v1/controlplanes` on replica `i`.
    pub fn controlplanes(&self, i: usize) -> Value {
        let (status, body) = self.cps[i].api("GET", "/api/v1/controlplanes", None);
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The instance holding the leader lease, asked of replica `i`.
    pub fn leader(&self, i: usize) -> Option<String> {
        self.controlplanes(i)["leader"]["holder"]
            .as_str()
            .map(str::to_owned)
    }

    /// The index of the replica named `instance` (`cp-N`).
    pub fn index_of(instance: &str) -> usize {
        instance
            .strip_prefix("cp-")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("not a replica name: {instance}"))
            - 1
    }

    /// Waits until replica `i` reports a leader, and returns its index.
    pub fn wait_leader(&self, i: usize, timeout: Duration) -> usize {
        let name = eventually("a leader", timeout, || self.leader(i));
        Self::index_of(&name)
    }
}

/// The Dataplane `name`'s history in mesh `default`, from the watch API
/// (every revision ever written): each status it was written with, and
/// whether it was deleted.
pub fn dataplane_history(cp: &ControlPlane, name: &str) -> (Vec<Value>, bool) {
    let (mut from, mut statuses, mut deleted) = (0u64, Vec::new(), false);
    loop {
        let (status, body) = cp.api(
            "GET",
            &format!("/api/v1/watch?from={from}&kind=Dataplane&mesh=default&timeout=1s"),
            None,
        );
        assert_eq!(status, 200, "{body}");
        let events = body["events"].as_array().cloned().unwrap_or_default();
        if events.is_empty() {
            return (statuses, deleted);
        }
        for e in events {
            if e["resource"]["metadata"]["name"] != name {
                continue;
            }
            if e["type"] == "Deleted" {
                deleted = true;
            }
            statuses.push(e["resource"]["status"].clone());
        }
        from = body["revision"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| body["revision"].as_u64())
            .expect("revision");
    }
}

/// The statuses in `history` after the first online one that say offline.
pub fn offline_after_online(history: &[Value]) -> Vec<Value> {
    let Some(first) = history.iter().position(|s| s["online"] == true) else {
        return Vec::new();
    };
    history[first..]
        .iter()
        .filter(|s| s["online"] != true)
        .cloned()
        .collect()
}
