//! Who is on an ADS stream: a proxy token (a dataplane's, or a site
//! router's from `meshlink token router`), or a client certificate from
//! `meshlink token dataplane --cert-dir` (DESIGN.md §5 "xDS authentication").
//!
//! A token stream is bound to its token id, so revoking the token ends it;
//! a client-certificate stream is not bound to any token (its certificate
//! stays valid until it expires).

use std::sync::Arc;

use meshlink_xds::ads::{Authenticate, Credential};
use meshlink_xds::owner::ProxyKey;
use tonic::Status;
use tonic::metadata::MetadataMap;
use tonic::transport::CertificateDer;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::api::tokens::DATAPLANE_CLIENT_URI_PREFIX;
use crate::identity::certify::{bearer_from, token_status};
use crate::identity::tokens::TokenService;

/// Checks proxy tokens and client certificates.
pub(crate) struct ProxyAuth {
    pub(crate) tokens: Arc<TokenService>,
}

#[tonic::async_trait]
impl Authenticate for ProxyAuth {
    async fn authenticate(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<ProxyKey, Status> {
        self.credential(metadata, peer_certs).await.map(|c| c.key)
    }

    async fn credential(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<Credential, Status> {
        if metadata.get("authorization").is_some() {
            let token = bearer_from(metadata)?;
            let claims = self.tokens.verify_proxy(token).map_err(token_status)?;
            let key = if claims.is_router() {
                ProxyKey::router(claims.site)
            } else {
                ProxyKey::new(claims.mesh, claims.name)
            };
            return Ok(Credential {
                key,
                token_id: Some(claims.jti),
                peer: None,
            });
        }
        if let Some(leaf) = peer_certs.and_then(<[_]>::first) {
            return key_from_client_cert(leaf).map(Credential::untokened);
        }
        Err(Status::unauthenticated(
            "missing proxy credential: send gRPC metadata 'authorization: Bearer <token>' \
             (create one with `meshlink token dataplane`, or `meshlink token router` for a \
             site's router), or present the client certificate \
             written by `meshlink token dataplane --cert-dir DIR`",
        ))
    }
}

/// The proxy key in a client certificate's URI SAN. The TLS layer already
/// verified the chain against the control plane's own CA.
fn key_from_client_cert(der: &CertificateDer<'_>) -> Result<ProxyKey, Status> {
    let (_, cert) = X509Certificate::from_der(der.as_ref())
        .map_err(|e| Status::unauthenticated(format!("unreadable client certificate: {e}")))?;
    let uris = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::URI(u) => Some(u.to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    uris.iter()
        .find_map(|u| {
            let rest = u.strip_prefix(DATAPLANE_CLIENT_URI_PREFIX)?;
            let (mesh, name) = rest.split_once('/')?;
            (!mesh.is_empty() && !name.is_empty() && !name.contains('/'))
                .then(|| ProxyKey::new(mesh, name))
        })
        .ok_or_else(|| {
            Status::unauthenticated(format!(
                "the client certificate does not name a dataplane (URI SANs: {uris:?}); \
                 use the one `meshlink token dataplane --cert-dir DIR` writes"
            ))
        })
}
