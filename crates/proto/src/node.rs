//! The xDS `node.id` grammar, spelled once for both ends.
//!
//! - a dataplane (sidecar, Envoy, proxyless gRPC): `<mesh>.<dataplane name>`
//!   (mesh names contain no dot; the dataplane name may);
//! - a site's router: `site.<site name>` ([`ROUTER_NODE_PREFIX`]).
//!
//! It owns parsing and printing only; which id a credential may use is the
//! control plane's decision.

use std::fmt;
use std::str::FromStr;

/// The `node.id` prefix of a site router: `site.<site>`.
pub const ROUTER_NODE_PREFIX: &str = "site.";

/// A parsed `node.id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeId {
    /// A dataplane of a mesh.
    Dataplane {
        /// The mesh (no dot).
        mesh: String,
        /// The Dataplane's name.
        name: String,
    },
    /// A site's router.
    Router {
        /// The site's name.
        site: String,
    },
}

/// A `node.id` that fits neither form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node.id {given:?} is not \"<mesh>.<dataplane name>\" (a dataplane) or \"site.<site>\" \
     (a site's router)"
)]
pub struct NodeIdError {
    /// What was given.
    pub given: String,
}

// === impl NodeId ===

impl NodeId {
    /// The id of dataplane `name` in `mesh`.
    pub fn dataplane(mesh: impl Into<String>, name: impl Into<String>) -> Self {
        NodeId::Dataplane {
            mesh: mesh.into(),
            name: name.into(),
        }
    }

    /// The id of the router of `site`.
    pub fn router(site: impl Into<String>) -> Self {
        NodeId::Router { site: site.into() }
    }

    /// Whether `node_id` names a site's router (without parsing the rest).
    pub fn names_router(node_id: &str) -> bool {
        node_id.starts_with(ROUTER_NODE_PREFIX)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeId::Dataplane { mesh, name } => write!(f, "{mesh}.{name}"),
            NodeId::Router { site } => write!(f, "{ROUTER_NODE_PREFIX}{site}"),
        }
    }
}

impl FromStr for NodeId {
    type Err = NodeIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || NodeIdError {
            given: s.to_owned(),
        };
        if let Some(site) = s.strip_prefix(ROUTER_NODE_PREFIX) {
            return if site.is_empty() {
                Err(err())
            } else {
                Ok(NodeId::router(site))
            };
        }
        match s.split_once('.') {
            Some((mesh, name)) if !mesh.is_empty() && !name.is_empty() => {
                Ok(NodeId::dataplane(mesh, name))
            }
            _ => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_round_trip() {
        for (text, id) in [
            ("default.web-1", NodeId::dataplane("default", "web-1")),
            ("default.web.v2", NodeId::dataplane("default", "web.v2")),
            ("site.east", NodeId::router("east")),
        ] {
            assert_eq!(text.parse::<NodeId>().unwrap(), id);
            assert_eq!(id.to_string(), text);
        }
        assert!(NodeId::names_router("site.east"));
        assert!(!NodeId::names_router("default.web"));
    }

    #[test]
    fn malformed_ids_are_refused_with_both_forms_named() {
        for bad in ["", "web", ".web", "default.", "site."] {
            let e = bad.parse::<NodeId>().unwrap_err().to_string();
            assert!(
                e.contains("<mesh>.<dataplane name>") && e.contains("site.<site>"),
                "{e}"
            );
        }
    }
}
