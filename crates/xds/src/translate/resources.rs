//! [`Resources`]: one type's resources of a snapshot, by name.
//!
//! Owns the memory layout of a type set. A proxy holds a handful of
//! resources per type (an identity and a trust bundle, two or three
//! clusters, one or two listeners), and every proxy of a 10,000-proxy mesh
//! holds its own sets; a `BTreeMap` node is eleven slots (~370 bytes here)
//! whatever the count. Up to [`SMALL`] resources sit in a sorted vector;
//! past that (a gateway, a proxy calling hundreds of services) the set
//! turns into a `BTreeMap`, so building a large set stays O(n log n).

use std::collections::BTreeMap;
use std::collections::btree_map;
use std::sync::Arc;

use super::snapshot::Versioned;

/// Resources a set keeps in a sorted vector before it becomes a map.
const SMALL: usize = 8;

/// Resources of one type by name, iterated in name order. Values are
/// shared: a resource built once (a service's Cluster or load assignment,
/// a Secret per issuance) is the same allocation in every proxy's
/// snapshot.
#[derive(Debug, Clone, Default)]
pub struct Resources(Repr);

#[derive(Debug, Clone)]
enum Repr {
    /// Sorted by name, unique names.
    Small(Vec<(String, Arc<Versioned>)>),
    Large(BTreeMap<String, Arc<Versioned>>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

/// Iterator over a set's `(name, resource)` pairs, in name order.
pub enum Iter<'a> {
    /// Over a small set.
    Small(std::slice::Iter<'a, (String, Arc<Versioned>)>),
    /// Over a large set.
    Large(btree_map::Iter<'a, String, Arc<Versioned>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a Arc<Versioned>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(n, r)| (n, r)),
            Iter::Large(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(it) => it.size_hint(),
            Iter::Large(it) => it.size_hint(),
        }
    }
}

impl<'a> IntoIterator for &'a Resources {
    type Item = (&'a String, &'a Arc<Versioned>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PartialEq for Resources {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::ops::Index<&str> for Resources {
    type Output = Arc<Versioned>;

    /// The resource named `name`; panics if there is none.
    fn index(&self, name: &str) -> &Arc<Versioned> {
        self.get(name).expect("no resource by that name")
    }
}

// === impl Resources ===

impl Resources {
    /// An empty set.
    pub const fn new() -> Self {
        Resources(Repr::Small(Vec::new()))
    }

    /// The resource named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Versioned>> {
        self.get_key_value(name).map(|(_, r)| r)
    }

    /// The resource named `name`, with its name.
    pub fn get_key_value(&self, name: &str) -> Option<(&String, &Arc<Versioned>)> {
        match &self.0 {
            Repr::Small(v) => {
                let i = find(v, name).ok()?;
                let (n, r) = &v[i];
                Some((n, r))
            }
            Repr::Large(m) => m.get_key_value(name),
        }
    }

    /// Whether a resource is named `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every `(name, resource)`, in name order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Small(v) => Iter::Small(v.iter()),
            Repr::Large(m) => Iter::Large(m.iter()),
        }
    }

    /// Every name, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(n, _)| n)
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(v) => v.len(),
            Repr::Large(m) => m.len(),
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Puts `resource` under `name`, replacing what was there (returned).
    pub fn insert(&mut self, name: String, resource: Arc<Versioned>) -> Option<Arc<Versioned>> {
        match &mut self.0 {
            Repr::Small(v) => match find(v, &name) {
                Ok(i) => Some(std::mem::replace(&mut v[i].1, resource)),
                Err(i) => {
                    if v.len() < SMALL {
                        v.insert(i, (name, resource));
                    } else {
                        let mut m: BTreeMap<_, _> = std::mem::take(v).into_iter().collect();
                        m.insert(name, resource);
                        self.0 = Repr::Large(m);
                    }
                    None
                }
            },
            Repr::Large(m) => m.insert(name, resource),
        }
    }

    /// Puts `resource` under `name` unless something is there already;
    /// whether it was put.
    pub fn insert_if_absent(&mut self, name: String, resource: Arc<Versioned>) -> bool {
        if self.contains_key(&name) {
            return false;
        }
        self.insert(name, resource);
        true
    }
}

fn find(v: &[(String, Arc<Versioned>)], name: &str) -> Result<usize, usize> {
    v.binary_search_by(|(n, _)| n.as_str().cmp(name))
}

impl FromIterator<(String, Arc<Versioned>)> for Resources {
    /// A set of `items`; of two items with one name, the last wins.
    fn from_iter<I: IntoIterator<Item = (String, Arc<Versioned>)>>(items: I) -> Self {
        let mut set = Resources::new();
        for (n, r) in items {
            set.insert(n, r);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Any;

    use super::*;

    fn res(v: &str) -> Arc<Versioned> {
        Arc::new(Versioned {
            version: v.to_owned(),
            resource: Any::default(),
        })
    }

    #[test]
    fn small_and_large_sets_answer_alike_in_name_order() {
        let mut small = Resources::new();
        let mut names: Vec<String> = (0..(SMALL * 3))
            .map(|i| format!("r{:02}", (i * 7) % (SMALL * 3)))
            .collect();
        for (i, n) in names.iter().enumerate() {
            if i == SMALL - 1 {
                assert!(
                    matches!(small.0, Repr::Small(_)),
                    "still a vector at {SMALL}"
                );
            }
            assert!(small.insert(n.clone(), res("1")).is_none());
        }
        assert!(matches!(small.0, Repr::Large(_)), "a map past {SMALL}");
        names.sort();
        assert_eq!(small.keys().cloned().collect::<Vec<_>>(), names);
        assert_eq!(small.len(), names.len());
        for n in &names {
            assert!(small.contains_key(n));
            assert_eq!(small.get(n).unwrap().version, "1");
        }
        assert!(small.get("zz").is_none());
        let replaced = small.insert("r03".into(), res("2")).unwrap();
        assert_eq!(replaced.version, "1");
        assert_eq!(small["r03"].version, "2");
        assert!(!small.insert_if_absent("r03".into(), res("3")));
        assert_eq!(small["r03"].version, "2", "the first insert stays");
    }

    #[test]
    fn equality_is_by_content_not_insertion_order() {
        let items: Vec<(String, Arc<Versioned>)> = (0..(SMALL + 2))
            .map(|i| (format!("n{i:02}"), res("1")))
            .collect();
        let large: Resources = items.iter().cloned().collect();
        let mut shrunk = Resources::new();
        for (n, r) in items.iter().take(SMALL) {
            shrunk.insert(n.clone(), r.clone());
        }
        assert_ne!(large, shrunk);
        let mut small_again = Resources::new();
        for (n, r) in items.iter().rev() {
            small_again.insert(n.clone(), r.clone());
        }
        assert_eq!(large, small_again);
        assert_eq!(Resources::new(), Resources::default());
    }
}
