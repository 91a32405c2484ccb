//! Bad input on the REST API: the right 4xx with a JSON error naming the
//! problem, the server stays up, and acknowledged state stays intact.

use std::io::{Read, Write};

use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::{Value, json};

fn mesh(name: &str) -> Value {
    json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": name}, "spec": {}})
}

fn raw(
    cp: &ControlPlane,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let client = reqwest::blocking::Client::new();
    let mut req = client
        .request(method.parse().unwrap(), format!("{}{path}", cp.server()))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().unwrap();
    let status = resp.status().as_u16();
    (
        status,
        serde_json::from_str(&resp.text().unwrap()).unwrap_or(Value::Null),
    )
}

fn message(v: &Value) -> &str {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no JSON error in {v}"))
}

#[test]
fn bad_requests_get_precise_errors_and_state_survives() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let (s, _) = cp.api("PUT", "/api/v1/meshes/keep", Some(&mesh("keep")));
    assert_eq!(s, 201);
    let token = cp.token().to_string();

    // Invalid JSON.
    let (s, v) = raw(
        &cp,
        "PUT",
        "/api/v1/meshes/x",
        Some(&token),
        b"{not json".to_vec(),
    );
    assert_eq!(s, 400, "{v}");
    assert!(message(&v).contains("not valid JSON"), "{v}");

    // Body over 1 MiB.
    let big = vec![b' '; (1 << 20) + 10];
    let (s, v) = raw(&cp, "PUT", "/api/v1/meshes/x", Some(&token), big);
    assert_eq!(s, 413, "{v}");
    assert!(message(&v).contains("limited to"), "{v}");

    // Unknown kind.
    let (s, v) = raw(&cp, "GET", "/api/v1/gateways", Some(&token), vec![]);
    assert_eq!(s, 404, "{v}");
    assert!(
        message(&v).contains("unknown kind") && message(&v).contains("Dataplane"),
        "{v}"
    );

    // Missing and wrong token.
    let (s, v) = raw(&cp, "GET", "/api/v1/meshes", None, vec![]);
    assert_eq!(s, 401, "{v}");
    assert!(message(&v).contains("missing admin token"), "{v}");
    let (s, v) = raw(&cp, "GET", "/api/v1/meshes", Some("wrong"), vec![]);
    assert_eq!(s, 401, "{v}");
    assert!(message(&v).contains("invalid admin token"), "{v}");

    // Invalid resource: every field error, with paths.
    let bad = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": "x"}, "spec": {"mtls": {"backends": [{"name": "a", "type": "vault"}]}, "bogus": 1}});
    let (s, v) = cp.api("PUT", "/api/v1/meshes/x", Some(&bad));
    assert_eq!(s, 422, "{v}");
    let paths: Vec<&str> = v["error"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.iter().any(|p| p.contains("bogus")), "{v}");

    // Mesh-scoped kind without a mesh, and a dataplane in a missing mesh.
    let (s, v) = cp.api("GET", "/api/v1/dataplanes/web", None);
    assert_eq!(s, 400, "{v}");
    assert!(message(&v).contains("mesh"), "{v}");
    let dp = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": "web", "mesh": "nope"},
        "spec": {"networking": {"address": "127.0.0.1", "inbound": [{"port": 1000, "tags": {"kuma.io/service": "web"}}]}}});
    let (s, v) = cp.api("PUT", "/api/v1/dataplanes/web?mesh=nope", Some(&dp));
    assert_eq!(s, 422, "{v}");
    assert!(message(&v).contains("apply the Mesh first"), "{v}");

    // Name in the path and the body disagree; kind in the path and the body disagree.
    let (s, v) = cp.api("PUT", "/api/v1/meshes/other", Some(&mesh("keep")));
    assert_eq!(s, 400, "{v}");
    let (s, v) = cp.api("PUT", "/api/v1/sites/keep", Some(&mesh("keep")));
    assert_eq!(s, 400, "{v}");
    assert!(message(&v).contains("/api/v1/meshes"), "{v}");

    // Unknown route.
    let (s, v) = cp.api("GET", "/nope", None);
    assert_eq!(s, 404, "{v}");

    // Garbage bytes on the API port.
    let mut sock = std::net::TcpStream::connect(cp.server().trim_start_matches("http://")).unwrap();
    sock.write_all(b"\x00\x01\x02garbage\r\n\r\n\xff\xfe")
        .unwrap();
    let mut buf = Vec::new();
    let _ = sock.read_to_end(&mut buf);
    drop(sock);

    // Still up, still intact.
    let (s, v) = cp.api("GET", "/api/v1/meshes/keep", None);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["metadata"]["name"], "keep");
    let (s, _) = raw(&cp, "GET", "/readyz", None, vec![]);
    assert_eq!(s, 200);
}

#[test]
fn metrics_and_health_are_served() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.api("PUT", "/api/v1/meshes/m1", Some(&mesh("m1")));
    let text = reqwest::blocking::get(format!("{}/metrics", cp.server()))
        .unwrap()
        .text()
        .unwrap();
    assert!(text.contains("meshlink_api_requests_total"), "{text}");
    assert!(text.contains("outcome=\"created\""), "{text}");
    let h = reqwest::blocking::get(format!("{}/healthz", cp.server())).unwrap();
    assert_eq!(h.status().as_u16(), 200);
}

/// Status belongs to the control plane: an admin's `PUT …/status` is
/// refused with 403 naming the owning tasks, and the stored status stays
/// what the owners wrote.
#[test]
fn status_writes_through_the_api_are_refused_naming_the_owner() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let site = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
        "metadata": {"name": "west"}, "spec": {}});
    assert_eq!(cp.api("PUT", "/api/v1/sites/west", Some(&site)).0, 201);
    let before = meshlink_e2e::eventually(
        "the site controller's first status",
        std::time::Duration::from_secs(30),
        || {
            let (_, s) = cp.api("GET", "/api/v1/sites/west", None);
            s["status"]["siteId"].is_string().then_some(s)
        },
    );
    let mut forged = before.clone();
    forged["status"] = json!({"siteId": "forged", "conditions": [{"type": "Ready",
        "status": "True", "reason": "Forged", "message": "set by hand",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let (code, v) = cp.api("PUT", "/api/v1/sites/west/status", Some(&forged));
    assert_eq!(code, 403, "{v}");
    let m = message(&v);
    assert!(
        m.contains("the site controller") && m.contains("the router status task"),
        "{m}"
    );
    assert!(m.contains("Running") && m.contains("siteId"), "{m}");
    let (_, after) = cp.api("GET", "/api/v1/sites/west", None);
    assert_eq!(after["status"]["siteId"], before["status"]["siteId"]);
    assert_ne!(
        after["status"]["conditions"],
        forged["status"]["conditions"]
    );
}
