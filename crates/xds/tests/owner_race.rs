//! The reconnect race from the field (DESIGN §1, invariant I1): a proxy's old
//! stream is cleaned up after its new stream registered. Reproduced once as a
//! scripted scenario, then over every interleaving of the events involved.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use meshlink_xds::owner::{OwnerLease, OwnerRegistry, ProxyKey};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::timeout;

/// Bound for waiting on an event. Time is paused, so a wait that can never
/// finish fails at once instead of after this much wall time.
const DEADLINE: Duration = Duration::from_secs(5);

fn proxy() -> ProxyKey {
    ProxyKey::new("default", "sidecar-p")
}

/// A per-proxy "certificate renewal" task: follows the published versions and
/// reports the latest one it saw (0 = none yet). Like a renewal timer, it
/// does not stop by itself when its channel closes: only its owner's
/// cancellation ends it.
fn spawn_renewal(lease: &OwnerLease<u64>) -> watch::Receiver<u64> {
    let (seen_tx, seen_rx) = watch::channel(0);
    let mut state = lease.subscribe();
    lease.spawn(async move {
        loop {
            if let Some(version) = state.borrow_and_update().as_deref() {
                seen_tx.send_replace(*version);
            }
            if state.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    });
    seen_rx
}

async fn wait_seen(seen: &mut watch::Receiver<u64>, version: u64) {
    timeout(DEADLINE, seen.wait_for(|v| *v == version))
        .await
        .unwrap_or_else(|_| panic!("renewal task never saw version {version}"))
        .expect("renewal task ended before seeing the version");
}

#[tokio::test(start_paused = true)]
async fn late_cleanup_of_old_stream_keeps_the_new_stream_renewing() {
    let registry = OwnerRegistry::<u64>::new();
    let p = proxy();

    // S1 connects and gets its snapshot (secret version 1).
    let s1 = registry.register(p.clone());
    let mut s1_seen = spawn_renewal(&s1);
    assert_eq!(registry.publish(&p, Arc::new(1)), Some(s1.id()));
    wait_seen(&mut s1_seen, 1).await;
    let s1_id = s1.id();

    // The proxy reconnects: S2 takes over at once and gets its first snapshot.
    let s2 = registry.register(p.clone());
    let mut s2_seen = spawn_renewal(&s2);
    assert_eq!(registry.publish(&p, Arc::new(2)), Some(s2.id()));
    wait_seen(&mut s2_seen, 2).await;

    // S1's cleanup runs later, on another task.
    let (run_cleanup, cleanup_signal) = oneshot::channel::<()>();
    let mut cleanups = JoinSet::new();
    cleanups.spawn(async move {
        cleanup_signal.await.expect("cleanup signal");
        timeout(DEADLINE, s1.release_and_wait())
            .await
            .expect("S1's tasks end")
    });
    run_cleanup.send(()).expect("cleanup task alive");
    let removed = cleanups.join_next().await.expect("cleanup ran").unwrap();
    assert!(!removed, "S1's late cleanup must not remove S2's record");
    assert_eq!(registry.owner(&p), Some(s2.id()));
    assert_eq!(registry.len(), 1);

    // Certificate rotation: a new secret version for P.
    assert_eq!(registry.publish(&p, Arc::new(3)), Some(s2.id()));
    wait_seen(&mut s2_seen, 3).await;
    assert_eq!(s2.snapshot().as_deref(), Some(&3));
    assert_eq!(*s1_seen.borrow(), 1, "S1 saw nothing after S2 took over");

    // A detached task of S1 cannot act on P either.
    assert!(registry.publish_as(&p, s1_id, Arc::new(99)).is_err());
    assert_eq!(s2.snapshot().as_deref(), Some(&3));

    assert_eq!(registry.live_tasks(), 1, "only S2's renewal task is alive");
    assert!(
        timeout(DEADLINE, s2.release_and_wait())
            .await
            .expect("S2's tasks end")
    );
    assert!(registry.is_empty());
    assert_eq!(registry.live_tasks(), 0);
}

// === every interleaving ===

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Event {
    Open(usize),
    Request(usize),
    Close(usize),
    Tick,
}

/// All merges of `chains` that keep each chain's order.
fn interleavings(chains: &[Vec<Event>]) -> Vec<Vec<Event>> {
    fn go(
        chains: &[Vec<Event>],
        pos: &mut [usize],
        cur: &mut Vec<Event>,
        out: &mut Vec<Vec<Event>>,
    ) {
        let mut exhausted = true;
        for i in 0..chains.len() {
            if pos[i] < chains[i].len() {
                exhausted = false;
                cur.push(chains[i][pos[i]]);
                pos[i] += 1;
                go(chains, pos, cur, out);
                pos[i] -= 1;
                cur.pop();
            }
        }
        if exhausted {
            out.push(cur.clone());
        }
    }
    let mut out = Vec::new();
    go(
        chains,
        &mut vec![0; chains.len()],
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn factorial(n: usize) -> usize {
    (1..=n).product()
}

/// One simulated stream: a lease, the stream's receiver, and its renewal task.
struct SimStream {
    lease: Option<OwnerLease<u64>>,
    rx: watch::Receiver<Option<Arc<u64>>>,
    seen: watch::Receiver<u64>,
    /// Published-version count when a newer stream opened.
    superseded_at: Option<u64>,
}

/// The registry under test plus a model of what it must hold.
struct Sim {
    registry: OwnerRegistry<u64>,
    streams: [Option<SimStream>; 2],
    /// Which stream the model says owns P.
    current: Option<usize>,
    /// What the owner's slot must hold.
    expected: Option<u64>,
    /// Last published version.
    version: u64,
    opened_last: Option<usize>,
    /// Close through `Drop` instead of `release`.
    close_by_drop: bool,
}

impl Sim {
    fn new(close_by_drop: bool) -> Self {
        Self {
            registry: OwnerRegistry::new(),
            streams: [None, None],
            current: None,
            expected: None,
            version: 0,
            opened_last: None,
            close_by_drop,
        }
    }

    fn lease(&self, s: usize) -> &OwnerLease<u64> {
        self.streams[s]
            .as_ref()
            .and_then(|st| st.lease.as_ref())
            .expect("stream open")
    }

    async fn apply(&mut self, event: Event) {
        match event {
            Event::Open(s) => {
                if let Some(other) = self.streams[1 - s].as_mut() {
                    other.superseded_at.get_or_insert(self.version);
                }
                if self.current.is_none() {
                    self.expected = None;
                }
                let lease = self.registry.register(proxy());
                assert_eq!(
                    lease.snapshot().as_deref(),
                    self.expected.as_ref(),
                    "seeded state"
                );
                let seen = spawn_renewal(&lease);
                let rx = lease.subscribe();
                self.streams[s] = Some(SimStream {
                    lease: Some(lease),
                    rx,
                    seen,
                    superseded_at: None,
                });
                self.current = Some(s);
                self.opened_last = Some(s);
            }
            Event::Request(s) => {
                let lease = self.lease(s);
                let snapshot = lease.snapshot().map(|v| *v);
                assert_eq!(lease.is_current(), self.current == Some(s));
                if self.current == Some(s) {
                    assert_eq!(snapshot, self.expected);
                } else {
                    let limit = self.streams[s].as_ref().unwrap().superseded_at.unwrap();
                    assert!(
                        snapshot.unwrap_or(0) <= limit,
                        "stale stream read a newer snapshot"
                    );
                }
            }
            Event::Close(s) => {
                let was_current = self.current == Some(s);
                let lease = self.streams[s].as_mut().unwrap().lease.take().unwrap();
                if self.close_by_drop {
                    let before = self.registry.owner(&proxy());
                    let finished = lease.tasks_finished();
                    drop(lease);
                    timeout(DEADLINE, finished)
                        .await
                        .expect("dropped lease's tasks end");
                    let after = self.registry.owner(&proxy());
                    if was_current {
                        assert_eq!(after, None, "dropping the owner removes its record");
                    } else {
                        assert_eq!(after, before, "stale drop changed the owner");
                    }
                } else {
                    let removed = timeout(DEADLINE, lease.release_and_wait())
                        .await
                        .expect("tasks end");
                    assert_eq!(removed, was_current);
                }
                if was_current {
                    self.current = None;
                    self.expected = None;
                }
            }
            Event::Tick => self.publish(),
        }
        self.check().await;
    }

    fn publish(&mut self) {
        self.version += 1;
        let reached = self.registry.publish(&proxy(), Arc::new(self.version));
        let current = self.current.map(|s| self.lease(s).id());
        assert_eq!(
            reached, current,
            "publish must reach exactly the current owner"
        );
        if current.is_some() {
            self.expected = Some(self.version);
        }
    }

    /// Lets every task catch up, then checks the registry against the model.
    async fn check(&mut self) {
        for s in 0..2 {
            let Some(stream) = self.streams[s].as_mut() else {
                continue;
            };
            if self.current == Some(s) {
                wait_seen(&mut stream.seen, self.expected.unwrap_or(0)).await;
                assert_eq!(stream.rx.borrow().as_deref(), self.expected.as_ref());
            } else {
                if let Some(lease) = &stream.lease {
                    assert!(lease.is_cancelled(), "stale owner's token still live");
                    timeout(DEADLINE, lease.tasks_finished())
                        .await
                        .expect("stale tasks end");
                }
                assert!(stream.rx.has_changed().is_err(), "stale channel still open");
            }
            if let Some(limit) = stream.superseded_at {
                assert!(
                    *stream.seen.borrow() <= limit,
                    "stale task saw a newer version"
                );
                assert!(stream.rx.borrow().as_deref().map_or(0, |v| *v) <= limit);
            }
        }
        let owner = self.current.map(|s| self.lease(s).id());
        assert_eq!(self.registry.owner(&proxy()), owner);
        assert_eq!(self.registry.len(), usize::from(owner.is_some()));
        assert_eq!(
            self.registry.live_tasks(),
            usize::from(owner.is_some()),
            "leaked tasks"
        );
    }

    async fn finish(mut self) {
        // Certificate rotation after the whole schedule.
        self.publish();
        self.check().await;
        let newer = self.opened_last.expect("both streams opened");
        let older = 1 - newer;
        let newer_stream = self.streams[newer].as_ref().unwrap();
        if newer_stream.lease.is_some() {
            assert_eq!(self.current, Some(newer), "the newer stream must own P");
            assert_eq!(newer_stream.rx.borrow().as_deref(), Some(&self.version));
            assert_eq!(*newer_stream.seen.borrow(), self.version);
        } else {
            assert!(self.registry.is_empty());
        }
        let older_stream = self.streams[older].as_ref().unwrap();
        let limit = older_stream.superseded_at.expect("older was superseded");
        assert!(limit < self.version);
        assert!(*older_stream.seen.borrow() <= limit);
        for stream in self.streams.iter_mut().flatten() {
            if let Some(lease) = stream.lease.take() {
                timeout(DEADLINE, lease.release_and_wait())
                    .await
                    .expect("tasks end");
            }
        }
        assert!(self.registry.is_empty());
        assert_eq!(self.registry.live_tasks(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn every_interleaving_of_reconnect_cleanup_and_reconcile() {
    use Event::*;
    let s1 = vec![Open(0), Request(0), Close(0)];
    let families = [
        // The brief's events: S2 stays connected.
        vec![s1.clone(), vec![Open(1), Request(1)], vec![Tick]],
        // Plus S2 closing, so both streams may be gone at the end.
        vec![s1.clone(), vec![Open(1), Request(1), Close(1)], vec![Tick]],
    ];
    let mut covered = 0;
    let mut field_races = 0;
    for chains in &families {
        let schedules = interleavings(chains);
        let total: usize = chains.iter().map(Vec::len).sum();
        let multinomial = chains
            .iter()
            .fold(factorial(total), |acc, c| acc / factorial(c.len()));
        assert_eq!(schedules.len(), multinomial);
        assert_eq!(
            schedules.iter().collect::<HashSet<_>>().len(),
            schedules.len(),
            "duplicates"
        );
        for schedule in &schedules {
            for chain in chains {
                let projected: Vec<_> = schedule.iter().filter(|e| chain.contains(e)).collect();
                assert_eq!(projected, chain.iter().collect::<Vec<_>>(), "order broken");
            }
            let at = |e| schedule.iter().position(|x| *x == e).unwrap();
            if at(Open(0)) < at(Open(1)) && at(Open(1)) < at(Close(0)) {
                field_races += 1;
            }
            for close_by_drop in [false, true] {
                let mut sim = Sim::new(close_by_drop);
                for event in schedule {
                    sim.apply(*event).await;
                }
                sim.finish().await;
                covered += 1;
            }
        }
    }
    // 60 + 140 schedules, each closed through `release` and through `Drop`.
    assert_eq!(covered, (60 + 140) * 2);
    assert!(field_races > 0, "the field race is among the schedules");
}
