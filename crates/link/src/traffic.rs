//! Traffic figures per routing key, for the router's status report (issue
//! 35 §5: the console's traffic figures, as Skupper's shows bytes and
//! flows per address): the same counters as the Prometheus series
//! `meshlink_link_flows_opened_total`, `meshlink_link_flows_active` and
//! `meshlink_link_flow_bytes_total` (clones share their values), kept by
//! routing key so they can be read back without scraping.
//!
//! Counted where flows start: at this router's Listeners and its mesh
//! ingress.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// One routing key's traffic at this router since it started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyTraffic {
    /// The routing key.
    pub routing_key: String,
    /// Flows opened.
    pub flows_opened: u64,
    /// Flows open now.
    pub flows_active: u64,
    /// Bytes from clients towards the connector.
    pub bytes_to_connector: u64,
    /// Bytes from the connector back to clients.
    pub bytes_to_listener: u64,
}

/// The counters of one routing key.
#[derive(Clone)]
pub(crate) struct KeyCounters {
    pub(crate) opened: Counter,
    pub(crate) active: Gauge,
    pub(crate) to_connector: Counter,
    pub(crate) to_listener: Counter,
}

/// Every routing key's counters, by key.
#[derive(Default)]
pub(crate) struct TrafficTable {
    keys: Mutex<BTreeMap<String, KeyCounters>>,
}

impl TrafficTable {
    /// Keeps `counters` for `routing_key` unless it has them already.
    pub(crate) fn remember(&self, routing_key: &str, counters: impl FnOnce() -> KeyCounters) {
        let mut keys = self.keys.lock().expect("traffic table lock poisoned");
        if !keys.contains_key(routing_key) {
            keys.insert(routing_key.to_owned(), counters());
        }
    }

    /// The current figures, by routing key.
    pub(crate) fn snapshot(&self) -> Vec<KeyTraffic> {
        let keys = self.keys.lock().expect("traffic table lock poisoned");
        keys.iter()
            .map(|(k, c)| KeyTraffic {
                routing_key: k.clone(),
                flows_opened: c.opened.get(),
                flows_active: u64::try_from(c.active.get()).unwrap_or(0),
                bytes_to_connector: c.to_connector.get(),
                bytes_to_listener: c.to_listener.get(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_the_counters_it_shares() {
        let t = TrafficTable::default();
        let c = KeyCounters {
            opened: Counter::default(),
            active: Gauge::default(),
            to_connector: Counter::default(),
            to_listener: Counter::default(),
        };
        t.remember("backend", || c.clone());
        // A second registration keeps the first counters.
        t.remember("backend", || panic!("already known"));
        c.opened.inc();
        c.active.inc();
        c.to_connector.inc_by(10);
        c.to_listener.inc_by(20);
        assert_eq!(
            t.snapshot(),
            vec![KeyTraffic {
                routing_key: "backend".into(),
                flows_opened: 1,
                flows_active: 1,
                bytes_to_connector: 10,
                bytes_to_listener: 20,
            }]
        );
    }
}
