//! The `meshlink.dev/client` node metadata: which kind of xDS client a
//! proxy is. The control plane reads it to choose how TLS material is
//! delivered; meshlink-proxy sends it. Both read the spelling from here.

use envoy_types::pb::google::protobuf::{Struct, value::Kind as ValueKind};

/// Node metadata key that selects the [`ClientKind`].
pub const CLIENT_METADATA_KEY: &str = "meshlink.dev/client";

/// Which kind of xDS client a proxy is; selects how TLS material is
/// delivered and which resource shapes it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    /// `meshlink-proxy`: CSR for its own key, SDS for the trust bundle.
    MeshlinkProxy,
    /// `envoy` (the default): SDS secrets including the key.
    #[default]
    Envoy,
    /// `grpc`: proxyless gRPC, certificate-provider instances.
    Grpc,
}

/// A `meshlink.dev/client` node metadata value that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node.metadata[\"meshlink.dev/client\"] is {given:?}; expected \"meshlink-proxy\", \
     \"envoy\" or \"grpc\" (or leave it unset for envoy)"
)]
pub struct UnknownClientKind {
    /// The value as given.
    pub given: String,
}

// === impl ClientKind ===

impl ClientKind {
    /// Parses the metadata value; `None` (absent) means [`ClientKind::Envoy`].
    pub fn from_metadata_value(value: Option<&str>) -> Result<Self, UnknownClientKind> {
        match value {
            None | Some("envoy") => Ok(Self::Envoy),
            Some("meshlink-proxy") => Ok(Self::MeshlinkProxy),
            Some("grpc") => Ok(Self::Grpc),
            Some(other) => Err(UnknownClientKind {
                given: other.to_owned(),
            }),
        }
    }

    /// Reads [`CLIENT_METADATA_KEY`] from an xDS `node.metadata`. A
    /// non-string value is reported as unknown.
    pub fn from_node_metadata(metadata: Option<&Struct>) -> Result<Self, UnknownClientKind> {
        let value = metadata.and_then(|m| m.fields.get(CLIENT_METADATA_KEY));
        match value.and_then(|v| v.kind.as_ref()) {
            None => Self::from_metadata_value(None),
            Some(ValueKind::StringValue(s)) => Self::from_metadata_value(Some(s)),
            Some(other) => Err(UnknownClientKind {
                given: format!("{other:?}"),
            }),
        }
    }

    /// The metadata value naming this kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MeshlinkProxy => "meshlink-proxy",
            Self::Envoy => "envoy",
            Self::Grpc => "grpc",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use envoy_types::pb::google::protobuf::Value;

    use super::*;

    #[test]
    fn client_kind_defaults_to_envoy_and_rejects_unknown_values() {
        assert_eq!(ClientKind::from_node_metadata(None), Ok(ClientKind::Envoy));
        let md = |v: &str| Struct {
            fields: HashMap::from([(
                CLIENT_METADATA_KEY.to_owned(),
                Value {
                    kind: Some(ValueKind::StringValue(v.to_owned())),
                },
            )]),
        };
        for kind in [
            ClientKind::Grpc,
            ClientKind::MeshlinkProxy,
            ClientKind::Envoy,
        ] {
            assert_eq!(
                ClientKind::from_node_metadata(Some(&md(kind.as_str()))),
                Ok(kind)
            );
        }
        let err = ClientKind::from_node_metadata(Some(&md("istio"))).unwrap_err();
        assert!(err.to_string().contains("\"istio\""), "{err}");
    }
}
