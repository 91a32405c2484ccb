//! The AccessGrant and AccessToken kinds: single-use, expiring permission
//! for another site to link here, and its redeemable form.
//!
//! Owns their shapes, status details, validation and redaction. The grant
//! `code` (in spec and status) and the token `code` are secrets: API reads
//! should go through the `redacted()` methods, which replace them with
//! [`REDACTED`](super::REDACTED). This module must never log a code.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::REDACTED;
use crate::validate::{self, Errors, parse_duration};

/// Redemptions allowed when `redemptionsAllowed` is unset.
pub const DEFAULT_REDEMPTIONS_ALLOWED: u64 = 1;
/// Grant lifetime when `expirationWindow` is unset.
pub const DEFAULT_EXPIRATION_WINDOW: Duration = Duration::from_secs(15 * 60);

/// AccessGrant label (a meshlink extension) setting the lifetime of the
/// link client certificates its redemptions issue, e.g. `720h`.
pub const LINK_CERT_LIFETIME_LABEL: &str = "meshlink.dev/link-cert-lifetime";
/// Shortest lifetime [`LINK_CERT_LIFETIME_LABEL`] may ask for.
pub const MIN_LINK_CERT_LIFETIME: Duration = Duration::from_secs(10);
/// Longest lifetime [`LINK_CERT_LIFETIME_LABEL`] may ask for (the default).
pub const MAX_LINK_CERT_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Checks an AccessGrant's meshlink labels: [`LINK_CERT_LIFETIME_LABEL`]
/// must be a duration from 10s to one year.
pub(crate) fn validate_labels(labels: &BTreeMap<String, String>, errs: &mut Errors) {
    let Some(v) = labels.get(LINK_CERT_LIFETIME_LABEL) else {
        return;
    };
    let path = format!("metadata.labels[{LINK_CERT_LIFETIME_LABEL:?}]");
    match parse_duration(v) {
        Some(d) if d > MAX_LINK_CERT_LIFETIME => errs.add(
            path,
            format!("{v:?} is longer than the longest link certificate lifetime, 8760h (one year)"),
        ),
        _ => validate::duration(errs, &path, v, Some(MIN_LINK_CERT_LIFETIME)),
    }
}

/// `spec` of an AccessGrant.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessGrantSpec {
    /// How many times the grant may be redeemed (default 1; not negative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redemptions_allowed: Option<i64>,
    /// How long the grant stays redeemable, e.g. `1h` (default 15m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_window: Option<String>,
    /// A chosen redemption code (secret); generated when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The CA that signs link certificates issued through this grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// Status details of an AccessGrant, written by the control plane.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessGrantStatus {
    /// `Ready` or `Pending`, as Skupper's `StatusType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// A human-readable summary (why it is not ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Where to redeem: `https://<host>:<grant-port>/<grant-uid>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The redemption code (secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// PEM CA of the grant server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// RFC 3339 time after which redemption fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_time: Option<String>,
    /// How many times it has been redeemed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redemptions: Option<u64>,
}

/// `spec` of an AccessToken: what the redeeming site needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessTokenSpec {
    /// The grant's URL (`https://...`).
    pub url: String,
    /// The grant's code (secret).
    pub code: String,
    /// PEM CA to trust for `url`.
    pub ca: String,
    /// Cost of the resulting link (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_cost: Option<i64>,
}

/// Status details of an AccessToken.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessTokenStatus {
    /// `Ready`, `Pending` or `Error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Whether redemption succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeemed: Option<bool>,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn redact(code: &Option<String>) -> Option<String> {
    code.as_ref().map(|_| REDACTED.to_string())
}

// === impl AccessGrantSpec ===

impl AccessGrantSpec {
    /// Effective redemptions allowed (default 1).
    pub fn redemptions_allowed(&self) -> u64 {
        self.redemptions_allowed
            .map_or(DEFAULT_REDEMPTIONS_ALLOWED, |n| n.max(0) as u64)
    }

    /// Effective lifetime (default 15m).
    pub fn expiration_window(&self) -> Duration {
        self.expiration_window
            .as_deref()
            .and_then(parse_duration)
            .unwrap_or(DEFAULT_EXPIRATION_WINDOW)
    }

    /// A copy with `code` replaced by [`REDACTED`] when set.
    pub fn redacted(&self) -> AccessGrantSpec {
        AccessGrantSpec {
            code: redact(&self.code),
            ..self.clone()
        }
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(n) = self.redemptions_allowed
            && n < 0
        {
            errs.add(
                "spec.redemptionsAllowed",
                format!("must not be negative (got {n}); the default is 1"),
            );
        }
        if let Some(w) = &self.expiration_window {
            let min = Some(Duration::from_secs(1));
            validate::duration(errs, "spec.expirationWindow", w, min);
        }
        if let Some(code) = &self.code {
            validate::required(errs, "spec.code", code);
        }
        if let Some(issuer) = &self.issuer {
            validate::dns_name(errs, "spec.issuer", issuer);
        }
    }
}

// === impl AccessGrantStatus ===

impl AccessGrantStatus {
    /// A copy with `code` replaced by [`REDACTED`] when set.
    pub fn redacted(&self) -> AccessGrantStatus {
        AccessGrantStatus {
            code: redact(&self.code),
            ..self.clone()
        }
    }
}

// === impl AccessTokenSpec ===

impl AccessTokenSpec {
    /// Effective link cost (default 1).
    pub fn link_cost(&self) -> u64 {
        self.link_cost.map_or(1, |c| c.max(1) as u64)
    }

    /// A copy with `code` replaced by [`REDACTED`].
    pub fn redacted(&self) -> AccessTokenSpec {
        AccessTokenSpec {
            code: REDACTED.to_string(),
            ..self.clone()
        }
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        match self.url.strip_prefix("https://") {
            Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {}
            _ => errs.add(
                "spec.url",
                format!(
                    "{:?} is not an https:// URL; copy url from the AccessGrant's status",
                    self.url
                ),
            ),
        }
        validate::required(errs, "spec.code", &self.code);
        if !self.ca.contains("-----BEGIN CERTIFICATE-----") {
            errs.add(
                "spec.ca",
                "must be a PEM certificate (-----BEGIN CERTIFICATE-----); copy ca from the \
                 AccessGrant's status",
            );
        }
        if let Some(c) = self.link_cost {
            validate::at_least(errs, "spec.linkCost", c, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Spec, StatusDetails};

    #[test]
    fn redaction_hides_every_code() {
        let spec = AccessGrantSpec {
            code: Some("s3cret".into()),
            ..Default::default()
        };
        assert_eq!(spec.redacted().code.as_deref(), Some(REDACTED));
        assert_eq!(AccessGrantSpec::default().redacted().code, None);
        let status = AccessGrantStatus {
            code: Some("s3cret".into()),
            url: Some("https://h/x".into()),
            ..Default::default()
        };
        let details = StatusDetails::AccessGrant(status).redacted();
        let red = details.as_access_grant().unwrap();
        assert_eq!(red.code.as_deref(), Some(REDACTED));
        assert_eq!(red.url.as_deref(), Some("https://h/x"));
        let token = Spec::AccessToken(AccessTokenSpec {
            url: "https://h/x".into(),
            code: "s3cret".into(),
            ca: String::new(),
            link_cost: None,
        });
        assert!(
            !serde_json::to_string(&token.redacted().to_value())
                .unwrap()
                .contains("s3cret")
        );
    }

    #[test]
    fn defaults() {
        let spec = AccessGrantSpec::default();
        assert_eq!(spec.redemptions_allowed(), 1);
        assert_eq!(spec.expiration_window(), Duration::from_secs(900));
        let spec = AccessGrantSpec {
            redemptions_allowed: Some(0),
            ..Default::default()
        };
        assert_eq!(spec.redemptions_allowed(), 0);
    }
}
