//! Every accepted-but-ignored field is dropped with a warning naming it, in
//! every format it applies to, and docs/resources.md lists it.

use meshlink_api::parse::{Family, IGNORED_FIELDS, Scope};
use meshlink_api::{Kind, parse_documents};
use serde_json::{Map, Value, json};

#[derive(Clone, Copy, Debug)]
enum Format {
    KumaUniversal,
    KumaKubernetes,
    SkupperV2,
    SkupperV1,
}

fn formats(family: Family) -> &'static [Format] {
    match family {
        Family::Kuma => &[Format::KumaUniversal, Format::KumaKubernetes],
        Family::KumaUniversal => &[Format::KumaUniversal],
        Family::Kubernetes => &[Format::KumaKubernetes, Format::SkupperV2],
        Family::Skupper => &[Format::SkupperV2, Format::SkupperV1],
    }
}

/// A valid spec body of `kind`, with a list element wherever ignored paths use `[]`.
fn spec(kind: Kind) -> Value {
    match kind {
        Kind::Mesh => json!({"mtls": {"backends": [{"name": "ca", "type": "builtin"}]}}),
        Kind::Dataplane => json!({"networking": {"address": "1.2.3.4",
            "inbound": [{"port": 1, "tags": {"kuma.io/service": "s"}}]}}),
        Kind::MeshTrafficPermission => {
            json!({"from": [{"targetRef": {"kind": "Mesh"}, "default": {"action": "Allow"}}]})
        }
        Kind::MeshService => json!({"ports": [{"port": 80}]}),
        Kind::Site => json!({}),
        Kind::Link => {
            json!({"endpoints": [{"name": "inter-router", "host": "h", "port": "55671"}]})
        }
        Kind::Listener | Kind::Connector => json!({"routingKey": "k", "host": "h", "port": 1}),
        Kind::MultiKeyListener => {
            json!({"host": "h", "port": 1, "strategy": {"priority": {"routingKeys": ["k"]}}})
        }
        other => panic!("no base spec for {other}"),
    }
}

/// Builds a valid document; returns it with the object the spec lives in
/// addressed by `spec_prefix` ("" = document root).
fn document(format: Format, kind: Kind) -> (Value, &'static str) {
    let mesh_scoped = kind.is_mesh_scoped();
    match format {
        Format::KumaUniversal => {
            let mut doc = json!({"type": kind.as_str(), "name": "n"});
            if mesh_scoped {
                doc["mesh"] = json!("m");
            }
            if matches!(kind, Kind::MeshTrafficPermission | Kind::MeshService) {
                doc["spec"] = spec(kind);
                (doc, "spec")
            } else {
                doc.as_object_mut()
                    .unwrap()
                    .extend(spec(kind).as_object().unwrap().clone());
                (doc, "")
            }
        }
        Format::KumaKubernetes => {
            let mut doc = json!({"apiVersion": "kuma.io/v1alpha1", "kind": kind.as_str(),
                                 "metadata": {"name": "n"}, "spec": spec(kind)});
            if mesh_scoped {
                doc["mesh"] = json!("m");
            }
            (doc, "spec")
        }
        Format::SkupperV2 | Format::SkupperV1 => {
            let version = if matches!(format, Format::SkupperV1) {
                "v1alpha1"
            } else {
                "v2alpha1"
            };
            let doc = json!({"apiVersion": format!("skupper.io/{version}"), "kind": kind.as_str(),
                             "metadata": {"name": "n"}, "spec": spec(kind)});
            (doc, "spec")
        }
    }
}

/// Sets `path` (with `[]` meaning element 0) to a value; returns the concrete path.
fn insert(root: &mut Value, path: &str) -> String {
    let mut cur = root;
    let mut concrete = Vec::new();
    let segs: Vec<&str> = path.split('.').collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let (key, each) = match seg.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (*seg, false),
        };
        concrete.push(if each {
            format!("{key}[0]")
        } else {
            key.to_string()
        });
        let obj = cur.as_object_mut().expect("path runs through mappings");
        if last {
            obj.insert(key.to_string(), json!("x"));
            break;
        }
        let next = obj.entry(key).or_insert_with(|| Value::Object(Map::new()));
        cur = if each { &mut next[0] } else { next };
    }
    concrete.join(".")
}

#[test]
fn every_ignored_field_warns_and_is_dropped() {
    let mut checked = 0;
    for rule in IGNORED_FIELDS {
        let kinds: Vec<Kind> = if rule.kinds.is_empty() {
            match rule.family {
                Family::Skupper => vec![Kind::Site, Kind::Connector],
                _ => vec![Kind::Mesh, Kind::MeshTrafficPermission],
            }
        } else {
            rule.kinds.to_vec()
        };
        for &format in formats(rule.family) {
            for &kind in &kinds {
                let skupper_kind = matches!(
                    kind,
                    Kind::Site
                        | Kind::Link
                        | Kind::Listener
                        | Kind::MultiKeyListener
                        | Kind::Connector
                );
                if skupper_kind != matches!(format, Format::SkupperV2 | Format::SkupperV1) {
                    continue;
                }
                let (mut doc, spec_prefix) = document(format, kind);
                let path = match (rule.scope, spec_prefix) {
                    (Scope::Document, _) | (Scope::Spec, "") => insert(&mut doc, rule.path),
                    (Scope::Spec, prefix) => {
                        format!("{prefix}.{}", insert(&mut doc[prefix], rule.path))
                    }
                };
                let text = serde_json::to_string(&doc).unwrap();
                let docs = parse_documents(&text);
                let ctx = format!("{format:?} {kind} {}", rule.path);
                let resource = docs[0]
                    .outcome
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{ctx}: {e:?}"));
                assert_eq!(
                    docs[0].warnings,
                    [format!(
                        "{path}: not implemented yet and ignored (meshlink accepts it for compatibility)"
                    )],
                    "{ctx}"
                );
                assert!(
                    !resource.to_yaml().contains(": x\n"),
                    "{ctx}: value kept:\n{}",
                    resource.to_yaml()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= IGNORED_FIELDS.len(), "only {checked} cases ran");
}

#[test]
fn docs_list_every_ignored_field() {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let docs = std::fs::read_to_string(dir.join("../../docs/resources.md"))
        .expect("docs/resources.md exists");
    for rule in IGNORED_FIELDS {
        assert!(
            docs.contains(&format!("`{}`", rule.path)),
            "docs/resources.md does not list `{}`",
            rule.path
        );
    }
}
