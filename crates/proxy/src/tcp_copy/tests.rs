//! The copy's bounds on paused time, over in-memory pipes: an idle
//! connection and a half-closed one are closed, a half-closed one whose
//! other direction keeps sending is not, and a normal close is a close.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream, duplex};

use super::*;

const BOUNDS: TcpTimeouts = TcpTimeouts {
    idle: Duration::from_secs(3600),
    half_closed: Duration::from_secs(30),
};

/// A proxied pair: (client end, server end, the copy's task).
fn proxied() -> (
    DuplexStream,
    DuplexStream,
    tokio::task::JoinHandle<io::Result<CopyEnd>>,
) {
    let (client, proxy_down) = duplex(1024);
    let (proxy_up, server) = duplex(1024);
    let task = tokio::spawn(copy(proxy_down, proxy_up, 1024, BOUNDS));
    (client, server, task)
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed_after_the_idle_bound() {
    let (mut client, mut server, task) = proxied();
    client.write_all(b"hi").await.unwrap();
    let mut buf = [0u8; 2];
    server.read_exact(&mut buf).await.unwrap();
    let start = tokio::time::Instant::now();
    assert_eq!(task.await.unwrap().unwrap(), CopyEnd::Idle);
    let waited = start.elapsed();
    assert!(
        waited >= BOUNDS.idle && waited <= 2 * BOUNDS.idle,
        "{waited:?}"
    );
    // Both ends see the close.
    assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    assert_eq!(server.read(&mut buf).await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_half_closed_connection_is_freed_after_the_half_closed_bound() {
    let (mut client, mut server, task) = proxied();
    // The client sends its request and goes away; the server never closes.
    client.write_all(b"request").await.unwrap();
    client.shutdown().await.unwrap();
    let mut got = Vec::new();
    server.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"request", "the end of stream is passed on");
    let start = tokio::time::Instant::now();
    assert_eq!(task.await.unwrap().unwrap(), CopyEnd::HalfClosed);
    let waited = start.elapsed();
    assert!(waited <= 2 * BOUNDS.half_closed, "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_half_closed_connection_still_sending_is_never_cut() {
    let (mut client, mut server, task) = proxied();
    client.shutdown().await.unwrap();
    // The server streams its answer slowly: a chunk every 20 s (under the
    // half-closed bound) for 10 minutes, then closes.
    let streaming = tokio::spawn(async move {
        for _ in 0..30 {
            server.write_all(b"chunk").await.unwrap();
            tokio::time::sleep(Duration::from_secs(20)).await;
        }
        server.shutdown().await.unwrap();
    });
    let mut got = Vec::new();
    client.read_to_end(&mut got).await.unwrap();
    assert_eq!(got.len(), 30 * 5, "every chunk arrived");
    streaming.await.unwrap();
    assert_eq!(task.await.unwrap().unwrap(), CopyEnd::Closed);
}

#[tokio::test(start_paused = true)]
async fn both_ends_closing_is_a_close() {
    let (mut client, mut server, task) = proxied();
    client.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
    assert_eq!(task.await.unwrap().unwrap(), CopyEnd::Closed);
}
