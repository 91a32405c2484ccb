//! The scrape text (the proxy's own families after MeshMetric's filter,
//! then the applications') as one OTLP `ExportMetricsServiceRequest`, for
//! MeshMetric's OpenTelemetry backend: a `counter` family is a
//! cumulative monotonic Sum named after the family (`..._total` samples),
//! a `histogram` one a cumulative Histogram (its `_bucket`, `_sum` and
//! `_count` samples joined per label set), anything else a Gauge per
//! sample name. Labels become string attributes.

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// One sample line: its name, labels and value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// The request for `text`, from `service` (`service.name`), at `now`
/// (Unix nanoseconds).
pub fn request(text: &str, service: &str, now: u64) -> ExportMetricsServiceRequest {
    let mut types: HashMap<&str, &str> = HashMap::new();
    let mut metrics: Vec<Metric> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut histograms: HashMap<(String, Vec<(String, String)>), HistogramDataPoint> =
        HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            if let (Some(name), Some(ty)) = (parts.next(), parts.next()) {
                types.insert(name, ty);
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some(sample) = parse(line) else { continue };
        let family = |suffix: &str, ty: &str| {
            sample
                .name
                .strip_suffix(suffix)
                .filter(|base| types.get(base) == Some(&ty))
                .map(str::to_owned)
        };
        if let Some(base) = family("_total", "counter") {
            let point = number(&sample.labels, sample.value, now);
            let slot = slot(&mut metrics, &mut index, &base, || {
                metric::Data::Sum(Sum {
                    data_points: Vec::new(),
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    is_monotonic: true,
                })
            });
            if let Some(metric::Data::Sum(s)) = &mut metrics[slot].data {
                s.data_points.push(point);
            }
            continue;
        }
        let part = ["_bucket", "_sum", "_count"]
            .into_iter()
            .find_map(|suffix| family(suffix, "histogram").map(|base| (base, suffix)));
        if let Some((base, suffix)) = part {
            slot(&mut metrics, &mut index, &base, || {
                metric::Data::Histogram(Histogram {
                    data_points: Vec::new(),
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                })
            });
            let le = sample
                .labels
                .iter()
                .find(|(k, _)| k == "le")
                .map(|(_, v)| v.clone());
            let labels: Vec<(String, String)> = sample
                .labels
                .iter()
                .filter(|(k, _)| k != "le")
                .cloned()
                .collect();
            let point =
                histograms
                    .entry((base, labels.clone()))
                    .or_insert_with(|| HistogramDataPoint {
                        attributes: attributes(&labels),
                        time_unix_nano: now,
                        ..Default::default()
                    });
            match (suffix, le) {
                ("_sum", _) => point.sum = Some(sample.value),
                ("_count", _) => point.count = sample.value as u64,
                (_, Some(le)) if le != "+Inf" => {
                    if let Ok(bound) = le.parse::<f64>() {
                        point.explicit_bounds.push(bound);
                        // Cumulative here; made per-bucket below.
                        point.bucket_counts.push(sample.value as u64);
                    }
                }
                _ => {}
            }
            continue;
        }
        let point = number(&sample.labels, sample.value, now);
        let slot = slot(&mut metrics, &mut index, &sample.name, || {
            metric::Data::Gauge(Gauge {
                data_points: Vec::new(),
            })
        });
        if let Some(metric::Data::Gauge(g)) = &mut metrics[slot].data {
            g.data_points.push(point);
        }
    }
    let mut points: Vec<_> = histograms.into_iter().collect();
    points.sort_by(|a, b| a.0.cmp(&b.0));
    for ((base, _), mut point) in points {
        let mut previous = 0;
        for count in &mut point.bucket_counts {
            let cumulative = *count;
            *count = cumulative.saturating_sub(previous);
            previous = cumulative;
        }
        point
            .bucket_counts
            .push(point.count.saturating_sub(previous));
        if let Some(metric::Data::Histogram(h)) = &mut metrics[index[&base]].data {
            h.data_points.push(point);
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: attributes(&[("service.name".into(), service.into())]),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The index of metric `name` in `metrics`, added with `data()` if new.
fn slot(
    metrics: &mut Vec<Metric>,
    index: &mut HashMap<String, usize>,
    name: &str,
    data: impl FnOnce() -> metric::Data,
) -> usize {
    *index.entry(name.to_owned()).or_insert_with(|| {
        metrics.push(Metric {
            name: name.to_owned(),
            data: Some(data()),
            ..Default::default()
        });
        metrics.len() - 1
    })
}

fn number(labels: &[(String, String)], value: f64, now: u64) -> NumberDataPoint {
    NumberDataPoint {
        attributes: attributes(labels),
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(value)),
        ..Default::default()
    }
}

fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            }),
            ..Default::default()
        })
        .collect()
}

/// `name{k="v",...} value [timestamp]`; `None` for a line that is not one.
fn parse(line: &str) -> Option<Sample> {
    let end = line.find(['{', ' '])?;
    let name = line[..end].to_owned();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let close = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    let (_, '"') = chars.next()? else { return None };
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        };
        rest = &inner[close + 1..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE meshlink_proxy_connections counter
meshlink_proxy_connections_total{listener=\"in\",direction=\"inbound\"} 3
# TYPE meshlink_proxy_http_request_duration_seconds histogram
meshlink_proxy_http_request_duration_seconds_sum{direction=\"inbound\"} 0.75
meshlink_proxy_http_request_duration_seconds_count{direction=\"inbound\"} 4
meshlink_proxy_http_request_duration_seconds_bucket{le=\"0.1\",direction=\"inbound\"} 1
meshlink_proxy_http_request_duration_seconds_bucket{le=\"0.5\",direction=\"inbound\"} 3
meshlink_proxy_http_request_duration_seconds_bucket{le=\"+Inf\",direction=\"inbound\"} 4
# EOF
shop_orders_total{region=\"e\\\"u\"} 42
";

    #[test]
    fn counters_histograms_and_untyped_samples_become_their_otlp_kinds() {
        let req = request(TEXT, "default.backend-1", 7);
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "meshlink_proxy_connections",
                "meshlink_proxy_http_request_duration_seconds",
                "shop_orders_total"
            ]
        );
        let Some(metric::Data::Sum(sum)) = &metrics[0].data else {
            panic!("a Sum: {:?}", metrics[0]);
        };
        assert!(sum.is_monotonic);
        assert_eq!(sum.data_points[0].attributes.len(), 2);
        let Some(metric::Data::Histogram(h)) = &metrics[1].data else {
            panic!("a Histogram: {:?}", metrics[1]);
        };
        let p = &h.data_points[0];
        assert_eq!(p.explicit_bounds, [0.1, 0.5]);
        assert_eq!(p.bucket_counts, [1, 2, 1]);
        assert_eq!((p.count, p.sum), (4, Some(0.75)));
        let Some(metric::Data::Gauge(g)) = &metrics[2].data else {
            panic!("a Gauge: {:?}", metrics[2]);
        };
        let value = g.data_points[0].attributes[0]
            .value
            .as_ref()
            .and_then(|v| v.value.clone());
        assert_eq!(value, Some(any_value::Value::StringValue("e\"u".into())));
    }
}
