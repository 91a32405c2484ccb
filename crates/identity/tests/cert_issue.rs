//! Issued certificates as a third-party parser (the `openssl` CLI) sees
//! them: the builtin CA, SPIFFE leaves from CSRs and with CP-generated keys,
//! leaves from a provided CA with an intermediate chain, and site CA
//! certificates. Also: stored CA material round-trips through JSON.

mod cert_support;

use std::time::{Duration, SystemTime};

use cert_support::{
    Files, ONE_DAY, TEN_YEARS, ca_params, key, openssl, openssl_verify, proxy_csr, self_signed,
    signed_by, x509_dates, x509_text,
};
use meshlink_identity::{CaMaterial, MeshCa, SiteCa, SpiffeId};

fn web() -> SpiffeId {
    SpiffeId::new("default", "web").unwrap()
}

#[test]
fn builtin_ca_is_a_p256_root_naming_mesh_backend_and_trust_domain() {
    let files = Files::new();
    let material = MeshCa::generate_builtin("default", "ca-1", "prod.mesh", TEN_YEARS).unwrap();
    assert!(material.chain_pem.is_empty());
    assert!(
        material.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"),
        "PKCS#8"
    );
    let text = x509_text(&files, &material.cert_pem);
    for want in [
        "CA:TRUE",
        "Certificate Sign, CRL Sign",
        "URI:spiffe://prod.mesh",
        "ASN1 OID: prime256v1",
        "ecdsa-with-SHA256",
        "CN = default/ca-1",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("Digital Signature"), "{text}");
    let (not_before, not_after) = x509_dates(&files, &material.cert_pem);
    assert_eq!(
        not_after.duration_since(not_before).unwrap(),
        TEN_YEARS + Duration::from_secs(60)
    );
    let age = SystemTime::now().duration_since(not_before).unwrap();
    assert!(
        age >= Duration::from_secs(59) && age < Duration::from_secs(120),
        "{age:?}"
    );
    let other = MeshCa::generate_builtin("default", "ca-1", "prod.mesh", TEN_YEARS).unwrap();
    let (ca, ca2) = (
        MeshCa::load(&material).unwrap(),
        MeshCa::load(&other).unwrap(),
    );
    assert_ne!(
        ca.fingerprint(),
        ca2.fingerprint(),
        "each CA has its own key and serial"
    );
}

#[test]
fn leaf_from_csr_is_an_x509_svid_that_openssl_verifies() {
    let files = Files::new();
    let ca =
        MeshCa::load(&MeshCa::generate_builtin("default", "ca-1", "default", TEN_YEARS).unwrap())
            .unwrap();
    // The CSR asks for another identity: the token's identity wins (I4).
    let (proxy_key, csr) = proxy_csr("spiffe://default/admin");
    let now = SystemTime::now();
    let leaf = ca.issue_from_csr(&csr, &web(), ONE_DAY, now).unwrap();

    let text = x509_text(&files, &leaf.cert_pem);
    assert_eq!(
        text.matches("URI:").count(),
        1,
        "exactly one URI SAN:\n{text}"
    );
    for want in [
        "URI:spiffe://default/web",
        "X509v3 Subject Alternative Name: critical",
        "ASN1 OID: prime256v1",
        "TLS Web Server Authentication, TLS Web Client Authentication",
        "CA:FALSE",
        "Digital Signature",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("spiffe://default/admin"), "{text}");
    assert!(!text.contains("Certificate Sign"), "{text}");
    assert!(text.contains(&format!(
        "Serial Number:\n            {}",
        colon_hex(&leaf.serial_hex)
    )));

    let (not_before, not_after) = x509_dates(&files, &leaf.cert_pem);
    assert_eq!(
        not_after.duration_since(not_before).unwrap(),
        ONE_DAY + Duration::from_secs(60)
    );
    assert_eq!((leaf.not_before, leaf.not_after), (not_before, not_after));
    assert_eq!(leaf.spiffe_id, "spiffe://default/web");
    assert_eq!(leaf.ca_fingerprint, ca.fingerprint());
    assert!(
        leaf.chain_pem.is_empty(),
        "a builtin root needs no intermediates"
    );

    // The certificate carries the proxy's public key.
    let key_file = files.write("proxy.key", &proxy_key.serialize_pem());
    let cert_file = files.write("leaf.pem", &leaf.cert_pem);
    let (_, from_key) = openssl(&["pkey", "-in", key_file.to_str().unwrap(), "-pubout"]);
    let (_, from_cert) = openssl(&[
        "x509",
        "-in",
        cert_file.to_str().unwrap(),
        "-noout",
        "-pubkey",
    ]);
    assert_eq!(from_key, from_cert);

    for purpose in [None, Some("sslserver"), Some("sslclient")] {
        let (ok, out) = openssl_verify(&files, ca.root_pem(), &[], &leaf.cert_pem, purpose);
        assert!(ok && out.contains(": OK"), "{purpose:?}: {out}");
    }
    // And a different CA does not verify it.
    let other =
        MeshCa::load(&MeshCa::generate_builtin("default", "ca-2", "default", TEN_YEARS).unwrap())
            .unwrap();
    let (ok, _) = openssl_verify(&files, other.root_pem(), &[], &leaf.cert_pem, None);
    assert!(!ok);
}

#[test]
fn leaf_with_cp_generated_key_matches_its_key() {
    let files = Files::new();
    let ca =
        MeshCa::load(&MeshCa::generate_builtin("default", "ca-1", "default", TEN_YEARS).unwrap())
            .unwrap();
    let ttl = Duration::from_secs(10);
    let (leaf, key_pem) = ca.issue_with_key(&web(), ttl, SystemTime::now()).unwrap();
    assert!(key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let key_file = files.write("leaf.key", &key_pem);
    let (ok, key_text) = openssl(&["pkey", "-in", key_file.to_str().unwrap(), "-noout", "-text"]);
    assert!(
        ok && key_text.contains("ASN1 OID: prime256v1"),
        "{key_text}"
    );
    let cert_file = files.write("leaf.pem", &leaf.cert_pem);
    let (_, from_key) = openssl(&["pkey", "-in", key_file.to_str().unwrap(), "-pubout"]);
    let (_, from_cert) = openssl(&[
        "x509",
        "-in",
        cert_file.to_str().unwrap(),
        "-noout",
        "-pubkey",
    ]);
    assert_eq!(from_key, from_cert);
    let (not_before, not_after) = x509_dates(&files, &leaf.cert_pem);
    assert_eq!(
        not_after.duration_since(not_before).unwrap(),
        ttl + Duration::from_secs(60)
    );
    let (ok, out) = openssl_verify(
        &files,
        ca.root_pem(),
        &[],
        &leaf.cert_pem,
        Some("sslclient"),
    );
    assert!(ok, "{out}");
}

#[test]
fn provided_intermediate_ca_issues_leaves_that_chain_to_the_root() {
    let files = Files::new();
    let (root_pem, root_key_pem, _) = self_signed(&ca_params("Example Root"));
    let (int_pem, int_key_pem, _) = signed_by(
        &ca_params("Example Mesh Intermediate"),
        &root_pem,
        key(&root_key_pem),
    );
    let now = SystemTime::now();
    let material = MeshCa::validate_provided(&int_pem, &int_key_pem, Some(&root_pem), now).unwrap();
    assert_eq!(material.chain_pem.len(), 1);
    let ca = MeshCa::load(&material).unwrap();
    assert_eq!(ca.root_pem(), material.chain_pem[0]);
    assert_ne!(ca.root_fingerprint(), ca.fingerprint());

    let (_, csr) = proxy_csr("spiffe://default/web");
    let leaf = ca.issue_from_csr(&csr, &web(), ONE_DAY, now).unwrap();
    assert_eq!(
        leaf.chain_pem,
        vec![material.cert_pem.clone()],
        "the intermediate"
    );
    let text = x509_text(&files, &leaf.cert_pem);
    assert!(
        text.contains("Issuer: CN = Example Mesh Intermediate, O = example corp"),
        "{text}"
    );

    let (ok, out) = openssl_verify(&files, ca.root_pem(), &leaf.chain_pem, &leaf.cert_pem, None);
    assert!(ok && out.contains(": OK"), "{out}");
    // Without the intermediate, the root alone cannot verify the leaf.
    let (ok, _) = openssl_verify(&files, ca.root_pem(), &[], &leaf.cert_pem, None);
    assert!(!ok);

    // The intermediate itself validates as a CA under openssl too.
    let text = x509_text(&files, &material.cert_pem);
    assert!(
        text.contains("CA:TRUE") && text.contains("Certificate Sign, CRL Sign"),
        "{text}"
    );
}

#[test]
fn builtin_ca_round_trips_through_json_with_the_same_fingerprint() {
    let material = MeshCa::generate_builtin("default", "ca-1", "default", TEN_YEARS).unwrap();
    let json = serde_json::to_string(&material).unwrap();
    let back: CaMaterial = serde_json::from_str(&json).unwrap();
    assert_eq!(back, material);
    let (a, b) = (
        MeshCa::load(&material).unwrap(),
        MeshCa::load(&back).unwrap(),
    );
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.fingerprint().len(), 64);
    assert!(
        a.fingerprint()
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    );
    assert_eq!(a.not_after(), b.not_after());
    // A certificate from the reloaded CA verifies under the original root.
    let files = Files::new();
    let (leaf, _) = b
        .issue_with_key(&web(), ONE_DAY, SystemTime::now())
        .unwrap();
    let (ok, out) = openssl_verify(&files, a.root_pem(), &[], &leaf.cert_pem, None);
    assert!(ok, "{out}");

    // Debug output and API views never show the key.
    let key_body = material.key_pem.lines().nth(1).unwrap();
    let debug = format!("{material:?}");
    assert!(
        !debug.contains(key_body) && debug.contains("[redacted]"),
        "{debug}"
    );
    assert!(material.redacted().key_pem.is_empty());
}

#[test]
fn site_ca_issues_router_server_and_link_client_certificates() {
    let files = Files::new();
    let material = SiteCa::generate("west", SiteCa::DEFAULT_NAME, TEN_YEARS).unwrap();
    let site = SiteCa::load(&material).unwrap();
    let ca_text = x509_text(&files, site.cert_pem());
    assert!(
        ca_text.contains("CN = skupper-site-ca") && ca_text.contains("CA:TRUE"),
        "{ca_text}"
    );

    let hosts = vec!["router.west.example".to_owned(), "10.1.2.3".to_owned()];
    let (server, server_key) = site
        .issue_server_cert(&hosts, ONE_DAY, SystemTime::now())
        .unwrap();
    assert!(server_key.starts_with("-----BEGIN PRIVATE KEY-----"));
    let text = x509_text(&files, &server.cert_pem);
    assert!(
        text.contains("DNS:router.west.example, IP Address:10.1.2.3"),
        "{text}"
    );
    assert!(
        text.contains("TLS Web Server Authentication") && !text.contains("Client Auth"),
        "{text}"
    );
    let (ok, out) = openssl_verify(
        &files,
        site.root_pem(),
        &[],
        &server.cert_pem,
        Some("sslserver"),
    );
    assert!(ok, "{out}");
    let (ok, _) = openssl_verify(
        &files,
        site.root_pem(),
        &[],
        &server.cert_pem,
        Some("sslclient"),
    );
    assert!(!ok, "a server certificate is not a client certificate");

    let (client, _) = site
        .issue_client_cert("link-to-east", ONE_DAY, SystemTime::now())
        .unwrap();
    let text = x509_text(&files, &client.cert_pem);
    assert!(text.contains("Subject: CN = link-to-east"), "{text}");
    assert!(
        text.contains("TLS Web Client Authentication") && !text.contains("Server Auth"),
        "{text}"
    );
    let (ok, out) = openssl_verify(
        &files,
        site.root_pem(),
        &[],
        &client.cert_pem,
        Some("sslclient"),
    );
    assert!(ok, "{out}");
    assert!(
        site.issue_server_cert(&[], ONE_DAY, SystemTime::now())
            .is_err()
    );
}

/// `0a1b2c` as openssl prints serials: `0a:1b:2c`.
fn colon_hex(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(":")
}
