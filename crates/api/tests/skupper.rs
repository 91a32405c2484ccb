//! Skupper documents (v1alpha1 and v2alpha1) import to the expected
//! canonical resources.

use std::time::Duration;

use meshlink_api::spec::{RouterRoleName, Spec};
use meshlink_api::{Kind, SourceFormat, parse_documents};
use serde_json::json;

mod support;
use support::{errors, ok};

#[test]
fn two_site_v1alpha1_fixture_imports() {
    let docs = parse_documents(include_str!("fixtures/skupper-two-site.yaml"));
    assert_eq!(docs.len(), 5);
    assert!(
        docs.iter()
            .all(|d| d.format == Some(SourceFormat::SkupperV1))
    );
    assert!(docs.iter().all(|d| d.warnings.is_empty()));
    assert_eq!(
        ok(&docs[0]),
        json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Site",
            "metadata": {"name": "west"},
            "spec": {"edge": false, "linkAccess": "default"},
        })
    );
    assert_eq!(
        ok(&docs[1])["spec"],
        json!({
            "generateTlsCredentials": true,
            "issuer": "skupper-site-ca",
            "roles": [{"name": "inter-router", "port": 55671}],
        })
    );
    let access = docs[1].outcome.as_ref().unwrap();
    let Spec::RouterAccess(ra) = &access.spec else {
        panic!("not a RouterAccess")
    };
    assert_eq!(ra.port(RouterRoleName::InterRouter), Some(55671));
    assert!(ra.generates_tls_credentials());
    assert_eq!(ra.tls_credentials(access.name()), "west-access");

    assert_eq!(
        ok(&docs[2])["spec"],
        json!({"redemptionsAllowed": 10, "expirationWindow": "1h"})
    );
    let Spec::AccessGrant(g) = &docs[2].outcome.as_ref().unwrap().spec else {
        panic!()
    };
    assert_eq!(g.redemptions_allowed(), 10);
    assert_eq!(g.expiration_window(), Duration::from_secs(3600));

    let kinds: Vec<Kind> = docs
        .iter()
        .map(|d| d.outcome.as_ref().unwrap().kind())
        .collect();
    assert_eq!(
        kinds,
        [
            Kind::Site,
            Kind::RouterAccess,
            Kind::AccessGrant,
            Kind::Listener,
            Kind::Connector
        ]
    );
}

#[test]
fn v2alpha1_fixture_imports_and_warns() {
    let docs = parse_documents(include_str!("fixtures/skupper-v2.yaml"));
    assert!(
        docs.iter()
            .all(|d| d.format == Some(SourceFormat::SkupperV2))
    );
    assert_eq!(
        ok(&docs[0]),
        json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "Site",
            "metadata": {"name": "east", "labels": {"app": "hello-world"}},
            "spec": {"edge": false},
        })
    );
    let warned: Vec<&str> = docs[0]
        .warnings
        .iter()
        .map(|w| w.split(':').next().unwrap())
        .collect();
    assert_eq!(
        warned,
        [
            "metadata.namespace",
            "spec.settings",
            "spec.ha",
            "spec.serviceAccount"
        ]
    );
    assert_eq!(ok(&docs[1])["spec"]["linkCost"], 2);
    // String ports become integers; ignored fields are gone.
    assert_eq!(
        ok(&docs[2])["spec"],
        json!({
            "endpoints": [
                {"name": "inter-router", "host": "10.0.0.1", "port": 55671},
                {"name": "edge", "host": "10.0.0.1", "port": 45671},
            ],
            "tlsCredentials": "east-to-west",
            "cost": 1,
        })
    );
    let warned: Vec<&str> = docs[2]
        .warnings
        .iter()
        .map(|w| w.split(':').next().unwrap())
        .collect();
    assert_eq!(
        warned,
        [
            "metadata.namespace",
            "metadata.uid",
            "metadata.creationTimestamp",
            "status",
            "spec.noClientAuth"
        ]
    );
    // v2's includeNotReadyPods is v1's (and canonical) includeNotReady.
    let spec = &ok(&docs[3])["spec"];
    assert_eq!(spec["selector"], "app=backend");
    assert!(spec["includeNotReady"].is_boolean(), "{spec}");
    assert!(spec.get("includeNotReadyPods").is_none(), "{spec}");
    assert!(
        !docs[3]
            .warnings
            .iter()
            .any(|w| w.contains("includeNotReady")),
        "{:?}",
        docs[3].warnings
    );
}

#[test]
fn connector_selector_without_host_is_accepted_and_a_bad_one_is_named() {
    let connector = |spec: &str| {
        format!(
            "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: c}}\nspec:\n{spec}"
        )
    };
    let docs = parse_documents(&connector(
        "  routingKey: redis\n  port: 6379\n  selector: application=redis-server\n",
    ));
    assert_eq!(
        ok(&docs[0])["spec"],
        json!({"routingKey": "redis", "port": 6379, "selector": "application=redis-server"})
    );
    assert_eq!(
        errors(&connector("  routingKey: redis\n  port: 6379\n")),
        [
            "spec.host: required unless spec.selector selects mesh Dataplanes (e.g. selector: app=backend)"
        ]
    );
    let bad = errors(&connector(
        "  routingKey: redis\n  port: 6379\n  selector: app in (a, b)\n",
    ));
    assert!(bad[0].starts_with("spec.selector: cannot parse"), "{bad:?}");
}

#[test]
fn router_mode_maps_to_edge_and_rejects_unknown_values() {
    let site = |mode: &str| {
        format!(
            "apiVersion: skupper.io/v1alpha1\nkind: Site\nmetadata: {{name: s}}\nspec:\n  routerMode: {mode}\n"
        )
    };
    let docs = parse_documents(&site("edge"));
    assert_eq!(ok(&docs[0])["spec"], json!({"edge": true}));
    assert_eq!(
        errors(&site("hub")),
        [r#"spec.routerMode: unknown router mode "hub"; expected interior or edge"#]
    );
    // In v2alpha1 routerMode does not exist.
    let v2 = site("edge").replace("v1alpha1", "v2alpha1");
    assert!(errors(&v2)[0].starts_with("spec.routerMode: unknown field `routerMode`"));
}

#[test]
fn unknown_skupper_kinds_and_api_versions_list_what_is_accepted() {
    assert_eq!(
        errors("apiVersion: skupper.io/v2alpha1\nkind: Certificate\nmetadata: {name: c}\n"),
        [
            r#"kind: unknown Skupper kind "Certificate"; meshlink accepts Site, RouterAccess, AccessGrant, AccessToken, Link, Listener, MultiKeyListener or Connector"#
        ]
    );
    let errs = errors("apiVersion: skupper.io/v3\nkind: Site\n");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with(r#"apiVersion: unknown apiVersion "skupper.io/v3"; accepted formats: meshlink.dev/v1alpha1, Kuma universal"#), "{errs:?}");
    let errs = errors("kind: Site\nmetadata: {name: s}\n");
    assert!(
        errs[0].starts_with("cannot tell the format: set apiVersion"),
        "{errs:?}"
    );
}

#[test]
fn bad_ports_name_the_field() {
    let text = "apiVersion: skupper.io/v2alpha1\nkind: Link\nmetadata: {name: l}\nspec:\n  endpoints:\n    - {name: inter-router, host: h, port: \"70000\"}\n";
    assert_eq!(
        errors(text),
        ["spec.endpoints[0].port: 70000 is out of range 1-65535"]
    );
}

#[test]
fn a_multi_key_listener_is_its_own_kind_with_skuppers_strategies() {
    let docs = parse_documents(
        "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata: {name: db}\nspec:\n  host: db\n  port: \"5432\"\n  strategy:\n    priority:\n      routingKeys: [db-primary, db-secondary]\n",
    );
    let mkl = ok(&docs[0]);
    assert_eq!(mkl["kind"], "MultiKeyListener");
    assert_eq!(
        mkl["spec"],
        json!({"host": "db", "port": 5432,
               "strategy": {"priority": {"routingKeys": ["db-primary", "db-secondary"]}}})
    );
    assert!(docs[0].warnings.is_empty(), "{:?}", docs[0].warnings);
    let weighted = parse_documents(
        "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata: {name: db}\nspec:\n  host: db\n  port: 5432\n  strategy:\n    weighted:\n      routingKeys: {a: 3, b: 1}\n",
    );
    assert_eq!(
        ok(&weighted[0])["spec"]["strategy"],
        json!({"weighted": {"routingKeys": {"a": 3, "b": 1}}})
    );
    // Each wrong shape is refused, naming the field.
    for (strategy, field) in [
        (
            "{priority: {}}",
            "spec.strategy.priority.routingKeys: needs at least one",
        ),
        ("{}", "spec.strategy: set one of priority"),
        (
            "{priority: {routingKeys: [a]}, weighted: {routingKeys: {a: 1}}}",
            "spec.strategy: priority and weighted are both set",
        ),
        (
            "{priority: {routingKeys: [a, a]}}",
            "spec.strategy.priority.routingKeys[1]: routing key \"a\" appears twice",
        ),
        (
            "{weighted: {routingKeys: {a: 0}}}",
            "spec.strategy.weighted.routingKeys.a: weight must be at least 1",
        ),
    ] {
        let e = errors(&format!(
            "apiVersion: skupper.io/v2alpha1\nkind: MultiKeyListener\nmetadata: {{name: db}}\nspec: {{host: db, port: 5432, strategy: {strategy}}}\n"
        ))
        .join("\n");
        assert!(e.contains(field), "{strategy}: {e}");
    }
}
