//! `meshlink get` columns for Kuma policies: MeshTrafficPermission and the
//! outbound policies (MeshHTTPRoute, MeshTCPRoute, MeshTimeout, MeshRetry)
//! and the resilience and observability policies.
//!
//! Owns how a `targetRef` reads in one cell (`Mesh`, `Dataplane app=web`,
//! `MeshService/backend:http`). It reads canonical JSON only and never
//! fails on an unexpected shape: a cell is then empty.

use meshlink_api::Kind;
use meshlink_api::policy::{EFFECT_LABEL, SHADOW};
use serde_json::Value;

use super::table::text as s;

/// A targetRef in one cell: `Kind`, `Kind/name[:section]`, or
/// `Kind k=v,...` for labels or tags.
pub(super) fn target(t: &Value) -> String {
    if t.is_null() {
        return String::new();
    }
    let mut out = s(&t["kind"]);
    let name = s(&t["name"]);
    if !name.is_empty() {
        out.push('/');
        out.push_str(&name);
    }
    let section = s(&t["sectionName"]);
    if !section.is_empty() {
        out.push(':');
        out.push_str(&section);
    }
    for field in ["labels", "tags"] {
        if let Some(map) = t[field].as_object() {
            let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}={}", s(v))).collect();
            out.push(' ');
            out.push_str(&pairs.join(","));
        }
    }
    out
}

/// TARGET (the proxies), TO (destinations or routes), RULES (routes
/// only) and EFFECT (`shadow` for a policy computed but not applied).
pub(super) fn policy_columns(
    kind: Kind,
    spec: &Value,
    labels: &Value,
) -> Vec<(&'static str, String)> {
    let top = match target(&spec["targetRef"]) {
        t if t.is_empty() => "Mesh".to_string(),
        t => t,
    };
    let to: Vec<String> = spec["to"]
        .as_array()
        .map(|a| a.iter().map(|e| target(&e["targetRef"])).collect())
        .unwrap_or_default();
    let mut cols = vec![("TARGET", top), ("TO", to.join(","))];
    if kind == Kind::MeshHTTPRoute {
        let rules: usize = spec["to"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["rules"].as_array())
                    .map(Vec::len)
                    .sum()
            })
            .unwrap_or_default();
        cols.push(("RULES", rules.to_string()));
    }
    if matches!(
        kind,
        Kind::MeshTimeout
            | Kind::MeshRateLimit
            | Kind::MeshAccessLog
            | Kind::MeshFaultInjection
            | Kind::MeshCircuitBreaker
    ) {
        let inbound = ["from", "rules"]
            .iter()
            .filter_map(|f| spec[*f].as_array())
            .map(Vec::len)
            .sum::<usize>();
        cols.push(("INBOUND RULES", inbound.to_string()));
    }
    if kind == Kind::MeshTrace {
        cols.push(("BACKEND", trace_backend(&spec["default"]["backends"][0])));
    }
    let effect = if labels[EFFECT_LABEL].as_str() == Some(SHADOW) {
        "shadow"
    } else {
        "applied"
    };
    cols.push(("EFFECT", effect.to_string()));
    cols
}

/// A MeshTrace backend in one cell: its type and where it sends spans,
/// e.g. `OpenTelemetry otel-collector:4317`.
fn trace_backend(b: &Value) -> String {
    let (kind, block, field) = [
        ("Zipkin", "zipkin", "url"),
        ("Datadog", "datadog", "url"),
        ("OpenTelemetry", "openTelemetry", "endpoint"),
    ]
    .into_iter()
    .find(|(k, block, _)| s(&b["type"]) == *k || !b[*block].is_null())
    .unwrap_or_default();
    if kind.is_empty() {
        return String::new();
    }
    format!("{kind} {}", s(&b[block][field]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retry_and_route_columns_read_like_their_yaml() {
        let spec = json!({"targetRef": {"kind": "Dataplane", "labels": {"app": "web"}},
            "to": [{"targetRef": {"kind": "MeshService", "name": "backend", "sectionName": "http"}},
                   {"targetRef": {"kind": "Mesh"}}]});
        let cols = policy_columns(Kind::MeshRetry, &spec, &json!({EFFECT_LABEL: SHADOW}));
        assert_eq!(
            cols,
            [
                ("TARGET", "Dataplane app=web".to_string()),
                ("TO", "MeshService/backend:http,Mesh".to_string()),
                ("EFFECT", "shadow".to_string()),
            ]
        );
        let route = json!({"to": [{"targetRef": {"kind": "MeshService", "name": "api"},
            "rules": [{"matches": []}, {"matches": []}]}]});
        let cols = policy_columns(Kind::MeshHTTPRoute, &route, &Value::Null);
        assert_eq!(cols[0], ("TARGET", "Mesh".to_string()));
        assert_eq!(cols[2], ("RULES", "2".to_string()));
        assert_eq!(cols[3], ("EFFECT", "applied".to_string()));
    }
}
