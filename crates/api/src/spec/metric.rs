//! The MeshMetric kind: what a sidecar's metrics endpoint serves (its own
//! metrics by profile, include/exclude rules or a regex, and the scraped
//! metrics of its applications) and where metrics go (Prometheus scrape
//! endpoints, OpenTelemetry push). A top-level `targetRef` and `default`,
//! no `to`/`from`.
//!
//! Owns the spec's shape and its validation (ports, paths, RE2-compatible
//! regexes, backend blocks). What the proxy serves is the translator's.

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::policy_target::{self, ROUTE_TOP_KINDS};
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// `spec` of a MeshMetric.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshMetricSpec {
    /// The proxies configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// The configuration.
    #[serde(rename = "default", default)]
    pub default_: MetricConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricConf {
    /// The sidecar's own metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar: Option<SidecarMetrics>,
    /// Applications whose metrics the sidecar scrapes and serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<Vec<MetricApplication>>,
    /// Where metrics go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<MetricBackend>>,
}

/// `sidecar`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarMetrics {
    /// Keep only the metrics whose name matches (Kuma's older filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Serve metrics that never moved too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_unused: Option<bool>,
    /// Profiles and include/exclude rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles: Option<Profiles>,
}

/// `sidecar.profiles`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profiles {
    /// `{name: All | Basic | None}` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_profiles: Option<Vec<ProfileName>>,
    /// Metrics added back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<Selector>>,
    /// Metrics removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<Selector>>,
}

/// `{name}` of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileName {
    /// `All`, `Basic` or `None`.
    pub name: String,
}

/// An include or exclude rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    /// `Prefix`, `Regex`, `Exact` or `Contains`.
    #[serde(rename = "type")]
    pub type_: String,
    /// What the metric's name is compared with.
    #[serde(rename = "match")]
    pub match_: String,
}

/// `applications[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricApplication {
    /// A name for the application's metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The metrics path (`/metrics/prometheus` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The application's address (the Dataplane's by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The application's metrics port.
    pub port: u32,
}

/// `backends[]`: `type` names the one block that is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricBackend {
    /// `Prometheus` or `OpenTelemetry`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A scrape endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusBackend>,
    /// An OTLP collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_telemetry: Option<OtelMetricsBackend>,
}

/// `prometheus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusBackend {
    /// The scraper's id (Kuma's MADS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The port served (5670 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// The path served (`/metrics` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `{mode: Disabled | ProvidedTLS | ActiveMTLSBackend}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<PrometheusTls>,
}

/// `prometheus.tls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusTls {
    /// `Disabled`, `ProvidedTLS` or `ActiveMTLSBackend`.
    pub mode: String,
}

/// `openTelemetry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtelMetricsBackend {
    /// The collector, `host:port`.
    pub endpoint: String,
    /// How often metrics are pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval: Option<String>,
}

// === impl MeshMetricSpec ===

impl MeshMetricSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        let d = &self.default_;
        if let Some(s) = &d.sidecar {
            if let Some(r) = &s.regex {
                super::regex_check::check(errs, "spec.default.sidecar.regex", r);
            }
            let p = s.profiles.as_ref();
            for (i, n) in p
                .and_then(|p| p.append_profiles.as_ref())
                .into_iter()
                .flatten()
                .enumerate()
            {
                if !["All", "Basic", "None"].contains(&n.name.as_str()) {
                    errs.add(
                        format!("spec.default.sidecar.profiles.appendProfiles[{i}].name"),
                        format!("{:?} is not a profile; use All, Basic or None", n.name),
                    );
                }
            }
            for (list, name) in [
                (p.and_then(|p| p.include.as_ref()), "include"),
                (p.and_then(|p| p.exclude.as_ref()), "exclude"),
            ] {
                for (i, sel) in list.into_iter().flatten().enumerate() {
                    let at = format!("spec.default.sidecar.profiles.{name}[{i}]");
                    match sel.type_.as_str() {
                        "Regex" => super::regex_check::check(errs, &format!("{at}.match"), &sel.match_),
                        "Prefix" | "Exact" | "Contains" => {}
                        other => errs.add(
                            format!("{at}.type"),
                            format!("{other:?} is not a match type; use Prefix, Regex, Exact or Contains"),
                        ),
                    }
                }
            }
        }
        for (i, a) in d.applications.iter().flatten().enumerate() {
            let at = format!("spec.default.applications[{i}]");
            if a.port == 0 || a.port > 65_535 {
                errs.add(format!("{at}.port"), "must be 1 to 65535");
            }
            if let Some(p) = &a.path
                && !p.starts_with('/')
            {
                errs.add(format!("{at}.path"), format!("{p:?} must start with /"));
            }
        }
        for (i, b) in d.backends.iter().flatten().enumerate() {
            let at = format!("spec.default.backends[{i}]");
            match (b.type_.as_str(), &b.prometheus, &b.open_telemetry) {
                ("Prometheus", _, None) => {
                    let prom = b.prometheus.as_ref();
                    if prom
                        .and_then(|p| p.port)
                        .is_some_and(|p| p == 0 || p > 65_535)
                    {
                        errs.add(format!("{at}.prometheus.port"), "must be 1 to 65535");
                    }
                    if let Some(p) = prom.and_then(|p| p.path.as_deref())
                        && !p.starts_with('/')
                    {
                        errs.add(
                            format!("{at}.prometheus.path"),
                            format!("{p:?} must start with /"),
                        );
                    }
                    if let Some(t) = prom.and_then(|p| p.tls.as_ref())
                        && !["Disabled", "ProvidedTLS", "ActiveMTLSBackend"]
                            .contains(&t.mode.as_str())
                    {
                        errs.add(
                            format!("{at}.prometheus.tls.mode"),
                            format!("{:?} is not a TLS mode; use Disabled, ProvidedTLS or ActiveMTLSBackend", t.mode),
                        );
                    }
                }
                ("OpenTelemetry", None, Some(o)) => {
                    if o.endpoint.is_empty() {
                        errs.add(
                            format!("{at}.openTelemetry.endpoint"),
                            "required, e.g. otel-collector:4317",
                        );
                    }
                    kuma_duration::check_positive(
                        errs,
                        &format!("{at}.openTelemetry.refreshInterval"),
                        o.refresh_interval.as_deref(),
                    );
                }
                ("OpenTelemetry", _, None) => {
                    errs.add(
                        format!("{at}.openTelemetry"),
                        "required when type is OpenTelemetry",
                    );
                }
                ("Prometheus" | "OpenTelemetry", _, _) => {
                    errs.add(at, format!("type is {}: set only its block", b.type_))
                }
                (other, _, _) => errs.add(
                    format!("{at}.type"),
                    format!("{other:?} is not a backend type; use Prometheus or OpenTelemetry"),
                ),
            }
        }
    }
}
