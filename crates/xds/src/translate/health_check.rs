//! MeshHealthCheck as Envoy cluster fields, as Kuma translates it: one
//! `health_checks` entry whose checker follows the destination's
//! protocol (an HTTP-family destination gets the `http` check, a gRPC one
//! the `grpc` check, each falling back to `tcp` when unset or disabled;
//! a TCP destination gets the `tcp` check), with Kuma's defaults for the
//! timing (`interval` 1m, `timeout` 15s, `unhealthyThreshold` 5,
//! `healthyThreshold` 1), and `healthyPanicThreshold` /
//! `failTrafficOnPanic` in `common_lb_config`.
//!
//! Never decides which policy applies (that is `policies`); a conf whose
//! checks are all disabled (or absent) emits nothing.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    CommonLbConfig, common_lb_config::ZoneAwareLbConfig,
};
use envoy_types::pb::envoy::config::core::v3::HealthCheck;
use envoy_types::pb::envoy::config::core::v3::health_check::{
    GrpcHealthCheck, HealthChecker, HttpHealthCheck, Payload, TcpHealthCheck, payload,
};
use envoy_types::pb::envoy::r#type::v3::{Int64Range, Percent};
use envoy_types::pb::google::protobuf::{BoolValue, Duration, UInt32Value};
use meshlink_api::spec::{HealthCheckConf, TcpCheck};

use super::http::kuma_duration;
use super::protocol::Protocol;

/// Kuma's default `interval`.
const DEFAULT_INTERVAL: Duration = Duration {
    seconds: 60,
    nanos: 0,
};
/// Kuma's default `timeout`.
const DEFAULT_TIMEOUT: Duration = Duration {
    seconds: 15,
    nanos: 0,
};
/// Kuma's default `unhealthyThreshold`.
const DEFAULT_UNHEALTHY_THRESHOLD: u32 = 5;
/// Kuma's default `healthyThreshold`.
const DEFAULT_HEALTHY_THRESHOLD: u32 = 1;

/// Sets `conf`'s check on `cluster`, a Cluster of a `protocol`
/// destination (unchanged when no check applies to that protocol).
pub(super) fn apply(cluster: &mut Cluster, conf: &HealthCheckConf, protocol: Protocol) {
    let Some(checker) = checker(conf, protocol) else {
        return;
    };
    let u32v = |v: Option<i32>, default: u32| {
        Some(UInt32Value {
            value: v.and_then(|v| u32::try_from(v).ok()).unwrap_or(default),
        })
    };
    // `event_log_path` is deprecated in Envoy; Kuma still sets it.
    #[allow(deprecated)]
    let check = HealthCheck {
        timeout: Some(kuma_duration(conf.timeout.as_deref()).unwrap_or(DEFAULT_TIMEOUT)),
        interval: Some(kuma_duration(conf.interval.as_deref()).unwrap_or(DEFAULT_INTERVAL)),
        initial_jitter: kuma_duration(conf.initial_jitter.as_deref()),
        interval_jitter: kuma_duration(conf.interval_jitter.as_deref()),
        interval_jitter_percent: conf
            .interval_jitter_percent
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        unhealthy_threshold: u32v(conf.unhealthy_threshold, DEFAULT_UNHEALTHY_THRESHOLD),
        healthy_threshold: u32v(conf.healthy_threshold, DEFAULT_HEALTHY_THRESHOLD),
        reuse_connection: conf.reuse_connection.map(|value| BoolValue { value }),
        no_traffic_interval: kuma_duration(conf.no_traffic_interval.as_deref()),
        unhealthy_interval: kuma_duration(conf.unhealthy_interval.as_deref()),
        event_log_path: conf.event_log_path.clone().unwrap_or_default(),
        always_log_health_check_failures: conf.always_log_health_check_failures == Some(true),
        health_checker: Some(checker),
        ..Default::default()
    };
    cluster.health_checks = vec![check];
    let panic = conf
        .healthy_panic_threshold
        .as_ref()
        .and_then(meshlink_api::spec::decimal);
    let fail_on_panic = conf.fail_traffic_on_panic == Some(true);
    if panic.is_some() || fail_on_panic {
        let lb = cluster
            .common_lb_config
            .get_or_insert_with(CommonLbConfig::default);
        if let Some(value) = panic {
            lb.healthy_panic_threshold = Some(Percent { value });
        }
        if fail_on_panic {
            lb.locality_config_specifier = Some(
                envoy_types::pb::envoy::config::cluster::v3::cluster::common_lb_config::LocalityConfigSpecifier::ZoneAwareLbConfig(
                    ZoneAwareLbConfig {
                        fail_traffic_on_panic: true,
                        ..Default::default()
                    },
                ),
            );
        }
    }
}

/// The checker for a `protocol` destination: its own kind when set and
/// enabled, else `tcp` when set and enabled.
fn checker(conf: &HealthCheckConf, protocol: Protocol) -> Option<HealthChecker> {
    let enabled = |disabled: Option<bool>| disabled != Some(true);
    let own = match protocol {
        Protocol::Grpc => conf.grpc.as_ref().filter(|g| enabled(g.disabled)).map(|g| {
            HealthChecker::GrpcHealthCheck(GrpcHealthCheck {
                service_name: g.service_name.clone().unwrap_or_default(),
                authority: g.authority.clone().unwrap_or_default(),
                ..Default::default()
            })
        }),
        Protocol::Http | Protocol::Http2 => {
            conf.http.as_ref().filter(|h| enabled(h.disabled)).map(|h| {
                HealthChecker::HttpHealthCheck(HttpHealthCheck {
                    path: h.path.clone().unwrap_or_else(|| "/".into()),
                    request_headers_to_add: h
                        .request_headers_to_add
                        .as_ref()
                        .map(super::rate_limit::header_options)
                        .unwrap_or_default(),
                    expected_statuses: h
                        .expected_statuses
                        .iter()
                        .flatten()
                        .map(|s| Int64Range {
                            start: i64::from(*s),
                            end: i64::from(*s) + 1,
                        })
                        .collect(),
                    ..Default::default()
                })
            })
        }
        Protocol::Tcp => None,
    };
    own.or_else(|| {
        conf.tcp
            .as_ref()
            .filter(|t| enabled(t.disabled))
            .map(tcp_check)
    })
}

fn tcp_check(t: &TcpCheck) -> HealthChecker {
    let binary = |bytes: Vec<u8>| Payload {
        payload: Some(payload::Payload::Binary(bytes)),
    };
    HealthChecker::TcpHealthCheck(TcpHealthCheck {
        send: t.send_bytes().map(binary),
        receive: t.receive_bytes().into_iter().map(binary).collect(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(json: serde_json::Value) -> HealthCheckConf {
        serde_json::from_value(json).unwrap()
    }

    fn check(c: &Cluster) -> &HealthCheck {
        let [hc] = c.health_checks.as_slice() else {
            panic!("one health check: {c:?}");
        };
        hc
    }

    #[test]
    fn an_http_destination_gets_the_http_check_with_kumas_defaults() {
        let mut c = Cluster::default();
        let conf = conf(serde_json::json!({
            "interval": "10s",
            "healthyPanicThreshold": 0,
            "http": {
                "path": "/health",
                "expectedStatuses": [200, 204],
                "requestHeadersToAdd": {"add": [{"name": "X-Probe", "value": "1"}]},
            },
            "tcp": {"send": "cGluZw=="},
        }));
        apply(&mut c, &conf, Protocol::Http);
        let hc = check(&c);
        assert_eq!(hc.interval.unwrap().seconds, 10);
        assert_eq!(hc.timeout.unwrap().seconds, 15, "Kuma's default");
        assert_eq!(hc.unhealthy_threshold.unwrap().value, 5);
        assert_eq!(hc.healthy_threshold.unwrap().value, 1);
        let Some(HealthChecker::HttpHealthCheck(http)) = &hc.health_checker else {
            panic!("{hc:?}");
        };
        assert_eq!(http.path, "/health");
        let statuses: Vec<_> = http
            .expected_statuses
            .iter()
            .map(|r| (r.start, r.end))
            .collect();
        assert_eq!(statuses, [(200, 201), (204, 205)]);
        assert_eq!(
            http.request_headers_to_add[0].header.as_ref().unwrap().key,
            "x-probe"
        );
        let panic = c.common_lb_config.unwrap().healthy_panic_threshold.unwrap();
        assert_eq!(panic.value, 0.0);
    }

    #[test]
    fn a_tcp_destination_gets_the_tcp_check_and_a_disabled_one_none() {
        let mut c = Cluster::default();
        let both = conf(serde_json::json!({
            "http": {"path": "/health"},
            "tcp": {"send": "cGluZw==", "receive": ["cG9uZw=="]},
        }));
        apply(&mut c, &both, Protocol::Tcp);
        let Some(HealthChecker::TcpHealthCheck(tcp)) = &check(&c).health_checker else {
            panic!("{c:?}");
        };
        let bytes = |p: &Payload| match &p.payload {
            Some(payload::Payload::Binary(b)) => b.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(bytes(tcp.send.as_ref().unwrap()), b"ping");
        assert_eq!(bytes(&tcp.receive[0]), b"pong");
        let mut c = Cluster::default();
        let off = conf(serde_json::json!({"tcp": {"disabled": true}}));
        apply(&mut c, &off, Protocol::Tcp);
        assert_eq!(c, Cluster::default());
    }

    #[test]
    fn a_grpc_destination_gets_the_grpc_check() {
        let mut c = Cluster::default();
        let grpc = conf(serde_json::json!({"grpc": {"serviceName": "echo.Echo"}}));
        apply(&mut c, &grpc, Protocol::Grpc);
        let Some(HealthChecker::GrpcHealthCheck(g)) = &check(&c).health_checker else {
            panic!("{c:?}");
        };
        assert_eq!(g.service_name, "echo.Echo");
    }
}
