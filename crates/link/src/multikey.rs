//! Choosing the routing key of a multi-key listener's new flow.
//!
//! Only keys with a reachable connector (a destination in the routing
//! table) are candidates. `Priority` takes them in the order given, so
//! the first reachable key gets every flow and, when it goes, the next
//! one does, and when it returns, it gets them back. `Weighted` picks one
//! by smooth weighted round robin (as the routing picker does for
//! destinations: add every candidate's weight to its score, take the
//! highest, ties to the earlier key, subtract the total from the winner),
//! so weights 3:1 give a, a, b, a, ... The other reachable keys follow
//! as fallbacks, should the chosen key's flow fail to open. With no key
//! reachable the first key is tried alone, so the flow fails with that
//! key's "no route" error.
//!
//! Owns the per-listener scores; it never opens a flow.

use std::sync::Mutex;

use crate::config::KeyStrategy;

/// A multi-key listener's strategy and its running scores.
#[derive(Debug)]
pub(crate) struct KeyChooser {
    strategy: KeyStrategy,
    /// Weighted only: one score per key, in the strategy's order.
    scores: Mutex<Vec<i64>>,
}

impl KeyChooser {
    pub(crate) fn new(strategy: KeyStrategy) -> Self {
        let n = strategy.keys().len();
        KeyChooser {
            strategy,
            scores: Mutex::new(vec![0; n]),
        }
    }

    /// The keys to try for a new flow, in order; `reachable` says whether
    /// a key has a reachable connector. Never empty for a valid strategy.
    pub(crate) fn candidates(&self, reachable: impl Fn(&str) -> bool) -> Vec<String> {
        let keys = self.strategy.keys();
        let up: Vec<usize> = (0..keys.len()).filter(|&i| reachable(keys[i])).collect();
        if up.is_empty() {
            return keys
                .first()
                .map(|k| vec![(*k).to_owned()])
                .unwrap_or_default();
        }
        let order = match &self.strategy {
            KeyStrategy::Priority(_) => up,
            KeyStrategy::Weighted(weighted) => self.weighted_order(weighted, &up),
        };
        order.into_iter().map(|i| keys[i].to_owned()).collect()
    }

    /// `up` (indices of reachable keys) with the smooth-WRR winner first,
    /// then the rest by descending weight.
    fn weighted_order(&self, weighted: &[(String, u32)], up: &[usize]) -> Vec<usize> {
        let mut scores = self.scores.lock().expect("key scores lock poisoned");
        let weight = |i: usize| i64::from(weighted[i].1);
        let mut total = 0;
        let mut best: Option<(usize, i64)> = None;
        for (i, score) in scores.iter_mut().enumerate() {
            if !up.contains(&i) {
                // An unreachable key rejoins with a clean slate.
                *score = 0;
                continue;
            }
            total += weight(i);
            *score += weight(i);
            if best.is_none_or(|(_, top)| *score > top) {
                best = Some((i, *score));
            }
        }
        let Some((winner, _)) = best else {
            return up.to_vec();
        };
        scores[winner] -= total;
        let mut rest: Vec<usize> = up.iter().copied().filter(|&i| i != winner).collect();
        rest.sort_by_key(|&i| std::cmp::Reverse(weight(i)));
        std::iter::once(winner).chain(rest).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priority(keys: &[&str]) -> KeyChooser {
        KeyChooser::new(KeyStrategy::Priority(
            keys.iter().map(|k| (*k).to_owned()).collect(),
        ))
    }

    #[test]
    fn priority_takes_the_first_reachable_key_and_returns_to_it() {
        let c = priority(&["a", "b", "c"]);
        assert_eq!(c.candidates(|_| true), ["a", "b", "c"]);
        assert_eq!(c.candidates(|k| k != "a"), ["b", "c"]);
        assert_eq!(c.candidates(|k| k == "c"), ["c"]);
        assert_eq!(c.candidates(|_| true), ["a", "b", "c"]);
        // Nothing reachable: the first key alone, so its error is reported.
        assert_eq!(c.candidates(|_| false), ["a"]);
    }

    #[test]
    fn weighted_shares_flows_by_weight_among_reachable_keys() {
        let c = KeyChooser::new(KeyStrategy::Weighted(vec![
            ("a".into(), 3),
            ("b".into(), 1),
        ]));
        let firsts: Vec<String> = (0..8).map(|_| c.candidates(|_| true)[0].clone()).collect();
        assert_eq!(firsts, ["a", "a", "b", "a", "a", "a", "b", "a"]);
        // The other reachable key is the fallback.
        assert_eq!(c.candidates(|_| true).len(), 2);
        // With a unreachable every flow goes to b, with no fallback.
        for _ in 0..5 {
            assert_eq!(c.candidates(|k| k == "b"), ["b"]);
        }
        // Any 40 picks in a row split exactly 30:10.
        let a = (0..40).filter(|_| c.candidates(|_| true)[0] == "a").count();
        assert_eq!(a, 30);
    }
}
