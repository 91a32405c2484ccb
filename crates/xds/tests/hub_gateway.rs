//! Incremental reconciliation for inbound addresses and gateways, through
//! the real hub and ADS server: moving an inbound to its own `address`
//! recomputes its proxy and the callers of its service (a delegated
//! gateway among them); changing a gateway's tags that a `MeshSubset`
//! source matches recomputes the gateway and the proxies the permission
//! targets, nobody else. What every proxy then holds equals a full
//! translation.
//!
//! The mesh: `x-1` serves `x`; `ref-1` (service `client`) and the
//! delegated gateway `gw-1` (service `edge`) call `x`; `y-1` serves `y`.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, Stream, dataplane, mesh};
use meshlink_api::Resource;
use meshlink_xds::hub::Update;
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{ENDPOINT_TYPE, MeshView};
use serde_json::{Value, json};

const ALL: [&str; 4] = ["x-1", "ref-1", "gw-1", "y-1"];

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("{v}: {e:?}"))
}

/// The delegated gateway gw-1 (service `edge`, plus `tags`) calling x.
fn gateway(tags: Value) -> Resource {
    let mut all = json!({"kuma.io/service": "edge"});
    for (k, v) in tags.as_object().unwrap() {
        all[k] = v.clone();
    }
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": "gw-1", "mesh": MESH},
        "spec": {"networking": {"address": "10.0.5.1", "gateway": {"tags": all},
            "outbound": [{"port": 9001, "tags": {"kuma.io/service": "x"}}]}},
    }))
}

/// Lets clients with tags `team: edge` reach x.
fn team_edge_to_x() -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTrafficPermission",
        "metadata": {"name": "team-edge", "mesh": MESH},
        "spec": {"targetRef": {"kind": "MeshService", "name": "x"},
            "from": [{"targetRef": {"kind": "MeshSubset", "tags": {"team": "edge"}},
                      "default": {"action": "Allow"}}]},
    }))
}

fn harness() -> Harness {
    let view = MeshView::new(
        mesh(true),
        vec![
            dataplane("x-1", "10.0.1.1", "x", 8080, &[]),
            dataplane("ref-1", "10.0.2.1", "client", 8080, &[(9001, "x")]),
            gateway(json!({})),
            dataplane("y-1", "10.0.4.1", "y", 8080, &[]),
        ],
        vec![team_edge_to_x()],
    );
    Harness::new(MemorySource::with_view(
        view,
        Duration::from_secs(10 * 3600),
    ))
}

async fn connect_all(h: &Harness) -> Vec<Stream> {
    let mut streams = Vec::new();
    for name in ALL {
        let mut s = h.open(name);
        s.request(None).await;
        let first = s.next_untimed().await.expect("served").expect("no error");
        s.request(Some(&first)).await;
        streams.push(s);
    }
    h.hub.sync(false).await;
    streams
}

/// Writes `r` to the source, tells the hub, returns how many proxies it
/// recomputed.
async fn recomputes(h: &Harness, r: Resource) -> u64 {
    let before = h.hub.stats().await.expect("hub").recomputed;
    h.source.put(r.clone());
    h.hub.resource_changed(MESH, Update::Upserted(r));
    h.hub.sync(false).await;
    h.hub.stats().await.expect("hub").recomputed - before
}

#[tokio::test(start_paused = true)]
async fn an_inbound_moving_to_its_own_address_recomputes_it_and_its_callers() {
    let h = harness();
    let _streams = connect_all(&h).await;
    let mut moved = dataplane("x-1", "10.0.1.1", "x", 8080, &[]).to_json();
    moved["spec"]["networking"]["inbound"][0]["address"] = json!("10.0.1.7");
    // x-1, ref-1 and the gateway gw-1; not y-1.
    assert_eq!(recomputes(&h, resource(moved)).await, 3);
    h.assert_current(&ALL);
    let gw = h
        .registry
        .state(&ProxyKey::new(MESH, "gw-1"))
        .expect("published");
    let cla = gw
        .snapshot
        .get(ENDPOINT_TYPE, "x")
        .expect("gw-1 has x's endpoints");
    assert!(
        String::from_utf8_lossy(&cla.resource.value).contains("10.0.1.7"),
        "gw-1 dials x at the inbound address"
    );
}

#[tokio::test(start_paused = true)]
async fn gateway_tags_a_meshsubset_source_matches_recompute_the_targets() {
    let h = harness();
    let _streams = connect_all(&h).await;
    // gw-1 joins team edge: itself and x-1 (whose RBAC gains edge).
    assert_eq!(recomputes(&h, gateway(json!({"team": "edge"}))).await, 2);
    h.assert_current(&ALL);
}
