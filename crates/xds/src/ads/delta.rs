//! The delta (incremental) engine: one stream's delta protocol, no I/O.
//!
//! Owns subscribe/unsubscribe, `initial_resource_versions` on resume,
//! `removed_resources`, ACK/NACK bookkeeping, and make-before-break order
//! (updates in [`TYPE_ORDER`], removals last in reverse). It must never send
//! a resource at a version the client already holds or rejected.

use std::collections::VecDeque;

use envoy_types::pb::envoy::config::core::v3::ControlPlane;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};
use tonic::Status;

use super::ProxyState;
use super::types::{Nonces, Outcome, TypeStates, gone, known_type, wanted};
use crate::translate::{Snapshot, TYPE_ORDER};

/// Unanswered responses remembered per stream; a client that never ACKs
/// cannot grow the map beyond this.
const MAX_IN_FLIGHT: usize = 64;

/// Which half of a make-before-break push to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Updates,
    Removals,
    Both,
}

/// Delta protocol state of one stream.
#[derive(Debug)]
pub(crate) struct DeltaEngine {
    types: TypeStates,
    /// Nonce → the snapshot type version it carried, until ACKed/NACKed
    /// (at most [`MAX_IN_FLIGHT`], oldest dropped first). A queue in nonce
    /// order: a stream has one or two responses in flight, and a map node
    /// was ~370 bytes per stream.
    in_flight: VecDeque<(u64, String)>,
    nonces: Nonces,
    control_plane: String,
}

// === impl DeltaEngine ===

impl DeltaEngine {
    /// A new stream's engine.
    pub(crate) fn new(control_plane: String) -> Self {
        Self {
            types: TypeStates::default(),
            in_flight: VecDeque::new(),
            nonces: Nonces::default(),
            control_plane,
        }
    }

    /// Per-type state, for reports.
    pub(crate) fn types(&self) -> &TypeStates {
        &self.types
    }

    /// Handles one request against the owner's current state (if any).
    pub(crate) fn on_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        state: Option<&ProxyState>,
    ) -> Result<Outcome<DeltaDiscoveryResponse>, Status> {
        let t = known_type(&req.type_url)?;
        let mut out = Outcome::default();
        let ts = self.types.entry(t);
        let first = !ts.sub.requested();
        if !req.response_nonce.is_empty() {
            let version = req
                .response_nonce
                .parse::<u64>()
                .ok()
                .and_then(|n| {
                    let i = self.in_flight.iter().position(|(m, _)| *m == n)?;
                    self.in_flight.remove(i).map(|(_, v)| v)
                })
                .unwrap_or_default();
            match &req.error_detail {
                Some(err) => {
                    ts.nacked(&req.response_nonce, &version, err.message.clone());
                    out.nacks.push((t, err.message.clone()));
                }
                None => {
                    let latency = ts.acked(&req.response_nonce, &version);
                    out.acks.push((t, latency));
                }
            }
        }
        if first {
            // Resume: the client says what it already holds.
            for (name, version) in &req.initial_resource_versions {
                ts.sent.insert(name, version);
            }
        }
        let changed = ts.sub.update(
            &req.resource_names_subscribe,
            &req.resource_names_unsubscribe,
        );
        for name in &req.resource_names_unsubscribe {
            ts.sent.remove(name);
        }
        if changed || first {
            match state {
                Some(state) => {
                    match self.respond(t, &state.snapshot, Part::Both, None) {
                        Some(r) => out.responses.push(r),
                        None if self.never_answered(t) => {
                            out.responses.push(self.empty(t, &state.snapshot))
                        }
                        None => {}
                    }
                    self.synced(t, true);
                }
                None => self.synced(t, false),
            }
        }
        Ok(out)
    }

    /// Pushes what changed between `prev` (the state this engine last
    /// handled, if any) and `state`: updates in [`TYPE_ORDER`], then
    /// removals in reverse order. A type whose set `state` shares with
    /// `prev` is skipped without comparing it, unless a request changed
    /// what the client holds or wants since `prev`.
    pub(crate) fn on_state(
        &mut self,
        prev: Option<&ProxyState>,
        state: &ProxyState,
    ) -> Vec<DeltaDiscoveryResponse> {
        let mut out = Vec::new();
        let mut diff = Vec::with_capacity(TYPE_ORDER.len());
        for t in TYPE_ORDER {
            let unchanged = self.types.get(t).is_some_and(|ts| ts.synced)
                && prev.is_some_and(|p| p.snapshot.shares_type(&state.snapshot, t));
            if !unchanged {
                diff.push(t);
            }
        }
        for &t in &diff {
            if let Some(r) = self.respond(t, &state.snapshot, Part::Updates, Some(state)) {
                out.push(r);
            } else if self.never_answered(t) {
                // Requested before the first state existed: answer now.
                out.push(self.empty(t, &state.snapshot));
            }
        }
        for &t in diff.iter().rev() {
            if let Some(r) = self.respond(t, &state.snapshot, Part::Removals, Some(state)) {
                out.push(r);
            }
        }
        for t in diff {
            self.synced(t, true);
        }
        out
    }

    /// Records whether what type `t` sent matches the state last handled.
    fn synced(&mut self, t: &'static str, synced: bool) {
        if let Some(ts) = self.types.get_mut(t) {
            ts.synced = synced && ts.sub.requested();
        }
    }

    fn respond(
        &mut self,
        t: &'static str,
        snap: &Snapshot,
        part: Part,
        state: Option<&ProxyState>,
    ) -> Option<DeltaDiscoveryResponse> {
        let ts = self.types.get_mut(t)?;
        if !ts.sub.requested() {
            return None;
        }
        let resources = snap.resources(t);
        let updates: Vec<Resource> = if part == Part::Removals {
            Vec::new()
        } else {
            wanted(resources, &ts.sub)
                .filter(|(n, r)| ts.sent.version(n) != Some(r.version.as_str()))
                .map(|(n, r)| Resource {
                    name: n.clone(),
                    version: r.version.clone(),
                    resource: Some(r.resource.clone()),
                    ..Default::default()
                })
                .collect()
        };
        let removed: Vec<String> = if part == Part::Updates {
            Vec::new()
        } else {
            gone(&ts.sent, resources, &ts.sub).into_iter().collect()
        };
        if updates.is_empty() && removed.is_empty() {
            return None;
        }
        for r in &updates {
            ts.sent.insert(&r.name, &r.version);
        }
        for n in &removed {
            ts.sent.remove(n);
        }
        let version = snap.version_of(t);
        let nonce = self.nonces.next();
        ts.sent_response(&nonce, version, state.map(|s| s.changed_at));
        self.remember(&nonce, version);
        Some(DeltaDiscoveryResponse {
            system_version_info: version.to_owned(),
            resources: updates,
            type_url: t.to_owned(),
            removed_resources: removed,
            nonce,
            control_plane: Some(ControlPlane {
                identifier: self.control_plane.clone(),
            }),
            ..Default::default()
        })
    }

    /// Whether `t` was requested but no response was sent for it yet.
    fn never_answered(&self, t: &'static str) -> bool {
        self.types
            .get(t)
            .is_some_and(|ts| ts.sub.requested() && ts.nonce.is_none())
    }

    fn remember(&mut self, nonce: &str, version: &str) {
        if let Ok(n) = nonce.parse::<u64>() {
            self.in_flight.push_back((n, version.to_owned()));
        }
        while self.in_flight.len() > MAX_IN_FLIGHT {
            self.in_flight.pop_front();
        }
    }

    /// An empty response, so a client waiting for its first answer on a
    /// type learns there is nothing (yet).
    fn empty(&mut self, t: &'static str, snap: &Snapshot) -> DeltaDiscoveryResponse {
        let version = snap.version_of(t);
        let nonce = self.nonces.next();
        if let Some(ts) = self.types.get_mut(t) {
            ts.sent_response(&nonce, version, None);
        }
        self.remember(&nonce, version);
        DeltaDiscoveryResponse {
            system_version_info: version.to_owned(),
            type_url: t.to_owned(),
            nonce,
            control_plane: Some(ControlPlane {
                identifier: self.control_plane.clone(),
            }),
            ..Default::default()
        }
    }
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
