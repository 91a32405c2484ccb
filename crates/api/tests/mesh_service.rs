//! MeshService and outbound `backendRef` strictness: invalid documents are
//! refused with the path the user wrote; Kuma's accepted shapes apply.

use meshlink_api::parse_documents;

mod support;
use support::errors;

fn dataplane_with_outbound(outbound: &str) -> String {
    format!(
        "type: Dataplane\nname: web-0\nmesh: default\nnetworking:\n  address: 10.0.0.1\n  \
         inbound: [{{port: 8080, tags: {{kuma.io/service: web}}}}]\n  outbound:\n{outbound}"
    )
}

#[test]
fn backend_ref_and_tags_on_one_outbound_is_an_error_at_its_path() {
    let errs = errors(&dataplane_with_outbound(
        "    - port: 10001\n      tags: {kuma.io/service: db}\n      \
         backendRef: {kind: MeshService, name: db, port: 5432}\n",
    ));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("networking.outbound[0].backendRef: both backendRef and tags"),
        "{errs:?}"
    );
    // The legacy `service:` field is a tag too.
    let errs = errors(&dataplane_with_outbound(
        "    - port: 10001\n      service: db\n      \
         backendRef: {kind: MeshService, name: db, port: 5432}\n",
    ));
    assert!(
        errs.iter()
            .any(|e| e.starts_with("networking.outbound[0].backendRef: both")),
        "{errs:?}"
    );
}

#[test]
fn backend_ref_fields_are_checked() {
    let errs = errors(&dataplane_with_outbound(
        "    - port: 10001\n      backendRef: {kind: MeshGateway, name: db}\n",
    ));
    assert!(
        errs.iter().any(|e| e
            .starts_with("networking.outbound[0].backendRef.kind: invalid value \"MeshGateway\"")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("networking.outbound[0].backendRef.port: required")),
        "{errs:?}"
    );
    let errs = errors(&dataplane_with_outbound(
        "    - port: 10001\n      backendRef: {kind: MeshService, labels: {app: db}, port: 1}\n",
    ));
    assert!(
        errs.iter().any(|e| e
            .starts_with("networking.outbound[0].backendRef.labels: selecting a MeshService by labels is not supported yet")),
        "{errs:?}"
    );
}

#[test]
fn inbound_without_tags_applies_and_tagged_inbounds_still_need_the_service_tag() {
    let docs = parse_documents(
        "type: Dataplane\nname: db-0\nmesh: default\nnetworking:\n  address: 10.0.0.2\n  \
         inbound: [{port: 5432}]\n",
    );
    let dp = docs[0].outcome.as_ref().expect("tagless inbound applies");
    assert!(dp.validate().is_empty());
    let spec = dp.spec.as_dataplane().unwrap();
    assert_eq!(spec.identity_service("db-0"), Some("db-0"));
    let errs = errors(
        "type: Dataplane\nname: db-0\nmesh: default\nnetworking:\n  address: 10.0.0.2\n  \
         inbound: [{port: 5432, tags: {version: v1}}]\n",
    );
    assert_eq!(
        errs,
        [
            "networking.inbound[0].tags: missing the service tag: add kuma.io/service: <service name>"
        ]
    );
}

#[test]
fn mesh_service_mistakes_are_refused_with_their_paths() {
    let errs = errors(
        "type: MeshService\nname: db\nmesh: default\nspec:\n  selector:\n    \
         dataplaneTags: {app: db}\n    dataplaneRef: {name: db-0}\n  ports:\n    \
         - {port: 5432, targetPort: \"5432\"}\n    - {port: 5432, targetPort: Main_Port, \
         appProtocol: udp}\n  identities:\n    - {type: SpiffeID, value: db}\n    \
         - {type: Workload, value: db}\n",
    );
    let expect = [
        "spec.selector: must specify only one of",
        "spec.ports[0].targetPort: \"5432\" is a string of digits",
        "spec.ports[1].port: duplicate port 5432",
        "spec.ports[1].targetPort: invalid name \"Main_Port\"",
        "spec.ports[1].appProtocol: unknown appProtocol \"udp\"",
        "spec.identities[0].value: \"db\" is not a SPIFFE ID",
        "spec.identities[1].type: unknown identity type \"Workload\"",
    ];
    for e in expect {
        assert!(errs.iter().any(|m| m.starts_with(e)), "{e}: {errs:?}");
    }
    assert_eq!(errs.len(), expect.len(), "{errs:?}");
}

#[test]
fn mesh_services_mode_is_checked() {
    let errs = errors("type: Mesh\nname: default\nmeshServices:\n  mode: Sometimes\n");
    assert_eq!(
        errs,
        [
            "meshServices.mode: unknown meshServices mode \"Sometimes\"; expected Disabled, \
             Everywhere, ReachableBackends or Exclusive"
        ]
    );
}

#[test]
fn modes_in_which_kuma_generates_mesh_services_warn() {
    let docs = parse_documents("type: Mesh\nname: default\nmeshServices:\n  mode: Everywhere\n");
    assert!(docs[0].outcome.is_ok());
    assert_eq!(docs[0].warnings.len(), 1, "{:?}", docs[0].warnings);
    assert!(
        docs[0].warnings[0]
            .starts_with("meshServices.mode: Everywhere: meshlink does not generate"),
        "{:?}",
        docs[0].warnings
    );
    let k8s = "apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec:\n  meshServices: {mode: Disabled}\n";
    assert!(parse_documents(k8s)[0].warnings.is_empty());
}
