//! Workload mTLS over real loopback TCP (tokio-rustls): CA rotation keeps
//! proxies on the old and new CA talking in both directions while the
//! bundle holds both roots, and cuts off the old CA once it is removed;
//! SPIFFE verification rejects the wrong service or trust domain.

mod cert_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cert_support::{ONE_DAY, TEN_YEARS, ca_params, key, proxy_csr, self_signed, signed_by};
use meshlink_identity::{
    CaRoot, ClientAuth, IssuedCert, MeshCa, RotationPhase, RotationState, SpiffeId, TrustBundle,
    client_config, peer_spiffe_id, server_config,
};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A proxy's credentials: certificate from the CSR flow and its own key.
struct Proxy {
    cert: IssuedCert,
    key_pem: String,
    id: SpiffeId,
}

fn builtin(backend: &str, td: &str) -> MeshCa {
    MeshCa::load(&MeshCa::generate_builtin("default", backend, td, TEN_YEARS).unwrap()).unwrap()
}

fn proxy(ca: &MeshCa, td: &str, service: &str) -> Proxy {
    let id = SpiffeId::new(td, service).unwrap();
    let (key, csr) = proxy_csr(&id.to_string());
    let cert = ca
        .issue_from_csr(&csr, &id, ONE_DAY, SystemTime::now())
        .unwrap();
    Proxy {
        cert,
        key_pem: key.serialize_pem(),
        id,
    }
}

/// What each side saw: (server's view of the client, client's view of the
/// server).
type Seen = (Option<SpiffeId>, Option<SpiffeId>);

/// The error of each side that failed (`None`: that side succeeded).
#[derive(Debug)]
struct Failure {
    server: Option<String>,
    client: Option<String>,
}

/// One mTLS connection: `server` serves with `server_bundle`, `client`
/// connects with `client_bundle`, expecting `expect` if given; they
/// exchange a ping and a pong.
async fn handshake(
    server: &Proxy,
    server_bundle: &TrustBundle,
    client: &Proxy,
    client_bundle: &TrustBundle,
    expect: Option<SpiffeId>,
) -> Result<Seen, Failure> {
    let client_leaf = Some((&client.cert, client.key_pem.as_str()));
    let client_cfg = client_config(client_leaf, client_bundle, expect).unwrap();
    connect(server, server_bundle, ClientAuth::Required, client_cfg).await
}

/// Like `handshake`, with a chosen client-auth mode and client config.
async fn connect(
    server: &Proxy,
    server_bundle: &TrustBundle,
    auth: ClientAuth,
    client_cfg: Arc<rustls::ClientConfig>,
) -> Result<Seen, Failure> {
    let server_cfg = server_config(&server.cert, &server.key_pem, server_bundle, auth).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();

    let serve = async {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut tls = TlsAcceptor::from(server_cfg)
            .accept(tcp)
            .await
            .map_err(|e| format!("server: {e}"))?;
        let (_, conn) = tls.get_ref();
        assert_eq!(
            conn.protocol_version(),
            Some(rustls::ProtocolVersion::TLSv1_3)
        );
        let peer = peer_spiffe_id(conn.peer_certificates().unwrap_or_default());
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf)
            .await
            .map_err(|e| format!("server read: {e}"))?;
        tls.write_all(b"pong")
            .await
            .map_err(|e| format!("server write: {e}"))?;
        tls.shutdown()
            .await
            .map_err(|e| format!("server shutdown: {e}"))?;
        Ok::<_, String>(peer)
    };
    let connect = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        // Any name: peers are identified by SPIFFE ID, never by hostname.
        let name = ServerName::try_from("meshlink.invalid").unwrap();
        let mut tls = TlsConnector::from(client_cfg)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("client: {e}"))?;
        let peer = peer_spiffe_id(tls.get_ref().1.peer_certificates().unwrap_or_default());
        tls.write_all(b"ping")
            .await
            .map_err(|e| format!("client write: {e}"))?;
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf)
            .await
            .map_err(|e| format!("client read: {e}"))?;
        assert_eq!(&buf, b"pong");
        Ok::<_, String>(peer)
    };
    let both = async { tokio::join!(serve, connect) };
    let (served, connected) = tokio::time::timeout(Duration::from_secs(20), both)
        .await
        .expect("handshake neither completed nor failed within 20 s");
    match (served, connected) {
        (Ok(s), Ok(c)) => Ok((s, c)),
        (s, c) => Err(Failure {
            server: s.err(),
            client: c.err(),
        }),
    }
}

#[tokio::test]
async fn ca_rotation_keeps_old_and_new_proxies_talking_until_the_old_root_goes() {
    let (old_ca, new_ca) = (builtin("ca-old", "default"), builtin("ca-new", "default"));
    let a = proxy(&old_ca, "default", "a");
    let b = proxy(&new_ca, "default", "b");
    assert_eq!(a.cert.ca_fingerprint, old_ca.fingerprint());
    assert_eq!(b.cert.ca_fingerprint, new_ca.fingerprint());

    // Rotating: proxy A still holds an old-CA certificate.
    let (old, new) = (CaRoot::of(&old_ca), CaRoot::of(&new_ca));
    let rotating = RotationState::compute(&new, Some(&old), 1);
    assert!(matches!(
        rotating.phase,
        RotationPhase::Rotating {
            proxies_on_old: 1,
            ..
        }
    ));
    let both = &rotating.bundle;
    assert!(both.contains(&old.fingerprint) && both.contains(&new.fingerprint));

    // A serves, B connects (expecting A) ...
    let seen = handshake(&a, both, &b, both, Some(a.id.clone()))
        .await
        .unwrap();
    assert_eq!(seen, (Some(b.id.clone()), Some(a.id.clone())));
    // ... and B serves, A connects (expecting B).
    let seen = handshake(&b, both, &a, both, Some(b.id.clone()))
        .await
        .unwrap();
    assert_eq!(seen, (Some(a.id.clone()), Some(b.id.clone())));

    // Every proxy moved to the new CA: the old root leaves the bundle.
    let stable = RotationState::compute(&new, Some(&old), 0);
    assert_eq!(stable.phase, RotationPhase::Stable);
    let only_new = &stable.bundle;
    assert!(!only_new.contains(&old.fingerprint));

    // A still presenting its old-CA certificate is refused as a server ...
    let err = handshake(&a, only_new, &b, only_new, None)
        .await
        .unwrap_err();
    let client_err = err.client.as_deref().unwrap_or_default();
    assert!(client_err.contains("UnknownIssuer"), "{err:?}");
    // ... and as a client.
    let err = handshake(&b, only_new, &a, only_new, None)
        .await
        .unwrap_err();
    let server_err = err.server.as_deref().unwrap_or_default();
    assert!(server_err.contains("UnknownIssuer"), "{err:?}");

    // Once A is re-certified by the new CA it is accepted again.
    let a2 = proxy(&new_ca, "default", "a");
    let seen = handshake(&a2, only_new, &b, only_new, None).await.unwrap();
    assert_eq!(seen, (Some(b.id.clone()), Some(a2.id.clone())));
}

#[tokio::test]
async fn spiffe_verification_rejects_the_wrong_service_or_trust_domain() {
    let ca = builtin("ca-1", "default");
    let foreign_ca = builtin("ca-x", "other");
    let web = proxy(&ca, "default", "web");
    let client = proxy(&ca, "default", "client");
    let impostor = proxy(&foreign_ca, "other", "web");
    // The bundle trusts both CAs, so only the SPIFFE check can refuse.
    let bundle = TrustBundle::new(vec![ca.root_pem().into(), foreign_ca.root_pem().into()]);

    let expected_web = SpiffeId::new("default", "web").unwrap();
    let seen = handshake(&web, &bundle, &client, &bundle, Some(expected_web.clone()))
        .await
        .unwrap();
    assert_eq!(seen.1, Some(expected_web.clone()));

    let wrong_service = SpiffeId::new("default", "api").unwrap();
    let err = handshake(&web, &bundle, &client, &bundle, Some(wrong_service))
        .await
        .unwrap_err();
    let client_err = err.client.as_deref().unwrap_or_default();
    assert!(
        client_err.contains("peer is spiffe://default/web, expected spiffe://default/api"),
        "{err:?}"
    );

    let err = handshake(&impostor, &bundle, &client, &bundle, Some(expected_web))
        .await
        .unwrap_err();
    let client_err = err.client.as_deref().unwrap_or_default();
    assert!(
        client_err.contains("peer is spiffe://other/web, expected spiffe://default/web"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_provided_intermediate_ca_serves_its_chain_in_the_handshake() {
    let (root, root_key, _) = self_signed(&ca_params("Example Root"));
    let (int, int_key, _) = signed_by(&ca_params("Example Int"), &root, key(&root_key));
    let material =
        MeshCa::validate_provided(&int, &int_key, Some(&root), SystemTime::now()).unwrap();
    let ca = MeshCa::load(&material).unwrap();
    let (s, c) = (proxy(&ca, "default", "s"), proxy(&ca, "default", "c"));
    // Only the root is trusted: the intermediate must come from the peer.
    let bundle = TrustBundle::new(vec![ca.root_pem().to_owned()]);
    assert_eq!(bundle.roots_pem.len(), 1);
    let seen = handshake(&s, &bundle, &c, &bundle, Some(s.id.clone()))
        .await
        .unwrap();
    assert_eq!(seen, (Some(c.id.clone()), Some(s.id.clone())));
}

#[tokio::test]
async fn client_certificates_are_required_optional_or_not_asked_for() {
    let ca = builtin("ca-1", "default");
    let server = proxy(&ca, "default", "web");
    let bundle = TrustBundle::new(vec![ca.root_pem().to_owned()]);
    let anonymous = client_config(None, &bundle, Some(server.id.clone())).unwrap();

    let err = connect(&server, &bundle, ClientAuth::Required, anonymous.clone())
        .await
        .unwrap_err();
    let server_err = err.server.as_deref().unwrap_or_default();
    assert!(server_err.contains("peer sent no certificates"), "{err:?}");
    for auth in [ClientAuth::Optional, ClientAuth::None] {
        let seen = connect(&server, &bundle, auth, anonymous.clone())
            .await
            .unwrap();
        assert_eq!(seen, (None, Some(server.id.clone())), "{auth:?}");
    }

    // A chain-valid client certificate without a SPIFFE ID is refused
    // even when client certificates are optional.
    let (site_root, site_root_key, _) = self_signed(&ca_params("Site CA"));
    let (leaf_pem, site_key, _) = signed_by(&client_leaf_params(), &site_root, key(&site_root_key));
    let site_leaf = IssuedCert {
        cert_pem: leaf_pem,
        chain_pem: Vec::new(),
        serial_hex: String::new(),
        spiffe_id: String::new(),
        not_before: SystemTime::now(),
        not_after: SystemTime::now(),
        ca_fingerprint: String::new(),
    };
    let mixed = TrustBundle::new(vec![ca.root_pem().to_owned(), site_root]);
    let no_spiffe = client_config(Some((&site_leaf, &site_key)), &mixed, None).unwrap();
    let err = connect(&server, &mixed, ClientAuth::Optional, no_spiffe)
        .await
        .unwrap_err();
    let server_err = err.server.as_deref().unwrap_or_default();
    assert!(server_err.contains("0 URI SANs"), "{err:?}");
}

/// A plain clientAuth leaf with a DNS name and no URI SAN.
fn client_leaf_params() -> rcgen::CertificateParams {
    let mut p = rcgen::CertificateParams::new(vec!["client.example".to_owned()]).unwrap();
    p.is_ca = rcgen::IsCa::ExplicitNoCa;
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    p
}

#[test]
fn configs_refuse_an_empty_bundle_and_a_mismatched_key() {
    let ca = builtin("ca-1", "default");
    let p = proxy(&ca, "default", "p");
    let q = proxy(&ca, "default", "q");
    let empty = TrustBundle::default();
    assert!(server_config(&p.cert, &p.key_pem, &empty, ClientAuth::Required).is_err());
    assert!(client_config(None, &empty, None).is_err());
    let bundle = TrustBundle::new(vec![ca.root_pem().to_owned()]);
    // No client auth needs no bundle roots for the server side ...
    assert!(server_config(&p.cert, &p.key_pem, &empty, ClientAuth::None).is_ok());
    // ... but a key that is not the certificate's is refused.
    let err = server_config(&p.cert, &q.key_pem, &bundle, ClientAuth::Optional).unwrap_err();
    assert!(
        err.to_string().contains("TLS configuration rejected"),
        "{err}"
    );
    let _: Arc<rustls::ClientConfig> = client_config(None, &bundle, None).unwrap();
}

/// One connection to `addr` with `client_cfg`: whether the handshake was a
/// resumption, the server's SPIFFE ID as the client sees it, and after a
/// ping-pong, nothing else.
async fn client_once(
    addr: std::net::SocketAddr,
    client_cfg: Arc<rustls::ClientConfig>,
) -> (rustls::HandshakeKind, Option<SpiffeId>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("backend.meshlink.local").unwrap();
    let mut tls = TlsConnector::from(client_cfg)
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    tls.read_exact(&mut buf).await.unwrap();
    let (_, conn) = tls.get_ref();
    let kind = conn.handshake_kind().expect("handshake done");
    (
        kind,
        peer_spiffe_id(conn.peer_certificates().unwrap_or_default()),
    )
}

/// Sidecars reuse one rustls config per cluster (and per trust bundle on
/// the server side) across connections: the second connection resumes the
/// first's TLS 1.3 session (no certificate signing or chain verification),
/// and both sides still see the peer's SPIFFE ID, which inbound
/// authorization reads.
#[tokio::test]
async fn a_second_connection_resumes_and_both_sides_keep_the_peer_identity() {
    let ca = builtin("ca-1", "default");
    let bundle = TrustBundle::new(vec![ca.cert_pem().to_owned()]);
    let (web, backend) = (
        proxy(&ca, "default", "web"),
        proxy(&ca, "default", "backend"),
    );
    let server_cfg = server_config(
        &backend.cert,
        &backend.key_pem,
        &bundle,
        ClientAuth::Required,
    )
    .unwrap();
    let client_cfg = client_config(
        Some((&web.cert, web.key_pem.as_str())),
        &bundle,
        Some(backend.id.clone()),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = TlsAcceptor::from(server_cfg.clone())
                .accept(tcp)
                .await
                .unwrap();
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.unwrap();
            tls.write_all(b"pong").await.unwrap();
            let (_, conn) = tls.get_ref();
            seen.push((
                conn.handshake_kind().expect("handshake done"),
                peer_spiffe_id(conn.peer_certificates().unwrap_or_default()),
            ));
            tls.shutdown().await.unwrap();
        }
        seen
    });
    let first = client_once(addr, client_cfg.clone()).await;
    let second = client_once(addr, client_cfg).await;
    let served = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("server done")
        .unwrap();
    assert_eq!(
        first,
        (rustls::HandshakeKind::Full, Some(backend.id.clone()))
    );
    assert_eq!(
        second,
        (rustls::HandshakeKind::Resumed, Some(backend.id.clone()))
    );
    assert_eq!(
        served,
        [
            (rustls::HandshakeKind::Full, Some(web.id.clone())),
            (rustls::HandshakeKind::Resumed, Some(web.id.clone())),
        ]
    );
}
