//! The in-process tier's set-up: a real [`meshlink_cp::ControlPlane`]
//! started inside the test process, its REST API and xDS listeners on
//! `127.0.0.1:0` (the kernel picks free ports; the bound addresses come
//! back from `start`, so nothing can race for a port), its data dir and
//! SQLite store in a temporary directory.
//!
//! Owns the clients the tests talk through: the REST API (`reqwest`), and
//! TLS to the xDS port trusting the data dir's `cp-tls/ca.pem` (`tonic`).
//! Every wait polls with a deadline; nothing sleeps to let things settle.

#![allow(dead_code, unreachable_pub)] // each test file uses a part of it

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value as PbValue, value::Kind as PbKind};
use meshlink_cp::{ConfigOverrides, ControlPlane, RunningControlPlane};
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

/// How long a test waits for a condition before it fails (a failure
/// timeout, not a performance bound).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A control plane running in this process on a temporary data dir.
pub struct TestCp {
    cp: Option<RunningControlPlane>,
    /// The bound REST API address.
    pub api_addr: SocketAddr,
    /// The bound xDS/Certify address.
    pub xds_addr: SocketAddr,
    /// The bound grant server address.
    pub grant_addr: SocketAddr,
    http: reqwest::Client,
    token: String,
    dir: tempfile::TempDir,
}

impl TestCp {
    /// Starts a control plane with every listener on `127.0.0.1:0`.
    pub async fn start() -> TestCp {
        Self::start_with(ConfigOverrides::default()).await
    }

    /// Starts a control plane with `settings` over the test defaults
    /// (every listener on `127.0.0.1:0`, a temporary data dir).
    pub async fn start_with(settings: ConfigOverrides) -> TestCp {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = settings
            .over(ConfigOverrides {
                data_dir: Some(dir.path().join("data")),
                api_addr: Some("127.0.0.1:0".parse().expect("addr")),
                xds_addr: Some("127.0.0.1:0".parse().expect("addr")),
                grant_addr: Some("127.0.0.1:0".parse().expect("addr")),
                advertised_host: Some("127.0.0.1".into()),
                ..Default::default()
            })
            .resolve()
            .expect("valid config");
        let cp = ControlPlane::start(config)
            .await
            .expect("control plane starts");
        assert_ne!(cp.api_addr.port(), 0, "start reports the bound API port");
        assert_ne!(cp.xds_addr.port(), 0, "start reports the bound xDS port");
        TestCp {
            api_addr: cp.api_addr,
            xds_addr: cp.xds_addr,
            grant_addr: cp.grant_addr,
            token: cp.admin_token.clone(),
            cp: Some(cp),
            http: reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .expect("HTTP client"),
            dir,
        }
    }

    /// Triggers shutdown and waits (with a deadline) for every task to end.
    pub async fn stop(mut self) {
        let cp = self.cp.take().expect("running");
        tokio::time::timeout(DEADLINE, cp.stop())
            .await
            .expect("the control plane stops within the deadline")
            .expect("the control plane stops cleanly");
    }

    /// The admin token.
    pub fn admin_token(&self) -> &str {
        &self.token
    }

    /// A REST call with `token` as the bearer (none: no header); returns
    /// (status, JSON body or Null).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.http.request(
            method.parse().expect("method"),
            format!("http://{}{path}", self.api_addr),
        );
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.expect("API request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A REST call with the admin token.
    pub async fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call(method, path, body, Some(&self.token)).await
    }

    /// `PUT` (apply) of `resource` under `/api/v1/{plural}/{name}`;
    /// returns (status, body).
    pub async fn apply(&self, plural: &str, resource: &Value) -> (u16, Value) {
        let name = resource["metadata"]["name"]
            .as_str()
            .expect("metadata.name");
        let path = match resource["metadata"]["mesh"].as_str() {
            Some(mesh) => format!("/api/v1/{plural}/{name}?mesh={mesh}"),
            None => format!("/api/v1/{plural}/{name}"),
        };
        self.api("PUT", &path, Some(resource)).await
    }

    /// Applies `resource` and fails the test unless the API accepted it.
    pub async fn must_apply(&self, plural: &str, resource: &Value) -> Value {
        let (status, body) = self.apply(plural, resource).await;
        assert!(status == 200 || status == 201, "apply: {status} {body}");
        body
    }

    /// A proxy token for `mesh/name` from `POST /api/v1/tokens/dataplane`.
    pub async fn dataplane_token(&self, mesh: &str, name: &str) -> String {
        let (status, body) = self
            .api(
                "POST",
                "/api/v1/tokens/dataplane",
                Some(&json!({"mesh": mesh, "name": name})),
            )
            .await;
        assert_eq!(status, 200, "token: {body}");
        body["token"].as_str().expect("token").to_owned()
    }

    /// The site's router token from `POST /api/v1/tokens/router`.
    pub async fn router_token(&self) -> String {
        let (status, body) = self
            .api("POST", "/api/v1/tokens/router", Some(&json!({})))
            .await;
        assert_eq!(status, 200, "router token: {body}");
        body["token"].as_str().expect("token").to_owned()
    }

    /// The CA that verifies the xDS port (`<data-dir>/cp-tls/ca.pem`).
    pub fn xds_ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("data/cp-tls/ca.pem"))
            .expect("cp-tls/ca.pem exists once the control plane started")
    }

    /// A TLS channel to the xDS/Certify port, verifying it as `localhost`.
    pub async fn xds_channel(&self) -> Channel {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(self.xds_ca_pem()))
            .domain_name("localhost");
        Channel::from_shared(format!("https://localhost:{}", self.xds_addr.port()))
            .expect("URL")
            .tls_config(tls)
            .expect("TLS config")
            .connect()
            .await
            .expect("connect to the xDS port")
    }

    /// The condition `type` of `plural/name` (Null while absent).
    pub async fn condition(&self, path: &str, type_: &str) -> Value {
        let (status, body) = self.api("GET", path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Polls the condition `type_` of the resource at `path` until its
    /// status is `status` ("True"/"False"); returns the condition.
    pub async fn wait_condition(&self, path: &str, type_: &str, status: &str) -> Value {
        eventually(&format!("{path}: {type_}={status}"), || async {
            let c = self.condition(path, type_).await;
            (c["status"] == status).then_some(c)
        })
        .await
    }
}

/// Polls `f` until it returns `Some`, failing after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut delay = Duration::from_millis(5);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(200));
    }
}

/// A Mesh with mTLS: builtin backends `ca-1` and `ca-2`, `enabled` on.
pub fn mesh(name: &str, enabled: &str) -> Value {
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh", "metadata": {"name": name},
        "spec": {"mtls": {"enabledBackend": enabled, "backends": [
            {"name": "ca-1", "type": "builtin", "dpCert": {"rotation": {"expiration": "1h"}}},
            {"name": "ca-2", "type": "builtin", "dpCert": {"rotation": {"expiration": "1h"}}},
        ]}}
    })
}

/// A Dataplane of service `service` in mesh `default` at `address`, with
/// one inbound `port` and outbounds to `calls` (ports 9001, 9002, ...).
pub fn dataplane(name: &str, address: &str, service: &str, port: u16, calls: &[&str]) -> Value {
    let outbound: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"port": 9001 + i, "tags": {"kuma.io/service": s}}))
        .collect();
    json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
        "metadata": {"name": name, "mesh": "default"},
        "spec": {"networking": {"address": address,
            "inbound": [{"port": port, "servicePort": 8080, "tags": {"kuma.io/service": service}}],
            "outbound": outbound}}
    })
}

/// The xDS mesh of the ADS tests: mesh `default` (mTLS, ca-1), web-1
/// calling backend, backend-1, and a permission web → backend.
pub async fn apply_xds_mesh(cp: &TestCp) {
    cp.must_apply("meshes", &mesh("default", "ca-1")).await;
    cp.must_apply(
        "dataplanes",
        &dataplane("web-1", "127.0.0.1", "web", 10001, &["backend"]),
    )
    .await;
    cp.must_apply(
        "dataplanes",
        &dataplane("backend-1", "127.0.0.2", "backend", 10002, &[]),
    )
    .await;
    cp.must_apply(
        "meshtrafficpermissions",
        &json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTrafficPermission",
            "metadata": {"name": "web-to-backend", "mesh": "default"},
            "spec": {"targetRef": {"kind": "MeshService", "name": "backend"},
                "from": [{"targetRef": {"kind": "MeshService", "name": "web"},
                          "default": {"action": "Allow"}}]}
        }),
    )
    .await;
}

/// An xDS node `<mesh>.<name>` with `meshlink.dev/client` = `client`.
pub fn node(mesh: &str, name: &str, client: &str) -> Node {
    let fields = HashMap::from([(
        "meshlink.dev/client".to_owned(),
        PbValue {
            kind: Some(PbKind::StringValue(client.to_owned())),
        },
    )]);
    Node {
        id: format!("{mesh}.{name}"),
        metadata: Some(Struct { fields }),
        ..Default::default()
    }
}

/// `msg` with `authorization: Bearer <token>`.
pub fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata value"),
    );
    req
}
