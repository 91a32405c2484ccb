//! TLS contexts and SDS secrets for mesh mTLS.
//!
//! Owns the two ways TLS material reaches a client: SDS secret references
//! (sidecars; contents sent first by the control plane, I2) and
//! certificate-provider plugin instances (proxyless gRPC). It must never
//! invent secret contents: only what [`SecretsInput`] holds is emitted.

use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, DataSource, TransportSocket,
    config_source::ConfigSourceSpecifier, data_source::Specifier, transport_socket::ConfigType,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
    DownstreamTlsContext, SdsSecretConfig, Secret, SubjectAltNameMatcher, TlsCertificate,
    UpstreamTlsContext, common_tls_context::CombinedCertificateValidationContext,
    common_tls_context::ValidationContextType, secret, subject_alt_name_matcher::SanType,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::BoolValue;
use envoy_types::util::pack_any;
use meshlink_api::spec::DataplaneSpec;

use super::{MeshView, SecretsInput, Snapshot, names};

/// Envoy's name of the TLS transport socket.
const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// The ADS config source (`ads: {}`, API v3).
pub(super) fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// An exact string matcher.
pub(super) fn exact(value: String) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::Exact(value)),
        ignore_case: false,
    }
}

/// The name of the identity secret of Dataplane `name` (its first
/// service, else its name: [`DataplaneSpec::identity_service`]), if any.
pub(super) fn identity_secret_name(dp: &DataplaneSpec, name: &str) -> Option<String> {
    dp.identity_service(name).map(names::identity_secret)
}

fn sds(name: String) -> SdsSecretConfig {
    SdsSecretConfig {
        name,
        sds_config: Some(ads()),
    }
}

fn transport_socket<M: prost::Message + prost::Name>(ctx: M) -> TransportSocket {
    TransportSocket {
        name: TLS_TRANSPORT_SOCKET.to_owned(),
        config_type: Some(ConfigType::TypedConfig(pack_any(ctx))),
    }
}

/// Server side of a sidecar inbound: requires a client certificate
/// signed by the mesh CA; who may connect is RBAC's job.
pub(super) fn downstream_sds(identity: String, mesh: &str) -> TransportSocket {
    downstream_sds_alpn(identity, mesh, &[])
}

/// [`downstream_sds`] offering the ALPN protocols `alpn` (an HTTP inbound:
/// `h2` from other sidecars, `http/1.1` otherwise).
pub(super) fn downstream_sds_alpn(identity: String, mesh: &str, alpn: &[&str]) -> TransportSocket {
    transport_socket(DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![sds(identity)],
            validation_context_type: Some(ValidationContextType::ValidationContextSdsSecretConfig(
                sds(names::mesh_ca_secret(mesh)),
            )),
            alpn_protocols: alpn.iter().map(|p| (*p).to_owned()).collect(),
            ..Default::default()
        }),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    })
}

fn san_validation(destination_spiffe_ids: Vec<String>) -> CertificateValidationContext {
    CertificateValidationContext {
        match_typed_subject_alt_names: destination_spiffe_ids
            .into_iter()
            .map(|id| SubjectAltNameMatcher {
                san_type: SanType::Uri as i32,
                matcher: Some(exact(id)),
                oid: String::new(),
            })
            .collect(),
        ..Default::default()
    }
}

/// Client side of a sidecar outbound: presents the identity certificate
/// and verifies the destination's SPIFFE ID against the mesh CA.
pub(super) fn upstream_sds(
    identity: String,
    mesh: &str,
    destination_spiffe_id: String,
) -> TransportSocket {
    upstream_sds_any(identity, mesh, vec![destination_spiffe_id])
}

/// [`upstream_sds`] accepting any of `destination_spiffe_ids` (a
/// MeshService's identities; must not be empty, or any mesh certificate
/// would pass).
pub(super) fn upstream_sds_any(
    identity: String,
    mesh: &str,
    destination_spiffe_ids: Vec<String>,
) -> TransportSocket {
    upstream_sds_any_alpn(identity, mesh, destination_spiffe_ids, &[])
}

/// [`upstream_sds_any`] asking for the ALPN protocols `alpn` (`h2` to an
/// HTTP destination: between sidecars HTTP travels as HTTP/2).
pub(super) fn upstream_sds_any_alpn(
    identity: String,
    mesh: &str,
    destination_spiffe_ids: Vec<String>,
    alpn: &[&str],
) -> TransportSocket {
    let mut ctx = upstream_context(identity, mesh, destination_spiffe_ids);
    if let Some(common) = ctx.common_tls_context.as_mut() {
        common.alpn_protocols = alpn.iter().map(|p| (*p).to_owned()).collect();
    }
    transport_socket(ctx)
}

fn upstream_context(
    identity: String,
    mesh: &str,
    destination_spiffe_ids: Vec<String>,
) -> UpstreamTlsContext {
    UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![sds(identity)],
            validation_context_type: Some(ValidationContextType::CombinedValidationContext(
                CombinedCertificateValidationContext {
                    default_validation_context: Some(san_validation(destination_spiffe_ids)),
                    validation_context_sds_secret_config: Some(sds(names::mesh_ca_secret(mesh))),
                    ..Default::default()
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// [`upstream_sds`] sending `sni` as the TLS server name (a site router's
/// mesh ingress picks the routing key by it).
pub(super) fn upstream_sds_sni(
    identity: String,
    mesh: &str,
    destination_spiffe_id: String,
    sni: String,
) -> TransportSocket {
    let mut ctx = upstream_context(identity, mesh, vec![destination_spiffe_id]);
    ctx.sni = sni;
    transport_socket(ctx)
}

fn provider(certificate_name: &str) -> CertificateProviderPluginInstance {
    CertificateProviderPluginInstance {
        instance_name: names::GRPC_CERT_PROVIDER_INSTANCE.to_owned(),
        certificate_name: certificate_name.to_owned(),
    }
}

/// Client side for proxyless gRPC: certificate-provider instances instead
/// of SDS, same SPIFFE ID check.
pub(super) fn upstream_cert_provider(destination_spiffe_id: String) -> TransportSocket {
    upstream_cert_provider_any(vec![destination_spiffe_id])
}

/// [`upstream_cert_provider`] accepting any of `destination_spiffe_ids`
/// (must not be empty).
pub(super) fn upstream_cert_provider_any(destination_spiffe_ids: Vec<String>) -> TransportSocket {
    let mut validation = san_validation(destination_spiffe_ids);
    validation.ca_certificate_provider_instance = Some(provider(names::GRPC_ROOT_CERT_NAME));
    transport_socket(UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_provider_instance: Some(provider(names::GRPC_IDENTITY_CERT_NAME)),
            validation_context_type: Some(ValidationContextType::ValidationContext(validation)),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn inline(pem: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(Specifier::InlineString(pem.to_owned())),
        ..Default::default()
    })
}

/// The SDS secret `name` holding an identity chain and its key.
pub(super) fn identity_secret(name: String, chain: &str, key: &str) -> Secret {
    Secret {
        name,
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(chain),
            private_key: inline(key),
            ..Default::default()
        })),
    }
}

/// The SDS secret of `mesh`'s trust bundle.
pub(super) fn trust_bundle_secret(mesh: &str, bundle: &str) -> Secret {
    Secret {
        name: names::mesh_ca_secret(mesh),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: inline(bundle),
                ..Default::default()
            },
        )),
    }
}

/// Emits the SDS secrets whose contents are given.
pub(super) fn secrets(
    snap: &mut Snapshot,
    view: &MeshView,
    dp: &DataplaneSpec,
    dp_name: &str,
    input: &SecretsInput,
) {
    if let (Some((chain, key)), Some(name)) = (&input.identity, identity_secret_name(dp, dp_name)) {
        snap.insert(name.clone(), &identity_secret(name, chain, key));
    }
    if let Some(bundle) = &input.trust_bundle_pem {
        let name = names::mesh_ca_secret(view.mesh_name());
        snap.insert(name, &trust_bundle_secret(view.mesh_name(), bundle));
    }
    if input.identity_policy
        && let Some(lifetime) = view.certificate_lifetime()
    {
        let secret = meshlink_proto::identity_policy::to_secret(view.mesh_name(), lifetime);
        snap.insert(secret.name.clone(), &secret);
    }
}
