use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use super::*;

/// A server that answers every request 200 with its body, counts the
/// connections it accepts, and closes each connection after
/// `per_connection` requests (`Connection: close` on the last).
async fn server(per_connection: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let served = Arc::new(AtomicUsize::new(0));
            tokio::spawn(async move {
                let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let n = served.fetch_add(1, Ordering::SeqCst) + 1;
                    async move {
                        assert_eq!(request.uri().path(), "/v1/traces");
                        let body = http_body_util::BodyExt::collect(request.into_body())
                            .await?
                            .to_bytes();
                        let mut response = http::Response::new(Full::new(body));
                        if n == per_connection {
                            response
                                .headers_mut()
                                .insert(http::header::CONNECTION, "close".parse().unwrap());
                        }
                        Ok::<_, hyper::Error>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (uri, accepted)
}

async fn post(conn: &mut KeptConnection, body: &'static str) -> (http::StatusCode, Bytes) {
    conn.exchange(http::Method::POST, Some("text/plain"), Bytes::from(body))
        .await
        .expect("the exchange")
}

#[tokio::test]
async fn requests_share_one_connection_while_the_peer_keeps_it() {
    let (uri, accepted) = server(usize::MAX).await;
    let mut conn = KeptConnection::new(&uri).unwrap();
    for body in ["one", "two", "three"] {
        assert_eq!(
            post(&mut conn, body).await,
            (http::StatusCode::OK, Bytes::from(body))
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_the_peer_closed_is_opened_again() {
    let (uri, accepted) = server(1).await;
    let mut conn = KeptConnection::new(&uri).unwrap();
    for body in ["one", "two", "three"] {
        assert_eq!(
            post(&mut conn, body).await,
            (http::StatusCode::OK, Bytes::from(body))
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_refused_connection_is_an_error_naming_the_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut conn = KeptConnection::new(&format!("http://{addr}/")).unwrap();
    let e = conn
        .exchange(http::Method::POST, None, Bytes::new())
        .await
        .unwrap_err();
    assert!(e.starts_with(&format!("connect {addr}:")), "{e}");
}
