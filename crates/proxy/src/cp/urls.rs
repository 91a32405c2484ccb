//! The `--cp` flag's values: one or more control-plane URLs, each
//! `https://HOST[:PORT]`.
//!
//! Owns parsing and checking the flag (repeated, comma-separated, or both;
//! the `MESHLINK_PROXY_CP` variable takes the same comma-separated list).
//! Every bad entry is reported at once, naming the flag and the entry. It
//! never resolves a name: that happens per attempt
//! ([`super::endpoints`]), so a control plane whose address changes is
//! followed without a restart.

use std::net::IpAddr;

use tonic::transport::Uri;

/// The port a URL without one uses (https).
const HTTPS_PORT: u16 = 443;

/// One control-plane URL from `--cp`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpUrl {
    text: String,
    uri: Uri,
    host: String,
    port: u16,
    ip: Option<IpAddr>,
}

// === impl CpUrl ===

impl CpUrl {
    /// Checks one entry; the error says what is wrong with it (the caller
    /// adds the flag and the entry).
    pub fn parse(entry: &str) -> Result<CpUrl, String> {
        if !entry.starts_with("https://") {
            return Err("the control plane is only reachable over TLS; use an https:// URL".into());
        }
        let uri: Uri = entry
            .parse()
            .map_err(|e| format!("not a URL ({e}); expected https://HOST:PORT"))?;
        let Some(host) = uri.host().filter(|h| !h.is_empty()) else {
            return Err("the URL names no host; expected https://HOST:PORT".into());
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let ip = host.parse::<IpAddr>().ok();
        Ok(CpUrl {
            text: entry.to_owned(),
            port: uri.port_u16().unwrap_or(HTTPS_PORT),
            uri,
            host,
            ip,
        })
    }

    /// The URL as given, e.g. `https://cp-1:5678`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed URL (the origin requests carry).
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The host without brackets: a DNS name or an IP address. It is the
    /// name the control plane's certificate is verified against.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port (443 when the URL names none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host's address when the URL names an IP address, not a name.
    pub fn ip(&self) -> Option<IpAddr> {
        self.ip
    }
}

impl std::fmt::Display for CpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses every `--cp` value (each may hold a comma-separated list;
/// blanks around an entry are ignored, a URL given twice counts once).
/// Every problem is reported, each naming `--cp` and the entry at fault.
pub fn parse_cp_values(values: &[String]) -> Result<Vec<CpUrl>, Vec<String>> {
    let mut urls: Vec<CpUrl> = Vec::new();
    let mut errors = Vec::new();
    if values.is_empty() {
        errors.push(
            "--cp: no control-plane URL given; e.g. --cp https://cp-1:5678,https://cp-2:5678"
                .into(),
        );
    }
    for value in values {
        for (i, entry) in value.split(',').map(str::trim).enumerate() {
            if entry.is_empty() {
                errors.push(format!(
                    "--cp {value:?}: entry {} is empty; give https:// URLs separated by \
                     commas, e.g. --cp https://cp-1:5678,https://cp-2:5678",
                    i + 1
                ));
                continue;
            }
            match CpUrl::parse(entry) {
                Ok(url) if urls.contains(&url) => {}
                Ok(url) => urls.push(url),
                Err(why) => errors.push(format!("--cp {entry:?}: {why}")),
            }
        }
    }
    if errors.is_empty() {
        Ok(urls)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(values: &[&str]) -> Result<Vec<String>, Vec<String>> {
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        parse_cp_values(&values).map(|urls| urls.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn repeated_flags_and_comma_lists_combine_in_order() {
        assert_eq!(
            parse(&[
                "https://a:5678",
                " https://b:5678 , https://c:5678",
                "https://a:5678"
            ]),
            Ok(vec![
                "https://a:5678".to_owned(),
                "https://b:5678".to_owned(),
                "https://c:5678".to_owned(),
            ])
        );
    }

    #[test]
    fn host_port_and_ip_are_read() {
        let url = CpUrl::parse("https://[::1]:5678").unwrap();
        assert_eq!((url.host(), url.port()), ("::1", 5678));
        assert!(url.ip().is_some());
        let url = CpUrl::parse("https://cp.meshlink.svc").unwrap();
        assert_eq!(
            (url.host(), url.port(), url.ip()),
            ("cp.meshlink.svc", 443, None)
        );
    }

    #[test]
    fn empty_entries_are_refused_naming_the_flag() {
        let errors = parse(&["https://a:5678,,https://b:5678"]).unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("--cp \"https://a:5678,,https://b:5678\": entry 2 is empty"),
            "{errors:?}"
        );
        let errors = parse(&[" "]).unwrap_err();
        assert!(errors[0].contains("entry 1 is empty"), "{errors:?}");
        assert!(parse(&[]).unwrap_err()[0].starts_with("--cp: no control-plane URL"));
    }

    #[test]
    fn every_bad_entry_is_named() {
        let errors = parse(&["http://a:5678, https://b:5678", "https://:1,ftp://c"]).unwrap_err();
        let text = errors.join("\n");
        assert_eq!(errors.len(), 3, "{text}");
        for part in [
            "--cp \"http://a:5678\": the control plane is only reachable over TLS; use an https:// URL",
            "--cp \"https://:1\":",
            "--cp \"ftp://c\": the control plane is only reachable over TLS",
        ] {
            assert!(text.contains(part), "{part} missing from:\n{text}");
        }
    }
}
