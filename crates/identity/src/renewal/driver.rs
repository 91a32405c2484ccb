//! The renewal actor for one identity.
//!
//! Owns the renewal loop: sleep until [`renewal_time`], call the issuer,
//! publish the new credential on a `watch` channel, and on failure keep the
//! still-valid credential published and retry with [`RetryBackoff`]. Used by
//! the proxy (CSR + Certify) and by the control plane's SDS path.
//!
//! Must never: read `SystemTime::now()` or `std::time::Instant` in the loop
//! (time comes from a [`WallClock`] built on `tokio::time::Instant`), retry
//! without backoff, or unpublish a still-valid credential because a renewal
//! failed.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    BackoffPolicy, Credential, RenewalError, RetryBackoff, random_jitter, renewal_time_from,
};

/// Default time an issuer call may take before it counts as a failure.
const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Wall-clock time derived from `tokio::time`: a base `SystemTime` plus the
/// tokio time elapsed since the clock was created. Under paused time it
/// advances with the paused clock, so rotation tests are deterministic.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    base_system: SystemTime,
    base_instant: Instant,
}

// === impl WallClock ===

impl WallClock {
    /// A clock anchored to the real wall clock, read once, now.
    pub fn start() -> Self {
        Self::starting_at(SystemTime::now())
    }

    /// A clock that reads `at` now and advances with tokio time (for tests).
    pub fn starting_at(at: SystemTime) -> Self {
        Self {
            base_system: at,
            base_instant: Instant::now(),
        }
    }

    /// The current wall-clock time.
    pub fn now(&self) -> SystemTime {
        self.base_system + self.base_instant.elapsed()
    }
}

/// Renews one identity's credential until cancelled. Build with
/// [`RenewalDriver::new`], adjust with the `with_*` methods, then spawn
/// [`RenewalDriver::run`] on a `JoinSet` or tie it to the identity owner's
/// cancellation token.
pub struct RenewalDriver<C> {
    identity: String,
    current: Arc<C>,
    /// When `current` was obtained (by this driver's clock); the epoch for
    /// the initial credential, whose age is unknown (its notBefore counts).
    obtained_at: std::time::SystemTime,
    publish: watch::Sender<Arc<C>>,
    clock: WallClock,
    policy: BackoffPolicy,
    jitter: Box<dyn FnMut() -> f64 + Send>,
    attempt_timeout: Duration,
}

impl<C> fmt::Debug for RenewalDriver<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenewalDriver")
            .field("identity", &self.identity)
            .field("policy", &self.policy)
            .field("attempt_timeout", &self.attempt_timeout)
            .finish_non_exhaustive()
    }
}

// === impl RenewalDriver ===

impl<C: Credential> RenewalDriver<C> {
    /// A driver for `identity` (used in logs) whose current credential is
    /// `initial`; it publishes `initial` and every renewed credential on
    /// `publish`. Defaults: [`WallClock::start`], [`BackoffPolicy::default`],
    /// [`random_jitter`], a 30 s attempt timeout.
    pub fn new(
        identity: impl Into<String>,
        initial: Arc<C>,
        publish: watch::Sender<Arc<C>>,
    ) -> Self {
        Self {
            identity: identity.into(),
            current: initial,
            obtained_at: std::time::UNIX_EPOCH,
            publish,
            clock: WallClock::start(),
            policy: BackoffPolicy::default(),
            jitter: Box::new(random_jitter),
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
        }
    }

    /// Records that the initial credential was obtained at `at` (by this
    /// driver's clock), so its lifetime counts from then rather than from
    /// its backdated notBefore. Use it when the caller just fetched the
    /// initial credential itself.
    pub fn with_obtained_at(mut self, at: SystemTime) -> Self {
        self.obtained_at = at;
        self
    }

    /// Uses `clock` for wall-clock time (share one clock between drivers).
    pub fn with_clock(mut self, clock: WallClock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `policy` for retries after failed renewals.
    pub fn with_backoff(mut self, policy: BackoffPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Uses `jitter` (called once per renewal, result clamped to ±0.1) instead
    /// of [`random_jitter`].
    pub fn with_jitter(mut self, jitter: impl FnMut() -> f64 + Send + 'static) -> Self {
        self.jitter = Box::new(jitter);
        self
    }

    /// Counts an issuer call that takes longer than `timeout` as a failure.
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// Runs the renewal loop until `cancel` fires. `issue` is called once per
    /// attempt and returns a fresh credential or an error.
    pub async fn run<F, Fut, E>(mut self, mut issue: F, cancel: CancellationToken)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<C, E>>,
        E: fmt::Display,
    {
        let initial = self.current.clone();
        self.publish.send_if_modified(|published| {
            let changed = !Arc::ptr_eq(published, &initial);
            if changed {
                *published = initial.clone();
            }
            changed
        });
        let mut backoff = RetryBackoff::new(self.policy);
        let mut renewed = false;
        loop {
            let mut wait = self.until_renewal();
            if renewed {
                // A fresh credential that is already due means a broken issuer
                // or clock; do not spin on it.
                wait = wait.max(self.policy.min);
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            loop {
                let outcome = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return,
                    outcome = tokio::time::timeout(self.attempt_timeout, issue()) => outcome,
                };
                let now = self.clock.now();
                let error = match outcome {
                    Ok(Ok(fresh)) if fresh.not_after() > now => {
                        self.current = Arc::new(fresh);
                        self.obtained_at = self.clock.now();
                        self.publish.send_replace(self.current.clone());
                        backoff.reset();
                        renewed = true;
                        tracing::debug!(identity = %self.identity, "credential renewed");
                        break;
                    }
                    Ok(Ok(expired)) => RenewalError::AlreadyExpired {
                        identity: self.identity.clone(),
                        not_after: expired.not_after(),
                    },
                    Ok(Err(e)) => RenewalError::Issuer {
                        identity: self.identity.clone(),
                        reason: e.to_string(),
                    },
                    Err(_) => RenewalError::Timeout {
                        identity: self.identity.clone(),
                        after: self.attempt_timeout,
                    },
                };
                let remaining = self
                    .current
                    .not_after()
                    .duration_since(now)
                    .unwrap_or_default();
                let delay = backoff.next_delay(remaining);
                tracing::warn!(
                    %error,
                    failures = backoff.failures(),
                    retry_in = %humantime::format_duration(delay),
                    "credential renewal failed",
                );
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }

    fn until_renewal(&mut self) -> Duration {
        let at = renewal_time_from(
            self.obtained_at,
            self.current.not_before(),
            self.current.not_after(),
            (self.jitter)(),
        );
        at.duration_since(self.clock.now()).unwrap_or_default()
    }
}
