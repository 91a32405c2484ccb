//! Shared helpers for the `cert_*` scenario tests: the `openssl` CLI as a
//! third-party parser and verifier, rcgen-made CAs with chosen defects, and
//! proxy-side key + CSR generation.

#![allow(dead_code, unreachable_pub)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};

/// Ten years, the builtin CA default.
pub const TEN_YEARS: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// One day, the workload certificate default.
pub const ONE_DAY: Duration = Duration::from_secs(24 * 3600);

/// A temp dir holding PEM files for `openssl`.
pub struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Writes `content` to `name` and returns its path.
    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(content.as_bytes()).expect("write");
        path
    }
}

/// Runs `openssl <args>`; returns (success, stdout + stderr).
pub fn openssl(args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("the `openssl` CLI must be installed to run these tests");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `openssl x509 -noout -text` of a PEM certificate.
pub fn x509_text(files: &Files, pem: &str) -> String {
    let path = files.write("x509-text.pem", pem);
    let (ok, text) = openssl(&["x509", "-noout", "-text", "-in", path.to_str().unwrap()]);
    assert!(ok, "openssl could not parse the certificate:\n{text}");
    text
}

/// notBefore and notAfter as openssl reads them (ISO 8601 dates).
pub fn x509_dates(files: &Files, pem: &str) -> (SystemTime, SystemTime) {
    let path = files.write("x509-dates.pem", pem);
    let (ok, text) = openssl(&[
        "x509",
        "-noout",
        "-startdate",
        "-enddate",
        "-dateopt",
        "iso_8601",
        "-in",
        path.to_str().unwrap(),
    ]);
    assert!(ok, "openssl could not read dates:\n{text}");
    let field = |name: &str| {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        parse_iso(line)
    };
    (field("notBefore="), field("notAfter="))
}

/// Parses `YYYY-MM-DD HH:MM:SSZ`.
fn parse_iso(s: &str) -> SystemTime {
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, mo, d, h, mi, se) = (n(0..4), n(5..7), n(8..10), n(11..13), n(14..16), n(17..19));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap())
}

/// `openssl verify -CAfile root [-untrusted chain] [-purpose p] leaf`.
pub fn openssl_verify(
    files: &Files,
    root_pem: &str,
    chain_pem: &[String],
    leaf_pem: &str,
    purpose: Option<&str>,
) -> (bool, String) {
    let root = files.write("verify-root.pem", root_pem);
    let leaf = files.write("verify-leaf.pem", leaf_pem);
    let chain = files.write("verify-chain.pem", &chain_pem.concat());
    let mut args = vec!["verify", "-CAfile", root.to_str().unwrap()];
    if !chain_pem.is_empty() {
        args.extend(["-untrusted", chain.to_str().unwrap()]);
    }
    if let Some(p) = purpose {
        args.extend(["-purpose", p]);
    }
    args.push(leaf.to_str().unwrap());
    openssl(&args)
}

/// A proxy-side ECDSA P-256 key and a CSR for `uri` (DER).
pub fn proxy_csr(uri: &str) -> (KeyPair, Vec<u8>) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::URI(uri.try_into().unwrap())];
    let csr = params.serialize_request(&key).unwrap().der().to_vec();
    (key, csr)
}

/// CA parameters valid for X509-SVID signing: CA=true, keyUsage critical
/// keyCertSign + cRLSign, valid from an hour ago for a year.
pub fn ca_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "example corp");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(365);
    p
}

/// A self-signed CA from `params`: (cert PEM, PKCS#8 key PEM, key).
pub fn self_signed(params: &CertificateParams) -> (String, String, KeyPair) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem(), key)
}

/// A certificate from `params` signed by the CA (`issuer_pem`, `issuer_key`).
pub fn signed_by(
    params: &CertificateParams,
    issuer_pem: &str,
    issuer_key: KeyPair,
) -> (String, String, KeyPair) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let issuer = Issuer::from_ca_cert_pem(issuer_pem, issuer_key).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem(), key)
}

/// Re-parses a PKCS#8 PEM key (rcgen keys are not `Clone`).
pub fn key(pem: &str) -> KeyPair {
    KeyPair::from_pem(pem).unwrap()
}
