//! The connection to the control plane: its URLs ([`endpoints`]), the CA
//! file that verifies it, and the proxy token file.
//!
//! Owns reading those files and dialling one candidate. Files are read
//! fresh on every attempt, so a token or CA copied in after start-up (or
//! rotated later) is picked up without a restart (I2: a missing file is a
//! reason to wait, never to exit). A file is used only once it parses
//! completely, so a half-written file is never loaded. It never caches a
//! channel across failures.

pub mod endpoints;
pub mod failure;
mod rotation;
pub mod urls;
pub mod wrong_port;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use meshlink_identity::{TokenClaims, TrustBundle};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

pub use endpoints::{Attempt, CpEndpoints};
pub use failure::{FailureKind, Pace};
pub use urls::{CpUrl, parse_cp_values};

/// How long a TCP + TLS connect to the control plane may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the control plane cannot be reached yet. Each names the fix.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CpError {
    /// A file does not exist (yet).
    #[error("{what} {path} does not exist yet; waiting for it to appear")]
    Missing {
        /// Which file (e.g. "token file").
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
    /// A file exists but cannot be used.
    #[error("{what} {path} is unusable: {reason}")]
    Unusable {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why, and the fix.
        reason: String,
    },
    /// Several files are missing or unusable (each is listed).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<CpError>),
    /// The control plane did not accept the connection.
    #[error("cannot connect to the control plane at {at}: {reason}; retrying")]
    Connect {
        /// The candidate tried: its `--cp` URL, the address when the URL's
        /// name was resolved, and its place among the candidates.
        at: String,
        /// The transport error.
        reason: String,
        /// What the error says about that control plane.
        kind: FailureKind,
    },
}

impl CpError {
    /// Whether the control plane was never reached (a file is missing or
    /// the connection failed). Such failures cost the control plane
    /// nothing, so callers retry them at least every
    /// [`UNREACHABLE_RETRY_CAP`]: a proxy started before its control plane
    /// (or its credentials) gets ready within about a second of them
    /// appearing, whatever the backoff had grown to.
    pub fn is_unreachable(&self) -> bool {
        match self {
            CpError::Missing { .. }
            | CpError::Unusable { .. }
            | CpError::Several(_)
            | CpError::Connect { .. } => true,
        }
    }
}

/// Reports a failed [`CpTarget::connect`] to the rotation when the
/// control plane tried is at fault; a missing or unusable file is not,
/// so it moves nothing and the caller backs off.
pub fn report_connect_failure(attempt: &Attempt, error: &CpError) -> Pace {
    match error {
        CpError::Connect { kind, .. } => attempt.failed(*kind, &error.to_string()),
        CpError::Missing { .. } | CpError::Unusable { .. } | CpError::Several(_) => Pace::Backoff,
    }
}

/// Longest wait between attempts while the control plane is unreachable.
pub const UNREACHABLE_RETRY_CAP: Duration = Duration::from_secs(1);

/// How long a client whose request stream was closed waits for the
/// control plane's final status on the response side. A control plane
/// that ends a stream resets the half the client sends on, so a client
/// busy sending (an ACK, a report) can notice the closed request side
/// before it reads the status that says why (e.g. "shutting down", which
/// moves the client to the next control plane at once).
pub const FINAL_STATUS_WAIT: Duration = Duration::from_secs(1);

/// Where the control plane is and how to authenticate to it.
#[derive(Debug, Clone)]
pub struct CpTarget {
    /// `--cp` URLs, e.g. `https://127.0.0.1:5678`, shared by every loop of
    /// the process.
    pub endpoints: CpEndpoints,
    /// `--cp-ca`: PEM CA that verifies the control plane's certificate.
    pub ca_file: PathBuf,
    /// `--token-file`: the proxy token.
    pub token_file: PathBuf,
    /// `--mesh` and `--name`: who this proxy says it is. Certify names them
    /// (not the token's claims), so the control plane checks them against
    /// the token as xDS checks `node.id`, and a proxy started with another
    /// dataplane's token is refused on both.
    pub node: (String, String),
    /// This process's instance id ([`new_instance_id`]), sent as
    /// `node.metadata["meshlink.dev/instance"]` and in Certify requests, so
    /// the control plane can tell two processes holding one identity apart.
    pub instance: String,
}

/// A fresh instance id for this process: its pid and 32 random bits
/// (`4242-9f3a01bc`), distinct across hosts and restarts.
pub fn new_instance_id() -> String {
    format!("{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// A token read from the token file, with its (unverified) claims.
#[derive(Debug, Clone)]
pub struct ProxyToken {
    /// The `authorization` metadata value (`Bearer <token>`).
    pub bearer: MetadataValue<Ascii>,
    /// The claims the token carries; the control plane verifies them.
    pub claims: TokenClaims,
}

fn read(what: &'static str, path: &Path) -> Result<String, CpError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(CpError::Missing {
            what,
            path: path.to_owned(),
        }),
        Err(e) => Err(CpError::Unusable {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

// === impl CpTarget ===

impl CpTarget {
    /// Reads and checks both files; when both are missing or unusable the
    /// error names both, so a user fixes them in one go.
    pub fn credentials(&self) -> Result<ProxyToken, CpError> {
        match (self.token(), self.ca_pem()) {
            (Ok(token), Ok(_)) => Ok(token),
            (Err(a), Err(b)) => Err(CpError::Several(vec![a, b])),
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
        }
    }

    /// Reads the CA file; it must hold at least one complete certificate.
    fn ca_pem(&self) -> Result<String, CpError> {
        let pem = read("control-plane CA file", &self.ca_file)?;
        let bundle = TrustBundle::from_pem(&pem).ok().filter(|b| !b.is_empty());
        if bundle.is_none() {
            return Err(CpError::Unusable {
                what: "control-plane CA file",
                path: self.ca_file.clone(),
                reason: "no complete PEM certificate in it; give the control plane's cp-tls/ca.pem"
                    .into(),
            });
        }
        Ok(pem)
    }

    /// Reads and checks the token file.
    pub fn token(&self) -> Result<ProxyToken, CpError> {
        let unusable = |reason: String| CpError::Unusable {
            what: "token file",
            path: self.token_file.clone(),
            reason,
        };
        let raw = read("token file", &self.token_file)?;
        let token = raw.trim();
        if token.is_empty() {
            return Err(unusable(
                "it is empty; write the output of `meshlink token dataplane` to it".into(),
            ));
        }
        let claims = peek_claims(token).map_err(unusable)?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| unusable("it contains characters a token cannot have".into()))?;
        Ok(ProxyToken { bearer, claims })
    }

    /// Reads the CA file and connects a TLS channel to the candidate of
    /// `attempt`. A URL whose name was resolved is dialled at the address,
    /// and the certificate is verified against the URL's host (which is
    /// also the requests' authority). Report a failure with
    /// [`report_connect_failure`].
    pub async fn connect(&self, attempt: &Attempt) -> Result<Channel, CpError> {
        let pem = self.ca_pem()?;
        let connect_err = |reason: String, kind: FailureKind| CpError::Connect {
            at: attempt.to_string(),
            reason,
            kind,
        };
        let invalid = |e: tonic::transport::Error| connect_err(e.to_string(), FailureKind::Other);
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
        let url = attempt.url();
        let endpoint = match attempt.addr() {
            Some(addr) => {
                tls = tls.domain_name(url.host());
                Endpoint::from_shared(format!("https://{addr}"))
                    .map_err(invalid)?
                    .origin(url.uri().clone())
            }
            None => Endpoint::from_shared(url.to_string()).map_err(invalid)?,
        };
        let endpoint = endpoint
            .tls_config(tls)
            .map_err(invalid)?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        endpoint.connect().await.map_err(|e| {
            let mut reason = error_chain(&e);
            if wrong_port::answered_in_plain_text(&e) {
                reason = format!("{reason}; {}", wrong_port::hint(url.host()));
            }
            connect_err(reason, FailureKind::of_error(&e))
        })
    }
}

/// An error and its sources as one line, `a: b: c`, skipping a source
/// whose text the line already ends with (tonic and hyper repeat theirs,
/// which printed `tcp connect error: tcp connect error: ...`).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !reason.ends_with(&text) {
            reason = format!("{reason}: {text}");
        }
        source = s.source();
    }
    reason
}

/// The claims of a JWS compact token, without verifying it (the control
/// plane does that). Used to learn the mesh, name and services to ask for.
fn peek_claims(token: &str) -> Result<TokenClaims, String> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a meshlink proxy token (expected three dot-separated parts)".into());
    };
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| "the token's payload is not base64url".to_string())?;
    serde_json::from_slice(&json).map_err(|e| format!("the token's claims are unreadable: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn error_chain_does_not_repeat_a_layer() {
        let e = Layer(
            "transport error",
            Some(Box::new(Layer(
                "tcp connect error",
                Some(Box::new(Layer(
                    "tcp connect error",
                    Some(Box::new(Layer("Connection refused (os error 111)", None))),
                ))),
            ))),
        );
        assert_eq!(
            error_chain(&e),
            "transport error: tcp connect error: Connection refused (os error 111)"
        );
    }

    fn target(dir: &Path) -> CpTarget {
        CpTarget {
            endpoints: CpEndpoints::new(vec![CpUrl::parse("https://127.0.0.1:1").unwrap()]),
            ca_file: dir.join("ca.pem"),
            token_file: dir.join("token"),
            node: ("default".into(), "web".into()),
            instance: new_instance_id(),
        }
    }

    #[test]
    fn both_missing_files_are_named_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(dir.path());
        let e = t.credentials().unwrap_err().to_string();
        assert!(
            e.contains("token file") && e.contains("control-plane CA file"),
            "{e}"
        );
    }

    #[test]
    fn missing_and_garbage_files_have_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(dir.path());
        let e = t.token().unwrap_err().to_string();
        assert!(e.contains("does not exist yet"), "{e}");
        std::fs::write(&t.token_file, "\n").unwrap();
        let e = t.token().unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        std::fs::write(&t.token_file, "a.b").unwrap();
        let e = t.token().unwrap_err().to_string();
        assert!(e.contains("three dot-separated parts"), "{e}");
    }

    #[tokio::test]
    async fn half_written_ca_file_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(dir.path());
        std::fs::write(&t.ca_file, "-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
        let attempt = t.endpoints.attempt().await;
        let e = t.connect(&attempt).await.unwrap_err().to_string();
        assert!(e.contains("no complete PEM certificate"), "{e}");
    }
}
