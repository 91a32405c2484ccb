//! Canonical output is stable: every kind survives to_json/to_yaml and back.

use meshlink_api::{Kind, ParsedDocument, Resource, SourceFormat, parse_documents};

fn resources(text: &str) -> Vec<Resource> {
    parse_documents(text)
        .into_iter()
        .map(|d: ParsedDocument| {
            let idx = d.index;
            d.outcome
                .unwrap_or_else(|e| panic!("document {idx} failed: {e:?}"))
        })
        .collect()
}

#[test]
fn canonical_fixture_has_every_kind_and_no_warnings() {
    let docs = parse_documents(include_str!("fixtures/canonical-all.yaml"));
    assert!(docs.iter().all(|d| d.warnings.is_empty()));
    assert!(
        docs.iter()
            .all(|d| d.format == Some(SourceFormat::Canonical))
    );
    let kinds: Vec<Kind> = docs
        .iter()
        .map(|d| d.outcome.as_ref().expect("valid").kind())
        .collect();
    assert_eq!(kinds, Kind::ALL);
}

#[test]
fn every_kind_round_trips_through_yaml_and_json() {
    for r in resources(include_str!("fixtures/canonical-all.yaml")) {
        let yaml = r.to_yaml();
        let back = resources(&yaml);
        assert_eq!(back.len(), 1, "{yaml}");
        assert_eq!(
            back[0],
            r,
            "YAML round trip of {} changed it:\n{yaml}",
            r.kind()
        );
        assert!(back[0].same_desired_state(&r));
        // Printing again gives the same text: canonical output is a fixed point.
        assert_eq!(back[0].to_yaml(), yaml);

        let json = r.to_json();
        let from_json = Resource::from_json(json.clone()).expect("canonical JSON parses");
        assert_eq!(from_json, r);
        assert_eq!(from_json.to_json(), json);
    }
}

#[test]
fn canonical_output_is_minimal() {
    // Nothing the user did not write appears in the output: no defaults.
    let text = "apiVersion: meshlink.dev/v1alpha1\nkind: AccessGrant\nmetadata:\n  name: g\n";
    let r = &resources(text)[0];
    assert_eq!(
        r.to_json(),
        serde_json::json!({
            "apiVersion": "meshlink.dev/v1alpha1",
            "kind": "AccessGrant",
            "metadata": {"name": "g"},
            "spec": {},
        })
    );
    assert_eq!(r.to_yaml(), format!("{text}spec: {{}}\n"));
}

#[test]
fn imported_documents_round_trip_as_canonical() {
    for fixture in [
        include_str!("fixtures/kuma-universal.yaml"),
        include_str!("fixtures/kuma-kubernetes.yaml"),
        include_str!("fixtures/skupper-two-site.yaml"),
        include_str!("fixtures/skupper-v2.yaml"),
    ] {
        for r in resources(fixture) {
            let back = resources(&r.to_yaml());
            assert_eq!(back, std::slice::from_ref(&r));
            assert!(back[0].same_desired_state(&r));
        }
    }
}

#[test]
fn desired_state_ignores_status_and_version_only() {
    let all = resources(include_str!("fixtures/canonical-all.yaml"));
    let grant = all.iter().find(|r| r.kind() == Kind::AccessGrant).unwrap();
    let mut other = grant.clone();
    other.clear_status();
    other.set_resource_version(Some("99".into()));
    assert!(other.same_desired_state(grant));
    assert_ne!(&other, grant);
    other.metadata.labels.insert("x".into(), "y".into());
    assert!(!other.same_desired_state(grant));
}

#[test]
fn json_input_is_accepted() {
    let all = resources(include_str!("fixtures/canonical-all.yaml"));
    let text = serde_json::to_string_pretty(&all[1].to_json()).unwrap();
    assert_eq!(resources(&text), std::slice::from_ref(&all[1]));
}

#[test]
fn empty_documents_are_skipped_but_counted() {
    let text = "---\n---\n# only a comment\n---\napiVersion: meshlink.dev/v1alpha1\nkind: Site\nmetadata:\n  name: s\n---\n";
    let docs = parse_documents(text);
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].index, 2);
    assert!(docs[0].outcome.is_ok());
}
