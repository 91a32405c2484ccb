//! A stand-in certificate for renewal scenario tests.
#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshlink_identity::Credential;

/// A credential with a serial number and a validity window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    pub serial: u64,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Cert {
    pub fn new(serial: u64, not_before: SystemTime, lifetime: Duration) -> Self {
        Self {
            serial,
            not_before,
            not_after: not_before + lifetime,
        }
    }

    pub fn lifetime(&self) -> Duration {
        self.not_after.duration_since(self.not_before).unwrap()
    }
}

impl Credential for Cert {
    fn not_before(&self) -> SystemTime {
        self.not_before
    }
    fn not_after(&self) -> SystemTime {
        self.not_after
    }
}

/// A fixed wall-clock starting point for tests.
pub fn base_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

/// `t - origin` in seconds (panics if `t` is before `origin`).
pub fn secs_since(origin: SystemTime, t: SystemTime) -> f64 {
    t.duration_since(origin).unwrap().as_secs_f64()
}
