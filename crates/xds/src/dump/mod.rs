//! A proxy's configuration in the shape of Envoy's admin `/config_dump`,
//! for `meshlink inspect dataplane NAME --config-dump` and
//! `GET /api/v1/dataplanes/{name}/xds?configDump=true`.
//!
//! Owns the layout: `{"configs": [...]}` with one `envoy.admin.v3` dump
//! message per type, in Envoy's order (clusters, endpoints, listeners,
//! routes, secrets), each resource packed as an `Any` and printed in
//! protobuf's canonical JSON with proto field names, as Envoy prints it
//! ([`json`]). Sensitive fields (private keys) are redacted the way Envoy
//! redacts them ([`redact`]).
//!
//! It describes what this control plane holds for the proxy, not what the
//! proxy runs: `version_info` is the version sent, and `last_updated` and
//! `client_status` are left out because the control plane does not know
//! them per resource. It must never print a private key, and never panic
//! on a resource it cannot decode (that resource prints as
//! `{"@type": ..., "error": ...}`).

mod json;
mod redact;

use serde_json::{Map, Value, json};

pub use json::{DESCRIPTOR_SET, resource_json};

use crate::translate::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE, Snapshot, Versioned,
};

/// Type URL prefix of Envoy's admin dump messages.
const ADMIN: &str = "type.googleapis.com/envoy.admin.v3.";

/// Every resource of `snapshot` as Envoy's `/config_dump` would print it.
pub fn config_dump(snapshot: &Snapshot) -> Value {
    json!({
        "configs": [
            clusters(snapshot),
            endpoints(snapshot),
            listeners(snapshot),
            routes(snapshot),
            secrets(snapshot),
        ]
    })
}

/// `ClustersConfigDump{version_info, dynamic_active_clusters[]}`.
fn clusters(snapshot: &Snapshot) -> Value {
    let items = entries(snapshot, CLUSTER_TYPE, |_, r| {
        object([
            ("version_info", version(r)),
            ("cluster", resource_json(&r.resource)),
        ])
    });
    object([
        ("@type", json!(format!("{ADMIN}ClustersConfigDump"))),
        ("version_info", type_version(snapshot, CLUSTER_TYPE)),
        ("dynamic_active_clusters", items),
    ])
}

/// `EndpointsConfigDump{dynamic_endpoint_configs[]}`.
fn endpoints(snapshot: &Snapshot) -> Value {
    let items = entries(snapshot, ENDPOINT_TYPE, |_, r| {
        object([
            ("version_info", version(r)),
            ("endpoint_config", resource_json(&r.resource)),
        ])
    });
    object([
        ("@type", json!(format!("{ADMIN}EndpointsConfigDump"))),
        ("dynamic_endpoint_configs", items),
    ])
}

/// `ListenersConfigDump{version_info, dynamic_listeners[]{name,
/// active_state}}`.
fn listeners(snapshot: &Snapshot) -> Value {
    let items = entries(snapshot, LISTENER_TYPE, |name, r| {
        let state = object([
            ("version_info", version(r)),
            ("listener", resource_json(&r.resource)),
        ]);
        object([("name", json!(name)), ("active_state", state)])
    });
    object([
        ("@type", json!(format!("{ADMIN}ListenersConfigDump"))),
        ("version_info", type_version(snapshot, LISTENER_TYPE)),
        ("dynamic_listeners", items),
    ])
}

/// `RoutesConfigDump{dynamic_route_configs[]}`.
fn routes(snapshot: &Snapshot) -> Value {
    let items = entries(snapshot, ROUTE_TYPE, |_, r| {
        object([
            ("version_info", version(r)),
            ("route_config", resource_json(&r.resource)),
        ])
    });
    object([
        ("@type", json!(format!("{ADMIN}RoutesConfigDump"))),
        ("dynamic_route_configs", items),
    ])
}

/// `SecretsConfigDump{dynamic_active_secrets[]{name, version_info,
/// secret}}`.
fn secrets(snapshot: &Snapshot) -> Value {
    let items = entries(snapshot, SECRET_TYPE, |name, r| {
        object([
            ("name", json!(name)),
            ("version_info", version(r)),
            ("secret", resource_json(&r.resource)),
        ])
    });
    object([
        ("@type", json!(format!("{ADMIN}SecretsConfigDump"))),
        ("dynamic_active_secrets", items),
    ])
}

// === canonical JSON helpers ===

/// The resources of `type_url`, each through `entry`, as a JSON array.
fn entries(
    snapshot: &Snapshot,
    type_url: &str,
    entry: impl Fn(&str, &Versioned) -> Value,
) -> Value {
    let items: Vec<Value> = snapshot
        .resources(type_url)
        .iter()
        .map(|(name, r)| entry(name, r))
        .collect();
    Value::Array(items)
}

fn version(r: &Versioned) -> Value {
    json!(r.version)
}

/// The version a state-of-the-world response of `type_url` carries.
fn type_version(snapshot: &Snapshot, type_url: &str) -> Value {
    json!(snapshot.version_of(type_url))
}

/// An object of `fields`, leaving out default values (empty strings and
/// lists) as protobuf's JSON mapping does.
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let map: Map<String, Value> = fields
        .into_iter()
        .filter(|(_, v)| !is_default(v))
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    Value::Object(map)
}

fn is_default(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    }
}
