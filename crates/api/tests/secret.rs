//! Kubernetes `v1` Secrets import to canonical Secrets; `stringData` is
//! converted, bad input names the field as written, and `tls.key` redacts.

use meshlink_api::spec::{REDACTED, Spec, TLS_KEY};
use meshlink_api::{Kind, SourceFormat, parse_documents};

mod support;
use support::{errors, ok};

const CERT: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn string_data_and_data_become_base64_data() {
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: link-creds, namespace: west}}\n\
         type: kubernetes.io/tls\ndata:\n  ca.crt: {}\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        b64(CERT),
        indent(CERT),
        indent(KEY)
    );
    let docs = parse_documents(&yaml);
    assert_eq!(docs[0].format, Some(SourceFormat::KubernetesV1));
    assert_eq!(
        docs[0].warnings.len(),
        1,
        "namespace is ignored with a warning"
    );
    let v = ok(&docs[0]);
    assert_eq!(v["apiVersion"], "meshlink.dev/v1alpha1");
    assert_eq!(v["kind"], "Secret");
    assert_eq!(v["spec"]["type"], "kubernetes.io/tls");
    assert_eq!(v["spec"]["data"]["tls.crt"], b64(CERT));
    assert_eq!(v["spec"]["data"]["tls.key"], b64(KEY));
    assert_eq!(v["spec"]["data"]["ca.crt"], b64(CERT));
    let r = docs[0].outcome.as_ref().unwrap();
    assert_eq!(r.kind(), Kind::Secret);
    // Canonical output parses back to the same resource.
    let again = parse_documents(&r.to_yaml());
    assert_eq!(again[0].outcome.as_ref().unwrap(), r);
    // API reads hide the key, and the hidden form still parses.
    let shown = r.to_api_json();
    assert_eq!(shown["spec"]["data"][TLS_KEY], REDACTED);
    let reparsed = parse_documents(&serde_yaml_ng::to_string(&shown).unwrap());
    let Spec::Secret(s) = &reparsed[0].outcome.as_ref().unwrap().spec else {
        panic!("not a secret")
    };
    assert!(s.key_is_redacted());
}

#[test]
fn bad_secrets_name_the_field_as_written() {
    let cases = [
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\ndata: {tls.crt: '%%%', tls.key: 'QQ=='}\n",
            "data.tls.crt",
            "not valid base64",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: Opaque\nstringData: {tls.crt: x, tls.key: y}\n",
            "type",
            "unsupported Secret type",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n",
            "kind",
            "kind: Secret only",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\nstringData: {tls.crt: x}\n",
            "data.tls.key",
            "required",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\nstringData: {tls.crt: x, tls.key: y}\n",
            "data.tls.crt",
            "does not decode to a PEM certificate",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nspec: {}\n",
            "spec",
            "unknown field",
        ),
    ];
    for (yaml, path, msg) in cases {
        let errs = errors(yaml);
        assert!(
            errs.iter()
                .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(msg)),
            "{yaml}: expected {path}: {msg}, got {errs:?}"
        );
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}
