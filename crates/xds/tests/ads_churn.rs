//! Churn on paused time through the real ADS server and hub: 200 proxies
//! reconnect at random moments for a simulated hour while identity
//! certificates (20 s lifetime) renew every ~10 s (about 72,000
//! issuances and 4,000 reconnects). At the end every proxy's
//! final stream holds a current, unexpired certificate from the hub, and
//! once the streams close no owner record or per-proxy task is left.

mod ads_support;

use std::sync::Arc;
use std::time::Duration;

use ads_support::{Harness, MemorySource, Stream, identity_pem};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

const PROXIES: usize = 200;
const SPAN: Duration = Duration::from_secs(3600);
const LIFETIME: Duration = Duration::from_secs(20);

/// SplitMix64, seeded per proxy: deterministic "random" moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi - lo + 1))
    }
}

/// Reads a stream, ACKs every response, and publishes the last identity
/// certificate PEM it received, until the stream ends or `stop` fires.
fn consume(
    mut s: Stream,
    seen: watch::Sender<Option<String>>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<Stream> {
    tokio::spawn(async move {
        s.request(None).await;
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => break,
                next = s.next_untimed() => next,
            };
            let Some(Ok(r)) = next else { break };
            if let Some(pem) = identity_pem(&r) {
                seen.send_replace(Some(pem));
            }
            s.request(Some(&r)).await;
        }
        s
    })
}

#[tokio::test(start_paused = true)]
async fn proxies_reconnecting_for_an_hour_end_with_current_certificates() {
    let h = Arc::new(Harness::new(MemorySource::new(PROXIES, LIFETIME)));
    let end = Instant::now() + SPAN;
    let mut proxies = JoinSet::new();
    for i in 0..PROXIES {
        let h = h.clone();
        proxies.spawn(async move {
            let name = format!("web-{i}");
            let mut rng = Rng(i as u64 + 1);
            let (seen_tx, seen) = watch::channel(None);
            let stop = CancellationToken::new();
            let mut current = consume(h.open(&name), seen_tx.clone(), stop.clone());
            let mut reconnects = 0u32;
            loop {
                let at = Instant::now() + rng.millis(1_000, 300_000);
                if at >= end {
                    break;
                }
                sleep_until(at).await;
                // Reconnect: the new stream opens first; the old one's
                // close and cleanup land a random moment later (often
                // after the new stream was served).
                let next = consume(h.open(&name), seen_tx.clone(), stop.clone());
                let old = std::mem::replace(&mut current, next);
                let delay = rng.millis(0, 5_000);
                tokio::spawn(async move {
                    sleep(delay).await;
                    let mut s = old.await.expect("stream consumer");
                    s.close_and_cleanup().await;
                });
                reconnects += 1;
            }
            sleep_until(end).await;
            (name, current, seen, reconnects, stop)
        });
    }
    let mut finals = Vec::new();
    while let Some(r) = proxies.join_next().await {
        finals.push(r.expect("proxy task"));
    }
    // Let every delayed cleanup run, then check the final streams.
    sleep(Duration::from_secs(10)).await;
    h.hub.sync(false).await;
    let now = h.clock.now();
    let mut total_reconnects = 0;
    for (name, _, seen, reconnects, _) in &finals {
        total_reconnects += reconnects;
        let pem = seen
            .borrow()
            .clone()
            .unwrap_or_else(|| panic!("{name}: no identity received"));
        let (not_after, _) = h.source.lookup(&pem).expect("issued by the hub");
        assert!(
            not_after > now,
            "{name}: final certificate expired {:?} ago",
            now.duration_since(not_after).unwrap_or_default()
        );
    }
    assert!(
        total_reconnects > PROXIES as u32 * 10,
        "churn happened: {total_reconnects} reconnects"
    );
    assert_eq!(h.registry.len(), PROXIES, "exactly one owner per proxy");
    for (_, current, _, _, stop) in finals {
        stop.cancel();
        let mut s = current.await.expect("consumer");
        s.close_and_cleanup().await;
    }
    h.hub.sync(false).await;
    assert_eq!(h.registry.len(), 0, "owner records leaked");
    let deadline = Instant::now() + Duration::from_secs(5);
    while h.registry.live_tasks() > 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(h.registry.live_tasks(), 0, "per-proxy tasks leaked");
}
