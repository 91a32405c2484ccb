//! The router's observable state: links (dialled and accepted), bound
//! roles and listeners, connector targets that refuse connections, and
//! the route table, published on one `watch` channel for status
//! reporting, `/ready` and tests.
//!
//! Owns the status types. Only the router's own tasks write them.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

/// Whether a link is carrying traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LinkState {
    /// Waiting for something it needs (e.g. its credential); not dialled.
    Warming,
    /// Dialling or handshaking.
    Connecting,
    /// Hellos flow both ways.
    Up,
    /// Not connected; `last_error` says why. A dialled link retries.
    Down,
}

/// Whether a link was dialled by this router or accepted on a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    /// This router dialled it (a Link).
    Dialled,
    /// A peer dialled this router's role port.
    Accepted,
}

/// The state of one link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkStatus {
    /// Dialled or accepted.
    pub direction: Direction,
    /// Current state.
    pub state: LinkState,
    /// The peer's router id, once its hello arrived.
    pub peer: Option<String>,
    /// The peer's site name, once its hello arrived.
    pub peer_site: Option<String>,
    /// Serial (hex) of the certificate the peer presented.
    pub peer_certificate_serial: Option<String>,
    /// Path cost.
    pub cost: u32,
    /// Why the link is not up (or why it last went down).
    pub last_error: Option<String>,
    /// How many times this link has been re-established after going down.
    pub reconnects: u64,
    /// Identifies the connection; changes with every new connection.
    pub connection: u64,
    /// The owner of this entry (a link's configuration, or an accepted
    /// connection); a newer owner replaces an older one's entry and an
    /// owner removes only its own.
    pub generation: u64,
}

impl LinkStatus {
    /// A fresh entry: warming, no peer yet.
    pub fn new(direction: Direction, cost: u32) -> Self {
        LinkStatus {
            direction,
            state: LinkState::Warming,
            peer: None,
            peer_site: None,
            peer_certificate_serial: None,
            cost,
            last_error: None,
            reconnects: 0,
            connection: 0,
            generation: 0,
        }
    }
}

/// A role or listener socket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BindStatus {
    /// Not bound yet, and why (a missing credential, a bind error).
    Warming(String),
    /// Bound and accepting at this address.
    Bound(SocketAddr),
}

impl BindStatus {
    /// The bound address, if any.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            BindStatus::Bound(a) => Some(*a),
            BindStatus::Warming(_) => None,
        }
    }
}

/// Everything the router shows about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouterStatus {
    /// Links by name: a Link's name when dialled, `<role>/<peer>#<n>`
    /// when accepted.
    pub links: BTreeMap<String, LinkStatus>,
    /// Roles by name.
    pub roles: BTreeMap<String, BindStatus>,
    /// Listeners by name.
    pub listeners: BTreeMap<String, BindStatus>,
    /// Credentials refused by validation, by name, with the reason; the
    /// last good version (if any) stays in use.
    pub credential_errors: BTreeMap<String, String>,
    /// Connector targets the router cannot connect to: connector name →
    /// target (`host:port`) → the failure. An entry lasts from a failed
    /// connection (a flow's or a probe's, `connector_health`)
    /// until one succeeds; connectors without failures are absent.
    pub connector_failures: BTreeMap<String, BTreeMap<String, TargetFailure>>,
    /// Connector targets configured but not tried yet: connector name →
    /// targets (`host:port`). A target enters when a configuration adds
    /// it and leaves at its first connection's outcome (a flow's or the
    /// probe's), so a Connector is not called reachable before anything
    /// tried its target.
    pub connectors_probing: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// A connector target that did not accept the router's last connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetFailure {
    /// Why the last attempt failed: the OS error (e.g. `Connection
    /// refused (os error 111)`), a name that does not resolve, or no
    /// answer within the connect timeout.
    pub error: String,
    /// When the first attempt of this run of failures failed (unix
    /// seconds); kept while it keeps failing.
    pub since_unix_secs: u64,
}

impl RouterStatus {
    /// The links to `peer` that are up.
    pub fn up_links_to(&self, peer: &str) -> usize {
        self.links
            .values()
            .filter(|l| l.state == LinkState::Up && l.peer.as_deref() == Some(peer))
            .count()
    }
}
