//! Traffic figures per routing key, for the router's status report (issue
//! 35 §5: the console's traffic figures, as Skupper's shows bytes and
//! flows per address): the same counters as the Prometheus series
//! `meshlink_link_flows_opened_total`, `meshlink_link_flows_active` and
//! `meshlink_link_flow_bytes_total` (clones share their values), kept by
//! routing key so they can be read back without scraping.
//!
//! Counted where flows start: at this router's Listeners and its mesh
//! ingress.
//!
//! Also the bytes each link carried ([`LinkTraffic`]): counted on the
//! link's TLS connection (flows, hellos and routing messages alike) and
//! kept by link name across reconnects, so a link's figures grow from the
//! router's start whichever connection carried them.

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

/// One link's traffic at this router since it started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkTraffic {
    /// The link's name (a Link's, or `<role>/<peer router>` when accepted).
    pub name: String,
    /// The router at the other end (its id), as of the last connection.
    pub peer: String,
    /// Bytes this router sent on the link.
    pub bytes_sent: u64,
    /// Bytes this router received on the link.
    pub bytes_received: u64,
}

/// The byte counters of one link connection.
#[derive(Clone, Default)]
pub(crate) struct ConnectionBytes {
    pub(crate) sent: Counter,
    pub(crate) received: Counter,
}

/// One link's bytes: those of its ended connections, and the live ones'
/// counters by connection id.
#[derive(Default)]
struct LinkBytes {
    peer: String,
    ended_sent: u64,
    ended_received: u64,
    live: BTreeMap<u64, ConnectionBytes>,
}

/// Every link's bytes, by link name.
#[derive(Default)]
pub(crate) struct LinkTrafficTable {
    links: Mutex<BTreeMap<String, LinkBytes>>,
}

impl LinkTrafficTable {
    /// Connection `conn` of link `name`, to router `peer`, counts into
    /// `bytes` from now on.
    pub(crate) fn attach(&self, name: &str, peer: &str, conn: u64, bytes: ConnectionBytes) {
        let mut links = self.links.lock().expect("link traffic lock poisoned");
        let link = links.entry(name.to_owned()).or_default();
        peer.clone_into(&mut link.peer);
        link.live.insert(conn, bytes);
    }

    /// Connection `conn` of link `name` ended: its bytes stay with the link.
    pub(crate) fn detach(&self, name: &str, conn: u64) {
        let mut links = self.links.lock().expect("link traffic lock poisoned");
        if let Some(link) = links.get_mut(name)
            && let Some(c) = link.live.remove(&conn)
        {
            link.ended_sent += c.sent.get();
            link.ended_received += c.received.get();
        }
    }

    /// The current figures, by link name.
    pub(crate) fn snapshot(&self) -> Vec<LinkTraffic> {
        let links = self.links.lock().expect("link traffic lock poisoned");
        links
            .iter()
            .map(|(name, l)| LinkTraffic {
                name: name.clone(),
                peer: l.peer.clone(),
                bytes_sent: l.ended_sent + l.live.values().map(|c| c.sent.get()).sum::<u64>(),
                bytes_received: l.ended_received
                    + l.live.values().map(|c| c.received.get()).sum::<u64>(),
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

    #[test]
    fn a_links_bytes_outlive_its_connections() {
        let t = LinkTrafficTable::default();
        let first = ConnectionBytes::default();
        t.attach("to-north", "north", 1, first.clone());
        first.sent.inc_by(100);
        first.received.inc_by(40);
        t.detach("to-north", 1);
        // Counting after the end (a late write) no longer moves the link.
        first.sent.inc_by(1_000);
        let second = ConnectionBytes::default();
        t.attach("to-north", "north", 2, second.clone());
        second.sent.inc_by(5);
        second.received.inc_by(7);
        // Detaching an unknown connection changes nothing.
        t.detach("to-north", 9);
        t.detach("unknown", 2);
        assert_eq!(
            t.snapshot(),
            vec![LinkTraffic {
                name: "to-north".into(),
                peer: "north".into(),
                bytes_sent: 105,
                bytes_received: 47,
            }]
        );
    }
}
