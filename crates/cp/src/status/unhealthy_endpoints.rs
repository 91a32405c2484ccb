//! The Dataplane's `status.unhealthyEndpoints`: the endpoints of other
//! services that its sidecar keeps out of its balancers (a failing
//! MeshHealthCheck, an outlier ejection), as that sidecar (the caller)
//! sees them.
//!
//! Owns turning a report's entries (each with how long, `for_ms`) into
//! status entries (each with since when): an entry that stays keeps the
//! `since` it was first written with, so the timestamp does not drift with
//! every report; a new one gets the report's arrival time minus its
//! duration. The list travels with the `AppReachable` facts
//! ([`super::app_reachable::AppFacts`]) and is written in the same merge
//! and under the same claim as `unreachableApps`: without a report the
//! stored list stands. It is never used to pick other proxies' endpoints:
//! one caller's view says nothing of what another caller sees.

use std::time::{Duration, SystemTime};

use meshlink_api::spec::UnhealthyEndpoint;

/// One endpoint as a report states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReportedEndpoint {
    /// The sidecar's cluster.
    pub(crate) cluster: String,
    /// The endpoint's `ip:port`.
    pub(crate) address: String,
    /// `HealthCheck` or `Outlier`.
    pub(crate) reason: String,
    /// For how long it had been so when the report was sent.
    pub(crate) unhealthy_for: Duration,
}

/// The status list for `reported`, received at `at`, after `before` (the
/// list of the previous report): sorted by cluster, address and reason,
/// each staying entry with its earlier `since`.
pub(crate) fn merge(
    before: &[UnhealthyEndpoint],
    reported: &[ReportedEndpoint],
    at: SystemTime,
) -> Vec<UnhealthyEndpoint> {
    let mut now: Vec<UnhealthyEndpoint> = reported
        .iter()
        .map(|r| {
            let since = before
                .iter()
                .find(|b| b.cluster == r.cluster && b.address == r.address && b.reason == r.reason)
                .map(|b| b.since.clone())
                .unwrap_or_else(|| {
                    let t = at.checked_sub(r.unhealthy_for).unwrap_or(at);
                    humantime::format_rfc3339_seconds(t).to_string()
                });
            UnhealthyEndpoint {
                cluster: r.cluster.clone(),
                address: r.address.clone(),
                reason: r.reason.clone(),
                since,
            }
        })
        .collect();
    now.sort_by(|a, b| {
        (&a.cluster, &a.address, &a.reason).cmp(&(&b.cluster, &b.address, &b.reason))
    });
    now.dedup_by(|a, b| a.cluster == b.cluster && a.address == b.address && a.reason == b.reason);
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(secs)
    }

    fn reported(address: &str, reason: &str, for_secs: u64) -> ReportedEndpoint {
        ReportedEndpoint {
            cluster: "backend".into(),
            address: address.into(),
            reason: reason.into(),
            unhealthy_for: Duration::from_secs(for_secs),
        }
    }

    #[test]
    fn an_entry_that_stays_keeps_its_since_and_a_vanished_one_is_dropped() {
        let first = merge(&[], &[reported("10.0.0.1:15000", "HealthCheck", 3)], at(10));
        assert_eq!(first.len(), 1);
        assert_eq!(
            first[0].since,
            humantime::format_rfc3339_seconds(at(7)).to_string()
        );
        // Reported again 20 s later (its duration says 23 s, give or take
        // the sampling): the same since, and a new ejection.
        let second = merge(
            &first,
            &[
                reported("10.0.0.2:15000", "Outlier", 0),
                reported("10.0.0.1:15000", "HealthCheck", 24),
            ],
            at(30),
        );
        let seen: Vec<(&str, &str, &str)> = second
            .iter()
            .map(|e| (e.address.as_str(), e.reason.as_str(), e.since.as_str()))
            .collect();
        let (t7, t30) = (
            humantime::format_rfc3339_seconds(at(7)).to_string(),
            humantime::format_rfc3339_seconds(at(30)).to_string(),
        );
        assert_eq!(
            seen,
            [
                ("10.0.0.1:15000", "HealthCheck", t7.as_str()),
                ("10.0.0.2:15000", "Outlier", t30.as_str()),
            ]
        );
        // The same endpoint for another reason is another entry; the one
        // that recovered is gone.
        let third = merge(&second, &[reported("10.0.0.1:15000", "Outlier", 1)], at(40));
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].reason, "Outlier");
        assert_eq!(
            third[0].since,
            humantime::format_rfc3339_seconds(at(39)).to_string()
        );
        assert!(merge(&third, &[], at(50)).is_empty());
    }
}
