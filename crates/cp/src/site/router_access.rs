//! RouterAccess credentials: with `generateTlsCredentials: true`, the
//! Secret named by `tlsCredentials` holds a server certificate from the
//! RouterAccess's issuer (a site CA) covering the advertised host and
//! `subjectAlternativeNames`.
//!
//! Owns when that Secret is (re)issued: when it is missing, when it was not
//! issued by the current CA or for the current host list, and at 50 % ± 10 %
//! of its lifetime (the workload-certificate schedule; the jitter is derived
//! from the certificate so every control plane computes the same time). A
//! Secret this controller did not generate is never overwritten.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use meshlink_api::spec::{CA_CRT, SecretSpec, Spec, TLS_CRT, TLS_KEY};
use meshlink_api::{Metadata, Resource};
use meshlink_identity::{SiteCa, check_tls_pair, renewal_time};
use sha2::{Digest as _, Sha256};

/// Label on a generated Secret: which RouterAccess it serves.
pub const GENERATED_FOR: &str = "meshlink.dev/generated-for";
/// Label on a generated Secret: a hash of its issuer and host list.
pub const HOSTS_HASH: &str = "meshlink.dev/hosts-hash";
/// Lifetime of a RouterAccess server certificate.
pub const SERVER_CERT_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// What to do with a RouterAccess's Secret.
pub enum SecretPlan {
    /// It is current; renew at the given time.
    Keep(SystemTime),
    /// (Re)issue it: write this Secret.
    Write(Box<Resource>, SystemTime),
    /// A Secret of that name exists that this controller did not generate.
    Foreign(String),
}

/// The hosts a server certificate covers: the advertised host, then the
/// SANs, without duplicates.
pub fn hosts(advertised: &str, sans: &[String]) -> Vec<String> {
    let mut out = vec![advertised.to_owned()];
    for s in sans {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

fn hash_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A jitter in [-0.1, 0.1] derived from the certificate, so every control
/// plane computes the same renewal time for it.
pub(crate) fn jitter_of(cert_b64: &str) -> f64 {
    let h = Sha256::digest(cert_b64.as_bytes());
    let n = u16::from_be_bytes([h[0], h[1]]) as f64 / u16::MAX as f64;
    (n - 0.5) * 0.2
}

/// Decides whether the Secret `name` (currently `existing`) for RouterAccess
/// `ra_name` must be (re)issued from `ca` for `hosts`. With `router_id` (the
/// Site's id, once assigned) the certificate names this site's router, so
/// peers bind the router id in its hello to it; the id is part of the hash,
/// so a Secret issued before the id existed is reissued once it does.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    ra_name: &str,
    name: &str,
    existing: Option<&Resource>,
    ca: &SiteCa,
    issuer: &str,
    hosts: &[String],
    router_id: Option<&str>,
    now: SystemTime,
) -> Result<SecretPlan, String> {
    let mut parts = vec![issuer, ca.cert_pem()];
    parts.extend(hosts.iter().map(String::as_str));
    if let Some(id) = router_id {
        parts.push("router");
        parts.push(id);
    }
    let want_hash = hash_hex(&parts);
    if let Some(r) = existing {
        if r.labels().get(GENERATED_FOR).map(String::as_str) != Some(ra_name) {
            return Ok(SecretPlan::Foreign(format!(
                "Secret {name:?} exists and was not generated for this RouterAccess; delete it, \
                 or set generateTlsCredentials: false to use it as it is"
            )));
        }
        if let Some(s) = r.spec.as_secret()
            && r.labels().get(HOSTS_HASH) == Some(&want_hash)
            && let (Some(cert), Some(key)) = (s.decoded(TLS_CRT), s.decoded(TLS_KEY))
            && let Ok(info) = check_tls_pair(&cert, &key)
        {
            let at = renewal_time(info.not_before, info.not_after, jitter_of(&s.data[TLS_CRT]));
            if now < at {
                return Ok(SecretPlan::Keep(at));
            }
        }
    }
    let (cert, key) = ca
        .issue_router_server_cert(hosts, router_id, SERVER_CERT_LIFETIME, now)
        .map_err(|e| format!("cannot issue the server certificate for {hosts:?}: {e}"))?;
    let mut chain = cert.cert_pem.clone();
    for c in &cert.chain_pem {
        chain.push_str(c);
    }
    let spec = SecretSpec::tls(&chain, &key, Some(ca.cert_pem()));
    let at = renewal_time(
        cert.not_before,
        cert.not_after,
        jitter_of(&spec.data[TLS_CRT]),
    );
    let mut labels = BTreeMap::new();
    labels.insert(GENERATED_FOR.to_owned(), ra_name.to_owned());
    labels.insert(HOSTS_HASH.to_owned(), want_hash);
    let meta = Metadata {
        name: name.to_owned(),
        labels,
        ..Default::default()
    };
    debug_assert!(spec.data.contains_key(CA_CRT));
    Ok(SecretPlan::Write(
        Box::new(Resource::new(meta, Spec::Secret(spec))),
        at,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> SiteCa {
        SiteCa::load(
            &SiteCa::generate("west", "skupper-site-ca", Duration::from_secs(86400 * 3650))
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn issues_once_then_keeps_until_the_renewal_time() {
        let ca = ca();
        let hosts = hosts("10.0.0.7", &["router.example".into(), "10.0.0.7".into()]);
        assert_eq!(hosts, ["10.0.0.7", "router.example"]);
        let now = SystemTime::now();
        let SecretPlan::Write(secret, at) = plan(
            "ra",
            "creds",
            None,
            &ca,
            "skupper-site-ca",
            &hosts,
            None,
            now,
        )
        .unwrap() else {
            panic!("a missing Secret is issued")
        };
        let life = SERVER_CERT_LIFETIME.as_secs_f64();
        let frac = at.duration_since(now).unwrap().as_secs_f64() / life;
        assert!(
            (0.39..=0.61).contains(&frac),
            "renewal at {frac} of the lifetime"
        );
        match plan(
            "ra",
            "creds",
            Some(&secret),
            &ca,
            "skupper-site-ca",
            &hosts,
            None,
            now,
        )
        .unwrap()
        {
            SecretPlan::Keep(k) => assert_eq!(k, at),
            _ => panic!("a current Secret is kept"),
        }
        assert!(matches!(
            plan(
                "ra",
                "creds",
                Some(&secret),
                &ca,
                "skupper-site-ca",
                &hosts,
                None,
                at
            )
            .unwrap(),
            SecretPlan::Write(..)
        ));
        let more = vec!["10.0.0.7".to_owned(), "other".to_owned()];
        assert!(matches!(
            plan(
                "ra",
                "creds",
                Some(&secret),
                &ca,
                "skupper-site-ca",
                &more,
                None,
                now
            )
            .unwrap(),
            SecretPlan::Write(..)
        ));
        assert!(matches!(
            plan(
                "other-ra",
                "creds",
                Some(&secret),
                &ca,
                "skupper-site-ca",
                &hosts,
                None,
                now
            )
            .unwrap(),
            SecretPlan::Foreign(_)
        ));
    }
}
