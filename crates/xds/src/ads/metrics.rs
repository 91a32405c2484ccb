//! Prometheus metrics of the ADS server (prefix `meshlink_xds_` in the
//! control plane): connected streams, pushes, NACKs, change-to-ACK latency
//! and each connected proxy's certificate expiry.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::types::short_type;
use crate::owner::ProxyKey;
use crate::translate::{TYPE_ORDER, type_index};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabel {
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Every `reason` label value of the rejected-streams counter, exported at 0
/// from start-up so alerts see the series before the first refusal.
pub const REJECT_REASONS: [&str; 8] = [
    "unauthenticated",
    "admission",
    "node_id_mismatch",
    "invalid_request",
    "takeover",
    "revoked",
    "shutdown",
    "other",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProxyLabel {
    mesh: String,
    dataplane: String,
}

/// The ADS server's metrics. Cheap to clone (all clones share values).
#[derive(Clone, Debug)]
pub struct AdsMetrics {
    streams: Family<ProtocolLabel, Gauge>,
    pushes: Family<TypeLabel, Counter>,
    /// The pushes counter of each served type, in [`TYPE_ORDER`], looked
    /// up once: a push is one atomic add, not a lookup under the family's
    /// lock (every stream of every worker pushes).
    pushes_by_type: Arc<[Counter]>,
    nacks: Family<TypeLabel, Counter>,
    rejected: Family<ReasonLabel, Counter>,
    push_latency: Histogram,
    cert_expiry: Family<ProxyLabel, Gauge>,
}

impl Default for AdsMetrics {
    fn default() -> Self {
        let pushes = Family::<TypeLabel, Counter>::default();
        let pushes_by_type = TYPE_ORDER
            .iter()
            .map(|t| {
                pushes
                    .get_or_create(&TypeLabel {
                        r#type: short_type(t),
                    })
                    .clone()
            })
            .collect();
        Self {
            streams: Family::default(),
            pushes,
            pushes_by_type,
            nacks: Family::default(),
            rejected: Family::default(),
            // 1 ms .. ~33 s
            push_latency: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            cert_expiry: Family::default(),
        }
    }
}

// === impl AdsMetrics ===

impl AdsMetrics {
    /// Registers every metric in `registry` (unprefixed names; the caller
    /// chooses the prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "streams",
            "Connected ADS streams by protocol (sotw, delta)",
            self.streams.clone(),
        );
        registry.register(
            "pushes",
            "xDS responses sent, by resource type",
            self.pushes.clone(),
        );
        registry.register(
            "nacks",
            "xDS responses rejected by proxies (NACK), by resource type",
            self.nacks.clone(),
        );
        registry.register(
            "rejected_streams",
            "ADS streams refused or ended with an error status, by reason (unauthenticated, admission, node_id_mismatch, invalid_request, takeover, revoked, shutdown, other)",
            self.rejected.clone(),
        );
        for reason in REJECT_REASONS {
            let _ = self.rejected.get_or_create(&ReasonLabel { reason });
        }
        registry.register(
            "push_latency_seconds",
            "Time from a change reaching the control plane to the proxy's ACK of the response carrying it",
            self.push_latency.clone(),
        );
        registry.register(
            "proxy_certificate_expiration_timestamp_seconds",
            "Expiry (unix seconds) of the identity certificate last sent to each connected proxy over SDS",
            self.cert_expiry.clone(),
        );
    }

    pub(crate) fn stream_opened(&self, protocol: &'static str) {
        self.streams
            .get_or_create(&ProtocolLabel { protocol })
            .inc();
    }

    pub(crate) fn stream_closed(&self, protocol: &'static str) {
        self.streams
            .get_or_create(&ProtocolLabel { protocol })
            .dec();
    }

    pub(crate) fn rejected(&self, reason: &'static str) {
        self.rejected.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts a response of `type_url` (one of [`TYPE_ORDER`]).
    pub(crate) fn pushed(&self, type_url: &str) {
        if let Some(i) = type_index(type_url) {
            self.pushes_by_type[i].inc();
        }
    }

    pub(crate) fn nacked(&self, r#type: &'static str) {
        self.nacks.get_or_create(&TypeLabel { r#type }).inc();
    }

    pub(crate) fn acked_after(&self, latency: Duration) {
        self.push_latency.observe(latency.as_secs_f64());
    }

    pub(crate) fn certificate(&self, key: &ProxyKey, not_after: Option<SystemTime>) {
        let label = ProxyLabel {
            mesh: key.mesh.clone(),
            dataplane: key.name.clone(),
        };
        match not_after {
            Some(t) => {
                let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                self.cert_expiry
                    .get_or_create(&label)
                    .set(i64::try_from(secs).unwrap_or(i64::MAX));
            }
            None => {
                self.cert_expiry.remove(&label);
            }
        }
    }
}
