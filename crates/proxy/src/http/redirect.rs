//! A route's redirect answer (MeshHTTPRoute `RequestRedirect`, Envoy's
//! `redirect`): the request's URL with the parts the route replaces.

use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};

use super::respond::{ResponseBody, full};
use crate::model::route::{PathMatch, Redirect, RouteSpec};

/// The redirect answer to the request in `parts`.
pub fn answer(r: &Redirect, route: &RouteSpec, parts: &Parts) -> Response<ResponseBody> {
    let authority = super::headers::authority(parts).unwrap_or_default();
    let (req_host, req_port) = super::headers::split_port(authority);
    let scheme = r.scheme.clone().unwrap_or_else(|| "http".to_owned());
    let host = r.host.clone().unwrap_or_else(|| req_host.to_owned());
    let port = r.port.map(|p| p.to_string()).or(if r.scheme.is_some() {
        None
    } else {
        req_port.map(str::to_owned)
    });
    let path = if let Some(p) = &r.path {
        p.clone()
    } else if let Some(prefix) = &r.prefix {
        match &route.matcher.path {
            PathMatch::Prefix(m) | PathMatch::Segments(m) => {
                format!(
                    "{prefix}{}",
                    parts.uri.path().get(m.len()..).unwrap_or_default()
                )
            }
            _ => parts.uri.path().to_owned(),
        }
    } else {
        parts.uri.path().to_owned()
    };
    let mut location = format!("{scheme}://{host}");
    if let Some(port) = port {
        location.push(':');
        location.push_str(&port);
    }
    location.push_str(&path);
    if let Some(q) = parts.uri.query() {
        location.push('?');
        location.push_str(q);
    }
    let mut response = Response::new(full(bytes::Bytes::new()));
    *response.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::FOUND);
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(http::header::LOCATION, v);
    }
    response
}
