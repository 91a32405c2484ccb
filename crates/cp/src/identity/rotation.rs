//! Rotation progress in memory: which dataplanes hold an unexpired
//! certificate from which CA.
//!
//! The mesh CA controller owns one [`RotationTracker`]. It is fed by
//! issuance events (Certify and the hub's SDS issuance, over the
//! controller's channel), by `internal.IssuedCert` changes on the store's
//! change feed (other control planes' issuances), and once at start-up from
//! the stored `internal.IssuedCert` records. Every update and every count is
//! O(log N), so a rotation over N proxies costs O(N log N) CPU in total,
//! instead of re-listing every record on every issuance.

use std::collections::{BTreeSet, HashMap};

use super::mesh_ca::IssuedRecord;

/// The latest certificate a dataplane holds, as far as this control plane knows.
#[derive(Debug, Clone)]
struct Held {
    fingerprint: String,
    not_after: u64,
    issued_at_ms: u64,
}

#[derive(Debug, Default)]
struct MeshTracker {
    latest: HashMap<String, Held>,
    /// Per CA fingerprint: (not_after, dataplane) of the holders, earliest expiry first.
    by_ca: HashMap<String, BTreeSet<(u64, String)>>,
}

/// Who holds a certificate from which CA, per mesh.
#[derive(Debug, Default)]
pub struct RotationTracker {
    meshes: HashMap<String, MeshTracker>,
}

impl RotationTracker {
    /// Records that `dataplane` of `mesh` holds `rec` now, unless a newer
    /// issuance is already known. Returns whether anything changed.
    pub fn record(&mut self, mesh: &str, dataplane: &str, rec: &IssuedRecord) -> bool {
        let m = self.meshes.entry(mesh.to_string()).or_default();
        if let Some(old) = m.latest.get(dataplane) {
            if old.issued_at_ms > rec.issued_at_ms
                || (old.issued_at_ms == rec.issued_at_ms
                    && old.fingerprint == rec.ca_fingerprint
                    && old.not_after == rec.not_after)
            {
                return false;
            }
            let old = old.clone();
            if let Some(set) = m.by_ca.get_mut(&old.fingerprint) {
                set.remove(&(old.not_after, dataplane.to_string()));
            }
        }
        m.latest.insert(
            dataplane.to_string(),
            Held {
                fingerprint: rec.ca_fingerprint.clone(),
                not_after: rec.not_after,
                issued_at_ms: rec.issued_at_ms,
            },
        );
        m.by_ca
            .entry(rec.ca_fingerprint.clone())
            .or_default()
            .insert((rec.not_after, dataplane.to_string()));
        true
    }

    /// Forgets a dataplane (it was deleted). Returns whether it was known.
    pub fn remove(&mut self, mesh: &str, dataplane: &str) -> bool {
        let Some(m) = self.meshes.get_mut(mesh) else {
            return false;
        };
        let Some(old) = m.latest.remove(dataplane) else {
            return false;
        };
        if let Some(set) = m.by_ca.get_mut(&old.fingerprint) {
            set.remove(&(old.not_after, dataplane.to_string()));
        }
        true
    }

    /// Forgets a mesh (it was deleted).
    pub fn remove_mesh(&mut self, mesh: &str) {
        self.meshes.remove(mesh);
    }

    /// How many dataplanes of `mesh` hold an unexpired certificate (at unix
    /// second `now`) from the CA `fingerprint`, and the earliest expiry
    /// among them. Expired holders are dropped on the way.
    pub fn holders(&mut self, mesh: &str, fingerprint: &str, now: u64) -> (usize, Option<u64>) {
        let Some(m) = self.meshes.get_mut(mesh) else {
            return (0, None);
        };
        let Some(set) = m.by_ca.get_mut(fingerprint) else {
            return (0, None);
        };
        while let Some((not_after, dp)) = set.first().cloned() {
            if not_after > now {
                break;
            }
            set.pop_first();
            if m.latest.get(&dp).is_some_and(|h| h.not_after == not_after) {
                m.latest.remove(&dp);
            }
        }
        let earliest = set.first().map(|(t, _)| *t);
        let n = set.len();
        if n == 0 {
            m.by_ca.remove(fingerprint);
        }
        (n, earliest)
    }

    /// Dataplanes tracked in `mesh` (for tests and metrics).
    pub fn tracked(&self, mesh: &str) -> usize {
        self.meshes.get(mesh).map_or(0, |m| m.latest.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fp: &str, not_after: u64, at: u64) -> IssuedRecord {
        IssuedRecord {
            ca_fingerprint: fp.into(),
            serial: "01".into(),
            spiffe_id: "spiffe://m/s".into(),
            not_after,
            issued_at_ms: at,
        }
    }

    #[test]
    fn renewals_move_dataplanes_from_the_old_ca() {
        let mut t = RotationTracker::default();
        for i in 0..3 {
            assert!(t.record("m", &format!("dp-{i}"), &rec("old", 100 + i, 1)));
        }
        assert_eq!(t.holders("m", "old", 50), (3, Some(100)));
        t.record("m", "dp-0", &rec("new", 200, 2));
        assert_eq!(t.holders("m", "old", 50), (2, Some(101)));
        assert_eq!(t.holders("m", "new", 50), (1, Some(200)));
        assert_eq!(t.tracked("m"), 3);
    }

    #[test]
    fn an_older_or_repeated_record_changes_nothing() {
        let mut t = RotationTracker::default();
        t.record("m", "dp", &rec("new", 200, 5));
        assert!(!t.record("m", "dp", &rec("old", 100, 4)), "older issuance");
        assert!(
            !t.record("m", "dp", &rec("new", 200, 5)),
            "same issuance again"
        );
        assert_eq!(t.holders("m", "old", 50), (0, None));
        assert_eq!(t.holders("m", "new", 50), (1, Some(200)));
    }

    #[test]
    fn expired_certificates_and_deleted_dataplanes_stop_counting() {
        let mut t = RotationTracker::default();
        t.record("m", "a", &rec("old", 100, 1));
        t.record("m", "b", &rec("old", 300, 1));
        t.record("m", "c", &rec("old", 400, 1));
        assert_eq!(
            t.holders("m", "old", 100),
            (2, Some(300)),
            "a expired at 100"
        );
        assert_eq!(t.tracked("m"), 2, "the expired holder is forgotten");
        assert!(t.remove("m", "b"));
        assert_eq!(t.holders("m", "old", 100), (1, Some(400)));
        t.remove_mesh("m");
        assert_eq!(t.holders("m", "old", 100), (0, None));
    }
}
