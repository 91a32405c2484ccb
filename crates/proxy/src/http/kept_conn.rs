//! One HTTP/1.1 connection kept across the proxy's own repeated calls to
//! one place (a trace collector): opened on the first request, reused
//! while the peer keeps it open, and opened again when it has closed.
//! A request the old connection could not take (the peer closed it just
//! before) is sent once more on a new one; one that failed after it was
//! sent is not. Never used for proxied traffic.

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

use super::one_shot::{Target, read};

/// A connection to one `http://host:port/path`, kept between requests.
#[derive(Debug)]
pub struct KeptConnection {
    target: Target,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl KeptConnection {
    /// A connection to `uri` (`http://host:port/path`), opened by the
    /// first [`KeptConnection::exchange`].
    pub fn new(uri: &str) -> Result<KeptConnection, String> {
        Ok(KeptConnection {
            target: Target::parse(uri)?,
            sender: None,
        })
    }

    /// Sends `method` with `body` (and its `content_type`, when given)
    /// and returns the status and the whole answer. Must run inside a
    /// Tokio runtime: the connection is driven by a task of its own,
    /// which ends when the connection closes or this is dropped.
    pub async fn exchange(
        &mut self,
        method: http::Method,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let mut request = self.target.request(method, content_type, body)?;
        if let Some(mut sender) = self.sender.take()
            && sender.ready().await.is_ok()
        {
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let answer = read(response).await?;
                    self.sender = Some(sender);
                    return Ok(answer);
                }
                Err(mut e) => match e.take_message() {
                    // Not sent: the peer had closed the connection.
                    Some(unsent) => request = unsent,
                    None => return Err(e.error().to_string()),
                },
            }
        }
        let (mut sender, conn) = self.target.connect().await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("a kept connection ended: {e}");
            }
        });
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let answer = read(response).await?;
        self.sender = Some(sender);
        Ok(answer)
    }
}

#[cfg(test)]
#[path = "kept_conn_tests.rs"]
mod tests;
