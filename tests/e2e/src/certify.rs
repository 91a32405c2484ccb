//! A Certify RPC client for tests: TLS to the control plane's xDS port,
//! trusting `cp-tls/ca.pem`, with the proxy token in metadata.

use meshlink_xds::certify::certify_client::CertifyClient;
use meshlink_xds::certify::{CertifyRequest, CertifyResponse};
use rcgen::{CertificateParams, KeyPair, SanType};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::ControlPlane;

/// A DER CSR for `key`, optionally asking for a URI SAN.
pub fn csr(key: &KeyPair, uri: Option<&str>) -> Vec<u8> {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
    if let Some(u) = uri {
        p.subject_alt_names = vec![SanType::URI(u.try_into().expect("URI SAN"))];
    }
    p.serialize_request(key).expect("CSR").der().to_vec()
}

/// Calls Certify on `cp` (blocking; runs its own small runtime).
pub fn certify(
    cp: &ControlPlane,
    token: Option<&str>,
    mesh: &str,
    dataplane: &str,
    service: &str,
    csr: Vec<u8>,
) -> Result<CertifyResponse, tonic::Status> {
    let ca = cp.xds_ca_pem();
    // A site's control plane listens on its own loopback address, which
    // its certificate names.
    let (url, domain) = if cp.host() == "127.0.0.1" {
        (cp.xds_url(), "localhost".to_owned())
    } else {
        (
            format!("https://{}:{}", cp.host(), cp.xds_port()),
            cp.host().to_owned(),
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .domain_name(domain);
        let channel = Channel::from_shared(url)
            .expect("URL")
            .tls_config(tls)
            .expect("TLS config")
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("connect: {e}")))?;
        let mut req = tonic::Request::new(CertifyRequest {
            mesh: mesh.into(),
            dataplane: dataplane.into(),
            service: service.into(),
            csr,
            ..Default::default()
        });
        if let Some(t) = token {
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {t}").parse().expect("metadata value"),
            );
        }
        CertifyClient::new(channel)
            .certify(req)
            .await
            .map(|r| r.into_inner())
    })
}

impl ControlPlane {
    /// Issues a dataplane token with the CLI; returns (token, id).
    pub fn dataplane_token(&self, args: &[&str]) -> (String, String) {
        let mut full = vec!["token", "dataplane"];
        full.extend_from_slice(args);
        let out = self.cli(&full).success();
        let id = out
            .stderr
            .split_whitespace()
            .nth(1)
            .expect("token id on stderr")
            .to_string();
        (out.stdout.trim().to_string(), id)
    }
}
