//! Leader election through the store: one lease object, renewed by its
//! holder with a compare-and-swap on its revision.
//!
//! # Why it is safe
//!
//! - A follower takes the lease over only after it has seen the *same*
//!   revision of it for a whole lease, measured on its own monotonic clock
//!   from the moment it first read that revision. The holder's last
//!   successful renewal started before that moment.
//! - The holder counts itself leader only until `renewal start + 4/5 of the
//!   lease`. So it has stepped down before any follower can take over, even
//!   if its renewals fail because the database is gone (I5's cousin: no two
//!   leaders acting at once while clocks run at the same rate).
//! - Every takeover bumps the fencing token; singleton jobs record the
//!   token with each run ([`super::jobs`]) and claim their period with a
//!   compare-and-swap, so even an overlap could not run a period twice.
//! - A restarted process with the same `--instance` takes its old lease
//!   over at once (the old process is gone), and a clean shutdown deletes
//!   the lease, so the next leader does not wait for it to run out.

use std::time::{Duration, Instant, SystemTime};

use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::{ObjectKey, Store, StoreError};
use prometheus_client::metrics::gauge::Gauge;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{LEADER_KIND, Replica, rfc3339};

/// The stored lease.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The holder's `--instance`.
    pub holder: String,
    /// The holder's process incarnation.
    pub incarnation: String,
    /// Bumped on every change of holder.
    pub fencing_token: u64,
    /// The lease length the holder runs with, in milliseconds.
    pub lease_ms: u64,
    /// When the holder took the lease (its wall clock; informational).
    pub acquired_at: String,
    /// When the holder last renewed it (its wall clock; informational).
    pub renewed_at: String,
}

/// The key of the one lease.
pub fn lease_key() -> ObjectKey {
    ObjectKey::new(LEADER_KIND, "", "control-plane")
}

/// Whether this replica leads now, and with which fencing token. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Leadership {
    rx: watch::Receiver<Option<Term>>,
}

/// A period of leadership: its fencing token and when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// The fencing token.
    pub token: u64,
    /// When this replica became leader.
    pub since: Instant,
}

impl Leadership {
    /// The fencing token while this replica leads.
    pub fn term(&self) -> Option<u64> {
        self.rx.borrow().map(|t| t.token)
    }

    /// How long this replica has led without a break, if it leads.
    pub fn held_for(&self) -> Option<Duration> {
        self.rx.borrow().map(|t| t.since.elapsed())
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// Waits until this replica gains or loses leadership (forever once
    /// the election has ended).
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// A handle that always leads with token 1 (unit tests of jobs).
    #[cfg(test)]
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(Some(Term {
            token: 1,
            since: Instant::now(),
        }));
        std::mem::forget(tx);
        Leadership { rx }
    }
}

/// The election task and the handle that reads its outcome.
pub struct Election {
    store: std::sync::Arc<dyn Store>,
    replica: Replica,
    lease: Duration,
    tx: watch::Sender<Option<Term>>,
    gauge: Gauge,
    /// The lease as this replica holds it: (revision, renewal start, token).
    held: Option<(u64, Instant, u64)>,
    /// The holder's lease as last read: (revision, first seen).
    observed: Option<(u64, Instant)>,
    /// Whether to renew: false for a store only one control plane can open
    /// (SQLite), which takes the lease once and keeps it.
    renews: bool,
}

/// Creates the election for `replica` with lease length `lease`.
pub fn election(
    store: std::sync::Arc<dyn Store>,
    replica: Replica,
    lease: Duration,
    registry: &MetricsRegistry,
) -> (Leadership, Election) {
    // SQLite is opened by one control plane at a time (the data dir lock):
    // it leads alone and need not renew (no writes every few seconds).
    let renews = store.backend() != "sqlite";
    let (tx, rx) = watch::channel(None);
    let gauge = Gauge::default();
    registry.register_with("cp", |r| {
        r.register(
            "leader",
            "1 while this control-plane replica holds the leader lease and runs the singleton jobs",
            gauge.clone(),
        );
    });
    (
        Leadership { rx },
        Election {
            store,
            replica,
            lease,
            tx,
            gauge,
            held: None,
            observed: None,
            renews,
        },
    )
}

impl Election {
    /// How long the holder counts itself leader after a renewal started.
    fn valid_for(&self) -> Duration {
        self.lease.mul_f64(0.8)
    }

    /// Runs until `shutdown`; a held lease is released on the way out.
    pub async fn run(mut self, shutdown: Shutdown) {
        let poll = (self.lease / 10).max(Duration::from_millis(100));
        let renew = (self.lease / 4).max(Duration::from_millis(200));
        loop {
            let started = Instant::now();
            // A round stuck on an unreachable database must not outlive
            // the leadership it would renew.
            let until = self.deadline().unwrap_or(started + self.lease);
            match tokio::time::timeout_at(until.into(), self.round(started)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "leader election: cannot read or write the lease; retrying");
                }
                Err(_) => {
                    tracing::warn!(
                        "leader election: the database did not answer in time; retrying"
                    );
                }
            }
            self.publish();
            if self.held.is_some() && !self.renews {
                shutdown.wait().await;
                break;
            }
            let next = match self.held {
                Some(_) => started + renew,
                None => started + poll,
            };
            let next = match self.deadline() {
                Some(d) => next.min(d),
                None => next,
            };
            tokio::select! {
                () = shutdown.wait() => break,
                () = tokio::time::sleep_until(next.into()) => {}
            }
        }
        self.release().await;
    }

    /// When leadership lapses without a renewal.
    fn deadline(&self) -> Option<Instant> {
        self.held
            .filter(|_| self.renews)
            .map(|(_, at, _)| at + self.valid_for())
    }

    fn publish(&mut self) {
        if self.deadline().is_some_and(|d| Instant::now() >= d) {
            tracing::warn!(
                instance = %self.replica.instance,
                "stepping down as leader: the lease could not be renewed in time (is the database reachable?)"
            );
            self.held = None;
        }
        let term = self.held.map(|(_, _, t)| t);
        let changed = self.tx.send_if_modified(|cur| {
            if cur.map(|c| c.token) != term {
                *cur = term.map(|token| Term {
                    token,
                    since: Instant::now(),
                });
                true
            } else {
                false
            }
        });
        if changed {
            match term {
                Some(t) => {
                    tracing::info!(instance = %self.replica.instance, fencing_token = t, "this replica is now the leader")
                }
                None => {
                    tracing::info!(instance = %self.replica.instance, "this replica is no longer the leader")
                }
            }
        }
        self.gauge.set(i64::from(term.is_some()));
    }

    fn lease_body(&self, token: u64, acquired_at: Option<&str>) -> serde_json::Value {
        let now = rfc3339(SystemTime::now());
        serde_json::to_value(Lease {
            holder: self.replica.instance.clone(),
            incarnation: self.replica.incarnation.clone(),
            fencing_token: token,
            lease_ms: u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX),
            acquired_at: acquired_at.map_or_else(|| now.clone(), str::to_owned),
            renewed_at: now,
        })
        .expect("a lease serializes")
    }

    /// One read, and a create, renewal or takeover when due.
    async fn round(&mut self, started: Instant) -> Result<(), StoreError> {
        let key = lease_key();
        let labels = Default::default();
        let Some(obj) = self.store.get(&key).await? else {
            self.observed = None;
            self.held = None;
            return match self
                .store
                .create(&key, &labels, &self.lease_body(1, None))
                .await
            {
                Ok(o) => {
                    self.held = Some((o.revision, started, 1));
                    Ok(())
                }
                Err(StoreError::AlreadyExists(_)) => Ok(()),
                Err(e) => Err(e),
            };
        };
        let lease: Option<Lease> = serde_json::from_value(obj.body.clone()).ok();
        let Some(lease) = lease else {
            tracing::warn!("leader election: the stored lease is unreadable; taking it over");
            return self.take_over(obj.revision, 1, started).await;
        };
        let mine = lease.holder == self.replica.instance;
        if mine && lease.incarnation == self.replica.incarnation {
            let body = self.lease_body(lease.fencing_token, Some(&lease.acquired_at));
            return match self
                .store
                .update(&key, &labels, &body, Some(obj.revision))
                .await
            {
                Ok(o) => {
                    self.held = Some((o.revision, started, lease.fencing_token));
                    Ok(())
                }
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {
                    self.held = None;
                    Ok(())
                }
                Err(e) => Err(e),
            };
        }
        self.held = None;
        if mine || !self.renews {
            // An earlier run of this very instance, or of the one control
            // plane a SQLite store can have: it is gone.
            return self
                .take_over(obj.revision, lease.fencing_token + 1, started)
                .await;
        }
        match self.observed {
            Some((rev, since)) if rev == obj.revision => {
                if started.duration_since(since) >= self.lease {
                    tracing::info!(holder = %lease.holder, lease = ?self.lease,
                        "leader election: the leader's lease ran out without a renewal; taking over");
                    return self
                        .take_over(obj.revision, lease.fencing_token + 1, started)
                        .await;
                }
            }
            _ => self.observed = Some((obj.revision, started)),
        }
        Ok(())
    }

    async fn take_over(
        &mut self,
        revision: u64,
        token: u64,
        started: Instant,
    ) -> Result<(), StoreError> {
        let body = self.lease_body(token, None);
        match self
            .store
            .update(&lease_key(), &Default::default(), &body, Some(revision))
            .await
        {
            Ok(o) => {
                self.observed = None;
                self.held = Some((o.revision, started, token));
                Ok(())
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes a held lease so the next leader starts at once.
    async fn release(&mut self) {
        if let Some((revision, _, _)) = self.held.take() {
            match self.store.delete(&lease_key(), Some(revision)).await {
                Ok(_) => tracing::info!("released the leader lease"),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot release the leader lease; it runs out by itself")
                }
            }
        }
        self.tx.send_replace(None);
        self.gauge.set(0);
    }
}

/// Reads the lease (for `get controlplanes`).
pub async fn read(store: &dyn Store) -> Result<Option<Lease>, StoreError> {
    Ok(store
        .get(&lease_key())
        .await?
        .and_then(|o| serde_json::from_value(o.body).ok()))
}
