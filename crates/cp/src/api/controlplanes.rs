//! `GET /api/v1/controlplanes`: the replicas sharing this store, the leader
//! and the singleton jobs' run records (`meshlink get controlplanes`).

use std::time::SystemTime;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::{ApiError, ApiState};
use crate::replicas::{jobs, leader, record};

/// One replica as listed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    #[serde(flatten)]
    record: record::InstanceRecord,
    /// Whether it holds the leader lease.
    leader: bool,
    /// `Live`, or `Stale` when its heartbeat is older than 20 s.
    state: &'static str,
}

/// The whole answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ControlPlanes {
    items: Vec<Item>,
    leader: Option<leader::Lease>,
    jobs: Vec<jobs::JobRun>,
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "StoreUnavailable",
        format!("cannot read the replicas from the store: {e}"),
    )
}

pub(super) async fn list(State(st): State<ApiState>) -> Result<Json<serde_json::Value>, ApiError> {
    let store = st.resources.store().clone();
    let lease = leader::read(store.as_ref()).await.map_err(unavailable)?;
    let now = SystemTime::now();
    let items = record::list(store.as_ref())
        .await
        .map_err(unavailable)?
        .into_iter()
        .map(|(mut r, _)| {
            // The replica answering reports itself as of now (with SQLite
            // its record is written only at start).
            if r.incarnation == *st.incarnation {
                r.connected_proxies = st.xds.owners.len() as u64;
                r.heartbeat = crate::replicas::rfc3339(now);
            }
            r
        })
        .map(|r| Item {
            leader: lease
                .as_ref()
                .is_some_and(|l| l.holder == r.instance && l.incarnation == r.incarnation),
            state: if r.is_stale(now) { "Stale" } else { "Live" },
            record: r,
        })
        .collect();
    let jobs = jobs::list(store.as_ref()).await.map_err(unavailable)?;
    let body = ControlPlanes {
        items,
        leader: lease,
        jobs,
    };
    Ok(Json(serde_json::to_value(body).unwrap_or_default()))
}
