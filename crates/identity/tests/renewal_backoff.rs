//! Renewal under CA failure: the driver backs off (few attempts, growing
//! gaps), keeps the still-valid credential published, and recovers before
//! expiry once the CA is back. All on paused time.

mod renewal_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use meshlink_identity::{BackoffPolicy, RenewalDriver, WallClock};
use renewal_support::{Cert, base_time, secs_since};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Attempt times of an issuer that fails until `outage_end`, then succeeds.
#[derive(Clone, Default)]
struct FlakyCa {
    attempts: Arc<Mutex<Vec<SystemTime>>>,
}

impl FlakyCa {
    fn issuer(
        &self,
        clock: WallClock,
        outage_end: SystemTime,
        lifetime: Duration,
        published: watch::Receiver<Arc<Cert>>,
        initial: Arc<Cert>,
    ) -> impl FnMut() -> std::future::Ready<Result<Cert, String>> + use<> {
        let attempts = self.attempts.clone();
        move || {
            let now = clock.now();
            attempts.lock().unwrap().push(now);
            // While the CA is down the old credential stays published.
            if now < outage_end {
                assert!(Arc::ptr_eq(&published.borrow(), &initial));
            }
            std::future::ready(if now < outage_end {
                Err("CA unavailable: connection refused".to_string())
            } else {
                Ok(Cert::new(1, now, lifetime))
            })
        }
    }

    fn gaps(&self) -> Vec<f64> {
        let attempts = self.attempts.lock().unwrap();
        attempts
            .windows(2)
            .map(|w| secs_since(w[0], w[1]))
            .collect()
    }
}

/// Upper bound on attempts during `outage` under `policy`: the exponential
/// steps until the cap, then at most one attempt per `0.8 × max` (the lowest
/// jittered cap), plus the first attempt.
fn max_attempts(policy: &BackoffPolicy, outage: Duration) -> usize {
    let steps = (policy.max.as_secs_f64() / policy.initial.as_secs_f64())
        .log2()
        .ceil() as usize;
    let capped = outage.as_secs_f64() / (policy.max.as_secs_f64() * (1.0 - policy.jitter));
    1 + steps + capped.ceil() as usize
}

#[tokio::test(start_paused = true)]
async fn ca_outage_backs_off_keeps_old_credential_and_recovers_before_expiry() {
    let lifetime = Duration::from_secs(3600);
    let outage = Duration::from_secs(20 * 60);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, mut rx) = watch::channel(initial.clone());
    rx.borrow_and_update();
    // Renewal is due at exactly 30 min (no jitter); the CA is down from
    // before then until 50 min, 10 min before the credential expires.
    let first_attempt = base_time() + lifetime / 2;
    let outage_end = first_attempt + outage;
    let ca = FlakyCa::default();
    let issuer = ca.issuer(clock, outage_end, lifetime, rx.clone(), initial.clone());
    let cancel = CancellationToken::new();
    let policy = BackoffPolicy::default();
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial.clone(), tx)
            .with_clock(clock)
            .with_jitter(|| 0.0)
            .with_backoff(policy)
            .run(issuer, cancel.clone()),
    );

    rx.changed().await.unwrap();
    let renewed_at = clock.now();
    assert_eq!(rx.borrow().serial, 1);
    assert!(
        renewed_at >= outage_end,
        "published before the CA recovered"
    );
    assert!(renewed_at < initial.not_after, "renewed only after expiry");
    // Recovery is noticed within one capped backoff step.
    assert!(secs_since(outage_end, renewed_at) <= policy.max.as_secs_f64());

    let attempts = ca.attempts.lock().unwrap().clone();
    assert_eq!(attempts[0], first_attempt);
    let failed = attempts.len() - 1;
    let bound = max_attempts(&policy, outage);
    assert!(
        failed <= bound,
        "{failed} attempts during a 20 min outage (bound {bound})"
    );
    assert!(
        failed >= 10,
        "only {failed} attempts: backoff gave up too early"
    );

    let gaps = ca.gaps();
    assert!(
        gaps[0] >= 1.0 && gaps[0] <= 1.2,
        "first retry after {}s",
        gaps[0]
    );
    // Gaps grow until capped: by `max` (less jitter), or by a quarter of the
    // remaining lifetime as expiry approaches (so retries still fit in).
    let floor = policy.max.as_secs_f64() * (1.0 - policy.jitter);
    for (i, pair) in gaps.windows(2).enumerate() {
        let remaining = secs_since(attempts[i + 1], initial.not_after);
        let lifetime_cap = remaining / f64::from(policy.remaining_divisor);
        assert!(
            pair[1] > pair[0] || pair[1] >= floor || (pair[1] - lifetime_cap).abs() < 0.002,
            "gap {} stopped growing below the cap: {gaps:?}",
            i + 1
        );
    }
    assert!(
        gaps.iter().all(|g| *g <= policy.max.as_secs_f64() + 0.001),
        "{gaps:?}"
    );
    cancel.cancel();
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn outage_past_expiry_stays_bounded_and_never_spins() {
    let lifetime = Duration::from_secs(10);
    let run_for = Duration::from_secs(3600);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, rx) = watch::channel(initial.clone());
    let never_recovers = base_time() + Duration::from_secs(100 * 3600);
    let ca = FlakyCa::default();
    let issuer = ca.issuer(clock, never_recovers, lifetime, rx.clone(), initial.clone());
    let cancel = CancellationToken::new();
    let policy = BackoffPolicy::default();
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial.clone(), tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    tokio::time::sleep(run_for).await;
    cancel.cancel();
    driver.await.unwrap();

    let attempts = ca.attempts.lock().unwrap().len();
    // Near expiry the remaining-lifetime cap adds a few short retries (each
    // at least `min` apart, at most lifetime / min of them).
    let near_expiry = (lifetime.as_secs_f64() / policy.min.as_secs_f64()) as usize;
    let bound = max_attempts(&policy, run_for) + near_expiry;
    assert!(
        attempts <= bound,
        "{attempts} attempts in an hour (bound {bound})"
    );
    assert!(
        ca.gaps().iter().all(|g| *g >= policy.min.as_secs_f64()),
        "{:?}",
        ca.gaps()
    );
    // The last credential stays published: readiness, not the driver,
    // decides what an expired credential means.
    assert!(Arc::ptr_eq(&rx.borrow(), &initial));
}

#[tokio::test(start_paused = true)]
async fn hung_issuer_times_out_and_is_retried() {
    let lifetime = Duration::from_secs(3600);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, mut rx) = watch::channel(initial.clone());
    rx.borrow_and_update();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let issuer = {
        let calls = calls.clone();
        move || {
            let now = clock.now();
            let mut calls = calls.lock().unwrap();
            calls.push(now);
            let first = calls.len() == 1;
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>(Cert::new(1, now, lifetime))
            }
        }
    };
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial, tx)
            .with_clock(clock)
            .with_jitter(|| 0.0)
            .with_attempt_timeout(Duration::from_secs(30))
            .run(issuer, cancel.clone()),
    );
    rx.changed().await.unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    let gap = secs_since(calls[0], calls[1]);
    assert!(
        (31.0..=31.2).contains(&gap),
        "retried {gap}s after a hung attempt"
    );
    cancel.cancel();
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn issuer_returning_an_expired_credential_is_a_failure() {
    let lifetime = Duration::from_secs(60);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, rx) = watch::channel(initial.clone());
    let calls = Arc::new(Mutex::new(0u32));
    let issuer = {
        let calls = calls.clone();
        move || {
            *calls.lock().unwrap() += 1;
            // A CA with a clock an hour behind.
            let stale = Cert::new(9, clock.now() - Duration::from_secs(3600), lifetime);
            async move { Ok::<_, String>(stale) }
        }
    };
    let cancel = CancellationToken::new();
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial.clone(), tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    cancel.cancel();
    driver.await.unwrap();
    assert!(
        Arc::ptr_eq(&rx.borrow(), &initial),
        "an expired credential was published"
    );
    let calls = *calls.lock().unwrap();
    assert!((2..=20).contains(&calls), "{calls} attempts in 10 min");
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_the_driver_while_it_backs_off() {
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), Duration::from_secs(10)));
    let (tx, _rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    let issuer = || async { Err::<Cert, _>("CA unavailable") };
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial, tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    tokio::time::sleep(Duration::from_secs(8)).await;
    let cancelled_at = tokio::time::Instant::now();
    cancel.cancel();
    driver.await.unwrap();
    assert_eq!(tokio::time::Instant::now(), cancelled_at);
}
