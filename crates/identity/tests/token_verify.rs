//! Proxy token issuance and strict verification, as the control plane's xDS
//! and Certify endpoints see it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use meshlink_identity::{TokenClaims, TokenError, TokenKeyMaterial, TokenSigningKey};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

fn key() -> TokenSigningKey {
    TokenSigningKey::load(&TokenSigningKey::generate().unwrap()).unwrap()
}

fn claims() -> TokenClaims {
    TokenClaims::dataplane("default", "web-1", vec!["web".into()], DAY, now())
}

fn never(_: &str) -> bool {
    false
}

fn segments(token: &str) -> Vec<String> {
    token.split('.').map(str::to_string).collect()
}

fn b64(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

#[test]
fn round_trip() {
    let key = key();
    let claims = claims();
    let token = key.issue(&claims);
    let verified = key.verifier().verify(&token, now(), never).unwrap();
    assert_eq!(verified, claims);
    assert_eq!(verified.dataplane_key(), "default.web-1");
    assert_eq!(verified.exp - verified.iat, DAY.as_secs());
    assert_eq!(verified.jti.len(), 32);
    assert!(verified.jti.chars().all(|c| c.is_ascii_hexdigit()));
    // Header is EdDSA/JWT with this key's id.
    let header = URL_SAFE_NO_PAD.decode(&segments(&token)[0]).unwrap();
    let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
    assert_eq!(header["alg"], "EdDSA");
    assert_eq!(header["typ"], "JWT");
    assert_eq!(header["kid"], key.key_id());
    // A token read from a file with a trailing newline still verifies.
    key.verifier()
        .verify(&format!("{token}\n"), now(), never)
        .unwrap();
}

#[test]
fn every_token_has_a_fresh_jti() {
    assert_ne!(claims().jti, claims().jti);
}

#[test]
fn tampered_payload_is_bad_signature() {
    let key = key();
    let token = key.issue(&claims());
    let mut parts = segments(&token);
    let mut forged = claims();
    forged.name = "db-1".into();
    forged.services = vec!["db".into()];
    parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
    let err = key
        .verifier()
        .verify(&parts.join("."), now(), never)
        .unwrap_err();
    assert!(matches!(err, TokenError::BadSignature(_)), "{err}");
}

#[test]
fn tampered_signature_is_bad_signature() {
    let key = key();
    let token = key.issue(&claims());
    let mut parts = segments(&token);
    let mut sig = URL_SAFE_NO_PAD.decode(&parts[2]).unwrap();
    sig[10] ^= 0x01;
    parts[2] = URL_SAFE_NO_PAD.encode(sig);
    let err = key
        .verifier()
        .verify(&parts.join("."), now(), never)
        .unwrap_err();
    assert!(matches!(err, TokenError::BadSignature(_)), "{err}");
}

#[test]
fn other_key_is_bad_signature_naming_both_keys() {
    let (ours, theirs) = (key(), key());
    let token = theirs.issue(&claims());
    let err = ours.verifier().verify(&token, now(), never).unwrap_err();
    let TokenError::BadSignature(detail) = &err else {
        panic!("expected BadSignature, got {err}");
    };
    assert!(
        detail.contains(theirs.key_id()) && detail.contains(ours.key_id()),
        "{detail}"
    );
    assert!(
        err.to_string().contains("meshlink token dataplane"),
        "{err}"
    );

    // Without a kid header the signature check itself catches it.
    let mut parts = segments(&token);
    parts[0] = b64(r#"{"alg":"EdDSA","typ":"JWT"}"#);
    let err = ours
        .verifier()
        .verify(&parts.join("."), now(), never)
        .unwrap_err();
    assert!(matches!(err, TokenError::BadSignature(_)), "{err}");
}

#[test]
fn alg_none_and_other_algs_are_rejected() {
    let key = key();
    let payload = segments(&key.issue(&claims()))[1].clone();
    for (header, sig) in [
        (r#"{"alg":"none","typ":"JWT"}"#, ""),
        (r#"{"alg":"none","typ":"JWT"}"#, "AAAA"),
        (r#"{"alg":"HS256","typ":"JWT"}"#, "AAAA"),
        (r#"{"alg":"ES256","typ":"JWT"}"#, "AAAA"),
    ] {
        let token = format!("{}.{payload}.{sig}", b64(header));
        let err = key.verifier().verify(&token, now(), never).unwrap_err();
        let TokenError::Malformed(detail) = &err else {
            panic!("{header}: expected Malformed, got {err}");
        };
        assert!(
            detail.contains("alg") || detail.contains("empty"),
            "{header}: {detail}"
        );
    }
}

#[test]
fn unknown_typ_and_unknown_header_fields_are_rejected() {
    let key = key();
    let payload = segments(&key.issue(&claims()))[1].clone();
    for header in [
        r#"{"alg":"EdDSA","typ":"at+jwt"}"#,
        r#"{"alg":"EdDSA","typ":"JWT","crit":["exp"]}"#,
        r#"{"typ":"JWT"}"#,
        "not json",
    ] {
        let token = format!("{}.{payload}.AAAA", b64(header));
        let err = key.verifier().verify(&token, now(), never).unwrap_err();
        assert!(matches!(err, TokenError::Malformed(_)), "{header}: {err}");
    }
}

#[test]
fn wrong_segment_count_is_malformed() {
    let key = key();
    let token = key.issue(&claims());
    let parts = segments(&token);
    for bad in [
        String::new(),
        parts[0].clone(),
        format!("{}.{}", parts[0], parts[1]),
        format!("{token}.{}", parts[2]),
        format!("{token}."),
    ] {
        let err = key.verifier().verify(&bad, now(), never).unwrap_err();
        let TokenError::Malformed(detail) = &err else {
            panic!("expected Malformed, got {err}");
        };
        assert!(detail.contains("segments"), "{detail}");
    }
}

#[test]
fn garbage_base64_is_malformed() {
    let key = key();
    let parts = segments(&key.issue(&claims()));
    let cases = [
        format!("{}.{}.{}", "!!!", parts[1], parts[2]),
        format!("{}.{}.{}", parts[0], parts[1], "%%%"),
        format!("{}.{}.{}==", parts[0], parts[1], parts[2]),
        format!("{}..{}", parts[0], parts[2]),
        "a".repeat(10_000),
    ];
    for bad in cases {
        let err = key.verifier().verify(&bad, now(), never).unwrap_err();
        assert!(matches!(err, TokenError::Malformed(_)), "{err}");
    }
}

#[test]
fn signed_but_invalid_claims_are_malformed() {
    let key = key();
    let mut c = claims();
    c.exp = c.iat;
    let err = key
        .verifier()
        .verify(&key.issue(&c), now(), never)
        .unwrap_err();
    assert!(
        matches!(err, TokenError::Malformed(ref d) if d.contains("exp")),
        "{err}"
    );
    let mut c = claims();
    c.name.clear();
    let err = key
        .verifier()
        .verify(&key.issue(&c), now(), never)
        .unwrap_err();
    assert!(
        matches!(err, TokenError::Malformed(ref d) if d.contains("name")),
        "{err}"
    );
}

#[test]
fn expired_respects_clock_skew() {
    let key = key();
    let c = TokenClaims::dataplane("default", "web-1", vec![], Duration::from_secs(600), now());
    let token = key.issue(&c);
    let exp = c.expires_at();
    // Within the 60 s skew: still accepted.
    key.verifier()
        .verify(&token, exp + Duration::from_secs(60), never)
        .unwrap();
    let err = key
        .verifier()
        .verify(&token, exp + Duration::from_secs(61), never)
        .unwrap_err();
    let TokenError::Expired { at, dataplane } = &err else {
        panic!("expected Expired, got {err}");
    };
    assert_eq!((*at, dataplane.as_str()), (exp, "default.web-1"));
    assert!(err.to_string().contains("2025-"), "{err}");
}

#[test]
fn not_yet_valid_respects_clock_skew() {
    let key = key();
    let token = key.issue(&claims());
    key.verifier()
        .verify(&token, now() - Duration::from_secs(60), never)
        .unwrap();
    let err = key
        .verifier()
        .verify(&token, now() - Duration::from_secs(61), never)
        .unwrap_err();
    assert!(
        matches!(err, TokenError::NotYetValid { from } if from == now()),
        "{err}"
    );
}

#[test]
fn revoked_names_the_jti() {
    let key = key();
    let c = claims();
    let token = key.issue(&c);
    let revoked = c.jti.clone();
    let err = key
        .verifier()
        .verify(&token, now(), |jti| jti == revoked)
        .unwrap_err();
    assert!(
        matches!(&err, TokenError::Revoked { jti } if *jti == c.jti),
        "{err}"
    );
    assert!(err.to_string().contains(&c.jti));
}

#[test]
fn wrong_kind_is_rejected() {
    let key = key();
    let mut c = claims();
    c.kind = "admin".into();
    let err = key
        .verifier()
        .verify(&key.issue(&c), now(), never)
        .unwrap_err();
    assert!(
        matches!(&err, TokenError::WrongKind { kind } if kind == "admin"),
        "{err}"
    );
}

#[test]
fn stored_material_reloads_and_verifies_and_debug_redacts() {
    let material = TokenSigningKey::generate().unwrap();
    let stored = serde_json::to_string(&material).unwrap();
    let token = TokenSigningKey::load(&material).unwrap().issue(&claims());

    let reloaded: TokenKeyMaterial = serde_json::from_str(&stored).unwrap();
    let key = TokenSigningKey::load(&reloaded).unwrap();
    assert_eq!(key.key_id(), material.key_id);
    key.verifier().verify(&token, now(), never).unwrap();

    let debug = format!("{material:?} {key:?}");
    assert!(!debug.contains(&material.pkcs8_b64), "{debug}");
    assert!(
        debug.contains("redacted") && debug.contains(&material.key_id),
        "{debug}"
    );
}

#[test]
fn corrupt_material_is_refused_with_advice() {
    let mut material = TokenSigningKey::generate().unwrap();
    let good_id = material.key_id.clone();
    material.key_id = "0000000000000000".into();
    let err = TokenSigningKey::load(&material).unwrap_err();
    assert!(err.to_string().contains(&good_id), "{err}");
    material.pkcs8_b64 = "bm90IGEga2V5".into();
    let err = TokenSigningKey::load(&material).unwrap_err();
    assert!(
        matches!(err, TokenError::InvalidKeyMaterial { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("do not regenerate"), "{err}");
}

#[test]
fn router_token_names_a_site_and_is_not_a_dataplane_token() {
    let key = key();
    let c = TokenClaims::router("dmz-a", DAY, now());
    let token = key.issue(&c);
    let payload = URL_SAFE_NO_PAD.decode(&segments(&token)[1]).unwrap();
    let payload: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(payload["kind"], "router");
    assert_eq!(payload["site"], "dmz-a");
    assert!(payload.get("mesh").is_none(), "no mesh claim: {payload}");

    let verified = key.verifier().verify_proxy(&token, now(), never).unwrap();
    assert_eq!(verified, c);
    assert_eq!(verified.node_id(), "site.dmz-a");
    // Certify (dataplane tokens only) refuses it, naming the kind.
    let err = key.verifier().verify(&token, now(), never).unwrap_err();
    assert!(
        matches!(&err, TokenError::WrongKind { kind } if kind == "router"),
        "{err}"
    );
    // A dataplane token passes both checks.
    let dp = key.issue(&claims());
    assert_eq!(
        key.verifier()
            .verify_proxy(&dp, now(), never)
            .unwrap()
            .node_id(),
        "default.web-1"
    );
}

#[test]
fn router_token_without_a_site_or_of_another_kind_is_refused() {
    let key = key();
    let mut c = TokenClaims::router("", DAY, now());
    let err = key
        .verifier()
        .verify_proxy(&key.issue(&c), now(), never)
        .unwrap_err();
    assert!(err.to_string().contains("claim site is empty"), "{err}");
    c.kind = "admin".into();
    c.site = "dmz-a".into();
    let err = key
        .verifier()
        .verify_proxy(&key.issue(&c), now(), never)
        .unwrap_err();
    assert!(
        matches!(&err, TokenError::NotAProxyToken { kind } if kind == "admin"),
        "{err}"
    );
}

/// A verifier remembers tokens whose signature it checked (a reconnecting
/// proxy costs no second Ed25519 verify), but only those exact bytes: a
/// forgery of a remembered token is still refused, and expiry and
/// revocation are still checked on every use.
#[test]
fn a_remembered_signature_still_checks_everything_that_can_change() {
    let key = key();
    let verifier = key.verifier();
    let claims = claims();
    let token = key.issue(&claims);
    assert_eq!(verifier.verify(&token, now(), never).unwrap(), claims);
    // The same verifier (and its clones) accepts the same bytes again.
    assert_eq!(
        verifier.clone().verify(&token, now(), never).unwrap(),
        claims
    );
    // A forgery that reuses the remembered signature is refused.
    let mut parts = segments(&token);
    let mut forged = claims.clone();
    forged.name = "db-1".into();
    parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
    let err = verifier.verify(&parts.join("."), now(), never).unwrap_err();
    assert!(matches!(err, TokenError::BadSignature(_)), "{err}");
    // Revocation and expiry are not remembered.
    let err = verifier.verify(&token, now(), |_| true).unwrap_err();
    assert!(matches!(err, TokenError::Revoked { .. }), "{err}");
    let err = verifier.verify(&token, now() + 2 * DAY, never).unwrap_err();
    assert!(matches!(err, TokenError::Expired { .. }), "{err}");
    assert_eq!(verifier.verify(&token, now(), never).unwrap(), claims);
}
