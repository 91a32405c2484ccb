//! The traffic figures the site's router last reported (by routing key),
//! kept in memory for `GET /api/v1/traffic` and the console: counters move
//! with every byte, so they are never written to the store. The newest
//! report stream wins; its end clears the figures only if it is still the
//! newest (the same compare-and-delete as the router status task).
//!
//! With replicas, only the replica holding the router's stream has them;
//! the API forwards to it (`api/traffic.rs`).

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use meshlink_xds::certify::KeyTraffic;

/// What the router last reported.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    /// The site.
    pub(crate) site: String,
    /// When the report arrived.
    pub(crate) at: SystemTime,
    /// Figures by routing key.
    pub(crate) keys: Vec<KeyTraffic>,
}

/// The board. Cheap to clone (clones share it).
#[derive(Debug, Clone, Default)]
pub(crate) struct TrafficBoard {
    inner: Arc<Mutex<Option<(u64, Reported)>>>,
}

impl TrafficBoard {
    /// Stream `stream` reported `keys` for `site`.
    pub(crate) fn reported(&self, stream: u64, site: &str, keys: Vec<KeyTraffic>) {
        let mut inner = self.inner.lock().expect("traffic board lock poisoned");
        if inner.as_ref().is_some_and(|(s, _)| *s > stream) {
            return;
        }
        *inner = Some((
            stream,
            Reported {
                site: site.to_owned(),
                at: SystemTime::now(),
                keys,
            },
        ));
    }

    /// Stream `stream` ended.
    pub(crate) fn ended(&self, stream: u64) {
        let mut inner = self.inner.lock().expect("traffic board lock poisoned");
        if inner.as_ref().is_some_and(|(s, _)| *s == stream) {
            *inner = None;
        }
    }

    /// The figures, while a stream has reported them.
    pub(crate) fn current(&self) -> Option<Reported> {
        let inner = self.inner.lock().expect("traffic board lock poisoned");
        inner.as_ref().map(|(_, r)| r.clone())
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
        b.reported(2, "a", key(5));
        b.reported(1, "a", key(1));
        assert_eq!(b.current().unwrap().keys[0].flows_opened, 5);
        b.ended(1);
        assert!(b.current().is_some());
        b.ended(2);
        assert!(b.current().is_none());
    }
}
