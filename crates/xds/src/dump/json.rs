//! One encoded Envoy resource as protobuf's canonical JSON, the way
//! Envoy's admin endpoint prints it: proto field names (`connect_timeout`),
//! `Any` expanded with `@type`, durations as `"5s"`, enums by name, bytes
//! in base64, 64-bit integers as strings, default values left out.
//!
//! Owns the descriptor pool of the Envoy types the control plane sends,
//! read once from the committed descriptor set. It must never panic on
//! input: an unknown type URL, bytes that do not decode or a nested `Any`
//! of an unknown type print as `{"@type": ..., "error": ...}`.

use std::sync::LazyLock;

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use serde_json::{Value, json};

use super::redact::Redactor;

/// The protobuf descriptor set (`FileDescriptorSet`) of the Envoy types a
/// config dump prints, with everything they import. Generated from the
/// `.proto` files in the `envoy-types` crate by
/// `scripts/gen-envoy-descriptors`; the `envoy_descriptors` test fails
/// while it is stale.
pub const DESCRIPTOR_SET: &[u8] = include_bytes!("../../proto/envoy_descriptors.binpb");

/// The pool and its redaction rules, or why the descriptor set did not
/// load (a build defect the `envoy_descriptors` test catches).
static DESCRIPTORS: LazyLock<Result<Descriptors, String>> = LazyLock::new(Descriptors::load);

struct Descriptors {
    pool: DescriptorPool,
    redactor: Redactor,
}

impl Descriptors {
    fn load() -> Result<Self, String> {
        let pool = DescriptorPool::decode(DESCRIPTOR_SET)
            .map_err(|e| format!("the Envoy descriptor set does not load: {e}"))?;
        let redactor = Redactor::new(&pool);
        Ok(Self { pool, redactor })
    }
}

/// `resource` as Envoy prints an `Any` in a config dump: `{"@type": URL,
/// ...fields}`, with sensitive fields redacted. Never fails: what cannot
/// be printed becomes `{"@type": URL, "error": "why"}`.
pub fn resource_json(resource: &Any) -> Value {
    render(&resource.type_url, &resource.value).unwrap_or_else(|error| {
        json!({
            "@type": resource.type_url,
            "error": error,
        })
    })
}

fn render(type_url: &str, bytes: &[u8]) -> Result<Value, String> {
    let d = DESCRIPTORS.as_ref().map_err(Clone::clone)?;
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let desc = d.pool.get_message_by_name(name).ok_or_else(|| {
        format!("unknown type {type_url:?}: not among the Envoy types this control plane can print")
    })?;
    let mut msg = DynamicMessage::decode(desc, bytes)
        .map_err(|e| format!("{} bytes do not decode as {name}: {e}", bytes.len()))?;
    d.redactor.redact(&mut msg);
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true);
    let fields = msg
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| format!("{name} does not print as JSON: {e}"))?;
    let Value::Object(fields) = fields else {
        // A message always prints as an object; well-known types with
        // another JSON form (Duration, Struct...) are never resources.
        return Err(format!("{name} printed as {fields} rather than an object"));
    };
    let mut out = serde_json::Map::with_capacity(fields.len() + 1);
    out.insert("@type".to_owned(), Value::String(type_url.to_owned()));
    out.extend(fields);
    Ok(Value::Object(out))
}

/// Re-encodes `msg` (used by the redactor to repack an `Any`).
pub(super) fn encode(msg: &DynamicMessage) -> Vec<u8> {
    msg.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_descriptor_set_loads() {
        let d = DESCRIPTORS.as_ref().expect("descriptor set loads");
        for name in [
            "envoy.admin.v3.ConfigDump",
            "envoy.config.cluster.v3.Cluster",
            "envoy.extensions.transport_sockets.tls.v3.Secret",
            "envoy.extensions.filters.network.rbac.v3.RBAC",
        ] {
            assert!(d.pool.get_message_by_name(name).is_some(), "{name}");
        }
    }

    #[test]
    fn unknown_type_prints_its_url_and_why() {
        let v = resource_json(&Any {
            type_url: "type.googleapis.com/example.Nope".into(),
            value: vec![1, 2, 3],
        });
        assert_eq!(v["@type"], "type.googleapis.com/example.Nope");
        let error = v["error"].as_str().expect("error");
        assert!(error.contains("unknown type"), "{error}");
    }

    #[test]
    fn undecodable_bytes_print_their_type_and_the_decode_error() {
        let url = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
        let v = resource_json(&Any {
            type_url: url.into(),
            // Field 1 (name), length-delimited, claims 100 bytes, has 1.
            value: vec![0x0a, 100, b'x'],
        });
        assert_eq!(v["@type"], url);
        let error = v["error"].as_str().expect("error");
        assert!(
            error.contains("do not decode as envoy.config.cluster.v3.Cluster"),
            "{error}"
        );
    }

    #[test]
    fn nested_any_of_an_unknown_type_is_an_error_not_a_panic() {
        use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
        let listener = Listener {
            name: "l".into(),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: "x".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(Any {
                        type_url: "type.googleapis.com/example.Unknown".into(),
                        value: vec![],
                    })),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let url = "type.googleapis.com/envoy.config.listener.v3.Listener";
        let v = resource_json(&Any {
            type_url: url.into(),
            value: listener.encode_to_vec(),
        });
        assert_eq!(v["@type"], url);
        let error = v["error"].as_str().expect("error");
        assert!(error.contains("example.Unknown"), "{error}");
    }
}
