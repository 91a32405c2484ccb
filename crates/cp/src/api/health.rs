//! `/healthz` (the process serves), `/readyz` (the store answers) and
//! `/metrics` (Prometheus text). None needs the admin token; none exposes
//! resource content.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ApiState;

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

pub(super) async fn readyz(State(st): State<ApiState>) -> Response {
    match st.resources.store().current_revision().await {
        Ok(_) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: store ({}) unavailable: {e}\n",
                st.resources.store().backend()
            ),
        )
            .into_response(),
    }
}

pub(super) async fn metrics(State(st): State<ApiState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        st.registry.encode(),
    )
        .into_response()
}
