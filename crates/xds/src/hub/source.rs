//! What the reconciler needs from the rest of the control plane: the mesh
//! as the store has it, and the mesh CA. Implemented by meshlink-cp over its
//! store; tests may implement it in memory.

use std::time::SystemTime;

use serde::Serialize;

use crate::owner::ProxyKey;
use crate::translate::MeshView;

/// Why a source call failed (store unavailable, CA unusable, ...). The
/// reconciler logs it and retries; it never ends a stream for it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// The mesh's trust material, when mTLS is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshTrust {
    /// Every root proxies must trust (during a CA rotation: old and new).
    pub bundle_pem: String,
    /// Fingerprint of the CA that issues now; an identity from another CA
    /// is re-issued.
    pub ca_fingerprint: String,
}

/// Public facts about an issued identity certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityInfo {
    /// Serial number, hex.
    pub serial: String,
    /// SPIFFE ID in the URI SAN.
    pub spiffe_id: String,
    /// Fingerprint of the issuing CA.
    pub ca_fingerprint: String,
    /// notBefore (serialized as RFC 3339, as every time in the API is).
    #[serde(with = "rfc3339")]
    pub not_before: SystemTime,
    /// notAfter (serialized as RFC 3339).
    #[serde(with = "rfc3339")]
    pub not_after: SystemTime,
}

/// An identity certificate with its key, for clients that take their key
/// over SDS (Envoy compatibility mode, DESIGN.md §6).
#[derive(Debug, Clone)]
pub struct IssuedIdentity {
    /// Leaf then intermediates, PEM.
    pub chain_pem: String,
    /// The private key, PEM. Never logged or reported.
    pub key_pem: String,
    /// Public facts.
    pub info: IdentityInfo,
}

/// The control plane as the reconciler sees it.
#[tonic::async_trait]
pub trait MeshSource: Send + Sync + 'static {
    /// The view of `mesh`, or `None` if the Mesh does not exist.
    async fn view(&self, mesh: &str) -> Result<Option<MeshView>, SourceError>;

    /// The trust material of `mesh`, or `None` if mTLS is off.
    async fn trust(&self, mesh: &str) -> Result<Option<MeshTrust>, SourceError>;

    /// Issues an identity certificate and key for `service` of proxy `key`,
    /// valid from `now`.
    async fn issue(
        &self,
        key: &ProxyKey,
        service: &str,
        now: SystemTime,
    ) -> Result<IssuedIdentity, SourceError>;
}

/// Serializes a `SystemTime` as RFC 3339 (UTC, whole seconds).
mod rfc3339 {
    use std::time::SystemTime;

    pub(super) fn serialize<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_seconds(*t))
    }
}
