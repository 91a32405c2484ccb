//! Several control-plane replicas on one store (DESIGN §5, issue 11):
//! instance records with heartbeats, leader election, the singleton jobs
//! the leader runs, and the material every replica must share (the xDS
//! serving CA and the admin token).
//!
//! # What it owns
//!
//! - `internal.ControlPlane/<instance>` ([`record`]): one per replica,
//!   written by that replica every [`HEARTBEAT_EVERY`]; `meshlink get
//!   controlplanes` lists them.
//! - `internal.Leader/control-plane` ([`leader`]): the lease. The holder
//!   renews it with a compare-and-swap; another replica takes it over only
//!   after it saw the same revision for a whole lease. Each takeover bumps
//!   the fencing token. A leader whose renewals fail steps down before its
//!   lease could have ended in anyone else's eyes.
//! - `internal.JobRun/<job>` ([`jobs`]): the last period each singleton job
//!   ran in. The leader claims a period with a compare-and-swap before it
//!   runs the job, so a period runs at most once even if two replicas
//!   believe they lead; the period (two leases) is longer than a takeover,
//!   so no period is skipped either.
//!
//! With SQLite there is one replica; it wins the lease at once and the
//! same code runs.

pub mod jobs;
pub mod leader;
pub mod presence;
pub mod record;
pub mod shared;

use std::time::Duration;

pub use leader::Leadership;

/// How often each replica writes its instance record.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// A replica whose heartbeat is older than this is shown as stale, and the
/// proxies it holds count as disconnected.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(20);

/// An instance record older than this is deleted by the leader.
pub const RECORD_FORGET: Duration = Duration::from_secs(3600);

/// Store kind of the instance records.
pub const INSTANCE_KIND: &str = "internal.ControlPlane";
/// Store kind of the leader lease.
pub const LEADER_KIND: &str = "internal.Leader";
/// Store kind of the singleton jobs' run records.
pub const JOB_RUN_KIND: &str = "internal.JobRun";

/// This replica's identity among the replicas sharing a store.
#[derive(Debug, Clone)]
pub struct Replica {
    /// `--instance` (default `<hostname>:<xds port>`).
    pub instance: String,
    /// Random per process start: tells this run from an earlier one with
    /// the same instance name.
    pub incarnation: String,
}

impl Replica {
    /// A replica named `instance`, with a fresh incarnation.
    pub fn new(instance: String) -> Self {
        Replica {
            instance,
            incarnation: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// RFC 3339 with seconds, as every time in the API.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Parses an RFC 3339 time written by [`rfc3339`].
pub(crate) fn parse_time(s: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// What [`start`] needs.
pub(crate) struct ReplicaParts<'a> {
    /// The shared store.
    pub store: std::sync::Arc<dyn meshlink_store::Store>,
    /// Resources (for the jobs).
    pub resources: crate::resources::ResourceService,
    /// This replica.
    pub replica: Replica,
    /// The election's outcome.
    pub leadership: Leadership,
    /// The addresses this replica advertises.
    pub addrs: record::Addresses,
    /// The ADS server (its open streams are "connected proxies").
    pub ads: meshlink_xds::ads::AdsServer,
    /// Settings (lease, GC grace).
    pub config: &'a crate::CpConfig,
    /// Metrics registry.
    pub registry: &'a meshlink_runtime::MetricsRegistry,
    /// Shutdown.
    pub shutdown: &'a meshlink_runtime::Shutdown,
    /// Where the tasks go.
    pub tasks: &'a mut tokio::task::JoinSet<Result<(), crate::CpError>>,
}

/// The singleton jobs' period: two leases, longer than a takeover, so no
/// period goes without a run across a leader change.
pub fn job_period(lease: Duration) -> Duration {
    (lease * 2).max(Duration::from_secs(1))
}

/// Starts the heartbeat and the singleton jobs (the election is started
/// earlier, as the CA and site controllers read its outcome).
pub(crate) fn start(parts: ReplicaParts<'_>) {
    let ReplicaParts {
        store,
        resources,
        replica,
        leadership,
        addrs,
        ads,
        config,
        registry,
        shutdown,
        tasks,
    } = parts;
    let sd = shutdown.clone();
    let (s, r) = (store.clone(), replica.clone());
    tasks.spawn(async move {
        record::heartbeat(s, r, addrs, move || ads.live_streams(), sd).await;
        Ok(())
    });
    let grace = config.dataplane_gc_grace;
    let period = job_period(config.leader_lease);
    let gc_resources = resources.clone();
    let gc_leadership = leadership.clone();
    let own = replica.instance.clone();
    let gc: jobs::JobFn = std::sync::Arc::new(move || {
        let r = gc_resources.clone();
        let judge = gc_leadership
            .held_for()
            .is_some_and(|d| d > HEARTBEAT_STALE);
        let own = own.clone();
        Box::pin(async move {
            presence::sweep(&r, grace, judge, &own)
                .await
                .map(|s| s.to_string())
        })
    });
    let expiry: jobs::JobFn = std::sync::Arc::new(move || {
        let r = resources.clone();
        Box::pin(async move {
            crate::site::expire_grants(&r)
                .await
                .map(|n| format!("{n} grant(s) marked expired"))
        })
    });
    let list = vec![
        jobs::Job {
            name: "dataplane-gc",
            period,
            run: gc,
        },
        jobs::Job {
            name: "grant-expiry",
            period,
            run: expiry,
        },
    ];
    let registry = registry.clone();
    let sd = shutdown.clone();
    tasks.spawn(async move {
        jobs::run(store, replica, leadership, list, &registry, sd).await;
        Ok(())
    });
}
