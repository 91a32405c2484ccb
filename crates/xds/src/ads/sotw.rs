//! The state-of-the-world engine: one stream's SotW protocol, no I/O.
//!
//! Owns ACK/NACK and stale-nonce handling, wildcard rules, and the
//! make-before-break order of SotW responses. It must never send a NACKed
//! version again, or a response whose content the client already holds.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::ControlPlane;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use tonic::Status;

use super::ProxyState;
use super::types::{
    Nonces, Outcome, TypeState, TypeStates, is_full_state, known_type, version_over, wanted,
};
use crate::translate::{Snapshot, TYPE_ORDER};

/// SotW protocol state of one stream.
#[derive(Debug)]
pub(crate) struct SotwEngine {
    types: TypeStates,
    nonces: Nonces,
    control_plane: String,
}

// === impl SotwEngine ===

impl SotwEngine {
    /// A new stream's engine; `control_plane` identifies this instance in
    /// every response.
    pub(crate) fn new(control_plane: String) -> Self {
        Self {
            types: TypeStates::default(),
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
        req: &DiscoveryRequest,
        state: Option<&ProxyState>,
    ) -> Result<Outcome<DiscoveryResponse>, Status> {
        let t = known_type(&req.type_url)?;
        let mut out = Outcome::default();
        let ts = self.types.entry(t);
        let first = !ts.sub.requested();
        if !req.response_nonce.is_empty() {
            if !ts.is_latest(&req.response_nonce) {
                // Stale: it answers a response that a newer one replaced.
                tracing::trace!(type_url = t, nonce = %req.response_nonce, "stale nonce ignored");
                return Ok(out);
            }
            let version = ts
                .report
                .last_sent_version
                .as_deref()
                .unwrap_or_default()
                .to_owned();
            match &req.error_detail {
                Some(err) => {
                    ts.nacked_version = Some(version.as_str().into());
                    ts.nacked(&req.response_nonce, &version, err.message.clone());
                    out.nacks.push((t, err.message.clone()));
                }
                None => {
                    let latency = ts.acked(&req.response_nonce, &version);
                    out.acks.push((t, latency));
                }
            }
        }
        let changed = ts.sub.replace(&req.resource_names);
        if changed || first {
            match state {
                Some(state) => {
                    if let Some(resp) = self.respond(t, &state.snapshot, None, None) {
                        out.responses.push(resp);
                    }
                    self.synced(t, true);
                }
                None => self.synced(t, false),
            }
        }
        Ok(out)
    }

    /// Records whether type `t`'s response was worked out against the
    /// state last handled (see `TypeState::synced`).
    fn synced(&mut self, t: &'static str, synced: bool) {
        if let Some(ts) = self.types.get_mut(t) {
            ts.synced = synced && ts.sub.requested();
        }
    }

    /// Pushes what changed between the previous state and `state`, in
    /// make-before-break order: every type in [`TYPE_ORDER`] first, with
    /// Listeners and Clusters that lost resources still listing them; then,
    /// in reverse order, the exact sets. A type whose set `state` shares
    /// with `prev` is skipped, as in the delta engine.
    pub(crate) fn on_state(
        &mut self,
        prev: Option<&ProxyState>,
        state: &ProxyState,
    ) -> Vec<DiscoveryResponse> {
        let mut out = Vec::new();
        let mut deferred = Vec::new();
        let mut compared = Vec::new();
        for t in TYPE_ORDER {
            let Some(ts) = self.types.get(t) else {
                continue;
            };
            if ts.synced && prev.is_some_and(|p| p.snapshot.shares_type(&state.snapshot, t)) {
                continue;
            }
            compared.push(t);
            let keep = match prev {
                Some(prev) if is_full_state(t) => {
                    removed_bodies(ts, &prev.snapshot, &state.snapshot, t)
                }
                _ => Vec::new(),
            };
            if !keep.is_empty() {
                deferred.push(t);
            }
            let keep = (!keep.is_empty()).then_some(keep);
            if let Some(r) = self.respond(t, &state.snapshot, keep, Some(state)) {
                out.push(r);
            }
        }
        for t in deferred.into_iter().rev() {
            if let Some(r) = self.respond(t, &state.snapshot, None, Some(state)) {
                out.push(r);
            }
        }
        for t in compared {
            self.synced(t, true);
        }
        out
    }

    /// The response for type `t` if its content differs from what was sent
    /// and from what was NACKed. `keep` adds resources that are going away
    /// (make-before-break); `state` attributes the push to a change.
    fn respond(
        &mut self,
        t: &'static str,
        snap: &Snapshot,
        keep: Option<Vec<(String, String, Any)>>,
        state: Option<&ProxyState>,
    ) -> Option<DiscoveryResponse> {
        let ts = self.types.get_mut(t)?;
        if !ts.sub.requested() {
            return None;
        }
        // By reference: nothing is copied unless a response is sent.
        let mut items: BTreeMap<&str, (&str, &Any)> = wanted(snap.resources(t), &ts.sub)
            .map(|(n, r)| (n.as_str(), (r.version.as_str(), &r.resource)))
            .collect();
        for (name, version, any) in keep.iter().flatten() {
            items.entry(name).or_insert((version, any));
        }
        let version = version_over(items.iter().map(|(n, (v, _))| (*n, *v)));
        if ts.report.last_sent_version.as_deref() == Some(version.as_str())
            || ts.nacked_version.as_deref() == Some(version.as_str())
        {
            return None;
        }
        if items.is_empty() && !is_full_state(t) && ts.sent.is_empty() {
            // Nothing the client asked for exists yet: say nothing, push
            // when it appears.
            return None;
        }
        ts.nacked_version = None;
        ts.sent = items.iter().map(|(n, (v, _))| (*n, *v)).collect();
        let nonce = self.nonces.next();
        ts.sent_response(&nonce, &version, state.map(|s| s.changed_at));
        Some(DiscoveryResponse {
            version_info: version,
            resources: items.into_values().map(|(_, any)| any.clone()).collect(),
            type_url: t.to_owned(),
            nonce,
            control_plane: Some(ControlPlane {
                identifier: self.control_plane.clone(),
            }),
            ..Default::default()
        })
    }
}

/// Resources of `t` the client holds that the new snapshot drops, with
/// their old bodies (from `prev`), to keep them for one more response.
fn removed_bodies(
    ts: &TypeState,
    prev: &Snapshot,
    next: &Snapshot,
    t: &'static str,
) -> Vec<(String, String, Any)> {
    let next_names: BTreeSet<&str> = wanted(next.resources(t), &ts.sub)
        .map(|(n, _)| n.as_str())
        .collect();
    ts.sent
        .keys()
        .filter(|n| !next_names.contains(n))
        .filter_map(|n| {
            let r = prev.get(t, n)?;
            Some((n.to_owned(), r.version.clone(), r.resource.clone()))
        })
        .collect()
}

#[cfg(test)]
#[path = "sotw_tests.rs"]
mod tests;
