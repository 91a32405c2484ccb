//! Numbers for the report: latency summaries (nearest-rank percentiles over
//! all proxies) and process figures read from `/proc` (RSS, CPU time).
//!
//! It never measures anything itself beyond reading `/proc`.

use serde_json::{Value, json};
use tokio::time::Instant;

/// Latencies in milliseconds of the proxies that got there, and how many
/// did not.
#[derive(Debug, Clone, Default)]
pub(crate) struct Latencies {
    sorted_ms: Vec<f64>,
    /// Proxies that did not get there by the deadline.
    pub(crate) missing: usize,
}

impl Latencies {
    /// From per-proxy instants relative to `t0`.
    pub(crate) fn since(t0: Instant, at: &[Option<Instant>]) -> Self {
        let mut sorted_ms: Vec<f64> = at
            .iter()
            .flatten()
            .map(|t| t.saturating_duration_since(t0).as_secs_f64() * 1e3)
            .collect();
        sorted_ms.sort_by(f64::total_cmp);
        Self {
            missing: at.len() - sorted_ms.len(),
            sorted_ms,
        }
    }

    /// From per-proxy instants relative to each proxy's own start.
    pub(crate) fn since_each(starts: &[Instant], at: &[Option<Instant>]) -> Self {
        let mut sorted_ms: Vec<f64> = starts
            .iter()
            .zip(at)
            .filter_map(|(s, a)| {
                Some(a.as_ref()?.saturating_duration_since(*s).as_secs_f64() * 1e3)
            })
            .collect();
        sorted_ms.sort_by(f64::total_cmp);
        Self {
            missing: at.len() - sorted_ms.len(),
            sorted_ms,
        }
    }

    /// Nearest-rank percentile `p` (0–100) in ms; NaN when empty.
    pub(crate) fn pct(&self, p: f64) -> f64 {
        if self.sorted_ms.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * self.sorted_ms.len() as f64).ceil() as usize;
        self.sorted_ms[rank.clamp(1, self.sorted_ms.len()) - 1]
    }

    /// The last one, in ms (the "all N" time when nothing is missing).
    pub(crate) fn max(&self) -> f64 {
        self.sorted_ms.last().copied().unwrap_or(f64::NAN)
    }

    /// As JSON.
    pub(crate) fn json(&self) -> Value {
        json!({"count": self.sorted_ms.len(), "missing": self.missing,
            "min_ms": round(self.pct(0.0)), "p50_ms": round(self.pct(50.0)),
            "p90_ms": round(self.pct(90.0)), "p99_ms": round(self.pct(99.0)),
            "max_ms": round(self.max())})
    }
}

/// Rounds to 0.1 (JSON null for NaN).
pub(crate) fn round(x: f64) -> Value {
    round_to(x, 10.0)
}

/// `x` rounded to `1 / per_unit`, as JSON (`null` if not finite).
fn round_to(x: f64, per_unit: f64) -> Value {
    if x.is_finite() {
        json!((x * per_unit).round() / per_unit)
    } else {
        Value::Null
    }
}

/// The median of `xs` (NaN when empty).
pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

/// `VmRSS` of `pid` in KiB.
pub(crate) fn rss_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `x` CPU seconds rounded to the kernel's 10 ms tick, as JSON.
pub(crate) fn round_ticks(x: f64) -> Value {
    round_to(x, 100.0)
}

/// User + system CPU seconds of `pid` (clock ticks assumed 100 Hz, the
/// Linux default).
pub(crate) fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3; utime and stime are 14 and 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// RSS and CPU of the control plane (if its pid is known) and of this
/// process, at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcSample {
    /// Control-plane RSS, KiB.
    pub(crate) cp_rss_kib: Option<u64>,
    /// Control-plane CPU seconds so far.
    pub(crate) cp_cpu_s: Option<f64>,
    /// This process's CPU seconds so far.
    pub(crate) self_cpu_s: Option<f64>,
}

impl ProcSample {
    /// Samples now.
    pub(crate) fn now(cp_pid: Option<&str>) -> Self {
        Self {
            cp_rss_kib: cp_pid.and_then(rss_kib),
            cp_cpu_s: cp_pid.and_then(cpu_seconds),
            self_cpu_s: cpu_seconds("self"),
        }
    }

    /// CPU used between `earlier` and `self`: (control plane, generator).
    pub(crate) fn cpu_since(&self, earlier: &Self) -> Value {
        let d = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => round_ticks(a - b),
            _ => Value::Null,
        };
        json!({"cp_cpu_s": d(self.cp_cpu_s, earlier.cp_cpu_s),
            "xds_load_cpu_s": d(self.self_cpu_s, earlier.self_cpu_s)})
    }

    /// Control-plane CPU seconds between `earlier` and `self`, unrounded
    /// (the kernel counts in 10 ms ticks).
    pub(crate) fn cp_cpu_since(&self, earlier: &Self) -> Option<f64> {
        Some(self.cp_cpu_s? - earlier.cp_cpu_s?)
    }
}
