//! Port choice and the two built-in HTTP apps of the demo.

use super::*;

// === ports ===

/// Picks the default port when free, else a free ephemeral one. Holds every
/// picked port until dropped so no two picks collide.
pub(super) struct PortPicker {
    /// Always take a free ephemeral port (`--random-ports`).
    pub(super) random: bool,
    /// Every port picked so far, held open.
    pub(super) held: Vec<std::net::TcpListener>,
}

impl PortPicker {
    /// Binds `default` (or a free port) on 127.0.0.1 and returns the listener.
    pub(super) fn pick(
        &mut self,
        default: u16,
        what: &str,
    ) -> Result<std::net::TcpListener, Failure> {
        self.pick_on(Ipv4Addr::LOCALHOST, default, what)
    }

    /// [`PortPicker::pick`] on another loopback address.
    pub(super) fn pick_on(
        &mut self,
        host: Ipv4Addr,
        default: u16,
        what: &str,
    ) -> Result<std::net::TcpListener, Failure> {
        let bind = |p: u16| std::net::TcpListener::bind(SocketAddr::from((host, p)));
        if !self.random {
            match bind(default) {
                Ok(l) => return Ok(l),
                Err(e) => {
                    let l = bind(0).map_err(|e| {
                        Failure::Runtime(format!("cannot bind a free port on {host}: {e}"))
                    })?;
                    println!(
                        "port {default} ({what}) is not available ({e}); using {} instead",
                        port_of(&l)
                    );
                    return Ok(l);
                }
            }
        }
        bind(0).map_err(|e| Failure::Runtime(format!("cannot bind a free port on {host}: {e}")))
    }

    /// Like [`PortPicker::pick`] for a port another process will bind.
    pub(super) fn pick_port(&mut self, default: u16, what: &str) -> Result<u16, Failure> {
        self.pick_port_on(Ipv4Addr::LOCALHOST, default, what)
    }

    /// [`PortPicker::pick_port`] on another loopback address.
    pub(super) fn pick_port_on(
        &mut self,
        host: Ipv4Addr,
        default: u16,
        what: &str,
    ) -> Result<u16, Failure> {
        let l = self.pick_on(host, default, what)?;
        let port = port_of(&l);
        self.held.push(l);
        Ok(port)
    }
}

pub(super) fn port_of(l: &std::net::TcpListener) -> u16 {
    l.local_addr().map(|a| a.port()).unwrap_or(0)
}

pub(super) fn into_tokio(l: std::net::TcpListener) -> Result<tokio::net::TcpListener, Failure> {
    l.set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(l))
        .map_err(|e| Failure::Runtime(format!("cannot serve an app: {e}")))
}

// === apps ===

/// A tiny HTTP/1.1 server answering every request with `body`.
pub(super) async fn serve_app(listener: tokio::net::TcpListener, body: &'static str) {
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((stream, _)) => {
                conns.spawn(answer(stream, body));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Reads one request head and answers it, then closes.
pub(super) async fn answer(mut stream: tokio::net::TcpStream, body: &'static str) {
    let read_head = async {
        let mut head = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream.read(&mut chunk).await?;
            head.extend_from_slice(&chunk[..n]);
            if n == 0 || head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > 16 * 1024 {
                return Ok::<_, std::io::Error>(());
            }
        }
    };
    if !matches!(
        tokio::time::timeout(Duration::from_secs(10), read_head).await,
        Ok(Ok(()))
    ) {
        return;
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
