//! The control plane's own TLS material for the xDS/Certify port, under
//! `<data-dir>/cp-tls/`: a private CA (`ca.pem`, `ca-key.pem`) that proxies
//! trust, and a serving certificate (`tls.crt`, `tls.key`) that covers
//! `localhost`, `127.0.0.1`, `::1`, the advertised host and the hostname.
//!
//! The CA is created once and never regenerated while its files exist (a new
//! CA would break every proxy that trusts the old `ca.pem`). The serving
//! certificate is reissued when a name is missing or it is within 30 days of
//! expiry. Key files are 0600 and written atomically.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::data_dir::{DataDirError, write_secret_file};

/// Why the CP TLS material could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum CpTlsError {
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] DataDirError),
    /// A file exists but does not parse; the message names it.
    #[error(
        "{path}: {reason}; move the cp-tls directory away to create new material (proxies must then trust the new ca.pem)"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Certificate generation failed.
    #[error("cannot generate the xDS serving certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The loaded material: PEM strings ready for a TLS server.
#[derive(Clone)]
pub struct CpTls {
    /// The CA certificate proxies trust (`ca.pem`).
    pub ca_pem: String,
    /// The serving certificate (`tls.crt`).
    pub cert_pem: String,
    /// The serving key (`tls.key`).
    pub key_pem: String,
    /// The names the serving certificate covers.
    pub names: Vec<String>,
    ca_key_pem: String,
}

impl std::fmt::Debug for CpTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpTls")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Option<String>, CpTlsError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CpTlsError::Io(DataDirError::Io {
            action: "cannot read",
            path: path.to_path_buf(),
            source,
        })),
    }
}

/// The machine's hostname, if known.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The first non-loopback IPv4 address, else `127.0.0.1` (DESIGN.md §5).
pub fn default_advertised_host() -> String {
    if_addrs::get_if_addrs()
        .ok()
        .and_then(|ifs| {
            ifs.into_iter()
                .filter(|i| !i.is_loopback())
                .find_map(|i| match i.ip() {
                    IpAddr::V4(v4) => Some(v4.to_string()),
                    IpAddr::V6(_) => None,
                })
        })
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// The names the serving certificate must cover.
pub fn required_names(advertised_host: &str) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        advertised_host.to_string(),
    ];
    if let Some(h) = hostname() {
        names.push(h);
    }
    names.sort();
    names.dedup();
    names
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "meshlink control plane CA");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - Duration::from_secs(60);
    p.not_after = now + Duration::from_secs(10 * 365 * 24 * 3600);
    p
}

fn san(name: &str) -> Result<SanType, rcgen::Error> {
    Ok(match name.parse::<IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(name.try_into()?),
    })
}

/// Whether `cert_pem` covers every name and is valid for more than 30 days.
fn serving_cert_is_current(cert_pem: &str, names: &[String]) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) else {
        return false;
    };
    let Ok(cert) = pem.parse_x509() else {
        return false;
    };
    let remaining = cert.validity().time_to_expiration();
    if remaining.is_none_or(|d| d < time::Duration::days(30)) {
        return false;
    }
    let Ok(Some(sans)) = cert.subject_alternative_name() else {
        return false;
    };
    let have: Vec<String> = sans
        .value
        .general_names
        .iter()
        .filter_map(|g| match g {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                4 => Some(IpAddr::from(<[u8; 4]>::try_from(*b).ok()?).to_string()),
                16 => Some(IpAddr::from(<[u8; 16]>::try_from(*b).ok()?).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    names.iter().all(|n| have.contains(n))
}

/// The xDS CA: certificate and private key, PEM.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaPair {
    /// The CA certificate (`ca.pem`).
    pub ca_pem: String,
    /// Its private key (`ca-key.pem`).
    pub ca_key_pem: String,
}

impl std::fmt::Debug for CaPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaPair").finish_non_exhaustive()
    }
}

fn dir_of(data_dir: &Path) -> Result<PathBuf, CpTlsError> {
    let dir = data_dir.join("cp-tls");
    std::fs::create_dir_all(&dir).map_err(|source| DataDirError::Io {
        action: "cannot create",
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// Reads `<data-dir>/cp-tls/ca.pem` and `ca-key.pem`, if both exist.
pub fn read_ca(data_dir: &Path) -> Result<Option<CaPair>, CpTlsError> {
    let dir = dir_of(data_dir)?;
    match (read(&dir.join("ca.pem"))?, read(&dir.join("ca-key.pem"))?) {
        (Some(ca_pem), Some(ca_key_pem)) => Ok(Some(CaPair { ca_pem, ca_key_pem })),
        (None, None) => Ok(None),
        _ => Err(CpTlsError::Corrupt {
            path: dir,
            reason: "only one of ca.pem and ca-key.pem exists".into(),
        }),
    }
}

/// A new self-signed xDS CA.
pub fn generate_ca() -> Result<CaPair, CpTlsError> {
    let key = KeyPair::generate()?;
    let cert = ca_params().self_signed(&key)?;
    Ok(CaPair {
        ca_pem: cert.pem(),
        ca_key_pem: key.serialize_pem(),
    })
}

/// Loads `<data-dir>/cp-tls`, creating the CA on first start and (re)issuing
/// the serving certificate when needed.
pub fn ensure(data_dir: &Path, advertised_host: &str) -> Result<CpTls, CpTlsError> {
    let ca = match read_ca(data_dir)? {
        Some(ca) => ca,
        None => generate_ca()?,
    };
    ensure_with_ca(data_dir, advertised_host, &ca)
}

/// Installs `ca` in `<data-dir>/cp-tls` (keeping different files that were
/// there as `*.replaced`) and (re)issues the serving certificate when a
/// name is missing, it is near expiry, or the CA changed.
pub fn ensure_with_ca(
    data_dir: &Path,
    advertised_host: &str,
    ca: &CaPair,
) -> Result<CpTls, CpTlsError> {
    let dir = dir_of(data_dir)?;
    let (ca_path, ca_key_path) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    let local = read_ca(data_dir)?;
    let ca_changed = local.as_ref() != Some(ca);
    if ca_changed {
        if local.is_some() {
            for p in [&ca_path, &ca_key_path] {
                let _ = std::fs::rename(p, p.with_extension("pem.replaced"));
            }
        }
        write_secret_file(&ca_key_path, ca.ca_key_pem.as_bytes())?;
        write_secret_file(&ca_path, ca.ca_pem.as_bytes())?;
        tracing::info!(path = %ca_path.display(), "installed the control plane's xDS CA");
    }
    let CaPair { ca_pem, ca_key_pem } = ca.clone();
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|e| CpTlsError::Corrupt {
        path: ca_key_path.clone(),
        reason: e.to_string(),
    })?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, &ca_key).map_err(|e| CpTlsError::Corrupt {
        path: ca_path.clone(),
        reason: e.to_string(),
    })?;
    let names = required_names(advertised_host);
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (cert_pem, key_pem) = match (read(&cert_path)?, read(&key_path)?) {
        (Some(c), Some(k)) if !ca_changed && serving_cert_is_current(&c, &names) => (c, k),
        _ => {
            let key = KeyPair::generate()?;
            let mut p = CertificateParams::default();
            let mut dn = DistinguishedName::new();
            dn.push(DnType::CommonName, "meshlink-cp");
            p.distinguished_name = dn;
            p.subject_alt_names = names.iter().map(|n| san(n)).collect::<Result<_, _>>()?;
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let now = time::OffsetDateTime::now_utc();
            p.not_before = now - Duration::from_secs(60);
            p.not_after = now + Duration::from_secs(365 * 24 * 3600);
            let cert = p.signed_by(&key, &issuer)?;
            let (c, k) = (cert.pem(), key.serialize_pem());
            write_secret_file(&key_path, k.as_bytes())?;
            write_secret_file(&cert_path, c.as_bytes())?;
            tracing::info!(names = ?names, "issued the xDS serving certificate");
            (c, k)
        }
    };
    Ok(CpTls {
        ca_pem,
        cert_pem,
        key_pem,
        names,
        ca_key_pem,
    })
}

impl CpTls {
    /// Issues a client certificate from the cp-tls CA (for `token dataplane
    /// --cert-dir`, used by clients that cannot send a token).
    pub fn issue_client_cert(
        &self,
        uri: &str,
        lifetime: Duration,
    ) -> Result<(String, String), CpTlsError> {
        let ca_key = KeyPair::from_pem(&self.ca_key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca_pem, &ca_key)?;
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::default();
        p.subject_alt_names = vec![SanType::URI(uri.try_into()?)];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now - Duration::from_secs(60);
        p.not_after = now + lifetime;
        let cert = p.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = ensure(dir.path(), "192.0.2.7").unwrap();
        let b = ensure(dir.path(), "192.0.2.7").unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_eq!(a.cert_pem, b.cert_pem, "a current serving cert is kept");
        for f in ["ca-key.pem", "tls.key"] {
            let mode = std::fs::metadata(dir.path().join("cp-tls").join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        assert!(serving_cert_is_current(
            &a.cert_pem,
            &required_names("192.0.2.7")
        ));
    }

    #[test]
    fn a_shared_ca_replaces_the_local_one_and_reissues_the_serving_cert() {
        let dir = tempfile::tempdir().unwrap();
        let a = ensure(dir.path(), "192.0.2.7").unwrap();
        let shared = generate_ca().unwrap();
        let b = ensure_with_ca(dir.path(), "192.0.2.7", &shared).unwrap();
        assert_eq!(b.ca_pem, shared.ca_pem);
        assert_ne!(a.cert_pem, b.cert_pem, "signed by the new CA");
        let on_disk = std::fs::read_to_string(dir.path().join("cp-tls/ca.pem")).unwrap();
        assert_eq!(on_disk, shared.ca_pem);
        let kept = std::fs::read_to_string(dir.path().join("cp-tls/ca.pem.replaced")).unwrap();
        assert_eq!(kept, a.ca_pem, "the replaced CA is kept");
        let c = ensure_with_ca(dir.path(), "192.0.2.7", &shared).unwrap();
        assert_eq!(b.cert_pem, c.cert_pem, "nothing changes the second time");
    }

    #[test]
    fn new_advertised_host_reissues_serving_cert_but_keeps_ca() {
        let dir = tempfile::tempdir().unwrap();
        let a = ensure(dir.path(), "192.0.2.7").unwrap();
        let b = ensure(dir.path(), "192.0.2.8").unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_ne!(a.cert_pem, b.cert_pem);
        assert!(serving_cert_is_current(
            &b.cert_pem,
            &required_names("192.0.2.8")
        ));
    }
}
