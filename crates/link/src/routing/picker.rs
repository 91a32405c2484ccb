//! Balancing new flows for a routing key over its cheapest destinations.
//!
//! The rule: only the destinations at the lowest path cost take new
//! flows (this router's own connectors cost 0, so they win whenever they
//! exist). Among those, flows are shared in proportion to each router's
//! connector count by smooth weighted round robin (the nginx algorithm:
//! each pick adds every candidate's weight to its running score, takes
//! the highest score, ties to the smaller router id, and subtracts the
//! total from the winner), so weights 2:1 give A, B, A, A, B, A, ... When
//! a destination disappears, the next pick goes to the rest of its tier,
//! or to the next cheapest tier when it was the last (failover). The
//! caller may exclude routers it just failed to reach.
//!
//! Owns the per-key scores only; it never computes costs.

use std::collections::BTreeMap;

use super::table::{Destination, RoutingTable};
use super::wire::RouterId;

/// Running smooth-weighted-round-robin scores, per routing key and router.
#[derive(Debug, Clone, Default)]
pub(crate) struct Picker {
    scores: BTreeMap<String, BTreeMap<RouterId, i64>>,
}

impl Picker {
    /// Picks the destination for a new flow to `key` among `destinations`
    /// (cheapest first, as the table keeps them), skipping `excluded`.
    pub(crate) fn pick(
        &mut self,
        key: &str,
        destinations: &[Destination],
        excluded: &[RouterId],
    ) -> Option<Destination> {
        let mut candidates = destinations
            .iter()
            .filter(|d| !excluded.contains(&d.router));
        let first = candidates.next()?;
        let tier: Vec<&Destination> = std::iter::once(first)
            .chain(candidates.take_while(|d| d.cost == first.cost))
            .collect();
        if tier.len() == 1 {
            return Some(first.clone());
        }
        let scores = self.scores.entry(key.to_owned()).or_default();
        let mut total = 0_i64;
        let mut best: Option<(&Destination, i64)> = None;
        for destination in &tier {
            let weight = i64::from(destination.weight);
            total += weight;
            let score = scores.entry(destination.router.clone()).or_insert(0);
            *score += weight;
            if best.is_none_or(|(_, top)| *score > top) {
                best = Some((destination, *score));
            }
        }
        let (winner, _) = best?;
        if let Some(score) = scores.get_mut(&winner.router) {
            *score -= total;
        }
        Some(winner.clone())
    }

    /// Forgets the scores of keys and routers the table no longer has.
    pub(crate) fn retain(&mut self, table: &RoutingTable) {
        self.scores.retain(|key, scores| {
            let Some(destinations) = table.keys.get(key) else {
                return false;
            };
            scores.retain(|router, _| destinations.iter().any(|d| &d.router == router));
            !scores.is_empty()
        });
    }
}
