//! Prometheus metrics of the Dataplane status task (prefix
//! `meshlink_dataplane_`): each connected proxy's certificate expiry, the
//! number of stalled rotations per mesh, and the sizes of the per-proxy
//! maps (so eviction can be observed from outside).

use std::time::{SystemTime, UNIX_EPOCH};

use meshlink_runtime::MetricsRegistry;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProxyLabel {
    mesh: String,
    dataplane: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MeshLabel {
    mesh: String,
}

/// The status task's metrics. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct StatusMetrics {
    expiry: Family<ProxyLabel, Gauge>,
    stalled: Family<MeshLabel, Gauge>,
    tracked: Gauge,
    reports: Gauge,
    dirty: Gauge,
    closes: Family<OutcomeLabel, prometheus_client::metrics::counter::Counter>,
}

impl StatusMetrics {
    /// Registers every metric in `registry`.
    pub(crate) fn new(registry: &MetricsRegistry) -> Self {
        let m = Self::default();
        registry.register_with("dataplane", |r| {
            r.register(
                "certificate_expiration_timestamp_seconds",
                "Expiry (unix seconds) of each connected proxy's identity certificate, however it was delivered (Certify or SDS)",
                m.expiry.clone(),
            );
            r.register(
                "certificate_rotation_stalled",
                "Connected proxies past 80% of their certificate's lifetime without a renewal, per mesh",
                m.stalled.clone(),
            );
            r.register(
                "status_tracked",
                "Dataplanes whose status this control plane tracks in memory",
                m.tracked.clone(),
            );
            r.register(
                "stream_closes",
                "Closed xDS streams of this control plane by what their status write did: written (offline), yielded (the proxy's newer stream is on another replica), superseded (it reconnected here within the grace), unchanged",
                m.closes.clone(),
            );
            r.register(
                "status_dirty",
                "Dataplanes whose status this control plane has yet to write (closed streams wait 3 s first)",
                m.dirty.clone(),
            );
            r.register(
                "stream_reports",
                "xDS stream reports held for `meshlink inspect` (connected, or disconnected within the grace period)",
                m.reports.clone(),
            );
        });
        m
    }

    /// Sets (or with `None` removes) a proxy's expiry series.
    pub(crate) fn expiry(&self, mesh: &str, dataplane: &str, not_after: Option<SystemTime>) {
        let label = ProxyLabel {
            mesh: mesh.to_owned(),
            dataplane: dataplane.to_owned(),
        };
        match not_after {
            Some(t) => {
                let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                self.expiry
                    .get_or_create(&label)
                    .set(i64::try_from(secs).unwrap_or(i64::MAX));
            }
            None => {
                self.expiry.remove(&label);
            }
        }
    }

    /// Sets (or with `None` removes) a mesh's stalled count.
    pub(crate) fn stalled(&self, mesh: &str, count: Option<usize>) {
        let label = MeshLabel {
            mesh: mesh.to_owned(),
        };
        match count {
            Some(n) => {
                self.stalled
                    .get_or_create(&label)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            None => {
                self.stalled.remove(&label);
            }
        }
    }

    /// Sets the map sizes.
    /// Counts a closed stream's outcome.
    pub(crate) fn close(&self, outcome: &'static str) {
        self.closes.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    pub(crate) fn sizes(&self, tracked: usize, reports: usize, dirty: usize) {
        self.tracked.set(i64::try_from(tracked).unwrap_or(i64::MAX));
        self.dirty.set(i64::try_from(dirty).unwrap_or(i64::MAX));
        self.reports.set(i64::try_from(reports).unwrap_or(i64::MAX));
    }
}
