//! REST list paging through an in-process control plane: `limit` and
//! `continue` walk a list once and in order while it changes, every page
//! carries the revision read before the first, a watch from it replays
//! what the walk could not see, whole lists stream past one store page,
//! and bad `limit` or `continue` values are refused naming the parameter.

mod support;

use base64::Engine;
use serde_json::{Value, json};
use support::TestCp;

fn plain_mesh(name: &str) -> Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": name}})
}

fn dp(name: &str, tier: &str) -> Value {
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": "default", "labels": {"tier": tier}},
        "spec": {"networking": {"address": "127.0.0.1",
            "inbound": [{"port": 10001, "servicePort": 8080, "tags": {"kuma.io/service": name}}]}}
    })
}

fn names(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {body}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn setup(n: usize) -> TestCp {
    let cp = TestCp::start().await;
    cp.must_apply("meshes", &plain_mesh("default")).await;
    for i in 0..n {
        let tier = if i % 2 == 0 { "gold" } else { "silver" };
        cp.must_apply("dataplanes", &dp(&format!("dp-{i:02}"), tier))
            .await;
    }
    cp
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_walk_a_changing_list_once_and_a_watch_replays_the_rest() {
    let cp = setup(25).await;
    let (status, first) = cp.api("GET", "/api/v1/dataplanes?limit=10", None).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        names(&first),
        (0..10).map(|i| format!("dp-{i:02}")).collect::<Vec<_>>()
    );
    let revision = first["revision"].as_str().unwrap().to_string();
    let mut token = first["continue"]
        .as_str()
        .expect("a continue token")
        .to_string();

    // Between pages: one created behind the cursor, one ahead, one deleted ahead.
    cp.must_apply("dataplanes", &dp("dp-05x", "gold")).await;
    cp.must_apply("dataplanes", &dp("dp-15x", "gold")).await;
    let (status, _) = cp
        .api("DELETE", "/api/v1/dataplanes/dp-20?mesh=default", None)
        .await;
    assert_eq!(status, 200);

    let mut listed = names(&first);
    loop {
        let (status, page) = cp
            .api(
                "GET",
                &format!("/api/v1/dataplanes?limit=10&continue={token}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            page["revision"],
            revision.as_str(),
            "every page reports the first page's revision"
        );
        listed.extend(names(&page));
        match page["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    let mut want: Vec<String> = (0..25)
        .filter(|i| *i != 20)
        .map(|i| format!("dp-{i:02}"))
        .collect();
    want.push("dp-15x".into());
    want.sort();
    assert_eq!(listed, want, "each untouched Dataplane once, in order");

    // A watch from the list's revision replays all three writes.
    let (status, watch) = cp
        .api(
            "GET",
            &format!("/api/v1/watch?from={revision}&kind=dataplanes&timeout=1s"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{watch}");
    let events: Vec<(String, String)> = watch["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["resource"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string();
            (e["type"].as_str().unwrap().to_string(), name)
        })
        .collect();
    for expected in [
        ("Created", "dp-05x"),
        ("Created", "dp-15x"),
        ("Deleted", "dp-20"),
    ] {
        let expected = (expected.0.to_string(), expected.1.to_string());
        assert!(
            events.contains(&expected),
            "{expected:?} missing from {events:?}"
        );
    }
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_mesh_and_selector_and_a_token_resumes_a_whole_list() {
    let cp = setup(12).await;
    let gold = "/api/v1/dataplanes?mesh=default&labelSelector=tier%3Dgold";
    let (_, p1) = cp.api("GET", &format!("{gold}&limit=4"), None).await;
    assert_eq!(names(&p1), ["dp-00", "dp-02", "dp-04", "dp-06"]);
    let token = p1["continue"].as_str().unwrap();
    let (_, p2) = cp
        .api("GET", &format!("{gold}&limit=4&continue={token}"), None)
        .await;
    assert_eq!(names(&p2), ["dp-08", "dp-10"]);
    assert!(
        p2.get("continue").is_none(),
        "last page has no continue: {p2}"
    );
    // `continue` without `limit`: the rest of the list in one answer.
    let (status, rest) = cp
        .api("GET", &format!("{gold}&continue={token}"), None)
        .await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(names(&rest), ["dp-08", "dp-10"]);
    assert_eq!(rest["revision"], p1["revision"]);
    // A list that fits one page has no continue.
    let (_, all) = cp.api("GET", "/api/v1/dataplanes?limit=12", None).await;
    assert_eq!(names(&all).len(), 12);
    assert!(all.get("continue").is_none(), "{all}");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_limit_and_continue_are_refused_naming_the_parameter() {
    let cp = setup(3).await;
    for bad in ["0", "-1", "1001", "ten", ""] {
        let (status, body) = cp
            .api("GET", &format!("/api/v1/dataplanes?limit={bad}"), None)
            .await;
        assert_eq!(status, 400, "limit={bad}: {body}");
        assert!(message(&body).contains(&format!("limit={bad:?}")), "{body}");
        assert!(message(&body).contains("from 1 to 1000"), "{body}");
    }
    let (_, page) = cp.api("GET", "/api/v1/dataplanes?limit=1", None).await;
    let token = page["continue"].as_str().unwrap();
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        json!({"v": 1, "k": "Dataplane", "r": 999_999, "am": "default", "an": "dp-00"}).to_string(),
    );
    let cases = [
        (
            "/api/v1/dataplanes?continue=garbage!".to_string(),
            "is not a continue token issued by this control plane",
        ),
        (
            "/api/v1/dataplanes?continue=bm90IGpzb24".to_string(),
            "is not a continue token",
        ),
        (
            format!("/api/v1/meshes?limit=1&continue={token}"),
            "belongs to a list of dataplanes, not of meshes",
        ),
        (
            format!("/api/v1/dataplanes?labelSelector=a%3Db&continue={token}"),
            "send it with the same kind, mesh and labelSelector",
        ),
        (
            format!("/api/v1/dataplanes?continue={forged}"),
            "issued by a control plane with other data",
        ),
    ];
    for (path, expected) in cases {
        let (status, body) = cp.api("GET", &path, None).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(message(&body).contains(expected), "{path}: {body}");
        assert!(message(&body).contains("continue"), "{path}: {body}");
    }
    // The control plane still answers.
    let (status, _) = cp.api("GET", "/api/v1/dataplanes?limit=2", None).await;
    assert_eq!(status, 200);
    cp.stop().await;
}

/// A whole list is streamed from the store 500 objects at a time: a list
/// longer than that arrives whole, in order, as one JSON document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_list_longer_than_one_store_page_streams_in_order() {
    const N: usize = 1_001;
    let cp = std::sync::Arc::new(setup(0).await);
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8 {
        let cp = cp.clone();
        tasks.spawn(async move {
            for i in (t..N).step_by(8) {
                cp.must_apply("dataplanes", &dp(&format!("dp-{i:04}"), "gold"))
                    .await;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let (status, whole) = cp.api("GET", "/api/v1/dataplanes", None).await;
    assert_eq!(status, 200);
    let want: Vec<String> = (0..N).map(|i| format!("dp-{i:04}")).collect();
    assert_eq!(names(&whole), want);
    assert!(whole["revision"].as_str().unwrap().parse::<u64>().unwrap() >= N as u64);
    let (_, empty) = cp
        .api("GET", "/api/v1/meshes?labelSelector=none", None)
        .await;
    assert_eq!(empty["items"], json!([]), "{empty}");
    assert!(empty["revision"].is_string(), "{empty}");
    std::sync::Arc::try_unwrap(cp)
        .ok()
        .expect("one owner")
        .stop()
        .await;
}
