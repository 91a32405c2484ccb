//! How fast can the control plane certify proxies? Side by side, in one run:
//!
//! - (a) raw ECDSA P-256 signing with ring over a ~300-byte message: the
//!   physical limit, since every certificate costs one signature;
//! - (b) certificates issued per second from P-256 CSRs (`issue_from_csr`,
//!   CSR made outside the timed loop): parse + verify the CSR, build and
//!   sign the leaf;
//! - (c) control-plane key + certificate generation (`issue_with_key`), the
//!   Envoy/gRPC compatibility path;
//! - (d) the same with RSA-2048, as Kuma's builtin CA does: (d1) raw RSA
//!   signing with ring, (d2) `issue_from_csr` with a provided RSA-2048 CA,
//!   (d3) RSA-2048 key generation (RustCrypto `rsa`, since ring cannot
//!   generate RSA keys) plus a certificate signed by the RSA CA.
//!
//! Run: `cargo bench -p meshlink-identity --bench signing`. Each group
//! reports throughput in elements (operations) per second.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use meshlink_identity::{MeshCa, SpiffeId};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
use rsa::pkcs8::{EncodePrivateKey as _, EncodePublicKey as _};

const DAY: Duration = Duration::from_secs(24 * 3600);
const TEN_YEARS: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// About the size of a leaf certificate's to-be-signed part.
const MESSAGE: [u8; 300] = [0x5a; 300];

fn configure(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group("signing");
    group
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    group
}

fn web() -> SpiffeId {
    SpiffeId::new("default", "web").unwrap()
}

/// A P-256 CSR as a proxy would send it.
fn p256_csr() -> Vec<u8> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    params.subject_alt_names = vec![SanType::URI("spiffe://default/web".try_into().unwrap())];
    params.serialize_request(&key).unwrap().der().to_vec()
}

/// A self-signed RSA-2048 X509-SVID signing CA: (cert PEM, PKCS#8 PEM).
fn rsa_ca() -> (String, String) {
    let mut rng = rsa::rand_core::OsRng;
    let rsa_key = rsa::RsaPrivateKey::new(&mut rng, 2048).unwrap();
    let der = rsa_key.to_pkcs8_der().unwrap();
    let key = KeyPair::try_from(der.as_bytes()).unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, "rsa ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn bench(c: &mut Criterion) {
    let rng = SystemRandom::new();
    let now = SystemTime::now();

    // (a) raw ECDSA P-256 signing.
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let ec_key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let mut group = configure(c);
    group.bench_function("a_ring_ecdsa_p256_sign_300B", |b| {
        b.iter(|| ec_key.sign(&rng, black_box(&MESSAGE)).unwrap())
    });

    // (a2) raw ECDSA P-256 verify + sign: the physical limit of issuing from
    // a CSR, which must verify the CSR's signature before signing the leaf.
    let signature = ec_key.sign(&rng, &MESSAGE).unwrap();
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_ASN1,
        ring::signature::KeyPair::public_key(&ec_key)
            .as_ref()
            .to_vec(),
    );
    group.bench_function("a2_ring_ecdsa_p256_verify_and_sign_300B", |b| {
        b.iter(|| {
            public
                .verify(black_box(&MESSAGE), signature.as_ref())
                .unwrap();
            ec_key.sign(&rng, black_box(&MESSAGE)).unwrap()
        })
    });

    // (b) certificates from CSRs, builtin P-256 CA.
    let ca =
        MeshCa::load(&MeshCa::generate_builtin("default", "ca", "default", TEN_YEARS).unwrap())
            .unwrap();
    let csr = p256_csr();
    group.bench_function("b_issue_from_csr_p256_ca", |b| {
        b.iter(|| {
            ca.issue_from_csr(black_box(&csr), &web(), DAY, now)
                .unwrap()
        })
    });

    // (c) CP-side P-256 key + certificate.
    group.bench_function("c_issue_with_key_p256", |b| {
        b.iter(|| ca.issue_with_key(&web(), DAY, now).unwrap())
    });

    // (d1) raw RSA-2048 signing.
    let (rsa_ca_pem, rsa_ca_key_pem) = rsa_ca();
    let rsa_pkcs8 = rustls_pki_types_der(&rsa_ca_key_pem);
    let rsa_key = RsaKeyPair::from_pkcs8(&rsa_pkcs8).unwrap();
    group.bench_function("d1_ring_rsa2048_sign_300B", |b| {
        let mut sig = vec![0u8; rsa_key.public().modulus_len()];
        b.iter(|| {
            rsa_key
                .sign(&RSA_PKCS1_SHA256, &rng, black_box(&MESSAGE), &mut sig)
                .unwrap()
        })
    });

    // (d2) certificates from P-256 CSRs, provided RSA-2048 CA.
    let material = MeshCa::validate_provided(&rsa_ca_pem, &rsa_ca_key_pem, None, now).unwrap();
    let rsa_mesh_ca = MeshCa::load(&material).unwrap();
    group.bench_function("d2_issue_from_csr_rsa2048_ca", |b| {
        b.iter(|| {
            rsa_mesh_ca
                .issue_from_csr(black_box(&csr), &web(), DAY, now)
                .unwrap()
        })
    });
    group.finish();

    // (d3) Kuma-style: RSA-2048 key generation + certificate by the RSA CA.
    let issuer =
        Issuer::from_ca_cert_pem(&rsa_ca_pem, KeyPair::from_pem(&rsa_ca_key_pem).unwrap()).unwrap();
    let mut group = configure(c);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("d3_rsa2048_keygen_and_cert", |b| {
        let mut os_rng = rsa::rand_core::OsRng;
        b.iter(|| {
            let key = rsa::RsaPrivateKey::new(&mut os_rng, 2048).unwrap();
            let spki = key.to_public_key().to_public_key_der().unwrap();
            let public = rcgen::SubjectPublicKeyInfo::from_der(spki.as_bytes()).unwrap();
            let der = key.to_pkcs8_der().unwrap();
            leaf_params()
                .signed_by(&public, &issuer)
                .map(|c| (c, der))
                .unwrap()
        })
    });
    group.finish();
}

/// The same leaf profile `MeshCa` issues.
fn leaf_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.subject_alt_names = vec![SanType::URI("spiffe://default/web".try_into().unwrap())];
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.use_authority_key_identifier_extension = true;
    p
}

/// PKCS#8 PEM to DER.
fn rustls_pki_types_der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::PrivatePkcs8KeyDer;
    use rustls_pki_types::pem::PemObject as _;
    PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .secret_pkcs8_der()
        .to_vec()
}

criterion_group!(benches, bench);
criterion_main!(benches);
