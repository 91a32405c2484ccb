use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use super::*;

/// An admin endpoint whose `/ready` answers 503 with `reason` to its
/// first `not_ready` requests and 200 after; returns its address and the
/// count of requests it got.
async fn admin(not_ready: usize, reason: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let app = Router::new().route(
        "/ready",
        get(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < not_ready {
                    (StatusCode::SERVICE_UNAVAILABLE, reason)
                } else {
                    (StatusCode::OK, "ready")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, asked)
}

#[tokio::test]
async fn returns_once_ready_answers_200_after_polling_through_503s() {
    let (addr, asked) = admin(3, "not ready: waiting for listeners").await;
    let waited = until_ready(
        addr,
        Duration::from_secs(30),
        Duration::from_millis(10),
        |_, _| {},
    )
    .await;
    assert!(waited.is_ok(), "{waited:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 4, "three 503s, then the 200");
}

#[tokio::test]
async fn gives_up_at_the_timeout_naming_the_address_and_the_sidecars_reason() {
    let (addr, asked) = admin(usize::MAX, "not ready: waiting for clusters").await;
    let e = until_ready(
        addr,
        Duration::from_millis(200),
        Duration::from_millis(10),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(e.contains(&addr.to_string()), "{e}");
    assert!(e.contains("503"), "{e}");
    assert!(e.contains("waiting for clusters"), "{e}");
    assert!(e.contains("--timeout"), "{e}");
    assert!(asked.load(Ordering::SeqCst) > 1, "it polled more than once");
}

#[tokio::test]
async fn a_sidecar_not_listening_yet_is_waited_for_and_named_on_timeout() {
    // A port nothing listens on: bound, then closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = until_ready(
        addr,
        Duration::from_millis(100),
        Duration::from_millis(10),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(e.contains(&format!("connect {addr}")), "{e}");
}
