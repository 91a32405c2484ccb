//! Every validation rule reports its error at the exact path, and a
//! document with several problems reports all of them.

use meshlink_api::{FieldError, Resource, parse_documents};
use serde_json::{Value, json};

/// Validates a canonical resource of `kind` with `spec`; returns the errors
/// as the CLI prints them (without the file prefix).
fn errors(kind: &str, spec: Value) -> Vec<String> {
    let mesh_scoped = matches!(kind, "Dataplane" | "MeshTrafficPermission");
    let mut metadata = json!({"name": "x"});
    if mesh_scoped {
        metadata["mesh"] = json!("default");
    }
    let doc = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec});
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

fn one(kind: &str, spec: Value) -> String {
    let errs = errors(kind, spec);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:?}");
    errs.into_iter().next().unwrap()
}

fn backend(extra: Value) -> Value {
    let mut b = json!({"name": "ca-1", "type": "builtin"});
    b.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"mtls": {"backends": [b]}})
}

#[test]
fn mesh_rules() {
    assert_eq!(
        one(
            "Mesh",
            json!({"mtls": {"backends": [{"name": "v", "type": "vault"}]}})
        ),
        r#"spec.mtls.backends[0].type: unknown CA type "vault"; expected builtin or provided"#
    );
    assert_eq!(
        one(
            "Mesh",
            json!({"mtls": {"backends": [{"name": "a", "type": "builtin"}, {"name": "a", "type": "builtin"}]}})
        ),
        r#"spec.mtls.backends[1].name: duplicate backend name "a" (also backends[0])"#
    );
    assert_eq!(
        one(
            "Mesh",
            json!({"mtls": {"enabledBackend": "b", "backends": [{"name": "a", "type": "builtin"}]}})
        ),
        r#"spec.mtls.enabledBackend: "b" names no backend in spec.mtls.backends; defined backends: a"#
    );
    assert_eq!(
        one("Mesh", json!({"mtls": {"enabledBackend": "b"}})),
        r#"spec.mtls.enabledBackend: "b" names no backend in spec.mtls.backends; no backends are defined"#
    );
    assert_eq!(
        one(
            "Mesh",
            backend(json!({"dpCert": {"rotation": {"expiration": "abc"}}}))
        ),
        r#"spec.mtls.backends[0].dpCert.rotation.expiration: unparsable duration "abc" (e.g. 24h, 30m, 10s)"#
    );
    assert_eq!(
        one(
            "Mesh",
            backend(json!({"dpCert": {"rotation": {"expiration": "9s"}}}))
        ),
        r#"spec.mtls.backends[0].dpCert.rotation.expiration: "9s" is too short; the minimum is 10s"#
    );
    assert!(
        errors(
            "Mesh",
            backend(json!({"dpCert": {"rotation": {"expiration": "10s"}}}))
        )
        .is_empty()
    );
    assert_eq!(
        one(
            "Mesh",
            backend(json!({"conf": {"caCert": {"expiration": "ten years"}}}))
        ),
        r#"spec.mtls.backends[0].conf.caCert.expiration: unparsable duration "ten years" (e.g. 24h, 30m, 10s)"#
    );
    assert!(
        one("Mesh", json!({"trustDomain": "Example.org"}))
            .starts_with(r#"spec.trustDomain: invalid trust domain "Example.org": use lowercase letters, digits, '.', '-' and '_'"#)
    );
    assert!(errors("Mesh", json!({"trustDomain": "prod_1.example-org"})).is_empty());
}

#[test]
fn mesh_ca_conf_rules() {
    let provided = |conf: Value| json!({"mtls": {"backends": [{"name": "p", "type": "provided", "conf": conf}]}});
    assert_eq!(
        errors(
            "Mesh",
            json!({"mtls": {"backends": [{"name": "p", "type": "provided"}]}})
        ),
        [
            "spec.mtls.backends[0].conf.cert: required for a provided CA: give file, inlineString, inline or secret",
            "spec.mtls.backends[0].conf.key: required for a provided CA: give file, inlineString, inline or secret",
        ]
    );
    assert_eq!(
        one(
            "Mesh",
            provided(json!({"cert": {"file": "a", "inlineString": "b"}, "key": {"file": "k"}}))
        ),
        "spec.mtls.backends[0].conf.cert: exactly one of file, inlineString, inline or secret is required (2 given)"
    );
    assert_eq!(
        one(
            "Mesh",
            provided(json!({"cert": {"inline": "***"}, "key": {"file": "k"}}))
        ),
        "spec.mtls.backends[0].conf.cert.inline: not valid base64; use inlineString for plain PEM text"
    );
    assert!(
        one("Mesh", backend(json!({"conf": {"cert": {"file": "c"}}})))
            .starts_with("spec.mtls.backends[0].conf.cert: not allowed for a builtin CA")
    );
    // `secret:` names a Secret in the mesh (checked when the Mesh is applied).
    assert!(
        errors(
            "Mesh",
            provided(json!({"cert": {"secret": "s"}, "key": {"file": "k"}}))
        )
        .is_empty()
    );
}

fn dp(inbound: Value, outbound: Value) -> Value {
    json!({"networking": {"address": "10.0.0.1", "inbound": inbound, "outbound": outbound}})
}

#[test]
fn dataplane_rules() {
    let svc = json!({"kuma.io/service": "web"});
    assert_eq!(
        one(
            "Dataplane",
            dp(json!([{"port": 80, "tags": {"version": "v1"}}]), json!([]))
        ),
        "spec.networking.inbound[0].tags: missing the service tag: add kuma.io/service: <service name>"
    );
    // The alias counts as the service tag and is kept as written.
    assert!(
        errors(
            "Dataplane",
            dp(
                json!([{"port": 80, "tags": {"meshlink.dev/service": "web"}}]),
                json!([])
            )
        )
        .is_empty()
    );
    assert!(
        one("Dataplane", dp(json!([{"port": 80, "tags": {"kuma.io/service": "a", "meshlink.dev/service": "b"}}]), json!([])))
            .starts_with(r#"spec.networking.inbound[0].tags["meshlink.dev/service"]: "b" differs from kuma.io/service "a""#)
    );
    for port in [0, 65536, -1] {
        assert_eq!(
            one(
                "Dataplane",
                dp(json!([{"port": port, "tags": svc}]), json!([]))
            ),
            format!("spec.networking.inbound[0].port: {port} is out of range 1-65535")
        );
    }
    assert_eq!(
        one(
            "Dataplane",
            dp(
                json!([{"port": 80, "servicePort": 0, "tags": svc}]),
                json!([])
            )
        ),
        "spec.networking.inbound[0].servicePort: 0 is out of range 1-65535"
    );
    let null_port = dp(
        json!([{"port": 80, "servicePort": null, "tags": svc}]),
        json!([]),
    );
    assert!(errors("Dataplane", null_port).is_empty());
    assert_eq!(
        one(
            "Dataplane",
            dp(
                json!([{"port": 80, "tags": svc}, {"port": 80, "tags": svc}]),
                json!([])
            )
        ),
        "spec.networking.inbound[1].port: duplicate inbound port 80 (also inbound[0])"
    );
    let out = json!({"port": 9000, "tags": {"kuma.io/service": "db"}});
    assert_eq!(
        one(
            "Dataplane",
            dp(json!([{"port": 80, "tags": svc}]), json!([out, out]))
        ),
        "spec.networking.outbound[1].port: duplicate outbound 127.0.0.1:9000 (also outbound[0])"
    );
    assert_eq!(
        one(
            "Dataplane",
            dp(json!([{"port": 80, "tags": svc}]), json!([{"port": 9000}]))
        ),
        "spec.networking.outbound[0].tags: missing the service tag: add kuma.io/service: <service name>"
    );
    assert_eq!(
        one(
            "Dataplane",
            json!({"networking": {"address": "bad host!", "inbound": [{"port": 80, "tags": svc}]}})
        ),
        r#"spec.networking.address: "bad host!" is neither an IP address nor a valid hostname"#
    );
    assert!(
        one("Dataplane", json!({"networking": {"address": "web.local"}}))
            .starts_with("spec.networking.inbound: at least one inbound is required")
    );
    assert_eq!(
        one(
            "Dataplane",
            dp(json!([{"port": "80", "tags": svc}]), json!([]))
        ),
        r#"spec.networking.inbound[0].port: invalid type: string "80", expected i64"#
    );
}

#[test]
fn traffic_permission_rules() {
    let rule =
        |target: Value| json!({"from": [{"targetRef": target, "default": {"action": "Allow"}}]});
    assert_eq!(
        one(
            "MeshTrafficPermission",
            rule(json!({"kind": "MeshService"}))
        ),
        "spec.from[0].targetRef.name: required when kind is MeshService: the service name"
    );
    assert_eq!(
        one("MeshTrafficPermission", rule(json!({"kind": "MeshSubset"}))),
        "spec.from[0].targetRef.tags: required when kind is MeshSubset: the tags to match"
    );
    assert_eq!(
        one(
            "MeshTrafficPermission",
            rule(json!({"kind": "Mesh", "name": "x"}))
        ),
        "spec.from[0].targetRef.name: not allowed when kind is Mesh"
    );
    assert_eq!(
        one("MeshTrafficPermission", rule(json!({"kind": "Dataplane"}))),
        "spec.from[0].targetRef.kind: Dataplane is not allowed in from[]: select clients with kind Mesh, MeshSubset (tags) or MeshService (name)"
    );
    assert_eq!(
        one(
            "MeshTrafficPermission",
            rule(json!({"kind": "MeshGateway"}))
        ),
        r#"spec.from[0].targetRef.kind: unknown targetRef kind "MeshGateway"; expected Mesh, Dataplane, MeshSubset or MeshService"#
    );
    assert_eq!(
        one(
            "MeshTrafficPermission",
            json!({"targetRef": {"kind": "MeshService"}, "from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "Deny"}}]})
        ),
        "spec.targetRef.name: required when kind is MeshService: the service name"
    );
    assert_eq!(
        one(
            "MeshTrafficPermission",
            json!({"from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "allow"}}]})
        ),
        r#"spec.from[0].default.action: unknown action "allow"; expected Allow, Deny or AllowWithShadowDeny"#
    );
    assert!(
        one("MeshTrafficPermission", json!({}))
            .starts_with("spec.from: at least one rule is required")
    );
}

#[test]
fn multi_site_rules() {
    assert!(
        one("Site", json!({"edge": true, "linkAccess": "default"}))
            .starts_with("spec.linkAccess: an edge site accepts no links")
    );
    assert!(
        one("RouterAccess", json!({})).starts_with("spec.roles: at least one role is required")
    );
    assert_eq!(
        errors(
            "RouterAccess",
            json!({"roles": [{"name": "edge", "port": 45671}, {"name": "edge", "port": 45671}]})
        ),
        [
            "spec.roles[1].name: duplicate role edge (also roles[0])",
            "spec.roles[1].port: port 45671 is already used by roles[0]"
        ]
    );
    assert_eq!(
        one(
            "RouterAccess",
            json!({"roles": [{"name": "interior", "port": 1}]})
        ),
        r#"spec.roles[0].name: unknown router role "interior"; expected inter-router or edge"#
    );
    assert_eq!(
        one("AccessGrant", json!({"redemptionsAllowed": -1})),
        "spec.redemptionsAllowed: must not be negative (got -1); the default is 1"
    );
    assert_eq!(
        one("AccessGrant", json!({"expirationWindow": "soon"})),
        r#"spec.expirationWindow: unparsable duration "soon" (e.g. 24h, 30m, 10s)"#
    );
    let pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    assert_eq!(
        errors(
            "AccessToken",
            json!({"url": "http://h/x", "code": "", "ca": "nope", "linkCost": 0})
        ),
        [
            r#"spec.url: "http://h/x" is not an https:// URL; copy url from the AccessGrant's status"#,
            "spec.code: required: must not be empty",
            "spec.ca: must be a PEM certificate (-----BEGIN CERTIFICATE-----); copy ca from the AccessGrant's status",
            "spec.linkCost: must be at least 1 (got 0)",
        ]
    );
    assert!(
        errors(
            "AccessToken",
            json!({"url": "https://h:9090/x", "code": "c", "ca": pem})
        )
        .is_empty()
    );
    assert!(
        one("Link", json!({})).starts_with("spec.endpoints: at least one endpoint is required")
    );
    assert_eq!(
        one(
            "Link",
            json!({"endpoints": [{"name": "inter-router", "host": "h", "port": 55671}], "cost": 0})
        ),
        "spec.cost: must be at least 1 (got 0)"
    );
    assert_eq!(
        one(
            "Listener",
            json!({"routingKey": "a b", "host": "0.0.0.0", "port": 1})
        ),
        r#"spec.routingKey: invalid routing key "a b": use up to 253 letters, digits, '-', '_', '.', ':' or '/'"#
    );
    assert_eq!(
        one(
            "Connector",
            json!({"routingKey": "k", "host": "h", "port": 1, "type": "udp"})
        ),
        r#"spec.type: unknown type "udp"; expected tcp"#
    );
    assert_eq!(
        one("Connector", json!({"routingKey": "k", "port": 1})),
        "spec.host: required unless spec.selector selects mesh Dataplanes (e.g. selector: app=backend)"
    );
}

/// The errors of an AccessGrant whose `meshlink.dev/link-cert-lifetime`
/// label is `lifetime`.
fn grant_lifetime_errors(lifetime: &str) -> Vec<String> {
    let doc = json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "AccessGrant",
        "metadata": {"name": "g", "labels": {"meshlink.dev/link-cert-lifetime": lifetime}},
        "spec": {},
    });
    match Resource::from_json(doc) {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::to_string).collect(),
    }
}

#[test]
fn grant_link_cert_lifetime_label_is_checked_at_apply() {
    assert_eq!(grant_lifetime_errors("20s"), Vec::<String>::new());
    assert_eq!(grant_lifetime_errors("8760h"), Vec::<String>::new());
    assert_eq!(
        grant_lifetime_errors("forever"),
        [
            r#"metadata.labels["meshlink.dev/link-cert-lifetime"]: unparsable duration "forever" (e.g. 24h, 30m, 10s)"#
        ]
    );
    let short = grant_lifetime_errors("5s");
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(
        short[0].starts_with(r#"metadata.labels["meshlink.dev/link-cert-lifetime"]: "#)
            && short[0].contains("10s"),
        "{short:?}"
    );
    assert_eq!(
        grant_lifetime_errors("2y"),
        [
            r#"metadata.labels["meshlink.dev/link-cert-lifetime"]: "2y" is longer than the longest link certificate lifetime, 8760h (one year)"#
        ]
    );
}

#[test]
fn metadata_and_status_rules() {
    let doc = |kind: &str, metadata: Value, status: Value| {
        let mut d = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": kind, "metadata": metadata, "spec": {}});
        if !status.is_null() {
            d["status"] = status;
        }
        Resource::from_json(d)
            .err()
            .unwrap_or_default()
            .iter()
            .map(FieldError::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        doc("Site", json!({"name": "s", "mesh": "default"}), Value::Null),
        ["metadata.mesh: not allowed: a Site does not belong to a mesh; remove metadata.mesh"]
    );
    let errs = doc("MeshTrafficPermission", json!({"name": "p"}), Value::Null);
    assert_eq!(
        errs[0],
        "metadata.mesh: required: a MeshTrafficPermission belongs to a mesh; set metadata.mesh to the Mesh's name"
    );
    let errs = doc(
        "MeshTrafficPermission",
        json!({"name": "p", "mesh": "a.b"}),
        Value::Null,
    );
    assert_eq!(
        errs[0],
        r#"metadata.mesh: mesh names may not contain '.' (got "a.b")"#
    );
    assert_eq!(
        doc("Site", json!({"name": "s", "namespace": "x"}), Value::Null),
        [
            "metadata.namespace: unknown field `namespace`, expected one of `name`, `mesh`, `labels`, `resourceVersion`"
        ]
    );
    assert_eq!(
        doc("Site", json!({"name": "s"}), json!({"phase": "Ready"})),
        [
            "status.phase: unknown field `phase`, expected one of `status`, `message`, `siteId`, `endpoints`, `sitesInNetwork`, `network`, `meshIngress`, `incomingLinks`"
        ]
    );
    assert_eq!(
        doc("Mesh", json!({"name": "m"}), json!({"phase": "Ready"})),
        ["status.phase: unknown field `phase`, expected `vips` or `meshServiceVips`"]
    );
    assert_eq!(
        doc(
            "MeshTrafficPermission",
            json!({"name": "p", "mesh": "default"}),
            json!({"phase": "Ready"})
        ),
        ["status.phase: unknown field; a MeshTrafficPermission status has only conditions"]
    );
    assert_eq!(
        doc(
            "AccessGrant",
            json!({"name": "g"}),
            json!({"redemptions": -1})
        ),
        ["status.redemptions: invalid value: integer `-1`, expected u64"]
    );
}

#[test]
fn invalid_fixture_reports_every_error_in_every_document() {
    let docs = parse_documents(include_str!("fixtures/invalid.yaml"));
    let located: Vec<String> = docs
        .iter()
        .flat_map(|d| {
            let errs = d.outcome.as_ref().err().cloned().unwrap_or_default();
            errs.into_iter()
                .map(move |e| e.located("invalid.yaml", d.index))
        })
        .collect();
    let expected = [
        r#"invalid.yaml[0] spec.trustDomain: invalid trust domain "Example.COM": use lowercase letters, digits, '.', '-' and '_' (at most 255 characters)"#,
        r#"invalid.yaml[0] spec.mtls.backends[0].dpCert.rotation.expiration: "5s" is too short; the minimum is 10s"#,
        r#"invalid.yaml[0] spec.mtls.backends[1].name: duplicate backend name "ca-1" (also backends[0])"#,
        "invalid.yaml[0] spec.mtls.backends[1].conf.cert: required for a provided CA: give file, inlineString, inline or secret",
        "invalid.yaml[0] spec.mtls.backends[1].conf.key: required for a provided CA: give file, inlineString, inline or secret",
        r#"invalid.yaml[0] spec.mtls.enabledBackend: "ca-2" names no backend in spec.mtls.backends; defined backends: ca-1"#,
        r#"invalid.yaml[1] metadata.name: invalid name "Backend_1": use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"#,
        "invalid.yaml[1] metadata.mesh: required: a Dataplane belongs to a mesh; set metadata.mesh to the Mesh's name",
        r#"invalid.yaml[1] spec.networking.address: "not an address" is neither an IP address nor a valid hostname"#,
        "invalid.yaml[1] spec.networking.inbound[0].tags: missing the service tag: add kuma.io/service: <service name>",
        "invalid.yaml[1] spec.networking.inbound[1].port: duplicate inbound port 8080 (also inbound[0])",
        "invalid.yaml[3] spec.redemptionsAllowed: must not be negative (got -1); the default is 1",
        r#"invalid.yaml[3] spec.expirationWindow: unparsable duration "abc" (e.g. 24h, 30m, 10s)"#,
    ];
    assert_eq!(located, expected);
}

#[test]
fn yaml_syntax_and_duplicate_keys_are_reported() {
    let docs = parse_documents(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Site\nmetadata: {name: a}\n---\nkind: [\n---\nkind: Site\n",
    );
    assert_eq!(docs.len(), 2, "parsing stops at the syntax error");
    assert!(docs[0].outcome.is_ok());
    let err = &docs[1].outcome.as_ref().unwrap_err()[0];
    assert_eq!(docs[1].index, 1);
    assert!(err.message.starts_with("not valid YAML or JSON: "), "{err}");
    assert!(err.message.contains("line"), "{err}");

    let docs = parse_documents(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Site\nmetadata:\n  name: a\n  name: b\n",
    );
    let err = &docs[0].outcome.as_ref().unwrap_err()[0];
    assert_eq!(err.path, "metadata");
    assert!(err.message.contains(r#"duplicate key "name""#), "{err}");

    let docs = parse_documents("- a\n- b\n");
    assert!(
        docs[0].outcome.as_ref().unwrap_err()[0]
            .message
            .starts_with("a document must be a mapping (got a list)")
    );
}
