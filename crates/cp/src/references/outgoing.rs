//! Outgoing references: what one resource needs, read from its spec alone.
//!
//! Owns the table of references between kinds:
//!
//! | from | to | field | apply |
//! | --- | --- | --- | --- |
//! | any mesh-scoped resource | its Mesh | `metadata.mesh` | required |
//! | a Kuma Secret | its Mesh | `metadata.mesh` | not checked (a Secret may come first) |
//! | Mesh | Kuma Secret in its mesh | `spec.mtls.backends[i].conf.{cert,key,chain}.secret` | required |
//! | Dataplane | MeshService port | `spec.networking.outbound[i].backendRef.port` | checked if the MeshService exists |
//! | RouterAccess | Secret | `spec.tlsCredentials` (default: its name) | not checked |
//! | Link | Secret | `spec.tlsCredentials` | not checked |
//! | RouterAccess, Listener, MultiKeyListener, Connector, AccessGrant, AccessToken, Link | the Site | (membership) | not checked |
//!
//! [`referrer_kinds`] is the same table read backwards; a unit test keeps
//! the two in step.

use meshlink_api::spec::{DataSource, MeshSpec, Spec};
use meshlink_api::{Kind, Resource};

use super::{OnApply, Reference, Want};

/// The kinds a Site's references come from: everything of the site.
const SITE_MEMBERS: [Kind; 7] = [
    Kind::RouterAccess,
    Kind::Listener,
    Kind::MultiKeyListener,
    Kind::Connector,
    Kind::AccessGrant,
    Kind::AccessToken,
    Kind::Link,
];

/// The kinds whose resources may reference an object of `kind`, in the
/// order a refusal lists them.
pub(crate) fn referrer_kinds(kind: Kind) -> Vec<Kind> {
    match kind {
        // What lives in a Mesh: every mesh-scoped kind and Kuma Secrets.
        Kind::Mesh => Kind::ALL.into_iter().filter(|k| k.allows_mesh()).collect(),
        Kind::Site => SITE_MEMBERS.to_vec(),
        Kind::Secret => vec![Kind::Mesh, Kind::RouterAccess, Kind::Link],
        Kind::MeshService => vec![Kind::Dataplane],
        _ => Vec::new(),
    }
}

/// Every reference `r` makes, in field order.
pub(crate) fn outgoing(r: &Resource) -> Vec<Reference> {
    let mut out = Vec::new();
    if let Some(mesh) = r.mesh() {
        // A Kuma Secret may come before its Mesh (the Mesh may name it),
        // as a labelled Secret on Kubernetes does.
        let on_apply = if r.kind() == Kind::Secret {
            OnApply::Never
        } else {
            OnApply::Required
        };
        out.push(membership(
            Kind::Mesh,
            None,
            Some(mesh),
            "metadata.mesh",
            on_apply,
        ));
    }
    if SITE_MEMBERS.contains(&r.kind()) {
        out.push(membership(
            Kind::Site,
            None,
            None,
            "the Site",
            OnApply::Never,
        ));
    }
    match &r.spec {
        Spec::Mesh(m) => {
            for (field, name) in mesh_secrets(m) {
                out.push(Reference {
                    kind: Kind::Secret,
                    mesh: Some(r.name().to_owned()),
                    name: Some(name.to_owned()),
                    want: Want::KumaSecret,
                    field,
                    membership: false,
                    on_apply: OnApply::Required,
                });
            }
        }
        Spec::Dataplane(dp) => {
            for (i, o) in dp.networking.outbound.iter().enumerate() {
                if let Some((name, port)) = o.mesh_service() {
                    out.push(Reference {
                        kind: Kind::MeshService,
                        mesh: r.mesh().map(str::to_owned),
                        name: Some(name.to_owned()),
                        want: Want::Port(port),
                        field: format!("spec.networking.outbound[{i}].backendRef.port"),
                        membership: false,
                        on_apply: OnApply::IfPresent,
                    });
                }
            }
        }
        Spec::RouterAccess(ra) => out.push(credentials(ra.tls_credentials(r.name()))),
        Spec::Link(l) => out.extend(l.tls_credentials.as_deref().map(credentials)),
        _ => {}
    }
    out
}

fn membership(
    kind: Kind,
    mesh: Option<&str>,
    name: Option<&str>,
    field: &str,
    on_apply: OnApply,
) -> Reference {
    Reference {
        kind,
        mesh: mesh.map(str::to_owned),
        name: name.map(str::to_owned),
        want: Want::Any,
        field: field.to_owned(),
        membership: true,
        on_apply,
    }
}

/// A RouterAccess's or Link's `tlsCredentials`: a global Secret.
fn credentials(name: &str) -> Reference {
    Reference {
        kind: Kind::Secret,
        mesh: None,
        name: Some(name.to_owned()),
        want: Want::Any,
        field: "spec.tlsCredentials".to_owned(),
        membership: false,
        on_apply: OnApply::Never,
    }
}

/// Every `secret:` of a Mesh's provided CAs: (field path, secret name).
fn mesh_secrets(spec: &MeshSpec) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let backends = spec.mtls.iter().flat_map(|m| m.backends.iter());
    for (i, b) in backends.enumerate() {
        let Some(conf) = &b.conf else { continue };
        for (field, src) in [
            ("cert", &conf.cert),
            ("key", &conf.key),
            ("chain", &conf.chain),
        ] {
            if let Some(DataSource {
                secret: Some(name), ..
            }) = src
            {
                out.push((
                    format!("spec.mtls.backends[{i}].conf.{field}.secret"),
                    name.as_str(),
                ));
            }
        }
    }
    out
}
