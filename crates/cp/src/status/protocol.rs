//! `ProtocolAgreed` on Dataplanes: a `kuma.io/service` whose inbounds
//! declare different `kuma.io/protocol`s is served as TCP (kuma#6825), and
//! every Dataplane with an inbound of it says so, naming the others.
//!
//! Owns [`ServiceProtocols`], the status task's index of what each
//! Dataplane's tagged inbounds declare, patched from the change feed (a
//! Dataplane whose declarations did not change costs one parse, no
//! listing). The protocol of an inbound and the "all agree, else TCP" rule
//! are the translator's (`meshlink_xds::translate::protocol`); this module
//! only finds the services that fall under its "else" and words it. The
//! condition is present only while it is `False`: it is removed once the
//! inbounds agree, so 10,000 agreeing Dataplanes cost no write. It must
//! never decide a protocol itself.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use meshlink_api::spec::DataplaneSpec;
use meshlink_api::{Condition, ConditionStatus};
use meshlink_xds::owner::ProxyKey;
use meshlink_xds::translate::protocol::{PROTOCOL_TAG, Protocol, inbound};

/// The condition type, on Dataplanes and MeshServices.
pub(crate) const CONDITION: &str = "ProtocolAgreed";
/// Its reason while inbounds disagree.
pub(crate) const MISMATCH: &str = "ProtocolMismatch";
/// How many other Dataplanes a message names.
pub(crate) const SHOWN: usize = 5;

/// The value `kuma.io/protocol` takes for `p`.
pub(crate) fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Http => "http",
        Protocol::Http2 => "http2",
        Protocol::Grpc => "grpc",
    }
}

/// One tagged inbound: its service, port and declared protocol.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Declared {
    service: String,
    port: u16,
    protocol: Protocol,
}

/// The tagged inbounds of `dp`, sorted.
fn declared(dp: &DataplaneSpec) -> Vec<Declared> {
    let mut out: Vec<Declared> = dp
        .networking
        .inbound
        .iter()
        .filter_map(|i| {
            Some(Declared {
                service: i.service()?.to_owned(),
                port: i.port.get(),
                protocol: inbound(&i.tags),
            })
        })
        .collect();
    out.sort();
    out
}

/// What the status task knows about the protocols tag-based services'
/// inbounds declare.
#[derive(Default)]
pub(super) struct ServiceProtocols {
    /// Each Dataplane's tagged inbounds.
    by_dataplane: HashMap<ProxyKey, Vec<Declared>>,
    /// (mesh, service) → declared protocol → Dataplanes declaring it.
    by_service: HashMap<(String, String), BTreeMap<Protocol, BTreeSet<String>>>,
    /// Meshes in `meshServices.mode: Exclusive` (no tag destinations).
    exclusive: HashSet<String>,
    /// Services whose Dataplanes are to be re-evaluated.
    dirty: HashSet<(String, String)>,
    /// Dataplanes to re-evaluate.
    recheck: HashSet<ProxyKey>,
    /// The message of the condition last written (or found stored) per
    /// Dataplane; absent: none is stored.
    written: HashMap<ProxyKey, String>,
}

// === impl ServiceProtocols ===

impl ServiceProtocols {
    /// Records `dp` as the spec of Dataplane `key` (listed or changed).
    pub(super) fn upsert(&mut self, key: &ProxyKey, dp: &DataplaneSpec) {
        let now = declared(dp);
        if self.by_dataplane.get(key) == Some(&now) {
            return;
        }
        self.forget(key);
        for d in &now {
            let service = (key.mesh.clone(), d.service.clone());
            self.by_service
                .entry(service.clone())
                .or_default()
                .entry(d.protocol)
                .or_default()
                .insert(key.name.clone());
            self.dirty.insert(service);
        }
        self.by_dataplane.insert(key.clone(), now);
        self.recheck.insert(key.clone());
    }

    /// Dataplane `key` was deleted.
    pub(super) fn remove(&mut self, key: &ProxyKey) {
        self.forget(key);
        self.recheck.remove(key);
        self.written.remove(key);
    }

    fn forget(&mut self, key: &ProxyKey) {
        let Some(old) = self.by_dataplane.remove(key) else {
            return;
        };
        for d in old {
            let service = (key.mesh.clone(), d.service);
            if let Some(m) = self.by_service.get_mut(&service) {
                if let Some(names) = m.get_mut(&d.protocol) {
                    names.remove(&key.name);
                    if names.is_empty() {
                        m.remove(&d.protocol);
                    }
                }
                if m.is_empty() {
                    self.by_service.remove(&service);
                }
            }
            self.dirty.insert(service);
        }
        self.recheck.insert(key.clone());
    }

    /// The condition found stored on Dataplane `key` at start-up.
    pub(super) fn stored(&mut self, key: &ProxyKey, c: Option<&Condition>) {
        if let Some(c) = c {
            self.written.insert(key.clone(), c.message.clone());
        }
    }

    /// Records mesh `mesh`'s `meshServices.mode` (Exclusive: `kuma.io/service`
    /// tags are no destinations, so their protocols do not matter).
    pub(super) fn set_exclusive(&mut self, mesh: &str, exclusive: bool) {
        let changed = if exclusive {
            self.exclusive.insert(mesh.to_owned())
        } else {
            self.exclusive.remove(mesh)
        };
        if changed {
            let of_mesh = self.by_service.keys().filter(|(m, _)| m == mesh).cloned();
            self.dirty.extend(of_mesh.collect::<Vec<_>>());
        }
    }

    /// The Dataplanes to re-evaluate now (taken).
    pub(super) fn take_work(&mut self) -> Vec<ProxyKey> {
        let mut out = std::mem::take(&mut self.recheck);
        for (mesh, service) in std::mem::take(&mut self.dirty) {
            // Dataplanes that left the service are in `recheck` already.
            let Some(m) = self.by_service.get(&(mesh.clone(), service)) else {
                continue;
            };
            for name in m.values().flatten() {
                out.insert(ProxyKey::new(mesh.as_str(), name.as_str()));
            }
        }
        out.into_iter().collect()
    }

    /// Dataplane `key` must be evaluated again (a write failed).
    pub(super) fn retry(&mut self, key: ProxyKey) {
        self.recheck.insert(key);
    }

    /// What is stored now for `key`.
    pub(super) fn written(&self, key: &ProxyKey) -> Option<&str> {
        self.written.get(key).map(String::as_str)
    }

    /// `message` (or none) is stored now for `key`.
    pub(super) fn wrote(&mut self, key: &ProxyKey, message: Option<String>) {
        match message {
            Some(m) => self.written.insert(key.clone(), m),
            None => self.written.remove(key),
        };
    }

    /// The `ProtocolAgreed` condition Dataplane `key` should carry: `False`
    /// while one of its inbounds' services has inbounds that declare
    /// different protocols, else none.
    pub(super) fn condition(&self, key: &ProxyKey) -> Option<Condition> {
        if self.exclusive.contains(&key.mesh) {
            return None;
        }
        let mine = self.by_dataplane.get(key)?;
        let parts: Vec<String> = mine.iter().filter_map(|d| self.mismatch(key, d)).collect();
        if parts.is_empty() {
            return None;
        }
        Some(Condition::now(
            CONDITION,
            ConditionStatus::False,
            MISMATCH,
            parts.join("; "),
        ))
    }

    /// The sentence about inbound `d` of `key`, if its service's inbounds
    /// disagree.
    fn mismatch(&self, key: &ProxyKey, d: &Declared) -> Option<String> {
        let by = self
            .by_service
            .get(&(key.mesh.clone(), d.service.clone()))?;
        if by.len() < 2 {
            return None;
        }
        let others: Vec<String> = by
            .iter()
            .filter(|(p, _)| **p != d.protocol)
            .flat_map(|(p, names)| {
                names
                    .iter()
                    .filter(move |n| **n != key.name)
                    .map(move |n| format!("{n} ({})", protocol_name(*p)))
            })
            .collect();
        let shown = bounded(&others);
        let inside = if others.is_empty() {
            " (other inbounds of this Dataplane declare otherwise)".to_owned()
        } else {
            format!(", but other Dataplanes of it declare otherwise: {shown}")
        };
        Some(format!(
            "inbound {port} of service {service} declares {proto}{inside}; {service} is \
             served as TCP until every inbound of it declares the same protocol: set the \
             same {PROTOCOL_TAG} tag on all of them",
            port = d.port,
            service = d.service,
            proto = protocol_name(d.protocol),
        ))
    }
}

/// `a, b, c (and 4 more)`: at most [`SHOWN`] names.
pub(crate) fn bounded(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" (and {} more)", names.len() - SHOWN));
    }
    out
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
