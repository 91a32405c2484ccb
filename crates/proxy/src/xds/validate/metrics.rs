//! The MeshMetric carrier Listener (`meshlink:metrics`, one filter
//! `meshlink.metrics` holding a `meshlink.v1.MetricsConfig`) into a
//! [`MetricsPolicy`]. Refused with the field and the fix: an unknown
//! profile or match type, a regex that does not compile, a port out of
//! range, a path without `/`, two endpoints on one port, and a TLS mode
//! other than `Disabled` (meshlink-proxy serves plain HTTP only).

use std::net::{IpAddr, SocketAddr};

use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::google::protobuf::Any;
use meshlink_proto::certify::{MetricSelector, MetricsConfig};
use meshlink_proto::metrics_listener::FILTER_NAME;

use super::{Invalid, decode, invalid};
use crate::model::metrics::{
    MetricsPolicy, NameMatch, OtlpBackend, Profile, PrometheusEndpoint, ScrapedApp,
};
use crate::model::route::Pattern;

/// Where the config sits in the carrier.
const AT: &str = "filter_chains[0].filters[0].typed_config";

/// Validates the carrier Listener `any`.
pub fn metrics_listener(any: &Any) -> Result<MetricsPolicy, Invalid> {
    let l: Listener = decode(any, "resource")?;
    let filter = match l.filter_chains.as_slice() {
        [chain] if chain.filters.len() == 1 => &chain.filters[0],
        _ => {
            return Err(invalid(
                "filter_chains",
                format!("the MeshMetric listener holds exactly one filter, {FILTER_NAME}"),
            ));
        }
    };
    if filter.name != FILTER_NAME {
        return Err(invalid(
            "filter_chains[0].filters[0].name",
            format!("is {:?}; expected {FILTER_NAME}", filter.name),
        ));
    }
    let Some(filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        return Err(invalid(AT, "required: a meshlink.v1.MetricsConfig"));
    };
    policy(&decode::<MetricsConfig>(any, AT)?)
}

/// A [`MetricsPolicy`] from the decoded config.
fn policy(c: &MetricsConfig) -> Result<MetricsPolicy, Invalid> {
    let mut profiles = Vec::new();
    for (i, p) in c.profiles.iter().enumerate() {
        profiles.push(match p.as_str() {
            "All" => Profile::All,
            "Basic" => Profile::Basic,
            "None" => Profile::None,
            other => {
                return Err(invalid(
                    format!("{AT}.profiles[{i}]"),
                    format!("{other:?} is not a profile; use All, Basic or None"),
                ));
            }
        });
    }
    let regex = (!c.regex.is_empty())
        .then(|| pattern(&c.regex, format!("{AT}.regex")))
        .transpose()?;
    let mut applications = Vec::new();
    for (i, a) in c.applications.iter().enumerate() {
        let at = format!("{AT}.applications[{i}]");
        let port = port(a.port, format!("{at}.port"))?;
        path(&a.path, format!("{at}.path"))?;
        let host = if a.address.contains(':') {
            format!("[{}]", a.address)
        } else {
            a.address.clone()
        };
        applications.push(ScrapedApp {
            name: a.name.clone(),
            authority: format!("{host}:{port}"),
            path: a.path.clone(),
        });
    }
    let mut prometheus: Vec<PrometheusEndpoint> = Vec::new();
    for (i, p) in c.prometheus.iter().enumerate() {
        let at = format!("{AT}.prometheus[{i}]");
        if !matches!(p.tls_mode.as_str(), "" | "Disabled") {
            return Err(invalid(
                format!("{at}.tls_mode"),
                format!(
                    "{:?} is not served by meshlink-proxy, which serves metrics over plain HTTP; \
                     use Disabled",
                    p.tls_mode
                ),
            ));
        }
        let ip: IpAddr = p.address.parse().map_err(|_| {
            invalid(
                format!("{at}.address"),
                format!("{:?} is not an IP address", p.address),
            )
        })?;
        let address = SocketAddr::new(ip, port(p.port, format!("{at}.port"))?);
        path(&p.path, format!("{at}.path"))?;
        if prometheus
            .iter()
            .any(|e| e.address.port() == address.port())
        {
            return Err(invalid(
                format!("{at}.port"),
                format!(
                    "{} is served by an earlier backend; give each its own port",
                    p.port
                ),
            ));
        }
        prometheus.push(PrometheusEndpoint {
            address,
            path: p.path.clone(),
        });
    }
    Ok(MetricsPolicy {
        profiles,
        include: selectors(&c.include, "include")?,
        exclude: selectors(&c.exclude, "exclude")?,
        regex,
        include_unused: c.include_unused,
        applications,
        prometheus,
        open_telemetry: c
            .open_telemetry
            .iter()
            .map(|o| OtlpBackend {
                endpoint: o.endpoint.clone(),
                refresh_interval_ms: o.refresh_interval_ms,
            })
            .collect(),
    })
}

fn selectors(list: &[MetricSelector], name: &str) -> Result<Vec<NameMatch>, Invalid> {
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let at = format!("{AT}.{name}[{i}]");
        out.push(match s.r#type.as_str() {
            "Prefix" => NameMatch::Prefix(s.r#match.clone()),
            "Exact" => NameMatch::Exact(s.r#match.clone()),
            "Contains" => NameMatch::Contains(s.r#match.clone()),
            "Regex" => NameMatch::Regex(pattern(&s.r#match, format!("{at}.match"))?),
            other => {
                return Err(invalid(
                    format!("{at}.type"),
                    format!("{other:?} is not a match type; use Prefix, Regex, Exact or Contains"),
                ));
            }
        });
    }
    Ok(out)
}

fn pattern(source: &str, at: String) -> Result<Pattern, Invalid> {
    Pattern::new(source).map_err(|e| invalid(at, format!("not a valid RE2 expression: {e}")))
}

fn port(p: u32, at: String) -> Result<u16, Invalid> {
    u16::try_from(p)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| invalid(at, format!("{p} is not a port; use 1 to 65535")))
}

fn path(p: &str, at: String) -> Result<(), Invalid> {
    if p.starts_with('/') {
        Ok(())
    } else {
        Err(invalid(at, format!("{p:?} must start with /")))
    }
}

#[cfg(test)]
mod tests {
    use meshlink_proto::certify::{MetricsApplication, PrometheusEndpoint as PbEndpoint};

    use super::*;

    fn refused(c: MetricsConfig) -> Invalid {
        policy(&c).expect_err("refused")
    }

    #[test]
    fn what_cannot_be_served_is_refused_with_its_field() {
        let bad_regex = MetricsConfig {
            exclude: vec![MetricSelector {
                r#type: "Regex".into(),
                r#match: "(unclosed".into(),
            }],
            ..Default::default()
        };
        assert_eq!(refused(bad_regex).field, format!("{AT}.exclude[0].match"));
        let profile = MetricsConfig {
            profiles: vec!["Everything".into()],
            ..Default::default()
        };
        assert!(refused(profile).reason.contains("use All, Basic or None"));
        let endpoint = |tls_mode: &str, port| PbEndpoint {
            address: "127.0.0.1".into(),
            port,
            path: "/metrics".into(),
            tls_mode: tls_mode.into(),
            client_id: String::new(),
        };
        let tls = MetricsConfig {
            prometheus: vec![endpoint("ProvidedTLS", 5670)],
            ..Default::default()
        };
        assert!(refused(tls).reason.contains("use Disabled"));
        let twice = MetricsConfig {
            prometheus: vec![endpoint("Disabled", 5670), endpoint("", 5670)],
            ..Default::default()
        };
        assert_eq!(refused(twice).field, format!("{AT}.prometheus[1].port"));
        let app = MetricsConfig {
            applications: vec![MetricsApplication {
                name: "app".into(),
                address: "::1".into(),
                port: 70_000,
                path: "/metrics".into(),
            }],
            ..Default::default()
        };
        assert_eq!(refused(app).field, format!("{AT}.applications[0].port"));
    }

    #[test]
    fn an_ipv6_application_is_dialled_in_brackets() {
        let c = MetricsConfig {
            applications: vec![MetricsApplication {
                name: "app".into(),
                address: "::1".into(),
                port: 9090,
                path: "/metrics".into(),
            }],
            ..Default::default()
        };
        assert_eq!(
            policy(&c).expect("policy").applications[0].authority,
            "[::1]:9090"
        );
    }
}
