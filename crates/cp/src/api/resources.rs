//! CRUD handlers: `/api/v1/{plural}[/{name}[/status]]`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meshlink_api::{Kind, Resource};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, ApiState};
use crate::resources::{ResourceService, parse_version};

/// Query parameters shared by the resource routes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResourceParams {
    mesh: Option<String>,
    resource_version: Option<String>,
    /// `DELETE`: also delete everything that uses the resource (a Mesh's
    /// contents, a Site's RouterAccess and Listeners, ...), users first.
    #[serde(default)]
    cascade: bool,
}

pub(super) fn kind_of(plural: &str) -> Result<Kind, ApiError> {
    plural
        .parse::<Kind>()
        .map_err(|e| ApiError::not_found(e.to_string()))
}

fn params(q: Result<Query<ResourceParams>, QueryRejection>) -> Result<ResourceParams, ApiError> {
    q.map(|Query(p)| p)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))
}

pub(super) fn body_json(
    body: Result<Bytes, BytesRejection>,
) -> Result<serde_json::Value, ApiError> {
    let bytes = body.map_err(|e| {
        ApiError::new(
            e.status(),
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                "TooLarge"
            } else {
                "BadRequest"
            },
            format!(
                "cannot read request body ({}); bodies are limited to {} bytes",
                e.body_text(),
                super::MAX_BODY_BYTES
            ),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "request body is not valid JSON: {e}; send one canonical resource (apiVersion, kind, metadata, spec)"
        ))
    })
}

fn resource_from_body(
    kind: Kind,
    body: Result<Bytes, BytesRejection>,
) -> Result<Resource, ApiError> {
    let r = Resource::from_json(body_json(body)?).map_err(ApiError::invalid)?;
    if r.kind() != kind {
        return Err(ApiError::bad_request(format!(
            "body has kind {} but the path is for {}; send it to /api/v1/{}",
            r.kind(),
            kind,
            r.kind().plural()
        )));
    }
    Ok(r)
}

fn with_mesh(kind: Kind, mesh: Option<String>) -> Result<Option<String>, ApiError> {
    ResourceService::check_scope(kind, mesh.as_deref())?;
    Ok(mesh)
}

pub(super) async fn get_one(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    q: Result<Query<ResourceParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let mesh = with_mesh(kind, params(q)?.mesh)?;
    let r = st.resources.get(kind, mesh.as_deref(), &name).await?;
    Ok(Json(r.to_api_json()).into_response())
}

pub(super) async fn create(
    State(st): State<ApiState>,
    Path(plural): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let r = resource_from_body(kind, body)?;
    let created = st.resources.create(r).await?;
    Ok((StatusCode::CREATED, Json(created.to_api_json())).into_response())
}

fn check_path_matches(r: &Resource, name: &str, mesh: Option<&str>) -> Result<(), ApiError> {
    if r.name() != name {
        return Err(ApiError::bad_request(format!(
            "metadata.name {:?} does not match the name in the path {name:?}",
            r.name()
        )));
    }
    if let Some(m) = mesh
        && r.mesh() != Some(m)
    {
        return Err(ApiError::bad_request(format!(
            "metadata.mesh {:?} does not match ?mesh={m}",
            r.mesh().unwrap_or("")
        )));
    }
    Ok(())
}

/// `PUT /api/v1/{plural}/{name}`: create or update (apply).
pub(super) async fn apply(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    q: Result<Query<ResourceParams>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let p = params(q)?;
    let r = resource_from_body(kind, body)?;
    check_path_matches(&r, &name, p.mesh.as_deref())?;
    let (outcome, stored) = st.resources.apply(r).await?;
    st.metrics.record_apply(outcome);
    let status = if outcome == crate::resources::ApplyOutcome::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({ "result": outcome, "resource": stored.to_api_json() })),
    )
        .into_response())
}

/// `PUT /api/v1/{plural}/{name}/status`: refused. Status belongs to the
/// control plane's owners (`crate::status::owners`); the 403 names them.
pub(super) async fn put_status(
    Path((plural, _name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "Forbidden",
        crate::status::owners::refusal(kind),
    ))
}

pub(super) async fn delete(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    q: Result<Query<ResourceParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let p = params(q)?;
    let mesh = with_mesh(kind, p.mesh)?;
    let expected = p
        .resource_version
        .as_deref()
        .map(parse_version)
        .transpose()?;
    if p.cascade {
        let (r, cascaded) = st
            .resources
            .delete_cascade(kind, mesh.as_deref(), &name, expected)
            .await?;
        let cascaded: Vec<_> = cascaded
            .iter()
            .map(|c| json!({ "kind": c.kind().as_str(), "mesh": c.mesh(), "name": c.name() }))
            .collect();
        return Ok(
            Json(json!({ "resource": r.to_api_json(), "cascaded": cascaded })).into_response(),
        );
    }
    let r = st
        .resources
        .delete(kind, mesh.as_deref(), &name, expected)
        .await?;
    Ok(Json(r.to_api_json()).into_response())
}
