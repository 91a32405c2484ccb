//! Identity endpoints: proxy tokens (`POST /api/v1/tokens/dataplane`,
//! `POST /api/v1/tokens/router`, `POST /api/v1/tokens/revoke`) and a mesh's public CA information
//! (`GET /api/v1/meshes/{name}/ca`). Private keys are never served.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use meshlink_api::Kind;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use meshlink_store::ObjectKey;

use super::resources::{body_json, kind_of};
use super::{ApiError, ApiState};
use crate::identity::tokens;
use crate::resources::ResourceError;

/// Longest token lifetime the API issues.
const MAX_VALID_FOR: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DataplaneTokenRequest {
    mesh: String,
    name: String,
    #[serde(default)]
    services: Vec<String>,
    #[serde(default)]
    valid_for: Option<String>,
    /// Also issue a client certificate for the xDS port (for clients that
    /// cannot send a token, e.g. proxyless gRPC).
    #[serde(default)]
    client_certificate: bool,
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::bad_request(format!("invalid request: {e}")))
}

/// Issues a dataplane token. Services default to the existing Dataplane's
/// inbound services.
pub(super) async fn dataplane(
    State(st): State<ApiState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req: DataplaneTokenRequest = parse(body_json(body)?)?;
    let valid_for = valid_for(req.valid_for.as_deref())?;
    st.resources
        .get(Kind::Mesh, None, &req.mesh)
        .await
        .map_err(|e| match e {
            ResourceError::NotFound(m) => {
                ApiError::not_found(format!("{m} not found; apply the Mesh first"))
            }
            e => e.into(),
        })?;
    let mut services = req.services;
    if services.is_empty() {
        match st
            .resources
            .get(Kind::Dataplane, Some(&req.mesh), &req.name)
            .await
        {
            Ok(dp) => {
                if let Some(spec) = dp.spec.as_dataplane() {
                    services = spec.services().into_iter().map(str::to_string).collect();
                    if services.is_empty() {
                        // A tagless Dataplane's identity is its name.
                        services.extend(spec.identity_service(&req.name).map(str::to_string));
                    }
                }
            }
            Err(ResourceError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    services.sort();
    services.dedup();
    if services.is_empty() {
        return Err(ApiError::bad_request(format!(
            "dataplane {:?} in mesh {:?} does not exist and no services were given; apply the Dataplane first or pass --service",
            req.name, req.mesh
        )));
    }
    let (token, claims) = st.tokens.issue(&req.mesh, &req.name, services, valid_for);
    record_issued(st.resources.store().as_ref(), &claims).await?;
    let mut resp = json!({
        "token": token,
        "id": claims.jti,
        "mesh": claims.mesh,
        "name": claims.name,
        "services": claims.services,
        "expiresAt": humantime::format_rfc3339_seconds(claims.expires_at()).to_string(),
    });
    if req.client_certificate {
        let uri = dataplane_client_uri(&req.mesh, &req.name);
        let (cert, key) = st.cp_tls.issue_client_cert(&uri, valid_for).map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "Internal",
                e.to_string(),
            )
        })?;
        resp["clientCertificate"] = json!({
            "uri": uri,
            "certificatePem": cert,
            "privateKeyPem": key,
            "caPem": st.cp_tls.ca_pem,
        });
    }
    Ok(Json(resp))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RouterTokenRequest {
    /// The site; default: the one Site this control plane holds.
    #[serde(default)]
    site: Option<String>,
    #[serde(default)]
    valid_for: Option<String>,
}

/// Issues the router token of this control plane's Site (or of `site`).
pub(super) async fn router(
    State(st): State<ApiState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req: RouterTokenRequest = parse(body_json(body)?)?;
    let valid_for = valid_for(req.valid_for.as_deref())?;
    let sites = st.resources.list(Kind::Site, None, None).await?;
    let names: Vec<&str> = sites.iter().map(|s| s.name()).collect();
    let site = match (req.site.as_deref(), names.as_slice()) {
        (Some(s), _) if names.contains(&s) => s.to_owned(),
        (Some(s), _) => {
            return Err(ApiError::not_found(format!(
                "site {s:?} not found (sites: {names:?}); apply the Site first"
            )));
        }
        (None, [one]) => (*one).to_owned(),
        (None, []) => {
            return Err(ApiError::not_found(
                "this control plane has no Site; apply one first (kind: Site), then ask for its router's token",
            ));
        }
        (None, many) => {
            return Err(ApiError::bad_request(format!(
                "this control plane holds several Sites ({many:?}); name one with --site"
            )));
        }
    };
    let (token, claims) = st.tokens.issue_router(&site, valid_for);
    record_issued(st.resources.store().as_ref(), &claims).await?;
    Ok(Json(json!({
        "token": token,
        "id": claims.jti,
        "site": claims.site,
        "nodeId": claims.node_id(),
        "expiresAt": humantime::format_rfc3339_seconds(claims.expires_at()).to_string(),
    })))
}

/// Parses `validFor` (default 24h), between 1 s and [`MAX_VALID_FOR`].
fn valid_for(given: Option<&str>) -> Result<Duration, ApiError> {
    let valid_for = match given {
        None => Duration::from_secs(24 * 3600),
        Some(s) => humantime::parse_duration(s)
            .map_err(|e| ApiError::bad_request(format!("validFor {s:?}: {e} (e.g. 24h)")))?,
    };
    if valid_for.is_zero() || valid_for > MAX_VALID_FOR {
        return Err(ApiError::bad_request(
            "validFor must be between 1s and 365d",
        ));
    }
    Ok(valid_for)
}

/// The URI SAN of an xDS client certificate bound to one dataplane. It is
/// issued by the cp-tls CA, never by a mesh CA, so it cannot pass for a
/// workload identity.
pub(crate) fn dataplane_client_uri(mesh: &str, name: &str) -> String {
    format!("{DATAPLANE_CLIENT_URI_PREFIX}{mesh}/{name}")
}

/// The URI SAN prefix of xDS client certificates; `<mesh>/<name>` follows.
pub(crate) const DATAPLANE_CLIENT_URI_PREFIX: &str = "spiffe://meshlink-cp.local/dataplane/";

/// The store kind that records every issued token id, so that revoking an
/// id that was never issued (a typo during an incident) is an error.
pub(crate) const ISSUED_TOKEN: &str = "internal.IssuedToken";

/// Records an issued token's id (no secret: the token itself is not kept).
async fn record_issued(
    store: &dyn meshlink_store::Store,
    claims: &meshlink_identity::TokenClaims,
) -> Result<(), ApiError> {
    let body = json!({
        "kind": claims.kind,
        "mesh": claims.mesh,
        "name": claims.name,
        "site": claims.site,
        "issuedAt": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        "expiresAt": humantime::format_rfc3339_seconds(claims.expires_at()).to_string(),
    });
    store
        .create(
            &ObjectKey::new(ISSUED_TOKEN, "", &claims.jti),
            &BTreeMap::new(),
            &body,
        )
        .await
        .map_err(|e| ApiError::from(ResourceError::from(e)))?;
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    id: String,
    #[serde(default)]
    reason: String,
    /// Revoke even if this control plane has no record of issuing the id
    /// (tokens issued before ids were recorded).
    #[serde(default)]
    force: bool,
}

/// Revokes a token by id.
pub(super) async fn revoke(
    State(st): State<ApiState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req: RevokeRequest = parse(body_json(body)?)?;
    if req.id.is_empty() || req.id.len() > 128 {
        return Err(ApiError::bad_request(
            "id must be a token id as printed by `meshlink token dataplane`",
        ));
    }
    let store = st.resources.store().as_ref();
    let issued = store
        .get(&ObjectKey::new(ISSUED_TOKEN, "", &req.id))
        .await
        .map_err(|e| ApiError::from(ResourceError::from(e)))?
        .is_some();
    let revoked = st.tokens.is_revoked(&req.id);
    if !issued && !revoked && !req.force {
        return Err(ApiError::not_found(format!(
            "no token with id {}; token ids are printed when a token is issued (`meshlink token dataplane` prints \"token <id> for dataplane ...\")",
            req.id
        )));
    }
    let newly = tokens::revoke(st.resources.store().as_ref(), &req.id, &req.reason)
        .await
        .map_err(|e| ApiError::from(ResourceError::BadRequest(e.to_string())))?;
    // Refuse the token here at once; the change feed ends its open streams
    // (on every control plane sharing the store).
    st.tokens.note_revoked(&req.id);
    Ok(Json(
        json!({ "id": req.id, "revoked": true, "alreadyRevoked": !newly }),
    ))
}

/// The public CA information of a mesh: enabled backend, fingerprints,
/// trust bundle and rotation phase. No private key.
pub(super) async fn mesh_ca(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    if kind_of(&plural)? != Kind::Mesh {
        return Err(ApiError::not_found("only meshes have a /ca endpoint"));
    }
    let mesh = st.resources.get(Kind::Mesh, None, &name).await?;
    let id = st
        .ca
        .load(&st.resources, &mesh)
        .await
        .map_err(|e| ApiError::new(axum::http::StatusCode::CONFLICT, "NoCA", e.to_string()))?;
    let rotation = id.rotation(st.ca.proxies_on_previous(&name).await.unwrap_or(0));
    Ok(Json(json!({
        "mesh": name,
        "backend": id.backend,
        "fingerprint": id.ca.fingerprint(),
        "notAfter": humantime::format_rfc3339_seconds(id.ca.not_after()).to_string(),
        "trustDomain": id.trust_domain,
        "trustBundle": rotation.bundle.roots_pem,
        "rotation": rotation.phase,
    })))
}
