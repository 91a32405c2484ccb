//! meshlink-link: the site-to-site link transport of router mode.
//!
//! A link is one TLS 1.3 mTLS connection between two routers
//! ([`credentials`]), multiplexed with yamux ([`mux`]) so that it carries
//! many flows both ways whichever side dialled. The dialer's first stream
//! is the control stream: hellos every second, link down after 3 s of
//! silence ([`session`]), and routing messages ([`wire`]). Every other
//! stream is a flow: a header (routing key, destination router, origin,
//! flow id), then raw bytes with half-close ([`flows`]). Dialled links
//! reconnect with jittered backoff; RouterAccess roles accept links; TCP
//! listeners turn connections into flows; connectors are the local
//! targets, probed while they refuse connections (`connector_health`;
//! [`Router::apply`] diffs a [`RouterConfig`]). The
//! [`mesh_ingress`] lets mesh sidecars open flows over mTLS.
//!
//! [`routing`] is the link-state routing (LSAs, shortest paths, routing
//! key destinations, the network view); it does no I/O. The transport
//! drives it over the links' control streams and asks it where each flow
//! goes.
//!
//! Owns the transport. It never talks to the control plane (the proxy
//! feeds it a `RouterConfig` and reads its `RouterStatus`).

mod accept;
pub mod config;
mod connection_end;
mod connector_health;
mod core;
mod cork;
mod counted;
pub mod credentials;
mod dial;
mod expiry;
pub mod flows;
pub mod identity;
mod link_state;
mod listener;
pub mod mesh_ingress;
pub mod metrics;
mod multikey;
pub mod mux;
pub mod peer_policy;
mod router;
pub mod routes;
pub mod routing;
pub mod session;
mod splice;
pub mod status;
mod traffic;
pub mod wire;

pub use config::{
    ConfigError, ConnectorConfig, ConnectorTarget, KeyStrategy, LinkConfig, ListenerConfig,
    MeshIngressConfig, MeshIngressKey, MeshIngressMesh, MultiKeyListenerConfig, RoleConfig,
    RouterConfig,
};
pub use credentials::{CredentialError, CredentialPem, LinkCredential};
pub use flows::{Flow, FlowError};
pub use metrics::LinkMetrics;
pub use router::{Router, RouterOptions};
pub use routes::{Destination, RouteTable};
pub use status::{BindStatus, Direction, LinkState, LinkStatus, RouterStatus, TargetFailure};
pub use traffic::{KeyTraffic, LinkTraffic};
