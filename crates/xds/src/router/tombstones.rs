//! The router view's record of deletions: the revision each deleted object
//! was deleted at, so that a change older than the deletion (a listing or
//! a reordered change) cannot bring it back.
//!
//! A record is only needed while such an older change can still arrive,
//! which is seconds (the change feed is ordered; a re-load replaces the
//! whole view). Every deleted Dataplane of every mesh passes through the
//! view, so records expire after [`TOMBSTONE_TTL`]: without that the map
//! grew by one entry per deletion for the life of the control plane.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use meshlink_api::Kind;

/// How long a deletion is remembered. Records are dropped in batches, so
/// one lives between this and 1.5 times this.
pub(crate) const TOMBSTONE_TTL: Duration = Duration::from_secs(60);

/// A deleted object: its kind, mesh (or a namespace of the view's own,
/// such as `"secret"`) and name.
pub(super) type Key = (Kind, String, String);

/// Deletions the view remembers, each with its revision and when it was
/// recorded.
#[derive(Debug, Clone, Default)]
pub(super) struct Tombstones {
    by_key: BTreeMap<Key, (u64, Instant)>,
    /// When the next sweep is due (`None`: nothing recorded).
    next_sweep: Option<Instant>,
}

impl Tombstones {
    /// The revision `key` was deleted at, if that deletion is remembered.
    pub(super) fn get(&self, key: &Key) -> Option<u64> {
        self.by_key.get(key).map(|(revision, _)| *revision)
    }

    /// Records that `key` was deleted at `revision`.
    pub(super) fn bury(&mut self, key: Key, revision: u64, now: Instant) {
        self.by_key.insert(key, (revision, now));
        self.next_sweep.get_or_insert(now + TOMBSTONE_TTL);
    }

    /// Forgets the deletion of `key` (it exists again).
    pub(super) fn remove(&mut self, key: &Key) {
        self.by_key.remove(key);
    }

    /// Drops the records older than [`TOMBSTONE_TTL`] when a sweep is due.
    /// Sweeps run at most every half TTL, so steady deletions cost O(1)
    /// each, amortized.
    pub(super) fn expire(&mut self, now: Instant) {
        if self.next_sweep.is_none_or(|due| now < due) {
            return;
        }
        self.by_key
            .retain(|_, (_, at)| now.duration_since(*at) < TOMBSTONE_TTL);
        self.next_sweep = (!self.by_key.is_empty()).then(|| now + TOMBSTONE_TTL / 2);
    }

    /// How many deletions are remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> Key {
        (Kind::Dataplane, "default".to_owned(), format!("web-{i}"))
    }

    #[test]
    fn a_deletion_is_remembered_for_the_ttl_and_then_forgotten() {
        let t0 = Instant::now();
        let mut t = Tombstones::default();
        t.bury(key(1), 7, t0);
        t.expire(t0 + TOMBSTONE_TTL - Duration::from_secs(1));
        assert_eq!(t.get(&key(1)), Some(7));
        t.expire(t0 + TOMBSTONE_TTL);
        assert_eq!(t.get(&key(1)), None);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn steady_deletions_stay_bounded_by_one_and_a_half_ttls() {
        let t0 = Instant::now();
        let mut t = Tombstones::default();
        // One deletion a second for ten TTLs.
        let secs = 10 * TOMBSTONE_TTL.as_secs() as usize;
        let mut most = 0;
        for i in 0..secs {
            let now = t0 + Duration::from_secs(i as u64);
            t.expire(now);
            t.bury(key(i), i as u64, now);
            most = most.max(t.len());
        }
        let bound = (TOMBSTONE_TTL.as_secs() * 3 / 2) as usize + 1;
        assert!(most <= bound, "{most} records held, more than {bound}");
        // The newest are still there.
        assert_eq!(t.get(&key(secs - 1)), Some(secs as u64 - 1));
    }
}
