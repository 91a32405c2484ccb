//! The lease a stream holds while it owns a proxy key, and the per-proxy work
//! tied to it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

use super::{OwnerId, OwnerRegistry, ProxyKey};

/// Proof that a stream became the owner of a proxy key.
///
/// Held by the stream for its whole life. Releasing or dropping it cancels
/// all work spawned through it and removes the key's owner record only if
/// this lease still owns it (compare-and-delete).
pub struct OwnerLease<S> {
    key: ProxyKey,
    id: OwnerId,
    cancel: CancellationToken,
    tasks: TaskTracker,
    state: watch::Receiver<Option<Arc<S>>>,
    registry: OwnerRegistry<S>,
    released: bool,
}

// === impl OwnerLease ===

impl<S> OwnerLease<S> {
    pub(super) fn new(
        key: ProxyKey,
        id: OwnerId,
        cancel: CancellationToken,
        tasks: TaskTracker,
        state: watch::Receiver<Option<Arc<S>>>,
        registry: OwnerRegistry<S>,
    ) -> Self {
        Self {
            key,
            id,
            cancel,
            tasks,
            state,
            registry,
            released: false,
        }
    }

    /// The proxy key this lease was issued for.
    pub fn key(&self) -> &ProxyKey {
        &self.key
    }

    /// This lease's identity, to prove ownership later
    /// ([`OwnerRegistry::with_owner`], [`OwnerRegistry::publish_as`]).
    pub fn id(&self) -> OwnerId {
        self.id
    }

    /// The globally unique stream id.
    pub fn stream_id(&self) -> u64 {
        self.id.stream_id
    }

    /// The key's generation when this lease took it.
    pub fn generation(&self) -> u64 {
        self.id.generation
    }

    /// The token cancelled when this owner is taken over or released.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Resolves once this owner is taken over or released.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether this owner was taken over or released.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Whether this lease still owns its key.
    pub fn is_current(&self) -> bool {
        self.registry.is_current(self)
    }

    /// A receiver of the state published to this owner. It starts with the
    /// latest state (inherited from the previous owner if there was one) and
    /// reports the channel closed once this owner loses the key.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<S>>> {
        self.state.clone()
    }

    /// The latest state published to this owner.
    pub fn snapshot(&self) -> Option<Arc<S>> {
        self.state.borrow().clone()
    }

    /// Runs per-proxy work owned by this lease.
    ///
    /// The future is dropped as soon as the owner is taken over or released
    /// (the handle then yields `None`); if that already happened, it never
    /// runs. It counts in [`OwnerLease::live_tasks`] and
    /// [`OwnerRegistry::live_tasks`] until it finishes or is dropped.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let cancel = self.cancel.clone();
        let guarded = self.tasks.track_future(async move {
            tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                out = work => Some(out),
            }
        });
        self.registry.task_tracker().spawn(guarded)
    }

    /// Number of this lease's spawned tasks still alive.
    pub fn live_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Resolves once this owner was taken over or released and all its
    /// spawned tasks have finished. The future does not borrow the lease, so
    /// it can be awaited after the lease was dropped.
    pub fn tasks_finished(&self) -> impl Future<Output = ()> + Send + 'static {
        let tasks = self.tasks.clone();
        async move { tasks.wait().await }
    }

    /// Ends this ownership: cancels its work and removes the key's record if,
    /// and only if, this lease still owns it. Returns whether it removed it.
    pub fn release(mut self) -> bool {
        self.release_inner()
    }

    /// Like [`OwnerLease::release`], then waits for the spawned tasks to end.
    pub async fn release_and_wait(mut self) -> bool {
        let removed = self.release_inner();
        self.tasks.wait().await;
        removed
    }

    fn release_inner(&mut self) -> bool {
        if self.released {
            return false;
        }
        self.released = true;
        // Our own token and tracker only: a newer owner has its own.
        self.cancel.cancel();
        self.tasks.close();
        self.registry.remove_if_owner(&self.key, self.id)
    }
}

impl<S> Drop for OwnerLease<S> {
    fn drop(&mut self) {
        self.release_inner();
    }
}

impl<S> fmt::Debug for OwnerLease<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerLease")
            .field("key", &self.key)
            .field("id", &self.id)
            .field("cancelled", &self.is_cancelled())
            .field("live_tasks", &self.live_tasks())
            .finish()
    }
}
