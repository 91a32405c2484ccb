//! Shared fixtures for the link tests: site CAs and credentials from
//! `meshlink-identity`, routers on loopback port 0, status waits with a
//! deadline, an echo server, and a relay that can go silent without
//! closing its sockets.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use meshlink_identity::SiteCa;
use meshlink_link::{
    CredentialPem, LinkConfig, LinkMetrics, RoleConfig, Router, RouterConfig, RouterOptions,
    RouterStatus,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A failure timeout for waits, never a performance bound.
pub const DEADLINE: Duration = Duration::from_secs(30);
const DAY: Duration = Duration::from_secs(86_400);

/// A site CA that issues link credentials.
pub struct Site {
    pub ca: SiteCa,
}

impl Site {
    pub fn new(name: &str) -> Site {
        let material = SiteCa::generate(name, SiteCa::DEFAULT_NAME, DAY * 365).unwrap();
        Site {
            ca: SiteCa::load(&material).unwrap(),
        }
    }

    /// A RouterAccess server credential for `host`; verifies clients
    /// against this CA.
    pub fn server(&self, host: &str) -> CredentialPem {
        let (cert, key) = self
            .ca
            .issue_server_cert(&[host.to_owned()], DAY, SystemTime::now())
            .unwrap();
        CredentialPem {
            tls_crt: cert.cert_pem + &cert.chain_pem.concat(),
            tls_key: key,
            ca_crt: self.ca.cert_pem().to_owned(),
        }
    }

    /// A Link client credential from this CA (as a grant redemption
    /// returns it); verifies the server against this CA.
    pub fn client(&self, subject: &str) -> CredentialPem {
        let (cert, key) = self
            .ca
            .issue_client_cert(subject, DAY, SystemTime::now())
            .unwrap();
        CredentialPem {
            tls_crt: cert.cert_pem + &cert.chain_pem.concat(),
            tls_key: key,
            ca_crt: self.ca.cert_pem().to_owned(),
        }
    }
}

pub fn router(id: &str) -> Router {
    Router::start(
        RouterOptions {
            router_id: id.into(),
            site: format!("site-{id}"),
            edge: false,
        },
        Arc::new(LinkMetrics::default()),
    )
    .unwrap()
}

/// A config with one inter-router role on 127.0.0.1:`port`.
pub fn acceptor_config(site: &Site, port: u16) -> RouterConfig {
    let mut cfg = RouterConfig::default();
    cfg.credentials
        .insert("skupper-site-server".into(), site.server("127.0.0.1"));
    cfg.roles.push(RoleConfig {
        name: "inter-router".into(),
        host: "127.0.0.1".into(),
        port,
        credential: "skupper-site-server".into(),
    });
    cfg
}

/// Adds link `name` to `addr` with a client credential `cred`.
pub fn add_link(cfg: &mut RouterConfig, name: &str, addr: SocketAddr, cred: CredentialPem) {
    let secret = format!("{name}-secret");
    cfg.credentials.insert(secret.clone(), cred);
    cfg.links.push(LinkConfig {
        name: name.into(),
        host: addr.ip().to_string(),
        port: addr.port(),
        cost: 1,
        credential: secret,
    });
}

/// Waits until `pred` holds for the router's status; panics with the last
/// status after [`DEADLINE`].
pub async fn wait_status(
    router: &Router,
    what: &str,
    pred: impl Fn(&RouterStatus) -> bool,
) -> RouterStatus {
    wait_watch(router.status(), what, pred).await
}

/// Waits until `pred` holds for a watch channel's value.
pub async fn wait_watch<T: Clone + std::fmt::Debug>(
    mut rx: watch::Receiver<T>,
    what: &str,
    pred: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        {
            let v = rx.borrow_and_update();
            if pred(&v) {
                return v.clone();
            }
        }
        if tokio::time::timeout_at(deadline, rx.changed())
            .await
            .is_err()
        {
            panic!(
                "timed out waiting for {what}; last value: {:#?}",
                *rx.borrow()
            );
        }
    }
}

/// The address role `name` is bound on, once bound.
pub async fn role_addr(router: &Router, name: &str) -> SocketAddr {
    let s = wait_status(router, "the role to bind", |s| {
        s.roles.get(name).and_then(|b| b.addr()).is_some()
    })
    .await;
    s.roles[name].addr().unwrap()
}

/// A TCP echo server: echoes until the client's FIN, then closes its own
/// side (half-close both ways).
pub async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

/// Sends `data`, half-closes, and reads the answer to the end.
pub async fn round_trip<S>(mut s: S, data: &[u8]) -> Vec<u8>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut r, mut w) = tokio::io::split(&mut s);
    let write = async {
        w.write_all(data).await.unwrap();
        w.shutdown().await.unwrap();
    };
    let mut got = Vec::new();
    let read = r.read_to_end(&mut got);
    let (_, n) = tokio::join!(write, read);
    n.unwrap();
    got
}

/// Bytes that differ per `seed`, so crossed flows would be noticed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A TCP relay in front of `target` that can go silent: while frozen it
/// forwards nothing either way but keeps every socket open (no FIN, no
/// RST), as a peer whose host stopped answering.
pub struct Relay {
    pub addr: SocketAddr,
    frozen: watch::Sender<bool>,
}

impl Relay {
    pub async fn start(target: SocketAddr) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let frozen = watch::Sender::new(false);
        let rx = frozen.subscribe();
        tokio::spawn(async move {
            loop {
                let Ok((a, _)) = l.accept().await else { return };
                let Ok(b) = TcpStream::connect(target).await else {
                    continue;
                };
                let (ar, aw) = a.into_split();
                let (br, bw) = b.into_split();
                tokio::spawn(pump(ar, bw, rx.clone()));
                tokio::spawn(pump(br, aw, rx.clone()));
            }
        });
        Relay { addr, frozen }
    }

    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => match n { Ok(0) | Err(_) => break, Ok(n) => n },
            _ = frozen.wait_for(|f| *f) => continue,
        };
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    // Keep the sockets open while frozen: a silent peer sends no FIN.
    let _ = frozen.wait_for(|f| !*f).await;
    let _ = to.shutdown().await;
}
