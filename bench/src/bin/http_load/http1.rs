//! The smallest HTTP/1.1 both ends need: one `GET` request head, and a
//! response with a `Content-Length` body. Blocking (client side) and async
//! (server side) readers share the parsing.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// How long a client waits for a response before it counts an error (so a
/// stuck proxy fails the run instead of hanging it).
pub(crate) const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A keep-alive request.
pub(crate) const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";
/// A request that asks the server to close the connection after answering.
pub(crate) const REQUEST_CLOSE: &[u8] =
    b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";

/// Position just past the first `\r\n\r\n` in `buf`, if any.
pub(crate) fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Value of the `Content-Length` header in a response head (0 when absent).
fn content_length(head: &[u8]) -> io::Result<usize> {
    let text = std::str::from_utf8(head).map_err(|_| bad("response head is not UTF-8"))?;
    if !text.starts_with("HTTP/1.1 200") && !text.starts_with("HTTP/1.0 200") {
        let line = text.lines().next().unwrap_or_default();
        return Err(bad(&format!("unexpected response status line {line:?}")));
    }
    for line in text.split("\r\n") {
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            return value.trim().parse().map_err(|_| bad("bad Content-Length"));
        }
    }
    Ok(0)
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Sends `request` and reads one whole response. `buf` is scratch space.
pub(crate) fn round_trip(
    stream: &mut TcpStream,
    request: &[u8],
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    stream.write_all(request)?;
    buf.clear();
    let mut chunk = [0u8; 4096];
    let (end, body) = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before the response",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(buf) {
            break (end, content_length(&buf[..end])?);
        }
    };
    while buf.len() < end + body {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside the body",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}
