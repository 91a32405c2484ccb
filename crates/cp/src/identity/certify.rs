//! The Certify RPC (`meshlink.v1.Certify`) on the xDS port.
//!
//! It issues a certificate only for an identity the caller's proxy token
//! allows (I4): the token names mesh, dataplane and services; the request
//! must match them; the CSR may not ask for anything else. Every rejection
//! has its own gRPC status and a message that says what to fix.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use meshlink_api::Kind;
use meshlink_identity::{CsrError, KeyedRateLimiter, SpiffeId, TokenError, inspect_csr};
use meshlink_runtime::MetricsRegistry;
use meshlink_xds::ads::Holder;
use meshlink_xds::certify::certify_server::Certify;
use meshlink_xds::certify::{CertifyRequest, CertifyResponse};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tonic::{Code, Request, Response, Status};

use super::CaHandle;
use super::issuance::{Delivery, Issuance, IssuanceHooks};
use super::mesh_ca::MeshCaError;
use super::tokens::{TokenService, TokenServiceError};
use crate::resources::{ResourceError, ResourceService};

/// The Certify service implementation.
pub struct CertifyService {
    resources: ResourceService,
    tokens: Arc<TokenService>,
    limiter: KeyedRateLimiter,
    requests: Family<ResultLabel, Counter>,
    /// Reads the CA state, reports issuances, and gives the shared clock.
    ca: CaHandle,
    hooks: IssuanceHooks,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

impl CertifyService {
    /// Builds the service and registers `meshlink_identity_certify_requests_total{result}`.
    /// `limiter` bounds requests per token id; `ca` reaches the mesh CA
    /// controller (Certify only reads the CA state and reports issuances).
    pub fn new(
        resources: ResourceService,
        tokens: Arc<TokenService>,
        limiter: KeyedRateLimiter,
        registry: &MetricsRegistry,
        ca: CaHandle,
    ) -> Self {
        let requests = Family::<ResultLabel, Counter>::default();
        registry.register_with("identity", |r| {
            r.register(
                "certify_requests",
                "Certify requests by result (issued, or the rejection's gRPC code)",
                requests.clone(),
            )
        });
        CertifyService {
            resources,
            tokens,
            limiter,
            requests,
            ca,
            hooks: IssuanceHooks::default(),
        }
    }

    /// Tells `hooks` about every certificate issued from now on (after it
    /// was recorded in the store, before the response goes out).
    pub fn with_hooks(mut self, hooks: IssuanceHooks) -> Self {
        self.hooks = hooks;
        self
    }

    fn record(&self, r: &Result<Response<CertifyResponse>, Status>) {
        let result = match r {
            Ok(_) => "issued",
            Err(s) => match s.code() {
                Code::Unauthenticated => "unauthenticated",
                Code::PermissionDenied => "permission_denied",
                Code::InvalidArgument => "invalid_argument",
                Code::ResourceExhausted => "rate_limited",
                Code::FailedPrecondition => "failed_precondition",
                _ => "unavailable",
            },
        };
        self.requests.get_or_create(&ResultLabel { result }).inc();
    }
}

/// Extracts `authorization: Bearer <token>` from a request's gRPC metadata.
pub fn bearer_token<T>(req: &Request<T>) -> Result<&str, Status> {
    bearer_from(req.metadata())
}

/// Extracts `authorization: Bearer <token>` from gRPC metadata.
pub fn bearer_from(metadata: &tonic::metadata::MetadataMap) -> Result<&str, Status> {
    let v = metadata.get("authorization").ok_or_else(|| {
        Status::unauthenticated(
            "missing proxy token: send gRPC metadata 'authorization: Bearer <token>' (create one with `meshlink token dataplane`)",
        )
    })?;
    v.to_str()
        .ok()
        .and_then(|s| s.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| Status::unauthenticated("authorization metadata must be 'Bearer <token>'"))
}

/// The gRPC status for a rejected proxy token.
pub(crate) fn token_status(e: TokenServiceError) -> Status {
    match e {
        TokenServiceError::Token(e @ TokenError::Expired { .. }) => Status::unauthenticated(
            format!("proxy token expired: {e}; issue a new one with `meshlink token dataplane`"),
        ),
        TokenServiceError::Token(e @ TokenError::Revoked { .. }) => {
            Status::unauthenticated(format!("proxy token revoked: {e}"))
        }
        TokenServiceError::Token(e) => Status::unauthenticated(format!("invalid proxy token: {e}")),
        TokenServiceError::Store(e) => {
            Status::unavailable(format!("control plane store unavailable: {e}"))
        }
    }
}

fn csr_status(e: CsrError) -> Status {
    match e {
        e @ CsrError::WrongKeyType { .. } => {
            Status::invalid_argument(format!("wrong CSR key type: {e}"))
        }
        e @ CsrError::BadSignature(_) => {
            Status::invalid_argument(format!("CSR signature does not verify: {e}"))
        }
        e => Status::invalid_argument(format!("malformed CSR: {e}")),
    }
}

#[tonic::async_trait]
impl Certify for CertifyService {
    async fn certify(
        &self,
        request: Request<CertifyRequest>,
    ) -> Result<Response<CertifyResponse>, Status> {
        let r = self.certify_inner(request).await;
        self.record(&r);
        r
    }
}

impl CertifyService {
    async fn certify_inner(
        &self,
        request: Request<CertifyRequest>,
    ) -> Result<Response<CertifyResponse>, Status> {
        let claims = self
            .tokens
            .verify(bearer_token(&request)?)
            .map_err(token_status)?;
        if let Err(retry) = self.limiter.check(&claims.jti) {
            return Err(Status::resource_exhausted(format!(
                "too many Certify requests for this token; retry in {:?}",
                retry.0
            )));
        }
        let peer = request.remote_addr();
        let req = request.into_inner();
        if req.mesh != claims.mesh {
            return Err(Status::permission_denied(format!(
                "the token is for mesh {:?}, not {:?} (meshlink-proxy: check --mesh)",
                claims.mesh, req.mesh
            )));
        }
        if req.dataplane != claims.name {
            return Err(Status::permission_denied(format!(
                "the token is for dataplane {:?}, not {:?} (meshlink-proxy: check --name)",
                claims.name, req.dataplane
            )));
        }
        let service = match (req.service.as_str(), claims.services.as_slice()) {
            ("", [only]) => only.clone(),
            ("", _) => {
                return Err(Status::invalid_argument(format!(
                    "name the service to certify; the token allows {:?}",
                    claims.services
                )));
            }
            (s, allowed) if allowed.iter().any(|a| a == s) => s.to_string(),
            (s, allowed) => {
                return Err(Status::permission_denied(format!(
                    "the token does not allow service {s:?} (allowed: {allowed:?})"
                )));
            }
        };
        let mesh = match self.resources.get(Kind::Mesh, None, &req.mesh).await {
            Ok(m) => m,
            Err(ResourceError::NotFound(_)) => {
                return Err(Status::failed_precondition(format!(
                    "mesh {:?} does not exist",
                    req.mesh
                )));
            }
            Err(e) => return Err(Status::unavailable(e.to_string())),
        };
        let identity = self
            .ca
            .load(&self.resources, &mesh)
            .await
            .map_err(|e| match e {
                e @ MeshCaError::MtlsDisabled(_) => Status::failed_precondition(e.to_string()),
                e @ MeshCaError::Invalid { .. } => Status::failed_precondition(e.to_string()),
                e @ (MeshCaError::Store(_) | MeshCaError::NotReady(_)) => {
                    Status::unavailable(e.to_string())
                }
            })?;
        let id = SpiffeId::new(&identity.trust_domain, &service)
            .map_err(|e| Status::invalid_argument(format!("service {service:?}: {e}")))?;
        let info = inspect_csr(&req.csr).map_err(csr_status)?;
        if let Some(other) = info.uri_sans.iter().find(|u| **u != id.to_string()) {
            return Err(Status::permission_denied(format!(
                "the CSR asks for {other}, but the token allows only {id}"
            )));
        }
        let issued_at = self.ca.now();
        let cert = identity
            .ca
            .issue_from_csr(&req.csr, &id, identity.lifetime, issued_at)
            .map_err(|e| Status::invalid_argument(format!("cannot issue: {e}")))?;
        // Rotation progress: an event to the controller, no store write here.
        self.ca.issued(&req.mesh, &req.dataplane, &cert);
        let bundle = identity.bundle().roots_pem;
        tracing::info!(mesh = %req.mesh, dataplane = %req.dataplane, spiffe_id = %cert.spiffe_id,
            serial = %cert.serial_hex, "issued workload certificate");
        self.hooks.issued(&Issuance {
            mesh: req.mesh.clone(),
            dataplane: req.dataplane.clone(),
            serial: cert.serial_hex.clone(),
            spiffe_id: cert.spiffe_id.clone(),
            ca_fingerprint: cert.ca_fingerprint.clone(),
            backend: identity.backend.clone(),
            issued_at,
            not_after: cert.not_after,
            delivery: Delivery::Certify,
            holder: Holder {
                instance: meshlink_proto::instance::sanitize(&req.instance),
                peer,
            },
        });
        let secs = |t: std::time::SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        };
        Ok(Response::new(CertifyResponse {
            certificate_pem: cert.cert_pem,
            chain_pem: cert.chain_pem,
            trust_bundle_pem: bundle,
            spiffe_id: cert.spiffe_id,
            serial: cert.serial_hex,
            not_before: secs(cert.not_before),
            not_after: secs(cert.not_after),
        }))
    }
}
