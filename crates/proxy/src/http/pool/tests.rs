//! The HTTP/2 pool spreads requests over connections: a second connection
//! to an endpoint only when the first carries STREAMS_PER_CONNECTION
//! requests, and none while places are free.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use super::{Dialer, Pool, STREAMS_PER_CONNECTION, Sender};

/// An HTTP/2 server that counts the connections it accepted.
async fn h2_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(http2::Builder::new(TokioExecutor::new()).serve_connection(
                TokioIo::new(tcp),
                service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Empty::<bytes::Bytes>::new(),
                    ))
                }),
            ));
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn a_second_connection_is_dialed_only_when_the_first_is_full() {
    let (addr, accepted) = h2_server().await;
    let pool = Pool::new(Dialer {
        tls: None,
        connect_timeout: Duration::from_secs(5),
        http2: true,
        circuit: Default::default(),
    });
    let mut held = Vec::new();
    for _ in 0..STREAMS_PER_CONNECTION {
        let Sender::Http2(_, slot) = pool.sender(addr).await.unwrap() else {
            panic!("an HTTP/2 pool gives HTTP/2 senders");
        };
        held.push(slot);
    }
    assert_eq!(
        pool.http2_connections(addr).await,
        1,
        "one connection carries them all"
    );

    let Sender::Http2(_, extra) = pool.sender(addr).await.unwrap() else {
        panic!("an HTTP/2 sender");
    };
    assert_eq!(
        pool.http2_connections(addr).await,
        2,
        "the full one gets a sibling"
    );

    // Places freed: the next requests use the connections there are.
    drop(held);
    drop(extra);
    for _ in 0..10 {
        let _ = pool.sender(addr).await.unwrap();
    }
    assert_eq!(pool.http2_connections(addr).await, 2);
    // The server saw exactly those two.
    tokio::time::timeout(Duration::from_secs(10), async {
        while accepted.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the server accepts both connections");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// A destination that accepts TCP and never answers the ClientHello (a
/// plain app on a mesh port) fails within the cluster's connect timeout,
/// as in Envoy, not after a separate, longer handshake timeout.
#[tokio::test]
async fn a_silent_tls_peer_fails_within_the_connect_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    let config =
        rustls::ClientConfig::builder_with_provider(meshlink_identity::tls::crypto_provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("backend").unwrap();
    let tls = (Arc::new(config), name);
    let Err(e) = super::connect(addr, Duration::from_millis(200), Some(&tls)).await else {
        panic!("the handshake cannot finish");
    };
    assert_eq!(
        e.kind(),
        meshlink_runtime::ErrorKind::HandshakeTimeout,
        "{e}"
    );
    assert!(
        e.to_string().contains("within the connect timeout (200ms)"),
        "{e}"
    );
    held.abort();
}
