//! The measured phases, in order: initial connect, propagation rounds,
//! reconnect storms. Each returns its figures as JSON.
//!
//! A phase that does not finish by its deadline still reports: how many
//! proxies got there, and the latencies of those that did.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::api::{Api, backend_address};
use crate::certs;
use crate::fleet::{CounterSnapshot, Fleet};
use crate::report::{Latencies, ProcSample, cpu_seconds, median, round};
use crate::state::ClientKind;
use crate::stream::Goal;

/// Port of backend-1 in round `r` (round 0: the initial 8080).
fn backend_port(round: u32) -> u32 {
    if round == 0 { 8080 } else { 9000 + round }
}

/// How a storm reconnects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StormMode {
    /// Envoy reconnecting: keeps its config, sends `initial_resource_versions`.
    Resume,
    /// Envoy restarting: holds nothing, needs everything again.
    Fresh,
}

/// Runs the phases against a set-up control plane.
pub(crate) struct Phases<'a> {
    /// The REST API.
    pub(crate) api: &'a Api,
    /// The proxies.
    pub(crate) fleet: &'a mut Fleet,
    /// Mesh name.
    pub(crate) mesh: &'a str,
    /// Control-plane pid, for RSS and CPU.
    pub(crate) cp_pid: Option<&'a str>,
    /// Deadline of each phase.
    pub(crate) timeout: Duration,
    /// How long to wait after a storm, all proxies connected, before
    /// reading the control plane's RSS again (zero: not read).
    pub(crate) rss_settle: Duration,
    /// Next round number.
    pub(crate) round: u32,
}

fn per_proxy(d: CounterSnapshot, n: usize) -> Value {
    let n = n.max(1) as f64;
    json!({"responses": round(d.responses as f64 / n), "resources": round(d.resources as f64 / n),
        "streams": round(d.streams as f64 / n), "unchanged_resources_total": d.unchanged,
        "unsolicited_resources_total": d.unsolicited})
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Phases<'_> {
    /// Sample of control-plane and generator resources now.
    pub(crate) fn sample(&self) -> ProcSample {
        ProcSample::now(self.cp_pid)
    }

    /// Waits until the control plane is idle (under 10 % of a core over one
    /// second), at most `timeout`; returns the seconds waited (None: no pid).
    /// Background work left from the previous phase (certificate records,
    /// pushes) would otherwise be measured as part of the next one.
    pub(crate) async fn quiesce(&self, label: &str) -> Option<f64> {
        let pid = self.cp_pid?;
        let t0 = Instant::now();
        loop {
            let a = cpu_seconds(pid)?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let b = cpu_seconds(pid)?;
            if b - a < 0.1 || t0.elapsed() > self.timeout {
                let waited = t0.elapsed().as_secs_f64();
                eprintln!("{label}: control plane idle after {waited:.1} s");
                return Some(waited);
            }
        }
    }

    /// Connects all proxies (spread over `spread`) and waits until each
    /// holds a complete configuration.
    pub(crate) async fn initial(&mut self, spread: Duration) -> anyhow::Result<Value> {
        self.fleet.set_goal(Goal::default());
        let before = self.sample();
        let c0 = self.fleet.counters();
        let t0 = self.fleet.start(spread)?;
        let at = self.fleet.wait_round(0, t0 + self.timeout, "initial").await;
        let lat = Latencies::since(t0, &at);
        let after = self.sample();
        self.round = 1;
        eprintln!(
            "initial: {}/{} proxies hold a complete config after {:.0} ms",
            at.len() - lat.missing,
            at.len(),
            lat.max()
        );
        let own = Latencies::since_each(self.fleet.starts(), &at);
        let counters = self.fleet.counters().since(c0);
        Ok(json!({
            "spread_ms": spread.as_millis() as u64,
            "ready_since_start": lat.json(),
            "ready_since_own_connect": own.json(),
            "per_proxy": per_proxy(counters, self.fleet.len()),
            "cpu": after.cpu_since(&before),
        }))
    }

    /// `rounds` endpoint changes, one at a time: t0 when the API write is
    /// sent, latency = when each proxy ACKed the new endpoint.
    pub(crate) async fn propagation(&mut self, rounds: u32) -> anyhow::Result<Value> {
        let idle_after_s = self.quiesce("before propagation").await;
        let mut out = Vec::new();
        let (mut p50, mut p90, mut p99, mut max) = (vec![], vec![], vec![], vec![]);
        let mut cpu_us_per_proxy = vec![];
        for _ in 0..rounds {
            let r = self.round;
            self.round += 1;
            let endpoint = (backend_address(1), backend_port(r));
            self.fleet.set_goal(Goal {
                round: r,
                endpoint: Some(endpoint.clone()),
            });
            let c0 = self.fleet.counters();
            let s0 = self.sample();
            let t0 = Instant::now();
            self.api.apply_backend(self.mesh, 1, endpoint.1).await?;
            let api_ms = t0.elapsed().as_secs_f64() * 1e3;
            let at = self
                .fleet
                .wait_round(r, t0 + self.timeout, &format!("propagation round {r}"))
                .await;
            let lat = Latencies::since(t0, &at);
            eprintln!(
                "propagation round {r}: p50 {:.0} ms, p99 {:.0} ms, all {:.0} ms, missing {}",
                lat.pct(50.0),
                lat.pct(99.0),
                lat.max(),
                lat.missing
            );
            p50.push(lat.pct(50.0));
            p90.push(lat.pct(90.0));
            p99.push(lat.pct(99.0));
            max.push(if lat.missing == 0 {
                lat.max()
            } else {
                f64::NAN
            });
            let counters = self.fleet.counters().since(c0);
            let s1 = self.sample();
            if let Some(cpu) = s1.cp_cpu_since(&s0) {
                cpu_us_per_proxy.push(cpu * 1e6 / self.fleet.len() as f64);
            }
            out.push(json!({
                "round": r,
                "api_write_ms": round(api_ms),
                "ack_since_write": lat.json(),
                "per_proxy": per_proxy(counters, self.fleet.len()),
                "cpu": s1.cpu_since(&s0),
            }));
        }
        Ok(json!({
            "cp_idle_wait_s": idle_after_s.map(round),
            "median_cp_cpu_us_per_proxy": round(median(cpu_us_per_proxy)),
            "rounds": out,
            "median_p50_ms": round(median(p50)),
            "median_p90_ms": round(median(p90)),
            "median_p99_ms": round(median(p99)),
            "median_all_ms": round(median(max)),
        }))
    }

    /// Disconnects every proxy, changes backend-1 while they are away, and
    /// reconnects them all over `spread`; measures until each holds the new
    /// endpoint and a valid identity, then checks their certificates.
    pub(crate) async fn storm(
        &mut self,
        mode: StormMode,
        spread: Duration,
    ) -> anyhow::Result<Value> {
        let idle_after_s = self.quiesce(&format!("before storm {mode:?}")).await;
        let r = self.round;
        self.round += 1;
        let endpoint = (backend_address(1), backend_port(r));
        self.fleet.set_goal(Goal {
            round: r,
            endpoint: Some(endpoint.clone()),
        });
        self.fleet.stop().await;
        self.fleet.drain();
        let before = certs::serials(self.fleet.states());
        if mode == StormMode::Fresh {
            self.fleet.reset();
        }
        self.api.apply_backend(self.mesh, 1, endpoint.1).await?;
        let c0 = self.fleet.counters();
        let s0 = self.sample();
        let t0 = self.fleet.start(spread)?;
        let label = format!("storm {mode:?}");
        let at = self.fleet.wait_round(r, t0 + self.timeout, &label).await;
        let lat = Latencies::since(t0, &at);
        let own = Latencies::since_each(self.fleet.starts(), &at);
        let s1 = self.sample();
        let counters = self.fleet.counters().since(c0);
        let settled = if self.rss_settle.is_zero() {
            None
        } else {
            tokio::time::sleep(self.rss_settle).await;
            self.sample().cp_rss_kib
        };
        self.fleet.stop().await;
        // meshlink-proxy takes its identity through a CSR, which this
        // generator does not send: there is no certificate to check.
        let (stale, certificates) = if self.fleet.client() == ClientKind::Envoy {
            let bundle = self.api.trust_bundle(self.mesh).await?;
            let check = certs::check(self.fleet.states(), &bundle, &before, unix_now())?;
            (check.stale().to_string(), check.json())
        } else {
            ("not checked".to_owned(), Value::Null)
        };
        eprintln!(
            "{label}: all current after {:.0} ms (missing {}), stale certificates {stale}",
            lat.max(),
            lat.missing,
        );
        Ok(json!({
            "mode": format!("{mode:?}").to_lowercase(),
            "spread_ms": spread.as_millis() as u64,
            "cp_idle_wait_s": idle_after_s.map(round),
            "current_since_start": lat.json(),
            "current_since_own_reconnect": own.json(),
            "certificates": certificates,
            "per_proxy": per_proxy(counters, self.fleet.len()),
            "cp_rss_kib_after": s1.cp_rss_kib,
            "cp_rss_kib_settled": settled,
            "rss_settle_s": self.rss_settle.as_secs_f64(),
            "cpu": s1.cpu_since(&s0),
        }))
    }
}
