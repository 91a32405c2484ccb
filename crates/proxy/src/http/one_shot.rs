//! One HTTP/1.1 request over a fresh connection, for the proxy's own
//! calls (span export, application metrics scrapes), never for proxied
//! traffic: no pool, no retries, the whole answer read.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;

/// Sends `method` to `uri` (`http://host:port/path`) with `body` (and
/// its `content_type`, when given), and returns the status and the whole
/// answer; an error says which step failed.
pub async fn exchange(
    method: http::Method,
    uri: &str,
    content_type: Option<&str>,
    body: Bytes,
) -> Result<(http::StatusCode, Bytes), String> {
    let uri: http::Uri = uri.parse().map_err(|e| format!("{uri}: {e}"))?;
    let authority = uri.authority().ok_or("no host")?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connect {authority}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let mut request = http::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(http::header::HOST, authority.as_str());
    if let Some(content_type) = content_type {
        request = request.header(http::header::CONTENT_TYPE, content_type);
    }
    let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
    let exchange = async move {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((status, body))
    };
    let (result, _) = tokio::join!(exchange, conn);
    result
}
