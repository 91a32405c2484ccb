//! Kubernetes `v1` Secrets import to canonical Secrets; `stringData` is
//! converted, bad input names the field as written, and `tls.key` redacts.
//! Kuma's universal `type: Secret` / `type: GlobalSecret` and their `v1`
//! forms (`system.kuma.io/secret`, `system.kuma.io/global-secret`) import
//! to the same kind, scoped by type, with `value` redacted; a Mesh's
//! provided CA may name them with `secret:`.

use meshlink_api::spec::{REDACTED, Spec, TLS_KEY, VALUE};
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

#[test]
fn kuma_secrets_import_scoped_by_type_and_their_value_redacts() {
    let yaml = "type: Secret\nname: ca-cert\nmesh: payments\ndata: aGVsbG8=\n---\n\
                type: GlobalSecret\nname: signing\ndata: aGVsbG8=\n---\n\
                apiVersion: v1\nkind: Secret\nmetadata: {name: ca-key}\n\
                type: system.kuma.io/secret\ndata: {value: aGVsbG8=}\n";
    let docs = parse_documents(yaml);
    let v = ok(&docs[0]);
    assert_eq!(v["kind"], "Secret");
    assert_eq!(v["metadata"]["mesh"], "payments");
    assert_eq!(v["spec"]["type"], "system.kuma.io/secret");
    assert_eq!(v["spec"]["data"]["value"], "aGVsbG8=");
    let g = ok(&docs[1]);
    assert_eq!(g["spec"]["type"], "system.kuma.io/global-secret");
    assert!(g["metadata"]["mesh"].is_null(), "{g}");
    let k = ok(&docs[2]);
    assert_eq!(
        k["metadata"]["mesh"], "default",
        "no kuma.io/mesh label: the default mesh, as in Kuma"
    );
    for d in &docs {
        let r = d.outcome.as_ref().unwrap();
        let shown = r.to_api_json();
        assert_eq!(shown["spec"]["data"][VALUE], REDACTED, "{shown}");
        assert!(!shown.to_string().contains("aGVsbG8="), "{shown}");
        // The redacted form (what `get -o yaml` prints) still parses.
        let again = parse_documents(&serde_yaml_ng::to_string(&shown).unwrap());
        let Spec::Secret(s) = &again[0].outcome.as_ref().unwrap().spec else {
            panic!("not a secret")
        };
        assert!(s.key_is_redacted());
        assert_eq!(s.value_bytes(), None);
    }
    let Spec::Secret(s) = &docs[0].outcome.as_ref().unwrap().spec else {
        panic!("not a secret")
    };
    assert_eq!(s.value_bytes().as_deref(), Some(&b"hello"[..]));
}

#[test]
fn bad_kuma_secrets_name_the_field_as_written() {
    let cases = [
        (
            "type: Secret\nname: s\nmesh: m\ndata: '%%% not base64'\n",
            "data",
            "not valid base64",
        ),
        ("type: Secret\nname: s\nmesh: m\n", "data", "required"),
        (
            "type: Secret\nname: s\nmesh: m\ndata: ''\n",
            "data",
            "must not be empty",
        ),
        (
            "type: Secret\nname: s\nmesh: m\ndata: {value: aGk=}\n",
            "data",
            "must be one base64 string",
        ),
        ("type: Secret\nname: s\ndata: aGk=\n", "mesh", "required"),
        (
            "type: GlobalSecret\nname: s\nmesh: m\ndata: aGk=\n",
            "mesh",
            "not allowed",
        ),
        (
            "type: Secret\nname: s\nmesh: m\ndata: aGk=\nvalue: x\n",
            "value",
            "unknown field",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: system.kuma.io/other\ndata: {value: aGk=}\n",
            "type",
            "unsupported Secret type",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: system.kuma.io/secret\n",
            "data.value",
            "required",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: system.kuma.io/secret\ndata: {value: '%%%'}\n",
            "data.value",
            "not valid base64",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: system.kuma.io/secret\ndata: {value: aGk=, other: aGk=}\n",
            "data.other",
            "unknown key",
        ),
        (
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s, labels: {kuma.io/mesh: m}}\ntype: system.kuma.io/global-secret\ndata: {value: aGk=}\n",
            "metadata.labels[\"kuma.io/mesh\"]",
            "belongs to no mesh",
        ),
        (
            "apiVersion: meshlink.dev/v1alpha1\nkind: Secret\nmetadata: {name: s, mesh: m}\nspec: {type: kubernetes.io/tls, data: {}}\n",
            "metadata.mesh",
            "not allowed",
        ),
        (
            "type: Mesh\nname: m\nmtls:\n  enabledBackend: ca\n  backends:\n  - name: ca\n    type: provided\n    conf:\n      cert: {secret: ca-cert, inline: aGk=}\n      key: {secret: ''}\n",
            "mtls.backends[0].conf.cert",
            "exactly one of file, inlineString, inline or secret",
        ),
        (
            "type: Mesh\nname: m\nmtls:\n  enabledBackend: ca\n  backends:\n  - name: ca\n    type: provided\n    conf:\n      cert: {secret: ca-cert}\n      key: {secret: ''}\n",
            "mtls.backends[0].conf.key.secret",
            "required",
        ),
        (
            "type: Mesh\nname: m\nmtls:\n  enabledBackend: ca\n  backends:\n  - name: ca\n    type: provided\n    conf:\n      cert: {secret: Bad_Name}\n      key: {secret: k}\n",
            "mtls.backends[0].conf.cert.secret",
            "invalid name",
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
