//! `POST /api/v1/link-generate?name=N&subject=S`: what `meshlink link
//! generate` prints, as `skupper link generate` does: a `v1` Secret with a
//! client certificate from this site's CA, then one Link per endpoint
//! group, as one YAML stream (`{"yaml": "..."}`).
//!
//! It issues a certificate and writes nothing; the documents are built by
//! the same code as a grant redemption's answer, so the Secret names this
//! site's grant server and the other site's control plane renews it.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, ApiState};
use crate::grants::response::{LinkDocsError, link_documents, the_site};

#[derive(Debug, Default, Deserialize)]
pub(super) struct Params {
    name: Option<String>,
    subject: Option<String>,
}

pub(super) async fn generate(
    State(st): State<ApiState>,
    q: Result<Query<Params>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let p = q
        .map(|Query(p)| p)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?;
    let site = the_site(&st.resources)
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .map(|s| s.name().to_owned())
        .unwrap_or_default();
    let name = p.name.unwrap_or_else(|| format!("link-{site}"));
    let subject = p.subject.unwrap_or_else(|| name.clone());
    let yaml = link_documents(
        &st.resources,
        &st.advertised_host,
        &name,
        &subject,
        None,
        None,
        crate::grants::response::LINK_CERT_LIFETIME,
        &st.renew_at,
    )
    .await
    .map_err(|e| match e {
        LinkDocsError::NotReady(m) => ApiError::new(StatusCode::CONFLICT, "NotReady", m),
        LinkDocsError::Internal(m) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", m)
        }
    })?;
    Ok(Json(json!({ "yaml": yaml })))
}
