//! A small client for the control plane's REST API (docs/api.md).
//!
//! Owns turning HTTP and connection failures into messages a person can act
//! on. It never prints; callers decide what to show.

use std::time::Duration;

use meshlink_api::{FieldError, Kind};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::failure::Failure;

/// The REST API port a control plane listens on unless `--api-addr` says
/// otherwise (DESIGN.md §5).
const DEFAULT_API_PORT: u16 = 5681;

/// hyper's words for what a plain HTTP request to a TLS port (the xDS
/// port) gets: the connection closed before any response, or a TLS alert
/// where the status line should be.
const ANSWERED_NOT_IN_HTTP: [&str; 2] = [
    "connection closed before message completed",
    "invalid HTTP version parsed",
];

/// An error response from the API, or a failure to reach it.
#[derive(Debug)]
pub(crate) enum ApiFailure {
    /// The server answered with an error.
    Status {
        status: StatusCode,
        message: String,
        fields: Vec<FieldError>,
    },
    /// The server could not be reached or the response was unreadable.
    Transport(String),
}

impl ApiFailure {
    /// Maps to a CLI failure: 400/422 are bad input, the rest are runtime.
    pub(crate) fn into_failure(self) -> Failure {
        match self {
            ApiFailure::Status {
                status, message, ..
            } if status == StatusCode::BAD_REQUEST
                || status == StatusCode::UNPROCESSABLE_ENTITY
                || status == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Failure::BadInput(message)
            }
            ApiFailure::Status { message, .. } => Failure::Runtime(message),
            ApiFailure::Transport(m) => Failure::Runtime(m),
        }
    }
}

/// Where the admin token came from, so a refusal can say which input to fix.
#[derive(Debug, Clone)]
pub(crate) enum TokenSource {
    /// `--token`.
    Flag,
    /// The `MESHLINK_TOKEN` environment variable.
    Env,
    /// A token file (the default `./meshlink-data/admin-token`).
    File(String),
}

/// Talks to one control plane.
pub(crate) struct ApiClient {
    http: reqwest::Client,
    server: String,
    token: Option<(String, TokenSource)>,
}

/// Query parameters for one resource.
pub(crate) fn scope_query(kind: Kind, mesh: Option<&str>) -> Vec<(&'static str, String)> {
    match mesh {
        Some(m) if kind.allows_mesh() => vec![("mesh", m.to_string())],
        _ => vec![],
    }
}

impl ApiClient {
    pub(crate) fn new(server: &str, token: Option<(String, TokenSource)>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("HTTP client builds");
        ApiClient {
            http,
            server: server.trim_end_matches('/').to_string(),
            token,
        }
    }

    /// Sends a request and decodes a JSON response.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiFailure> {
        let url = format!("{}{path}", self.server);
        let mut req = self
            .http
            .request(method, &url)
            .query(query)
            .timeout(timeout);
        if let Some((t, _)) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.transport_error(e))?;
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(json);
        }
        let err = &json["error"];
        let message = err["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{status}: {}", text.trim()));
        let fields = serde_json::from_value(err["fields"].clone()).unwrap_or_default();
        let message = if status == StatusCode::UNAUTHORIZED {
            self.unauthorized(&message)
        } else {
            message
        };
        Err(ApiFailure::Status {
            status,
            message,
            fields,
        })
    }

    /// A 401, told from the side of the input that caused it.
    fn unauthorized(&self, server_message: &str) -> String {
        // The server names its token file: "... use the token in PATH".
        let file = server_message
            .rsplit_once("use the token in ")
            .map(|(_, p)| p.trim().to_string())
            .unwrap_or_else(|| "<data-dir>/admin-token".to_string());
        let server = &self.server;
        match &self.token {
            None => format!(
                "{server_message} (server {server}); pass --token, export MESHLINK_TOKEN=\"$(cat {file})\" or run from the directory holding meshlink-data/"
            ),
            Some((_, TokenSource::Env)) => format!(
                "the admin token from MESHLINK_TOKEN was refused by {server} (401); unset it or export the token from {file}: export MESHLINK_TOKEN=\"$(cat {file})\""
            ),
            Some((_, TokenSource::Flag)) => format!(
                "the admin token given with --token was refused by {server} (401); pass the token from {file}"
            ),
            Some((_, TokenSource::File(path))) => format!(
                "the admin token read from {path} was refused by {server} (401); that file belongs to another control plane: pass --token or export MESHLINK_TOKEN with the token from {file}"
            ),
        }
    }

    fn transport_error(&self, e: reqwest::Error) -> ApiFailure {
        let mut cause = String::new();
        let mut src: Option<&dyn std::error::Error> = Some(&e);
        while let Some(s) = src {
            cause = s.to_string();
            src = s.source();
        }
        if e.is_connect() {
            ApiFailure::Transport(format!(
                "cannot reach the control plane at {} ({cause}); is meshlink-cp running? Point --server or MESHLINK_SERVER at it",
                self.server
            ))
        } else if e.is_timeout() {
            ApiFailure::Transport(format!(
                "the control plane at {} did not answer in time ({cause})",
                self.server
            ))
        } else if ANSWERED_NOT_IN_HTTP.iter().any(|w| cause.contains(w)) {
            let host = reqwest::Url::parse(&self.server)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| "HOST".to_owned());
            ApiFailure::Transport(format!(
                "request to the control plane at {} failed: {cause}; the server gave no HTTP answer: this looks like the control plane's xDS port (gRPC over TLS), not its REST API port; the REST API port is {DEFAULT_API_PORT} by default: pass --server http://{host}:{DEFAULT_API_PORT} (or set MESHLINK_SERVER)",
                self.server
            ))
        } else {
            ApiFailure::Transport(format!(
                "request to the control plane at {} failed: {cause}",
                self.server
            ))
        }
    }
}
