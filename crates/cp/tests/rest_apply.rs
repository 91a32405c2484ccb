//! The REST apply path through an in-process control plane: apply reports
//! created / configured / unchanged, get and delete round-trip, invalid
//! input is refused with every field path, references are checked, and
//! every resource route needs the admin token.

mod support;

use serde_json::{Value, json};
use support::{TestCp, dataplane, mesh};

fn paths(body: &Value) -> Vec<String> {
    body["error"]["fields"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .filter_map(|f| f["path"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reports_created_configured_unchanged_and_get_delete_round_trip() {
    let cp = TestCp::start().await;
    let m = mesh("default", "ca-1");

    let (status, body) = cp.apply("meshes", &m).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (201, Some("created")),
        "{body}"
    );
    let (status, body) = cp.apply("meshes", &m).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (200, Some("unchanged")),
        "{body}"
    );

    let mut labelled = m.clone();
    labelled["metadata"]["labels"] = json!({"team": "core"});
    let (status, body) = cp.apply("meshes", &labelled).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (200, Some("configured")),
        "{body}"
    );

    let (status, got) = cp.api("GET", "/api/v1/meshes/default", None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["metadata"]["labels"]["team"], "core", "{got}");
    assert_eq!(got["spec"]["mtls"]["enabledBackend"], "ca-1", "{got}");

    let dp = dataplane("web-1", "127.0.0.1", "web", 10001, &[]);
    let (status, body) = cp.apply("dataplanes", &dp).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (201, Some("created")),
        "{body}"
    );
    let (status, list) = cp.api("GET", "/api/v1/dataplanes?mesh=default", None).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["web-1"]);

    let (status, body) = cp
        .api("DELETE", "/api/v1/dataplanes/web-1?mesh=default", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = cp
        .api("GET", "/api/v1/dataplanes/web-1?mesh=default", None)
        .await;
    assert_eq!(
        (status, body["error"]["reason"].as_str()),
        (404, Some("NotFound")),
        "{body}"
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_input_is_refused_naming_every_field_path() {
    let cp = TestCp::start().await;
    cp.must_apply("meshes", &mesh("default", "ca-1")).await;

    let mut bad = dataplane("web-1", "127.0.0.1", "web", 10001, &["backend"]);
    bad["spec"]["networking"]["inbound"][0]["port"] = json!(0);
    bad["spec"]["networking"]["outbound"][0]["tags"] = json!({});
    let (status, body) = cp.apply("dataplanes", &bad).await;
    assert_eq!(
        (status, body["error"]["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    let got = paths(&body);
    for want in [
        "spec.networking.inbound[0].port",
        "spec.networking.outbound[0].tags",
    ] {
        assert!(
            got.iter().any(|p| p == want),
            "{want} missing from {got:?}: {body}"
        );
    }
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("out of range"), "{message}");

    // Nothing of the rejected document was stored.
    let (status, _) = cp
        .api("GET", "/api/v1/dataplanes/web-1?mesh=default", None)
        .await;
    assert_eq!(status, 404);

    // A mesh-scoped resource needs its Mesh; the error names it.
    let mut elsewhere = dataplane("web-1", "127.0.0.1", "web", 10001, &[]);
    elsewhere["metadata"]["mesh"] = json!("nope");
    let (status, body) = cp.apply("dataplanes", &elsewhere).await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("nope"),
        "{body}"
    );

    // Not JSON at all, and a body that disagrees with its path.
    let (status, body) = cp
        .call(
            "PUT",
            "/api/v1/meshes/default",
            None,
            Some(cp.admin_token()),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = cp
        .api(
            "PUT",
            "/api/v1/meshes/other",
            Some(&mesh("default", "ca-1")),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("metadata.name"),
        "{body}"
    );

    // The control plane is still serving.
    let (status, _) = cp.api("GET", "/api/v1/meshes/default", None).await;
    assert_eq!(status, 200);
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_routes_need_the_admin_token() {
    let cp = TestCp::start().await;
    let m = mesh("default", "ca-1");

    let (status, body) = cp
        .call("PUT", "/api/v1/meshes/default", Some(&m), None)
        .await;
    assert_eq!(
        (status, body["error"]["reason"].as_str()),
        (401, Some("Unauthorized")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("missing admin token"),
        "{body}"
    );

    let (status, body) = cp
        .call("GET", "/api/v1/meshes", None, Some("not-the-token"))
        .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("invalid admin token"),
        "{body}"
    );

    // Nothing was applied without the token.
    let (status, _) = cp.api("GET", "/api/v1/meshes/default", None).await;
    assert_eq!(status, 404);

    // Health and metrics need no token.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (status, _) = cp.call("GET", path, None, None).await;
        assert_eq!(status, 200, "{path}");
    }
    cp.stop().await;
}
