//! Unit tests of the owner registry: compare-and-delete, takeover, drop.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

use super::{OwnerError, OwnerRegistry, ProxyKey};

/// Bound for waiting on an event. Time is paused, so a wait that can never
/// finish fails at once instead of hanging (a timer keeps the clock moving).
const DEADLINE: Duration = Duration::from_secs(5);

fn key(name: &str) -> ProxyKey {
    ProxyKey::new("default", name)
}

#[test]
fn stale_release_leaves_the_newer_owner_in_place() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    let new = registry.register(key("p"));

    assert!(!old.release(), "a stale lease must not remove anything");
    assert_eq!(registry.owner(&key("p")), Some(new.id()));
    assert!(new.is_current());
    assert!(!new.is_cancelled());
    assert_eq!(registry.len(), 1);

    assert!(new.release());
    assert!(registry.is_empty());
}

#[test]
fn takeover_cancels_the_previous_token_only() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    let other = registry.register(key("q"));
    assert!(!old.is_cancelled());

    let new = registry.register(key("p"));
    assert!(old.is_cancelled());
    assert!(old.token().is_cancelled());
    assert!(!old.is_current());
    assert!(!new.is_cancelled());
    assert!(!other.is_cancelled(), "other keys are untouched");
    assert_eq!(registry.takeovers(), 1);
}

#[test]
fn generation_and_stream_id_increase() {
    let registry = OwnerRegistry::<u64>::new();
    let mut last = registry.register(key("p"));
    assert_eq!(last.generation(), 1);
    for expected_generation in 2..=5 {
        let next = registry.register(key("p"));
        assert_eq!(next.generation(), expected_generation);
        assert!(next.stream_id() > last.stream_id());
        last = next;
    }
    // Another key has its own generation but shares the stream id counter.
    let q = registry.register(key("q"));
    assert_eq!(q.generation(), 1);
    assert!(q.stream_id() > last.stream_id());
}

#[test]
fn stream_ids_are_never_reused_after_a_key_empties() {
    let registry = OwnerRegistry::<u64>::new();
    let first = registry.register(key("p"));
    let first_id = first.id();
    drop(first);
    let second = registry.register(key("p"));
    // Same generation (the key had no owner), but a different owner id: a
    // leftover proof from the first incarnation cannot act on the second.
    assert_eq!(second.generation(), first_id.generation);
    assert_ne!(second.id(), first_id);
    assert!(
        registry
            .publish_as(&key("p"), first_id, Arc::new(1))
            .is_err()
    );
    assert_eq!(second.snapshot(), None);
}

#[test]
fn dropping_the_current_lease_releases_it() {
    let registry = OwnerRegistry::<u64>::new();
    let lease = registry.register(key("p"));
    let token = lease.token().clone();
    drop(lease);
    assert!(token.is_cancelled());
    assert!(registry.is_empty());
    assert_eq!(registry.publish(&key("p"), Arc::new(1)), None);
}

#[test]
fn dropping_a_stale_lease_leaves_the_newer_owner() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    let new = registry.register(key("p"));
    drop(old);
    assert_eq!(registry.owner(&key("p")), Some(new.id()));
    assert!(!new.is_cancelled());
}

#[test]
fn publish_reaches_only_the_current_owner() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    assert_eq!(registry.publish(&key("p"), Arc::new(1)), Some(old.id()));
    let mut old_rx = old.subscribe();
    old_rx.mark_unchanged();

    let new = registry.register(key("p"));
    assert_eq!(new.snapshot().as_deref(), Some(&1), "inherits the latest");
    assert_eq!(registry.publish(&key("p"), Arc::new(2)), Some(new.id()));

    assert_eq!(new.snapshot().as_deref(), Some(&2));
    assert_eq!(old.snapshot().as_deref(), Some(&1));
    assert!(old_rx.has_changed().is_err(), "stale channel is closed");
}

#[test]
fn ownership_proofs_reject_stale_owners_with_a_useful_error() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    let new = registry.register(key("p"));

    let err = registry
        .publish_as(&key("p"), old.id(), Arc::new(7))
        .unwrap_err();
    assert_eq!(
        err,
        OwnerError::NotOwner {
            key: key("p"),
            expected: old.id(),
            current: Some(new.id()),
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("default/p"), "{msg}");
    assert!(msg.contains("newer stream took over"), "{msg}");
    assert_eq!(new.snapshot(), None, "the stale publish changed nothing");

    registry
        .publish_as(&key("p"), new.id(), Arc::new(8))
        .unwrap();
    assert_eq!(new.snapshot().as_deref(), Some(&8));
    assert_eq!(registry.with_owner(&key("p"), new.id(), |_| 42), Ok(42));
}

#[tokio::test(start_paused = true)]
async fn spawned_work_dies_with_its_owner() {
    let registry = OwnerRegistry::<u64>::new();
    let old = registry.register(key("p"));
    let forever = old.spawn(std::future::pending::<()>());
    assert_eq!(registry.live_tasks(), 1);

    let new = registry.register(key("p"));
    timeout(DEADLINE, old.tasks_finished())
        .await
        .expect("old owner's tasks end");
    assert_eq!(forever.await.unwrap(), None, "cancelled, not completed");
    assert_eq!(old.live_tasks(), 0);

    // Work spawned by a taken-over lease never runs.
    let late = old.spawn(async { unreachable!("stale work ran") });
    assert_eq!(timeout(DEADLINE, late).await.unwrap().unwrap(), None);

    let done = new.spawn(async { 5 });
    assert_eq!(done.await.unwrap(), Some(5));
    let pending = new.spawn(std::future::pending::<()>());
    assert_eq!(registry.live_tasks(), 1);
    assert!(timeout(DEADLINE, new.release_and_wait()).await.unwrap());
    assert_eq!(pending.await.unwrap(), None);
    assert_eq!(registry.live_tasks(), 0);
    assert!(registry.is_empty());
}
