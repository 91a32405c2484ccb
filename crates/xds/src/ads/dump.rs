//! A readable dump of a proxy's current configuration, for
//! `meshlink inspect dataplane NAME --config-dump`.
//!
//! Secret private keys are redacted: a dump shows that a key was sent,
//! never the key.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use serde_json::{Value, json};

use super::types::short_type;
use crate::translate::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE, Snapshot, TYPE_ORDER,
};

/// Every resource of `snapshot` by short type name: name, version and the
/// decoded resource in protobuf text-like (Rust debug) form.
pub fn config_dump(snapshot: &Snapshot) -> Value {
    let mut out = serde_json::Map::new();
    for t in TYPE_ORDER {
        let items: Vec<Value> = snapshot
            .resources(t)
            .iter()
            .map(|(name, r)| {
                json!({
                    "name": name,
                    "version": r.version,
                    "resource": render(&r.resource),
                })
            })
            .collect();
        out.insert(short_type(t).to_owned(), Value::Array(items));
    }
    Value::Object(out)
}

fn render(any: &Any) -> String {
    let bytes = any.value.as_slice();
    let text = match any.type_url.as_str() {
        LISTENER_TYPE => Listener::decode(bytes).map(|m| format!("{m:#?}")),
        ROUTE_TYPE => RouteConfiguration::decode(bytes).map(|m| format!("{m:#?}")),
        CLUSTER_TYPE => Cluster::decode(bytes).map(|m| format!("{m:#?}")),
        ENDPOINT_TYPE => ClusterLoadAssignment::decode(bytes).map(|m| format!("{m:#?}")),
        SECRET_TYPE => Secret::decode(bytes).map(|mut m| {
            if let Some(secret::Type::TlsCertificate(c)) = &mut m.r#type
                && c.private_key.is_some()
            {
                c.private_key = None;
                return format!("{m:#?} (private_key: redacted)");
            }
            format!("{m:#?}")
        }),
        other => return format!("<{} bytes of {other}>", bytes.len()),
    };
    text.unwrap_or_else(|e| format!("<undecodable: {e}>"))
}
