//! Redaction of sensitive fields, as Envoy's `MessageUtil::redact` does
//! before its admin endpoint prints a config dump.
//!
//! A field is sensitive when its descriptor carries the option
//! `(udpa.annotations.sensitive) = true` (for example
//! `TlsCertificate.private_key`), and so is everything below it. Sensitive
//! strings and bytes become `"[redacted]"`, other sensitive scalars are
//! cleared, and messages are walked, including those packed in an `Any`
//! whose type the pool knows. A private key sent inline therefore prints
//! as `"private_key": {"inline_string": "[redacted]"}`.
//!
//! It must never leave a sensitive value in place for a type it knows; an
//! `Any` of a type it does not know cannot be printed at all (the JSON
//! printer refuses it), so nothing leaks through it either.

use std::collections::HashSet;

use prost::bytes::Bytes;
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, Kind, ReflectMessage, Value};

/// What replaces a sensitive string or bytes value.
pub(super) const REDACTED: &str = "[redacted]";

/// The extension that marks a field sensitive.
const SENSITIVE: &str = "udpa.annotations.sensitive";

/// The sensitive fields of one descriptor pool.
pub(super) struct Redactor {
    pool: DescriptorPool,
    /// Full names of the fields marked sensitive.
    sensitive: HashSet<String>,
}

impl Redactor {
    /// Finds every field of `pool` marked sensitive.
    pub(super) fn new(pool: &DescriptorPool) -> Self {
        let mut sensitive = HashSet::new();
        if let Some(ext) = pool.get_extension_by_name(SENSITIVE) {
            for message in pool.all_messages() {
                for field in message.fields() {
                    let options = field.options();
                    if options.has_extension(&ext)
                        && *options.get_extension(&ext) == Value::Bool(true)
                    {
                        sensitive.insert(field.full_name().to_owned());
                    }
                }
            }
        }
        Self {
            pool: pool.clone(),
            sensitive,
        }
    }

    /// Redacts every sensitive field of `msg`, recursively.
    pub(super) fn redact(&self, msg: &mut DynamicMessage) {
        self.message(msg, false);
    }

    fn message(&self, msg: &mut DynamicMessage, ancestor_sensitive: bool) {
        if msg.descriptor().full_name() == "google.protobuf.Any" {
            self.any(msg, ancestor_sensitive);
            return;
        }
        let fields: Vec<FieldDescriptor> = msg.descriptor().fields().collect();
        for field in fields {
            if !msg.has_field(&field) {
                continue;
            }
            let sensitive = ancestor_sensitive || self.sensitive.contains(field.full_name());
            match field.kind() {
                Kind::Message(_) => self.value(msg.get_field_mut(&field), sensitive),
                Kind::String | Kind::Bytes if sensitive => {
                    redact_text(msg.get_field_mut(&field));
                }
                _ if sensitive => msg.clear_field(&field),
                _ => {}
            }
        }
    }

    /// A message-typed field's value: one message, a list, or a map
    /// (whose values are redacted, never its keys).
    fn value(&self, value: &mut Value, sensitive: bool) {
        match value {
            Value::Message(m) => self.message(m, sensitive),
            Value::List(items) => items.iter_mut().for_each(|v| self.value(v, sensitive)),
            Value::Map(entries) => {
                for v in entries.values_mut() {
                    match v {
                        Value::Message(m) => self.message(m, sensitive),
                        Value::String(_) | Value::Bytes(_) if sensitive => redact_text(v),
                        other if sensitive => *other = zero_like(other),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// Unpacks an `Any` of a known type, redacts it and packs it again.
    fn any(&self, any: &mut DynamicMessage, ancestor_sensitive: bool) {
        let (Some(url), Some(bytes)) = (
            any.get_field_by_name("type_url")
                .and_then(|v| v.as_str().map(str::to_owned)),
            any.get_field_by_name("value")
                .and_then(|v| v.as_bytes().cloned()),
        ) else {
            return;
        };
        let name = url.rsplit('/').next().unwrap_or(&url);
        let Some(desc) = self.pool.get_message_by_name(name) else {
            return;
        };
        let Ok(mut inner) = DynamicMessage::decode(desc, bytes) else {
            return;
        };
        self.message(&mut inner, ancestor_sensitive);
        any.set_field_by_name("value", Value::Bytes(super::json::encode(&inner).into()));
    }
}

/// Replaces a string or bytes value (or each of a list of them).
fn redact_text(value: &mut Value) {
    match value {
        Value::String(s) => REDACTED.clone_into(s),
        Value::Bytes(b) => *b = Bytes::from_static(REDACTED.as_bytes()),
        Value::List(items) => items.iter_mut().for_each(redact_text),
        _ => {}
    }
}

/// The zero value of a scalar's type (what clearing a map value leaves).
fn zero_like(value: &Value) -> Value {
    match value {
        Value::Bool(_) => Value::Bool(false),
        Value::I32(_) => Value::I32(0),
        Value::I64(_) => Value::I64(0),
        Value::U32(_) => Value::U32(0),
        Value::U64(_) => Value::U64(0),
        Value::F32(_) => Value::F32(0.0),
        Value::F64(_) => Value::F64(0.0),
        Value::EnumNumber(_) => Value::EnumNumber(0),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        Secret, TlsCertificate, secret,
    };
    use prost::Message;

    use super::super::json::resource_json;
    use envoy_types::pb::google::protobuf::Any;

    fn inline(s: &str) -> Option<DataSource> {
        Some(DataSource {
            specifier: Some(Specifier::InlineString(s.into())),
            ..Default::default()
        })
    }

    fn secret_json(private_key: Option<DataSource>) -> serde_json::Value {
        let s = Secret {
            name: "identity_cert:web".into(),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: inline("<chain>"),
                private_key,
                ..Default::default()
            })),
        };
        resource_json(&Any {
            type_url: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret".into(),
            value: s.encode_to_vec(),
        })
    }

    #[test]
    fn inline_private_key_is_redacted_and_the_chain_is_not() {
        let v = secret_json(inline("-----BEGIN PRIVATE KEY-----"));
        let cert = &v["tls_certificate"];
        assert_eq!(cert["private_key"]["inline_string"], "[redacted]", "{v}");
        assert_eq!(cert["certificate_chain"]["inline_string"], "<chain>", "{v}");
        assert!(!v.to_string().contains("PRIVATE KEY"), "{v}");
    }

    #[test]
    fn private_key_bytes_become_redacted_bytes_as_in_envoy() {
        let key = Some(DataSource {
            specifier: Some(Specifier::InlineBytes(b"secret key".to_vec())),
            ..Default::default()
        });
        let v = secret_json(key);
        // base64("[redacted]")
        assert_eq!(
            v["tls_certificate"]["private_key"]["inline_bytes"], "W3JlZGFjdGVkXQ==",
            "{v}"
        );
    }
}
