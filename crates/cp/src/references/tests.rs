//! Unit tests of the reference index: each reference kind, read forwards
//! ([`outgoing`]) and backwards (`users_of`, `cascade_order`), on a real
//! SQLite store.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use meshlink_api::spec::{AccessGrantStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource, parse_documents};

use super::delete_guard::name_list;
use super::incoming::pending_redemption;
use super::*;
use crate::resources::{ResourceError, ResourceService};

const MESH: &str = "type: Mesh\nname: corp\nmtls:\n  enabledBackend: ca\n  backends:\n    - name: builtin\n      type: builtin\n    - name: ca\n      type: provided\n      conf:\n        cert: {secret: ca-cert}\n        key: {secret: ca-key}\n";
const SECRETS: &str = "type: Secret\nname: ca-cert\nmesh: corp\ndata: aGk=\n---\ntype: Secret\nname: ca-key\nmesh: corp\ndata: aGk=\n";
const MESH_CONTENTS: &str = "type: MeshService\nname: backend\nmesh: corp\nspec:\n  selector: {dataplaneTags: {kuma.io/service: backend}}\n  ports:\n    - {port: 80, targetPort: 8080}\n    - {port: 81, targetPort: 8081}\n---\ntype: Dataplane\nname: web\nmesh: corp\nnetworking:\n  address: 127.0.0.1\n  inbound:\n    - {port: 8080, tags: {kuma.io/service: web}}\n  outbound:\n    - port: 10001\n      backendRef: {kind: MeshService, name: backend, port: 80}\n---\ntype: MeshTrafficPermission\nname: all\nmesh: corp\nspec:\n  targetRef: {kind: Mesh}\n  from:\n    - targetRef: {kind: Mesh}\n      default: {action: Allow}\n";
const SITE: &str = "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: west}\n---\napiVersion: skupper.io/v2alpha1\nkind: RouterAccess\nmetadata: {name: ra}\nspec:\n  roles: [{name: inter-router, port: 55671}]\n  tlsCredentials: ra-tls\n---\napiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {name: db}\nspec: {routingKey: db, host: db, port: 5432}\n---\napiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {name: db}\nspec: {routingKey: db, host: 127.0.0.1, port: 5432}\n---\napiVersion: skupper.io/v2alpha1\nkind: AccessGrant\nmetadata: {name: g}\nspec: {redemptionsAllowed: 2}\n---\napiVersion: skupper.io/v2alpha1\nkind: Link\nmetadata: {name: to-east}\nspec:\n  endpoints: [{name: inter-router, host: east, port: 55671}]\n  tlsCredentials: link-tls\n";

fn docs(yaml: &str) -> Vec<Resource> {
    parse_documents(yaml)
        .into_iter()
        .map(|d| d.outcome.unwrap_or_else(|e| panic!("{e:?}")))
        .collect()
}

fn one(yaml: &str, name: &str) -> Resource {
    docs(yaml)
        .into_iter()
        .find(|r| r.name() == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// (kind, mesh, name, field, on_apply) of one outgoing reference.
type Summary = (Kind, Option<String>, Option<String>, String, OnApply);

/// Each outgoing reference of `r`, summarised.
fn summary(r: &Resource) -> Vec<Summary> {
    outgoing(r)
        .into_iter()
        .map(|x| (x.kind, x.mesh, x.name, x.field, x.on_apply))
        .collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn id(kind: Kind, mesh: Option<&str>, name: &str) -> ObjectId {
    ObjectId {
        kind,
        mesh: mesh.map(str::to_owned),
        name: name.to_owned(),
    }
}

#[test]
fn each_kind_names_what_it_needs() {
    use OnApply::*;
    let mesh = one(MESH, "corp");
    assert_eq!(
        summary(&mesh),
        [
            (
                Kind::Secret,
                s("corp"),
                s("ca-cert"),
                "spec.mtls.backends[1].conf.cert.secret".into(),
                Required
            ),
            (
                Kind::Secret,
                s("corp"),
                s("ca-key"),
                "spec.mtls.backends[1].conf.key.secret".into(),
                Required
            ),
        ]
    );
    let dp = one(MESH_CONTENTS, "web");
    assert_eq!(
        summary(&dp),
        [
            (
                Kind::Mesh,
                None,
                s("corp"),
                "metadata.mesh".into(),
                Required
            ),
            (
                Kind::MeshService,
                s("corp"),
                s("backend"),
                "spec.networking.outbound[0].backendRef.port".into(),
                IfPresent
            ),
        ]
    );
    let secret = one(SECRETS, "ca-key");
    assert_eq!(
        summary(&secret),
        [(Kind::Mesh, None, s("corp"), "metadata.mesh".into(), Never)],
        "a Kuma Secret may come before its Mesh"
    );
    let ra = one(SITE, "ra");
    assert_eq!(
        summary(&ra),
        [
            (Kind::Site, None, None, "the Site".into(), Never),
            (
                Kind::Secret,
                None,
                s("ra-tls"),
                "spec.tlsCredentials".into(),
                Never
            ),
        ]
    );
    let link = one(SITE, "to-east");
    assert_eq!(summary(&link)[1].2, s("link-tls"));
    for name in ["db", "g"] {
        for r in docs(SITE).iter().filter(|r| r.name() == name) {
            assert_eq!(
                summary(r),
                [(Kind::Site, None, None, "the Site".into(), Never)],
                "{}",
                r.kind()
            );
        }
    }
    assert!(outgoing(&one(SITE, "west")).is_empty());
}

#[test]
fn a_router_access_without_tls_credentials_names_the_secret_of_its_own_name() {
    let ra = one(
        "apiVersion: skupper.io/v2alpha1\nkind: RouterAccess\nmetadata: {name: plain}\nspec:\n  roles: [{name: edge, port: 45671}]\n",
        "plain",
    );
    assert_eq!(outgoing(&ra)[1].name, s("plain"));
}

#[test]
fn referrer_kinds_is_outgoing_read_backwards() {
    let all: Vec<Resource> = [MESH, SECRETS, MESH_CONTENTS, SITE]
        .iter()
        .flat_map(|y| docs(y))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for r in &all {
        for x in outgoing(r) {
            assert!(
                referrer_kinds(x.kind).contains(&r.kind()),
                "{} refers to {} but is not among its referrers",
                r.kind(),
                x.kind
            );
            seen.insert((x.kind, r.kind()));
        }
    }
    // Every referrer the table lists is exercised above, except kinds
    // whose samples are not in these documents.
    for target in Kind::ALL {
        for from in referrer_kinds(target) {
            let sampled = all.iter().any(|r| r.kind() == from);
            assert!(
                !sampled || seen.contains(&(target, from)),
                "{from} is listed as a referrer of {target} but no {from} refers to one"
            );
        }
    }
}

#[test]
fn a_reference_points_at_its_target_and_asks_for_what_it_names() {
    let dp = one(MESH_CONTENTS, "web");
    let backend = one(MESH_CONTENTS, "backend");
    let to_backend = &outgoing(&dp)[1];
    assert!(to_backend.points_at(&ObjectId::of(&backend)));
    assert!(!to_backend.points_at(&id(Kind::MeshService, Some("other"), "backend")));
    assert!(to_backend.satisfied_by(&backend));
    let without_80 = one(
        &MESH_CONTENTS.replace("{port: 80, ", "{port: 82, "),
        "backend",
    );
    assert!(!to_backend.satisfied_by(&without_80));
    // The Site reference matches whatever the Site is called.
    let to_site = &outgoing(&one(SITE, "db"))[0];
    assert!(to_site.points_at(&id(Kind::Site, None, "anything")));
    // A Mesh's secret: wants a Kuma Secret, not a TLS one of that name.
    let to_key = &outgoing(&one(MESH, "corp"))[1];
    assert!(to_key.satisfied_by(&one(SECRETS, "ca-key")));
}

#[test]
fn a_refusal_lists_at_most_ten_names_then_counts() {
    assert_eq!(name_list::<String>(&[]), "");
    assert_eq!(name_list(&["a"]), "a");
    assert_eq!(name_list(&["a", "b", "c"]), "a, b and c");
    let many: Vec<String> = (0..13).map(|i| format!("Dataplane/d{i}")).collect();
    let list = name_list(&many);
    assert!(list.ends_with("Dataplane/d9 and 3 more"), "{list}");
    assert!(!list.contains("d10"), "{list}");
}

fn grant(ready: bool, used: u64, expires_in: i64) -> Resource {
    let mut g = one(SITE, "g");
    let now = SystemTime::now();
    let at = if expires_in >= 0 {
        now + Duration::from_secs(expires_in as u64)
    } else {
        now - Duration::from_secs((-expires_in) as u64)
    };
    g.status.details = StatusDetails::AccessGrant(AccessGrantStatus {
        expiration_time: Some(humantime::format_rfc3339_seconds(at).to_string()),
        redemptions: Some(used),
        ..Default::default()
    });
    let status = if ready {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    g.set_condition(Condition::now("Ready", status, "R", "m"));
    g
}

#[test]
fn a_grant_is_in_use_while_another_site_may_still_redeem_it() {
    let now = SystemTime::now();
    match pending_redemption(&grant(true, 1, 600), now) {
        Some(User::PendingRedemption { left, allowed, .. }) => assert_eq!((left, allowed), (1, 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        pending_redemption(&grant(true, 2, 600), now),
        None,
        "used up"
    );
    assert_eq!(
        pending_redemption(&grant(true, 0, -5), now),
        None,
        "expired"
    );
    assert_eq!(
        pending_redemption(&grant(false, 0, 600), now),
        None,
        "not Ready"
    );
    assert_eq!(
        pending_redemption(&one(SITE, "g"), now),
        None,
        "no status yet"
    );
}

async fn service() -> (tempfile::TempDir, ResourceService) {
    let dir = tempfile::tempdir().unwrap();
    let store = meshlink_store::SqliteStore::open(&dir.path().join("store.db"))
        .await
        .unwrap();
    let r = ResourceService::new(Arc::new(store));
    for yaml in [SECRETS, MESH, MESH_CONTENTS, SITE] {
        for doc in docs(yaml) {
            r.apply(doc).await.unwrap();
        }
    }
    (dir, r)
}

fn names(users: &[User]) -> Vec<String> {
    users.iter().map(User::to_string).collect()
}

#[tokio::test]
async fn users_are_read_from_the_stored_set() {
    let (_dir, r) = service().await;
    let now = SystemTime::now();
    let site = r.get(Kind::Site, None, "west").await.unwrap();
    assert_eq!(
        names(&r.users_of(&site, now).await.unwrap()),
        [
            "RouterAccess/ra",
            "Listener/db",
            "Connector/db",
            "AccessGrant/g",
            "Link/to-east"
        ]
    );
    let backend = r
        .get(Kind::MeshService, Some("corp"), "backend")
        .await
        .unwrap();
    assert_eq!(
        names(&r.users_of(&backend, now).await.unwrap()),
        ["Dataplane/web (spec.networking.outbound[0].backendRef.port)"]
    );
    let key = r.get(Kind::Secret, Some("corp"), "ca-key").await.unwrap();
    assert_eq!(
        names(&r.users_of(&key, now).await.unwrap()),
        ["Mesh/corp (spec.mtls.backends[1].conf.key.secret)"]
    );
    let mesh = r.get(Kind::Mesh, None, "corp").await.unwrap();
    assert_eq!(
        names(&r.users_of(&mesh, now).await.unwrap()),
        [
            "Dataplane/web",
            "MeshTrafficPermission/all",
            "Secret/ca-cert",
            "Secret/ca-key",
            "MeshService/backend"
        ]
    );
    // Global TLS Secrets, by the users' tlsCredentials (not stored here:
    // who uses a name does not depend on the Secret being there).
    for (secret, user) in [("ra-tls", "RouterAccess/ra"), ("link-tls", "Link/to-east")] {
        let users = r.referring(&id(Kind::Secret, None, secret)).await.unwrap();
        let got: Vec<String> = users
            .iter()
            .map(|(u, x)| format!("{u} {}", x.field))
            .collect();
        assert_eq!(got, [format!("{user} spec.tlsCredentials")]);
    }
    // Nothing uses a Listener; a Kuma Secret in another mesh is not used.
    let listener = r.get(Kind::Listener, None, "db").await.unwrap();
    assert!(r.users_of(&listener, now).await.unwrap().is_empty());
    assert!(
        r.referring(&id(Kind::Secret, Some("other"), "ca-key"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_cascade_deletes_users_before_what_they_use_and_cuts_cycles() {
    let (_dir, r) = service().await;
    let order = r
        .cascade_order(&id(Kind::Secret, Some("corp"), "ca-key"))
        .await
        .unwrap();
    let shown: Vec<String> = order.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "Dataplane/web",
            "MeshTrafficPermission/all",
            "Secret/ca-cert",
            "MeshService/backend",
            "Mesh/corp"
        ],
        "the Mesh's contents, then the Mesh; the Secret itself is the target"
    );
    let pos = |s: &str| shown.iter().position(|x| x == s).unwrap();
    assert!(pos("Dataplane/web") < pos("MeshService/backend"));
    let site = r
        .cascade_order(&id(Kind::Site, None, "west"))
        .await
        .unwrap();
    assert_eq!(site.len(), 5);
    assert!(
        r.cascade_order(&id(Kind::Listener, None, "db"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn deletes_are_refused_naming_users_and_a_cascade_removes_them_in_one_batch() {
    let (_dir, r) = service().await;
    let err = r.delete(Kind::Site, None, "west", None).await.unwrap_err();
    let ResourceError::InUse(msg) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        msg,
        "Site \"west\" is in use by RouterAccess/ra, Listener/db, Connector/db, \
         AccessGrant/g and Link/to-east; delete them first, or use --cascade \
         (?cascade=true in the API) to delete them with it"
    );
    r.get(Kind::Site, None, "west").await.expect("not deleted");

    let err = r
        .delete(Kind::Secret, Some("corp"), "ca-key", None)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "Secret \"ca-key\" in mesh \"corp\" is in use by Mesh/corp \
             (spec.mtls.backends[1].conf.key.secret), which in turn is used by Dataplane/web, "
        ),
        "{msg}"
    );

    let before = r.store().current_revision().await.unwrap();
    let (site, cascaded) = r
        .delete_cascade(Kind::Site, None, "west", None)
        .await
        .unwrap();
    assert_eq!(site.name(), "west");
    assert_eq!(cascaded.len(), 5);
    let feed = r.store().changes_since(before, 100).await.unwrap();
    let kinds: Vec<&str> = feed.iter().map(|c| c.object.key.kind.as_str()).collect();
    assert_eq!(kinds.last(), Some(&"Site"), "users first: {kinds:?}");
    assert_eq!(feed.len(), 6);
    for k in [
        Kind::RouterAccess,
        Kind::Listener,
        Kind::Connector,
        Kind::AccessGrant,
        Kind::Link,
    ] {
        assert!(r.list(k, None, None).await.unwrap().is_empty(), "{k}");
    }
}

#[tokio::test]
async fn an_update_may_not_take_away_a_port_a_dataplane_names() {
    let (_dir, r) = service().await;
    let fewer = one(
        &MESH_CONTENTS.replace("    - {port: 80, targetPort: 8080}\n", ""),
        "backend",
    );
    let err = r.apply(fewer).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("spec.ports: this change takes away what Dataplane/web (spec.networking.outbound[0].backendRef.port = 80) still use"),
        "{msg}"
    );
    // Dropping the port nobody names is fine.
    let fine = one(
        &MESH_CONTENTS.replace("    - {port: 81, targetPort: 8081}\n", ""),
        "backend",
    );
    r.apply(fine).await.unwrap();
}
