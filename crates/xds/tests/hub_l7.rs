//! L7 changes through the real hub: a destination becomes HTTP for its
//! callers only once every inbound of it declares the same protocol; a
//! MeshHTTPRoute reaches every proxy of the mesh; and the endpoints of a
//! route's backend reach the proxies routing to it. What each proxy holds
//! then equals a full translation.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, dataplane, mesh};
use meshlink_api::Resource;
use meshlink_xds::hub::Update;
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{ENDPOINT_TYPE, MeshView, ROUTE_TYPE};
use serde_json::json;

const ALL: [&str; 5] = ["web", "backend-1", "backend-2", "v2-1", "other"];

fn speaking(dp: Resource, protocol: &str) -> Resource {
    let mut v = dp.to_json();
    v["spec"]["networking"]["inbound"][0]["tags"]["kuma.io/protocol"] = json!(protocol);
    Resource::from_json(v).unwrap()
}

fn backend(name: &str, address: &str, protocol: &str) -> Resource {
    speaking(dataplane(name, address, "backend", 8080, &[]), protocol)
}

fn split() -> Resource {
    Resource::from_json(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshHTTPRoute",
        "metadata": {"name": "split", "mesh": MESH},
        "spec": {"to": [{"targetRef": {"kind": "MeshService", "name": "backend"},
                         "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
                                    "default": {"backendRefs": [{"kind": "MeshService", "name": "backend-v2"}]}}]}]},
    }))
    .unwrap()
}

/// `web` calls `backend` (served by backend-1 and backend-2, in
/// `protocol`); v2-1 serves `backend-v2`; `other` calls nobody.
fn harness(protocol: &str) -> Harness {
    let view = MeshView::new(
        mesh(true),
        vec![
            dataplane("web", "10.0.0.1", "web", 8080, &[(9001, "backend")]),
            backend("backend-1", "10.0.1.1", protocol),
            backend("backend-2", "10.0.1.2", protocol),
            speaking(
                dataplane("v2-1", "10.0.2.1", "backend-v2", 8080, &[]),
                "http",
            ),
            dataplane("other", "10.0.3.1", "other", 8080, &[]),
        ],
        Vec::new(),
    );
    Harness::new(MemorySource::with_view(view, Duration::from_secs(3600)))
}

async fn connect(h: &Harness) -> Vec<impl Sized> {
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

async fn recomputes(h: &Harness, r: Resource) -> u64 {
    h.source.put(r.clone());
    let before = h.hub.stats().await.unwrap().recomputed;
    h.hub.resource_changed(MESH, Update::Upserted(r));
    h.hub.sync(false).await;
    h.hub.stats().await.unwrap().recomputed - before
}

fn routes_of(h: &Harness, name: &str) -> usize {
    let state = h.registry.state(&ProxyKey::new(MESH, name)).unwrap();
    state.snapshot.resources(ROUTE_TYPE).len()
}

#[tokio::test(start_paused = true)]
async fn callers_switch_to_http_when_the_last_inbound_agrees() {
    let h = harness("tcp");
    let _streams = connect(&h).await;
    assert_eq!(routes_of(&h, "web"), 0);

    // One of two inbounds says http: the service's inbounds disagree, so
    // its callers stay tcp and only the changed proxy recomputes.
    let one = backend("backend-1", "10.0.1.1", "http");
    assert_eq!(recomputes(&h, one).await, 1);
    h.assert_current(&ALL);
    assert_eq!(routes_of(&h, "web"), 0);

    // Both agree: `web` now routes HTTP to backend.
    let two = backend("backend-2", "10.0.1.2", "http");
    assert_eq!(recomputes(&h, two).await, 2);
    h.assert_current(&ALL);
    assert_eq!(routes_of(&h, "web"), 1, "web's outbound RouteConfiguration");
}

#[tokio::test(start_paused = true)]
async fn a_route_backends_endpoints_reach_the_proxies_routing_to_it() {
    let h = harness("http");
    let _streams = connect(&h).await;

    assert_eq!(recomputes(&h, split()).await, ALL.len() as u64);
    h.assert_current(&ALL);
    let web = h.registry.state(&ProxyKey::new(MESH, "web")).unwrap();
    assert!(web.snapshot.get(ENDPOINT_TYPE, "backend-v2").is_some());

    // backend-v2 moves: web, which routes /v2 to it, gets its new
    // endpoints (as a full translation would give it).
    let moved = speaking(
        dataplane("v2-1", "10.0.2.9", "backend-v2", 8080, &[]),
        "http",
    );
    recomputes(&h, moved).await;
    h.assert_current(&ALL);
}
