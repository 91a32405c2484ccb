//! `http-load serve`: a tiny keep-alive HTTP/1.1 server that answers every
//! request head with `200 OK` and a fixed body. It is the "app" behind every
//! variant, so its own cost is the same in all of them.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::http1::head_end;

/// Serves until the process is killed.
pub(crate) async fn serve(addr: SocketAddr, body_bytes: usize) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {body_bytes}\r\n");
    let mut keep = head.clone().into_bytes();
    keep.extend_from_slice(b"\r\n");
    keep.extend(std::iter::repeat_n(b'x', body_bytes));
    let mut close = head.into_bytes();
    close.extend_from_slice(b"Connection: close\r\n\r\n");
    close.extend(std::iter::repeat_n(b'x', body_bytes));
    let (keep, close): (&'static [u8], &'static [u8]) = (keep.leak(), close.leak());
    eprintln!("http-load serve: listening on {addr}");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors or similar: keep serving.
                eprintln!("accept: {e}");
                continue;
            }
        };
        tokio::spawn(async move {
            let _ = connection(stream, keep, close).await;
        });
    }
}

async fn connection(mut stream: TcpStream, keep: &[u8], close: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        // Answer every complete request head already buffered (pipelining).
        while let Some(end) = head_end(&buf) {
            let wants_close = buf[..end]
                .windows(17)
                .any(|w| w.eq_ignore_ascii_case(b"connection: close"));
            buf.drain(..end);
            if wants_close {
                stream.write_all(close).await?;
                return stream.shutdown().await;
            }
            stream.write_all(keep).await?;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
