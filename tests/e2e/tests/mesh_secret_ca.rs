//! Kuma's provided CA given by `secret:`, through the real binaries: a CA
//! generated here is applied as two Kuma Secrets (one universal
//! `type: Secret`, one Kubernetes `system.kuma.io/secret`) in the same file
//! as the Mesh naming them and after it (`meshlink apply` puts Secrets
//! first). The workload certificates the control plane issues verify
//! against that CA's key, the sidecars trust only it, and traffic flows
//! through them over mTLS. `get` shows the Secrets without their values,
//! and re-applying that output is `unchanged`. A Mesh naming a missing
//! Secret is refused with `secret NAME not found in mesh M` and not
//! stored; deleting a Secret the Mesh uses is refused naming the Mesh.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use meshlink_e2e::app::{PythonApp, http_get};
use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

const READY: Duration = Duration::from_secs(30);

/// A self-signed X509-SVID signing CA: (certificate PEM, PKCS#8 key PEM).
fn corp_ca() -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "Example Corp Mesh CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).expect("self-signed CA");
    (cert.pem(), key.serialize_pem())
}

/// The Kuma Mesh (provided CA from two Secrets), the pair's Dataplanes and
/// permissions, and then the two Secrets.
fn kuma_file(ports: &PairPorts, cert_pem: &str, key_pem: &str) -> String {
    let pair = proxy::pair_yaml(ports, "1h");
    // Everything of the pair but its builtin-CA Mesh (the first document).
    let rest = pair
        .split_once("\n---\n")
        .map(|(_, rest)| rest)
        .expect("the pair file has several documents");
    format!(
        r#"type: Mesh
name: default
mtls:
  enabledBackend: corp-ca
  backends:
    - name: corp-ca
      type: provided
      dpCert:
        rotation:
          expiration: 1h
      conf:
        cert:
          secret: corp-ca-cert
        key:
          secret: corp-ca-key
---
{rest}
---
type: Secret
name: corp-ca-cert
mesh: default
data: {cert}
---
apiVersion: v1
kind: Secret
metadata:
  name: corp-ca-key
  namespace: kuma-system
  labels:
    kuma.io/mesh: default
type: system.kuma.io/secret
data:
  value: {key}
"#,
        cert = STANDARD.encode(cert_pem),
        key = STANDARD.encode(key_pem),
    )
}

fn compact(pem: &str) -> String {
    pem.split_whitespace().collect()
}

#[test]
fn a_provided_ca_from_kuma_secrets_issues_certificates_that_verify_against_it() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let (cert_pem, key_pem) = corp_ca();
    let ports = PairPorts::free();
    let out = cp
        .cli_stdin(
            &["apply", "-f", "-"],
            Some(&kuma_file(&ports, &cert_pem, &key_pem)),
        )
        .success();
    assert!(
        out.stdout
            .contains("secret/corp-ca-cert (mesh default) created"),
        "{out:#?}"
    );
    cp.cli(&[
        "wait",
        "mesh/default",
        "--for",
        "condition=Ready",
        "--timeout",
        "30s",
    ])
    .success();

    // The mesh trusts exactly the provided CA.
    let (status, ca) = cp.api("GET", "/api/v1/meshes/default/ca", None);
    assert_eq!(status, 200, "{ca}");
    assert_eq!(ca["backend"], "corp-ca", "{ca}");
    let bundle: Vec<String> = ca["trustBundle"]
        .as_array()
        .expect("trustBundle")
        .iter()
        .map(|p| compact(p.as_str().unwrap_or_default()))
        .collect();
    assert_eq!(bundle, vec![compact(&cert_pem)], "{ca}");

    // A workload certificate from Certify is signed by the provided key.
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let leaf_key = KeyPair::generate().expect("key");
    let resp = certify(
        &cp,
        Some(&token),
        "default",
        "web-1",
        "web",
        csr(&leaf_key, None),
    )
    .expect("certify");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).expect("CA PEM");
    let ca_cert = ca_pem.parse_x509().expect("CA certificate");
    let (_, leaf_pem) =
        x509_parser::pem::parse_x509_pem(resp.certificate_pem.as_bytes()).expect("leaf PEM");
    let leaf = leaf_pem.parse_x509().expect("leaf certificate");
    assert_eq!(leaf.issuer(), ca_cert.subject());
    leaf.verify_signature(Some(ca_cert.public_key()))
        .expect("the workload certificate verifies against the provided CA");
    assert!(resp.chain_pem.is_empty(), "a root CA: no intermediates");

    // Real sidecars hold certificates from it, trust only it, and carry
    // traffic over mTLS.
    let backend_page = format!("backend app {}\n", uuid::Uuid::new_v4());
    let _backend_app = PythonApp::start(ports.backend_app, &[("page.txt", &backend_page)]);
    let tokens = tempfile::tempdir().expect("tempdir");
    let (web, backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let fingerprint = ca["fingerprint"].as_str().expect("fingerprint").to_string();
    for s in [&web, &backend] {
        assert_eq!(s.trust_roots(), vec![fingerprint.clone()], "{}", s.logs());
    }
    let r = eventually("web -> backend over mTLS", READY, || {
        http_get(ports.web_outbound, "/page.txt").ok()
    });
    assert_eq!((r.status, r.text()), (200, backend_page), "{}", web.logs());

    // `get` shows that the data exists, never the value; its YAML
    // re-applies unchanged.
    let table = cp
        .cli(&["get", "secrets", "-m", "default"])
        .success()
        .stdout;
    assert!(table.contains("system.kuma.io/secret"), "{table}");
    assert!(table.contains("corp-ca-key"), "{table}");
    let yaml = cp
        .cli(&["get", "secrets", "-m", "default", "-o", "yaml"])
        .success()
        .stdout;
    assert!(yaml.contains("<redacted>"), "{yaml}");
    for secret in [STANDARD.encode(&cert_pem), STANDARD.encode(&key_pem)] {
        assert!(!yaml.contains(&secret), "a value leaked:\n{yaml}");
    }
    let again = cp
        .cli_stdin(&["apply", "-f", "-"], Some(&yaml))
        .success()
        .stdout;
    assert_eq!(again.matches("unchanged").count(), 2, "{again}");

    // Deleting a Secret the Mesh uses is refused, naming the Mesh.
    let out = cp.cli(&["delete", "secret", "corp-ca-key", "-m", "default"]);
    assert_ne!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr
            .contains("is in use by Mesh/default (spec.mtls.backends[")
            && out.stderr.contains("corp-ca-key")
            && out.stderr.contains("use --cascade"),
        "{out:#?}"
    );
}

#[test]
fn a_mesh_naming_a_missing_secret_is_refused_and_not_stored() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let mesh = "type: Mesh\nname: other\nmtls:\n  enabledBackend: ca\n  backends:\n    - name: ca\n      type: provided\n      conf:\n        cert:\n          secret: absent\n        key:\n          inlineString: x\n";
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(mesh));
    assert_eq!(out.code, 2, "bad input: {out:#?}");
    assert!(
        out.stderr.contains(
            "spec.mtls.backends[0].conf.cert.secret: secret absent not found in mesh other"
        ),
        "{out:#?}"
    );
    let got = cp.cli(&["get", "mesh", "other"]);
    assert_ne!(got.code, 0, "the Mesh was stored: {got:#?}");
    assert!(got.stderr.contains("not found"), "{got:#?}");
}
