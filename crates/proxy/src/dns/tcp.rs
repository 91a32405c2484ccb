//! The TCP side of one binding (RFC 7766): length-prefixed messages, one
//! query at a time per connection, answered in order.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections (more are closed at
//! once), [`MAX_QUERY`] bytes a message (a longer one closes the
//! connection), and [`IDLE_TIMEOUT`] to read a message or write an answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::answer::{HEADER_LEN, Transport};
use super::{Outcome, Serving};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

/// The longest query read (queries are a few hundred bytes; EDNS options
/// and TSIG add little).
pub const MAX_QUERY: usize = 16 * 1024;

/// How long a connection may sit without sending a whole query, or take
/// to read an answer.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait after an accept error (too many open files).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts on `listener` until the binding's `stop` fires.
pub(crate) async fn serve(listener: TcpListener, ctx: Serving) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = tokio::select! {
            _ = ctx.stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "mesh DNS: TCP accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "mesh DNS: TCP connection cap reached; closing");
            continue;
        };
        let task = ctx.clone();
        ctx.tasks.spawn(async move {
            let _permit = permit;
            tokio::select! {
                _ = task.stop.cancelled() => {}
                _ = connection(stream, &task) => {}
            }
        });
    }
}

/// Serves one connection until the client closes it, idles, or breaks the
/// framing.
async fn connection(mut stream: TcpStream, ctx: &Serving) {
    let _ = stream.set_nodelay(true);
    loop {
        let len = match tokio::time::timeout(IDLE_TIMEOUT, stream.read_u16()).await {
            Ok(Ok(n)) => usize::from(n),
            _ => return,
        };
        if !(HEADER_LEN..=MAX_QUERY).contains(&len) {
            ctx.metrics.count(Outcome::Dropped);
            return;
        }
        let mut query = vec![0u8; len];
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut query)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let Some(answer) = ctx.reply(&query, Transport::Tcp).await else {
            continue;
        };
        let Ok(prefix) = u16::try_from(answer.len()) else {
            return;
        };
        let mut framed = Vec::with_capacity(answer.len() + 2);
        framed.extend_from_slice(&prefix.to_be_bytes());
        framed.extend_from_slice(&answer);
        match tokio::time::timeout(IDLE_TIMEOUT, stream.write_all(&framed)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}
