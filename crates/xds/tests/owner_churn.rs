//! Reconnect churn on paused time: 200 proxies reconnect at random moments
//! for a simulated hour while certificates rotate every 10 s. Invariant I1
//! must hold throughout: the final owner of every key holds the newest
//! secret, stale cleanups change nothing, and no owner record or task leaks.

use std::sync::Arc;
use std::time::Duration;

use meshlink_xds::owner::{OwnerLease, OwnerRegistry, ProxyKey};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout};

const PROXIES: usize = 200;
const HOUR: Duration = Duration::from_secs(3600);
const ROTATION_EVERY: Duration = Duration::from_secs(10);
const RENEWAL_TIMER: Duration = Duration::from_secs(60);
/// Bound for waiting on an event; time is paused, so a wait that can never
/// finish fails at once.
const DEADLINE: Duration = Duration::from_secs(5);

/// SplitMix64: a tiny deterministic generator, seeded per proxy.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `lo..=hi` seconds.
    fn secs(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_secs(lo + self.next() % (hi - lo + 1))
    }
}

/// One connection of a proxy: its lease and what its renewal task saw.
struct Conn {
    lease: OwnerLease<u64>,
    seen: watch::Receiver<u64>,
}

/// Opens a stream for `key`: registers, starts the per-proxy renewal task,
/// and (as the stream's first request would) has the reconciler publish the
/// current secret if the new owner inherited none.
fn connect(registry: &OwnerRegistry<u64>, key: &ProxyKey, latest: u64) -> Conn {
    let lease = registry.register(key.clone());
    if lease.snapshot().is_none() && latest > 0 {
        registry
            .publish_as(key, lease.id(), Arc::new(latest))
            .expect("a fresh lease owns its key");
    }
    let (seen_tx, seen) = watch::channel(0);
    let mut state = lease.subscribe();
    // The renewal task keeps its timer running even after its channel
    // closes: only its owner's cancellation ends it.
    lease.spawn(async move {
        let mut following = true;
        loop {
            if let Some(version) = state.borrow_and_update().as_deref() {
                seen_tx.send_replace(*version);
            }
            tokio::select! {
                changed = state.changed(), if following => following = changed.is_ok(),
                () = sleep(RENEWAL_TIMER) => {} // renew the certificate
            }
        }
    });
    Conn { lease, seen }
}

/// Checks a superseded connection: cancelled, its task gone, and it never saw
/// a secret published after it was superseded.
async fn check_stale(
    finished: impl Future<Output = ()>,
    seen: &watch::Receiver<u64>,
    superseded_at: u64,
) {
    timeout(DEADLINE, finished)
        .await
        .expect("stale owner's tasks end");
    assert!(
        *seen.borrow() <= superseded_at,
        "stale owner saw a newer secret"
    );
}

/// What a proxy driver hands back at the end of the hour.
struct Outcome {
    key: ProxyKey,
    last: Conn,
    takeovers: u64,
    reconnects: u64,
}

/// Reconnects one proxy at random moments until `end`, in three ways: old
/// cleanup right after the new registration, old cleanup delayed past it (on
/// another task, through `Drop`), or old closed first and a new stream later.
async fn drive(
    registry: OwnerRegistry<u64>,
    key: ProxyKey,
    seed: u64,
    latest: watch::Receiver<u64>,
    end: Instant,
) -> Outcome {
    let mut rng = Rng(seed);
    let mut cleanups = JoinSet::new();
    let mut conn = connect(&registry, &key, *latest.borrow());
    let (mut takeovers, mut reconnects) = (0, 0);
    loop {
        let wait = rng.secs(1, 600);
        if Instant::now() + wait >= end {
            break;
        }
        sleep(wait).await;
        reconnects += 1;
        match rng.next() % 3 {
            0 => {
                let new = connect(&registry, &key, *latest.borrow());
                let old = std::mem::replace(&mut conn, new);
                assert!(old.lease.is_cancelled(), "takeover cancels the old owner");
                takeovers += 1;
                let superseded_at = *latest.borrow();
                let finished = old.lease.tasks_finished();
                assert!(!old.lease.release(), "stale release removed the new owner");
                assert_eq!(registry.owner(&key), Some(conn.lease.id()));
                check_stale(finished, &old.seen, superseded_at).await;
            }
            1 => {
                let new = connect(&registry, &key, *latest.borrow());
                let old = std::mem::replace(&mut conn, new);
                assert!(old.lease.is_cancelled(), "takeover cancels the old owner");
                takeovers += 1;
                let superseded_at = *latest.borrow();
                let delay = rng.secs(0, 45);
                let registry = registry.clone();
                let key = key.clone();
                cleanups.spawn(async move {
                    sleep(delay).await;
                    let finished = old.lease.tasks_finished();
                    let before = registry.owner(&key);
                    drop(old.lease);
                    assert_eq!(
                        registry.owner(&key),
                        before,
                        "late cleanup changed the owner"
                    );
                    check_stale(finished, &old.seen, superseded_at).await;
                });
            }
            _ => {
                assert!(conn.lease.is_current());
                let finished = conn.lease.tasks_finished();
                let Conn { lease, seen } = conn;
                assert!(lease.release(), "the owner's release removes its record");
                assert_eq!(registry.owner(&key), None);
                let closed_at = *latest.borrow();
                check_stale(finished, &seen, closed_at).await;
                sleep(rng.secs(0, 30)).await;
                conn = connect(&registry, &key, *latest.borrow());
            }
        }
    }
    while let Some(cleanup) = cleanups.join_next().await {
        cleanup.expect("cleanup task");
    }
    Outcome {
        key,
        last: conn,
        takeovers,
        reconnects,
    }
}

#[tokio::test(start_paused = true)]
async fn an_hour_of_reconnects_and_rotations_leaks_nothing() {
    let registry = OwnerRegistry::<u64>::new();
    let keys: Vec<_> = (0..PROXIES)
        .map(|i| ProxyKey::new("default", format!("proxy-{i}")))
        .collect();
    let (latest_tx, latest_rx) = watch::channel(0u64);
    let start = Instant::now();
    let end = start + HOUR;

    let mut drivers = JoinSet::new();
    for (i, key) in keys.iter().enumerate() {
        drivers.spawn(drive(
            registry.clone(),
            key.clone(),
            i as u64 + 1,
            latest_rx.clone(),
            end,
        ));
    }

    // Rotation: a new secret version for every proxy every 10 s.
    let mut version = 0u64;
    while start + ROTATION_EVERY * (version as u32 + 1) <= end {
        version += 1;
        sleep_until(start + ROTATION_EVERY * version as u32).await;
        latest_tx.send_replace(version);
        for key in &keys {
            registry.publish(key, Arc::new(version));
        }
    }
    assert_eq!(version, 360);

    let mut outcomes = Vec::new();
    while let Some(outcome) = drivers.join_next().await {
        outcomes.push(outcome.expect("proxy driver"));
    }
    assert_eq!(outcomes.len(), PROXIES);
    let takeovers: u64 = outcomes.iter().map(|o| o.takeovers).sum();
    let reconnects: u64 = outcomes.iter().map(|o| o.reconnects).sum();
    assert_eq!(registry.takeovers(), takeovers);
    assert!(
        takeovers > 0 && reconnects > takeovers,
        "all three reconnect kinds ran"
    );

    // Only the final owners remain, each holding the newest secret, and
    // only their renewal tasks are alive.
    assert_eq!(registry.len(), PROXIES);
    assert_eq!(registry.live_tasks(), PROXIES);
    for outcome in &mut outcomes {
        assert_eq!(registry.owner(&outcome.key), Some(outcome.last.lease.id()));
        assert_eq!(
            outcome.last.lease.snapshot().as_deref(),
            Some(&version),
            "{}",
            outcome.key
        );
        timeout(DEADLINE, outcome.last.seen.wait_for(|v| *v == version))
            .await
            .unwrap_or_else(|_| panic!("{}: renewal task missed the newest secret", outcome.key))
            .expect("renewal task alive");
    }

    for outcome in outcomes {
        let released = timeout(DEADLINE, outcome.last.lease.release_and_wait()).await;
        assert!(released.expect("renewal task ends"), "{}", outcome.key);
    }
    assert!(registry.is_empty());
    assert_eq!(registry.live_tasks(), 0);
}
