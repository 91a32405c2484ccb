//! MeshRetry validation: per-protocol blocks, `retryOn` values, ranges and
//! durations, every problem with its field path.
//!
//! Owns the checks of `to[].default`; the shape and Kuma's defaults live in
//! `retry`. It must never accept a value Kuma would refuse, and it refuses a
//! few Kuma silently accepts (a status code outside 300-599).

use super::header_match::header_name;
use super::kuma_duration;
use super::retry::{
    BackOff, HTTP_RETRY_ON, HostPredicate, HostSelection, RETRY_STATUS_CODES, RateLimitedBackOff,
    RetryConf,
};
use super::string_enum::one_of;
use crate::validate::Errors;

// === impl RetryConf ===

impl RetryConf {
    pub(super) fn validate(&self, errs: &mut Errors, at: &str) {
        if self.tcp.is_none() && self.http.is_none() && self.grpc.is_none() {
            errs.add(
                at,
                "at least one of tcp, http or grpc is required (as in Kuma)",
            );
        }
        if let Some(tcp) = &self.tcp {
            let path = format!("{at}.tcp.maxConnectAttempt");
            match tcp.max_connect_attempt {
                None => errs.add(
                    path,
                    "required: connection attempts before giving up, e.g. 5",
                ),
                Some(n) => range(errs, &path, n, 1),
            }
        }
        if let Some(h) = &self.http {
            let at = format!("{at}.http");
            common(
                errs,
                &at,
                h.num_retries,
                h.per_try_timeout.as_deref(),
                &h.back_off,
                &h.rate_limited_back_off,
            );
            for (i, v) in h.retry_on.iter().flatten().enumerate() {
                http_retry_on(errs, &format!("{at}.retryOn[{i}]"), v);
            }
            for (field, list) in [
                ("retriableResponseHeaders", &h.retriable_response_headers),
                ("retriableRequestHeaders", &h.retriable_request_headers),
            ] {
                for (i, m) in list.iter().flatten().enumerate() {
                    m.validate(errs, &format!("{at}.{field}[{i}]"));
                }
            }
            host_selection(errs, &at, h.host_selection.as_deref().unwrap_or_default());
            if let Some(n) = h.host_selection_max_attempts {
                range(errs, &format!("{at}.hostSelectionMaxAttempts"), n, 1);
            }
        }
        if let Some(g) = &self.grpc {
            let at = format!("{at}.grpc");
            common(
                errs,
                &at,
                g.num_retries,
                g.per_try_timeout.as_deref(),
                &g.back_off,
                &g.rate_limited_back_off,
            );
            for (i, v) in g.retry_on.iter().flatten().enumerate() {
                v.validate(errs, &format!("{at}.retryOn[{i}]"));
            }
        }
    }
}

/// Checks what HTTP and gRPC share.
fn common(
    errs: &mut Errors,
    at: &str,
    num_retries: Option<i64>,
    per_try_timeout: Option<&str>,
    back_off: &Option<BackOff>,
    rate_limited: &Option<RateLimitedBackOff>,
) {
    if let Some(n) = num_retries {
        range(errs, &format!("{at}.numRetries"), n, 0);
    }
    kuma_duration::check_opt(errs, &format!("{at}.perTryTimeout"), per_try_timeout);
    if let Some(b) = back_off {
        let bat = format!("{at}.backOff");
        if b.base_interval.is_none() && b.max_interval.is_none() {
            errs.add(
                &bat,
                "must not be empty: set baseInterval and/or maxInterval, e.g. 25ms",
            );
        }
        kuma_duration::check_positive(
            errs,
            &format!("{bat}.baseInterval"),
            b.base_interval.as_deref(),
        );
        kuma_duration::check_positive(
            errs,
            &format!("{bat}.maxInterval"),
            b.max_interval.as_deref(),
        );
    }
    if let Some(r) = rate_limited {
        let rat = format!("{at}.rateLimitedBackOff");
        kuma_duration::check_positive(
            errs,
            &format!("{rat}.maxInterval"),
            r.max_interval.as_deref(),
        );
        match &r.reset_headers {
            None => errs.add(
                format!("{rat}.resetHeaders"),
                "required, e.g. [{name: retry-after, format: Seconds}]",
            ),
            Some(headers) => {
                for (i, h) in headers.iter().enumerate() {
                    header_name(errs, &format!("{rat}.resetHeaders[{i}].name"), &h.name);
                    h.format
                        .validate(errs, &format!("{rat}.resetHeaders[{i}].format"));
                }
            }
        }
    }
}

fn range(errs: &mut Errors, path: &str, value: i64, min: i64) {
    let max = i64::from(u32::MAX);
    if !(min..=max).contains(&value) {
        errs.add(
            path,
            format!("must be between {min} and {max} (got {value})"),
        );
    }
}

fn http_retry_on(errs: &mut Errors, path: &str, value: &str) {
    if HTTP_RETRY_ON.contains(&value) {
        return;
    }
    if let Ok(code) = value.parse::<u16>() {
        if !RETRY_STATUS_CODES.contains(&code) {
            errs.add(
                path,
                format!(
                    "status code {code} is out of range; retryOn takes codes from {} to {}",
                    RETRY_STATUS_CODES.start(),
                    RETRY_STATUS_CODES.end()
                ),
            );
        }
        return;
    }
    errs.add(
        path,
        format!(
            "unknown HTTP retryOn value {value:?}; expected {} or a status code such as \"503\"",
            one_of(&HTTP_RETRY_ON[..HTTP_RETRY_ON.len()])
        ),
    );
}

fn host_selection(errs: &mut Errors, at: &str, predicates: &[HostSelection]) {
    let mut priorities = 0;
    for (i, p) in predicates.iter().enumerate() {
        let pat = format!("{at}.hostSelection[{i}]");
        if !p.predicate.validate(errs, &format!("{pat}.predicate")) {
            continue;
        }
        match p.predicate {
            HostPredicate::OmitHostsWithTags if p.tags.is_none() => errs.add(
                format!("{pat}.tags"),
                "required when predicate is OmitHostsWithTags",
            ),
            HostPredicate::OmitPreviousPriorities => {
                priorities += 1;
                if priorities > 1 {
                    errs.add(
                        format!("{pat}.predicate"),
                        "OmitPreviousPriorities must only be specified once",
                    );
                }
                if p.update_frequency.is_some_and(|f| f <= 0) {
                    errs.add(
                        format!("{pat}.updateFrequency"),
                        "must be greater than zero",
                    );
                }
            }
            _ => {}
        }
    }
}
