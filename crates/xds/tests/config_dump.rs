//! The config dump of translated snapshots (the translate golden fixtures)
//! has the shape of Envoy's admin `/config_dump`: the five dump messages in
//! Envoy's order, resources as canonical protobuf JSON with proto field
//! names, private keys redacted, and JSON that parses back, field for
//! field, into `envoy.admin.v3.ConfigDump` and the original resources.
//!
//! `tests/golden/config_dump_sidecar_mtls_allow.json` shows one whole
//! dump; `UPDATE_GOLDEN=1` rewrites it.

mod translate_fixtures;

use envoy_types::pb::envoy::admin::v3::{
    ClustersConfigDump, ConfigDump, EndpointsConfigDump, ListenersConfigDump, RoutesConfigDump,
    SecretsConfigDump,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use envoy_types::pb::google::protobuf::Any;
use meshlink_xds::dump::{DESCRIPTOR_SET, config_dump};
use meshlink_xds::translate::{
    CLUSTER_TYPE, ClientKind, LISTENER_TYPE, SECRET_TYPE, Snapshot, translate,
};
use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, ReflectMessage, Value as ReflectValue,
};
use serde_json::Value;
use translate_fixtures::{assert_golden_file, proxy, standard_view};

const ADMIN: &str = "type.googleapis.com/envoy.admin.v3.";

fn web_snapshot(client: ClientKind, mtls: bool) -> Snapshot {
    translate(&proxy("web-1", client), &standard_view(mtls, true))
}

/// The entry of `list` whose `key` (a path of object keys) is `name`.
fn find<'a>(list: &'a Value, path: &[&str], name: &str) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .find(|e| path.iter().fold(*e, |v, k| &v[*k]) == name)
        .unwrap_or_else(|| panic!("no {path:?} = {name:?} in {list}"))
}

/// Every `"error"` key anywhere in `v`, with the `@type` beside it.
fn errors(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(e) = m.get("error") {
                out.push(format!("{}: {e}", m.get("@type").unwrap_or(&Value::Null)));
            }
            m.values().for_each(|v| errors(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| errors(v, out)),
        _ => {}
    }
}

/// Parses `dump` as canonical JSON of `envoy.admin.v3.ConfigDump`,
/// refusing unknown fields, and decodes it as the generated type.
fn reparse(dump: &Value) -> ConfigDump {
    let pool = DescriptorPool::decode(DESCRIPTOR_SET).expect("descriptor set");
    let desc = pool
        .get_message_by_name("envoy.admin.v3.ConfigDump")
        .expect("ConfigDump descriptor");
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let msg = DynamicMessage::deserialize_with_options(desc, dump.clone(), &options)
        .unwrap_or_else(|e| panic!("the dump is not a ConfigDump: {e}\n{dump:#}"));
    ConfigDump::decode(msg.encode_to_vec().as_slice()).expect("re-encoded dump decodes")
}

#[test]
fn dump_has_envoys_shape_fields_and_redaction() {
    let snap = web_snapshot(ClientKind::Envoy, true);
    let dump = config_dump(&snap);
    assert_golden_file(
        "config_dump_sidecar_mtls_allow.json",
        &format!("{dump:#}\n"),
    );

    let configs = dump["configs"].as_array().expect("configs");
    let types: Vec<&str> = configs.iter().filter_map(|c| c["@type"].as_str()).collect();
    let expected: Vec<String> = [
        "ClustersConfigDump",
        "EndpointsConfigDump",
        "ListenersConfigDump",
        "RoutesConfigDump",
        "SecretsConfigDump",
    ]
    .iter()
    .map(|t| format!("{ADMIN}{t}"))
    .collect();
    assert_eq!(types, expected, "Envoy's order");

    // A cluster, by name, with Envoy's field names and duration format.
    let c = find(
        &configs[0]["dynamic_active_clusters"],
        &["cluster", "name"],
        "backend",
    );
    assert_eq!(
        c["version_info"],
        snap.get(CLUSTER_TYPE, "backend").unwrap().version
    );
    let cluster = &c["cluster"];
    assert_eq!(cluster["@type"], CLUSTER_TYPE);
    assert_eq!(cluster["connect_timeout"], "5s");
    assert_eq!(
        cluster["lb_policy"],
        Value::Null,
        "ROUND_ROBIN is the default"
    );
    assert_eq!(
        cluster["transport_socket"]["typed_config"]["@type"],
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
    );
    assert_eq!(
        configs[0]["version_info"],
        snap.version_of(CLUSTER_TYPE),
        "the version a SotW response carries"
    );

    // A listener, by name, with its filter config expanded from its Any.
    let l = find(
        &configs[2]["dynamic_listeners"],
        &["name"],
        "outbound:127.0.0.1:9001",
    );
    let listener = &l["active_state"]["listener"];
    assert_eq!(listener["@type"], LISTENER_TYPE);
    assert_eq!(listener["address"]["socket_address"]["port_value"], 9001);
    let filter = &listener["filter_chains"][0]["filters"][0];
    assert_eq!(
        filter["typed_config"]["@type"],
        "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"
    );
    assert_eq!(filter["typed_config"]["cluster"], "backend");

    // The identity secret: chain shown, key redacted as Envoy does.
    let s = find(
        &configs[4]["dynamic_active_secrets"],
        &["name"],
        "identity_cert:web",
    );
    assert_eq!(s["secret"]["@type"], SECRET_TYPE);
    let cert = &s["secret"]["tls_certificate"];
    assert_eq!(
        cert["certificate_chain"]["inline_string"],
        "<web cert chain PEM>"
    );
    assert_eq!(cert["private_key"]["inline_string"], "[redacted]");
    assert!(!dump.to_string().contains("<web key PEM>"), "{dump:#}");
}

#[test]
fn every_fixture_prints_without_errors_and_parses_back_unchanged() {
    let pool = DescriptorPool::decode(DESCRIPTOR_SET).expect("descriptor set");
    for (client, mtls) in [
        (ClientKind::Envoy, true),
        (ClientKind::Envoy, false),
        (ClientKind::Grpc, true),
        (ClientKind::MeshlinkProxy, true),
    ] {
        let snap = web_snapshot(client, mtls);
        let dump = config_dump(&snap);
        let mut errs = Vec::new();
        errors(&dump, &mut errs);
        assert!(errs.is_empty(), "{client:?} mtls={mtls}: {errs:?}");

        // Every resource in the reparsed dump is the one sent (the
        // identity secret with its key redacted).
        let parsed = reparse(&dump);
        assert_eq!(parsed.configs.len(), 5);
        let mut seen = 0;
        for (name, any) in dumped_resources(&parsed) {
            let mut sent = snap
                .get(&any.type_url, &name)
                .unwrap_or_else(|| panic!("{name} was not sent"))
                .resource
                .clone();
            if any.type_url == SECRET_TYPE {
                sent.value = redact_key(&sent.value);
            }
            assert_eq!(
                canonical(&pool, &any),
                canonical(&pool, &sent),
                "{client:?} mtls={mtls}: {} {name}",
                any.type_url
            );
            seen += 1;
        }
        assert_eq!(seen, snap.len(), "{client:?} mtls={mtls}");
    }
}

/// `(name, resource)` of every resource in a parsed dump.
fn dumped_resources(dump: &ConfigDump) -> Vec<(String, Any)> {
    fn unpack<M: Message + Default>(any: &Any) -> M {
        M::decode(any.value.as_slice()).expect("dump message decodes")
    }
    let mut out = Vec::new();
    let c: ClustersConfigDump = unpack(&dump.configs[0]);
    for d in c.dynamic_active_clusters {
        let any = d.cluster.expect("cluster");
        let name = unpack::<Cluster>(&any).name;
        out.push((name, any));
    }
    let e: EndpointsConfigDump = unpack(&dump.configs[1]);
    for d in e.dynamic_endpoint_configs {
        let any = d.endpoint_config.expect("endpoint_config");
        let name = unpack::<ClusterLoadAssignment>(&any).cluster_name;
        out.push((name, any));
    }
    let l: ListenersConfigDump = unpack(&dump.configs[2]);
    for d in l.dynamic_listeners {
        let any = d.active_state.and_then(|s| s.listener).expect("listener");
        out.push((d.name, any));
    }
    let r: RoutesConfigDump = unpack(&dump.configs[3]);
    for d in r.dynamic_route_configs {
        let any = d.route_config.expect("route_config");
        let name = unpack::<RouteConfiguration>(&any).name;
        out.push((name, any));
    }
    let s: SecretsConfigDump = unpack(&dump.configs[4]);
    for d in s.dynamic_active_secrets {
        out.push((d.name, d.secret.expect("secret")));
    }
    out
}

/// A Secret's encoding with its private key replaced as the dump does.
fn redact_key(bytes: &[u8]) -> Vec<u8> {
    let mut s = Secret::decode(bytes).expect("secret decodes");
    if let Some(secret::Type::TlsCertificate(c)) = &mut s.r#type
        && let Some(key) = &mut c.private_key
    {
        key.specifier = Some(Specifier::InlineString("[redacted]".into()));
    }
    s.encode_to_vec()
}

/// `any`'s message encoded in field-number order, nested `Any`s too, so
/// two encodings of the same message compare equal.
fn canonical(pool: &DescriptorPool, any: &Any) -> Vec<u8> {
    let name = any.type_url.rsplit('/').next().unwrap();
    let desc = pool
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("unknown type {:?}", any.type_url));
    let mut msg = DynamicMessage::decode(desc, any.value.as_slice()).expect("decodes");
    canonical_fields(pool, &mut msg);
    msg.encode_to_vec()
}

fn canonical_fields(pool: &DescriptorPool, msg: &mut DynamicMessage) {
    if msg.descriptor().full_name() == "google.protobuf.Any" {
        let inner = Any {
            type_url: msg
                .get_field_by_name("type_url")
                .unwrap()
                .as_str()
                .unwrap()
                .into(),
            value: msg
                .get_field_by_name("value")
                .unwrap()
                .as_bytes()
                .unwrap()
                .to_vec(),
        };
        msg.set_field_by_name("value", ReflectValue::Bytes(canonical(pool, &inner).into()));
        return;
    }
    let fields: Vec<_> = msg.descriptor().fields().collect();
    for f in fields {
        if msg.has_field(&f) {
            canonical_value(pool, msg.get_field_mut(&f));
        }
    }
}

fn canonical_value(pool: &DescriptorPool, v: &mut ReflectValue) {
    match v {
        ReflectValue::Message(m) => canonical_fields(pool, m),
        ReflectValue::List(items) => items.iter_mut().for_each(|v| canonical_value(pool, v)),
        ReflectValue::Map(map) => map.values_mut().for_each(|v| canonical_value(pool, v)),
        _ => {}
    }
}

/// A transparent proxy's resources (capture listeners with the
/// original_dst listener filter, the DNS filter's Listener, ORIGINAL_DST
/// clusters) print without errors and parse back.
#[test]
fn a_transparent_proxys_dump_prints_without_errors() {
    let mut mesh = translate_fixtures::mesh(true).to_json();
    mesh["status"] = serde_json::json!({"vips": {"backend": "240.0.0.7"}});
    let mut web = translate_fixtures::dataplane("web-1", "10.0.0.1", "web", 8080, &[]).to_json();
    web["spec"]["networking"]["transparentProxying"] = serde_json::json!({});
    let view = meshlink_xds::translate::MeshView::new(
        meshlink_api::Resource::from_json_unvalidated(mesh).unwrap(),
        vec![
            meshlink_api::Resource::from_json(web).unwrap(),
            translate_fixtures::dataplane("backend-1", "10.0.0.2", "backend", 8080, &[]),
        ],
        Vec::new(),
    );
    let snap = translate(&proxy("web-1", ClientKind::MeshlinkProxy), &view);
    assert!(snap.get(LISTENER_TYPE, "meshlink:dns").is_some());
    let dump = config_dump(&snap);
    let mut errs = Vec::new();
    errors(&dump, &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    reparse(&dump);
}
