//! Incremental reconciliation through the real hub and ADS server: a change
//! recomputes only the proxies it can affect, counted by the hub's
//! `recomputed_proxies` metric, and what every proxy then holds equals a
//! full translation of the mesh as the source has it.
//!
//! The mesh: `x-1`, `x-2` serve `x`; `ref-1`, `ref-2` (service `client`)
//! call `x`; `o-1`, `o-2` (service `other`) call `y`, served by `y-1`.
//! Every proxy is connected as an Envoy sidecar.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, Stream, dataplane, mesh, permission};
use meshlink_api::{Condition, ConditionStatus};
use meshlink_xds::hub::Update;
use meshlink_xds::translate::MeshView;

const ALL: [&str; 7] = ["x-1", "x-2", "ref-1", "ref-2", "o-1", "o-2", "y-1"];

fn x_dataplane(name: &str, address: &str) -> meshlink_api::Resource {
    dataplane(name, address, "x", 8080, &[])
}

fn initial_view() -> MeshView {
    MeshView::new(
        mesh(true),
        vec![
            x_dataplane("x-1", "10.0.1.1"),
            x_dataplane("x-2", "10.0.1.2"),
            dataplane("ref-1", "10.0.2.1", "client", 8080, &[(9001, "x")]),
            dataplane("ref-2", "10.0.2.2", "client", 8080, &[(9001, "x")]),
            dataplane("o-1", "10.0.3.1", "other", 8080, &[(9002, "y")]),
            dataplane("o-2", "10.0.3.2", "other", 8080, &[(9002, "y")]),
            dataplane("y-1", "10.0.4.1", "y", 8080, &[]),
        ],
        Vec::new(),
    )
}

/// Connects every proxy of [`ALL`] and waits until each was served.
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

async fn recomputed(h: &Harness) -> u64 {
    h.hub.stats().await.expect("hub running").recomputed
}

/// Applies `update` to the hub and returns how many proxies it recomputed.
async fn recomputes(h: &Harness, mesh: &str, update: Update) -> u64 {
    let before = recomputed(h).await;
    h.hub.resource_changed(mesh, update);
    h.hub.sync(false).await;
    recomputed(h).await - before
}

/// Every connected proxy holds what a full translation of the source's
/// mesh gives (listeners, routes, clusters, endpoints).
fn harness() -> Harness {
    Harness::new(MemorySource::with_view(
        initial_view(),
        Duration::from_secs(10 * 3600),
    ))
}

#[tokio::test(start_paused = true)]
async fn writes_that_change_nothing_a_proxy_receives_recompute_nobody() {
    let h = harness();
    let _streams = connect_all(&h).await;

    // A status-only write (new resourceVersion, same spec).
    let mut status_only = h
        .source
        .view()
        .dataplane_resource("x-1")
        .unwrap()
        .to_resource();
    status_only.set_resource_version(Some("1000".into()));
    status_only.status.conditions.push(Condition {
        type_: "Ready".into(),
        status: ConditionStatus::True,
        reason: "Connected".into(),
        message: String::new(),
        last_transition_time: "2026-01-01T00:00:00Z".into(),
    });
    assert_eq!(recomputes(&h, MESH, Update::Upserted(status_only)).await, 0);

    // A Dataplane in a mesh nobody is connected to.
    let elsewhere = dataplane("x-9", "10.9.0.1", "x", 8080, &[]);
    assert_eq!(
        recomputes(&h, "elsewhere", Update::Upserted(elsewhere)).await,
        0
    );

    // CA bookkeeping that leaves the trust bundle as it is.
    let before = recomputed(&h).await;
    h.hub.trust_changed(MESH);
    h.hub.sync(false).await;
    assert_eq!(recomputed(&h).await - before, 0, "unchanged trust");

    // A permission targeting a service nobody serves.
    let nobody = permission("to-nobody", "nobody", "x", "Allow");
    h.source.put(nobody.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(nobody)).await, 0);
    h.assert_current(&ALL);
}

#[tokio::test(start_paused = true)]
async fn a_change_to_a_service_recomputes_its_own_proxy_and_those_that_reference_it() {
    let h = harness();
    let _streams = connect_all(&h).await;

    // x-1 moves: its own proxy and the two callers of x, nobody else
    // (not x-2, which does not call x; not o-*, y-1). The callers' only
    // change is x's endpoints: they are patched, not translated again.
    let patched = || h.hub.metrics().patched();
    let moved = x_dataplane("x-1", "10.0.1.9");
    h.source.put(moved.clone());
    let p0 = patched();
    assert_eq!(recomputes(&h, MESH, Update::Upserted(moved)).await, 3);
    assert_eq!(patched() - p0, 2, "ref-1 and ref-2 are patched");
    h.assert_current(&ALL);

    // A new instance of x: itself is not connected; the two callers are.
    let added = x_dataplane("x-3", "10.0.1.3");
    h.source.put(added.clone());
    let p0 = patched();
    assert_eq!(recomputes(&h, MESH, Update::Upserted(added)).await, 2);
    assert_eq!(patched() - p0, 2);
    h.assert_current(&ALL);

    // It goes away again: the same two callers.
    let gone = h.source.delete_dataplane("x-3").unwrap();
    assert_eq!(recomputes(&h, MESH, Update::Deleted(gone)).await, 2);
    h.assert_current(&ALL);

    // A permission into x: the proxies serving x (their inbound RBAC).
    let allow = permission("client-to-x", "x", "client", "Allow");
    h.source.put(allow.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(allow)).await, 2);
    h.assert_current(&ALL);

    // ref-1 starts calling y as well: its own proxy only (y's endpoints
    // did not change, so o-* and y-1 are untouched).
    let widened = dataplane(
        "ref-1",
        "10.0.2.1",
        "client",
        8080,
        &[(9001, "x"), (9002, "y")],
    );
    h.source.put(widened.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(widened)).await, 1);
    h.assert_current(&ALL);

    // Now y-1 moves: its own proxy, o-1, o-2 and ref-1 (the index follows
    // ref-1's new outbound).
    let y_moved = dataplane("y-1", "10.0.4.9", "y", 8080, &[]);
    h.source.put(y_moved.clone());
    let p0 = patched();
    assert_eq!(recomputes(&h, MESH, Update::Upserted(y_moved)).await, 4);
    assert_eq!(patched() - p0, 3, "o-1, o-2 and ref-1 are patched");
    h.assert_current(&ALL);
}

#[tokio::test(start_paused = true)]
async fn mesh_wide_changes_recompute_every_proxy() {
    let h = harness();
    let _streams = connect_all(&h).await;
    let n = ALL.len() as u64;

    // A CA rotation reaches the hub as a trust change.
    h.source.rotate();
    let before = recomputed(&h).await;
    h.hub.trust_changed(MESH);
    h.hub.sync(false).await;
    assert_eq!(recomputed(&h).await - before, n);

    // A Mesh spec change (mTLS off).
    let plaintext = mesh(false);
    h.source.put(plaintext.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(plaintext)).await, n);
    h.assert_current(&ALL);

    // A feed gap: the hub re-lists and finds nothing new.
    let before = recomputed(&h).await;
    h.hub.reload_all();
    h.hub.sync(false).await;
    assert_eq!(
        recomputed(&h).await - before,
        0,
        "a relist that finds no difference"
    );
}

/// `r` with `labels` as its metadata labels.
fn labelled(r: meshlink_api::Resource, labels: serde_json::Value) -> meshlink_api::Resource {
    let mut v = r.to_json();
    v["metadata"]["labels"] = labels;
    meshlink_api::Resource::from_json(v).unwrap()
}

#[tokio::test(start_paused = true)]
async fn dataplane_targets_recompute_the_dataplanes_they_select() {
    let h = harness();
    let _streams = connect_all(&h).await;

    // A label change is a change of the Dataplane: its own proxy only.
    let x1 = labelled(
        x_dataplane("x-1", "10.0.1.1"),
        serde_json::json!({"app": "x-one"}),
    );
    h.source.put(x1.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(x1)).await, 1);
    h.assert_current(&ALL);

    // A permission installed by those labels: x-1 only (x-2 serves x too
    // but carries no label).
    let by_labels = meshlink_api::Resource::from_json(serde_json::json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": "x-one-from-client", "mesh": MESH},
        "spec": {
            "targetRef": {"kind": "Dataplane", "labels": {"app": "x-one"}},
            "from": [{"targetRef": {"kind": "MeshService", "name": "client"},
                      "default": {"action": "Allow"}}],
        },
    }))
    .unwrap();
    h.source.put(by_labels.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(by_labels)).await, 1);
    h.assert_current(&ALL);

    // x-1 loses the label: its own proxy, which no longer admits client.
    let plain = x_dataplane("x-1", "10.0.1.1");
    h.source.put(plain.clone());
    assert_eq!(recomputes(&h, MESH, Update::Upserted(plain)).await, 1);
    h.assert_current(&ALL);
}

/// The load-assignment set `name` was last published with.
fn endpoint_set(h: &Harness, name: &str) -> std::sync::Arc<meshlink_xds::translate::TypeSet> {
    let state = h
        .registry
        .state(&meshlink_xds::owner::ProxyKey::new(MESH, name))
        .unwrap_or_else(|| panic!("{name}: nothing published"));
    state
        .snapshot
        .set(meshlink_xds::translate::ENDPOINT_TYPE)
        .expect("a served type")
        .clone()
}

#[tokio::test(start_paused = true)]
async fn callers_of_the_same_services_share_one_load_assignment_set_across_patches() {
    use std::sync::Arc;
    let h = harness();
    let _streams = connect_all(&h).await;

    // ref-1 and ref-2 call x and nothing else: one set for both, and not
    // the set of o-1 (which calls y).
    let before = endpoint_set(&h, "ref-1");
    assert!(Arc::ptr_eq(&before, &endpoint_set(&h, "ref-2")));
    assert!(!Arc::ptr_eq(&before, &endpoint_set(&h, "o-1")));

    // x-1 moves: both callers are patched, and hold one new set.
    let moved = x_dataplane("x-1", "10.0.1.9");
    h.source.put(moved.clone());
    h.hub.resource_changed(MESH, Update::Upserted(moved));
    h.hub.sync(false).await;
    h.assert_current(&ALL);
    let after = endpoint_set(&h, "ref-1");
    assert!(!Arc::ptr_eq(&before, &after), "the set changed");
    assert!(
        Arc::ptr_eq(&after, &endpoint_set(&h, "ref-2")),
        "patched once for both callers"
    );
    assert!(Arc::ptr_eq(
        &endpoint_set(&h, "o-1"),
        &endpoint_set(&h, "o-2")
    ));
}
