//! A status write that lists (or clears) an unreachable application is an
//! endpoint change to the real hub: the Dataplane's own proxy and the
//! callers of its service are recomputed, the callers lose (or regain) the
//! endpoint, and what every proxy holds equals a full translation. Other
//! status writes still recompute nobody.
//!
//! The mesh: `x-1`, `x-2` serve `x`; `ref-1` calls `x`; `y-1` serves `y`.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, dataplane, mesh};
use envoy_types::pb::envoy::config::core::v3::address;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, lb_endpoint::HostIdentifier,
};
use meshlink_api::Resource;
use meshlink_xds::hub::Update;
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{ENDPOINT_TYPE, MeshView};
use prost::Message;
use serde_json::json;

const ALL: [&str; 4] = ["x-1", "x-2", "ref-1", "y-1"];

fn harness() -> Harness {
    let view = MeshView::new(
        mesh(true),
        vec![
            dataplane("x-1", "10.0.1.1", "x", 8080, &[]),
            dataplane("x-2", "10.0.1.2", "x", 8080, &[]),
            dataplane("ref-1", "10.0.2.1", "client", 8080, &[(9001, "x")]),
            dataplane("y-1", "10.0.4.1", "y", 8080, &[]),
        ],
        Vec::new(),
    );
    Harness::new(MemorySource::with_view(view, Duration::from_secs(3600)))
}

/// `x-2` as the status task writes it: `status` on the same spec, a new
/// resourceVersion.
fn x2_with_status(status: serde_json::Value, version: u64) -> Resource {
    let mut v = dataplane("x-2", "10.0.1.2", "x", 8080, &[]).to_json();
    v["status"] = status;
    let mut r = Resource::from_json(v).expect("valid");
    r.set_resource_version(Some(version.to_string()));
    r
}

async fn recomputes(h: &Harness, update: Update) -> u64 {
    let before = h.hub.stats().await.unwrap().recomputed;
    h.hub.resource_changed(MESH, update);
    h.hub.sync(false).await;
    h.hub.stats().await.unwrap().recomputed - before
}

fn x_endpoints(h: &Harness) -> Vec<String> {
    let state = h.registry.state(&ProxyKey::new(MESH, "ref-1")).unwrap();
    let r = state
        .snapshot
        .get(ENDPOINT_TYPE, "x")
        .expect("x's endpoints");
    let cla = ClusterLoadAssignment::decode(r.resource.value.as_slice()).unwrap();
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(HostIdentifier::Endpoint(e)) => match e.address.as_ref()?.address.as_ref()? {
                address::Address::SocketAddress(s) => Some(s.address.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_app_in_status_steers_callers_away_until_it_is_cleared() {
    let h = harness();
    let _streams = h.open_acked(&ALL).await;
    h.hub.sync(false).await;
    assert_eq!(x_endpoints(&h), ["10.0.1.1", "10.0.1.2"]);

    // A status write that changes nothing translation reads.
    let online = x2_with_status(json!({"online": true}), 100);
    h.source.put(online.clone());
    assert_eq!(recomputes(&h, Update::Upserted(online)).await, 0);

    // x-2's sidecar reports its application unreachable.
    let down = x2_with_status(
        json!({"online": true, "unreachableApps": [{"port": 8080,
            "address": "127.0.0.1:9080", "error": "Connection refused (os error 111)",
            "since": "2026-12-01T10:00:00Z"}]}),
        101,
    );
    h.source.put(down.clone());
    // Its own proxy and its caller ref-1; not x-1 nor y-1.
    assert_eq!(recomputes(&h, Update::Upserted(down)).await, 2);
    assert_eq!(x_endpoints(&h), ["10.0.1.1"]);
    h.assert_current(&ALL);

    // Back.
    let up = x2_with_status(json!({"online": true}), 102);
    h.source.put(up.clone());
    assert_eq!(recomputes(&h, Update::Upserted(up)).await, 2);
    assert_eq!(x_endpoints(&h), ["10.0.1.1", "10.0.1.2"]);
    h.assert_current(&ALL);
}
