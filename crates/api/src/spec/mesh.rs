//! The Mesh kind: trust domain and mTLS certificate authorities.
//!
//! Owns the Mesh spec shape (Kuma-compatible) and its validation. Effective
//! values (trust domain, certificate lifetimes) are computed by accessors;
//! this module must never write a default into the stored spec.

use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;
use crate::validate::{self, Errors, parse_duration};

/// Workload certificate lifetime when `dpCert.rotation.expiration` is unset.
pub const DEFAULT_DP_CERT_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Shortest workload certificate lifetime accepted (so tests can rotate fast).
pub const MIN_DP_CERT_LIFETIME: Duration = Duration::from_secs(10);
/// Builtin CA root lifetime when `conf.caCert.expiration` is unset (10 years).
pub const DEFAULT_CA_CERT_LIFETIME: Duration = Duration::from_secs(10 * 31_557_600);

/// `spec` of a Mesh.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshSpec {
    /// SPIFFE trust domain; the effective default is the mesh name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_domain: Option<String>,
    /// Certificate authorities for workload identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<Mtls>,
    /// Kuma's `meshServices`: whether MeshServices or `kuma.io/service`
    /// tags define destinations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_services: Option<super::MeshServices>,
    /// Kuma's `networking`: what a transparent proxy does with traffic to
    /// destinations outside the mesh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<MeshNetworking>,
}

/// `spec.networking` of a Mesh.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshNetworking {
    /// `outbound`: traffic leaving the mesh's workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound: Option<MeshOutbound>,
}

/// `spec.networking.outbound` of a Mesh.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshOutbound {
    /// Whether a transparent proxy lets a captured connection to a
    /// destination outside the mesh through, to where it was going
    /// (Kuma's default: `true`). `false`: it is refused and counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<bool>,
}

impl MeshSpec {
    /// `networking.outbound.passthrough`, `true` when unset (Kuma's
    /// default).
    pub fn passthrough(&self) -> bool {
        self.networking
            .as_ref()
            .and_then(|n| n.outbound.as_ref())
            .and_then(|o| o.passthrough)
            .unwrap_or(true)
    }
}

/// `spec.mtls`: the CA backends and which one signs workload certificates.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mtls {
    /// Name of the backend in use; unset means mTLS is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_backend: Option<String>,
    /// Every configured CA backend.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<MtlsBackend>,
}

string_enum! {
    /// How a mesh CA is obtained.
    pub enum CaType ("CA type") {
        /// Generated once by the control plane and stored.
        Builtin = "builtin",
        /// PEM certificate and key supplied by the user.
        Provided = "provided",
    }
}

/// One CA backend in `spec.mtls.backends`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtlsBackend {
    /// Backend name, unique in the mesh.
    pub name: String,
    /// `builtin` or `provided`.
    #[serde(rename = "type")]
    pub type_: CaType,
    /// Workload certificate settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_cert: Option<DpCert>,
    /// Type-specific configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<CaConf>,
}

/// `dpCert`: workload certificate settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DpCert {
    /// Rotation settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
}

/// `dpCert.rotation`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rotation {
    /// Certificate lifetime as a duration (`24h`); at least 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<String>,
}

/// `conf` of a backend. `builtin` takes only `caCert`; `provided` requires
/// `cert` and `key` and may have `chain`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaConf {
    /// Builtin: the generated root's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<CaCertConf>,
    /// Provided: the CA certificate (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<DataSource>,
    /// Provided: the CA private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<DataSource>,
    /// Provided: intermediate chain up to the root (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<DataSource>,
}

/// `conf.caCert` of a builtin backend.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaCertConf {
    /// Root lifetime as a duration (`10y`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<String>,
}

/// Where PEM material comes from: exactly one of the four fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataSource {
    /// A file on the control plane's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The PEM text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_string: Option<String>,
    /// The PEM text, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,
    /// The name of a Secret (`type: system.kuma.io/secret`) in the Mesh's
    /// own mesh whose value is the PEM text, as in Kuma.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// The resolved form of a [`DataSource`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSourceContents {
    /// Read this file (the caller does the I/O).
    File(String),
    /// These bytes.
    Inline(Vec<u8>),
    /// The value of this Secret in the Mesh's mesh (the caller looks it up).
    Secret(String),
}

// === impl MeshSpec ===

impl MeshSpec {
    /// The effective `meshServices.mode` (default `Disabled`).
    pub fn mesh_services_mode(&self) -> super::MeshServicesMode {
        self.mesh_services
            .as_ref()
            .map_or(super::MeshServicesMode::Disabled, |m| m.effective_mode())
    }

    /// The effective trust domain: `trustDomain`, else the mesh name.
    pub fn trust_domain<'a>(&'a self, mesh_name: &'a str) -> &'a str {
        self.trust_domain.as_deref().unwrap_or(mesh_name)
    }

    /// The backend named by `mtls.enabledBackend`; `None` means mTLS is off.
    pub fn enabled_backend(&self) -> Option<&MtlsBackend> {
        let mtls = self.mtls.as_ref()?;
        let name = mtls.enabled_backend.as_deref()?;
        mtls.backends.iter().find(|b| b.name == name)
    }

    /// Workload certificate lifetime of the enabled backend (default 24h).
    pub fn dp_cert_lifetime(&self) -> Duration {
        self.enabled_backend()
            .map_or(DEFAULT_DP_CERT_LIFETIME, MtlsBackend::dp_cert_lifetime)
    }

    /// That lifetime as the user wrote it (`dpCert.rotation.expiration`,
    /// e.g. `24h`), or `24h` for the default: for messages, so that they
    /// read as the spec does.
    pub fn dp_cert_lifetime_as_written(&self) -> String {
        self.enabled_backend()
            .and_then(|b| b.dp_cert.as_ref())
            .and_then(|d| d.rotation.as_ref())
            .and_then(|r| r.expiration.clone())
            .unwrap_or_else(|| "24h".to_owned())
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(td) = &self.trust_domain {
            trust_domain(errs, "spec.trustDomain", td);
        }
        if let Some(m) = &self.mesh_services {
            m.validate(errs);
        }
        let Some(mtls) = &self.mtls else { return };
        let mut seen: Vec<&str> = Vec::new();
        for (i, b) in mtls.backends.iter().enumerate() {
            let at = format!("spec.mtls.backends[{i}]");
            if validate::required(errs, &format!("{at}.name"), &b.name)
                && let Some(j) = mtls.backends[..i].iter().position(|o| o.name == b.name)
            {
                errs.add(
                    format!("{at}.name"),
                    format!("duplicate backend name {:?} (also backends[{j}])", b.name),
                );
            }
            if !seen.contains(&b.name.as_str()) {
                seen.push(&b.name);
            }
            b.validate(errs, &at);
        }
        if let Some(enabled) = &mtls.enabled_backend
            && !mtls.backends.iter().any(|b| &b.name == enabled)
        {
            let defined = if seen.is_empty() {
                "no backends are defined".to_string()
            } else {
                format!("defined backends: {}", seen.join(", "))
            };
            errs.add(
                "spec.mtls.enabledBackend",
                format!("{enabled:?} names no backend in spec.mtls.backends; {defined}"),
            );
        }
    }
}

fn trust_domain(errs: &mut Errors, path: &str, td: &str) {
    let ok = !td.is_empty()
        && td.len() <= 255
        && td.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_')
        });
    if !ok {
        errs.add(
            path,
            format!(
                "invalid trust domain {td:?}: use lowercase letters, digits, '.', '-' and '_' \
                 (at most 255 characters)"
            ),
        );
    }
}

// === impl MtlsBackend ===

impl MtlsBackend {
    /// Workload certificate lifetime (`dpCert.rotation.expiration`, default 24h).
    pub fn dp_cert_lifetime(&self) -> Duration {
        self.dp_cert
            .as_ref()
            .and_then(|d| d.rotation.as_ref())
            .and_then(|r| r.expiration.as_deref())
            .and_then(parse_duration)
            .unwrap_or(DEFAULT_DP_CERT_LIFETIME)
    }

    /// Builtin root lifetime (`conf.caCert.expiration`, default 10y).
    pub fn ca_cert_lifetime(&self) -> Duration {
        self.conf
            .as_ref()
            .and_then(|c| c.ca_cert.as_ref())
            .and_then(|c| c.expiration.as_deref())
            .and_then(parse_duration)
            .unwrap_or(DEFAULT_CA_CERT_LIFETIME)
    }

    fn validate(&self, errs: &mut Errors, at: &str) {
        self.type_.validate(errs, &format!("{at}.type"));
        if let Some(exp) = self
            .dp_cert
            .as_ref()
            .and_then(|d| d.rotation.as_ref())
            .and_then(|r| r.expiration.as_deref())
        {
            let path = format!("{at}.dpCert.rotation.expiration");
            validate::duration(errs, &path, exp, Some(MIN_DP_CERT_LIFETIME));
        }
        let empty = CaConf::default();
        let conf = self.conf.as_ref().unwrap_or(&empty);
        match self.type_ {
            CaType::Builtin => {
                for (field, set) in [
                    ("cert", conf.cert.is_some()),
                    ("key", conf.key.is_some()),
                    ("chain", conf.chain.is_some()),
                ] {
                    if set {
                        errs.add(
                            format!("{at}.conf.{field}"),
                            "not allowed for a builtin CA (the control plane generates it); \
                             use type: provided to supply your own CA",
                        );
                    }
                }
                if let Some(exp) = conf.ca_cert.as_ref().and_then(|c| c.expiration.as_deref()) {
                    let path = format!("{at}.conf.caCert.expiration");
                    validate::duration(errs, &path, exp, Some(Duration::from_secs(3600)));
                }
            }
            CaType::Provided => {
                if conf.ca_cert.is_some() {
                    errs.add(
                        format!("{at}.conf.caCert"),
                        "not allowed for a provided CA; set conf.cert and conf.key",
                    );
                }
                for (field, src, needed) in [
                    ("cert", &conf.cert, true),
                    ("key", &conf.key, true),
                    ("chain", &conf.chain, false),
                ] {
                    let path = format!("{at}.conf.{field}");
                    match src {
                        Some(s) => s.validate(errs, &path),
                        None if needed => errs.add(
                            path,
                            "required for a provided CA: give file, inlineString, inline or secret",
                        ),
                        None => {}
                    }
                }
            }
            // Reported above; which conf fields apply depends on the type.
            CaType::Unknown(_) => {}
        }
    }
}

// === impl DataSource ===

impl DataSource {
    /// Which source is set; `None` when zero or several are (invalid).
    pub fn contents(&self) -> Option<DataSourceContents> {
        match (&self.file, &self.inline_string, &self.inline, &self.secret) {
            (Some(f), None, None, None) => Some(DataSourceContents::File(f.clone())),
            (None, Some(s), None, None) => Some(DataSourceContents::Inline(s.clone().into_bytes())),
            (None, None, Some(b), None) => base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
                .map(DataSourceContents::Inline),
            (None, None, None, Some(name)) => Some(DataSourceContents::Secret(name.clone())),
            _ => None,
        }
    }

    fn validate(&self, errs: &mut Errors, path: &str) {
        let set = [&self.file, &self.inline_string, &self.inline, &self.secret]
            .iter()
            .filter(|f| f.is_some())
            .count();
        if set != 1 {
            errs.add(
                path,
                format!(
                    "exactly one of file, inlineString, inline or secret is required ({set} given)"
                ),
            );
            return;
        }
        if let Some(name) = &self.secret {
            let at = format!("{path}.secret");
            if validate::required(errs, &at, name) {
                validate::dns_name(errs, &at, name);
            }
        }
        if let Some(b) = &self.inline
            && base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .is_err()
        {
            errs.add(
                format!("{path}.inline"),
                "not valid base64; use inlineString for plain PEM text",
            );
        }
        for (field, v) in [("file", &self.file), ("inlineString", &self.inline_string)] {
            if let Some(v) = v {
                validate::required(errs, &format!("{path}.{field}"), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(name: &str, expiration: Option<&str>) -> MtlsBackend {
        MtlsBackend {
            name: name.into(),
            type_: CaType::Builtin,
            dp_cert: expiration.map(|e| DpCert {
                rotation: Some(Rotation {
                    expiration: Some(e.into()),
                }),
            }),
            conf: None,
        }
    }

    #[test]
    fn effective_values_are_computed_not_stored() {
        let mut spec = MeshSpec::default();
        assert_eq!(spec.trust_domain("default"), "default");
        assert_eq!(spec.enabled_backend(), None);
        assert_eq!(spec.dp_cert_lifetime(), DEFAULT_DP_CERT_LIFETIME);
        spec.trust_domain = Some("example.org".into());
        spec.mtls = Some(Mtls {
            enabled_backend: Some("b".into()),
            backends: vec![backend("a", None), backend("b", Some("1h"))],
        });
        assert_eq!(spec.trust_domain("default"), "example.org");
        assert_eq!(spec.enabled_backend().map(|b| b.name.as_str()), Some("b"));
        assert_eq!(spec.dp_cert_lifetime(), Duration::from_secs(3600));
        assert_eq!(
            spec.mtls.as_ref().unwrap().backends[0].ca_cert_lifetime(),
            DEFAULT_CA_CERT_LIFETIME
        );
        assert_eq!(DEFAULT_CA_CERT_LIFETIME, parse_duration("10y").unwrap());
    }

    #[test]
    fn data_source_contents() {
        let file = DataSource {
            file: Some("/ca.pem".into()),
            ..Default::default()
        };
        assert_eq!(
            file.contents(),
            Some(DataSourceContents::File("/ca.pem".into()))
        );
        let inline = DataSource {
            inline: Some("aGk=".into()),
            ..Default::default()
        };
        assert_eq!(
            inline.contents(),
            Some(DataSourceContents::Inline(b"hi".to_vec()))
        );
        let text = DataSource {
            inline_string: Some("hi".into()),
            ..Default::default()
        };
        assert_eq!(
            text.contents(),
            Some(DataSourceContents::Inline(b"hi".to_vec()))
        );
        let both = DataSource {
            file: Some("f".into()),
            ..inline
        };
        assert_eq!(both.contents(), None);
    }
}
