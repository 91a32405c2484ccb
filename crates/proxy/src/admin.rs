//! The admin endpoint: `/ready`, `/config_dump` and `/metrics` (what
//! [`MetricsSource`](crate::metrics_endpoint::MetricsSource) answers).
//! `/config_dump` names, per cluster, each endpoint's standing with the
//! active health check and outlier detection (`endpoint_health`).
//!
//! Owns readiness: the proxy is ready once it holds its first listeners
//! and clusters from the control plane and every listener is serving
//! (which needs the identity certificate and trust bundle whenever mTLS is
//! on). Until then `/ready` answers 503 with a list naming each missing
//! piece. A local application that does not accept connections is named
//! under `apps` (and in `/config_dump`) without making the proxy not
//! ready: the control plane steers traffic away from it. It never exposes
//! a private key.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshlink_runtime::MetricsRegistry;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::dataplane::Dataplane;
use crate::identity::{IdentityStatus, WorkloadIdentity};
use crate::listeners::SharedListenerStates;
use crate::model::ProxyConfig;
use crate::xds::SharedXdsStatus;
use crate::xds::apply::{CLUSTER, LISTENER};

/// What the admin handlers read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Accepted configuration.
    pub config: watch::Receiver<Arc<ProxyConfig>>,
    /// Current identity.
    pub identity: watch::Receiver<Option<Arc<WorkloadIdentity>>>,
    /// Identity actor status.
    pub identity_status: IdentityStatus,
    /// Current data-path view.
    pub dataplane: watch::Receiver<Arc<Dataplane>>,
    /// Listener states.
    pub listeners: SharedListenerStates,
    /// xDS session status.
    pub xds: SharedXdsStatus,
    /// What `/metrics` answers (the MeshMetric filter and applications
    /// included).
    pub metrics: crate::metrics_endpoint::MetricsSource,
    /// Whether drain has started.
    pub draining: watch::Receiver<bool>,
    /// The inbounds' local applications.
    pub apps: crate::apps::AppHealth,
}

/// The admin router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/ready", get(ready))
        .route("/config_dump", get(config_dump))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// What is missing before the proxy is ready (empty: ready).
pub fn missing(state: &AdminState) -> Vec<String> {
    let mut out = Vec::new();
    if *state.draining.borrow() {
        out.push("draining: the proxy is shutting down".into());
    }
    let config = state.config.borrow().clone();
    let xds = state.xds.lock().expect("xds status lock").clone();
    for (ty, what) in [(LISTENER, "listeners"), (CLUSTER, "clusters")] {
        if !config.received.contains(ty) {
            let why = xds
                .last_error
                .clone()
                .unwrap_or_else(|| "waiting for the control plane".into());
            out.push(format!("configuration: no {what} received yet ({why})"));
        }
    }
    if config.received.contains(LISTENER) && config.listeners.is_empty() {
        out.push(
            "configuration: the control plane sent no listeners; check that the Dataplane exists \
             (`meshlink get dataplane NAME -m MESH`) and has an inbound or outbound (a BUILTIN \
             gateway gets none: it is stored but not served yet)"
                .into(),
        );
    }
    let needs_identity = config.listeners.values().any(|l| l.value.tls.is_some())
        || config.clusters.values().any(|c| c.value.tls.is_some());
    if state.identity.borrow().is_none() && (needs_identity || config.received.is_empty()) {
        let why = state
            .identity_status
            .last_error()
            .unwrap_or_else(|| "requesting it from the control plane".into());
        out.push(format!("identity certificate: not issued yet ({why})"));
    }
    let listeners = state
        .listeners
        .lock()
        .expect("listener states lock")
        .clone();
    // A listener the manager has not reconciled yet (the configuration
    // just arrived) is not bound: not ready until it is.
    for name in config.listeners.keys() {
        if !listeners.warming.contains_key(name) {
            out.push(format!(
                "listener {name:?}: not bound yet (its configuration just arrived)"
            ));
        }
    }
    for (name, why) in listeners.warming {
        if let Some(why) = why {
            out.push(format!("listener {name:?} warming: {why}"));
        }
    }
    out
}

/// `/ready` of a sidecar: [`ready_response`], plus, while an inbound's
/// application does not accept connections, `unreachable_apps` with a
/// line per such inbound (last in the body; it does not make the proxy
/// not ready: the control plane steers traffic away from the inbound).
async fn ready(State(state): State<AdminState>) -> Response {
    let missing = missing(&state);
    let apps = state.apps.states().borrow().clone();
    let unreachable = apps.unreachable_lines(tokio::time::Instant::now());
    if unreachable.is_empty() {
        return ready_response(missing);
    }
    let status = if missing.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "ready": missing.is_empty(),
        "missing": missing,
        "unreachable_apps": unreachable,
    });
    (status, axum::Json(body)).into_response()
}

/// `/ready`: 200 `{"missing":[],"ready":true}`, or 503 with what is
/// missing (sidecar and router mode).
pub(crate) fn ready_response(missing: Vec<String>) -> Response {
    let status = if missing.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({"ready": missing.is_empty(), "missing": missing});
    (status, axum::Json(body)).into_response()
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

async fn config_dump(State(state): State<AdminState>) -> Response {
    let config = state.config.borrow().clone();
    let identity = state.identity.borrow().clone().map(|id| {
        json!({
            "spiffe_id": id.cert.spiffe_id,
            "serial": id.cert.serial_hex,
            "not_before": rfc3339(id.cert.not_before),
            "not_after": rfc3339(id.cert.not_after),
        })
    });
    let view = state.dataplane.borrow().clone();
    let listener_states = state
        .listeners
        .lock()
        .expect("listener states lock")
        .clone();
    let listeners: Vec<Value> = config
        .listeners
        .iter()
        .map(|(name, l)| {
            let warming = listener_states.warming.get(name).cloned().flatten();
            json!({
                "name": name,
                "version": l.version,
                "state": if warming.is_some() { "warming" } else { "active" },
                "warming_reason": warming,
                "spec": l.value.as_ref(),
            })
        })
        .collect();
    let now = tokio::time::Instant::now();
    let clusters: Vec<Value> = config
        .clusters
        .iter()
        .map(|(name, c)| {
            let runtime = view.clusters.get(name);
            let endpoints = runtime.map(|rt| config.endpoints_of(&rt.spec).unwrap_or_default());
            json!({
                "name": name,
                "version": c.version,
                "ready": view.clusters.contains_key(name),
                "waiting": view.cluster_waiting.get(name),
                "endpoints": endpoints,
                "endpoint_health": runtime.map(|rt| endpoint_health(rt, now)),
                "spec": c.value.as_ref(),
            })
        })
        .collect();
    let secrets: Vec<Value> = config
        .secrets
        .iter()
        .map(|(name, s)| {
            let kind = match s.value.as_ref() {
                crate::model::SecretSpec::TrustBundle(b) => {
                    json!({"trust_bundle": b.fingerprints()})
                }
                crate::model::SecretSpec::TlsCertificate => {
                    json!({"tls_certificate": "ignored; meshlink-proxy uses its own key"})
                }
                crate::model::SecretSpec::IdentityPolicy(p) => json!({"identity_policy": {
                    "mesh": p.mesh,
                    "certificate_lifetime": humantime::format_duration(p.certificate_lifetime).to_string(),
                }}),
            };
            json!({"name": name, "version": s.version, "type": kind})
        })
        .collect();
    let routes: Vec<Value> = config
        .routes
        .iter()
        .map(|(name, r)| json!({"name": name, "version": r.version, "spec": r.value.as_ref()}))
        .collect();
    let xds = state.xds.lock().expect("xds status lock").clone();
    let apps: Vec<Value> = state
        .apps
        .states()
        .borrow()
        .inbounds
        .iter()
        .map(|(name, app)| {
            let (state, error, down_for) = match &app.state {
                crate::apps::AppState::Unknown => ("unknown", None, None),
                crate::apps::AppState::Reachable => ("reachable", None, None),
                crate::apps::AppState::Unreachable { error, since } => (
                    "unreachable",
                    Some(error.clone()),
                    Some(now.saturating_duration_since(*since).as_secs()),
                ),
            };
            json!({
                "listener": name,
                "port": app.port,
                "address": app.address.to_string(),
                "state": state,
                "error": error,
                "unreachable_for_seconds": down_for,
            })
        })
        .collect();
    let metrics = state.metrics.policy().map(|p| p.as_ref().clone());
    let body = json!({
        "apps": apps,
        "dns": config.dns().map(|d| d.as_ref()),
        "dns_ipv6": config
            .dns_of(meshlink_proto::dns_listener::LISTENER_NAME_IPV6)
            .map(|d| d.as_ref()),
        "metrics": metrics,
        "identity": identity,
        "listeners": listeners,
        "clusters": clusters,
        "routes": routes,
        "secrets": secrets,
        "xds": xds,
    });
    axum::Json(body).into_response()
}

/// Each endpoint of `cluster` as the balancer sees it: its address, its
/// standing with the active health check (`healthy`, `unhealthy`,
/// `pending` its first check, or `unchecked` without one), whether outlier
/// detection ejected it, and whether it takes traffic now.
fn endpoint_health(cluster: &crate::dataplane::ClusterRuntime, now: tokio::time::Instant) -> Value {
    let checked = cluster.spec.health_check.is_some();
    let balancer = &cluster.balancer;
    let list: Vec<Value> = balancer
        .endpoints()
        .iter()
        .map(|e| {
            json!({
                "address": e.addr.to_string(),
                "health": if checked { e.checked_health().as_str() } else { "unchecked" },
                "ejected": e.is_ejected(now),
                "eligible": balancer.is_eligible(e, now),
            })
        })
        .collect();
    Value::Array(list)
}

async fn metrics(State(state): State<AdminState>) -> Response {
    state.metrics.respond().await
}

/// `/metrics`: the registry in the OpenMetrics text format.
pub(crate) fn metrics_response(registry: &MetricsRegistry) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        registry.encode(),
    )
        .into_response()
}

/// Writes `{"adminAddr": "<addr>"}` to `path` atomically (a temporary file
/// in the same directory, then a rename), for `--admin-addr-file`: a
/// reader that sees the file sees it whole.
pub fn write_addr_file(path: &std::path::Path, addr: std::net::SocketAddr) -> std::io::Result<()> {
    use std::io::Write as _;
    let body = format!("{}\n", serde_json::json!({ "adminAddr": addr.to_string() }));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
