//! `GET /api/v1/dataplanes/{name}/xds?mesh=M[&configDump=true]`: what the
//! proxy's xDS stream looks like (the data behind `meshlink inspect
//! dataplane`), plus the Dataplane's stored status under
//! `dataplaneStatus`. When the stream is on another replica, that replica
//! answers (`replica_forward`) and the body says `forwardedBy`.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Uri};
use meshlink_api::Kind;
use meshlink_xds::dump::config_dump;
use meshlink_xds::owner::ProxyKey;
use serde::Deserialize;
use serde_json::{Value, json};

use super::resources::kind_of;
use super::{ApiError, ApiState, replica_forward};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct XdsQuery {
    mesh: Option<String>,
    #[serde(default)]
    config_dump: bool,
}

pub(super) async fn inspect(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    Query(q): Query<XdsQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    if kind_of(&plural)? != Kind::Dataplane {
        return Err(ApiError::not_found("only dataplanes have an /xds endpoint"));
    }
    let mesh = q.mesh.unwrap_or_else(|| "default".to_owned());
    // 404 with the usual message if the Dataplane does not exist.
    let dataplane = st
        .resources
        .get(Kind::Dataplane, Some(&mesh), &name)
        .await?;
    let key = ProxyKey::new(mesh.clone(), name.clone());
    let report = st.xds.inspector.report(&key);
    let open_here = report.as_ref().is_some_and(|r| r.connected);
    let status = dataplane.status.details.as_dataplane();
    let elsewhere = status
        .filter(|s| s.online)
        .and_then(|s| s.control_plane_instance.as_deref())
        .filter(|i| *i != &*st.instance);
    let mut unreachable = None;
    if let Some(instance) = elsewhere
        && !open_here
        && !replica_forward::forwarded(&headers)
    {
        let store = st.resources.store();
        match replica_forward::forward(store.as_ref(), instance, &headers, &uri, &st.instance).await
        {
            Ok(body) => return Ok(Json(body)),
            Err(e) => unreachable = Some(e),
        }
    }
    let mut body = match report {
        Some(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        None => json!({
            "mesh": mesh,
            "name": name,
            "connected": false,
            "message": match (elsewhere, &unreachable) {
                (Some(i), Some(why)) => format!("this proxy's stream is on control plane {i}, which cannot be asked for its report: {why}"),
                _ => "this proxy has not connected to this control-plane instance since it started".to_owned(),
            },
        }),
    };
    // The Dataplane's status (connection, certificate however it was
    // delivered, Ready), as every control-plane instance sees it.
    if let Value::Object(map) = &mut body {
        let status = dataplane.to_json()["status"].take();
        map.insert("dataplaneStatus".to_owned(), status);
    }
    if q.config_dump
        && let Some(state) = st.xds.owners.state(&key)
        && let Value::Object(map) = &mut body
    {
        map.insert("configDump".to_owned(), config_dump(&state.snapshot));
    }
    Ok(Json(body))
}
