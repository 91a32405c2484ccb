//! Long-poll watch: `GET /api/v1/watch?from=R[&kind=K][&mesh=M][&timeout=30s]`.
//!
//! Returns every API change with revision > R (optionally one kind / mesh),
//! oldest first, as soon as there is at least one, or an empty list at the
//! timeout. The response's `revision` is where the next poll resumes, so a
//! client sees each change exactly once, in order, even across control-plane
//! restarts (revisions are durable).
//!
//! The feed keeps a bounded window (`--feed-retain-revisions`,
//! `--feed-retain-for`). A `from` older than the window gets `410 Gone`
//! (reason `Expired`, as the Kubernetes API answers), naming the oldest
//! revision kept and the fix: list again and watch from the list's
//! `revision`.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use meshlink_api::Kind;
use meshlink_store::StoreError;
use serde::Deserialize;
use serde_json::json;

use super::resources::kind_of;
use super::{ApiError, ApiState};
use crate::resources::ResourceError;

/// Most events in one response.
const PAGE: usize = 500;
/// Longest a poll may wait.
const MAX_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Deserialize)]
pub(super) struct WatchParams {
    from: Option<String>,
    kind: Option<String>,
    mesh: Option<String>,
    timeout: Option<String>,
}

pub(super) async fn watch(
    State(st): State<ApiState>,
    q: Result<Query<WatchParams>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Query(p) =
        q.map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?;
    let mut from: u64 = match p.from.as_deref() {
        None => *st.revision.borrow(),
        Some(s) => s.parse().map_err(|_| {
            ApiError::bad_request(format!("from={s:?} is not a revision (a decimal number)"))
        })?,
    };
    let kind: Option<Kind> = p.kind.as_deref().map(kind_of).transpose()?;
    let timeout = match p.timeout.as_deref() {
        None => Duration::from_secs(30),
        Some(s) => humantime::parse_duration(s)
            .map_err(|e| ApiError::bad_request(format!("timeout={s:?}: {e} (e.g. 30s)")))?
            .min(MAX_TIMEOUT),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut revision = st.revision.clone();
    loop {
        // Mark the current value seen before reading, so a write landing
        // after the read wakes us instead of being missed.
        revision.borrow_and_update();
        let (events, last) = st
            .resources
            .events_since(from, PAGE)
            .await
            .map_err(expired)?;
        let events: Vec<_> = events
            .into_iter()
            .filter(|e| kind.is_none_or(|k| e.resource.kind() == k))
            .filter(|e| p.mesh.is_none() || e.resource.mesh() == p.mesh.as_deref())
            .map(|e| {
                json!({
                    "revision": e.revision.to_string(),
                    "type": e.change_type,
                    "resource": e.resource.to_api_json(),
                })
            })
            .collect();
        let advanced = last > from;
        from = last;
        if !events.is_empty() {
            return Ok(Json(
                json!({ "events": events, "revision": from.to_string() }),
            ));
        }
        // Everything read was filtered out: there may be more pages.
        if advanced || *revision.borrow() > from {
            continue;
        }
        tokio::select! {
            changed = revision.changed() => {
                if changed.is_err() {
                    return Err(ApiError::new(
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        "ShuttingDown",
                        "the control plane is shutting down; retry against another instance",
                    ));
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Ok(Json(json!({ "events": [], "revision": from.to_string() })));
            }
        }
    }
}

/// A watch from before the feed's window is 410 Gone, with the fix.
fn expired(e: ResourceError) -> ApiError {
    match e {
        ResourceError::Store(StoreError::Compacted { requested, oldest }) => ApiError::new(
            axum::http::StatusCode::GONE,
            "Expired",
            format!(
                "from={requested} is older than the change feed keeps: the oldest revision kept is \
                 {oldest} (see --feed-retain-revisions and --feed-retain-for); list the resources \
                 again (GET /api/v1/<kind>) and watch from the list's revision"
            ),
        ),
        e => e.into(),
    }
}
