//! MeshMetric for meshlink-proxy: a Listener named
//! [`LISTENER_NAME`](meshlink_proto::metrics_listener::LISTENER_NAME)
//! whose one filter carries a `meshlink.v1.MetricsConfig` (the profiles,
//! include/exclude rules, the applications to scrape and the backends).
//!
//! Envoy takes its stats configuration (`stats_matcher`) from its
//! bootstrap, not over xDS, so nothing is sent to an Envoy client:
//! MeshMetric applies to meshlink-proxy only (docs/resources.md#meshmetric).
//! MeshMetric policies are single-item: every one that selects the
//! Dataplane is folded like MeshTrace's
//! ([`single_item_default`](super::policies::single_item_default)).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::util::pack_any;
use meshlink_api::Kind;
use meshlink_api::spec::{DataplaneSpec, MetricConf, parse_kuma_duration};
use meshlink_proto::certify::{
    MetricSelector, MetricsApplication, MetricsConfig, OtlpMetricsBackend, PrometheusEndpoint,
};
use meshlink_proto::metrics_listener::{FILTER_NAME, LISTENER_NAME};

use super::Snapshot;
use super::endpoints::socket_address;
use super::policies::{ViewPolicy, single_item_default};

/// Kuma's Prometheus endpoint port when `prometheus.port` is unset.
const DEFAULT_PROMETHEUS_PORT: u32 = 5670;

/// Kuma's Prometheus endpoint path when `prometheus.path` is unset.
const DEFAULT_PROMETHEUS_PATH: &str = "/metrics";

/// Kuma's application metrics path when `applications[].path` is unset.
const DEFAULT_APPLICATION_PATH: &str = "/metrics/prometheus";

/// Kuma's OpenTelemetry push interval when `refreshInterval` is unset.
const DEFAULT_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// Adds the MeshMetric carrier Listener of Dataplane `name` to `snap` when
/// a MeshMetric selects it.
pub(super) fn build(
    snap: &mut Snapshot,
    policies: &[ViewPolicy],
    name: &str,
    labels: &BTreeMap<String, String>,
    dp: &DataplaneSpec,
) {
    let conf = single_item_default(policies, Kind::MeshMetric, name, labels, dp);
    if conf.is_null() {
        return;
    }
    let Ok(conf) = serde_json::from_value::<MetricConf>(conf) else {
        return;
    };
    let config = metrics_config(&conf, &dp.networking.address);
    // The first Prometheus endpoint, for a reader of the Listener; the
    // proxy binds every endpoint from the config itself.
    let address = config
        .prometheus
        .first()
        .map(|p| socket_address(&p.address, p.port as u16));
    let listener = Listener {
        name: LISTENER_NAME.to_owned(),
        address,
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: FILTER_NAME.to_owned(),
                config_type: Some(filter::ConfigType::TypedConfig(pack_any(config))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    snap.insert(LISTENER_NAME.to_owned(), &listener);
}

/// The `MetricsConfig` of a folded MeshMetric `default`, Kuma's defaults
/// filled in; `address` is the Dataplane's.
pub(super) fn metrics_config(conf: &MetricConf, address: &str) -> MetricsConfig {
    let sidecar = conf.sidecar.as_ref();
    let profiles = sidecar.and_then(|s| s.profiles.as_ref());
    let selectors = |list: Option<&Vec<_>>| -> Vec<MetricSelector> {
        list.into_iter()
            .flatten()
            .map(
                |s: &meshlink_api::spec::MetricSelectorSpec| MetricSelector {
                    r#type: s.type_.clone(),
                    r#match: s.match_.clone(),
                },
            )
            .collect()
    };
    let mut out = MetricsConfig {
        profiles: profiles
            .and_then(|p| p.append_profiles.as_ref())
            .into_iter()
            .flatten()
            .map(|p| p.name.clone())
            .collect(),
        include: selectors(profiles.and_then(|p| p.include.as_ref())),
        exclude: selectors(profiles.and_then(|p| p.exclude.as_ref())),
        regex: sidecar.and_then(|s| s.regex.clone()).unwrap_or_default(),
        include_unused: sidecar.and_then(|s| s.include_unused).unwrap_or(false),
        ..Default::default()
    };
    for app in conf.applications.iter().flatten() {
        let host = app.address.clone().unwrap_or_else(|| address.to_owned());
        out.applications.push(MetricsApplication {
            name: app
                .name
                .clone()
                .unwrap_or_else(|| format!("{host}:{}", app.port)),
            address: host,
            port: app.port,
            path: app
                .path
                .clone()
                .unwrap_or_else(|| DEFAULT_APPLICATION_PATH.to_owned()),
        });
    }
    for backend in conf.backends.iter().flatten() {
        if let Some(p) = &backend.prometheus {
            out.prometheus.push(PrometheusEndpoint {
                address: address.to_owned(),
                port: p.port.unwrap_or(DEFAULT_PROMETHEUS_PORT),
                path: p
                    .path
                    .clone()
                    .unwrap_or_else(|| DEFAULT_PROMETHEUS_PATH.to_owned()),
                tls_mode: p
                    .tls
                    .as_ref()
                    .map_or_else(|| "Disabled".to_owned(), |t| t.mode.clone()),
                client_id: p.client_id.clone().unwrap_or_default(),
            });
        }
        if let Some(o) = &backend.open_telemetry {
            let every = o
                .refresh_interval
                .as_deref()
                .and_then(parse_kuma_duration)
                .unwrap_or(DEFAULT_REFRESH);
            out.open_telemetry.push(OtlpMetricsBackend {
                endpoint: o.endpoint.clone(),
                refresh_interval_ms: every.as_millis() as u64,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(json: serde_json::Value) -> MetricConf {
        serde_json::from_value(json).expect("conf")
    }

    #[test]
    fn kuma_defaults_fill_what_the_policy_leaves_out() {
        let c = metrics_config(
            &conf(serde_json::json!({
                "applications": [{"port": 8888}],
                "backends": [
                    {"type": "Prometheus", "prometheus": {}},
                    {"type": "OpenTelemetry", "openTelemetry": {"endpoint": "otel:4317"}},
                ],
            })),
            "10.0.0.1",
        );
        assert_eq!(c.applications[0].path, "/metrics/prometheus");
        assert_eq!(c.applications[0].address, "10.0.0.1");
        assert_eq!(c.applications[0].name, "10.0.0.1:8888");
        assert_eq!(c.prometheus[0].port, 5670);
        assert_eq!(c.prometheus[0].path, "/metrics");
        assert_eq!(c.prometheus[0].tls_mode, "Disabled");
        assert_eq!(c.open_telemetry[0].refresh_interval_ms, 60_000);
        assert!(c.profiles.is_empty() && !c.include_unused);
    }

    #[test]
    fn profiles_and_rules_keep_their_order() {
        let c = metrics_config(
            &conf(serde_json::json!({"sidecar": {
                "includeUnused": true,
                "profiles": {
                    "appendProfiles": [{"name": "Basic"}, {"name": "None"}],
                    "exclude": [{"type": "Prefix", "match": "meshlink_proxy_http_"}],
                    "include": [{"type": "Exact", "match": "meshlink_proxy_xds_updates"}],
                },
            }})),
            "10.0.0.1",
        );
        assert_eq!(c.profiles, ["Basic", "None"]);
        assert_eq!(c.exclude[0].r#type, "Prefix");
        assert_eq!(c.include[0].r#match, "meshlink_proxy_xds_updates");
        assert!(c.include_unused);
    }
}
