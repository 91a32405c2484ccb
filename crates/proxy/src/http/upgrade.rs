//! HTTP/1.1 upgrades (WebSocket and the like) through the mesh: the
//! request goes out on a connection of its own, HTTP/1.1 end to end
//! (between sidecars too: ALPN `http/1.1` on that one mTLS connection),
//! and once the upstream answers `101 Switching Protocols` both sides'
//! connections are spliced and bytes flow both ways until either closes.
//!
//! Owns only the splice task. No retries, no route timeout after the
//! switch: an upgraded connection lives as long as its peers keep it.

use http::header::{CONNECTION, HeaderValue, UPGRADE};
use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use meshlink_runtime::{ErrorKind, ProxyError};

use super::pool::Pool;
use super::replay::ReplayBody;

/// The protocol a request asks to upgrade to (`Upgrade` named in
/// `Connection`, HTTP/1.1 only), if any.
pub fn requested(parts: &Parts) -> Option<HeaderValue> {
    if parts.version != http::Version::HTTP_11 {
        return None;
    }
    let wants = parts
        .headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    wants.then(|| parts.headers.get(UPGRADE).cloned()).flatten()
}

/// Sends the upgrade request in `parts` (hop-by-hop headers already
/// stripped) to `addr` and, on `101`, splices the two connections.
pub async fn forward(
    pool: &Pool,
    addr: std::net::SocketAddr,
    mut parts: Parts,
    protocol: HeaderValue,
    body: ReplayBody,
) -> Result<Response<Incoming>, ProxyError> {
    let downstream = parts.extensions.remove::<OnUpgrade>().ok_or_else(|| {
        ProxyError::downstream(ErrorKind::BadRequest, "this connection cannot be upgraded")
    })?;
    parts.headers.insert(UPGRADE, protocol);
    parts
        .headers
        .insert(CONNECTION, HeaderValue::from_static("upgrade"));
    let mut send = pool.dial_upgrade(addr).await?;
    let request = super::forward::upstream_request(&parts, false, body)?;
    let mut response = send
        .send_request(request)
        .await
        .map_err(|e| ProxyError::upstream(ErrorKind::Reset, format!("upgrade request: {e}")))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(response);
    }
    let upstream = hyper::upgrade::on(&mut response);
    tokio::spawn(async move {
        let (Ok(down), Ok(up)) = (downstream.await, upstream.await) else {
            tracing::debug!(%addr, "an upgrade did not complete");
            return;
        };
        let (mut down, mut up) = (TokioIo::new(down), TokioIo::new(up));
        if let Err(e) = tokio::io::copy_bidirectional(&mut down, &mut up).await {
            tracing::debug!(%addr, "upgraded connection ended: {e}");
        }
    });
    Ok(response)
}
