//! Validation of a Cluster's circuit breaking (what Kuma's
//! MeshCircuitBreaker becomes): `circuit_breakers.thresholds` at the
//! default priority, `outlier_detection` and
//! `common_lb_config.healthy_panic_threshold`.
//!
//! Refused, naming the field, rather than silently ignored: thresholds for
//! the high priority, per-host thresholds, a retry budget, connection-pool
//! limits, `track_remaining`, ejection jitter, `always_eject_one_host`,
//! degraded-host detection and outlier monitors, and any other
//! `common_lb_config` field.

use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::cluster::common_lb_config::{
    LocalityConfigSpecifier, ZoneAwareLbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, OutlierDetection, cluster::CommonLbConfig,
};
use envoy_types::pb::envoy::config::core::v3::RoutingPriority;
use envoy_types::pb::google::protobuf::UInt32Value;

use super::{Invalid, invalid};
use crate::model::circuit_breaker::{OutlierSpec, Thresholds};

/// Reads `circuit_breakers`.
pub(super) fn thresholds(cb: &CircuitBreakers) -> Result<Thresholds, Invalid> {
    if !cb.per_host_thresholds.is_empty() {
        return Err(invalid(
            "circuit_breakers.per_host_thresholds",
            "not supported by meshlink-proxy: it enforces the cluster-wide thresholds only",
        ));
    }
    let mut out = Thresholds::default();
    for (i, t) in cb.thresholds.iter().enumerate() {
        let at = format!("circuit_breakers.thresholds[{i}]");
        if t.priority != RoutingPriority::Default as i32 {
            return Err(invalid(
                format!("{at}.priority"),
                "only the DEFAULT priority is supported (meshlink-proxy has no high-priority \
                 routes)",
            ));
        }
        let unsupported = [
            (t.retry_budget.is_some(), "retry_budget"),
            (t.max_connection_pools.is_some(), "max_connection_pools"),
            (t.track_remaining, "track_remaining"),
        ];
        if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
            return Err(invalid(
                format!("{at}.{name}"),
                "not supported by meshlink-proxy: it enforces max_connections, \
                 max_pending_requests, max_requests and max_retries",
            ));
        }
        let limit = |v: &Option<UInt32Value>, default: u32| v.as_ref().map_or(default, |v| v.value);
        out = Thresholds {
            max_connections: limit(&t.max_connections, out.max_connections),
            max_pending_requests: limit(&t.max_pending_requests, out.max_pending_requests),
            max_requests: limit(&t.max_requests, out.max_requests),
            max_retries: limit(&t.max_retries, out.max_retries),
        };
    }
    Ok(out)
}

/// Reads `outlier_detection` and the panic threshold of
/// `common_lb_config`.
pub(super) fn outlier(
    od: &OutlierDetection,
    lb: Option<&CommonLbConfig>,
) -> Result<OutlierSpec, Invalid> {
    let at = "outlier_detection";
    let unsupported = [
        (
            od.max_ejection_time_jitter.is_some(),
            "max_ejection_time_jitter",
        ),
        (!od.monitors.is_empty(), "monitors"),
        (
            od.successful_active_health_check_uneject_host
                .is_some_and(|v| !v.value),
            "successful_active_health_check_uneject_host",
        ),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(set, _)| *set) {
        return Err(invalid(
            format!("{at}.{name}"),
            "not supported by meshlink-proxy (it has no jitter, monitors or active health \
             checks)",
        ));
    }
    let d = OutlierSpec::default();
    let n = |v: &Option<UInt32Value>, default: u32| v.as_ref().map_or(default, |v| v.value);
    let pct = |v: &Option<UInt32Value>, default: u32, field: &str| -> Result<u32, Invalid> {
        let v = n(v, default);
        if v > 100 {
            return Err(invalid(
                format!("{at}.{field}"),
                format!("{v} is not a percentage (0-100)"),
            ));
        }
        Ok(v)
    };
    let time = |v: &Option<envoy_types::pb::google::protobuf::Duration>,
                default: Duration,
                field: &str|
     -> Result<Duration, Invalid> {
        match v {
            None => Ok(default),
            Some(v) => {
                let v = super::duration(v, format!("{at}.{field}"))?;
                if v.is_zero() {
                    return Err(invalid(format!("{at}.{field}"), "must be positive"));
                }
                Ok(v)
            }
        }
    };
    let base_ejection_time = time(
        &od.base_ejection_time,
        d.base_ejection_time,
        "base_ejection_time",
    )?;
    let spec = OutlierSpec {
        interval: time(&od.interval, d.interval, "interval")?,
        base_ejection_time,
        // Envoy: never shorter than the base.
        max_ejection_time: time(
            &od.max_ejection_time,
            d.max_ejection_time,
            "max_ejection_time",
        )?
        .max(base_ejection_time),
        max_ejection_percent: pct(
            &od.max_ejection_percent,
            d.max_ejection_percent,
            "max_ejection_percent",
        )?,
        split_external_local_origin_errors: od.split_external_local_origin_errors,
        consecutive_5xx: n(&od.consecutive_5xx, d.consecutive_5xx),
        enforcing_consecutive_5xx: pct(
            &od.enforcing_consecutive_5xx,
            d.enforcing_consecutive_5xx,
            "enforcing_consecutive_5xx",
        )?,
        consecutive_gateway_failure: n(
            &od.consecutive_gateway_failure,
            d.consecutive_gateway_failure,
        ),
        enforcing_consecutive_gateway_failure: pct(
            &od.enforcing_consecutive_gateway_failure,
            d.enforcing_consecutive_gateway_failure,
            "enforcing_consecutive_gateway_failure",
        )?,
        consecutive_local_origin_failure: n(
            &od.consecutive_local_origin_failure,
            d.consecutive_local_origin_failure,
        ),
        enforcing_consecutive_local_origin_failure: pct(
            &od.enforcing_consecutive_local_origin_failure,
            d.enforcing_consecutive_local_origin_failure,
            "enforcing_consecutive_local_origin_failure",
        )?,
        success_rate_minimum_hosts: n(&od.success_rate_minimum_hosts, d.success_rate_minimum_hosts),
        success_rate_request_volume: n(
            &od.success_rate_request_volume,
            d.success_rate_request_volume,
        ),
        success_rate_stdev_factor: n(&od.success_rate_stdev_factor, d.success_rate_stdev_factor),
        enforcing_success_rate: pct(
            &od.enforcing_success_rate,
            d.enforcing_success_rate,
            "enforcing_success_rate",
        )?,
        enforcing_local_origin_success_rate: pct(
            &od.enforcing_local_origin_success_rate,
            d.enforcing_local_origin_success_rate,
            "enforcing_local_origin_success_rate",
        )?,
        failure_percentage_threshold: pct(
            &od.failure_percentage_threshold,
            d.failure_percentage_threshold,
            "failure_percentage_threshold",
        )?,
        failure_percentage_minimum_hosts: n(
            &od.failure_percentage_minimum_hosts,
            d.failure_percentage_minimum_hosts,
        ),
        failure_percentage_request_volume: n(
            &od.failure_percentage_request_volume,
            d.failure_percentage_request_volume,
        ),
        enforcing_failure_percentage: pct(
            &od.enforcing_failure_percentage,
            d.enforcing_failure_percentage,
            "enforcing_failure_percentage",
        )?,
        enforcing_failure_percentage_local_origin: pct(
            &od.enforcing_failure_percentage_local_origin,
            d.enforcing_failure_percentage_local_origin,
            "enforcing_failure_percentage_local_origin",
        )?,
        healthy_panic_threshold: panic_threshold(lb, d.healthy_panic_threshold)?,
        fail_traffic_on_panic: fail_traffic_on_panic(lb),
    };
    Ok(spec)
}

/// `common_lb_config`: only `healthy_panic_threshold` is read; a cluster
/// without outlier detection ejects with the built-in rules and ignores
/// the threshold only when it is unset.
pub(super) fn panic_threshold(lb: Option<&CommonLbConfig>, default: u32) -> Result<u32, Invalid> {
    let Some(lb) = lb else {
        return Ok(default);
    };
    let only_threshold = CommonLbConfig {
        healthy_panic_threshold: lb.healthy_panic_threshold,
        locality_config_specifier: fail_on_panic_only(fail_traffic_on_panic(Some(lb))),
        ..Default::default()
    };
    if *lb != only_threshold {
        return Err(invalid(
            "common_lb_config",
            "only healthy_panic_threshold and zone_aware_lb_config.fail_traffic_on_panic are \
             supported by meshlink-proxy",
        ));
    }
    let Some(p) = &lb.healthy_panic_threshold else {
        return Ok(default);
    };
    if !(0.0..=100.0).contains(&p.value) {
        return Err(invalid(
            "common_lb_config.healthy_panic_threshold.value",
            format!("{} is not a percentage (0-100)", p.value),
        ));
    }
    Ok((p.value * 100.0).round() as u32)
}

/// `common_lb_config.zone_aware_lb_config.fail_traffic_on_panic`
/// (MeshHealthCheck's `failTrafficOnPanic`): in panic, fail requests
/// instead of using every endpoint.
pub(super) fn fail_traffic_on_panic(lb: Option<&CommonLbConfig>) -> bool {
    matches!(
        lb.and_then(|lb| lb.locality_config_specifier.as_ref()),
        Some(LocalityConfigSpecifier::ZoneAwareLbConfig(z)) if z.fail_traffic_on_panic
    )
}

/// The locality config that sets `fail_traffic_on_panic` and nothing else
/// (`None` when off).
fn fail_on_panic_only(on: bool) -> Option<LocalityConfigSpecifier> {
    on.then(|| {
        LocalityConfigSpecifier::ZoneAwareLbConfig(ZoneAwareLbConfig {
            fail_traffic_on_panic: true,
            ..Default::default()
        })
    })
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::Thresholds as PbThresholds;
    use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::thresholds::RetryBudget;
    use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
    use envoy_types::pb::envoy::r#type::v3::Percent;
    use envoy_types::pb::google::protobuf::Duration as PbDuration;
    use envoy_types::util::pack_any;

    use super::*;

    fn eds(f: impl FnOnce(&mut Cluster)) -> Result<crate::model::ClusterSpec, Invalid> {
        let mut c = Cluster {
            name: "backend".into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32,
            )),
            ..Default::default()
        };
        f(&mut c);
        super::super::cluster(&pack_any(c))
    }

    fn u(value: u32) -> Option<UInt32Value> {
        Some(UInt32Value { value })
    }

    #[test]
    fn thresholds_and_detection_are_read_with_envoys_defaults() {
        let c = eds(|c| {
            c.circuit_breakers = Some(CircuitBreakers {
                thresholds: vec![PbThresholds {
                    max_requests: u(10),
                    ..Default::default()
                }],
                ..Default::default()
            });
            c.outlier_detection = Some(OutlierDetection {
                consecutive_5xx: u(3),
                interval: Some(PbDuration {
                    seconds: 1,
                    nanos: 0,
                }),
                ..Default::default()
            });
        })
        .unwrap();
        assert_eq!(
            c.circuit_breakers,
            Some(Thresholds {
                max_requests: 10,
                ..Thresholds::default()
            })
        );
        let od = c.outlier_detection;
        assert_eq!((od.consecutive_5xx, od.interval.as_secs()), (3, 1));
        assert_eq!(od.base_ejection_time, Duration::from_secs(30));
        assert_eq!(od.healthy_panic_threshold, 5000, "Envoy's 50 %");
        // Without outlier_detection: the built-in rules.
        let plain = eds(|_| {}).unwrap();
        assert_eq!(plain.outlier_detection, OutlierSpec::builtin());
        assert_eq!(plain.circuit_breakers, None);
    }

    #[test]
    fn what_meshlink_proxy_cannot_enforce_is_refused_naming_the_field() {
        let field = |f: fn(&mut Cluster)| eds(f).unwrap_err().field;
        assert_eq!(
            field(|c| {
                c.circuit_breakers = Some(CircuitBreakers {
                    thresholds: vec![
                        Default::default(),
                        PbThresholds {
                            retry_budget: Some(RetryBudget::default()),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                })
            }),
            "circuit_breakers.thresholds[1].retry_budget"
        );
        assert_eq!(
            field(|c| {
                c.circuit_breakers = Some(CircuitBreakers {
                    thresholds: vec![PbThresholds {
                        priority: RoutingPriority::High as i32,
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            }),
            "circuit_breakers.thresholds[0].priority"
        );
        assert_eq!(
            field(|c| {
                c.outlier_detection = Some(OutlierDetection {
                    max_ejection_time_jitter: Some(PbDuration::default()),
                    ..Default::default()
                })
            }),
            "outlier_detection.max_ejection_time_jitter"
        );
        assert_eq!(
            field(|c| {
                c.outlier_detection = Some(OutlierDetection {
                    max_ejection_percent: u(120),
                    ..Default::default()
                })
            }),
            "outlier_detection.max_ejection_percent"
        );
        assert_eq!(
            field(|c| {
                c.common_lb_config = Some(CommonLbConfig {
                    healthy_panic_threshold: Some(Percent { value: 150.0 }),
                    ..Default::default()
                })
            }),
            "common_lb_config.healthy_panic_threshold.value"
        );
        assert_eq!(
            field(|c| {
                c.common_lb_config = Some(CommonLbConfig {
                    ignore_new_hosts_until_first_hc: true,
                    ..Default::default()
                })
            }),
            "common_lb_config"
        );
    }
}
