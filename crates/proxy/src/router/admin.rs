//! The router's admin endpoint: `/ready`, `/config_dump` and `/metrics`.
//!
//! Owns router readiness: ready once the Site has arrived and every
//! RouterAccess role and Listener is bound. Links do not count: a peer
//! that is down must not make this router unready (the link's state is in
//! `/config_dump`, `/metrics` and Link status). Until then `/ready`
//! answers 503 naming each missing piece. It never exposes a private key.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshlink_link::BindStatus;
use meshlink_runtime::MetricsRegistry;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::driver::RouterState;
use super::resources::RouterResources;
use crate::xds::SharedXdsStatus;

/// What the admin handlers read.
#[derive(Clone)]
pub struct RouterAdmin {
    /// Accepted resources.
    pub resources: watch::Receiver<Arc<RouterResources>>,
    /// The router, once started.
    pub state: watch::Receiver<RouterState>,
    /// xDS session status.
    pub xds: SharedXdsStatus,
    /// Metrics.
    pub registry: MetricsRegistry,
    /// Whether drain has started.
    pub draining: watch::Receiver<bool>,
}

/// The admin router.
pub fn router(state: RouterAdmin) -> Router {
    Router::new()
        .route("/ready", get(ready))
        .route("/config_dump", get(config_dump))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// What is missing before the router is ready (empty: ready).
pub fn missing(admin: &RouterAdmin) -> Vec<String> {
    let mut out = Vec::new();
    if *admin.draining.borrow() {
        out.push("draining: the router is shutting down".into());
    }
    let state = admin.state.borrow().clone();
    let Some(router) = &state.router else {
        let xds = admin.xds.lock().expect("xds status lock").clone();
        let why = state
            .waiting
            .unwrap_or_else(|| "waiting for the control plane".into());
        match xds.last_error.filter(|_| !xds.connected) {
            Some(e) => out.push(format!("site: {why} (control plane: {e})")),
            None => out.push(format!("site: {why}")),
        }
        return out;
    };
    let status = router.status().borrow().clone();
    for (what, items) in [("role", &status.roles), ("listener", &status.listeners)] {
        for (name, bind) in items {
            if let BindStatus::Warming(why) = bind {
                out.push(format!("{what} {name:?} not bound: {why}"));
            }
        }
    }
    out
}

async fn ready(State(admin): State<RouterAdmin>) -> Response {
    crate::admin::ready_response(missing(&admin))
}

/// Links with state, peer and cost; routes; roles; listeners; connectors
/// and the targets they cannot connect to.
/// Credentials appear by name only.
pub fn dump(admin: &RouterAdmin) -> Value {
    let state = admin.state.borrow().clone();
    let resources = admin.resources.borrow().clone();
    let xds = admin.xds.lock().expect("xds status lock").clone();
    let site = state
        .site
        .as_ref()
        .map(|s| json!({"id": s.id, "name": s.name, "edge": s.edge}));
    let (links, roles, listeners, credential_errors, routes, connector_failures) =
        match &state.router {
            Some(r) => {
                let status = r.status().borrow().clone();
                let table = r.routes().borrow().clone();
                let destinations: serde_json::Map<String, Value> = table
                    .destinations
                    .iter()
                    .map(|(key, ds)| {
                        let list = ds
                            .iter()
                            .map(|d| json!({"router": d.router, "cost": d.cost}))
                            .collect();
                        (key.clone(), Value::Array(list))
                    })
                    .collect();
                (
                    json!(status.links),
                    json!(status.roles),
                    json!(status.listeners),
                    json!(status.credential_errors),
                    json!({"destinations": destinations, "nextHop": table.next_hop}),
                    json!(status.connector_failures),
                )
            }
            None => (
                json!({}),
                json!({}),
                json!({}),
                json!({}),
                json!({}),
                json!({}),
            ),
        };
    let connectors: Vec<Value> = resources
        .connectors
        .values()
        .map(|c| json!({"name": c.value.name, "routingKey": c.value.routing_key, "targets": c.value.targets}))
        .collect();
    let credentials: Vec<&str> = resources
        .secrets
        .keys()
        .filter_map(|k| k.strip_prefix("tls:"))
        .collect();
    json!({
        "mode": "router",
        "site": site,
        "waiting": state.waiting,
        "configErrors": state.config_errors,
        "xds": xds,
        "links": links,
        "roles": roles,
        "listeners": listeners,
        "connectors": connectors,
        "connectorFailures": connector_failures,
        "routes": routes,
        "credentials": credentials,
        "credentialErrors": credential_errors,
    })
}

async fn config_dump(State(admin): State<RouterAdmin>) -> Response {
    axum::Json(dump(&admin)).into_response()
}

async fn metrics(State(admin): State<RouterAdmin>) -> Response {
    crate::admin::metrics_response(&admin.registry)
}
