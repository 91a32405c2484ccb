//! The routing messages routers exchange: who a router is ([`RouterInfo`],
//! carried in the [`Hello`]) and what it floods ([`Lsa`]).
//!
//! Owns the serde shapes and their validation. Every message carries a
//! `v` field ([`PROTOCOL_VERSION`]): fields may be added without changing
//! it (unknown fields are ignored on input), an incompatible change bumps
//! it, and a router refuses a version it does not speak with an error
//! that names both. It never decides what a message means for routing;
//! that is [`super::lsdb`]'s job.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::LsaError;

/// The routing protocol version this build speaks (the `v` field).
pub const PROTOCOL_VERSION: u16 = 1;

/// Longest accepted router id, routing key or name, in bytes.
pub const MAX_NAME_LEN: usize = 253;

/// A router's identity in the network: its site's id (a uuid, unique per
/// site, stable across restarts).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RouterId(pub String);

impl RouterId {
    /// A router id from a site id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RouterId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl From<String> for RouterId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

/// Who a router is: its id, its site's name (for display) and whether it
/// is an edge router (one that never carries transit traffic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouterInfo {
    /// The site id.
    pub id: RouterId,
    /// The site name, for status and logs.
    pub name: String,
    /// An edge router: links only to interior routers, never transit.
    #[serde(default)]
    pub edge: bool,
}

/// The version of a router's LSA: `incarnation` first, then `seq`.
///
/// A router picks a new, larger incarnation each time it starts (the
/// transport uses the boot time in milliseconds since the Unix epoch), so
/// its sequence numbers may start again at 1 and its LSAs still win over
/// those of its previous life. Should a clock step back, the router sees
/// its old LSA flooded back to it and re-originates above it
/// ([`super::LinkStateRouter::receive`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Version {
    /// Chosen at start; larger in each new life of the router.
    pub incarnation: u64,
    /// Bumped each time the router re-originates its LSA.
    pub seq: u64,
}

/// A link-state advertisement: everything a router tells the network
/// about itself. The newest one per origin wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lsa {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub v: u16,
    /// The router that originated it.
    pub origin: RouterInfo,
    /// Its version; larger is newer.
    pub version: Version,
    /// The origin's operational links.
    #[serde(default)]
    pub links: Vec<LinkAdvert>,
    /// Routing keys the origin has connectors or listeners for.
    #[serde(default)]
    pub services: Vec<ServiceAdvert>,
}

/// Whether the advertising router dialled the link or accepted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LinkDirection {
    /// This router dialled it (it has the Link resource).
    Outgoing,
    /// The peer dialled it (this router accepted it on a RouterAccess role).
    Incoming,
}

/// One operational link in an [`Lsa`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkAdvert {
    /// The link's name (the Link resource's name on the dialling side).
    pub name: String,
    /// The router at the other end, as its hello said.
    pub peer: RouterId,
    /// The peer's site name, for display.
    #[serde(default)]
    pub peer_name: String,
    /// The cost this end gives the link (at least 1). The link's cost is
    /// the larger of the two ends' costs.
    pub cost: u32,
    /// Who dialled.
    pub direction: LinkDirection,
}

/// A routing key in an [`Lsa`]: the origin's connectors (flows to the key
/// may end there) and listeners (flows to the key may start there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAdvert {
    /// The routing key.
    pub routing_key: String,
    /// The origin's connectors for the key, by name; their number is the
    /// origin's weight when flows are balanced over equal-cost routers.
    #[serde(default)]
    pub connectors: Vec<String>,
    /// The origin's listeners for the key, by name (for status only).
    #[serde(default)]
    pub listeners: Vec<String>,
}

/// What a router says first on a link's control stream: who it is. The
/// receiver checks it with [`super::LinkStateRouter::check_neighbour`]
/// before it adds the link to its LSA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub v: u16,
    /// The sender.
    pub router: RouterInfo,
    /// The sender's current incarnation ([`Version::incarnation`]).
    pub incarnation: u64,
}

// === impl Hello ===

impl Hello {
    /// The hello `router` sends in its current incarnation.
    pub fn new(router: RouterInfo, incarnation: u64) -> Self {
        Self {
            v: PROTOCOL_VERSION,
            router,
            incarnation,
        }
    }

    /// Checks the version and the sender's identity.
    pub fn validate(&self) -> Result<(), LsaError> {
        check_version(self.v)?;
        self.router.validate()
    }
}

// === impl RouterInfo ===

impl RouterInfo {
    /// A router's identity.
    pub fn new(id: impl Into<String>, name: impl Into<String>, edge: bool) -> Self {
        Self {
            id: RouterId::new(id),
            name: name.into(),
            edge,
        }
    }

    /// Checks the id and the name.
    pub fn validate(&self) -> Result<(), LsaError> {
        check_name("router id", &self.id.0)?;
        check_name("router name", &self.name)
    }
}

// === impl Lsa ===

impl Lsa {
    /// Checks everything a receiver relies on; the error names the field
    /// and the origin.
    pub fn validate(&self) -> Result<(), LsaError> {
        check_version(self.v)?;
        self.origin.validate()?;
        let origin = &self.origin.id;
        let mut peers = BTreeSet::new();
        for (i, link) in self.links.iter().enumerate() {
            let at = |reason: String| LsaError::Field {
                origin: origin.clone(),
                field: format!("links[{i}]"),
                reason,
            };
            check_name("link name", &link.name).map_err(|e| at(e.to_string()))?;
            check_name("peer id", &link.peer.0).map_err(|e| at(e.to_string()))?;
            if &link.peer == origin {
                return Err(at("a router cannot link to itself".into()));
            }
            if link.cost == 0 {
                return Err(at("cost 0 is not allowed; link costs start at 1".into()));
            }
            if !peers.insert(&link.peer) {
                return Err(at(format!(
                    "a second link to {}; advertise one link per peer with the lowest cost",
                    link.peer
                )));
            }
        }
        let mut keys = BTreeSet::new();
        for (i, service) in self.services.iter().enumerate() {
            let at = |reason: String| LsaError::Field {
                origin: origin.clone(),
                field: format!("services[{i}]"),
                reason,
            };
            check_name("routing key", &service.routing_key).map_err(|e| at(e.to_string()))?;
            if !keys.insert(&service.routing_key) {
                return Err(at(format!(
                    "routing key {:?} appears twice; merge its connectors and listeners",
                    service.routing_key
                )));
            }
        }
        Ok(())
    }

    /// The cost this LSA's origin gives its link to `peer`, if it has one.
    pub(crate) fn cost_to(&self, peer: &RouterId) -> Option<u32> {
        self.links.iter().find(|l| &l.peer == peer).map(|l| l.cost)
    }
}

fn check_version(v: u16) -> Result<(), LsaError> {
    if v == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(LsaError::UnsupportedVersion {
            got: v,
            speaks: PROTOCOL_VERSION,
        })
    }
}

fn check_name(what: &'static str, value: &str) -> Result<(), LsaError> {
    if value.is_empty() {
        return Err(LsaError::Name {
            what,
            reason: "must not be empty".into(),
        });
    }
    if value.len() > MAX_NAME_LEN {
        return Err(LsaError::Name {
            what,
            reason: format!(
                "is {} bytes; at most {MAX_NAME_LEN} are allowed",
                value.len()
            ),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(LsaError::Name {
            what,
            reason: "contains a control character".into(),
        });
    }
    Ok(())
}
