//! No renewal storm: many certificates issued at the same moment (a control
//! plane restart, a mesh-wide CA rotation) renew spread over 40-60% of their
//! lifetime instead of all hitting the CA in the same second.

mod renewal_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshlink_identity::{RenewalDriver, WallClock, random_jitter, renewal_time};
use renewal_support::{Cert, base_time, secs_since};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

const DAY: Duration = Duration::from_secs(24 * 3600);

#[test]
fn ten_thousand_certificates_spread_their_renewals() {
    let not_before = base_time();
    let not_after = not_before + DAY;
    let lifetime = DAY.as_secs_f64();
    let offsets: Vec<f64> = (0..10_000)
        .map(|_| {
            secs_since(
                not_before,
                renewal_time(not_before, not_after, random_jitter()),
            )
        })
        .collect();

    for offset in &offsets {
        let fraction = offset / lifetime;
        assert!(
            (0.4..=0.6).contains(&fraction),
            "renewal at {fraction} of lifetime"
        );
    }
    let min = offsets.iter().copied().fold(f64::MAX, f64::min);
    let max = offsets.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        (max - min) / lifetime >= 0.15,
        "renewals span only {:.1}% of the lifetime",
        100.0 * (max - min) / lifetime
    );

    let mut per_second: HashMap<u64, u32> = HashMap::new();
    for offset in &offsets {
        *per_second.entry(*offset as u64).or_default() += 1;
    }
    let busiest = per_second.values().copied().max().unwrap();
    // Uniform over ~17,280 s gives ~0.6 per second; 10 in one second (0.1%
    // of the fleet) has odds below 1e-4 per run.
    assert!(busiest <= 10, "{busiest} renewals in the busiest second");
}

#[tokio::test(start_paused = true)]
async fn a_thousand_drivers_do_not_stampede_the_ca() {
    const DRIVERS: usize = 1_000;
    let clock = WallClock::starting_at(base_time());
    let calls_per_second: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let cancel = CancellationToken::new();
    let mut drivers = JoinSet::new();
    let mut receivers = Vec::new();
    for i in 0..DRIVERS {
        let initial = Arc::new(Cert::new(0, base_time(), DAY));
        let (tx, rx) = watch::channel(initial.clone());
        receivers.push(rx);
        let counts = calls_per_second.clone();
        let issuer = move || {
            let now = clock.now();
            *counts
                .lock()
                .unwrap()
                .entry(secs_since(base_time(), now) as u64)
                .or_default() += 1;
            async move { Ok::<_, String>(Cert::new(1, now, DAY)) }
        };
        drivers.spawn(
            RenewalDriver::new(format!("default/web-{i}"), initial, tx)
                .with_clock(clock)
                .run(issuer, cancel.clone()),
        );
    }
    // Every first renewal is due by 60% of a day (14.4 h); the earliest
    // second renewal is at 80% (19.2 h). Stop in between.
    tokio::time::sleep(Duration::from_secs(16 * 3600)).await;
    cancel.cancel();
    while let Some(done) = drivers.join_next().await {
        done.unwrap();
    }

    assert!(
        receivers.iter().all(|rx| rx.borrow().serial == 1),
        "not all renewed"
    );
    let counts = calls_per_second.lock().unwrap();
    assert_eq!(counts.values().sum::<u32>(), DRIVERS as u32);
    let busiest = counts.values().copied().max().unwrap();
    // ~0.06 renewals per second on average; 6 in one second has odds of
    // about 1e-6 per run, while an unjittered fleet would put all 1,000 there.
    assert!(
        busiest <= 5,
        "{busiest} CA calls in the busiest simulated second"
    );
    let first = *counts.keys().min().unwrap() as f64 / DAY.as_secs_f64();
    let last = *counts.keys().max().unwrap() as f64 / DAY.as_secs_f64();
    assert!(
        first >= 0.4 && last < 0.6 && last - first >= 0.15,
        "{first}..{last}"
    );
}
