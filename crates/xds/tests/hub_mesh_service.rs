//! MeshService changes through the real hub: applying a MeshService
//! recomputes only the proxies with a backendRef to it, and a Dataplane
//! it selects changing recomputes those proxies too; what each holds then
//! equals a full translation.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, dataplane, mesh};
use meshlink_api::Resource;
use meshlink_xds::hub::Update;
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{ENDPOINT_TYPE, MeshView};
use serde_json::json;

const ALL: [&str; 4] = ["x-1", "x-2", "client", "other"];

fn client() -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": "client", "mesh": MESH},
        "spec": {"networking": {
            "address": "10.0.2.1",
            "inbound": [{"port": 8080, "tags": {"kuma.io/service": "client"}}],
            "outbound": [{"port": 9001, "backendRef": {"kind": "MeshService", "name": "xs", "port": 80}}],
        }},
    }))
    .unwrap()
}

fn xs(target_port: u16) -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshService",
        "metadata": {"name": "xs", "mesh": MESH},
        "spec": {
            "selector": {"dataplaneTags": {"kuma.io/service": "x"}},
            "ports": [{"port": 80, "targetPort": target_port}],
        },
    }))
    .unwrap()
}

fn harness() -> Harness {
    let view = MeshView::new(
        mesh(true),
        vec![
            dataplane("x-1", "10.0.1.1", "x", 8080, &[]),
            dataplane("x-2", "10.0.1.2", "x", 8080, &[]),
            client(),
            dataplane("other", "10.0.3.1", "other", 8080, &[(9002, "x")]),
        ],
        Vec::new(),
    );
    Harness::new(MemorySource::with_view(view, Duration::from_secs(3600)))
}

async fn recomputes(h: &Harness, update: Update) -> u64 {
    let before = h.hub.stats().await.unwrap().recomputed;
    h.hub.resource_changed(MESH, update);
    h.hub.sync(false).await;
    h.hub.stats().await.unwrap().recomputed - before
}

#[tokio::test(start_paused = true)]
async fn mesh_service_changes_recompute_its_clients_only() {
    let h = harness();
    let mut streams = Vec::new();
    for name in ALL {
        let mut s = h.open(name);
        s.request(None).await;
        let first = s.next_untimed().await.expect("served").expect("no error");
        s.request(Some(&first)).await;
        streams.push(s);
    }
    h.hub.sync(false).await;

    // The MeshService arrives after its client (any order, I2).
    h.source.put(xs(8080));
    assert_eq!(recomputes(&h, Update::Upserted(xs(8080))).await, 1);
    h.assert_current(&ALL);
    let state = h.registry.state(&ProxyKey::new(MESH, "client")).unwrap();
    assert!(state.snapshot.get(ENDPOINT_TYPE, "xs_msvc_80").is_some());

    // Its port now targets 9090, which no inbound serves.
    h.source.put(xs(9090));
    assert_eq!(recomputes(&h, Update::Upserted(xs(9090))).await, 1);
    h.assert_current(&ALL);

    // A selected Dataplane moves: itself, the client and `other` (a tag
    // outbound to x) recompute.
    let moved = dataplane("x-2", "10.0.1.9", "x", 8080, &[]);
    h.source.put(moved.clone());
    assert_eq!(recomputes(&h, Update::Upserted(moved)).await, 3);
    h.assert_current(&ALL);
}
