//! Provided CAs: each way a user-supplied CA can fail X509-SVID signing-CA
//! validation gets its own error, whose message names the check and the fix.

mod cert_support;

use std::time::{Duration, SystemTime};

use cert_support::{Files, ca_params, key, openssl, self_signed, signed_by};
use meshlink_identity::{CaError, MeshCa};
use rcgen::{IsCa, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256};

fn now() -> SystemTime {
    SystemTime::now()
}

/// Validates a self-signed CA built from `ca_params` after `tweak`.
fn validate_tweaked(tweak: impl FnOnce(&mut rcgen::CertificateParams)) -> Result<(), CaError> {
    let mut params = ca_params("Provided CA");
    tweak(&mut params);
    let (cert, key, _) = self_signed(&params);
    MeshCa::validate_provided(&cert, &key, None, now()).map(drop)
}

#[test]
fn a_well_formed_ca_is_accepted_and_normalized() {
    let (root, root_key, _) = self_signed(&ca_params("Example Root"));
    let (int, int_key, _) = signed_by(&ca_params("Example Int"), &root, key(&root_key));
    // Chain pasted after the certificate instead of given separately.
    let bundled = format!("{int}{root}");
    let material = MeshCa::validate_provided(&bundled, &int_key, None, now()).unwrap();
    assert_eq!(material.chain_pem.len(), 1);
    let ca = MeshCa::load(&material).unwrap();
    assert_eq!(ca.root_pem(), material.chain_pem[0]);
    let self_signed_ok = MeshCa::validate_provided(&root, &root_key, None, now()).unwrap();
    assert!(self_signed_ok.chain_pem.is_empty());
}

#[test]
fn a_leaf_is_not_a_ca() {
    let err = validate_tweaked(|p| p.is_ca = IsCa::ExplicitNoCa).unwrap_err();
    assert!(matches!(err, CaError::NotACa { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("basicConstraints CA=false"), "{msg}");
    assert!(msg.contains("use a CA certificate, not a leaf"), "{msg}");
    let err = validate_tweaked(|p| p.is_ca = IsCa::NoCa).unwrap_err();
    assert!(
        matches!(err, CaError::NotACa { .. }),
        "missing basicConstraints: {err:?}"
    );
}

#[test]
fn key_usage_must_allow_certificate_signing() {
    let err = validate_tweaked(|p| p.key_usages = vec![KeyUsagePurpose::CrlSign]).unwrap_err();
    assert!(matches!(err, CaError::MissingKeyCertSign { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("keyUsage=critical,keyCertSign,cRLSign"),
        "{err}"
    );

    let err = validate_tweaked(|p| p.key_usages = vec![]).unwrap_err();
    assert!(matches!(err, CaError::MissingKeyUsage { .. }), "{err:?}");
}

#[test]
fn leaf_only_key_usages_are_rejected_by_name() {
    for (extra, name) in [
        (KeyUsagePurpose::KeyAgreement, "keyAgreement"),
        (KeyUsagePurpose::KeyEncipherment, "keyEncipherment"),
        (KeyUsagePurpose::DigitalSignature, "digitalSignature"),
    ] {
        let err = validate_tweaked(|p| p.key_usages.push(extra)).unwrap_err();
        match &err {
            CaError::ForbiddenKeyUsage { usage, .. } => assert_eq!(*usage, name),
            other => panic!("{name}: expected ForbiddenKeyUsage, got {other:?}"),
        }
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn the_key_must_match_the_certificate() {
    let (cert, _, _) = self_signed(&ca_params("Provided CA"));
    let other_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .unwrap()
        .serialize_pem();
    let err = MeshCa::validate_provided(&cert, &other_key, None, now()).unwrap_err();
    assert!(matches!(err, CaError::KeyMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[test]
fn expired_and_not_yet_valid_cas_are_rejected() {
    let day = time::Duration::days(1);
    let t = time::OffsetDateTime::now_utc();
    let err = validate_tweaked(|p| {
        p.not_before = t - day * 30;
        p.not_after = t - day;
    })
    .unwrap_err();
    assert!(matches!(err, CaError::Expired { .. }), "{err:?}");
    assert!(err.to_string().contains("expired at"), "{err}");

    let err = validate_tweaked(|p| {
        p.not_before = t + day;
        p.not_after = t + day * 30;
    })
    .unwrap_err();
    assert!(matches!(err, CaError::NotYetValid { .. }), "{err:?}");

    // The same CA is fine at a time inside its validity.
    let mut params = ca_params("Later CA");
    params.not_before = t + day;
    params.not_after = t + day * 30;
    let (cert, key, _) = self_signed(&params);
    let later = now() + Duration::from_secs(2 * 24 * 3600);
    assert!(MeshCa::validate_provided(&cert, &key, None, later).is_ok());
}

#[test]
fn garbage_pem_and_non_pkcs8_keys_are_rejected() {
    let (cert, key_pem, _) = self_signed(&ca_params("Provided CA"));
    let err = MeshCa::validate_provided("not a certificate", &key_pem, None, now()).unwrap_err();
    assert!(matches!(err, CaError::CertificatePem(_)), "{err:?}");
    // A truncated certificate: valid PEM, broken DER.
    let lines: Vec<&str> = cert.lines().collect();
    let corrupt = format!("{}\n{}\n", lines[..4].join("\n"), lines[lines.len() - 1]);
    let err = MeshCa::validate_provided(&corrupt, &key_pem, None, now()).unwrap_err();
    assert!(matches!(err, CaError::CertificatePem(_)), "{err:?}");
    let err = MeshCa::validate_provided(&cert, "garbage", None, now()).unwrap_err();
    assert!(matches!(err, CaError::KeyPem(_)), "{err:?}");
    let err = MeshCa::validate_provided(&cert, &key_pem, Some("garbage"), now()).unwrap_err();
    assert!(matches!(err, CaError::ChainPem(_)), "{err:?}");

    // The same key in SEC1 form (`EC PRIVATE KEY`), as `openssl ec` writes it.
    let files = Files::new();
    let path = files.write("key.pem", &key_pem);
    let (ok, sec1) = openssl(&["ec", "-in", path.to_str().unwrap()]);
    assert!(ok && sec1.contains("BEGIN EC PRIVATE KEY"), "{sec1}");
    let sec1 = &sec1[sec1.find("-----BEGIN").unwrap()..];
    let err = MeshCa::validate_provided(&cert, sec1, None, now()).unwrap_err();
    assert!(
        matches!(
            err,
            CaError::KeyNotPkcs8 {
                found: "EC PRIVATE KEY"
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("openssl pkcs8 -topk8"), "{err}");
}

#[test]
fn the_chain_must_verify_up_to_the_root() {
    let (root, root_key, _) = self_signed(&ca_params("Example Root"));
    let (int, int_key, _) = signed_by(&ca_params("Example Int"), &root, key(&root_key));
    let (stranger, _, _) = self_signed(&ca_params("Example Root"));

    // Same subject as the real root, different key: the signature fails.
    let err = MeshCa::validate_provided(&int, &int_key, Some(&stranger), now()).unwrap_err();
    assert!(matches!(err, CaError::ChainBroken { .. }), "{err:?}");
    assert!(
        err.to_string().contains("signature does not verify"),
        "{err}"
    );

    // A chain that skips a level: the issuer name does not match.
    let (other_root, _, _) = self_signed(&ca_params("Unrelated Root"));
    let err = MeshCa::validate_provided(&int, &int_key, Some(&other_root), now()).unwrap_err();
    assert!(matches!(err, CaError::ChainBroken { .. }), "{err:?}");

    // A leaf in the chain.
    let mut leaf_params = ca_params("Not A CA");
    leaf_params.is_ca = IsCa::ExplicitNoCa;
    let (leaf, _, _) = self_signed(&leaf_params);
    let err = MeshCa::validate_provided(&int, &int_key, Some(&leaf), now()).unwrap_err();
    assert!(
        matches!(err, CaError::ChainNotCa { index: 0, .. }),
        "{err:?}"
    );

    // An expired root above a valid intermediate.
    let mut old_root_params = ca_params("Old Root");
    let t = time::OffsetDateTime::now_utc();
    old_root_params.not_before = t - time::Duration::days(30);
    old_root_params.not_after = t - time::Duration::days(1);
    let (old_root, old_root_key, _) = self_signed(&old_root_params);
    let (int2, int2_key, _) = signed_by(&ca_params("Int 2"), &old_root, key(&old_root_key));
    let err = MeshCa::validate_provided(&int2, &int2_key, Some(&old_root), now()).unwrap_err();
    assert!(matches!(err, CaError::Expired { .. }), "{err:?}");
}

/// `openssl req -x509` with an X509-SVID signing profile and `subj`:
/// (cert PEM, PKCS#8 key PEM).
fn openssl_ca(files: &Files, subj: &str) -> (String, String) {
    let key = files.write("ossl-ca.key", "");
    let cert = files.write("ossl-ca.pem", "");
    let (ok, out) = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
        "-days",
        "30",
        "-subj",
        subj,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    assert!(ok, "{out}");
    (
        std::fs::read_to_string(cert).unwrap(),
        std::fs::read_to_string(key).unwrap(),
    )
}

#[test]
fn an_openssl_made_ca_is_accepted_and_an_unreproducible_subject_is_refused_up_front() {
    let files = Files::new();
    let (cert, key) = openssl_ca(&files, "/C=US/O=Example Corp/CN=Mesh CA");
    let material = MeshCa::validate_provided(&cert, &key, None, now()).unwrap();
    let ca = MeshCa::load(&material).unwrap();
    assert_eq!(ca.root_pem(), ca.cert_pem());

    let (cert, key) = openssl_ca(&files, "/O=Example Corp/OU=Team A/OU=Team B/CN=Mesh CA");
    let err = MeshCa::validate_provided(&cert, &key, None, now()).unwrap_err();
    assert!(matches!(err, CaError::UnusableSubject { .. }), "{err:?}");
    assert!(err.to_string().contains("OU=Team A, OU=Team B"), "{err}");
}
