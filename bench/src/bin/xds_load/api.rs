//! The control plane's REST API as the load generator uses it: apply the
//! bench Mesh and Dataplanes, issue proxy tokens, read the mesh CA, and
//! move an endpoint to trigger a push.
//!
//! Every failure names the call and carries the server's answer.

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

/// Address of backend dataplane `k` (1-based).
pub(crate) fn backend_address(k: usize) -> String {
    format!("10.255.0.{k}")
}

/// Address of proxy `i`.
fn proxy_address(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
}

/// A REST API client with the admin token.
#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    /// A client for `base` (e.g. `http://127.0.0.1:5681`).
    pub(crate) fn new(base: &str, token: String, concurrency: usize) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            token,
        })
    }

    async fn send(&self, req: reqwest::RequestBuilder, what: &str) -> anyhow::Result<Value> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("{what}: cannot reach the API at {}", self.base))?;
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("{what}: HTTP {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("{what}: response is not JSON: {body}"))
    }

    async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let req = self.client.put(format!("{}{path}", self.base)).json(&body);
        self.send(req, &format!("PUT {path}")).await
    }

    /// Applies Mesh `mesh` with a builtin CA; `dp_cert` sets the dataplane
    /// certificate lifetime (`None`: the default).
    pub(crate) async fn apply_mesh(&self, mesh: &str, dp_cert: Option<&str>) -> anyhow::Result<()> {
        let mut backend = json!({"name": "ca-1", "type": "builtin"});
        if let Some(exp) = dp_cert {
            backend["dpCert"] = json!({"rotation": {"expiration": exp}});
        }
        let body = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
            "metadata": {"name": mesh},
            "spec": {"mtls": {"enabledBackend": "ca-1", "backends": [backend]}}});
        self.put(&format!("/api/v1/meshes/{mesh}"), body).await?;
        Ok(())
    }

    async fn apply_dataplane(
        &self,
        mesh: &str,
        name: &str,
        address: &str,
        port: u32,
        service: &str,
        outbound: Option<&str>,
    ) -> anyhow::Result<()> {
        let outbound: Vec<Value> = outbound
            .map(|s| json!({"port": 20001, "tags": {"kuma.io/service": s}}))
            .into_iter()
            .collect();
        let body = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": name, "mesh": mesh},
            "spec": {"networking": {"address": address,
                "inbound": [{"port": port, "servicePort": 8080, "tags": {"kuma.io/service": service}}],
                "outbound": outbound}}});
        self.put(&format!("/api/v1/dataplanes/{name}?mesh={mesh}"), body)
            .await?;
        Ok(())
    }

    /// Applies backend dataplane `k` (service `backend`) on `port`.
    pub(crate) async fn apply_backend(
        &self,
        mesh: &str,
        k: usize,
        port: u32,
    ) -> anyhow::Result<()> {
        let name = format!("backend-{k}");
        self.apply_dataplane(mesh, &name, &backend_address(k), port, "backend", None)
            .await
    }

    /// Applies proxies `p-0..p-(n-1)` (inbound service `app`, outbound to
    /// `backend`), `concurrency` requests at a time.
    pub(crate) async fn apply_proxies(
        &self,
        mesh: &str,
        n: usize,
        concurrency: usize,
    ) -> anyhow::Result<()> {
        futures::stream::iter(0..n)
            .map(|i| async move {
                let name = format!("p-{i}");
                self.apply_dataplane(
                    mesh,
                    &name,
                    &proxy_address(i),
                    10001,
                    "app",
                    Some("backend"),
                )
                .await
            })
            .buffer_unordered(concurrency)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// Issues one proxy token per proxy `p-0..p-(n-1)`, in index order.
    pub(crate) async fn proxy_tokens(
        &self,
        mesh: &str,
        n: usize,
        concurrency: usize,
    ) -> anyhow::Result<Vec<String>> {
        futures::stream::iter(0..n)
            .map(|i| async move {
                let body = json!({"mesh": mesh, "name": format!("p-{i}"), "validFor": "24h"});
                let req = self
                    .client
                    .post(format!("{}/api/v1/tokens/dataplane", self.base))
                    .json(&body);
                let v = self.send(req, "POST /api/v1/tokens/dataplane").await?;
                v["token"]
                    .as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("token response without \"token\": {v}"))
            })
            .buffered(concurrency)
            .try_collect()
            .await
    }

    /// The mesh's trust bundle (PEM roots) from `GET /api/v1/meshes/{mesh}/ca`.
    pub(crate) async fn trust_bundle(&self, mesh: &str) -> anyhow::Result<Vec<String>> {
        let path = format!("/api/v1/meshes/{mesh}/ca");
        let req = self.client.get(format!("{}{path}", self.base));
        let v = self.send(req, &format!("GET {path}")).await?;
        match &v["trustBundle"] {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(a) => Ok(a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()),
            other => bail!("GET {path}: trustBundle is {other}, expected PEM text"),
        }
    }
}
