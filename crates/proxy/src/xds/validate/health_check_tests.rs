//! What the health check validation accepts and refuses.

use envoy_types::pb::envoy::config::core::v3::health_check::{
    GrpcHealthCheck, HttpHealthCheck, TcpHealthCheck,
};
use envoy_types::pb::envoy::r#type::v3::Int64Range;
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use super::*;

fn secs(seconds: i64) -> Option<PbDuration> {
    Some(PbDuration { seconds, nanos: 0 })
}

fn check(checker: HealthChecker) -> HealthCheck {
    HealthCheck {
        timeout: secs(1),
        interval: secs(2),
        unhealthy_threshold: Some(UInt32Value { value: 3 }),
        healthy_threshold: Some(UInt32Value { value: 1 }),
        health_checker: Some(checker),
        ..Default::default()
    }
}

fn http(path: &str) -> HealthChecker {
    HealthChecker::HttpHealthCheck(HttpHealthCheck {
        path: path.into(),
        expected_statuses: vec![Int64Range {
            start: 200,
            end: 300,
        }],
        ..Default::default()
    })
}

#[test]
fn an_http_check_reads_with_envoys_defaults() {
    let spec = health_checks(&[check(http("/health"))]).unwrap().unwrap();
    assert_eq!(spec.interval, Duration::from_secs(2));
    assert_eq!(
        spec.unhealthy_interval, spec.interval,
        "defaults to interval"
    );
    assert_eq!(spec.no_traffic_interval, Duration::from_secs(60));
    assert!(spec.reuse_connection);
    let CheckKind::Http {
        expected_statuses, ..
    } = &spec.kind
    else {
        panic!("{spec:?}");
    };
    assert_eq!(
        expected_statuses.as_slice(),
        [std::ops::Range {
            start: 200,
            end: 300
        }]
    );
    assert!(health_checks(&[]).unwrap().is_none());
}

#[test]
fn tcp_payloads_read_as_binary_or_hex() {
    let tcp = HealthChecker::TcpHealthCheck(TcpHealthCheck {
        send: Some(Payload {
            payload: Some(payload::Payload::Text("70696E67".into())),
        }),
        receive: vec![Payload {
            payload: Some(payload::Payload::Binary(b"pong".to_vec())),
        }],
        ..Default::default()
    });
    let spec = health_checks(&[check(tcp)]).unwrap().unwrap();
    assert_eq!(
        spec.kind,
        CheckKind::Tcp {
            send: b"ping".to_vec(),
            receive: vec![b"pong".to_vec()],
        }
    );
    let bad = HealthChecker::TcpHealthCheck(TcpHealthCheck {
        send: Some(Payload {
            payload: Some(payload::Payload::Text("zz".into())),
        }),
        ..Default::default()
    });
    let err = health_checks(&[check(bad)]).unwrap_err();
    assert_eq!(err.field, "health_checks[0].tcp_health_check.send.text");
}

#[test]
fn what_the_proxy_cannot_run_is_refused_by_field() {
    let two = health_checks(&[check(http("/a")), check(http("/b"))]).unwrap_err();
    assert_eq!(two.field, "health_checks[1]");
    let mut no_interval = check(http("/health"));
    no_interval.interval = None;
    let err = health_checks(&[no_interval]).unwrap_err();
    assert_eq!(err.field, "health_checks[0].interval");
    let mut alt = check(http("/health"));
    alt.alt_port = Some(UInt32Value { value: 9 });
    assert_eq!(
        health_checks(&[alt]).unwrap_err().field,
        "health_checks[0].alt_port"
    );
    let post = HealthChecker::HttpHealthCheck(HttpHealthCheck {
        path: "/health".into(),
        method: RequestMethod::Post as i32,
        ..Default::default()
    });
    let err = health_checks(&[check(post)]).unwrap_err();
    assert_eq!(err.field, "health_checks[0].http_health_check.method");
    let grpc = HealthChecker::GrpcHealthCheck(GrpcHealthCheck {
        service_name: "echo".into(),
        ..Default::default()
    });
    assert!(health_checks(&[check(grpc)]).is_ok());
    let mut zero = check(http("/health"));
    zero.healthy_threshold = Some(UInt32Value { value: 0 });
    assert!(
        health_checks(&[zero])
            .unwrap_err()
            .reason
            .contains("at least 1")
    );
}
