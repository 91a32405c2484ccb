//! A sidecar's MeshMetric as the proxy serves it: which of its own metric
//! families `/metrics` keeps (profiles, include/exclude rules, the older
//! regex, unused families), the applications scraped beside them, and
//! the Prometheus endpoints that serve the same text.
//!
//! Owns the profiles' contents: [`BASIC_FAMILIES`] is the list
//! docs/operations.md#metrics documents. Plain data: the scrape and the
//! endpoints are `crate::metrics_endpoint`'s.

use std::net::SocketAddr;

use serde::Serialize;

use super::route::Pattern;

/// The prefix of every family of the proxy's own.
pub const FAMILY_PREFIX: &str = "meshlink_proxy_";

/// The families (without [`FAMILY_PREFIX`]) of the `Basic` profile: what
/// a dashboard of a sidecar's traffic needs (connections, bytes, HTTP
/// requests and their latency, errors upstream and at the door, circuit
/// breaking, outlier ejections and active health checks, control-plane connectivity, the
/// application's reachability and the certificate's expiry). Everything
/// else (xDS and control-plane internals, listener warming, certificate
/// rotations, access log and span queues, TCP timeouts, retry budgets,
/// per-URL control-plane connections,
/// the application scrapes' own metrics) is left to `All`.
pub const BASIC_FAMILIES: [&str; 24] = [
    "connections",
    "connections_active",
    "bytes",
    "listener_connections_active",
    "listener_rx_bytes",
    "listener_tx_bytes",
    "http_requests",
    "http_request_duration_seconds",
    "http_requests_active",
    "http_retries",
    "http_timeouts",
    "http_rate_limited",
    "http_faults",
    "connections_rate_limited",
    "handshake_failures",
    "rbac_denied",
    "upstream_connect_failures",
    "upstream_overflow",
    "outlier_ejections",
    "health_check",
    "health_check_unhealthy_endpoints",
    "xds_connected",
    "cert_expiry_seconds",
    "app_reachable",
];

/// `sidecar.profiles.appendProfiles[].name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Profile {
    /// Every family.
    All,
    /// [`BASIC_FAMILIES`].
    Basic,
    /// No family (`include` adds some back).
    None,
}

/// How an include or exclude rule compares a family's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum NameMatch {
    /// The name starts with this.
    Prefix(String),
    /// The whole name matches this expression.
    Regex(Pattern),
    /// The name is this.
    Exact(String),
    /// The name contains this.
    Contains(String),
}

/// An application whose Prometheus text is served beside the sidecar's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScrapedApp {
    /// Its name, the `application` label of the scrape metrics.
    pub name: String,
    /// `host:port` dialled.
    pub authority: String,
    /// The path requested.
    pub path: String,
}

/// A Prometheus endpoint serving the filtered text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrometheusEndpoint {
    /// The address bound.
    pub address: SocketAddr,
    /// The path answered (others get 404).
    pub path: String,
}

/// An OpenTelemetry backend metrics are pushed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OtlpBackend {
    /// The collector.
    pub endpoint: String,
    /// The push interval asked for, in milliseconds.
    pub refresh_interval_ms: u64,
}

/// The MeshMetric that selects this sidecar (the default: every family,
/// unused ones left out, no application, no endpoint).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetricsPolicy {
    /// The profiles in order; empty: `All`.
    pub profiles: Vec<Profile>,
    /// Families served whatever the profiles and `exclude` say.
    pub include: Vec<NameMatch>,
    /// Families removed from the profiles'.
    pub exclude: Vec<NameMatch>,
    /// `sidecar.regex`: only families whose name matches.
    pub regex: Option<Pattern>,
    /// Serve families whose every sample is 0.
    pub include_unused: bool,
    /// The applications scraped on every scrape.
    pub applications: Vec<ScrapedApp>,
    /// The Prometheus endpoints.
    pub prometheus: Vec<PrometheusEndpoint>,
    /// The OpenTelemetry backends.
    pub open_telemetry: Vec<OtlpBackend>,
}

impl NameMatch {
    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            NameMatch::Prefix(p) => name.starts_with(p.as_str()),
            NameMatch::Regex(r) => r.is_match(name),
            NameMatch::Exact(e) => name == e,
            NameMatch::Contains(c) => name.contains(c.as_str()),
        }
    }
}

impl Profile {
    /// Whether the profile holds family `family` (its full name).
    pub fn holds(self, family: &str) -> bool {
        match self {
            Profile::All => true,
            Profile::None => false,
            Profile::Basic => family
                .strip_prefix(FAMILY_PREFIX)
                .is_some_and(|short| BASIC_FAMILIES.contains(&short)),
        }
    }
}

impl MetricsPolicy {
    /// Whether the family `family`, whose samples are named `samples`
    /// (e.g. `..._total`, `..._bucket`), is served: in a profile and not
    /// excluded (and matching `regex`, when set), or included. A rule
    /// matches a family when it matches its name or one of its samples'.
    pub fn keeps(&self, family: &str, samples: &[&str]) -> bool {
        let any = |m: &dyn Fn(&str) -> bool| m(family) || samples.iter().any(|s| m(s));
        if self.include.iter().any(|r| any(&|n| r.matches(n))) {
            return true;
        }
        let profiled = self.profiles.is_empty() || self.profiles.iter().any(|p| p.holds(family));
        profiled
            && !self.exclude.iter().any(|r| any(&|n| r.matches(n)))
            && self.regex.as_ref().is_none_or(|r| any(&|n| r.is_match(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(profiles: Vec<Profile>) -> MetricsPolicy {
        MetricsPolicy {
            profiles,
            include_unused: true,
            ..MetricsPolicy::default()
        }
    }

    #[test]
    fn basic_keeps_the_dashboard_families_and_hides_the_internals() {
        let p = policy(vec![Profile::Basic]);
        assert!(p.keeps(
            "meshlink_proxy_http_requests",
            &["meshlink_proxy_http_requests_total"]
        ));
        assert!(p.keeps("meshlink_proxy_cert_expiry_seconds", &[]));
        assert!(!p.keeps(
            "meshlink_proxy_xds_updates",
            &["meshlink_proxy_xds_updates_total"]
        ));
        assert!(!p.keeps("meshlink_proxy_access_log_dropped", &[]));
    }

    #[test]
    fn no_profile_is_all_and_none_keeps_only_what_is_included() {
        assert!(policy(Vec::new()).keeps("meshlink_proxy_xds_updates", &[]));
        let mut p = policy(vec![Profile::None]);
        assert!(!p.keeps("meshlink_proxy_connections", &[]));
        p.include = vec![NameMatch::Exact("meshlink_proxy_connections_total".into())];
        assert!(p.keeps(
            "meshlink_proxy_connections",
            &["meshlink_proxy_connections_total"]
        ));
    }

    #[test]
    fn exclude_removes_from_profiles_and_include_wins_over_exclude() {
        let mut p = policy(vec![Profile::Basic, Profile::None]);
        p.exclude = vec![NameMatch::Prefix("meshlink_proxy_http_".into())];
        assert!(!p.keeps("meshlink_proxy_http_requests", &[]));
        assert!(p.keeps("meshlink_proxy_bytes", &[]));
        p.include = vec![NameMatch::Contains("request_duration".into())];
        assert!(p.keeps("meshlink_proxy_http_request_duration_seconds", &[]));
        p.regex = Some(Pattern::new("meshlink_proxy_b.*").expect("regex"));
        assert!(p.keeps("meshlink_proxy_bytes", &[]));
        assert!(!p.keeps("meshlink_proxy_connections", &[]));
    }
}
