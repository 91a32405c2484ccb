//! The mesh DNS server's metrics: queries by how they ended, and the
//! forwards in flight.
//!
//! Owns the metric definitions and the [`Outcome`] label; the server
//! counts each query exactly once, when it is answered or given up.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// How one query ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answered from the mesh table (addresses or NODATA).
    Mesh,
    /// A name under a known suffix that is not in the table.
    NxDomain,
    /// Forwarded, and the upstream's answer relayed.
    Forwarded,
    /// Forwarded, and every upstream failed or timed out: SERVFAIL.
    ForwardFailed,
    /// Unparsable (FORMERR) or not a standard query (NOTIMP).
    Malformed,
    /// Not answered: no readable header, a response sent to the server,
    /// no DNS configured yet, or `max_pending_lookups` forwards in flight.
    Dropped,
}

impl Outcome {
    /// Every outcome, for the series created at 0.
    pub const ALL: [Outcome; 6] = [
        Outcome::Mesh,
        Outcome::NxDomain,
        Outcome::Forwarded,
        Outcome::ForwardFailed,
        Outcome::Malformed,
        Outcome::Dropped,
    ];

    /// The `result` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Mesh => "mesh",
            Outcome::NxDomain => "nxdomain",
            Outcome::Forwarded => "forwarded",
            Outcome::ForwardFailed => "forward_failed",
            Outcome::Malformed => "malformed",
            Outcome::Dropped => "dropped",
        }
    }
}

/// `{result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// An [`Outcome`]'s label.
    pub result: &'static str,
}

/// The DNS server's metrics.
#[derive(Debug, Default)]
pub struct DnsMetrics {
    /// `dns_queries_total{result}`.
    pub queries: Family<ResultLabels, Counter>,
    /// `dns_forwards_pending`: forwarded queries waiting for an upstream.
    pub forwards_pending: Gauge<i64, AtomicI64>,
}

impl DnsMetrics {
    /// Registers `dns_queries` and `dns_forwards_pending` (under the
    /// caller's prefix), every `result` series at 0.
    pub fn register(&self, registry: &mut Registry) {
        for outcome in Outcome::ALL {
            let _ = self.queries.get_or_create(&ResultLabels {
                result: outcome.as_str(),
            });
        }
        registry.register(
            "dns_queries",
            "Queries to the mesh DNS by result: mesh (answered from the table), nxdomain \
             (under a known suffix, not in the table), forwarded, forward_failed (SERVFAIL), \
             malformed (FORMERR or NOTIMP), dropped (not answered)",
            self.queries.clone(),
        );
        registry.register(
            "dns_forwards_pending",
            "Queries forwarded to the upstream resolvers and not answered yet",
            self.forwards_pending.clone(),
        );
    }

    /// Counts one query.
    pub fn count(&self, outcome: Outcome) {
        self.queries
            .get_or_create(&ResultLabels {
                result: outcome.as_str(),
            })
            .inc();
    }

    /// How many queries ended with `outcome` so far.
    pub fn counted(&self, outcome: Outcome) -> u64 {
        self.queries
            .get_or_create(&ResultLabels {
                result: outcome.as_str(),
            })
            .get()
    }

    /// Forwards in flight now.
    pub fn pending(&self) -> i64 {
        self.forwards_pending.get()
    }
}
