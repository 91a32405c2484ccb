//! What a redemption (or `meshlink link generate`) hands to another site:
//! a YAML stream of one `v1` Secret (a client certificate from the site CA)
//! followed by one `skupper.io/v2alpha1` Link per endpoint group.
//!
//! Owns the shape of that stream, so the grant server and `link generate`
//! produce the same documents and `meshlink apply -f -` on the other site
//! takes them unchanged. It issues a certificate but writes nothing.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_api::spec::{Endpoint, RouterAccessSpec, SiteSpec};
use meshlink_api::{Kind, Resource};
use serde_json::{Value, json};

use crate::resources::ResourceService;
use crate::site::ca_store;

/// How long a link client certificate issued to another site is valid by
/// default (the longest the grant label may ask for). A meshlink site
/// renews it at `POST /renew` at half its life.
pub const LINK_CERT_LIFETIME: Duration = meshlink_api::spec::MAX_LINK_CERT_LIFETIME;
pub use meshlink_api::spec::{LINK_CERT_LIFETIME_LABEL, MIN_LINK_CERT_LIFETIME};

/// The lifetime a grant's label asks for: between
/// [`MIN_LINK_CERT_LIFETIME`] and [`LINK_CERT_LIFETIME`]; missing: the
/// default. Validation refuses other values at apply time; one stored
/// before that check gets the default (with a warning naming the label).
pub fn link_cert_lifetime(grant: &Resource) -> Duration {
    let Some(v) = grant.labels().get(LINK_CERT_LIFETIME_LABEL) else {
        return LINK_CERT_LIFETIME;
    };
    match humantime::parse_duration(v) {
        Ok(d) => d.clamp(MIN_LINK_CERT_LIFETIME, LINK_CERT_LIFETIME),
        Err(e) => {
            tracing::warn!(
                grant = grant.name(),
                label = LINK_CERT_LIFETIME_LABEL,
                value = %v,
                error = %e,
                "not a duration (e.g. 720h); issuing with the default lifetime of one year"
            );
            LINK_CERT_LIFETIME
        }
    }
}

/// Where the certificates this site issues are renewed: its grant server's
/// `POST /renew` and the CA that verifies that server. Written into every
/// link Secret (data keys `renew-url` and `renew-ca.crt`), so whoever
/// applies it, by a token, `curl` or `meshlink link generate`, can renew it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewAt {
    /// `https://<advertised host>:<grant port>/renew`.
    pub url: String,
    /// The grant server CA's PEM.
    pub ca_pem: String,
}

/// Why the documents could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LinkDocsError {
    /// Something this site lacks (no Site, edge site, no RouterAccess, no CA).
    #[error("{0}")]
    NotReady(String),
    /// The store or certificate issuance failed.
    #[error("{0}")]
    Internal(String),
}

/// The endpoints one RouterAccess publishes: one per role, at `host`,
/// grouped under the RouterAccess's name.
pub fn endpoints_of(name: &str, ra: &RouterAccessSpec, host: &str) -> Vec<Endpoint> {
    ra.roles
        .iter()
        .map(|role| Endpoint {
            name: role.name.to_string(),
            host: host.to_owned(),
            port: role.port.get().to_string(),
            group: Some(name.to_owned()),
        })
        .collect()
}

/// The one Site of this control plane (the first by name), if any.
pub async fn the_site(resources: &ResourceService) -> Result<Option<Resource>, LinkDocsError> {
    let mut sites = resources
        .list(Kind::Site, None, None)
        .await
        .map_err(|e| LinkDocsError::Internal(e.to_string()))?;
    sites.sort_by(|a, b| a.name().cmp(b.name()));
    Ok(sites.into_iter().next())
}

/// Builds the Secret + Links stream. `name` names the Secret (and the Link
/// when there is one group); `subject` is the client certificate's CN;
/// `issuer` overrides the Site's default issuer; `router_id` (the other
/// site's id, when it said) is named in the certificate as
/// `urn:meshlink:router:<id>`, binding the router id its router may claim;
/// `lifetime` is the client certificate's; `renew_at`, where it is renewed.
#[allow(clippy::too_many_arguments)]
pub async fn link_documents(
    resources: &ResourceService,
    advertised_host: &str,
    name: &str,
    subject: &str,
    issuer: Option<&str>,
    router_id: Option<&str>,
    lifetime: Duration,
    renew_at: &RenewAt,
) -> Result<String, LinkDocsError> {
    let internal = |e: &dyn std::fmt::Display| LinkDocsError::Internal(e.to_string());
    let site = the_site(resources).await?.ok_or_else(|| {
        LinkDocsError::NotReady("no Site in this control plane; apply a Site".into())
    })?;
    let default_spec = SiteSpec::default();
    let site_spec = site.spec.as_site().unwrap_or(&default_spec);
    if site_spec.is_edge() {
        return Err(LinkDocsError::NotReady(format!(
            "site {:?} is an edge site: it accepts no links, so it cannot issue grants or link credentials",
            site.name()
        )));
    }
    let mut ras = resources
        .list(Kind::RouterAccess, None, None)
        .await
        .map_err(|e| internal(&e))?;
    ras.sort_by(|a, b| a.name().cmp(b.name()));
    let groups: Vec<(String, Vec<Endpoint>, String)> = ras
        .iter()
        .filter_map(|r| {
            let spec = r.spec.as_router_access()?;
            let eps = endpoints_of(r.name(), spec, advertised_host);
            (!eps.is_empty()).then(|| (r.name().to_owned(), eps, spec.issuer(site_spec).to_owned()))
        })
        .collect();
    let Some((_, _, server_issuer)) = groups.first() else {
        return Err(LinkDocsError::NotReady(format!(
            "site {:?} has no RouterAccess, so it accepts no links; set linkAccess: default on the Site or apply a RouterAccess",
            site.name()
        )));
    };
    let store = resources.store().as_ref();
    let client_issuer = issuer.unwrap_or(site_spec.default_issuer());
    let missing = |n: &str| LinkDocsError::NotReady(format!("site CA {n:?} does not exist yet"));
    let client_ca = ca_store::existing_site_ca(store, client_issuer)
        .await
        .map_err(|e| internal(&e))?
        .ok_or_else(|| missing(client_issuer))?;
    let server_ca = ca_store::existing_site_ca(store, server_issuer)
        .await
        .map_err(|e| internal(&e))?
        .ok_or_else(|| missing(server_issuer))?;
    let (cert, key) = client_ca
        .issue_router_client_cert(subject, router_id, lifetime, SystemTime::now())
        .map_err(|e| LinkDocsError::NotReady(format!("subject {subject:?}: {e}")))?;
    let mut chain = cert.cert_pem.clone();
    for c in &cert.chain_pem {
        chain.push_str(c);
    }
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": STANDARD.encode(&chain),
            "tls.key": STANDARD.encode(&key),
            "ca.crt": STANDARD.encode(server_ca.cert_pem()),
            (crate::site::renewal::RENEW_URL): STANDARD.encode(&renew_at.url),
            (crate::site::renewal::RENEW_CA): STANDARD.encode(&renew_at.ca_pem),
        },
    });
    let mut docs = vec![secret];
    let several = groups.len() > 1;
    for (group, endpoints, _) in &groups {
        let link_name = if several {
            format!("{name}-{group}")
        } else {
            name.to_owned()
        };
        docs.push(json!({
            "apiVersion": "skupper.io/v2alpha1",
            "kind": "Link",
            "metadata": {"name": link_name},
            "spec": {
                "endpoints": endpoints,
                "tlsCredentials": name,
                "cost": 1,
            },
        }));
    }
    Ok(yaml_stream(&docs))
}

/// Documents as one YAML stream separated by `---`.
pub fn yaml_stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_yaml_ng::to_string(d).expect("JSON values serialize to YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}
