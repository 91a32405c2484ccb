//! What one stream asked for, per type: wildcard and/or explicit names.
//!
//! Owns the subscription rules of the xDS protocol (legacy wildcard,
//! explicit `*`, SotW "full list every time" vs delta subscribe and
//! unsubscribe). It must never look at resources: it only answers "does the
//! client want this name".

use super::types::NameMap;

/// The explicit wildcard name.
pub(crate) const WILDCARD: &str = "*";

/// One type's subscription on one stream.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    wildcard: bool,
    /// Wildcard because the first request named nothing (legacy form).
    legacy: bool,
    names: Names,
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
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// SotW: every request carries the full list. An empty list on the
    /// first request (or while still in legacy wildcard) means wildcard;
    /// otherwise `*` in the list means wildcard. Returns whether the
    /// subscription changed.
    pub(crate) fn replace(&mut self, names: &[String]) -> bool {
        let (wildcard, legacy, requested) = (self.wildcard, self.legacy, self.requested);
        let mut names_changed = false;
        if names.is_empty() {
            if !self.requested || self.legacy {
                self.wildcard = true;
                self.legacy = true;
            } else {
                self.wildcard = false;
            }
            names_changed = !self.names.is_empty();
            self.names.clear();
        } else {
            self.legacy = false;
            self.wildcard = names.iter().any(|n| n == WILDCARD);
            // The common request (an ACK) repeats the list it sent before:
            // compare before building a new set.
            let same = {
                let mut given: Vec<&str> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| *n != WILDCARD)
                    .collect();
                given.sort_unstable();
                given.dedup();
                given.len() == self.names.len()
                    && given.iter().zip(self.names.iter()).all(|(a, b)| *a == b)
            };
            if !same {
                self.names = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| *n != WILDCARD)
                    .collect();
                names_changed = true;
            }
        }
        self.requested = true;
        names_changed
            || (wildcard, legacy, requested) != (self.wildcard, self.legacy, self.requested)
    }

    /// Delta: adds and removes names. A first request that subscribes to
    /// nothing is a legacy wildcard subscription. Returns whether the
    /// subscription changed.
    pub(crate) fn update(&mut self, subscribe: &[String], unsubscribe: &[String]) -> bool {
        let (wildcard, legacy, requested) = (self.wildcard, self.legacy, self.requested);
        let mut names_changed = false;
        if !self.requested && subscribe.is_empty() {
            self.wildcard = true;
            self.legacy = true;
        }
        for n in subscribe {
            if n == WILDCARD {
                self.wildcard = true;
            } else {
                names_changed |= self.names.insert(n);
            }
        }
        for n in unsubscribe {
            if n == WILDCARD {
                self.wildcard = false;
                self.legacy = false;
            } else {
                names_changed |= self.names.remove(n);
            }
        }
        self.requested = true;
        names_changed
            || (wildcard, legacy, requested) != (self.wildcard, self.legacy, self.requested)
    }
}

/// A set of names, sorted (see [`NameMap`]).
pub(crate) type Names = NameMap<()>;

impl Names {
    /// Whether `name` is in the set.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Adds `name`; whether it was new.
    pub(crate) fn insert(&mut self, name: &str) -> bool {
        self.put(name, (), |_| false)
    }

    /// The names, sorted.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.keys()
    }
}

impl<'a> FromIterator<&'a str> for Names {
    fn from_iter<I: IntoIterator<Item = &'a str>>(items: I) -> Self {
        NameMap::from_items(items.into_iter().map(|n| (n.into(), ())))
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
    fn repeating_a_subscription_changes_nothing() {
        let mut sotw = Subscription::default();
        assert!(sotw.replace(&s(&["b", "a", "a"])));
        assert!(!sotw.replace(&s(&["a", "b"])), "same set, other order");
        assert!(sotw.replace(&s(&["a", "c"])));
        assert!(sotw.wants("c") && !sotw.wants("b"));
        assert!(sotw.replace(&s(&["a", "c", "*"])), "adding * is a change");
        let mut delta = Subscription::default();
        assert!(delta.update(&s(&["a"]), &[]));
        assert!(!delta.update(&s(&["a"]), &[]), "subscribing again");
        assert!(
            !delta.update(&[], &s(&["zz"])),
            "unsubscribing a name never held"
        );
        assert!(delta.update(&[], &s(&["a"])));
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
