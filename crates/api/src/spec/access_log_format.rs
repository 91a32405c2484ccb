//! Envoy's access log command operators (`%RESPONSE_CODE%`,
//! `%REQ(X-REQUEST-ID)%`, `%START_TIME%`, …) and Kuma's `%KUMA_*%`
//! placeholders: the parser shared by the MeshAccessLog validation (an
//! unknown operator is refused with its name) and meshlink-proxy, which
//! evaluates the parsed tokens per request.
//!
//! Syntax, as Envoy's: `%NAME%`, `%NAME(ARG)%`, `%NAME(ARG):MAX_LEN%`,
//! and `%%` for a literal `%`. `REQ` and `RESP` take `HEADER` or
//! `HEADER?ALTERNATIVE`.

use serde::Serialize;

/// One piece of a format string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Token {
    /// Text copied as is.
    Literal(String),
    /// A command operator.
    Operator(Operator),
}

/// A command operator and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operator {
    /// E.g. `RESPONSE_CODE`, `REQ`, `KUMA_MESH`.
    pub name: String,
    /// The text in parentheses (a header name for `REQ`/`RESP`, a time
    /// format for `START_TIME`).
    pub arg: Option<String>,
    /// `:N`: the value is cut to N characters.
    pub max_len: Option<usize>,
}

/// Operators that take an argument in parentheses (required).
const WITH_ARG: &[&str] = &["REQ", "RESP", "TRAILER"];

/// Operators that may take an argument (a time format).
const OPTIONAL_ARG: &[&str] = &["START_TIME"];

/// `START_TIME` formats meshlink implements (besides the default).
pub const START_TIME_FORMATS: &[&str] = &["%s"];

/// Every operator meshlink implements (Envoy's, and Kuma's placeholders,
/// which the control plane replaces before the proxy sees them).
pub const KNOWN_OPERATORS: &[&str] = &[
    "START_TIME",
    "REQ",
    "RESP",
    "TRAILER",
    "PROTOCOL",
    "RESPONSE_CODE",
    "RESPONSE_CODE_DETAILS",
    "RESPONSE_FLAGS",
    "BYTES_RECEIVED",
    "BYTES_SENT",
    "DURATION",
    "REQUEST_DURATION",
    "RESPONSE_DURATION",
    "UPSTREAM_HOST",
    "UPSTREAM_CLUSTER",
    "UPSTREAM_TRANSPORT_FAILURE_REASON",
    "DOWNSTREAM_REMOTE_ADDRESS",
    "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_DIRECT_REMOTE_ADDRESS",
    "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_LOCAL_ADDRESS",
    "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT",
    "DOWNSTREAM_PEER_URI_SAN",
    "DOWNSTREAM_TLS_VERSION",
    "ROUTE_NAME",
    "HOSTNAME",
    "KUMA_MESH",
    "KUMA_SOURCE_SERVICE",
    "KUMA_DESTINATION_SERVICE",
    "KUMA_SOURCE_ADDRESS",
    "KUMA_SOURCE_ADDRESS_WITHOUT_PORT",
    "KUMA_TRAFFIC_DIRECTION",
];

/// Parses `format`; the error says what is wrong and where.
pub fn parse(format: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut literal = String::new();
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(r) = after.strip_prefix('%') {
            literal.push('%');
            rest = r;
            continue;
        }
        let (op, r) = operator(after)?;
        if !literal.is_empty() {
            tokens.push(Token::Literal(std::mem::take(&mut literal)));
        }
        tokens.push(Token::Operator(op));
        rest = r;
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        tokens.push(Token::Literal(literal));
    }
    Ok(tokens)
}

/// Reads one operator from `s` (just after its opening `%`); returns it
/// and what follows its closing `%`.
fn operator(s: &str) -> Result<(Operator, &str), String> {
    let name_end = s
        .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .unwrap_or(s.len());
    let name = &s[..name_end];
    if name.is_empty() {
        return Err(format!(
            "a '%' not followed by an operator name at {:?}; write %% for a literal %",
            excerpt(s)
        ));
    }
    let mut rest = &s[name_end..];
    let mut arg = None;
    if let Some(r) = rest.strip_prefix('(') {
        let close = r
            .find(')')
            .ok_or_else(|| format!("%{name}(: no closing ')'"))?;
        arg = Some(r[..close].to_owned());
        rest = &r[close + 1..];
    }
    let mut max_len = None;
    if let Some(r) = rest.strip_prefix(':') {
        let digits = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        let n = r[..digits]
            .parse::<usize>()
            .map_err(|_| format!("%{name}: ':' must be followed by a length"))?;
        max_len = Some(n);
        rest = &r[digits..];
    }
    let Some(rest) = rest.strip_prefix('%') else {
        return Err(format!("%{name}: no closing '%'"));
    };
    if !KNOWN_OPERATORS.contains(&name) {
        return Err(format!(
            "unknown command operator %{name}%; meshlink supports {}",
            KNOWN_OPERATORS.join(", ")
        ));
    }
    if WITH_ARG.contains(&name) && arg.as_deref().is_none_or(str::is_empty) {
        return Err(format!(
            "%{name}% needs a header name, e.g. %{name}(X-REQUEST-ID)%"
        ));
    }
    if arg.is_some() && !WITH_ARG.contains(&name) && !OPTIONAL_ARG.contains(&name) {
        return Err(format!("%{name}% takes no argument"));
    }
    if name == "START_TIME"
        && let Some(a) = arg.as_deref()
        && !START_TIME_FORMATS.contains(&a)
    {
        return Err(format!(
            "%START_TIME({a})%: meshlink supports %START_TIME% (RFC 3339 with milliseconds, \
             UTC) and %START_TIME(%s)% (Unix seconds)"
        ));
    }
    Ok((
        Operator {
            name: name.to_owned(),
            arg,
            max_len,
        },
        rest,
    ))
}

fn excerpt(s: &str) -> String {
    s.chars().take(20).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, arg: Option<&str>, max_len: Option<usize>) -> Token {
        Token::Operator(Operator {
            name: name.into(),
            arg: arg.map(str::to_owned),
            max_len,
        })
    }

    #[test]
    fn operators_arguments_lengths_and_literals() {
        let t = parse("[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH):64%\" 100%% %RESPONSE_CODE%\n").unwrap();
        assert_eq!(
            t,
            [
                Token::Literal("[".into()),
                op("START_TIME", None, None),
                Token::Literal("] \"".into()),
                op("REQ", Some(":METHOD"), None),
                Token::Literal(" ".into()),
                op("REQ", Some("X-ENVOY-ORIGINAL-PATH?:PATH"), Some(64)),
                Token::Literal("\" 100% ".into()),
                op("RESPONSE_CODE", None, None),
                Token::Literal("\n".into()),
            ]
        );
    }

    #[test]
    fn mistakes_are_named() {
        let e = parse("%RESPONSE_CODE% %NOPE%").unwrap_err();
        assert!(e.starts_with("unknown command operator %NOPE%"), "{e}");
        assert!(parse("%REQ%").unwrap_err().contains("needs a header name"));
        assert!(
            parse("%DURATION(x)%")
                .unwrap_err()
                .contains("takes no argument")
        );
        assert!(parse("%DURATION").unwrap_err().contains("no closing '%'"));
        assert!(parse("50% off").unwrap_err().contains("write %%"));
        assert!(parse("%START_TIME(%s)%").is_ok());
        assert!(
            parse("%START_TIME(%F)%")
                .unwrap_err()
                .contains("meshlink supports")
        );
    }
}
