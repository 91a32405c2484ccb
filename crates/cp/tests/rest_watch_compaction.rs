//! Change-feed compaction through an in-process control plane: the leader
//! compacts to `--feed-retain-revisions`, `/metrics` shows how far, a REST
//! watch from before the window answers 410 Gone naming the oldest
//! revision kept and the fix, and listing then watching from the list's
//! revision carries on; the control plane's own feed followers keep
//! working (a Mesh applied afterwards still gets its status).

mod support;

use meshlink_cp::ConfigOverrides;
use serde_json::{Value, json};
use support::{TestCp, eventually};

fn dp(name: &str) -> Value {
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": "default"},
        "spec": {"networking": {"address": "127.0.0.1",
            "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": name}}]}}
    })
}

/// `meshlink_store_feed_compacted_revision` from `/metrics`.
async fn compacted_revision(cp: &TestCp) -> u64 {
    let text = reqwest::get(format!("http://{}/metrics", cp.api_addr))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix("meshlink_store_feed_compacted_revision "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no meshlink_store_feed_compacted_revision in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_behind_the_window_gets_410_and_a_relist_carries_on() {
    // Keep 5 changes, by count only: the compactor runs every second.
    let cp = TestCp::start_with(ConfigOverrides {
        feed_retain_revisions: Some(5),
        feed_retain_for: Some("0s".into()),
        ..Default::default()
    })
    .await;
    cp.must_apply(
        "meshes",
        &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": "default"}}),
    )
    .await;
    for i in 0..30 {
        cp.must_apply("dataplanes", &dp(&format!("dp-{i:02}")))
            .await;
    }
    let (_, list) = cp.api("GET", "/api/v1/dataplanes", None).await;
    let listed: u64 = list["revision"].as_str().unwrap().parse().unwrap();
    let compacted = eventually("the leader to compact the feed", || async {
        let r = compacted_revision(&cp).await;
        (r >= listed - 5).then_some(r)
    })
    .await;

    let (status, body) = cp.api("GET", "/api/v1/watch?from=1&timeout=1s", None).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["error"]["reason"], "Expired", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("from=1 is older than the change feed keeps")
            && message.contains("list the resources again"),
        "{message}"
    );
    // The oldest revision named is one past the compacted one (or later,
    // if the compactor ran again between the two reads).
    let oldest: u64 = message
        .split("the oldest revision kept is ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no oldest revision in {message:?}"));
    assert!(oldest > compacted, "{message}");

    // The fix: list again, watch from the list's revision.
    let (status, list) = cp.api("GET", "/api/v1/dataplanes", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 30);
    let from = list["revision"].as_str().unwrap().to_string();
    cp.must_apply("dataplanes", &dp("after-relist")).await;
    let (status, events) = cp
        .api(
            "GET",
            &format!("/api/v1/watch?from={from}&kind=dataplanes&timeout=10s"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{events}");
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["resource"]["metadata"]["name"] == "after-relist"),
        "{events}"
    );

    // The control plane's own followers carry on past compaction: a new
    // Mesh still gets its status from the mesh CA controller.
    cp.must_apply(
        "meshes",
        &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": "later"}}),
    )
    .await;
    cp.wait_condition("/api/v1/meshes/later", "Ready", "True")
        .await;
    cp.stop().await;
}
