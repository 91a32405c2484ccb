//! The Secret kind: TLS credentials that Skupper resources name in
//! `tlsCredentials` (RouterAccess server certificates, Link client
//! certificates), in Kubernetes' `kubernetes.io/tls` shape.
//!
//! Owns the Secret spec, its syntax checks (type, base64, PEM blocks) and
//! the redaction of `tls.key`. It never logs or prints a key, and it does
//! not check that the key matches the certificate: that needs a crypto
//! library, so the control plane does it (`meshlink-identity`). A `tls.key`
//! equal to [`REDACTED`] is accepted here; the control plane replaces it
//! with the stored key (re-applying `get -o yaml` output) or refuses it.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::REDACTED;
use crate::validate::Errors;

/// The only Secret type meshlink uses.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
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
    /// Must be `kubernetes.io/tls`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Base64 values by key: `tls.crt`, `tls.key` and optionally `ca.crt`.
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

    /// The decoded text of `data[key]`, if present and valid base64 UTF-8.
    pub fn decoded(&self, key: &str) -> Option<String> {
        let v = self.data.get(key)?;
        let bytes = STANDARD.decode(v.trim()).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Whether `tls.key` holds the redaction marker instead of a key.
    pub fn key_is_redacted(&self) -> bool {
        self.data.get(TLS_KEY).is_some_and(|k| k == REDACTED)
    }

    /// A copy with `tls.key` replaced by [`REDACTED`] when set.
    pub fn redacted(&self) -> SecretSpec {
        let mut s = self.clone();
        if let Some(k) = s.data.get_mut(TLS_KEY) {
            *k = REDACTED.to_string();
        }
        s
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        match self.type_.as_deref() {
            Some(TLS_SECRET_TYPE) => {}
            Some(other) => errs.add(
                "spec.type",
                format!("unsupported Secret type {other:?}; meshlink stores only type: {TLS_SECRET_TYPE}"),
            ),
            None => errs.add(
                "spec.type",
                format!("required; set type: {TLS_SECRET_TYPE}"),
            ),
        }
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
        let mut e = Errors::default();
        s.validate(&mut e);
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
}
