//! One HTTP/1.1 request over a fresh connection, for the proxy's own
//! calls (span export, application metrics scrapes), never for proxied
//! traffic: no pool, no retries, the whole answer read. The steps
//! (parse, connect, send) are shared with [`super::kept_conn`], which
//! keeps the connection for the next request.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Where a request goes: `http://host:port/path` taken apart.
#[derive(Debug, Clone)]
pub struct Target {
    authority: http::uri::Authority,
    path: String,
}

impl Target {
    /// `uri` (`http://host:port/path`); an error names what is missing.
    pub fn parse(uri: &str) -> Result<Target, String> {
        let parsed: http::Uri = uri.parse().map_err(|e| format!("{uri}: {e}"))?;
        let authority = parsed
            .authority()
            .ok_or_else(|| format!("{uri}: no host"))?
            .clone();
        let path = parsed
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        Ok(Target { authority, path })
    }

    /// The request to send: `method` with `body` (and its
    /// `content_type`, when given).
    pub fn request(
        &self,
        method: http::Method,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<http::Request<Full<Bytes>>, String> {
        let mut request = http::Request::builder()
            .method(method)
            .uri(self.path.as_str())
            .header(http::header::HOST, self.authority.as_str());
        if let Some(content_type) = content_type {
            request = request.header(http::header::CONTENT_TYPE, content_type);
        }
        request.body(Full::new(body)).map_err(|e| e.to_string())
    }

    /// A new HTTP/1.1 connection: the handle to send on and the
    /// connection to drive.
    pub async fn connect(
        &self,
    ) -> Result<
        (
            SendRequest<Full<Bytes>>,
            Connection<TokioIo<TcpStream>, Full<Bytes>>,
        ),
        String,
    > {
        let port = self.authority.port_u16().unwrap_or(80);
        let host = self
            .authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connect {}: {e}", self.authority))?;
        hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())
    }
}

/// The status and the whole body of `response`.
pub async fn read(
    response: http::Response<hyper::body::Incoming>,
) -> Result<(http::StatusCode, Bytes), String> {
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    Ok((status, body))
}

/// Sends `method` to `uri` (`http://host:port/path`) with `body` (and
/// its `content_type`, when given), and returns the status and the whole
/// answer; an error says which step failed.
pub async fn exchange(
    method: http::Method,
    uri: &str,
    content_type: Option<&str>,
    body: Bytes,
) -> Result<(http::StatusCode, Bytes), String> {
    let target = Target::parse(uri)?;
    let request = target.request(method, content_type, body)?;
    let (mut sender, conn) = target.connect().await?;
    let exchange = async move {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        read(response).await
    };
    let (result, _) = tokio::join!(exchange, conn);
    result
}
