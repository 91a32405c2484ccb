//! The Certify RPC against a real control plane over TLS: issuance only for
//! the identity the proxy token allows (I4), and a distinct gRPC status and
//! message for every rejection.

use std::time::Duration;

use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::{ControlPlane, StoreKind};
use meshlink_xds::certify::CertifyResponse;
use rcgen::KeyPair;
use tonic::Code;

const SETUP: &str = r#"
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: default}
spec:
  mtls:
    enabledBackend: ca-1
    backends:
      - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: 1h}}}
---
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: other}
spec:
  mtls:
    enabledBackend: ca-1
    backends: [{name: ca-1, type: builtin}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: web-1, mesh: default}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: 10001, servicePort: 8080, tags: {kuma.io/service: web}}]
"#;

struct Fixture {
    cp: ControlPlane,
}

impl Fixture {
    fn new() -> Fixture {
        let cp = ControlPlane::start(StoreKind::Sqlite);
        cp.cli_stdin(&["apply", "-f", "-"], Some(SETUP)).success();
        Fixture { cp }
    }

    fn token(&self, args: &[&str]) -> (String, String) {
        self.cp.dataplane_token(args)
    }

    fn certify(
        &self,
        token: Option<&str>,
        mesh: &str,
        dataplane: &str,
        service: &str,
        csr: Vec<u8>,
    ) -> Result<CertifyResponse, tonic::Status> {
        certify(&self.cp, token, mesh, dataplane, service, csr)
    }
}

fn p256() -> KeyPair {
    KeyPair::generate().unwrap()
}

fn openssl(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl CLI");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn assert_rejected(r: Result<CertifyResponse, tonic::Status>, code: Code, words: &[&str]) {
    let status = r.expect_err("must be rejected");
    assert_eq!(status.code(), code, "{status:?}");
    for w in words {
        assert!(
            status.message().contains(w),
            "{w:?} not in {:?}",
            status.message()
        );
    }
}

#[test]
fn issues_exactly_the_allowed_identity() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let resp = f
        .certify(
            Some(&token),
            "default",
            "web-1",
            "",
            csr(&p256(), Some("spiffe://default/web")),
        )
        .expect("certify");
    assert_eq!(resp.spiffe_id, "spiffe://default/web");
    assert_eq!(
        resp.not_after - resp.not_before,
        3600 + 60,
        "1h lifetime plus 60 s backdate"
    );
    let dir = tempfile::tempdir().unwrap();
    let leaf = dir.path().join("leaf.pem");
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&leaf, &resp.certificate_pem).unwrap();
    std::fs::write(&bundle, resp.trust_bundle_pem.concat()).unwrap();
    let (ok, text) = openssl(&["x509", "-noout", "-text", "-in", leaf.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("URI:spiffe://default/web"), "{text}");
    assert_eq!(
        text.matches("URI:").count(),
        1,
        "exactly one URI SAN: {text}"
    );
    assert!(text.contains("prime256v1"), "{text}");
    assert!(
        text.contains("TLS Web Server Authentication, TLS Web Client Authentication"),
        "{text}"
    );
    assert!(text.contains("CA:FALSE"), "{text}");
    let (ok, text) = openssl(&[
        "verify",
        "-CAfile",
        bundle.to_str().unwrap(),
        leaf.to_str().unwrap(),
    ]);
    assert!(ok && text.contains("OK"), "{text}");

    let issued = f.cp.metric(&[
        "meshlink_identity_certify_requests_total",
        "result=\"issued\"",
    ]);
    assert_eq!(issued, 1.0, "the issuance is counted in /metrics");

    // The CA's fingerprint is served, the key never is.
    let (s, ca) = f.cp.api("GET", "/api/v1/meshes/default/ca", None);
    assert_eq!(s, 200, "{ca}");
    assert!(!ca.to_string().contains("PRIVATE KEY"), "{ca}");
    let yaml =
        f.cp.cli(&["get", "mesh", "default", "-o", "yaml"])
            .success()
            .stdout;
    assert!(!yaml.contains("PRIVATE KEY"), "{yaml}");
}

#[test]
fn token_for_another_mesh_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "other", "--name", "web-1", "--service", "web"]);
    let r = f.certify(Some(&token), "default", "web-1", "web", csr(&p256(), None));
    assert_rejected(
        r,
        Code::PermissionDenied,
        &["mesh \"other\"", "not \"default\""],
    );
}

#[test]
fn csr_for_another_service_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let r = f.certify(
        Some(&token),
        "default",
        "web-1",
        "",
        csr(&p256(), Some("spiffe://default/backend")),
    );
    assert_rejected(
        r,
        Code::PermissionDenied,
        &[
            "spiffe://default/backend",
            "allows only spiffe://default/web",
        ],
    );
    let r = f.certify(
        Some(&token),
        "default",
        "web-1",
        "backend",
        csr(&p256(), None),
    );
    assert_rejected(
        r,
        Code::PermissionDenied,
        &["does not allow service \"backend\""],
    );
}

#[test]
fn missing_token_is_refused() {
    let f = Fixture::new();
    let r = f.certify(None, "default", "web-1", "", csr(&p256(), None));
    assert_rejected(r, Code::Unauthenticated, &["missing proxy token"]);
}

#[test]
fn malformed_token_is_refused() {
    let f = Fixture::new();
    let r = f.certify(
        Some("not.a.token"),
        "default",
        "web-1",
        "",
        csr(&p256(), None),
    );
    assert_rejected(r, Code::Unauthenticated, &["invalid proxy token"]);
}

#[test]
fn revoked_token_is_refused() {
    let f = Fixture::new();
    let (token, id) = f.token(&["--mesh", "default", "--name", "web-1"]);
    f.certify(Some(&token), "default", "web-1", "", csr(&p256(), None))
        .expect("valid before revocation");
    let out = f.cp.cli(&["token", "revoke", &id]).success();
    assert!(out.stdout.contains("revoked"), "{}", out.stdout);
    let r = f.certify(Some(&token), "default", "web-1", "", csr(&p256(), None));
    assert_rejected(r, Code::Unauthenticated, &["revoked", &id]);
}

#[test]
fn expired_token_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1", "--valid-for", "1s"]);
    // Tokens tolerate 60 s of clock skew, so expiry shows after ~61 s. The
    // poll also runs into the per-token rate limit; those answers are skipped.
    let status = meshlink_e2e::eventually("the token to expire", Duration::from_secs(120), || {
        f.certify(Some(&token), "default", "web-1", "", csr(&p256(), None))
            .err()
            .filter(|s| s.code() != Code::ResourceExhausted)
    });
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("expired"), "{status:?}");
}

#[test]
fn wrong_key_type_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let p384 = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let r = f.certify(Some(&token), "default", "web-1", "", csr(&p384, None));
    assert_rejected(r, Code::InvalidArgument, &["wrong CSR key type", "P-256"]);
    let rejected = f.cp.metric(&[
        "meshlink_identity_certify_requests_total",
        "result=\"invalid_argument\"",
    ]);
    assert_eq!(rejected, 1.0, "the rejection is counted in /metrics");
}

#[test]
fn csr_with_an_invalid_signature_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let mut tampered = csr(&p256(), None);
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let r = f.certify(Some(&token), "default", "web-1", "", tampered);
    assert_rejected(r, Code::InvalidArgument, &["signature does not verify"]);
}

#[test]
fn garbage_csr_is_refused() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let r = f.certify(Some(&token), "default", "web-1", "", b"garbage".to_vec());
    assert_rejected(r, Code::InvalidArgument, &["malformed CSR"]);
}

#[test]
fn a_hammering_token_is_rate_limited() {
    let f = Fixture::new();
    let (token, _) = f.token(&["--mesh", "default", "--name", "web-1"]);
    let key = p256();
    let results: Vec<_> = (0..30)
        .map(|_| f.certify(Some(&token), "default", "web-1", "", csr(&key, None)))
        .collect();
    let limited = results
        .iter()
        .filter(|r| matches!(r, Err(s) if s.code() == Code::ResourceExhausted))
        .count();
    assert!(results[0].is_ok());
    assert!(limited > 0, "30 rapid requests must hit the limit");
    let other = f.token(&["--mesh", "default", "--name", "web-1"]).0;
    f.certify(Some(&other), "default", "web-1", "", csr(&key, None))
        .expect("other tokens are unaffected");
}

#[test]
fn cert_dir_writes_a_client_certificate_bound_to_the_dataplane() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("web-1");
    let out =
        f.cp.cli(&[
            "token",
            "dataplane",
            "--mesh",
            "default",
            "--name",
            "web-1",
            "--cert-dir",
            certs.to_str().unwrap(),
        ])
        .success();
    assert!(!out.stdout.trim().is_empty(), "the token is still printed");
    let mode = |p: &str| {
        std::fs::metadata(certs.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("tls.key"), 0o600);
    assert_eq!(
        std::fs::read_to_string(certs.join("ca.crt")).unwrap(),
        f.cp.xds_ca_pem()
    );
    let (ok, text) = openssl(&[
        "x509",
        "-noout",
        "-text",
        "-in",
        certs.join("tls.crt").to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("URI:spiffe://meshlink-cp.local/dataplane/default/web-1"),
        "{text}"
    );
    assert!(text.contains("TLS Web Client Authentication"), "{text}");
    let (ok, text) = openssl(&[
        "verify",
        "-CAfile",
        certs.join("ca.crt").to_str().unwrap(),
        certs.join("tls.crt").to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
}
