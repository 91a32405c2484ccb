//! `POST /api/v1/apply?dryRun=true`: checks a whole multi-document apply
//! against the server (validation, scope, `resourceVersion`, references such
//! as "the mesh exists") without writing anything, and reports every
//! document's outcome or error. The CLI runs it before applying, so that an
//! apply is all-or-nothing with respect to everything the server checks.

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use meshlink_api::{Kind, Resource};
use serde::Deserialize;
use serde_json::{Value, json};

use super::resources::body_json;
use super::{ApiError, ApiState};

/// Most documents one dry run takes (the body limit applies too).
pub(super) const MAX_ITEMS: usize = 1000;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApplyParams {
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DryRunRequest {
    items: Vec<Value>,
    /// Meshes an earlier part of the same apply creates.
    #[serde(default)]
    pending_meshes: Vec<String>,
    /// Mesh-scoped Secrets an earlier part of the same apply creates, so a
    /// Mesh's `secret:` reference to them counts as satisfied.
    #[serde(default)]
    pending_secrets: Vec<PendingSecret>,
}

/// One entry of `pendingSecrets`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingSecret {
    mesh: String,
    name: String,
}

/// Checks every item; answers 200 with one result per item, in order:
/// `{"index", "result"}` or `{"index", "error": {status, reason, message, fields}}`.
pub(super) async fn dry_run(
    State(st): State<ApiState>,
    q: Result<Query<ApplyParams>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let p = q
        .map(|Query(p)| p)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?;
    if !p.dry_run {
        return Err(ApiError::bad_request(
            "only ?dryRun=true is supported here; apply each resource with PUT /api/v1/<plural>/<name>",
        ));
    }
    let req: DryRunRequest = serde_json::from_value(body_json(body)?).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid request: {e}; send {{\"items\": [resource, ...]}}"
        ))
    })?;
    if req.items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(format!(
            "{} items in one dry run; send at most {MAX_ITEMS}",
            req.items.len()
        )));
    }
    let mut pending: BTreeSet<String> = req.pending_meshes.into_iter().collect();
    let mut secrets: BTreeSet<(String, String)> = req
        .pending_secrets
        .into_iter()
        .map(|s| (s.mesh, s.name))
        .collect();
    let mut results = Vec::with_capacity(req.items.len());
    let mut valid = true;
    for (index, item) in req.items.into_iter().enumerate() {
        let outcome = match Resource::from_json(item) {
            Err(fields) => Err(ApiError::invalid(fields)),
            Ok(r) => {
                let res = st.resources.dry_run_apply(&r, &pending, &secrets).await;
                if res.is_ok() && r.kind() == Kind::Mesh {
                    pending.insert(r.name().to_string());
                }
                if let (true, Kind::Secret, Some(m)) = (res.is_ok(), r.kind(), r.mesh()) {
                    secrets.insert((m.to_string(), r.name().to_string()));
                }
                res.map_err(ApiError::from)
            }
        };
        match outcome {
            Ok(o) => results.push(json!({ "index": index, "result": o })),
            Err(e) => {
                valid = false;
                results.push(json!({ "index": index, "error": e.to_json() }));
            }
        }
    }
    Ok(Json(json!({ "valid": valid, "items": results })))
}
