//! The Secret kind, in three types:
//! - `kubernetes.io/tls`: TLS credentials that Skupper resources name in
//!   `tlsCredentials` (RouterAccess server certificates, Link client
//!   certificates). Global (no mesh).
//! - `system.kuma.io/secret`: Kuma's mesh-scoped `Secret`, one base64 value
//!   in `data.value`, e.g. a provided CA's certificate or key
//!   (`conf.cert.secret`). `metadata.mesh` is required.
//! - `system.kuma.io/global-secret`: Kuma's `GlobalSecret`, one value, no mesh.
//!
//! Owns the Secret spec, its syntax checks (type, mesh by type, base64, PEM
//! blocks) and the redaction of the private field (`tls.key`, or `value`).
//! It never logs or prints a secret value, and it does not check that a TLS
//! key matches its certificate: that needs a crypto library, so the control
//! plane does it (`meshlink-identity`). A private field equal to
//! [`REDACTED`] is accepted here; the control plane replaces it with the
//! stored value (re-applying `get -o yaml` output) or refuses it.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::REDACTED;
use crate::Metadata;
use crate::validate::Errors;

/// The Secret type of TLS credentials (global).
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// The Secret type of Kuma's mesh-scoped `Secret` (one `value`).
pub const KUMA_SECRET_TYPE: &str = "system.kuma.io/secret";
/// The Secret type of Kuma's `GlobalSecret` (one `value`, no mesh).
pub const KUMA_GLOBAL_SECRET_TYPE: &str = "system.kuma.io/global-secret";
/// The data key of a Kuma secret's value. Redacted on every API read.
pub const VALUE: &str = "value";
/// The data key of the PEM certificate (chain).
pub const TLS_CRT: &str = "tls.crt";
/// The data key of the PEM private key. Redacted on every API read.
pub const TLS_KEY: &str = "tls.key";
/// The data key of the PEM CA that verifies the peer.
pub const CA_CRT: &str = "ca.crt";

/// `spec` of a Secret: `type` and base64 `data`, as in Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSpec {
    /// `kubernetes.io/tls`, `system.kuma.io/secret` or
    /// `system.kuma.io/global-secret`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Base64 values by key: `tls.crt`, `tls.key` and optionally `ca.crt`
    /// for TLS; only `value` for the Kuma types.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

// === impl SecretSpec ===

impl SecretSpec {
    /// A `kubernetes.io/tls` Secret from PEM text (encoded to base64 here).
    pub fn tls(cert_pem: &str, key_pem: &str, ca_pem: Option<&str>) -> SecretSpec {
        let mut data = BTreeMap::new();
        data.insert(TLS_CRT.to_string(), STANDARD.encode(cert_pem));
        data.insert(TLS_KEY.to_string(), STANDARD.encode(key_pem));
        if let Some(ca) = ca_pem {
            data.insert(CA_CRT.to_string(), STANDARD.encode(ca));
        }
        SecretSpec {
            type_: Some(TLS_SECRET_TYPE.to_string()),
            data,
        }
    }

    /// A Kuma secret (`system.kuma.io/secret` with a mesh, or
    /// `system.kuma.io/global-secret` without) holding `value` (base64).
    pub fn kuma(global: bool, value_base64: &str) -> SecretSpec {
        let type_ = if global {
            KUMA_GLOBAL_SECRET_TYPE
        } else {
            KUMA_SECRET_TYPE
        };
        SecretSpec {
            type_: Some(type_.to_string()),
            data: BTreeMap::from([(VALUE.to_string(), value_base64.to_string())]),
        }
    }

    /// Whether this is one of Kuma's one-value types.
    pub fn is_kuma(&self) -> bool {
        matches!(
            self.type_.as_deref(),
            Some(KUMA_SECRET_TYPE | KUMA_GLOBAL_SECRET_TYPE)
        )
    }

    /// The data key that holds the secret part: `value` for the Kuma
    /// types, `tls.key` otherwise.
    pub fn private_field(&self) -> &'static str {
        if self.is_kuma() { VALUE } else { TLS_KEY }
    }

    /// The decoded bytes of a Kuma secret's `value`, if present and valid
    /// base64 (not when redacted).
    pub fn value_bytes(&self) -> Option<Vec<u8>> {
        let v = self.data.get(VALUE)?;
        STANDARD.decode(v.trim()).ok()
    }

    /// The decoded text of `data[key]`, if present and valid base64 UTF-8.
    pub fn decoded(&self, key: &str) -> Option<String> {
        let v = self.data.get(key)?;
        let bytes = STANDARD.decode(v.trim()).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Whether the private field (`tls.key`, or a Kuma `value`) holds the
    /// redaction marker instead of a value.
    pub fn key_is_redacted(&self) -> bool {
        self.data
            .get(self.private_field())
            .is_some_and(|k| k == REDACTED)
    }

    /// A copy with the private field (`tls.key`, or a Kuma `value`)
    /// replaced by [`REDACTED`] when set.
    pub fn redacted(&self) -> SecretSpec {
        let mut s = self.clone();
        if let Some(k) = s.data.get_mut(self.private_field()) {
            *k = REDACTED.to_string();
        }
        s
    }

    pub(crate) fn validate(&self, meta: &Metadata, errs: &mut Errors) {
        let mesh_required = match self.type_.as_deref() {
            Some(TLS_SECRET_TYPE) => false,
            Some(KUMA_SECRET_TYPE) => true,
            Some(KUMA_GLOBAL_SECRET_TYPE) => false,
            Some(other) => {
                errs.add(
                    "spec.type",
                    format!(
                        "unsupported Secret type {other:?}; meshlink stores type: \
                         {TLS_SECRET_TYPE}, {KUMA_SECRET_TYPE} or {KUMA_GLOBAL_SECRET_TYPE}"
                    ),
                );
                // Which data keys apply is unknown: check them as TLS data.
                self.validate_tls(errs);
                return;
            }
            None => {
                errs.add(
                    "spec.type",
                    format!(
                        "required; set type: {TLS_SECRET_TYPE} (TLS credentials), \
                         {KUMA_SECRET_TYPE} (a value in a mesh) or {KUMA_GLOBAL_SECRET_TYPE}"
                    ),
                );
                // Which data keys apply is unknown: check them as TLS data.
                self.validate_tls(errs);
                return;
            }
        };
        match (mesh_required, &meta.mesh) {
            (true, None) => errs.add(
                "metadata.mesh",
                format!(
                    "required: a {KUMA_SECRET_TYPE} Secret (Kuma type: Secret) belongs to a mesh; \
                     set mesh: (the kuma.io/mesh label on Kubernetes)"
                ),
            ),
            (false, Some(_)) => errs.add(
                "metadata.mesh",
                format!(
                    "not allowed: a {} Secret belongs to no mesh; remove the mesh, or use \
                     type {KUMA_SECRET_TYPE} (Kuma type: Secret) for a value in a mesh",
                    self.type_.as_deref().unwrap_or_default()
                ),
            ),
            _ => {}
        }
        if self.is_kuma() {
            self.validate_kuma(errs);
        } else {
            self.validate_tls(errs);
        }
    }

    fn validate_kuma(&self, errs: &mut Errors) {
        for key in self.data.keys().filter(|k| k.as_str() != VALUE) {
            errs.add(
                format!("spec.data.{key}"),
                format!("unknown key; a Kuma secret holds one base64 value, in data.{VALUE}"),
            );
        }
        let path = format!("spec.data.{VALUE}");
        match self.data.get(VALUE).map(|v| v.trim()) {
            None => errs.add(
                path,
                "required: the secret's bytes, base64-encoded (`base64 -w0 FILE`)",
            ),
            Some(REDACTED) => {}
            Some("") => errs.add(path, "must not be empty"),
            Some(v) => {
                if let Err(e) = STANDARD.decode(v) {
                    errs.add(
                        path,
                        format!("not valid base64 ({e}); encode the bytes with `base64 -w0 FILE`"),
                    );
                }
            }
        }
    }

    fn validate_tls(&self, errs: &mut Errors) {
        for required in [TLS_CRT, TLS_KEY] {
            if !self.data.contains_key(required) {
                errs.add(
                    format!("spec.data.{required}"),
                    format!(
                        "required in a {TLS_SECRET_TYPE} Secret (base64 of a PEM {})",
                        pem_what(required)
                    ),
                );
            }
        }
        for (key, value) in &self.data {
            let path = format!("spec.data.{key}");
            if key == TLS_KEY && value == REDACTED {
                continue;
            }
            let text = match STANDARD.decode(value.trim()) {
                Ok(bytes) => String::from_utf8(bytes).ok(),
                Err(e) => {
                    errs.add(
                        &path,
                        format!(
                            "not valid base64 ({e}); encode the PEM file with `base64 -w0 FILE`, \
                             or put the PEM text under stringData"
                        ),
                    );
                    continue;
                }
            };
            let label = match key.as_str() {
                TLS_CRT | CA_CRT => "CERTIFICATE",
                TLS_KEY => "PRIVATE KEY",
                _ => continue,
            };
            let has_block = text.as_deref().is_some_and(|t| {
                t.lines().any(|l| {
                    l.starts_with("-----BEGIN ") && l.trim_end().ends_with(&format!("{label}-----"))
                })
            });
            if !has_block {
                errs.add(
                    &path,
                    format!(
                        "does not decode to a PEM {} (no -----BEGIN ...{label}----- block)",
                        pem_what(key)
                    ),
                );
            }
        }
    }
}

fn pem_what(key: &str) -> &'static str {
    match key {
        TLS_KEY => "private key",
        CA_CRT => "CA certificate",
        _ => "certificate",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";

    fn errors(s: &SecretSpec) -> Vec<String> {
        errors_in(s, None)
    }

    fn errors_in(s: &SecretSpec, mesh: Option<&str>) -> Vec<String> {
        let meta = Metadata {
            name: "s".into(),
            mesh: mesh.map(str::to_string),
            ..Metadata::default()
        };
        let mut e = Errors::default();
        s.validate(&meta, &mut e);
        e.into_vec().into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_tls_secret_is_valid_and_its_key_redacts() {
        let s = SecretSpec::tls(CERT, KEY, Some(CERT));
        assert!(errors(&s).is_empty(), "{:?}", errors(&s));
        assert_eq!(s.decoded(TLS_KEY).as_deref(), Some(KEY));
        let r = s.redacted();
        assert!(r.key_is_redacted());
        assert_eq!(r.data[TLS_CRT], s.data[TLS_CRT]);
        assert!(errors(&r).is_empty(), "a redacted key passes syntax checks");
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut s = SecretSpec::tls(CERT, KEY, None);
        s.data.insert(TLS_CRT.into(), "not base64!".into());
        s.data.insert(CA_CRT.into(), STANDARD.encode("hello"));
        s.type_ = Some("Opaque".into());
        let e = errors(&s);
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.data.tls.crt: not valid base64")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.data.ca.crt: does not decode")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|m| m.starts_with("spec.type: unsupported")),
            "{e:?}"
        );
        let e = errors(&SecretSpec::default());
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.data.tls.key: required")),
            "{e:?}"
        );
    }

    #[test]
    fn kuma_secrets_hold_one_value_and_are_scoped_by_type() {
        let s = SecretSpec::kuma(false, "aGk=");
        assert!(errors_in(&s, Some("default")).is_empty());
        assert_eq!(s.value_bytes().as_deref(), Some(&b"hi"[..]));
        let e = errors_in(&s, None);
        assert!(
            e.iter().any(|m| m.starts_with("metadata.mesh: required")),
            "{e:?}"
        );
        let g = SecretSpec::kuma(true, "aGk=");
        assert!(errors_in(&g, None).is_empty());
        let e = errors_in(&g, Some("default"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("metadata.mesh: not allowed")),
            "{e:?}"
        );
        let r = s.redacted();
        assert_eq!(r.data[VALUE], REDACTED);
        assert!(r.key_is_redacted());
        assert!(errors_in(&r, Some("default")).is_empty());
        let mut bad = SecretSpec::kuma(false, "not base64!");
        bad.data.insert("extra".into(), "aGk=".into());
        let e = errors_in(&bad, Some("m"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.data.value: not valid base64")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("spec.data.extra: unknown key")),
            "{e:?}"
        );
        bad.data.clear();
        let e = errors_in(&bad, Some("m"));
        assert!(
            e.iter().any(|m| m.starts_with("spec.data.value: required")),
            "{e:?}"
        );
    }
}
