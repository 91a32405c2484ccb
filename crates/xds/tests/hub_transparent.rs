//! Transparent proxies through the real hub: a Mesh status whose VIPs
//! change recomputes the transparent proxies of the mesh, and only them;
//! an endpoint that leaves and returns changes their address listeners;
//! what each holds then equals a full translation (its DNS name
//! included).

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, dataplane, mesh};
use meshlink_api::Resource;
use meshlink_xds::hub::Update;
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::{LISTENER_TYPE, MeshView};
use serde_json::json;

const ALL: [&str; 3] = ["web-1", "backend-1", "plain"];

fn transparent_web() -> Resource {
    let mut v = dataplane("web-1", "10.0.0.1", "web", 8080, &[]).to_json();
    v["spec"]["networking"]["transparentProxying"] = json!({});
    Resource::from_json(v).unwrap()
}

/// The Mesh with `vips` in its status.
fn mesh_with(vips: serde_json::Value) -> Resource {
    let mut v = mesh(true).to_json();
    v["metadata"]["resourceVersion"] = json!("100");
    v["status"] = json!({"vips": vips});
    Resource::from_json_unvalidated(v).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_vip_change_recomputes_the_transparent_proxies_only() {
    let view = MeshView::new(
        mesh(true),
        vec![
            transparent_web(),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
            dataplane("plain", "10.0.0.3", "plain", 8080, &[(9001, "backend")]),
        ],
        Vec::new(),
    );
    let h = Harness::new(MemorySource::with_view(view, Duration::from_secs(3600)));
    let _streams = h.open_acked(&ALL).await;
    h.hub.sync(false).await;
    let web = ProxyKey::new(MESH, "web-1");
    assert!(
        h.registry
            .state(&web)
            .unwrap()
            .snapshot
            .get(LISTENER_TYPE, "outbound:240.0.0.7:80")
            .is_none(),
        "no VIP yet"
    );

    // The allocator writes backend's VIP into the Mesh's status.
    let with_vip = mesh_with(json!({"backend": "240.0.0.7"}));
    h.source.put(with_vip.clone());
    let before = h.hub.stats().await.unwrap().recomputed;
    h.hub.resource_changed(MESH, Update::Upserted(with_vip));
    h.hub.sync(false).await;
    assert_eq!(
        h.hub.stats().await.unwrap().recomputed - before,
        1,
        "web-1 only"
    );
    h.assert_current(&ALL);
    let state = h.registry.state(&web).unwrap();
    assert!(
        state
            .snapshot
            .get(LISTENER_TYPE, "outbound:240.0.0.7:80")
            .is_some()
    );
}

/// `backend-1` as the status task writes it: `status` on the same spec, a
/// new resourceVersion.
fn backend_with_status(status: serde_json::Value, version: u64) -> Resource {
    let mut v = dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]).to_json();
    v["status"] = status;
    let mut r = Resource::from_json(v).expect("valid");
    r.set_resource_version(Some(version.to_string()));
    r
}

/// A transparent proxy has a listener on each endpoint address of the
/// services it reaches: when backend's only endpoint leaves (its app
/// unreachable) and comes back, web-1 is translated again, not only
/// patched, and regains the listener on backend's address (a patch of its
/// load assignments alone left it without, so a captured call to the
/// address went past the service to the pass-through).
#[tokio::test(start_paused = true)]
async fn an_endpoint_that_leaves_and_returns_gives_back_its_address_listener() {
    let view = MeshView::new(
        mesh_with(json!({"backend": "240.0.0.7"})),
        vec![
            transparent_web(),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
            dataplane("plain", "10.0.0.3", "plain", 8080, &[(9001, "backend")]),
        ],
        Vec::new(),
    );
    let h = Harness::new(MemorySource::with_view(view, Duration::from_secs(3600)));
    let _streams = h.open_acked(&ALL).await;
    h.hub.sync(false).await;
    let web = ProxyKey::new(MESH, "web-1");
    let address_listener = |h: &Harness| {
        h.registry
            .state(&web)
            .unwrap()
            .snapshot
            .get(LISTENER_TYPE, "outbound:10.0.0.2:8080")
            .is_some()
    };
    assert!(address_listener(&h), "backend's address is captured");

    let down = backend_with_status(
        json!({"online": true, "unreachableApps": [{"port": 8080,
            "address": "127.0.0.1:8080", "error": "Connection refused (os error 111)",
            "since": "2026-12-01T10:00:00Z"}]}),
        101,
    );
    h.source.put(down.clone());
    h.hub.resource_changed(MESH, Update::Upserted(down));
    h.hub.sync(false).await;
    h.assert_current(&ALL);
    assert!(!address_listener(&h), "no endpoint, no address listener");

    let up = backend_with_status(json!({"online": true}), 102);
    h.source.put(up.clone());
    h.hub.resource_changed(MESH, Update::Upserted(up));
    h.hub.sync(false).await;
    h.assert_current(&ALL);
    assert!(address_listener(&h), "the address listener is back");
}
