//! `GET /api/v1/dataplanes/{name}/xds?mesh=M[&configDump=true]`: what the
//! proxy's xDS stream on this control-plane instance looks like (the data
//! behind `meshlink inspect dataplane`), plus the Dataplane's stored
//! status under `dataplaneStatus`.

use axum::Json;
use axum::extract::{Path, Query, State};
use meshlink_api::Kind;
use meshlink_xds::dump::config_dump;
use meshlink_xds::owner::ProxyKey;
use serde::Deserialize;
use serde_json::{Value, json};

use super::resources::kind_of;
use super::{ApiError, ApiState};

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
    let mut body = match report {
        Some(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        None => json!({
            "mesh": mesh,
            "name": name,
            "connected": false,
            "message": "this proxy has not connected to this control-plane instance since it started",
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
