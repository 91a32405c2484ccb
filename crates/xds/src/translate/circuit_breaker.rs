//! MeshCircuitBreaker as Envoy cluster fields, as Kuma translates it:
//! `connectionLimits` become the default-priority
//! `circuit_breakers.thresholds` (only the limits that are set; Envoy's
//! defaults stand for the others), `outlierDetection` becomes
//! `outlier_detection` with every detector disabled (`enforcing_* = 0`)
//! but the configured ones (`enforcing_* = 100`), and
//! `healthyPanicThreshold` becomes `common_lb_config.healthy_panic_threshold`.
//!
//! Never decides which policy applies (that is `policies`); a
//! `disabled: true` outlier detection emits none.

use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, OutlierDetection as PbOutlierDetection, circuit_breakers::Thresholds,
    cluster::CommonLbConfig,
};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt32Value;
use meshlink_api::spec::{CircuitBreakerConf, OutlierDetection};

use super::http::kuma_duration;

/// Everything on.
const ENFORCED: u32 = 100;

fn u32v(value: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value })
}

/// Sets `conf`'s fields on `cluster`.
pub(super) fn apply(cluster: &mut Cluster, conf: &CircuitBreakerConf) {
    if let Some(l) = &conf.connection_limits {
        cluster.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![Thresholds {
                max_connections: l.max_connections.and_then(u32v),
                max_pending_requests: l.max_pending_requests.and_then(u32v),
                max_requests: l.max_requests.and_then(u32v),
                max_retries: l.max_retries.and_then(u32v),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    let Some(od) = conf
        .outlier_detection
        .as_ref()
        .filter(|o| o.disabled != Some(true))
    else {
        return;
    };
    cluster.outlier_detection = Some(outlier_detection(od));
    if let Some(t) = od.healthy_panic_threshold.as_ref().and_then(|t| t.value()) {
        cluster.common_lb_config = Some(CommonLbConfig {
            healthy_panic_threshold: Some(Percent { value: t }),
            ..Default::default()
        });
    }
}

fn outlier_detection(od: &OutlierDetection) -> PbOutlierDetection {
    let off = u32v(0);
    let mut out = PbOutlierDetection {
        interval: kuma_duration(od.interval.as_deref()),
        base_ejection_time: kuma_duration(od.base_ejection_time.as_deref()),
        max_ejection_percent: od.max_ejection_percent.and_then(u32v),
        split_external_local_origin_errors: od.split_external_and_local_errors == Some(true),
        enforcing_consecutive_5xx: off,
        enforcing_consecutive_gateway_failure: off,
        enforcing_consecutive_local_origin_failure: off,
        enforcing_success_rate: off,
        enforcing_local_origin_success_rate: off,
        enforcing_failure_percentage: off,
        enforcing_failure_percentage_local_origin: off,
        ..Default::default()
    };
    let Some(d) = &od.detectors else {
        return out;
    };
    if let Some(c) = &d.total_failures {
        out.consecutive_5xx = c.consecutive.and_then(u32v);
        out.enforcing_consecutive_5xx = u32v(ENFORCED);
    }
    if let Some(c) = &d.gateway_failures {
        out.consecutive_gateway_failure = c.consecutive.and_then(u32v);
        out.enforcing_consecutive_gateway_failure = u32v(ENFORCED);
    }
    if let Some(c) = &d.local_origin_failures {
        out.consecutive_local_origin_failure = c.consecutive.and_then(u32v);
        out.enforcing_consecutive_local_origin_failure = u32v(ENFORCED);
    }
    if let Some(s) = &d.success_rate {
        out.success_rate_minimum_hosts = s.minimum_hosts.and_then(u32v);
        out.success_rate_request_volume = s.request_volume.and_then(u32v);
        // Envoy reads the factor in thousandths (1900 = 1.9).
        out.success_rate_stdev_factor = s
            .standard_deviation_factor
            .as_ref()
            .and_then(|f| f.value())
            .map(|f| (f * 1000.0).round() as u32)
            .and_then(u32v);
        out.enforcing_success_rate = u32v(ENFORCED);
        out.enforcing_local_origin_success_rate = u32v(ENFORCED);
    }
    if let Some(f) = &d.failure_percentage {
        out.failure_percentage_minimum_hosts = f.minimum_hosts.and_then(u32v);
        out.failure_percentage_request_volume = f.request_volume.and_then(u32v);
        out.failure_percentage_threshold = f.threshold.and_then(u32v);
        out.enforcing_failure_percentage = u32v(ENFORCED);
        out.enforcing_failure_percentage_local_origin = u32v(ENFORCED);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(json: serde_json::Value) -> CircuitBreakerConf {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn limits_and_detectors_become_envoy_fields() {
        let mut c = Cluster::default();
        apply(
            &mut c,
            &conf(serde_json::json!({
                "connectionLimits": {"maxRequests": 10, "maxRetries": 2},
                "outlierDetection": {
                    "interval": "1s",
                    "baseEjectionTime": "30s",
                    "healthyPanicThreshold": 0,
                    "detectors": {
                        "totalFailures": {"consecutive": 3},
                        "successRate": {"standardDeviationFactor": "1.9"},
                    },
                },
            })),
        );
        let t = &c.circuit_breakers.unwrap().thresholds[0];
        assert_eq!(t.max_requests, u32v(10));
        assert_eq!(t.max_retries, u32v(2));
        assert_eq!(t.max_connections, None, "unset limits keep Envoy's default");
        let od = c.outlier_detection.unwrap();
        assert_eq!(od.consecutive_5xx, u32v(3));
        assert_eq!(od.enforcing_consecutive_5xx, u32v(100));
        assert_eq!(od.enforcing_consecutive_gateway_failure, u32v(0));
        assert_eq!(od.enforcing_failure_percentage, u32v(0));
        assert_eq!(od.success_rate_stdev_factor, u32v(1900));
        assert_eq!(od.interval.unwrap().seconds, 1);
        let panic = c.common_lb_config.unwrap().healthy_panic_threshold.unwrap();
        assert_eq!(panic.value, 0.0);
    }

    #[test]
    fn disabled_detection_emits_nothing() {
        let mut c = Cluster::default();
        apply(
            &mut c,
            &conf(serde_json::json!({
                "outlierDetection": {"disabled": true, "detectors": {"totalFailures": {}}},
            })),
        );
        assert_eq!(c, Cluster::default());
    }
}
