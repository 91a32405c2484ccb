//! Regular expressions in policies (MeshHTTPRoute path, header and query
//! matches; MeshRetry header matches), checked at apply time.
//!
//! Owns the size limit. The `regex` crate guarantees linear-time matching
//! (RE2 semantics, as Envoy's `safe_regex`), and the compiled-size limit
//! refuses a "regex bomb" such as `(a{1000}){1000}` with its field path
//! before it reaches any proxy. It must never compile a pattern without
//! the limit.

use regex::RegexBuilder;

use crate::validate::Errors;

/// The largest compiled program a policy regex may have, in bytes.
pub const REGEX_SIZE_LIMIT: usize = 64 * 1024;

/// Compiles `pattern` with [`REGEX_SIZE_LIMIT`], reporting why it is
/// refused at `path`.
pub(crate) fn check(errs: &mut Errors, path: &str, pattern: &str) {
    let result = RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build();
    match result {
        Ok(_) => {}
        Err(regex::Error::CompiledTooBig(_)) => errs.add(
            path,
            format!(
                "regular expression {pattern:?} is too large once compiled (over {} KiB); \
                 simplify it, e.g. use fewer or smaller repetition counts",
                REGEX_SIZE_LIMIT / 1024
            ),
        ),
        Err(e) => {
            // The syntax error spans several lines; its last line says why.
            let text = e.to_string();
            let why = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid syntax")
                .trim()
                .trim_start_matches("error: ");
            errs.add(
                path,
                format!("invalid regular expression {pattern:?}: {why} (RE2 syntax)"),
            )
        }
    }
}
