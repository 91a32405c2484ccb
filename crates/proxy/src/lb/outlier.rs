//! Outlier detection, Envoy's arithmetic: per-endpoint counters fed by
//! the data path's [`Event`]s, the three consecutive detectors (5xx,
//! gateway errors, local-origin failures), and at each `interval` the
//! success-rate and failure-percentage detectors over the interval's
//! request counts.
//!
//! Owns the counters and the decision to eject; [`super::Balancer`] owns
//! the endpoints and asks [`Detector::eject`] for the cluster-wide rules
//! (`enforcing_*`, `max_ejection_percent`). It never sleeps or spawns: a
//! sweep runs at the first event after its interval has passed, and an
//! ejection ends when its deadline passes (checked where endpoints are
//! picked), so everything runs on the caller's clock (paused in tests).
//!
//! Unsplit (`split_external_local_origin_errors: false`), local failures
//! count as Envoy maps them (connect failure and reset as 503, timeout as
//! 504) and a connection made for a request counts for nothing; split,
//! they feed the local-origin detectors only.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::circuit_breaker::OutlierSpec;

/// What happened on one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An HTTP answer's status (gRPC's mapped from `grpc-status`).
    Response(u16),
    /// A connection made; `last` when nothing more will be reported for
    /// it (TCP), which then counts as a success.
    Connected {
        /// TCP's whole exchange (Envoy's `LocalOriginConnectSuccessFinal`).
        last: bool,
    },
    /// The connect failed or was reset (Envoy maps it to 503).
    ConnectFailed,
    /// The connect or the answer timed out (Envoy maps it to 504).
    TimedOut,
}

/// The detector that ejected an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DetectorKind {
    /// `consecutive_5xx`.
    Consecutive5xx,
    /// `consecutive_gateway_failure`.
    ConsecutiveGatewayFailure,
    /// `consecutive_local_origin_failure`.
    ConsecutiveLocalOriginFailure,
    /// Success rate (externally originated, or all when unsplit).
    SuccessRate,
    /// Success rate of local-origin results (split mode).
    SuccessRateLocalOrigin,
    /// Failure percentage (externally originated, or all when unsplit).
    FailurePercentage,
    /// Failure percentage of local-origin results (split mode).
    FailurePercentageLocalOrigin,
}

impl DetectorKind {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            DetectorKind::Consecutive5xx => "consecutive_5xx",
            DetectorKind::ConsecutiveGatewayFailure => "consecutive_gateway_failure",
            DetectorKind::ConsecutiveLocalOriginFailure => "consecutive_local_origin_failure",
            DetectorKind::SuccessRate => "success_rate",
            DetectorKind::SuccessRateLocalOrigin => "success_rate_local_origin",
            DetectorKind::FailurePercentage => "failure_percentage",
            DetectorKind::FailurePercentageLocalOrigin => "failure_percentage_local_origin",
        }
    }

    /// The `enforcing_*` percentage of this detector in `spec`.
    fn enforcing(self, spec: &OutlierSpec) -> u32 {
        match self {
            DetectorKind::Consecutive5xx => spec.enforcing_consecutive_5xx,
            DetectorKind::ConsecutiveGatewayFailure => spec.enforcing_consecutive_gateway_failure,
            DetectorKind::ConsecutiveLocalOriginFailure => {
                spec.enforcing_consecutive_local_origin_failure
            }
            DetectorKind::SuccessRate => spec.enforcing_success_rate,
            DetectorKind::SuccessRateLocalOrigin => spec.enforcing_local_origin_success_rate,
            DetectorKind::FailurePercentage => spec.enforcing_failure_percentage,
            DetectorKind::FailurePercentageLocalOrigin => {
                spec.enforcing_failure_percentage_local_origin
            }
        }
    }
}

/// Requests and successes in the current interval.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Window {
    total: u32,
    success: u32,
}

impl Window {
    fn add(&mut self, success: bool) {
        self.total = self.total.saturating_add(1);
        self.success = self.success.saturating_add(u32::from(success));
    }

    /// Success rate in percent.
    fn rate(self) -> f64 {
        f64::from(self.success) * 100.0 / f64::from(self.total.max(1))
    }
}

/// One endpoint's counters and ejection state.
#[derive(Debug, Default)]
pub(super) struct Health {
    consecutive_5xx: u32,
    consecutive_gateway: u32,
    consecutive_local: u32,
    pub(super) external: Window,
    pub(super) local: Window,
    /// Ejections counted for the ejection time (decremented at each sweep
    /// the endpoint is not ejected).
    pub(super) ejections: u32,
    pub(super) ejected_until: Option<Instant>,
}

impl Health {
    /// Whether ejected at `now`.
    pub(super) fn is_ejected(&self, now: Instant) -> bool {
        self.ejected_until.is_some_and(|until| until > now)
    }

    /// Counts `event`; returns the consecutive detectors it tripped (a
    /// tripped detector's count starts again). A gateway error can trip
    /// both the gateway and the 5xx detector; each then decides (its own
    /// `enforcing_*`), as in Envoy.
    pub(super) fn record(&mut self, spec: &OutlierSpec, event: Event) -> [Option<DetectorKind>; 2] {
        let split = spec.split_external_local_origin_errors;
        match (event, split) {
            (Event::Response(status), _) => self.http(spec, status),
            (Event::Connected { last: true }, false) => self.http(spec, 200),
            (Event::Connected { last: false }, false) => [None, None],
            (Event::ConnectFailed, false) => self.http(spec, 503),
            (Event::TimedOut, false) => self.http(spec, 504),
            (Event::Connected { .. }, true) => {
                self.consecutive_local = 0;
                self.local.add(true);
                [None, None]
            }
            (Event::ConnectFailed | Event::TimedOut, true) => {
                self.local.add(false);
                self.consecutive_local += 1;
                let tripped = self.consecutive_local == spec.consecutive_local_origin_failure;
                if tripped {
                    self.consecutive_local = 0;
                }
                [
                    tripped.then_some(DetectorKind::ConsecutiveLocalOriginFailure),
                    None,
                ]
            }
        }
    }

    /// Envoy's `putHttpResponseCode`.
    fn http(&mut self, spec: &OutlierSpec, status: u16) -> [Option<DetectorKind>; 2] {
        let failed = (500..600).contains(&status);
        self.external.add(!failed);
        if !failed {
            self.consecutive_5xx = 0;
            self.consecutive_gateway = 0;
            return [None, None];
        }
        let mut tripped = [None, None];
        if matches!(status, 502..=504) {
            self.consecutive_gateway += 1;
            if self.consecutive_gateway == spec.consecutive_gateway_failure {
                self.consecutive_gateway = 0;
                tripped[0] = Some(DetectorKind::ConsecutiveGatewayFailure);
            }
        } else {
            self.consecutive_gateway = 0;
        }
        self.consecutive_5xx += 1;
        if self.consecutive_5xx == spec.consecutive_5xx {
            self.consecutive_5xx = 0;
            tripped[1] = Some(DetectorKind::Consecutive5xx);
        }
        tripped
    }
}

/// A cluster's detection rules and its sweep clock.
#[derive(Debug)]
pub(super) struct Detector {
    pub(super) spec: OutlierSpec,
    pub(super) next_sweep: std::sync::Mutex<Instant>,
}

impl Detector {
    pub(super) fn new(spec: OutlierSpec, now: Instant) -> Self {
        let next = now + spec.interval;
        Detector {
            spec,
            next_sweep: std::sync::Mutex::new(next),
        }
    }

    /// Whether an endpoint tripped by `kind` is ejected, given how many of
    /// the `total` endpoints are ejected now: `enforcing_*` percent of
    /// the time, within `max_ejection_percent` (one is always allowed).
    pub(super) fn may_eject(&self, kind: DetectorKind, ejected: usize, total: usize) -> bool {
        let enforcing = kind.enforcing(&self.spec);
        if enforcing == 0 || (enforcing < 100 && rand::random_range(0..100) >= enforcing) {
            return false;
        }
        ejected == 0 || 100 * (ejected + 1) <= self.spec.max_ejection_percent as usize * total
    }

    /// How long the `n`-th ejection in a row lasts.
    pub(super) fn ejection_time(&self, n: u32) -> Duration {
        (self.spec.base_ejection_time * n.max(1)).min(self.spec.max_ejection_time)
    }

    /// The endpoints the statistical detectors find, given each endpoint's
    /// window (`None`: ejected now, not judged).
    pub(super) fn sweep(&self, windows: &[Option<(Window, Window)>]) -> Vec<(usize, DetectorKind)> {
        let s = &self.spec;
        let mut out = Vec::new();
        let split = s.split_external_local_origin_errors;
        let pick = |i: usize, local: bool| windows[i].map(|(e, l)| if local { l } else { e });
        for local in [false, true] {
            if local && !split {
                break;
            }
            let (sr_kind, fp_kind) = if local {
                (
                    DetectorKind::SuccessRateLocalOrigin,
                    DetectorKind::FailurePercentageLocalOrigin,
                )
            } else {
                (DetectorKind::SuccessRate, DetectorKind::FailurePercentage)
            };
            // Success rate: among endpoints with enough volume, those below
            // mean - stdev × factor.
            let valid: Vec<(usize, f64)> = (0..windows.len())
                .filter_map(|i| pick(i, local).map(|w| (i, w)))
                .filter(|(_, w)| w.total >= s.success_rate_request_volume.max(1))
                .map(|(i, w)| (i, w.rate()))
                .collect();
            if !valid.is_empty() && valid.len() >= s.success_rate_minimum_hosts as usize {
                let n = valid.len() as f64;
                let mean = valid.iter().map(|(_, r)| r).sum::<f64>() / n;
                let variance = valid.iter().map(|(_, r)| (r - mean).powi(2)).sum::<f64>() / n;
                let threshold =
                    mean - variance.sqrt() * f64::from(s.success_rate_stdev_factor) / 1000.0;
                out.extend(
                    valid
                        .iter()
                        .filter(|(_, r)| *r < threshold)
                        .map(|(i, _)| (*i, sr_kind)),
                );
            }
            // Failure percentage: a flat threshold, once the cluster has
            // enough endpoints.
            if windows.len() >= s.failure_percentage_minimum_hosts as usize {
                out.extend(
                    (0..windows.len())
                        .filter_map(|i| pick(i, local).map(|w| (i, w)))
                        .filter(|(_, w)| w.total >= s.failure_percentage_request_volume.max(1))
                        .filter(|(_, w)| {
                            100.0 - w.rate() >= f64::from(s.failure_percentage_threshold)
                        })
                        .map(|(i, _)| (i, fp_kind)),
                );
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "outlier_tests.rs"]
mod tests;
