//! The web console at `/`: the built assets of `console/` (committed under
//! `crates/cp/console/dist`, see docs/console.md), embedded at compile time
//! with `include_bytes!`, so `cargo build` alone serves a working console.
//!
//! Owns only static files and their security headers: a strict
//! Content-Security-Policy (scripts, styles and fetches from this origin
//! only, no inline code, no framing), `nosniff`, no referrer. The console
//! reads the API with the admin token in an `Authorization` header; nothing
//! here sees or needs the token, and nothing here may serve API data.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, REFERRER_POLICY, VARY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::ApiError;

/// The console's Content-Security-Policy: everything from this origin only,
/// no inline scripts or styles, no plugins, never framed.
pub(super) const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: its URL path, media type, bytes and gzip bytes.
struct Asset {
    path: &'static str,
    media_type: &'static str,
    body: &'static [u8],
    gzip: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $media_type:literal) => {
        Asset {
            path: $path,
            media_type: $media_type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/dist/", $path)),
            gzip: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/console/dist/",
                $path,
                ".gz"
            )),
        }
    };
}

/// Every file `vite build` writes (fixed names, see console/vite.config.ts).
static ASSETS: [Asset; 4] = [
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("assets/app.js", "text/javascript; charset=utf-8"),
    asset!("assets/graph.js", "text/javascript; charset=utf-8"),
    asset!("assets/style.css", "text/css; charset=utf-8"),
];

/// The console's routes: `/`, `/index.html` and `/assets/{file}`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/assets/{file}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&ASSETS[0], &headers)
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let path = format!("assets/{file}");
    match ASSETS.iter().find(|a| a.path == path) {
        Some(a) => serve(a, &headers),
        None => ApiError::not_found(format!(
            "no console asset /{path}; the console lives at / (see docs/console.md)"
        ))
        .into_response(),
    }
}

/// A strong ETag per asset, computed once.
fn etag(i: usize) -> &'static HeaderValue {
    static TAGS: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    &TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let hash = Sha256::digest(a.body);
                let hex: String = hash[..12].iter().map(|b| format!("{b:02x}")).collect();
                HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header")
            })
            .collect()
    })[i]
}

fn serve(a: &'static Asset, req: &HeaderMap) -> Response {
    let i = ASSETS
        .iter()
        .position(|x| std::ptr::eq(x, a))
        .expect("asset from the table");
    let tag = etag(i);
    let gzip = req
        .get(ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    let not_modified = req.get(IF_NONE_MATCH) == Some(tag);
    let mut res = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        let mut r = a.gzip.into_response();
        r.headers_mut()
            .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        a.body.into_response()
    };
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(a.media_type));
    h.insert(ETAG, tag.clone());
    h.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    // File names carry no hash: revalidate every time (a 304 when unchanged).
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
    );
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_loads_only_files_that_are_embedded_and_has_no_inline_script() {
        let html = std::str::from_utf8(ASSETS[0].body).unwrap();
        for part in html.split("<script").skip(1) {
            let tag = &part[..part.find('>').unwrap()];
            assert!(
                tag.contains("src=\"/"),
                "inline script in index.html: {tag}"
            );
        }
        for reference in html.split(['"']).filter(|s| s.starts_with("/assets/")) {
            assert!(
                ASSETS.iter().any(|a| format!("/{}", a.path) == reference),
                "index.html loads {reference}, which is not embedded"
            );
        }
    }
}
