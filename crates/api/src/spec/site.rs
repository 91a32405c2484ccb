//! The Site and RouterAccess kinds: this control plane's place in a
//! multi-site network, and the ports its router accepts links on.
//!
//! Owns their Skupper-compatible shapes, the Site status (the network as
//! seen from here), validation, and effective defaults. It never fills a
//! default into the stored spec.

use serde::{Deserialize, Serialize};

use super::Port;
use super::string_enum::string_enum;
use crate::validate::{self, Errors};

/// The issuer (site CA) used when a Site sets no `defaultIssuer`.
pub const DEFAULT_ISSUER: &str = "skupper-site-ca";
/// Default inter-router port.
pub const INTER_ROUTER_PORT: u16 = 55671;
/// Default edge port.
pub const EDGE_PORT: u16 = 45671;
/// Site label (a meshlink extension): `"true"` makes this site's router
/// refuse links whose client certificate names no router
/// (`urn:meshlink:router:<id>`); by default such peers are accepted as
/// `unbound`.
pub const REQUIRE_ROUTER_IDENTITY_LABEL: &str = "meshlink.dev/require-router-identity";

/// Checks a Site's meshlink labels: [`REQUIRE_ROUTER_IDENTITY_LABEL`] is
/// `"true"` or `"false"`.
pub(crate) fn validate_labels(
    labels: &std::collections::BTreeMap<String, String>,
    errs: &mut Errors,
) {
    if let Some(v) = labels.get(REQUIRE_ROUTER_IDENTITY_LABEL)
        && v != "true"
        && v != "false"
    {
        errs.add(
            format!("metadata.labels[{REQUIRE_ROUTER_IDENTITY_LABEL:?}]"),
            format!("{v:?} is not \"true\" or \"false\""),
        );
    }
}

/// Whether a Site with these labels requires router identity of its peers.
pub fn requires_router_identity(labels: &std::collections::BTreeMap<String, String>) -> bool {
    labels
        .get(REQUIRE_ROUTER_IDENTITY_LABEL)
        .is_some_and(|v| v == "true")
}

/// `spec` of a Site.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteSpec {
    /// An edge site only dials links; it accepts none (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<bool>,
    /// How remote sites reach this one (`default`, `none`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_access: Option<String>,
    /// The CA that signs RouterAccess and link certificates
    /// (default `skupper-site-ca`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_issuer: Option<String>,
}

/// Site status details: the network as this site sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteStatus {
    /// `Ready`, `Pending` or `Error`, as Skupper's `StatusType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A human-readable summary of the conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// This site's unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_id: Option<String>,
    /// Where other sites reach this one: one entry per RouterAccess role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
    /// How many sites are reachable from here, this one included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites_in_network: Option<u64>,
    /// Every site reachable from here, including this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetworkSite>,
    /// meshlink extension: `host:port` of the router's mesh ingress, where
    /// this site's mesh sidecars reach routing keys over mTLS (written from
    /// the router's report; unset while it is not bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_ingress: Option<String>,
    /// Links other sites dialled into this one (a meshlink extension), one
    /// per peer site: `Operational` while a link from it is up, `Down`
    /// (kept, with since when) once it is gone or this site's router stops
    /// reporting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incoming_links: Vec<IncomingLink>,
}

/// A link another site dialled into this one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncomingLink {
    /// The dialling site's name.
    pub remote_site_name: String,
    /// The dialling site's id, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_site_id: Option<String>,
    /// The router's name for the connection (`<role>/<peer>#<n>`).
    pub name: String,
    /// `Operational` or `Down`, the words Links use.
    pub status: String,
    /// `OK`, or why it is down and since when.
    pub message: String,
}

/// One endpoint in Site and RouterAccess status: where a role is reached.
/// The port is a string, as Skupper writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoint {
    /// The role: `inter-router` or `edge`.
    pub name: String,
    /// The advertised host.
    pub host: String,
    /// The port, e.g. `"55671"`.
    pub port: String,
    /// The router group (the RouterAccess's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// RouterAccess status details: the endpoints it publishes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouterAccessStatus {
    /// `Ready`, `Pending` or `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A human-readable summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One entry per role, with the advertised host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
}

/// One site in [`SiteStatus::network`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkSite {
    /// The site's name.
    pub name: String,
    /// The site's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The site's namespace (Kubernetes sites; empty here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Where the site runs (`meshlink` for meshlink sites).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// The site's router version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Links from that site.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<NetworkLink>,
    /// Routing keys the site has Connectors or Listeners for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<NetworkService>,
}

/// One routing key in [`NetworkSite::services`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkService {
    /// The routing key.
    pub routing_key: String,
    /// The site's Connectors for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connectors: Vec<String>,
    /// The site's Listeners for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<String>,
}

/// One link in [`NetworkSite::links`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkLink {
    /// The link's name.
    pub name: String,
    /// The site on the other end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_site_name: Option<String>,
    /// Its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_site_id: Option<String>,
    /// Whether the link is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operational: Option<bool>,
}

// === impl SiteSpec ===

impl SiteSpec {
    /// Whether this is an edge site (`edge`, default false).
    pub fn is_edge(&self) -> bool {
        self.edge.unwrap_or(false)
    }

    /// The effective issuer: `defaultIssuer`, else [`DEFAULT_ISSUER`].
    pub fn default_issuer(&self) -> &str {
        self.default_issuer.as_deref().unwrap_or(DEFAULT_ISSUER)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(la) = &self.link_access {
            validate::required(errs, "spec.linkAccess", la);
            if self.is_edge() && la != "none" {
                errs.add(
                    "spec.linkAccess",
                    "an edge site accepts no links; remove linkAccess or set edge: false",
                );
            }
        }
        if let Some(issuer) = &self.default_issuer {
            validate::dns_name(errs, "spec.defaultIssuer", issuer);
        }
    }
}

string_enum! {
    /// What a RouterAccess port is for.
    pub enum RouterRoleName ("router role") {
        /// Links between interior routers (port 55671 by convention).
        InterRouter = "inter-router",
        /// Links from edge sites (port 45671 by convention).
        Edge = "edge",
    }
}

/// `spec` of a RouterAccess.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouterAccessSpec {
    /// The ports to open, one per role; at least one.
    #[serde(default)]
    pub roles: Vec<RouterRole>,
    /// The CA that signs the server certificate (default: the Site's issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Name of the server credentials (default: the RouterAccess's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_credentials: Option<String>,
    /// Whether the control plane generates the credentials (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_tls_credentials: Option<bool>,
    /// How the ports are exposed (`local`, `loadbalancer`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_type: Option<String>,
    /// Address to bind (default: all addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_host: Option<String>,
    /// Extra names for the server certificate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_alternative_names: Vec<String>,
}

/// One entry of `spec.roles`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouterRole {
    /// `inter-router` or `edge`.
    pub name: RouterRoleName,
    /// The port to listen on.
    pub port: Port,
}

// === impl RouterAccessSpec ===

impl RouterAccessSpec {
    /// The port for `role`, if configured. Exact once the resource is
    /// validated (see [`Port::get`]).
    pub fn port(&self, role: RouterRoleName) -> Option<u16> {
        self.roles
            .iter()
            .find(|r| r.name == role)
            .map(|r| r.port.get())
    }

    /// The effective credentials name: `tlsCredentials`, else `resource_name`.
    pub fn tls_credentials<'a>(&'a self, resource_name: &'a str) -> &'a str {
        self.tls_credentials.as_deref().unwrap_or(resource_name)
    }

    /// The effective issuer: `issuer`, else the Site's default issuer.
    pub fn issuer<'a>(&'a self, site: &'a SiteSpec) -> &'a str {
        self.issuer.as_deref().unwrap_or(site.default_issuer())
    }

    /// Whether the control plane generates credentials (default false).
    pub fn generates_tls_credentials(&self) -> bool {
        self.generate_tls_credentials.unwrap_or(false)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if self.roles.is_empty() {
            errs.add(
                "spec.roles",
                "at least one role is required, e.g. [{name: inter-router, port: 55671}]",
            );
        }
        for (i, role) in self.roles.iter().enumerate() {
            let earlier = &self.roles[..i];
            let at = format!("spec.roles[{i}]");
            if role.name.validate(errs, &format!("{at}.name"))
                && let Some(j) = earlier.iter().position(|r| r.name == role.name)
            {
                errs.add(
                    format!("{at}.name"),
                    format!("duplicate role {} (also roles[{j}])", role.name),
                );
            }
            if role.port.validate(errs, &format!("{at}.port"))
                && let Some(j) = earlier.iter().position(|r| r.port == role.port)
            {
                errs.add(
                    format!("{at}.port"),
                    format!("port {} is already used by roles[{j}]", role.port),
                );
            }
        }
        for (field, v) in [
            ("issuer", &self.issuer),
            ("tlsCredentials", &self.tls_credentials),
        ] {
            if let Some(v) = v {
                validate::dns_name(errs, &format!("spec.{field}"), v);
            }
        }
        if let Some(v) = &self.access_type {
            validate::required(errs, "spec.accessType", v);
        }
        if let Some(h) = &self.bind_host {
            validate::host(errs, "spec.bindHost", h);
        }
        for (i, san) in self.subject_alternative_names.iter().enumerate() {
            let name = san.strip_prefix("*.").unwrap_or(san);
            validate::host(errs, &format!("spec.subjectAlternativeNames[{i}]"), name);
        }
    }
}
