//! The status task against a real SQLite store (through the identity
//! tests' counting wrapper): a flush writes every dirty Dataplane in one
//! batch transaction, never one store write per proxy.

use std::time::{Duration, SystemTime};

use meshlink_api::{ConditionStatus, Kind, Resource};
use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::Store;
use meshlink_xds::ads::{Inspector, StreamView};
use meshlink_xds::owner::ProxyKey;
use serde_json::json;

use super::{StatusParts, channel, run};
use crate::identity::tests::{BATCHES, Fixture};

const N: usize = 30;

fn dataplane(name: &str) -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": "default"},
        "spec": {"networking": {"address": "127.0.0.1",
            "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": "web"}}]}}
    }))
    .expect("valid Dataplane")
}

fn connected(name: &str) -> StreamView {
    StreamView {
        key: ProxyKey::new("default", name),
        connected: true,
        control_plane: "cp-test".into(),
        connected_at: SystemTime::now(),
        disconnected_at: None,
        certificate: None,
        rejected: None,
        holder: Default::default(),
        taken_over: false,
    }
}

/// Polls `f` until it holds, failing after 30 s.
async fn wait_until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_flush_writes_every_dirty_dataplane_in_one_batch() {
    let f = Fixture::new().await;
    for i in 0..N {
        f.resources
            .create(dataplane(&format!("dp-{i}")))
            .await
            .unwrap();
    }
    let (handle, inbox) = channel();
    let start_revision = f.store.current_revision().await.unwrap();
    let parts = StatusParts {
        resources: f.resources.clone(),
        inspector: Inspector::default(),
        instance: "cp-test".into(),
        start_revision,
        registry: MetricsRegistry::new(),
        leadership: crate::replicas::Leadership::always(),
    };
    let shutdown = Shutdown::new();
    let task = tokio::spawn(run(parts, inbox, shutdown.clone()));

    // Every new Dataplane gets Ready=False/NotConnected first.
    let resources = f.resources.clone();
    let all_ready_reason = async |reason: &str| {
        let list = resources.list(Kind::Dataplane, None, None).await.unwrap();
        list.len() == N
            && list
                .iter()
                .all(|d| d.condition("Ready").is_some_and(|c| c.reason == reason))
    };
    wait_until("every Dataplane NotConnected", async || {
        all_ready_reason("NotConnected").await
    })
    .await;
    let (batches, writes) = (f.store.writes(BATCHES), f.store.writes("Dataplane"));

    let observe = handle.stream_observer();
    for i in 0..N {
        observe(connected(&format!("dp-{i}")));
    }
    // The mesh has mTLS and no certificate was issued: online, not Ready.
    wait_until("every Dataplane online", async || {
        all_ready_reason("NoCertificate").await
    })
    .await;
    let online = f.resources.list(Kind::Dataplane, None, None).await.unwrap();
    for d in &online {
        let s = d.status.details.as_dataplane().expect("Dataplane status");
        assert!(s.online, "{} online", d.name());
        assert_eq!(s.control_plane_instance.as_deref(), Some("cp-test"));
        assert_eq!(d.condition("Ready").unwrap().status, ConditionStatus::False);
    }
    let status_writes = f.store.writes("Dataplane") - writes;
    let transactions = f.store.writes(BATCHES) - batches;
    assert_eq!(status_writes, N, "one status write per connected proxy");
    assert!(
        (1..N).contains(&transactions),
        "{N} status writes went out in {transactions} store transactions; \
         a flush must batch them"
    );
    shutdown.trigger();
    task.await.unwrap();
}
