//! The Link kind: a link from this site's router to another site.
//!
//! Owns the Link spec (Skupper-compatible endpoints), its status details and
//! validation. Ports are integers here even though Skupper writes them as
//! strings; the Skupper importer converts them.

use serde::{Deserialize, Serialize};

use super::Port;
use crate::validate::{self, Errors};

/// `spec` of a Link.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    /// Where the remote router accepts links, one per role; at least one.
    #[serde(default)]
    pub endpoints: Vec<LinkEndpoint>,
    /// Name of the client credentials to present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_credentials: Option<String>,
    /// Path cost through this link (default 1; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<i64>,
}

/// One entry of `spec.endpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkEndpoint {
    /// The role served there: `inter-router` or `edge`.
    pub name: String,
    /// Remote host (IP or hostname).
    pub host: String,
    /// Remote port.
    pub port: Port,
    /// Router group, for sites with several routers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// Status details of a Link.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkStatus {
    /// `Operational` or `Down`: the one word the CLI, the API and the
    /// console use for a link's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `OK (remote site …)`, or why the link is down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Id of the site on the other end: while connected, else the last one
    /// seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_site_id: Option<String>,
    /// Name of the site on the other end: while connected, else the last
    /// one seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_site_name: Option<String>,
}

// === impl LinkSpec ===

impl LinkSpec {
    /// Effective cost (default 1).
    pub fn cost(&self) -> u64 {
        self.cost.map_or(1, |c| c.max(1) as u64)
    }

    /// The endpoint for a role name (`inter-router`, `edge`).
    pub fn endpoint(&self, role: &str) -> Option<&LinkEndpoint> {
        self.endpoints.iter().find(|e| e.name == role)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if self.endpoints.is_empty() {
            errs.add(
                "spec.endpoints",
                "at least one endpoint is required, e.g. [{name: inter-router, host: ..., port: 55671}]",
            );
        }
        for (i, ep) in self.endpoints.iter().enumerate() {
            let at = format!("spec.endpoints[{i}]");
            if validate::required(errs, &format!("{at}.name"), &ep.name)
                && let Some(j) = self.endpoints[..i].iter().position(|e| e.name == ep.name)
            {
                errs.add(
                    format!("{at}.name"),
                    format!("duplicate endpoint {:?} (also endpoints[{j}])", ep.name),
                );
            }
            validate::host(errs, &format!("{at}.host"), &ep.host);
            ep.port.validate(errs, &format!("{at}.port"));
            if let Some(g) = &ep.group {
                validate::required(errs, &format!("{at}.group"), g);
            }
        }
        if let Some(t) = &self.tls_credentials {
            validate::dns_name(errs, "spec.tlsCredentials", t);
        }
        if let Some(c) = self.cost {
            validate::at_least(errs, "spec.cost", c, 1);
        }
    }
}
