//! CSR checks behind the Certify RPC: a good P-256 CSR is certified; every
//! other key type, a tampered CSR and garbage each get their own error, both
//! from `inspect_csr` and from `issue_from_csr`.

mod cert_support;

use std::time::SystemTime;

use cert_support::{ONE_DAY, TEN_YEARS, proxy_csr};
use meshlink_identity::{CsrError, IssueError, MeshCa, SpiffeId, inspect_csr};
use rcgen::{CertificateParams, KeyPair, PKCS_ECDSA_P384_SHA384};

/// An RSA-2048 CSR made once with `openssl req` (ring cannot generate RSA
/// keys); see `tests/fixtures/README.md`.
const RSA_CSR: &str = include_str!("fixtures/rsa2048.csr.pem");

fn ca() -> MeshCa {
    MeshCa::load(&MeshCa::generate_builtin("default", "ca-1", "default", TEN_YEARS).unwrap())
        .unwrap()
}

fn web() -> SpiffeId {
    SpiffeId::new("default", "web").unwrap()
}

fn issue(csr: &[u8]) -> Result<(), IssueError> {
    ca().issue_from_csr(csr, &web(), ONE_DAY, SystemTime::now())
        .map(drop)
}

#[test]
fn a_p256_csr_is_certified_from_der_or_pem() {
    let (_, der) = proxy_csr("spiffe://default/web");
    let info = inspect_csr(&der).unwrap();
    assert_eq!(info.uri_sans, vec!["spiffe://default/web".to_owned()]);
    assert_eq!(info.key_algorithm, "ECDSA P-256");
    issue(&der).unwrap();

    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::URI(
        "spiffe://default/web".try_into().unwrap(),
    )];
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    assert_eq!(
        inspect_csr(pem.as_bytes()).unwrap().key_algorithm,
        "ECDSA P-256"
    );
    issue(pem.as_bytes()).unwrap();
}

#[test]
fn the_csr_reports_what_it_asks_for_so_the_caller_can_compare_with_the_token() {
    let (_, der) = proxy_csr("spiffe://default/admin");
    assert_eq!(
        inspect_csr(&der).unwrap().uri_sans,
        vec!["spiffe://default/admin".to_owned()]
    );
    let key = KeyPair::generate().unwrap();
    let no_san = CertificateParams::default()
        .serialize_request(&key)
        .unwrap();
    assert!(inspect_csr(no_san.der()).unwrap().uri_sans.is_empty());
}

#[test]
fn p384_and_rsa_csrs_are_the_wrong_key_type() {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).unwrap();
    let p384 = CertificateParams::default()
        .serialize_request(&key)
        .unwrap();
    let err = inspect_csr(p384.der()).unwrap_err();
    assert_eq!(
        err,
        CsrError::WrongKeyType {
            found: "ECDSA P-384".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "CSR key is ECDSA P-384, but ECDSA P-256 is required; generate an ECDSA P-256 key"
    );
    assert!(matches!(
        issue(p384.der()),
        Err(IssueError::Csr(CsrError::WrongKeyType { .. }))
    ));

    let err = inspect_csr(RSA_CSR.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        CsrError::WrongKeyType {
            found: "RSA-2048".into()
        }
    );
    assert!(matches!(
        issue(RSA_CSR.as_bytes()),
        Err(IssueError::Csr(CsrError::WrongKeyType { .. }))
    ));
}

#[test]
fn a_tampered_csr_has_a_bad_signature() {
    let (_, mut der) = proxy_csr("spiffe://default/web");
    // Rewrite the requested identity after signing: still well-formed DER.
    let at = der
        .windows(b"default/web".len())
        .position(|w| w == b"default/web")
        .unwrap();
    der[at..at + 11].copy_from_slice(b"default/adm");
    let err = inspect_csr(&der).unwrap_err();
    assert!(matches!(err, CsrError::BadSignature(_)), "{err:?}");
    assert!(
        err.to_string().contains("signature does not verify"),
        "{err}"
    );
    assert!(matches!(
        issue(&der),
        Err(IssueError::Csr(CsrError::BadSignature(_)))
    ));
}

#[test]
fn garbage_is_malformed() {
    for input in [
        &b""[..],
        b"hello",
        b"-----BEGIN CERTIFICATE REQUEST-----\nnot base64!\n-----END CERTIFICATE REQUEST-----\n",
        &[0x30, 0x03, 0x02, 0x01, 0x00],
    ] {
        let err = inspect_csr(input).unwrap_err();
        assert!(matches!(err, CsrError::Malformed(_)), "{input:?}: {err:?}");
        assert!(matches!(
            issue(input),
            Err(IssueError::Csr(CsrError::Malformed(_)))
        ));
    }
    // A certificate is not a CSR.
    let cert = ca().root_pem().to_owned();
    assert!(matches!(
        inspect_csr(cert.as_bytes()),
        Err(CsrError::Malformed(_))
    ));
}
