//! `DuplicateHolder` on Dataplanes: two processes started with one
//! Dataplane's token and name (both pass every check: same mesh, name and
//! token) hold its identity at once. The status says so, naming both,
//! instead of silently showing whichever certificate was issued last.
//!
//! Owns [`Holders`], the status task's record of who held each Dataplane's
//! xDS stream on this control plane, and who asked Certify for its
//! certificate. It must never refuse, end or delay a stream or a Certify
//! call: it only observes (I1 already gives the key to the newest stream).
//!
//! # What "at once" means
//!
//! A *holder* is a process: meshlink-proxy names itself with a random
//! instance id (`node.metadata["meshlink.dev/instance"]`, Certify's
//! `instance`); a client that sends none (Envoy, gRPC) counts as one
//! process per IP address, since its reconnects come from new ports.
//!
//! Two streams for one key are never open together on one replica: a new
//! stream takes the key over at once and the old one ends with `ABORTED`
//! (I1). So two processes show up as a *takeover back and forth*: B's
//! stream displaces A's, then A (still alive) opens again and displaces
//! B's. One takeover alone proves nothing: a proxy reconnecting over a
//! fresh connection while the control plane still holds its dead one looks
//! the same, and its instance id is the same anyway; a proxy restarted
//! elsewhere never comes back as the old holder. The rule is therefore:
//!
//! - a holder is *displaced* when a stream of another holder takes its key
//!   over; its stream closing otherwise (the client left, a drain, a
//!   revocation) forgets it at once;
//! - the Dataplane has *concurrent holders* once a displaced holder acts
//!   again (opens a stream, or asks Certify) while the holder that
//!   displaced it is still live;
//! - a holder is *live* while its stream is open here, or for [`HOLDER_TTL`]
//!   after it was displaced or last asked Certify (longer than a
//!   meshlink-proxy's longest reconnect backoff, so a pair taking turns
//!   stays flagged between turns);
//! - the condition is `True` while concurrency was proven and at least two
//!   holders are live; it is removed when one is left (the other stopped:
//!   its stream closed, or it stayed away for [`HOLDER_TTL`]).
//!
//! The order in which the status task sees a takeover's two views (the new
//! stream's open, the old stream's close) varies, and the close may not be
//! seen at all (the new stream's report replaces the old one first); the
//! outcome does not depend on it (`the_order_of_a_takeovers_views_does_not_matter`).
//!
//! While holders are concurrent, the Dataplane's `mtls` status keeps the
//! certificate of the first live holder (the earliest seen), not of
//! whoever renewed last; when that holder goes, the next one's latest
//! Certify certificate takes its place.
//!
//! Per replica: a replica sees only the streams and Certify calls it
//! serves, and writes (and removes) only the condition it wrote; two
//! processes connected to two different replicas are not detected.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use meshlink_api::{Condition, ConditionStatus, Kind};
use meshlink_xds::ads::{Holder, StreamView};
use meshlink_xds::owner::ProxyKey;

use super::writer;
use crate::identity::issuance::Issuance;
use crate::resources::{ResourceError, ResourceService};

/// The condition type, on Dataplanes.
pub(crate) const DUPLICATE_HOLDER: &str = "DuplicateHolder";
/// Its reason.
pub(crate) const SECOND_CONNECTION: &str = "SecondConnection";

/// How long a displaced holder (or one that only asked Certify) stays live
/// without acting again: longer than meshlink-proxy's longest xDS
/// reconnect backoff (15 s ± 20%), so two processes taking turns on the
/// stream stay flagged between turns.
pub(crate) const HOLDER_TTL: Duration = Duration::from_secs(30);

/// One holder of a Dataplane's identity.
#[derive(Debug, Clone)]
struct HolderState {
    /// Its instance and latest address.
    holder: Holder,
    /// When it was first seen (in this run of being live).
    since: SystemTime,
    /// When it last opened a stream, asked Certify or was displaced.
    last_seen: SystemTime,
    /// Its stream is open here now.
    open: bool,
    /// A stream of another holder took its key over (and it has not come
    /// back since).
    displaced: bool,
    /// The holders it was displaced by (identities).
    displaced_by: HashSet<String>,
    /// The last certificate Certify issued to it.
    cert: Option<Issuance>,
}

impl HolderState {
    fn new(holder: Holder, now: SystemTime) -> Self {
        Self {
            holder,
            since: now,
            last_seen: now,
            open: false,
            displaced: false,
            displaced_by: HashSet::new(),
            cert: None,
        }
    }

    fn live(&self, now: SystemTime) -> bool {
        self.open || now < self.last_seen + HOLDER_TTL
    }
}

/// The holders of one Dataplane, by identity.
#[derive(Debug, Default)]
struct DataplaneHolders {
    holders: HashMap<String, HolderState>,
    /// A displaced holder came back while its displacer was live.
    concurrent: bool,
    /// The status shows only the first holder's certificate (holders were
    /// concurrent at the last event).
    filtering: bool,
}

impl DataplaneHolders {
    /// The identity of the first live holder (earliest seen; ties by
    /// identity, so every order of events picks the same one).
    fn primary(&self, now: SystemTime) -> Option<&str> {
        self.holders
            .iter()
            .filter(|(_, h)| h.live(now))
            .min_by(|a, b| (a.1.since, a.0).cmp(&(b.1.since, b.0)))
            .map(|(id, _)| id.as_str())
    }

    fn live_count(&self, now: SystemTime) -> usize {
        self.holders.values().filter(|h| h.live(now)).count()
    }

    /// Whether holders are concurrent now.
    fn conflict(&self, now: SystemTime) -> bool {
        self.concurrent && self.live_count(now) >= 2
    }

    /// `id` acts (opens a stream or asks Certify): concurrency is proven if
    /// it had been displaced by a holder that is still live.
    fn acts(&mut self, id: &str, holder: &Holder, now: SystemTime) {
        let displacers: Vec<String> = self
            .holders
            .get(id)
            .filter(|h| h.displaced)
            .map(|h| h.displaced_by.iter().cloned().collect())
            .unwrap_or_default();
        if displacers
            .iter()
            .any(|d| self.holders.get(d).is_some_and(|h| h.live(now)))
        {
            self.concurrent = true;
        }
        let h = self
            .holders
            .entry(id.to_owned())
            .or_insert_with(|| HolderState::new(holder.clone(), now));
        if !h.live(now) {
            h.since = now;
        }
        h.holder = holder.clone();
        h.last_seen = now;
        h.displaced = false;
        h.displaced_by.clear();
    }

    /// Drops holders no longer live, ends the conflict when one is left,
    /// and returns the certificate the status should show when the rule
    /// picks one: the first holder's while holders are concurrent, and
    /// once more when they stop being (the one left).
    fn settle(&mut self, now: SystemTime) -> Option<Issuance> {
        self.holders.retain(|_, h| h.live(now));
        if self.holders.len() <= 1 {
            self.concurrent = false;
        }
        let conflict = self.conflict(now);
        let shown = if conflict || self.filtering {
            self.primary(now)
                .and_then(|id| self.holders.get(id))
                .and_then(|h| h.cert.clone())
        } else {
            None
        };
        self.filtering = conflict;
        shown
    }

    /// The condition, while concurrency is proven and two holders are live.
    fn condition(&self, now: SystemTime, instance: &str) -> Option<Condition> {
        if !self.concurrent || self.live_count(now) < 2 {
            return None;
        }
        let mut live: Vec<(&String, &HolderState)> =
            self.holders.iter().filter(|(_, h)| h.live(now)).collect();
        live.sort_by(|a, b| (a.1.since, a.0).cmp(&(b.1.since, b.0)));
        let named: Vec<String> = live
            .iter()
            .map(|(_, h)| {
                let cert = h.cert.as_ref().map_or_else(
                    || "no certificate asked for here".to_owned(),
                    |c| format!("certificate {}", c.serial),
                );
                format!(
                    "{} since {}, {cert}",
                    h.holder,
                    humantime::format_rfc3339_seconds(h.since)
                )
            })
            .collect();
        Some(Condition::now(
            DUPLICATE_HOLDER,
            ConditionStatus::True,
            SECOND_CONNECTION,
            format!(
                "{} processes hold this Dataplane's identity at once (seen by control plane {instance}), \
                 each taking the xDS stream from the other: {}. The status shows the first one's \
                 certificate. Stop the extra process, or give it its own Dataplane and token \
                 (`meshlink token dataplane --name ...`)",
                named.len(),
                named.join("; ")
            ),
        ))
    }
}

/// What the status task knows about who holds each Dataplane's identity.
#[derive(Debug, Default)]
pub(super) struct Holders {
    dataplanes: HashMap<ProxyKey, DataplaneHolders>,
    /// The message of the condition last written (or found stored, written
    /// by this instance) per Dataplane; absent: none is stored by us.
    written: HashMap<ProxyKey, String>,
}

// === impl Holders ===

impl Holders {
    /// A stream view of this instance. Returns the certificate the
    /// Dataplane's `mtls` status should show, when the rule picks one
    /// (holders are concurrent, or just stopped being).
    pub(super) fn on_view(&mut self, v: &StreamView, now: SystemTime) -> Option<Issuance> {
        let id = v.holder.identity()?;
        let d = self.dataplanes.entry(v.key.clone()).or_default();
        if v.connected {
            if !d.holders.get(&id).is_some_and(|h| h.open) {
                d.acts(&id, &v.holder, now);
                for (other, h) in &mut d.holders {
                    if *other == id {
                        continue;
                    }
                    if h.open {
                        h.open = false;
                        h.displaced = true;
                        h.last_seen = now;
                        h.displaced_by.insert(id.clone());
                    } else if h.displaced && h.displaced_by.is_empty() {
                        // Its close was seen before this open: this
                        // stream is the one that displaced it.
                        h.displaced_by.insert(id.clone());
                    }
                }
            }
            if let Some(h) = d.holders.get_mut(&id) {
                h.open = true;
                h.holder = v.holder.clone();
            }
        } else if v.taken_over {
            // Displaced; by whom is known once the newer stream's view
            // comes (before or after this one).
            let open: Vec<String> = d
                .holders
                .iter()
                .filter(|(other, h)| **other != id && h.open)
                .map(|(other, _)| other.clone())
                .collect();
            if let Some(h) = d.holders.get_mut(&id)
                && h.open
            {
                h.open = false;
                h.displaced = true;
                h.last_seen = now;
                h.displaced_by.extend(open);
            }
        } else {
            d.holders.remove(&id);
        }
        self.settle(&v.key, now)
    }

    /// A certificate Certify issued. Returns the certificate the
    /// Dataplane's `mtls` status should show: this one, unless another
    /// process holds the identity at once and came first (then that one's).
    pub(super) fn on_issued(
        &mut self,
        key: &ProxyKey,
        e: &Issuance,
        now: SystemTime,
    ) -> Option<Issuance> {
        let Some(id) = e.holder.identity() else {
            return Some(e.clone());
        };
        let d = self.dataplanes.entry(key.clone()).or_default();
        d.acts(&id, &e.holder, now);
        if let Some(h) = d.holders.get_mut(&id) {
            h.cert = Some(e.clone());
        }
        let filtered = d.conflict(now) || d.filtering;
        let shown = self.settle(key, now);
        if filtered { shown } else { Some(e.clone()) }
    }

    /// Forgets a deleted Dataplane.
    pub(super) fn remove(&mut self, key: &ProxyKey) {
        self.dataplanes.remove(key);
        self.written.remove(key);
    }

    /// A stored `DuplicateHolder` condition this instance wrote before a
    /// restart: it is removed on the next write unless still true.
    pub(super) fn stored(&mut self, key: &ProxyKey, c: Option<&Condition>, instance: &str) {
        if let Some(c) = c
            && c.message.contains(&format!("control plane {instance})"))
        {
            self.written.insert(key.clone(), c.message.clone());
        }
    }

    /// Drops holders that stayed away for [`HOLDER_TTL`]; returns the
    /// certificates to show where that changed which one the status shows.
    /// A Dataplane whose holders all have their stream open (every
    /// connected proxy, normally) costs one look.
    pub(super) fn expire(&mut self, now: SystemTime) -> Vec<(ProxyKey, Issuance)> {
        let mut shown = Vec::new();
        self.dataplanes.retain(|key, d| {
            if !d.filtering && d.holders.values().all(|h| h.open) {
                return true;
            }
            if let Some(e) = d.settle(now) {
                shown.push((key.clone(), e));
            }
            !d.holders.is_empty()
        });
        shown
    }

    /// [`DataplaneHolders::settle`] for `key`, forgetting a Dataplane left
    /// without holders (the condition's write still removes what was
    /// written).
    fn settle(&mut self, key: &ProxyKey, now: SystemTime) -> Option<Issuance> {
        let d = self.dataplanes.get_mut(key)?;
        let shown = d.settle(now);
        if d.holders.is_empty() {
            self.dataplanes.remove(key);
        }
        shown
    }

    /// The condition `key` should carry now, if any.
    fn condition(&self, key: &ProxyKey, now: SystemTime, instance: &str) -> Option<Condition> {
        self.dataplanes.get(key)?.condition(now, instance)
    }

    /// Writes the conditions that changed since the last write: set while
    /// holders are concurrent, removed once they are not. Merges only this
    /// condition.
    pub(super) async fn write(
        &mut self,
        resources: &ResourceService,
        instance: &str,
        now: SystemTime,
    ) {
        // Only Dataplanes whose holders were proven concurrent, or that
        // carry a condition we wrote: a flush costs nothing for the rest.
        let keys: HashSet<ProxyKey> = self
            .dataplanes
            .iter()
            .filter(|(_, d)| d.concurrent)
            .map(|(k, _)| k)
            .chain(self.written.keys())
            .cloned()
            .collect();
        for key in keys {
            let want = self.condition(&key, now, instance);
            let message = want.as_ref().map(|c| c.message.clone());
            if self.written.get(&key) == message.as_ref() {
                continue;
            }
            let r = writer::merge(
                resources,
                Kind::Dataplane,
                Some(&key.mesh),
                &key.name,
                |r| match &want {
                    Some(c) => r.set_condition(c.clone()),
                    None => r.status.conditions.retain(|c| c.type_ != DUPLICATE_HOLDER),
                },
            )
            .await;
            match r {
                Ok(_) => match message {
                    Some(m) => {
                        tracing::warn!(proxy = %key, message = %m, "two processes hold one Dataplane's identity");
                        self.written.insert(key, m);
                    }
                    None => {
                        tracing::info!(proxy = %key, "only one process holds the Dataplane's identity again");
                        self.written.remove(&key);
                    }
                },
                Err(super::StatusError::Resource(ResourceError::NotFound(_))) => {
                    self.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(proxy = %key, error = %e, "status: cannot write the Dataplane's DuplicateHolder condition; retrying");
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "holders_tests.rs"]
mod tests;
