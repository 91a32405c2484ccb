//! Request mirroring (MeshHTTPRoute `RequestMirror`, Envoy's
//! `request_mirror_policies`): a share of a route's requests is also sent,
//! fire and forget, to another cluster, with `-shadow` appended to the
//! authority as Envoy does. The answer is dropped; a failure is only
//! logged. A body is mirrored only while it fits the replay copy (64 KiB):
//! the copy reads the same downstream body as the real request.

use http::request::Parts;

use super::forward;
use super::replay::ReplayBody;
use crate::dataplane::Dataplane;
use crate::model::route::ForwardAction;

/// Starts the mirrors of `forward` that this request falls into.
pub fn spawn(view: &Dataplane, forward: &ForwardAction, parts: &Parts, body: &ReplayBody) {
    for mirror in &forward.mirrors {
        if rand::random_range(0..1_000_000) >= mirror.per_million {
            continue;
        }
        let Some(cluster) = view.clusters.get(&mirror.cluster).cloned() else {
            tracing::debug!(cluster = %mirror.cluster, "mirror cluster not ready; not mirrored");
            continue;
        };
        let Some(copy) = body.try_clone() else {
            continue;
        };
        let mut parts = parts.clone();
        shadow_authority(&mut parts);
        tokio::spawn(async move {
            let pool = cluster.http_pool();
            let request = match forward::upstream_request(&parts, pool.is_http2(), copy) {
                Ok(r) => r,
                Err(e) => return tracing::debug!("mirror not sent: {e}"),
            };
            if let Err(e) = forward::try_once(&cluster, &pool, request, None, None).await {
                tracing::debug!(cluster = %cluster.spec.name, "mirror failed: {e}");
            }
        });
    }
}

/// `host` becomes `host-shadow` (the port, if any, kept).
fn shadow_authority(parts: &mut Parts) {
    let Some(authority) = super::headers::authority(parts).map(str::to_owned) else {
        return;
    };
    let shadow = match super::headers::split_port(&authority) {
        (h, Some(p)) => format!("{h}-shadow:{p}"),
        (h, None) => format!("{h}-shadow"),
    };
    if let Ok(v) = http::HeaderValue::from_str(&shadow) {
        parts.headers.insert(http::header::HOST, v);
    }
    if parts.uri.authority().is_some() {
        let mut uri = parts.uri.clone().into_parts();
        uri.authority = http::uri::Authority::try_from(shadow.as_str()).ok();
        if let Ok(u) = http::Uri::from_parts(uri) {
            parts.uri = u;
        }
    }
}
