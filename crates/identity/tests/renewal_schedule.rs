//! When the renewal driver renews: between 40% and 60% of the lifetime, never
//! after expiry (even for 10 s lifetimes and slow issuers), and the published
//! credential is never expired over a long run. All on paused time.

mod renewal_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshlink_identity::{Credential, RenewalDriver, WallClock};
use renewal_support::{Cert, base_time, secs_since};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Runs one driver until its first renewal and returns when it happened, as
/// a fraction of the initial credential's lifetime.
async fn first_renewal_fraction(lifetime: Duration) -> f64 {
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, _rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    let seen = Arc::new(Mutex::new(None));
    let issuer = {
        let (cancel, seen) = (cancel.clone(), seen.clone());
        move || {
            let now = clock.now();
            *seen.lock().unwrap() = Some(now);
            cancel.cancel();
            async move { Ok::<_, String>(Cert::new(1, now, lifetime)) }
        }
    };
    RenewalDriver::new("default/web", initial.clone(), tx)
        .with_clock(clock)
        .run(issuer, cancel)
        .await;
    let at = seen.lock().unwrap().expect("driver renewed once");
    secs_since(initial.not_before, at) / lifetime.as_secs_f64()
}

#[tokio::test(start_paused = true)]
async fn renews_between_40_and_60_percent_with_varying_jitter() {
    for lifetime in [DAY, Duration::from_secs(3600), Duration::from_secs(10)] {
        let mut fractions = Vec::new();
        for _ in 0..200 {
            fractions.push(first_renewal_fraction(lifetime).await);
        }
        for f in &fractions {
            // Paused-time sleeps round up to the next millisecond.
            let slack = 0.001 / lifetime.as_secs_f64();
            assert!(
                (0.4..=0.6 + slack).contains(f),
                "{lifetime:?}: renewed at {f}"
            );
        }
        let min = fractions.iter().copied().fold(f64::MAX, f64::min);
        let max = fractions.iter().copied().fold(f64::MIN, f64::max);
        assert!(
            max - min > 0.15,
            "{lifetime:?}: jitter barely varies: {min}..{max}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn ten_second_lifetime_with_slow_issuer_never_renews_after_expiry() {
    let lifetime = Duration::from_secs(10);
    let issue_latency = Duration::from_secs(3);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    let serial = Arc::new(Mutex::new(0u64));
    let issuer = {
        let (rx, serial) = (rx.clone(), serial.clone());
        move || {
            let started = clock.now();
            let current = rx.borrow().clone();
            assert!(
                started < current.not_after,
                "renewal of serial {} started at or after its expiry",
                current.serial
            );
            let serial = serial.clone();
            async move {
                tokio::time::sleep(issue_latency).await;
                let mut s = serial.lock().unwrap();
                *s += 1;
                Ok::<_, String>(Cert::new(*s, clock.now(), lifetime))
            }
        }
    };
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial, tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    // Sample every 100 ms for ten simulated minutes.
    for _ in 0..6_000 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = clock.now();
        let cert = rx.borrow().clone();
        assert!(
            cert.not_after > now,
            "serial {} expired at {now:?}",
            cert.serial
        );
    }
    let renewals = *serial.lock().unwrap();
    // Each cycle takes 4-6 s plus 3 s of latency: 600 s / 7-9 s.
    assert!(
        (66..=86).contains(&renewals),
        "{renewals} renewals in 10 min"
    );
    cancel.cancel();
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn one_hour_with_20s_lifetime_never_publishes_an_expired_credential() {
    let lifetime = Duration::from_secs(20);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(0, clock.now(), lifetime));
    let (tx, mut rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    let issued = Arc::new(Mutex::new(0u64));
    let issuer = {
        let issued = issued.clone();
        move || {
            let mut n = issued.lock().unwrap();
            *n += 1;
            let cert = Cert::new(*n, clock.now(), lifetime);
            async move { Ok::<_, String>(cert) }
        }
    };
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial, tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    let mut previous = rx.borrow_and_update().clone();
    for second in 1..=3600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = clock.now();
        let cert = rx.borrow_and_update().clone();
        assert!(
            cert.not_before <= now && now < cert.not_after,
            "second {second}: serial {} not valid now",
            cert.serial
        );
        if cert.serial != previous.serial {
            // Each renewal happened 40-60% into the previous credential's life.
            let at = secs_since(previous.not_before, cert.not_before);
            assert!(
                (8.0..=12.001).contains(&at),
                "renewed {at}s into a 20s lifetime"
            );
            previous = cert;
        }
    }
    let renewals = *issued.lock().unwrap();
    assert!(
        (299..=451).contains(&renewals),
        "{renewals} renewals in one hour"
    );
    cancel.cancel();
    driver.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn already_due_credential_is_renewed_at_once() {
    // A proxy restarting with a credential past its renewal point renews
    // immediately instead of waiting for the next cycle.
    let lifetime = Duration::from_secs(100);
    let clock = WallClock::starting_at(base_time());
    let initial = Arc::new(Cert::new(
        0,
        clock.now() - Duration::from_secs(90),
        lifetime,
    ));
    let (tx, mut rx) = watch::channel(initial.clone());
    let cancel = CancellationToken::new();
    let issuer = move || async move { Ok::<_, String>(Cert::new(1, clock.now(), lifetime)) };
    let driver = tokio::spawn(
        RenewalDriver::new("default/web", initial, tx)
            .with_clock(clock)
            .run(issuer, cancel.clone()),
    );
    rx.changed().await.unwrap();
    assert_eq!(rx.borrow().serial, 1);
    assert!(secs_since(base_time(), clock.now()) < 0.01);
    cancel.cancel();
    driver.await.unwrap();
    assert!(rx.borrow().not_after() > clock.now());
}
