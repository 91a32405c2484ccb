//! The owner map: one record per proxy key, changed only under one short lock.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{OwnerError, OwnerId, OwnerLease, ProxyKey};

/// The slot through which a reconciler hands state to the current owner.
type StateSender<S> = watch::Sender<Option<Arc<S>>>;

/// The per-key owner record. Holds clones of the lease's token and tracker so
/// that a takeover can stop the previous owner's work without its help.
struct Record<S> {
    id: OwnerId,
    cancel: CancellationToken,
    tasks: TaskTracker,
    state: StateSender<S>,
}

/// Everything behind the lock.
struct Owners<S> {
    by_key: HashMap<ProxyKey, Record<S>>,
    /// Last stream id handed out; allocated under the lock so that stream ids
    /// increase in the order owners are installed.
    last_stream_id: u64,
}

pub(super) struct Shared<S> {
    owners: Mutex<Owners<S>>,
    /// Tracks every per-proxy task of every lease, for leak accounting.
    tasks: TaskTracker,
    takeovers: AtomicU64,
}

/// Per-proxy-key owner records (invariant I1). Cheap to clone: all clones
/// share one map.
///
/// `S` is the state a reconciler publishes to the current owner of a key,
/// e.g. the proxy's translated snapshot.
pub struct OwnerRegistry<S> {
    shared: Arc<Shared<S>>,
}

// === impl OwnerRegistry ===

impl<S> Clone for OwnerRegistry<S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S> Default for OwnerRegistry<S> {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                owners: Mutex::new(Owners {
                    by_key: HashMap::new(),
                    last_stream_id: 0,
                }),
                tasks: TaskTracker::new(),
                takeovers: AtomicU64::new(0),
            }),
        }
    }
}

impl<S> fmt::Debug for OwnerRegistry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerRegistry")
            .field("owners", &self.len())
            .field("live_tasks", &self.live_tasks())
            .finish()
    }
}

impl<S> OwnerRegistry<S> {
    /// Creates an empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs a new owner for `key` and returns its lease.
    ///
    /// Takes over at once: if `key` already has an owner, the generation is
    /// bumped, the old owner's token is cancelled (its per-proxy work stops)
    /// and its state channel is closed. Never waits, never fails. The new
    /// owner starts with the previous owner's latest published state, if any.
    pub fn register(&self, key: ProxyKey) -> OwnerLease<S> {
        self.register_with_token(key, CancellationToken::new())
    }

    /// [`register`](Self::register) with a caller-made `cancel` token: the
    /// lease is cancelled by a takeover or its release, as always, and also
    /// whenever the caller cancels `cancel`. An ADS stream passes the one
    /// token that everything able to end it (drain, revocation, takeover)
    /// cancels, so each wake-up of the stream polls one token, not three.
    pub fn register_with_token(&self, key: ProxyKey, cancel: CancellationToken) -> OwnerLease<S> {
        let tasks = TaskTracker::new();
        let (id, state_rx, previous) = {
            let mut owners = self.lock();
            owners.last_stream_id += 1;
            let previous = owners.by_key.remove(&key);
            let (generation, seed) = match &previous {
                Some(prev) => (prev.id.generation + 1, prev.state.borrow().clone()),
                None => (1, None),
            };
            let id = OwnerId {
                stream_id: owners.last_stream_id,
                generation,
            };
            let (state, state_rx) = watch::channel(seed);
            let record = Record {
                id,
                cancel: cancel.clone(),
                tasks: tasks.clone(),
                state,
            };
            owners.by_key.insert(key.clone(), record);
            (id, state_rx, previous)
        };
        // The old record is out of the map: nothing can reach it any more.
        // Stop its work now; dropping it closes its state channel.
        if let Some(prev) = previous {
            prev.cancel.cancel();
            prev.tasks.close();
            self.shared.takeovers.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(proxy = %key, old = %prev.id, new = %id, "stream took over proxy");
        } else {
            tracing::debug!(proxy = %key, owner = %id, "stream owns proxy");
        }
        OwnerLease::new(key, id, cancel, tasks, state_rx, self.clone())
    }

    /// Publishes `value` to whoever owns `key` now. Returns that owner, or
    /// `None` (and drops the value) if the key has no owner.
    pub fn publish(&self, key: &ProxyKey, value: Arc<S>) -> Option<OwnerId> {
        let owners = self.lock();
        let record = owners.by_key.get(key)?;
        record.state.send_replace(Some(value));
        Some(record.id)
    }

    /// Publishes `value` to `key` only if `expected` still owns it.
    pub fn publish_as(
        &self,
        key: &ProxyKey,
        expected: OwnerId,
        value: Arc<S>,
    ) -> Result<(), OwnerError> {
        self.with_owner(key, expected, |state| {
            state.send_replace(Some(value));
        })
    }

    /// Runs `f` on the owner's state slot if `expected` still owns `key`.
    ///
    /// This is how a detached task proves ownership before acting on a key.
    /// `f` runs under the registry lock: keep it short and synchronous.
    pub fn with_owner<R>(
        &self,
        key: &ProxyKey,
        expected: OwnerId,
        f: impl FnOnce(&watch::Sender<Option<Arc<S>>>) -> R,
    ) -> Result<R, OwnerError> {
        let owners = self.lock();
        match owners.by_key.get(key) {
            Some(record) if record.id == expected => Ok(f(&record.state)),
            other => Err(OwnerError::NotOwner {
                key: key.clone(),
                expected,
                current: other.map(|r| r.id),
            }),
        }
    }

    /// The current owner of `key`, if any.
    pub fn owner(&self, key: &ProxyKey) -> Option<OwnerId> {
        self.lock().by_key.get(key).map(|r| r.id)
    }

    /// The latest state published to the current owner of `key`, if any.
    pub fn state(&self, key: &ProxyKey) -> Option<Arc<S>> {
        self.lock()
            .by_key
            .get(key)
            .and_then(|r| r.state.borrow().clone())
    }

    /// Whether `lease` still owns its key.
    pub fn is_current(&self, lease: &OwnerLease<S>) -> bool {
        self.owner(lease.key()) == Some(lease.id())
    }

    /// Number of keys that have an owner.
    pub fn len(&self) -> usize {
        self.lock().by_key.len()
    }

    /// Whether no key has an owner.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of per-proxy tasks (from [`OwnerLease::spawn`]) still alive,
    /// across all leases.
    pub fn live_tasks(&self) -> usize {
        self.shared.tasks.len()
    }

    /// Number of takeovers (a stream replacing a live owner) so far.
    pub fn takeovers(&self) -> u64 {
        self.shared.takeovers.load(Ordering::Relaxed)
    }

    /// Compare-and-delete: removes `key`'s record only if `id` owns it.
    /// Returns whether it removed anything.
    pub(super) fn remove_if_owner(&self, key: &ProxyKey, id: OwnerId) -> bool {
        let removed = {
            let mut owners = self.lock();
            match owners.by_key.get(key) {
                Some(record) if record.id == id => owners.by_key.remove(key),
                _ => None,
            }
        };
        match removed {
            Some(_) => {
                tracing::debug!(proxy = %key, owner = %id, "stream released proxy");
                true
            }
            None => {
                tracing::debug!(proxy = %key, stale = %id, "stale cleanup ignored");
                false
            }
        }
    }

    /// The registry-wide task tracker that every lease's tasks join.
    pub(super) fn task_tracker(&self) -> &TaskTracker {
        &self.shared.tasks
    }

    fn lock(&self) -> MutexGuard<'_, Owners<S>> {
        // Every critical section leaves the map consistent before it can
        // panic (only a caller's `with_owner` closure can), so a poisoned
        // lock still guards valid data.
        self.shared
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
