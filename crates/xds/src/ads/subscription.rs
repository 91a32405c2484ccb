//! What one stream asked for, per type: wildcard and/or explicit names.
//!
//! Owns the subscription rules of the xDS protocol (legacy wildcard,
//! explicit `*`, SotW "full list every time" vs delta subscribe and
//! unsubscribe). It must never look at resources: it only answers "does the
//! client want this name".

use std::collections::BTreeSet;

/// The explicit wildcard name.
pub(crate) const WILDCARD: &str = "*";

/// One type's subscription on one stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    wildcard: bool,
    /// Wildcard because the first request named nothing (legacy form).
    legacy: bool,
    names: BTreeSet<String>,
    requested: bool,
}

// === impl Subscription ===

impl Subscription {
    /// Whether the client ever sent a request for this type.
    pub(crate) fn requested(&self) -> bool {
        self.requested
    }

    /// Whether the client wants `name`.
    pub(crate) fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    /// Whether the client subscribed to everything of this type.
    pub(crate) fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// Explicitly subscribed names.
    pub(crate) fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// SotW: every request carries the full list. An empty list on the
    /// first request (or while still in legacy wildcard) means wildcard;
    /// otherwise `*` in the list means wildcard. Returns whether the
    /// subscription changed.
    pub(crate) fn replace(&mut self, names: &[String]) -> bool {
        let before = self.clone();
        if names.is_empty() {
            if !self.requested || self.legacy {
                self.wildcard = true;
                self.legacy = true;
            } else {
                self.wildcard = false;
            }
            self.names.clear();
        } else {
            self.legacy = false;
            self.wildcard = names.iter().any(|n| n == WILDCARD);
            self.names = names.iter().filter(|n| *n != WILDCARD).cloned().collect();
        }
        self.requested = true;
        *self != before
    }

    /// Delta: adds and removes names. A first request that subscribes to
    /// nothing is a legacy wildcard subscription. Returns whether the
    /// subscription changed.
    pub(crate) fn update(&mut self, subscribe: &[String], unsubscribe: &[String]) -> bool {
        let before = self.clone();
        if !self.requested && subscribe.is_empty() {
            self.wildcard = true;
            self.legacy = true;
        }
        for n in subscribe {
            if n == WILDCARD {
                self.wildcard = true;
            } else {
                self.names.insert(n.clone());
            }
        }
        for n in unsubscribe {
            if n == WILDCARD {
                self.wildcard = false;
                self.legacy = false;
            } else {
                self.names.remove(n);
            }
        }
        self.requested = true;
        *self != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn sotw_legacy_wildcard_stays_until_names_are_given() {
        let mut sub = Subscription::default();
        assert!(sub.replace(&[]));
        assert!(sub.is_wildcard() && sub.wants("anything"));
        assert!(!sub.replace(&[]), "an empty list keeps legacy wildcard");
        assert!(sub.replace(&s(&["a"])));
        assert!(!sub.is_wildcard() && sub.wants("a") && !sub.wants("b"));
        assert!(sub.replace(&[]), "after explicit names, empty unsubscribes");
        assert!(!sub.wants("a"));
    }

    #[test]
    fn sotw_explicit_wildcard_with_names() {
        let mut sub = Subscription::default();
        sub.replace(&s(&["*", "a"]));
        assert!(sub.is_wildcard() && sub.wants("b"));
        sub.replace(&s(&["a"]));
        assert!(!sub.is_wildcard());
    }

    #[test]
    fn delta_subscribe_and_unsubscribe() {
        let mut sub = Subscription::default();
        assert!(sub.update(&s(&["a", "b"]), &[]));
        assert!(!sub.is_wildcard());
        assert!(sub.update(&[], &s(&["a"])));
        assert!(!sub.wants("a") && sub.wants("b"));
        let mut wild = Subscription::default();
        wild.update(&[], &[]);
        assert!(wild.is_wildcard());
        wild.update(&[], &s(&["*"]));
        assert!(!wild.is_wildcard());
    }
}
