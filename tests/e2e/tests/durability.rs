//! I5: a write the API acknowledged survives `kill -9` of the control plane.

use meshlink_e2e::{ControlPlane, StoreKind, on_both_stores};
use serde_json::json;

const N: usize = 300;

fn acknowledged_writes_survive_kill_9(store: StoreKind) {
    let mut cp = ControlPlane::start(store);
    let mesh = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": "default"}, "spec": {}});
    assert_eq!(cp.api("PUT", "/api/v1/meshes/default", Some(&mesh)).0, 201);
    for i in 0..N {
        let dp = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": format!("dp-{i}"), "mesh": "default", "labels": {"i": i.to_string()}},
            "spec": {"networking": {"address": "127.0.0.1",
                "inbound": [{"port": 10000 + i, "tags": {"kuma.io/service": format!("svc-{i}")}}]}}});
        let (s, v) = cp.api(
            "PUT",
            &format!("/api/v1/dataplanes/dp-{i}?mesh=default"),
            Some(&dp),
        );
        assert_eq!(s, 201, "{v}");
    }
    // The last acknowledgement has just arrived: kill without warning.
    cp.kill9();
    cp.restart();
    let (s, v) = cp.api("GET", "/api/v1/dataplanes?mesh=default", None);
    assert_eq!(s, 200);
    let items = v["items"].as_array().unwrap();
    assert_eq!(
        items.len(),
        N,
        "all acknowledged dataplanes survive kill -9"
    );
    for i in 0..N {
        let (s, v) = cp.api(
            "GET",
            &format!("/api/v1/dataplanes/dp-{i}?mesh=default"),
            None,
        );
        assert_eq!(s, 200, "dp-{i} lost: {v}");
        assert_eq!(v["spec"]["networking"]["inbound"][0]["port"], 10000 + i);
        assert_eq!(v["metadata"]["labels"]["i"], i.to_string());
    }
}

on_both_stores!(acknowledged_writes_survive_kill_9);
