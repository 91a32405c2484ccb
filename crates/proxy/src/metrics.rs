//! The proxy's Prometheus metrics, registered under `meshlink_proxy_`.
//!
//! Owns metric definitions and label sets only; the data path increments
//! them. Names answer operators' questions: how many connections, how many
//! bytes, why handshakes fail, who RBAC refused, is xDS connected, when
//! does the certificate expire.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `{listener, direction}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// Listener name.
    pub listener: String,
    /// `inbound` or `outbound`.
    pub direction: String,
}

/// `{direction}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// `inbound` or `outbound`.
    pub direction: String,
}

/// `{direction, reason}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// `inbound` or `outbound`.
    pub direction: String,
    /// Short reason, e.g. `bad_certificate`, `timeout`, `peer_identity`.
    pub reason: String,
}

/// `{listener}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    /// Listener name.
    pub listener: String,
}

/// `{cluster}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Cluster name.
    pub cluster: String,
}

/// `{type}` (short xDS type name).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// E.g. `Listener`.
    pub r#type: String,
}

/// Every metric the proxy exports.
#[derive(Debug, Default)]
pub struct ProxyMetrics {
    /// Connections accepted, per listener.
    pub connections: Family<ListenerLabels, Counter>,
    /// Connections open now.
    pub connections_active: Family<DirectionLabels, Gauge>,
    /// Bytes proxied (both ways).
    pub bytes: Family<DirectionLabels, Counter>,
    /// TLS handshakes that failed, by reason.
    pub handshake_failures: Family<FailureLabels, Counter>,
    /// Connections refused by RBAC.
    pub rbac_denied: Family<NameLabels, Counter>,
    /// Upstream connect attempts that failed.
    pub upstream_connect_failures: Family<ClusterLabels, Counter>,
    /// Endpoints ejected after consecutive connect failures.
    pub outlier_ejections: Family<ClusterLabels, Counter>,
    /// 1 while an xDS stream is healthy.
    pub xds_connected: Gauge,
    /// xDS responses accepted, per type.
    pub xds_updates: Family<TypeLabels, Counter>,
    /// xDS responses with rejected resources (NACKs), per type.
    pub xds_rejected: Family<TypeLabels, Counter>,
    /// Seconds until the identity certificate expires (updated on scrape).
    pub cert_expiry_seconds: Gauge,
    /// Identity certificates obtained (first one and every renewal).
    pub cert_rotations: Counter,
    /// Listeners bound and serving.
    pub listeners_active: Gauge,
    /// Listeners waiting for a reference (I2).
    pub listeners_warming: Gauge,
}

impl ProxyMetrics {
    /// Registers every metric in `registry` (under the caller's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "connections",
            "Connections accepted",
            self.connections.clone(),
        );
        registry.register(
            "connections_active",
            "Connections open now",
            self.connections_active.clone(),
        );
        registry.register(
            "bytes",
            "Bytes proxied, both directions",
            self.bytes.clone(),
        );
        registry.register(
            "handshake_failures",
            "TLS handshakes that failed, by reason",
            self.handshake_failures.clone(),
        );
        registry.register(
            "rbac_denied",
            "Connections refused by RBAC",
            self.rbac_denied.clone(),
        );
        registry.register(
            "upstream_connect_failures",
            "Upstream connect attempts that failed",
            self.upstream_connect_failures.clone(),
        );
        registry.register(
            "outlier_ejections",
            "Endpoints ejected after consecutive connect failures",
            self.outlier_ejections.clone(),
        );
        registry.register(
            "xds_connected",
            "1 while the xDS stream to the control plane is healthy",
            self.xds_connected.clone(),
        );
        registry.register(
            "xds_updates",
            "xDS responses accepted",
            self.xds_updates.clone(),
        );
        registry.register(
            "xds_rejected",
            "xDS responses with rejected resources (NACKed)",
            self.xds_rejected.clone(),
        );
        registry.register(
            "cert_expiry_seconds",
            "Seconds until the identity certificate expires",
            self.cert_expiry_seconds.clone(),
        );
        registry.register(
            "cert_rotations",
            "Identity certificates obtained",
            self.cert_rotations.clone(),
        );
        registry.register(
            "listeners_active",
            "Listeners serving",
            self.listeners_active.clone(),
        );
        registry.register(
            "listeners_warming",
            "Listeners waiting for a secret, cluster or endpoints",
            self.listeners_warming.clone(),
        );
    }

    /// Counts one xDS response of type `short` (accepted or NACKed).
    pub fn xds_update(&self, short: &str, accepted: bool) {
        let labels = TypeLabels {
            r#type: short.to_owned(),
        };
        if accepted {
            self.xds_updates.get_or_create(&labels).inc();
        } else {
            self.xds_rejected.get_or_create(&labels).inc();
        }
    }

    /// Labels for `direction`.
    pub fn direction(direction: crate::model::Direction) -> DirectionLabels {
        DirectionLabels {
            direction: direction.as_str().to_owned(),
        }
    }

    /// Counts a failed handshake.
    pub fn handshake_failed(&self, direction: crate::model::Direction, reason: &str) {
        self.handshake_failures
            .get_or_create(&FailureLabels {
                direction: direction.as_str().to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }
}
