//! Tags: the `key: value` pairs that name a service and select inbounds.
//!
//! Owns [`Tags`], the map type of every `tags` field (Dataplane inbounds,
//! outbounds and gateways, MeshSubset target refs, MeshService selectors).
//! A `BTreeMap` would take a whole node, about 0.5 KiB, for the one or two
//! tags an inbound usually has; the control plane keeps every Dataplane of
//! a mesh in memory, so tags are a sorted boxed slice instead: one
//! allocation sized to its entries. It reads and writes as a YAML/JSON map,
//! exactly like the `BTreeMap` it replaces (sorted by key; a key given twice
//! keeps its last value).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map of tags, sorted by key, in one allocation.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tags(Box<[(String, String)]>);

/// An iterator over `(key, value)` pairs of [`Tags`], in key order.
pub(super) type Iter<'a> = std::iter::Map<
    std::slice::Iter<'a, (String, String)>,
    fn(&'a (String, String)) -> (&'a String, &'a String),
>;

impl Tags {
    /// No tags.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of tag `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Whether tag `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The number of tags.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no tags.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(key, value)` pairs, in key order.
    pub fn iter(&self) -> Iter<'_> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// Whether every tag of `subset` is set here to the same value.
    pub fn includes(&self, subset: &Tags) -> bool {
        subset.iter().all(|(k, v)| self.get(k) == Some(v))
    }

    /// Sets tag `key` to `value`, returning its previous value.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                let mut pairs = std::mem::take(&mut self.0).into_vec();
                pairs.insert(i, (key, value));
                self.0 = pairs.into_boxed_slice();
                None
            }
        }
    }
}

impl From<BTreeMap<String, String>> for Tags {
    fn from(map: BTreeMap<String, String>) -> Self {
        Self(map.into_iter().collect())
    }
}

impl<K: Into<String>, V: Into<String>, const N: usize> From<[(K, V); N]> for Tags {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect()
    }
}

impl FromIterator<(String, String)> for Tags {
    /// Sorts by key; a key given twice keeps its last value (as a map does).
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        BTreeMap::from_iter(iter).into()
    }
}

impl<'a> IntoIterator for &'a Tags {
    type Item = (&'a String, &'a String);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Tags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Tags {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Tags {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_as_a_sorted_map() {
        let tags: Tags =
            serde_json::from_str(r#"{"version":"v1","kuma.io/service":"web"}"#).unwrap();
        assert_eq!(tags.get("kuma.io/service").map(String::as_str), Some("web"));
        assert_eq!(tags.get("zone"), None);
        assert_eq!(
            serde_json::to_string(&tags).unwrap(),
            r#"{"kuma.io/service":"web","version":"v1"}"#
        );
        assert_eq!(
            format!("{tags:?}"),
            r#"{"kuma.io/service": "web", "version": "v1"}"#
        );
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value() {
        let tags: Tags = [("a", "1"), ("b", "2"), ("a", "3")].into();
        assert_eq!(tags.len(), 2);
        assert_eq!(tags.get("a").map(String::as_str), Some("3"));
    }

    #[test]
    fn a_non_string_value_is_refused() {
        let err = serde_json::from_str::<Tags>(r#"{"version": 2}"#).unwrap_err();
        assert!(err.to_string().contains("expected a string"), "{err}");
    }

    #[test]
    fn insert_keeps_the_order_and_replaces_a_value() {
        let mut tags = Tags::new();
        assert_eq!(tags.insert("b".into(), "2".into()), None);
        assert_eq!(tags.insert("a".into(), "1".into()), None);
        assert_eq!(tags.insert("b".into(), "3".into()), Some("2".into()));
        let pairs: Vec<_> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(pairs, ["a=1", "b=3"]);
        assert!(tags.includes(&[("b", "3")].into()));
        assert!(!tags.includes(&[("b", "2")].into()));
    }
}
