//! The link transport's Prometheus metrics, registered under `link` in the
//! process registry: `meshlink_link_up{link}`,
//! `meshlink_link_flows_opened_total{routing_key}`,
//! `meshlink_link_flows_active{routing_key}`,
//! `meshlink_link_flow_bytes_total{routing_key,direction}`,
//! `meshlink_link_reconnects_total{link}`,
//! `meshlink_link_route_changes_total`,
//! `meshlink_link_peer_identity_total{result}` (a peer's claimed router id
//! `bound` to its certificate, `unbound`, or `refused`) and
//! `meshlink_link_credential_expiration_timestamp_seconds{credential}`.
//!
//! Owns the metric families; never decides when to count.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels naming a link.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LinkLabels {
    /// The link's name.
    pub link: String,
}

/// Labels naming a routing key.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabels {
    /// The flow's routing key.
    pub routing_key: String,
}

/// Labels for flow bytes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BytesLabels {
    /// The flow's routing key.
    pub routing_key: String,
    /// `to_connector` (client to server) or `to_listener` (server to
    /// client), counted once at the router whose listener accepted it.
    pub direction: &'static str,
}

/// Labels for the peer identity outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IdentityLabels {
    /// `bound`, `unbound` or `refused`.
    pub result: &'static str,
}

/// Labels naming a credential (the Secret's name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CredentialLabels {
    /// The credential's name.
    pub credential: String,
}

/// The link transport's metrics.
#[derive(Debug, Default)]
pub struct LinkMetrics {
    /// 1 while a link is up, 0 otherwise.
    pub up: Family<LinkLabels, Gauge>,
    /// Flows opened by this router's listeners.
    pub flows_opened: Family<KeyLabels, Counter>,
    /// Flows open now at this router's listeners.
    pub flows_active: Family<KeyLabels, Gauge>,
    /// Bytes carried by flows, by direction.
    pub flow_bytes: Family<BytesLabels, Counter>,
    /// Times a dialled link was re-established after going down.
    pub reconnects: Family<LinkLabels, Counter>,
    /// Times the route table changed.
    pub route_changes: Counter,
    /// Peers whose claimed router id was checked against their certificate.
    pub peer_identity: Family<IdentityLabels, Counter>,
    /// notAfter of each credential in use (unix seconds).
    pub credential_expiry: Family<CredentialLabels, Gauge>,
    /// Connections the mesh ingress refused, by reason.
    pub mesh_ingress_refused: Family<ReasonLabels, Counter>,
}

/// Why the mesh ingress refused a connection.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// `not_tls`, `unknown_sni`, `handshake`, `not_authorized` or
    /// `no_flow`.
    pub reason: &'static str,
}

impl LinkMetrics {
    /// Registers the families in `registry` (use a `link` sub-registry).
    pub fn register(&self, registry: &mut Registry) {
        registry.register("up", "1 while the link is up", self.up.clone());
        registry.register(
            "flows_opened",
            "Flows opened by this router's listeners",
            self.flows_opened.clone(),
        );
        registry.register(
            "flows_active",
            "Flows open now at this router's listeners",
            self.flows_active.clone(),
        );
        registry.register(
            "flow_bytes",
            "Bytes carried by flows that this router's listeners accepted",
            self.flow_bytes.clone(),
        );
        registry.register(
            "reconnects",
            "Times a dialled link was re-established after going down",
            self.reconnects.clone(),
        );
        registry.register(
            "route_changes",
            "Times the route table changed",
            self.route_changes.clone(),
        );
        registry.register(
            "peer_identity",
            "Peers whose claimed router id was bound to their certificate, unbound (the certificate names no router) or refused",
            self.peer_identity.clone(),
        );
        registry.register(
            "credential_expiration_timestamp_seconds",
            "notAfter of each link credential in use, unix seconds",
            self.credential_expiry.clone(),
        );
        registry.register(
            "mesh_ingress_refused",
            "Connections the mesh ingress refused: not TLS, unknown SNI, failed mTLS handshake, identity not allowed for the routing key, or no flow",
            self.mesh_ingress_refused.clone(),
        );
    }

    pub(crate) fn link(&self, name: &str) -> LinkLabels {
        LinkLabels {
            link: name.to_owned(),
        }
    }

    pub(crate) fn key(&self, routing_key: &str) -> KeyLabels {
        KeyLabels {
            routing_key: routing_key.to_owned(),
        }
    }
}
