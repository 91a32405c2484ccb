//! The traffic figures the data plane last reported, kept in memory for
//! `GET /api/v1/traffic` and the console (issue 35 §5): the site's router
//! reports them by routing key and by link, each sidecar by inbound.
//! Counters move with every byte, so they are never written to the store.
//!
//! For each reporter, the newest report stream wins; a stream's end clears
//! its figures only if it is still the newest (the same compare-and-delete
//! as the status tasks), so a late end of an old stream never erases a
//! new stream's figures.
//!
//! With replicas, each replica has the figures of the streams it holds;
//! the API asks the others (`api/traffic.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use meshlink_xds::certify::{KeyTraffic, LinkTraffic};
use meshlink_xds::owner::ProxyKey;

/// What the router last reported.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    /// The site.
    pub(crate) site: String,
    /// When the report arrived.
    pub(crate) at: SystemTime,
    /// Figures by routing key.
    pub(crate) keys: Vec<KeyTraffic>,
    /// Bytes by link.
    pub(crate) links: Vec<LinkTraffic>,
}

/// One inbound's traffic, as its sidecar last reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InboundTraffic {
    /// The inbound's port.
    pub(crate) port: u16,
    /// Connections accepted since the sidecar started.
    pub(crate) connections_opened: u64,
    /// Connections open now.
    pub(crate) connections_active: u64,
    /// Bytes received from clients (TLS included).
    pub(crate) bytes_received: u64,
    /// Bytes sent to clients (TLS included).
    pub(crate) bytes_sent: u64,
}

/// What a sidecar last reported.
#[derive(Debug, Clone)]
pub(crate) struct DataplaneReported {
    /// When the report arrived.
    pub(crate) at: SystemTime,
    /// By inbound.
    pub(crate) inbounds: Vec<InboundTraffic>,
}

#[derive(Debug, Default)]
struct Inner {
    router: Option<(u64, Reported)>,
    dataplanes: BTreeMap<ProxyKey, (u64, DataplaneReported)>,
}

/// The board. Cheap to clone (clones share it).
#[derive(Debug, Clone, Default)]
pub(crate) struct TrafficBoard {
    inner: Arc<Mutex<Inner>>,
}

impl TrafficBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("traffic board lock poisoned")
    }

    /// Router report stream `stream` reported these figures for `site`.
    pub(crate) fn reported(
        &self,
        stream: u64,
        site: &str,
        keys: Vec<KeyTraffic>,
        links: Vec<LinkTraffic>,
    ) {
        let mut inner = self.lock();
        if inner.router.as_ref().is_some_and(|(s, _)| *s > stream) {
            return;
        }
        inner.router = Some((
            stream,
            Reported {
                site: site.to_owned(),
                at: SystemTime::now(),
                keys,
                links,
            },
        ));
    }

    /// Router report stream `stream` ended.
    pub(crate) fn ended(&self, stream: u64) {
        let mut inner = self.lock();
        if inner.router.as_ref().is_some_and(|(s, _)| *s == stream) {
            inner.router = None;
        }
    }

    /// The router's figures, while a stream has reported them.
    pub(crate) fn current(&self) -> Option<Reported> {
        self.lock().router.as_ref().map(|(_, r)| r.clone())
    }

    /// Sidecar `key`'s health stream `stream` reported `inbounds`.
    pub(crate) fn dataplane_reported(
        &self,
        key: &ProxyKey,
        stream: u64,
        inbounds: Vec<InboundTraffic>,
    ) {
        let mut inner = self.lock();
        if inner.dataplanes.get(key).is_some_and(|(s, _)| *s > stream) {
            return;
        }
        let reported = DataplaneReported {
            at: SystemTime::now(),
            inbounds,
        };
        inner.dataplanes.insert(key.clone(), (stream, reported));
    }

    /// Sidecar `key`'s health stream `stream` ended.
    pub(crate) fn dataplane_ended(&self, key: &ProxyKey, stream: u64) {
        let mut inner = self.lock();
        if inner.dataplanes.get(key).is_some_and(|(s, _)| *s == stream) {
            inner.dataplanes.remove(key);
        }
    }

    /// Every sidecar's figures held here.
    pub(crate) fn dataplanes(&self) -> Vec<(ProxyKey, DataplaneReported)> {
        self.lock()
            .dataplanes
            .iter()
            .map(|(k, (_, r))| (k.clone(), r.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> Vec<KeyTraffic> {
        vec![KeyTraffic {
            routing_key: "backend".into(),
            flows_opened: n,
            ..Default::default()
        }]
    }

    #[test]
    fn the_newest_stream_wins_and_an_old_ones_end_clears_nothing() {
        let b = TrafficBoard::default();
        b.reported(2, "a", key(5), Vec::new());
        b.reported(1, "a", key(1), Vec::new());
        assert_eq!(b.current().unwrap().keys[0].flows_opened, 5);
        b.ended(1);
        assert!(b.current().is_some());
        b.ended(2);
        assert!(b.current().is_none());
    }

    #[test]
    fn each_sidecar_keeps_its_newest_streams_figures() {
        let b = TrafficBoard::default();
        let web = ProxyKey::new("default", "web-1");
        let inbound = |opened| {
            vec![InboundTraffic {
                port: 8080,
                connections_opened: opened,
                connections_active: 0,
                bytes_received: 0,
                bytes_sent: 0,
            }]
        };
        b.dataplane_reported(&web, 2, inbound(7));
        b.dataplane_reported(&web, 1, inbound(1));
        b.dataplane_reported(&ProxyKey::new("default", "web-2"), 1, inbound(3));
        let all = b.dataplanes();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].1.inbounds[0].connections_opened, 7);
        b.dataplane_ended(&web, 1);
        assert_eq!(
            b.dataplanes().len(),
            2,
            "an old stream's end clears nothing"
        );
        b.dataplane_ended(&web, 2);
        assert_eq!(b.dataplanes()[0].0.name, "web-2");
    }
}
