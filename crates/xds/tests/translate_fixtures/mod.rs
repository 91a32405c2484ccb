//! Shared inputs and a readable rendering for the translator tests.

#![allow(dead_code, unreachable_pub)]

use std::fmt::Debug;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::rbac::v3::{principal::Identifier, rbac::Action as RbacAction};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, Secret, UpstreamTlsContext,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use meshlink_api::Resource;
use meshlink_xds::translate::{
    ClientKind, LISTENER_TYPE, MeshView, ProxyContext, SecretsInput, Snapshot, TYPE_ORDER,
};
use prost::{Message, Name};
use serde_json::{Value, json};

pub const MESH: &str = "default";

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("fixture {v} is invalid: {e:?}"))
}

/// A Mesh with mTLS on (builtin CA) or off, trust domain `example.org`.
pub fn mesh(mtls: bool) -> Resource {
    let mut spec = json!({"trustDomain": "example.org"});
    if mtls {
        spec["mtls"] = json!({
            "enabledBackend": "ca-1",
            "backends": [{"name": "ca-1", "type": "builtin"}],
        });
    }
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Mesh",
        "metadata": {"name": MESH},
        "spec": spec,
    }))
}

/// A Dataplane serving `service` on `address:port` (app on `port + 1000`)
/// with outbounds `(local port, service)`.
pub fn dataplane(
    name: &str,
    address: &str,
    service: &str,
    port: u16,
    outbounds: &[(u16, &str)],
) -> Resource {
    let outbound: Vec<Value> = outbounds
        .iter()
        .map(|(p, s)| json!({"port": p, "tags": {"kuma.io/service": s}}))
        .collect();
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "Dataplane",
        "metadata": {"name": name, "mesh": MESH},
        "spec": {"networking": {
            "address": address,
            "inbound": [{
                "port": port,
                "servicePort": port + 1000,
                "tags": {"kuma.io/service": service, "version": "v1"},
            }],
            "outbound": outbound,
        }},
    }))
}

/// A MeshTrafficPermission letting `from` reach `to` with `action`.
pub fn permission(name: &str, to: &str, from: &str, action: &str) -> Resource {
    resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1",
        "kind": "MeshTrafficPermission",
        "metadata": {"name": name, "mesh": MESH},
        "spec": {
            "targetRef": {"kind": "MeshService", "name": to},
            "from": [{"targetRef": {"kind": "MeshService", "name": from}, "default": {"action": action}}],
        },
    }))
}

/// The standard mesh: `web` (the proxy under test) calls `backend`,
/// served by two dataplanes. When `allow`, `web` and `backend` allow
/// each other (two MeshTrafficPermissions).
pub fn standard_view(mtls: bool, allow: bool) -> MeshView {
    MeshView::new(
        mesh(mtls),
        vec![
            dataplane("backend-2", "10.0.0.3", "backend", 8080, &[]),
            dataplane("web-1", "10.0.0.1", "web", 8080, &[(9001, "backend")]),
            dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        if allow {
            vec![
                permission("web-to-backend", "backend", "web", "Allow"),
                permission("backend-to-web", "web", "backend", "Allow"),
            ]
        } else {
            Vec::new()
        },
    )
}

/// A proxy context for `name` with `client`, and fake secret contents.
pub fn proxy(name: &str, client: ClientKind) -> ProxyContext {
    ProxyContext {
        mesh: MESH.to_owned(),
        name: name.to_owned(),
        client,
        secrets: SecretsInput {
            identity: Some(("<web cert chain PEM>".into(), "<web key PEM>".into())),
            trust_bundle_pem: Some("<mesh CA PEM>".into()),
            identity_policy: false,
        },
    }
}

/// The RBAC filters of the inbound listener `name` of `snap`: (action,
/// principal patterns).
pub fn rbac_of_listener(snap: &Snapshot, name: &str) -> Vec<(RbacAction, Vec<MatchPattern>)> {
    let any = &snap
        .get(LISTENER_TYPE, name)
        .unwrap_or_else(|| panic!("no listener {name}"))
        .resource;
    let listener = Listener::decode(any.value.as_slice()).unwrap();
    listener.filter_chains[0]
        .filters
        .iter()
        .filter(|f| f.name == "envoy.filters.network.rbac")
        .map(|f| {
            let Some(filter::ConfigType::TypedConfig(cfg)) = &f.config_type else {
                panic!("RBAC filter without typed config")
            };
            let rules = Rbac::decode(cfg.value.as_slice()).unwrap().rules.unwrap();
            let principals = rules
                .policies
                .values()
                .flat_map(|p| &p.principals)
                .map(|p| match &p.identifier {
                    Some(Identifier::Authenticated(a)) => a
                        .principal_name
                        .as_ref()
                        .and_then(|m| m.match_pattern.clone())
                        .unwrap(),
                    other => panic!("unexpected principal {other:?}"),
                })
                .collect();
            (rules.action(), principals)
        })
        .collect()
}

// === golden rendering ===

fn debug_of<M: Message + Name + Default + Debug>(type_url: &str, bytes: &[u8]) -> Option<String> {
    if type_url != M::type_url() {
        return None;
    }
    let msg = M::decode(bytes).unwrap_or_else(|e| panic!("{type_url} does not decode: {e}"));
    Some(format!("{msg:#?}"))
}

/// Pretty `Debug` of an encoded message whose type is known to the tests.
fn decode(type_url: &str, bytes: &[u8]) -> String {
    debug_of::<Listener>(type_url, bytes)
        .or_else(|| debug_of::<RouteConfiguration>(type_url, bytes))
        .or_else(|| debug_of::<Cluster>(type_url, bytes))
        .or_else(|| debug_of::<ClusterLoadAssignment>(type_url, bytes))
        .or_else(|| debug_of::<Secret>(type_url, bytes))
        .or_else(|| debug_of::<DownstreamTlsContext>(type_url, bytes))
        .or_else(|| debug_of::<UpstreamTlsContext>(type_url, bytes))
        .or_else(|| debug_of::<Rbac>(type_url, bytes))
        .or_else(|| debug_of::<TcpProxy>(type_url, bytes))
        .or_else(|| debug_of::<HttpConnectionManager>(type_url, bytes))
        .or_else(|| debug_of::<Router>(type_url, bytes))
        .or_else(|| debug_of::<meshlink_xds::certify::Site>(type_url, bytes))
        .or_else(|| debug_of::<meshlink_xds::certify::RouterAccess>(type_url, bytes))
        .or_else(|| debug_of::<meshlink_xds::certify::Link>(type_url, bytes))
        .or_else(|| debug_of::<meshlink_xds::certify::Listener>(type_url, bytes))
        .or_else(|| debug_of::<meshlink_xds::certify::Connector>(type_url, bytes))
        .unwrap_or_else(|| panic!("the golden renderer does not know {type_url}; add it"))
}

/// Replaces the byte lists of nested `Any` values by their decoded form.
fn expand_any(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push_str(line);
        out.push('\n');
        let url = line
            .trim()
            .strip_prefix("type_url: \"")
            .and_then(|r| r.strip_suffix("\","));
        let next = lines.get(i + 1).map(|l| l.trim());
        i += 1;
        let (Some(url), Some(next)) = (url, next) else {
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut bytes = Vec::new();
        if next == "value: [" {
            i += 1;
            while lines[i].trim() != "]," {
                let n = lines[i].trim().trim_end_matches(',');
                bytes.push(n.parse::<u8>().expect("a byte"));
                i += 1;
            }
            i += 1;
        } else if next == "value: []," {
            i += 1;
        } else {
            continue;
        }
        let decoded = expand_any(&decode(url, &bytes));
        out.push_str(indent);
        out.push_str("value: ");
        for (n, l) in decoded.lines().enumerate() {
            if n > 0 {
                out.push_str(indent);
            }
            out.push_str(l);
            out.push('\n');
        }
        // `decoded` ends with `}`; keep the field's trailing comma.
        out.pop();
        out.push_str(",\n");
    }
    out
}

/// Whether a `Debug` line only shows a proto3 default (absent) field.
fn is_default_field(line: &str) -> bool {
    let t = line.trim();
    [": None,", ": [],", ": \"\",", ": false,", ": {},", ": 0,"]
        .iter()
        .any(|suffix| t.ends_with(suffix) && !t.starts_with('"'))
}

/// Every resource of the snapshot, decoded, in push order. Fields at
/// their proto3 default are left out.
pub fn render(snap: &Snapshot) -> String {
    render_all(snap)
        .lines()
        .filter(|l| !is_default_field(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn render_all(snap: &Snapshot) -> String {
    let mut out = String::new();
    for type_url in TYPE_ORDER {
        out.push_str(&format!(
            "=== {type_url} (version {}) ===\n",
            snap.version_of(type_url)
        ));
        for (name, r) in snap.resources(type_url) {
            out.push_str(&format!("--- {name} (version {}) ---\n", r.version));
            out.push_str(&expand_any(&decode(
                &r.resource.type_url,
                &r.resource.value,
            )));
        }
    }
    out
}

/// Compares `actual` with `tests/golden/<name>.txt`; `UPDATE_GOLDEN=1`
/// rewrites the file instead.
pub fn assert_golden(name: &str, actual: &str) {
    assert_golden_file(&format!("{name}.txt"), actual);
}

/// Compares `actual` with `tests/golden/<file>`; `UPDATE_GOLDEN=1`
/// rewrites the file instead.
pub fn assert_golden_file(file: &str, actual: &str) {
    let path = manifest_dir().join(format!("tests/golden/{file}"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the translator's output, first at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             Review the change, then rerun with UPDATE_GOLDEN=1 to accept it.",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first),
        );
    }
}

/// This crate's directory, as the test runner gives it (cargo and nextest
/// set `CARGO_MANIFEST_DIR` when they run a test), else as it was at
/// build time (a target dir shared between checkouts may hold a binary
/// built in another one).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
