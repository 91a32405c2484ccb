//! One test per class of bad credential input, and the good case.

use std::time::{Duration, SystemTime};

use meshlink_identity::SiteCa;

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn site_ca(name: &str) -> SiteCa {
    SiteCa::load(&SiteCa::generate(name, SiteCa::DEFAULT_NAME, DAY * 365).unwrap()).unwrap()
}

fn server_pem(ca: &SiteCa, now: SystemTime, lifetime: Duration) -> CredentialPem {
    let (cert, key) = ca
        .issue_server_cert(&["127.0.0.1".into()], lifetime, now)
        .unwrap();
    CredentialPem {
        tls_crt: cert.cert_pem,
        tls_key: key,
        ca_crt: ca.cert_pem().to_owned(),
    }
}

fn refused(pem: &CredentialPem) -> String {
    LinkCredential::from_pem(pem).unwrap_err().to_string()
}

#[test]
fn a_site_ca_issued_credential_is_accepted() {
    let ca = site_ca("a");
    let pem = server_pem(&ca, SystemTime::now(), DAY);
    let cred = LinkCredential::from_pem(&pem).unwrap();
    assert!(!cred.serial_hex().is_empty());
    assert!(
        !format!("{pem:?}").contains("PRIVATE"),
        "Debug hides the key"
    );
}

#[test]
fn missing_or_garbage_certificates_name_the_field() {
    let ca = site_ca("a");
    let good = server_pem(&ca, SystemTime::now(), DAY);
    let mut pem = good.clone();
    pem.tls_crt = String::new();
    assert!(refused(&pem).starts_with("tls.crt: holds no certificate"));
    let mut pem = good.clone();
    pem.ca_crt = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".into();
    assert!(refused(&pem).starts_with("ca.crt: "), "{}", refused(&pem));
}

#[test]
fn a_key_that_does_not_decode_or_match_is_refused() {
    let ca = site_ca("a");
    let good = server_pem(&ca, SystemTime::now(), DAY);
    let mut pem = good.clone();
    pem.tls_key = "not a key".into();
    assert!(refused(&pem).starts_with("tls.key: "), "{}", refused(&pem));
    let other = server_pem(&ca, SystemTime::now(), DAY);
    let mut pem = good;
    pem.tls_key = other.tls_key;
    assert_eq!(
        refused(&pem),
        "tls.key does not match the certificate in tls.crt; reissue the Secret"
    );
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let mut pem = server_pem(&site_ca("a"), SystemTime::now(), DAY);
    pem.ca_crt = site_ca("b").cert_pem().to_owned();
    assert!(
        refused(&pem).contains("is not signed by any CA in ca.crt"),
        "{}",
        refused(&pem)
    );
}

/// A CA valid 2020-2040 and a leaf it signed that expired in 2022.
fn expired_pem() -> CredentialPem {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, date_time_ymd};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.not_before = date_time_ymd(2020, 1, 1);
    ca.not_after = date_time_ymd(2040, 1, 1);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    leaf.not_before = date_time_ymd(2021, 1, 1);
    leaf.not_after = date_time_ymd(2022, 1, 1);
    let leaf = leaf.signed_by(&key, &issuer).unwrap();
    CredentialPem {
        tls_crt: leaf.pem(),
        tls_key: key.serialize_pem(),
        ca_crt: ca_cert.pem(),
    }
}

#[test]
fn an_expired_certificate_is_refused() {
    let err = refused(&expired_pem());
    assert!(
        err.starts_with("tls.crt certificate #0") && err.ends_with("is expired; renew it"),
        "{err}"
    );
}
