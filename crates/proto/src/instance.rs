//! Which process a proxy is: the `meshlink.dev/instance` node metadata
//! (and Certify's `instance` field). meshlink-proxy sends a random id per
//! process; the control plane uses it only to tell apart two processes
//! that hold one Dataplane's identity at once (the Dataplane's
//! `DuplicateHolder` condition), never to authorise anything: the token
//! does that.

use envoy_types::pb::google::protobuf::{Struct, value::Kind as ValueKind};

/// Node metadata key naming the proxy process.
pub const INSTANCE_METADATA_KEY: &str = "meshlink.dev/instance";

/// Longest instance id the control plane keeps; longer ones are cut.
pub const MAX_INSTANCE_LEN: usize = 64;

/// `value` as an instance id: trimmed, printable ASCII only, at most
/// [`MAX_INSTANCE_LEN`] characters; `None` when nothing is left.
pub fn sanitize(value: &str) -> Option<String> {
    let id: String = value
        .trim()
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(MAX_INSTANCE_LEN)
        .collect();
    (!id.is_empty()).then_some(id)
}

/// The instance id in an xDS `node.metadata`, if it names one.
pub fn instance_of(metadata: Option<&Struct>) -> Option<String> {
    match metadata?.fields.get(INSTANCE_METADATA_KEY)?.kind.as_ref()? {
        ValueKind::StringValue(s) => sanitize(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Value;

    use super::*;

    fn metadata(v: ValueKind) -> Struct {
        Struct {
            fields: [(INSTANCE_METADATA_KEY.to_owned(), Value { kind: Some(v) })]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn instance_ids_are_read_bounded_and_printable() {
        assert_eq!(instance_of(None), None);
        let m = metadata(ValueKind::StringValue(" 4242-9f3a ".into()));
        assert_eq!(instance_of(Some(&m)).as_deref(), Some("4242-9f3a"));
        let m = metadata(ValueKind::NumberValue(1.0));
        assert_eq!(instance_of(Some(&m)), None);
        assert_eq!(sanitize("\n\t"), None);
        assert_eq!(
            sanitize(&"x".repeat(500)).map(|s| s.len()),
            Some(MAX_INSTANCE_LEN)
        );
        assert_eq!(sanitize("a\u{7}b c").as_deref(), Some("abc"));
    }
}
