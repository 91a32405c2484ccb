//! The mesh's identity policy as the control plane sends it to
//! meshlink-proxy sidecars: the workload-certificate lifetime the mesh
//! issues now, so a sidecar whose certificate outlives a lowered lifetime
//! renews early instead of at its next half-life.
//!
//! Owns the wire shape both ends agree on: an SDS Secret named
//! `identity_policy:<mesh>` whose `generic_secret` holds an encoded
//! [`IdentityPolicy`](crate::certify::IdentityPolicy), sent only to clients
//! whose xDS node lists [`IDENTITY_POLICY_FEATURE`] in `client_features`
//! (Envoy's field for "what this client understands"). Envoy asks for
//! Secrets by name and never for this one, and an older meshlink-proxy does
//! not list the feature, so neither receives anything it would reject.
//! It must never decide when to renew: the identity crate's renewal rules
//! do.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{DataSource, Node, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    GenericSecret, Secret, secret,
};
use prost::Message;

use crate::certify::IdentityPolicy;

/// The `node.client_features` entry of a client that takes the identity
/// policy Secret.
pub const IDENTITY_POLICY_FEATURE: &str = "meshlink.dev/identity-policy";

/// The prefix of the identity policy Secret's name; the mesh follows it.
pub const SECRET_PREFIX: &str = "identity_policy:";

/// The name of `mesh`'s identity policy Secret.
pub fn secret_name(mesh: &str) -> String {
    format!("{SECRET_PREFIX}{mesh}")
}

/// Whether `node` lists [`IDENTITY_POLICY_FEATURE`].
pub fn wanted_by(node: &Node) -> bool {
    node.client_features
        .iter()
        .any(|f| f == IDENTITY_POLICY_FEATURE)
}

/// The identity policy Secret of `mesh`, whose workload certificates live
/// `lifetime`.
pub fn to_secret(mesh: &str, lifetime: Duration) -> Secret {
    let policy = IdentityPolicy {
        mesh: mesh.to_owned(),
        certificate_lifetime_ms: u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX),
    };
    Secret {
        name: secret_name(mesh),
        r#type: Some(secret::Type::GenericSecret(GenericSecret {
            secret: Some(DataSource {
                specifier: Some(Specifier::InlineBytes(policy.encode_to_vec())),
                ..Default::default()
            }),
            ..Default::default()
        })),
    }
}

/// A decoded identity policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mesh it applies to.
    pub mesh: String,
    /// The lifetime of the workload certificates the mesh issues now.
    pub certificate_lifetime: Duration,
}

/// Why an identity policy Secret is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The Secret is not a `generic_secret` with inline bytes.
    #[error("generic_secret.secret: expected inline_bytes holding a meshlink.v1.IdentityPolicy")]
    Shape,
    /// The bytes are not an `IdentityPolicy`.
    #[error("generic_secret.secret.inline_bytes: not a meshlink.v1.IdentityPolicy: {0}")]
    Decode(String),
    /// The lifetime is zero.
    #[error("generic_secret.secret.inline_bytes: certificate_lifetime_ms is 0")]
    ZeroLifetime,
}

/// Reads the identity policy from `secret`: `None` when the Secret is not
/// named as one (its name does not start with [`SECRET_PREFIX`]).
pub fn from_secret(secret: &Secret) -> Option<Result<Policy, PolicyError>> {
    if !secret.name.starts_with(SECRET_PREFIX) {
        return None;
    }
    let bytes = match &secret.r#type {
        Some(secret::Type::GenericSecret(GenericSecret {
            secret:
                Some(DataSource {
                    specifier: Some(Specifier::InlineBytes(b)),
                    ..
                }),
            ..
        })) => b,
        _ => return Some(Err(PolicyError::Shape)),
    };
    Some(
        IdentityPolicy::decode(bytes.as_slice())
            .map_err(|e| PolicyError::Decode(e.to_string()))
            .and_then(|p| match p.certificate_lifetime_ms {
                0 => Err(PolicyError::ZeroLifetime),
                ms => Ok(Policy {
                    mesh: p.mesh,
                    certificate_lifetime: Duration::from_millis(ms),
                }),
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_round_trips_and_other_secrets_are_not_policies() {
        let s = to_secret("default", Duration::from_secs(30));
        assert_eq!(s.name, "identity_policy:default");
        assert_eq!(
            from_secret(&s),
            Some(Ok(Policy {
                mesh: "default".into(),
                certificate_lifetime: Duration::from_secs(30),
            }))
        );
        let other = Secret {
            name: "mesh_ca:default".into(),
            r#type: None,
        };
        assert_eq!(from_secret(&other), None);
        let empty = Secret {
            name: secret_name("default"),
            r#type: None,
        };
        assert_eq!(from_secret(&empty), Some(Err(PolicyError::Shape)));
        let zero = to_secret("default", Duration::ZERO);
        assert_eq!(from_secret(&zero), Some(Err(PolicyError::ZeroLifetime)));
    }

    #[test]
    fn only_a_node_listing_the_feature_wants_it() {
        let mut node = Node::default();
        assert!(!wanted_by(&node));
        node.client_features = vec!["envoy.lb.does_not_support_overprovisioning".into()];
        assert!(!wanted_by(&node));
        node.client_features.push(IDENTITY_POLICY_FEATURE.into());
        assert!(wanted_by(&node));
    }
}
