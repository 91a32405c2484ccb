//! Small X.509 building blocks shared by the CA, CSR, bundle and TLS modules:
//! PEM decoding and encoding, SHA-256 fingerprints, random serials, time
//! conversions and URI SAN extraction.
//!
//! Owns no policy: it never decides whether a certificate is acceptable, it
//! only turns bytes into the shapes the policy modules check. It must never
//! log or format private key material.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rand::RngCore as _;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;
use x509_parser::time::ASN1Time;

/// Why PEM or DER input could not be read as certificates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    /// The text holds no `CERTIFICATE` PEM block at all.
    #[error("no `-----BEGIN CERTIFICATE-----` block found")]
    NoCertificate,
    /// A PEM block could not be decoded.
    #[error("PEM could not be decoded: {0}")]
    Pem(String),
    /// A block decoded, but is not an X.509 certificate.
    #[error("certificate #{index} is not valid X.509 DER: {reason}")]
    Der {
        /// Position of the certificate in the input, from 0.
        index: usize,
        /// What the parser reported.
        reason: String,
    },
}

/// Decodes every `CERTIFICATE` block of `pem` and checks each parses as X.509.
pub(crate) fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PemError::Pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(PemError::NoCertificate);
    }
    for (index, der) in certs.iter().enumerate() {
        parse_cert(der).map_err(|reason| PemError::Der { index, reason })?;
    }
    Ok(certs)
}

/// Decodes exactly one certificate (the first block) from `pem`.
pub(crate) fn pem_cert(pem: &str) -> Result<CertificateDer<'static>, PemError> {
    Ok(pem_certs(pem)?.swap_remove(0))
}

/// Parses DER as an X.509 certificate, rejecting trailing bytes.
pub(crate) fn parse_cert(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    match X509Certificate::from_der(der) {
        Ok((rest, _)) if !rest.is_empty() => Err("trailing bytes after the certificate".into()),
        Ok((_, cert)) => Ok(cert),
        Err(e) => Err(e.to_string()),
    }
}

/// Encodes DER as PEM with the given label, 64-column lines.
pub(crate) fn der_to_pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        // base64 output is ASCII, so every chunk is valid UTF-8.
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// SHA-256 of `der`, lowercase hex.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    hex(&Sha256::digest(der))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A random, positive, 128-bit serial number and its hex form.
///
/// The top bit is cleared (so the DER INTEGER is positive without padding)
/// and the first byte is never zero (so the encoding keeps all 16 bytes).
pub(crate) fn random_serial() -> (rcgen::SerialNumber, String) {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes[0] &= 0x7f;
    if bytes[0] == 0 {
        bytes[0] = 1;
    }
    (rcgen::SerialNumber::from_slice(&bytes), hex(&bytes))
}

/// `t` truncated to whole seconds (X.509 validity has one-second precision).
pub(crate) fn truncate_to_secs(t: SystemTime) -> SystemTime {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => UNIX_EPOCH + Duration::from_secs(d.as_secs()),
        Err(_) => UNIX_EPOCH,
    }
}

/// `SystemTime` to the `time` crate's type (what rcgen takes).
pub(crate) fn to_offset(t: SystemTime) -> OffsetDateTime {
    OffsetDateTime::from(truncate_to_secs(t))
}

/// An X.509 validity time as `SystemTime`.
pub(crate) fn asn1_to_system(t: ASN1Time) -> SystemTime {
    let secs = t.timestamp();
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// `SystemTime` as an X.509 validity time, for `is_valid_at` checks.
pub(crate) fn system_to_asn1(t: SystemTime) -> ASN1Time {
    ASN1Time::new(to_offset(t))
}

/// RFC 3339 rendering of a `SystemTime`, for error messages.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Every URI SAN of `cert`, in order. A malformed SAN extension yields none.
pub(crate) fn uri_sans(cert: &X509Certificate<'_>) -> Vec<String> {
    match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::URI(uri) => Some((*uri).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A readable one-line subject for messages, e.g. `CN=web, O=meshlink`.
pub(crate) fn subject(cert: &X509Certificate<'_>) -> String {
    let s = cert.subject().to_string();
    if s.is_empty() {
        "<empty subject>".to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_are_positive_sixteen_bytes_and_distinct() {
        let (a, a_hex) = random_serial();
        let (_, b_hex) = random_serial();
        assert_eq!(a.len(), 16);
        assert_eq!(a_hex.len(), 32);
        assert!(u8::from_str_radix(&a_hex[..2], 16).unwrap() < 0x80);
        assert_ne!(&a_hex[..2], "00");
        assert_ne!(a_hex, b_hex);
    }

    #[test]
    fn pem_round_trip_and_garbage() {
        let cert = rcgen::generate_simple_self_signed(vec!["a.example".into()]).unwrap();
        let pem = der_to_pem("CERTIFICATE", cert.cert.der());
        let back = pem_certs(&pem).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].as_ref(), cert.cert.der().as_ref());
        assert_eq!(fingerprint(cert.cert.der()).len(), 64);
        assert_eq!(pem_certs("hello"), Err(PemError::NoCertificate));
        let bogus = der_to_pem("CERTIFICATE", b"not a certificate");
        assert!(matches!(
            pem_certs(&bogus),
            Err(PemError::Der { index: 0, .. })
        ));
    }

    #[test]
    fn time_conversions_round_trip_at_second_precision() {
        let now = SystemTime::now();
        let t = truncate_to_secs(now);
        assert!(now.duration_since(t).unwrap() < Duration::from_secs(1));
        assert_eq!(asn1_to_system(system_to_asn1(now)), t);
    }
}
