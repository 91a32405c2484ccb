//! A cluster's circuit breaking as validated from Envoy's `Cluster`:
//! connection limits (`circuit_breakers.thresholds`) and outlier detection
//! (`outlier_detection`, with `common_lb_config.healthy_panic_threshold`),
//! every unset field filled with Envoy's default.
//!
//! Plain data; [`crate::circuit`] enforces the limits and
//! [`crate::lb`] the detection.

use std::time::Duration;

use serde::Serialize;

/// `circuit_breakers.thresholds` (default priority). Envoy's defaults:
/// 1024 connections, pending requests and requests, 3 retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Thresholds {
    /// Upstream connections open at once.
    pub max_connections: u32,
    /// Requests waiting for a connection (TCP: connections being made).
    pub max_pending_requests: u32,
    /// Requests in flight.
    pub max_requests: u32,
    /// Retries in flight.
    pub max_retries: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
        }
    }
}

/// `outlier_detection`, Envoy's defaults filled in. Percentages
/// (`enforcing_*`, `max_ejection_percent`, the failure threshold) are
/// 0-100; `success_rate_stdev_factor` is in thousandths, as in Envoy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlierSpec {
    /// Time between sweeps (success rate, failure percentage).
    #[serde(with = "super::humantime_serde_duration")]
    pub interval: Duration,
    /// Ejection time per ejection in a row.
    #[serde(with = "super::humantime_serde_duration")]
    pub base_ejection_time: Duration,
    /// Longest ejection.
    #[serde(with = "super::humantime_serde_duration")]
    pub max_ejection_time: Duration,
    /// Most endpoints ejected at once (at least one is always allowed).
    pub max_ejection_percent: u32,
    /// Connection failures counted apart from HTTP answers.
    pub split_external_local_origin_errors: bool,
    /// 5xx in a row that eject.
    pub consecutive_5xx: u32,
    /// Chance, in percent, that [`OutlierSpec::consecutive_5xx`] ejects.
    pub enforcing_consecutive_5xx: u32,
    /// 502/503/504 in a row that eject.
    pub consecutive_gateway_failure: u32,
    /// Chance that the gateway detector ejects.
    pub enforcing_consecutive_gateway_failure: u32,
    /// Connection failures in a row that eject (split mode).
    pub consecutive_local_origin_failure: u32,
    /// Chance that the local-origin detector ejects.
    pub enforcing_consecutive_local_origin_failure: u32,
    /// Endpoints with enough volume needed for the success-rate detector.
    pub success_rate_minimum_hosts: u32,
    /// Requests an endpoint needs in an interval to be judged.
    pub success_rate_request_volume: u32,
    /// Ejected below mean - stdev × this / 1000.
    pub success_rate_stdev_factor: u32,
    /// Chance that the success-rate detector ejects.
    pub enforcing_success_rate: u32,
    /// The same for connection failures (split mode).
    pub enforcing_local_origin_success_rate: u32,
    /// Ejected at or above this failure percentage.
    pub failure_percentage_threshold: u32,
    /// Endpoints with enough volume needed for the failure-percentage
    /// detector.
    pub failure_percentage_minimum_hosts: u32,
    /// Requests an endpoint needs in an interval to be judged.
    pub failure_percentage_request_volume: u32,
    /// Chance that the failure-percentage detector ejects.
    pub enforcing_failure_percentage: u32,
    /// The same for connection failures (split mode).
    pub enforcing_failure_percentage_local_origin: u32,
    /// Below this share of endpoints not ejected, in hundredths of a
    /// percent, every endpoint takes traffic (Envoy's panic mode); 0: never.
    pub healthy_panic_threshold: u32,
    /// In panic, fail requests instead of using every endpoint
    /// (`common_lb_config.zone_aware_lb_config.fail_traffic_on_panic`).
    pub fail_traffic_on_panic: bool,
}

impl Default for OutlierSpec {
    /// Envoy's defaults for an `outlier_detection` with nothing set.
    fn default() -> Self {
        OutlierSpec {
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
            split_external_local_origin_errors: false,
            consecutive_5xx: 5,
            enforcing_consecutive_5xx: 100,
            consecutive_gateway_failure: 5,
            enforcing_consecutive_gateway_failure: 0,
            consecutive_local_origin_failure: 5,
            enforcing_consecutive_local_origin_failure: 100,
            success_rate_minimum_hosts: 5,
            success_rate_request_volume: 100,
            success_rate_stdev_factor: 1900,
            enforcing_success_rate: 100,
            enforcing_local_origin_success_rate: 100,
            failure_percentage_threshold: 85,
            failure_percentage_minimum_hosts: 5,
            failure_percentage_request_volume: 50,
            enforcing_failure_percentage: 0,
            enforcing_failure_percentage_local_origin: 0,
            healthy_panic_threshold: 5000,
            fail_traffic_on_panic: false,
        }
    }
}

impl OutlierSpec {
    /// What a cluster without `outlier_detection` gets: meshlink-proxy's
    /// passive ejection from before MeshCircuitBreaker (two connection
    /// failures or gateway errors in a row eject for 5 s, then 10 s, …
    /// up to 60 s; every endpoint may be ejected, and when all are they
    /// are all tried anyway).
    pub fn builtin() -> Self {
        OutlierSpec {
            base_ejection_time: Duration::from_secs(5),
            max_ejection_time: Duration::from_secs(60),
            max_ejection_percent: 100,
            enforcing_consecutive_5xx: 0,
            consecutive_gateway_failure: 2,
            enforcing_consecutive_gateway_failure: 100,
            enforcing_consecutive_local_origin_failure: 0,
            enforcing_success_rate: 0,
            enforcing_local_origin_success_rate: 0,
            healthy_panic_threshold: 0,
            ..OutlierSpec::default()
        }
    }
}
