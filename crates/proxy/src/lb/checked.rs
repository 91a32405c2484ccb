//! An endpoint's standing with its cluster's active health check, and
//! the rule that moves it (Envoy's): a new endpoint is pending until its
//! first check, which alone decides; a healthy one turns unhealthy after
//! `unhealthy_threshold` failures in a row, an unhealthy one healthy
//! after `healthy_threshold` passes in a row.
//!
//! Owns only the state and the arithmetic; [`crate::health_check`] runs
//! the checks and [`super::Balancer`] reads the state when it picks.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use serde::Serialize;

/// Where an endpoint stands with the active health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum CheckedHealth {
    /// No check has completed yet (kept out, as Envoy's
    /// `PENDING_ACTIVE_HC` host).
    Pending = 0,
    /// The check passes.
    Healthy = 1,
    /// The check fails.
    Unhealthy = 2,
}

impl CheckedHealth {
    /// The label shown in `/config_dump`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckedHealth::Pending => "pending",
            CheckedHealth::Healthy => "healthy",
            CheckedHealth::Unhealthy => "unhealthy",
        }
    }
}

/// [`CheckedHealth`] shared between the checker and the data path.
#[derive(Debug, Default)]
pub(super) struct CheckedCell(AtomicU8);

impl CheckedCell {
    pub(super) fn get(&self) -> CheckedHealth {
        match self.0.load(Relaxed) {
            1 => CheckedHealth::Healthy,
            2 => CheckedHealth::Unhealthy,
            _ => CheckedHealth::Pending,
        }
    }

    pub(super) fn set(&self, health: CheckedHealth) {
        self.0.store(health as u8, Relaxed);
    }
}

/// Passes and failures in a row, and the standing they lead to.
#[derive(Debug, Default, Clone, Copy)]
pub struct Streak {
    passes: u32,
    failures: u32,
}

impl Streak {
    /// Counts one check (`passed` or not) of an endpoint standing at
    /// `current`; returns its new standing under the two thresholds.
    pub fn after(
        &mut self,
        current: CheckedHealth,
        passed: bool,
        healthy_threshold: u32,
        unhealthy_threshold: u32,
    ) -> CheckedHealth {
        if passed {
            self.passes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.passes = 0;
        }
        match (current, passed) {
            (CheckedHealth::Pending, true) => CheckedHealth::Healthy,
            (CheckedHealth::Pending, false) => CheckedHealth::Unhealthy,
            (CheckedHealth::Unhealthy, true) if self.passes >= healthy_threshold => {
                CheckedHealth::Healthy
            }
            (CheckedHealth::Healthy, false) if self.failures >= unhealthy_threshold => {
                CheckedHealth::Unhealthy
            }
            (current, _) => current,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_check_decides_then_the_thresholds_do() {
        use CheckedHealth::*;
        let mut s = Streak::default();
        assert_eq!(s.after(Pending, true, 3, 2), Healthy, "one pass suffices");
        assert_eq!(s.after(Healthy, false, 3, 2), Healthy);
        assert_eq!(s.after(Healthy, false, 3, 2), Unhealthy, "2 in a row");
        assert_eq!(s.after(Unhealthy, true, 3, 2), Unhealthy);
        assert_eq!(s.after(Unhealthy, true, 3, 2), Unhealthy);
        assert_eq!(s.after(Unhealthy, true, 3, 2), Healthy, "3 in a row");
        let mut s = Streak::default();
        assert_eq!(s.after(Pending, false, 1, 5), Unhealthy, "a failed first");
    }
}
