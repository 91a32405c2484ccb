//! The link-state database: the newest LSA of every router heard of.
//!
//! Owns the "newer wins" rule and the removal of routers that have left.
//! A router that becomes unreachable is not dropped at once: its LSA is
//! kept but ignored (routes and the network view only look at reachable
//! routers, so status is current at once), and [`LinkStateDb::sweep`]
//! drops it once it has been unreachable at two sweeps in a row. Dropping
//! at once would lose LSAs that arrive, over different paths, before the
//! LSA that makes their origin reachable. It never computes paths.

use std::collections::{BTreeMap, BTreeSet};

use super::wire::{Lsa, RouterId};

/// What [`LinkStateDb::offer`] did with an LSA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offer {
    /// It was newer than what the database held (or the first), and
    /// replaced it.
    Installed,
    /// The database holds this very version already.
    Duplicate,
    /// The database holds a newer version, returned so the sender can be
    /// brought up to date.
    Stale(Box<Lsa>),
}

#[derive(Debug, Clone)]
struct Entry {
    lsa: Lsa,
    /// Unreachable at the last sweep: the next sweep drops it if it still is.
    marked: bool,
}

/// The newest LSA per origin, this router's own included.
#[derive(Debug, Clone)]
pub(crate) struct LinkStateDb {
    me: RouterId,
    entries: BTreeMap<RouterId, Entry>,
}

impl LinkStateDb {
    /// A database holding only `own`, this router's LSA.
    pub(crate) fn new(own: Lsa) -> Self {
        let me = own.origin.id.clone();
        let mut entries = BTreeMap::new();
        entries.insert(
            me.clone(),
            Entry {
                lsa: own,
                marked: false,
            },
        );
        Self { me, entries }
    }

    /// This router's current LSA.
    pub(crate) fn own(&self) -> &Lsa {
        &self.entries[&self.me].lsa
    }

    /// Replaces this router's LSA (the caller bumps its version).
    pub(crate) fn set_own(&mut self, own: Lsa) {
        debug_assert_eq!(own.origin.id, self.me);
        self.entries.insert(
            self.me.clone(),
            Entry {
                lsa: own,
                marked: false,
            },
        );
    }

    /// The LSA of `id`, reachable or not.
    pub(crate) fn get(&self, id: &RouterId) -> Option<&Lsa> {
        self.entries.get(id).map(|e| &e.lsa)
    }

    /// Every LSA held, reachable or not, by origin id.
    pub(crate) fn lsas(&self) -> impl Iterator<Item = &Lsa> {
        self.entries.values().map(|e| &e.lsa)
    }

    /// The number of LSAs held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Offers another router's LSA (never this router's own: the caller
    /// handles those).
    pub(crate) fn offer(&mut self, lsa: Lsa) -> Offer {
        debug_assert_ne!(lsa.origin.id, self.me);
        match self.entries.get(&lsa.origin.id) {
            Some(held) if held.lsa.version == lsa.version => Offer::Duplicate,
            Some(held) if held.lsa.version > lsa.version => {
                Offer::Stale(Box::new(held.lsa.clone()))
            }
            _ => {
                self.entries
                    .insert(lsa.origin.id.clone(), Entry { lsa, marked: false });
                Offer::Installed
            }
        }
    }

    /// Drops the LSAs of routers that were unreachable at the previous
    /// sweep and still are (`reachable` holds the ones that are); marks
    /// the newly unreachable. Returns the dropped ids.
    pub(crate) fn sweep(&mut self, reachable: &BTreeSet<RouterId>) -> Vec<RouterId> {
        let mut dropped = Vec::new();
        self.entries.retain(|id, entry| {
            if id == &self.me || reachable.contains(id) {
                entry.marked = false;
                true
            } else if entry.marked {
                dropped.push(id.clone());
                false
            } else {
                entry.marked = true;
                true
            }
        });
        dropped
    }
}
