//! Metrics of the HTTP ports (prefix `meshlink_http_`): connections open,
//! and connections closed by the limits, by port and reason.

use meshlink_runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The ports served with limits, as their `port` label reads.
pub(crate) const PORTS: [&str; 2] = ["api", "grant"];

/// Why a connection was closed by the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// The request header (or the TLS handshake) did not complete in time.
    HeaderTimeout,
    /// No new request began within the idle timeout.
    IdleTimeout,
    /// The connection cap was reached.
    OverLimit,
    /// A request body stalled for the header-read timeout.
    BodyTimeout,
}

impl CloseReason {
    const ALL: [CloseReason; 4] = [
        Self::HeaderTimeout,
        Self::IdleTimeout,
        Self::OverLimit,
        Self::BodyTimeout,
    ];

    /// The `reason` label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::HeaderTimeout => "header_timeout",
            Self::IdleTimeout => "idle_timeout",
            Self::OverLimit => "over_limit",
            Self::BodyTimeout => "body_timeout",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PortLabel {
    port: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClosedLabels {
    port: &'static str,
    reason: &'static str,
}

/// The HTTP ports' connection metrics. Cheap to clone (clones share values).
#[derive(Clone, Debug)]
pub(crate) struct HttpConnMetrics {
    open: Family<PortLabel, Gauge>,
    closed: Family<ClosedLabels, Counter>,
}

impl HttpConnMetrics {
    /// Creates the metrics, every series at 0, and registers them.
    pub(crate) fn new(registry: &MetricsRegistry) -> Self {
        let m = HttpConnMetrics {
            open: Family::default(),
            closed: Family::default(),
        };
        for port in PORTS {
            let _ = m.open.get_or_create(&PortLabel { port });
            for reason in CloseReason::ALL {
                let _ = m.closed.get_or_create(&ClosedLabels {
                    port,
                    reason: reason.label(),
                });
            }
        }
        registry.register_with("http", |r| {
            r.register(
                "connections",
                "Open connections of the HTTP ports (api, grant)",
                m.open.clone(),
            );
            r.register(
                "closed_connections",
                "Connections the HTTP ports closed for a limit, by port and reason (header_timeout, idle_timeout, over_limit, body_timeout)",
                m.closed.clone(),
            );
        });
        m
    }

    /// Counts a connection closed on `port` for `reason`.
    pub(crate) fn closed(&self, port: &'static str, reason: CloseReason) {
        self.closed
            .get_or_create(&ClosedLabels {
                port,
                reason: reason.label(),
            })
            .inc();
    }

    /// Counts a connection open on `port` until the guard is dropped.
    pub(crate) fn opened(&self, port: &'static str) -> OpenGuard {
        let gauge = self.open.get_or_create(&PortLabel { port }).clone();
        gauge.inc();
        OpenGuard(gauge)
    }
}

/// Holds one open connection in the gauge.
pub(crate) struct OpenGuard(Gauge);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}
