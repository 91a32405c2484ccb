//! What the control plane checks on a Secret beyond syntax: that `tls.key`
//! is the private key of `tls.crt`, and what a redacted `tls.key` or Kuma
//! `value` (the output of `get -o yaml` applied again) means.
//!
//! Owns those two rules for [`crate::resources::ResourceService`]. It never
//! returns or logs a key; errors name the field and the fix.

use meshlink_api::spec::{CA_CRT, REDACTED, Spec, TLS_CRT, TLS_KEY};
use meshlink_api::{FieldError, Resource};
use meshlink_identity::{TlsPairError, check_tls_pair};

use crate::resources::ResourceError;

/// Replaces a redacted `tls.key` in `r` with the key of `stored` (the
/// Secret as stored now). Without a stored key the marker is refused.
pub(crate) fn restore_redacted_key(
    r: &mut Resource,
    stored: Option<&Resource>,
) -> Result<(), ResourceError> {
    let Spec::Secret(s) = &mut r.spec else {
        return Ok(());
    };
    if !s.key_is_redacted() {
        return Ok(());
    }
    let field = s.private_field();
    let key = stored
        .and_then(|st| st.spec.as_secret())
        .filter(|st| st.type_ == s.type_)
        .and_then(|st| st.data.get(field))
        .filter(|k| k.as_str() != REDACTED);
    match key {
        Some(k) => {
            s.data.insert(field.to_string(), k.clone());
            Ok(())
        }
        None => {
            let what = if field == TLS_KEY { "key" } else { "value" };
            Err(ResourceError::Invalid(vec![FieldError::new(
                format!("spec.data.{field}"),
                format!(
                    "is the redaction marker {REDACTED:?}, but no stored {what} of this type \
                     exists for Secret {:?} to keep; give the base64 {}",
                    r.name(),
                    if field == TLS_KEY {
                        "PEM private key"
                    } else {
                        "value"
                    }
                ),
            )]))
        }
    }
}

/// Checks that a Secret's `tls.key` belongs to its `tls.crt` and that
/// `ca.crt` (when present) parses. Other kinds pass.
pub(crate) fn check_secret(r: &Resource) -> Result<(), ResourceError> {
    let Some(s) = r.spec.as_secret() else {
        return Ok(());
    };
    if s.key_is_redacted() {
        // Reached only when nothing was stored to restore from.
        let mut copy = r.clone();
        return restore_redacted_key(&mut copy, None);
    }
    if s.is_kuma() {
        // One opaque value: its syntax is all there is to check.
        return Ok(());
    }
    let (Some(cert), Some(key)) = (s.decoded(TLS_CRT), s.decoded(TLS_KEY)) else {
        // Syntax validation already reported these.
        return Ok(());
    };
    let field = |k: &str| format!("spec.data.{k}");
    let mut errs = Vec::new();
    match check_tls_pair(&cert, &key) {
        Ok(_) => {}
        Err(e @ TlsPairError::Certificate(_)) => {
            errs.push(FieldError::new(field(TLS_CRT), e.to_string()))
        }
        Err(e) => errs.push(FieldError::new(field(TLS_KEY), e.to_string())),
    }
    if let Some(ca) = s.decoded(CA_CRT)
        && let Err(e) = meshlink_identity::TrustBundle::from_pem(&ca)
    {
        errs.push(FieldError::new(
            field(CA_CRT),
            format!("cannot be read as PEM certificates ({e})"),
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ResourceError::Invalid(errs))
    }
}
