//! Singleton jobs: work that exactly one replica does per period.
//!
//! Time is cut into periods of [`Job::period`] (unix time / period). While
//! this replica leads, it checks every second whether the current period
//! has run; if not, it claims it by a compare-and-swap of
//! `internal.JobRun/<job>` (recording the period, its instance and its
//! fencing token) and only then runs the job. A claim that loses the CAS
//! means another replica ran the period. The record counts every run and
//! remembers the first period, so `runs == last - first + 1` shows that no
//! period ran twice and none was skipped (`meshlink get controlplanes`
//! prints it; `meshlink_cp_singleton_runs_total{job}` counts this replica's
//! runs).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::{ObjectKey, Store, StoreError};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::{Deserialize, Serialize};

use super::{JOB_RUN_KIND, Leadership, Replica, rfc3339};

/// A job's run record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct JobRun {
    /// The job.
    pub job: String,
    /// Period length in seconds.
    pub period_seconds: u64,
    /// The first period that ran.
    pub first_period: u64,
    /// The last period that ran.
    pub last_period: u64,
    /// Runs so far.
    pub runs: u64,
    /// The replica that ran the last period.
    pub instance: String,
    /// Its fencing token then.
    pub fencing_token: u64,
    /// When the last period ran.
    pub last_run: String,
    /// What the last run did, in a line.
    #[serde(default)]
    pub last_result: String,
}

/// The key of `job`'s run record.
pub fn key(job: &str) -> ObjectKey {
    ObjectKey::new(JOB_RUN_KIND, "", job)
}

/// A job body: returns a one-line summary of what it did.
pub type JobFn = Arc<dyn Fn() -> BoxFuture<'static, Result<String, String>> + Send + Sync>;

/// One singleton job.
#[derive(Clone)]
pub struct Job {
    /// Its name (metric label and record name).
    pub name: &'static str,
    /// How often it runs.
    pub period: Duration,
    /// What it does.
    pub run: JobFn,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabel {
    job: String,
}

/// The period `now` falls in.
fn period_of(now: SystemTime, period: Duration) -> u64 {
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    secs / period.as_secs().max(1)
}

/// Every run record, sorted by job.
pub async fn list(store: &dyn Store) -> Result<Vec<JobRun>, StoreError> {
    let objs = store
        .list(&meshlink_store::ListQuery {
            kind: JOB_RUN_KIND.to_owned(),
            ..Default::default()
        })
        .await?;
    Ok(objs
        .into_iter()
        .filter_map(|o| serde_json::from_value(o.body).ok())
        .collect())
}

/// Claims `period` for `job` under `token`. `Ok(true)`: run it now.
async fn claim(
    store: &dyn Store,
    job: &Job,
    period: u64,
    replica: &Replica,
    token: u64,
) -> Result<bool, StoreError> {
    let key = key(job.name);
    let current = store.get(&key).await?;
    let (prev, revision) = match current {
        Some(o) => (
            serde_json::from_value::<JobRun>(o.body).ok(),
            Some(o.revision),
        ),
        None => (None, None),
    };
    if prev.as_ref().is_some_and(|p| p.last_period >= period) {
        return Ok(false);
    }
    let next = JobRun {
        job: job.name.to_owned(),
        period_seconds: job.period.as_secs(),
        first_period: prev.as_ref().map_or(period, |p| p.first_period),
        last_period: period,
        runs: prev.as_ref().map_or(0, |p| p.runs) + 1,
        instance: replica.instance.clone(),
        fencing_token: token,
        last_run: rfc3339(SystemTime::now()),
        // Kept until this run's result differs (see `note_result`).
        last_result: prev
            .as_ref()
            .map(|p| p.last_result.clone())
            .unwrap_or_default(),
    };
    let body = serde_json::to_value(&next).expect("a job record serializes");
    let labels = Default::default();
    let written = match revision {
        Some(rev) => store.update(&key, &labels, &body, Some(rev)).await,
        None => store.create(&key, &labels, &body).await,
    };
    match written {
        Ok(_) => Ok(true),
        Err(
            StoreError::Conflict { .. } | StoreError::AlreadyExists(_) | StoreError::NotFound(_),
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records what a run did (best effort; the claim already counted it).
/// `previous` is the result already stored: an unchanged result is not
/// written again.
async fn note_result(store: &dyn Store, job: &str, period: u64, result: &str) {
    let key = key(job);
    if let Ok(Some(o)) = store.get(&key).await
        && let Ok(mut r) = serde_json::from_value::<JobRun>(o.body)
        && r.last_period == period
        && r.last_result != result
    {
        r.last_result = result.to_owned();
        let body = serde_json::to_value(&r).expect("a job record serializes");
        let _ = store
            .update(&key, &Default::default(), &body, Some(o.revision))
            .await;
    }
}

/// Runs `jobs` while this replica leads, until `shutdown`.
pub async fn run(
    store: Arc<dyn Store>,
    replica: Replica,
    leadership: Leadership,
    jobs: Vec<Job>,
    registry: &MetricsRegistry,
    shutdown: Shutdown,
) {
    let runs: Family<JobLabel, Counter> = Family::default();
    registry.register_with("cp", |r| {
        r.register(
            "singleton_runs",
            "Periods of each singleton job this replica ran as leader",
            runs.clone(),
        );
    });
    // The last period known to have run, per job (skips the store read).
    let mut done: Vec<u64> = vec![0; jobs.len()];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.wait() => return,
            _ = tick.tick() => {}
        }
        for (i, job) in jobs.iter().enumerate() {
            let Some(token) = leadership.term() else {
                break;
            };
            let period = period_of(SystemTime::now(), job.period);
            if done[i] >= period {
                continue;
            }
            match claim(store.as_ref(), job, period, &replica, token).await {
                Ok(true) => {
                    done[i] = period;
                    runs.get_or_create(&JobLabel {
                        job: job.name.to_owned(),
                    })
                    .inc();
                    let result = match (job.run)().await {
                        Ok(summary) => summary,
                        Err(e) => {
                            tracing::warn!(job = job.name, error = %e, "singleton job failed; it runs again next period");
                            format!("failed: {e}")
                        }
                    };
                    tracing::debug!(job = job.name, period, %result, "singleton job ran");
                    note_result(store.as_ref(), job.name, period, &result).await;
                }
                Ok(false) => done[i] = period,
                Err(e) => {
                    tracing::warn!(job = job.name, error = %e, "cannot claim the singleton job's period; retrying");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_whole_multiples() {
        let t = UNIX_EPOCH + Duration::from_secs(95);
        assert_eq!(period_of(t, Duration::from_secs(30)), 3);
        assert_eq!(period_of(t, Duration::from_secs(0)), 95);
    }
}
