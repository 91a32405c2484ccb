//! The grant server's `POST /renew`: another site renews the link client
//! certificate this site issued to it (by a redemption), before it expires.
//!
//! The body is the current `tls.crt` followed by a PEM CSR signed with its
//! key. The certificate must come from one of this site's CAs (the Site's
//! default issuer or an AccessGrant's issuer), be valid now and be a
//! clientAuth leaf; the new certificate has the same key, subject, router
//! URI SAN and lifetime (`SiteCa::renew_client_cert`). No grant or code is
//! needed: holding the key of a valid certificate is the authorization, as
//! it already is for the link itself. Answers are plain text: 200 with the
//! new `tls.crt` PEM; 403 for a certificate this site did not issue; 400
//! for an expired certificate or a bad body; 404 without a Site.

use std::time::SystemTime;

use meshlink_api::Kind;
use meshlink_identity::RenewError;

use super::response::the_site;
use crate::resources::ResourceService;
use crate::site::ca_store;

/// The path of the renewal endpoint (a grant uid is a UUID, never this).
pub const RENEW_PATH: &str = "renew";

/// Why a renewal was refused.
#[derive(Debug, thiserror::Error)]
pub enum RenewRefused {
    /// No Site (so no site CA) on this control plane: 404.
    #[error("no Site on this control plane")]
    NoSite,
    /// Not issued by this site: 403.
    #[error("{0}")]
    Forbidden(String),
    /// A bad body or an unusable certificate: 400.
    #[error("{0}")]
    BadRequest(String),
    /// The store failed: 500.
    #[error("{0}")]
    Internal(String),
}

/// Renews the certificate in `body`; returns the new `tls.crt` PEM.
pub async fn renew(resources: &ResourceService, body: &[u8]) -> Result<String, RenewRefused> {
    let internal = |e: &dyn std::fmt::Display| RenewRefused::Internal(e.to_string());
    let text = std::str::from_utf8(body)
        .map_err(|_| RenewRefused::BadRequest("the body is not PEM text".into()))?;
    let site = the_site(resources)
        .await
        .map_err(|e| internal(&e))?
        .ok_or(RenewRefused::NoSite)?;
    let default_spec = meshlink_api::spec::SiteSpec::default();
    let site_spec = site.spec.as_site().unwrap_or(&default_spec);
    let mut issuers = vec![site_spec.default_issuer().to_owned()];
    for g in resources
        .list(Kind::AccessGrant, None, None)
        .await
        .map_err(|e| internal(&e))?
    {
        if let Some(i) = g.spec.as_access_grant().and_then(|s| s.issuer.clone())
            && !issuers.contains(&i)
        {
            issuers.push(i);
        }
    }
    let mut last = None;
    for issuer in &issuers {
        let Some(ca) = ca_store::existing_site_ca(resources.store().as_ref(), issuer)
            .await
            .map_err(|e| internal(&e))?
        else {
            continue;
        };
        match ca.renew_client_cert(text, body, SystemTime::now()) {
            Ok(cert) => {
                let mut pem = cert.cert_pem;
                pem.extend(cert.chain_pem.iter().map(String::as_str));
                tracing::info!(
                    issuer,
                    serial = cert.serial_hex,
                    "renewed a link client certificate"
                );
                return Ok(pem);
            }
            Err(e @ RenewError::NotIssuedHere { .. }) => last = Some(e),
            Err(e) => return Err(RenewRefused::BadRequest(e.to_string())),
        }
    }
    Err(RenewRefused::Forbidden(last.map_or_else(
        || "this site has no CA yet".to_owned(),
        |e| e.to_string(),
    )))
}
