//! The REST API on `--api-addr`: JSON CRUD and watch for every kind, plus
//! `/healthz`, `/readyz` and `/metrics`. See `docs/api.md`.
//!
//! Owns HTTP concerns only (routing, auth, limits, error bodies); resource
//! semantics live in [`crate::resources`]. No request content may panic it.

mod apply;
mod console;
mod continue_token;
mod controlplanes;
mod error;
mod health;
mod link_generate;
mod list;
mod metrics;
mod replica_forward;
mod resources;
pub(crate) mod tokens;
mod traffic;
mod watch;
mod xds;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshlink_runtime::MetricsRegistry;
use subtle::ConstantTimeEq;
use tokio::sync::watch as tokio_watch;

pub use error::ApiError;
pub use list::MAX_LIMIT;
pub use metrics::ApiMetrics;

use crate::resources::ResourceService;

/// Largest request body the API reads.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Shared state of the API handlers.
#[derive(Clone)]
pub struct ApiState {
    /// Resource access.
    pub resources: ResourceService,
    /// Proxy-token issuing.
    pub tokens: Arc<crate::identity::tokens::TokenService>,
    /// The xDS port's TLS material (its CA issues `--cert-dir` client certificates).
    pub cp_tls: Arc<crate::cp_tls::CpTls>,
    /// The admin bearer token.
    pub admin_token: Arc<str>,
    /// The newest store revision seen by the change-feed follower.
    pub revision: tokio_watch::Receiver<u64>,
    /// Metrics registry, for `/metrics`.
    pub registry: MetricsRegistry,
    /// API metrics.
    pub metrics: ApiMetrics,
    /// Where the admin token lives, for error messages.
    pub token_hint: Arc<str>,
    /// xDS stream reports, for `/api/v1/dataplanes/{name}/xds`.
    pub xds: XdsInspect,
    /// The mesh CA controller's handle, for `/api/v1/meshes/{name}/ca`.
    pub ca: crate::identity::CaHandle,
    /// The host other sites dial (`--advertised-host`), for `link-generate`.
    pub advertised_host: Arc<str>,
    /// Where the link credentials `link-generate` issues are renewed.
    pub renew_at: Arc<crate::grants::response::RenewAt>,
    /// This process's incarnation (`get controlplanes` shows it live).
    pub incarnation: Arc<str>,
    /// This replica's instance name (`inspect` forwards to the replica
    /// holding a proxy's stream when it is another one).
    pub instance: Arc<str>,
    /// The traffic figures the site's router reports, for `/api/v1/traffic`.
    pub(crate) traffic: crate::traffic::TrafficBoard,
}

/// What the API reads about xDS streams.
#[derive(Clone)]
pub struct XdsInspect {
    /// Per-proxy stream reports.
    pub inspector: meshlink_xds::ads::Inspector,
    /// Owner records, for the latest published configuration.
    pub owners: meshlink_xds::owner::OwnerRegistry<meshlink_xds::ads::ProxyState>,
}

/// Builds the router.
pub fn router(state: ApiState) -> Router {
    let api = Router::new()
        .route("/api/v1/controlplanes", get(controlplanes::list))
        .route("/api/v1/{plural}", get(list::list).post(resources::create))
        .route(
            "/api/v1/{plural}/{name}",
            get(resources::get_one)
                .put(resources::apply)
                .delete(resources::delete),
        )
        .route(
            "/api/v1/{plural}/{name}/status",
            axum::routing::put(resources::put_status),
        )
        .route("/api/v1/watch", get(watch::watch))
        .route("/api/v1/apply", axum::routing::post(apply::dry_run))
        .route(
            "/api/v1/tokens/dataplane",
            axum::routing::post(tokens::dataplane),
        )
        .route("/api/v1/tokens/router", axum::routing::post(tokens::router))
        .route("/api/v1/tokens/revoke", axum::routing::post(tokens::revoke))
        .route(
            "/api/v1/link-generate",
            axum::routing::post(link_generate::generate),
        )
        .route("/api/v1/{plural}/{name}/ca", get(tokens::mesh_ca))
        .route("/api/v1/{plural}/{name}/xds", get(xds::inspect))
        .route("/api/v1/traffic", get(traffic::traffic))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .merge(api)
        .merge(console::routes())
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}; see docs/api.md (resources live under /api/v1/<kind plural>)",
        req.method(),
        req.uri().path()
    ))
}

async fn require_token(State(state): State<ApiState>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        None => ApiError::unauthorized(format!(
            "missing admin token: send 'Authorization: Bearer <token>' (the CLI reads --token, MESHLINK_TOKEN or {})",
            state.token_hint
        ))
        .into_response(),
        Some(t) if bool::from(t.trim().as_bytes().ct_eq(state.admin_token.as_bytes())) => {
            next.run(req).await
        }
        Some(_) => ApiError::unauthorized(format!(
            "invalid admin token; use the token in {}",
            state.token_hint
        ))
        .into_response(),
    }
}
