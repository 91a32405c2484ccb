//! A WebSocket echo through an `http` service, real binaries and a real
//! WebSocket implementation on both ends (tokio-tungstenite): the client
//! dials web's outbound with `Upgrade: websocket`, the two sidecars carry
//! the upgrade end to end (HTTP/1.1 between them, ALPN `http/1.1`, over
//! mTLS), and the app echoes a text message and a 64 KiB binary one. The
//! route has a 1 s request timeout; the upgraded connection outlives it.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, free_port};

const READY: Duration = Duration::from_secs(30);

/// Echoes every text and binary message of every WebSocket it accepts.
async fn echo_app(listener: tokio::net::TcpListener) {
    while let Ok((tcp, _)) = listener.accept().await {
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                return;
            };
            while let Some(Ok(msg)) = ws.next().await {
                if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[test]
fn a_websocket_echo_passes_through_an_http_service_past_its_request_timeout() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let app = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the app");
    let app_port = app.local_addr().expect("app address").port();
    rt.spawn(echo_app(app));

    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::with_apps(free_port(), app_port);
    let pair = proxy::pair_yaml_speaking(&ports, "1h", "http", &["backend"]);
    let timeout = "type: MeshTimeout\nname: backend-timeout\nmesh: default\nspec:\n  targetRef: {kind: Mesh}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      default:\n        http: {requestTimeout: 1s}\n";
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(&format!("{pair}\n---\n{timeout}")),
    )
    .success();
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);

    rt.block_on(async {
        let url = format!("ws://127.0.0.1:{}/echo", ports.web_outbound);
        let (mut ws, response) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "the WebSocket handshake through the pair failed: {e}\nweb-1:\n{}\nbackend-1:\n{}",
                    web.logs(),
                    backend.logs()
                )
            });
        assert_eq!(response.status(), 101);

        ws.send(Message::text("hello through the mesh")).await.expect("send text");
        let echoed = ws.next().await.expect("an answer").expect("a message");
        assert_eq!(echoed, Message::text("hello through the mesh"));

        let big: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        ws.send(Message::binary(big.clone())).await.expect("send binary");
        let echoed = ws.next().await.expect("an answer").expect("a message");
        assert_eq!(echoed, Message::binary(big));

        // The scenario itself, not a wait for the system: the connection
        // stays quiet for longer than the route's 1 s request timeout.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        ws.send(Message::text("still open")).await.expect("send after the timeout");
        let echoed = ws.next().await.expect("an answer").expect("a message");
        assert_eq!(echoed, Message::text("still open"));
        ws.close(None).await.expect("close");
    });
}
