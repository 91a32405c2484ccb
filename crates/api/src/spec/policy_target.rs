//! The `targetRef`s of Kuma's outbound policies (MeshHTTPRoute,
//! MeshTCPRoute, MeshTimeout, MeshRetry): which kinds each position
//! accepts, and the field rules of `to[].targetRef`.
//!
//! Owns the per-kind allowed lists (Kuma 2.9/2.10, legacy kinds included so
//! Kuma's documented examples apply) and `to[]` validation. It decides
//! nothing about how policies combine; that is `crate::policy`.

use super::target_ref::{Position, TargetRef, TargetRefKind};
use crate::validate::{self, Errors};

use TargetRefKind::{
    Dataplane, Mesh, MeshExternalService, MeshHTTPRoute, MeshMultiZoneService, MeshService,
    MeshServiceSubset, MeshSubset,
};

/// Top-level kinds of a route: Kuma 2.10's `Mesh` and `Dataplane`, and
/// the legacy kinds of its older documents.
pub(crate) const ROUTE_TOP_KINDS: &[TargetRefKind] =
    &[Mesh, Dataplane, MeshSubset, MeshService, MeshServiceSubset];

/// Top-level kinds of MeshTimeout and MeshRetry: those of a route, and
/// (Kuma 2.8's per-route form) a `MeshHTTPRoute` by name.
pub(crate) const TOP_KINDS: &[TargetRefKind] = &[
    Mesh,
    Dataplane,
    MeshSubset,
    MeshService,
    MeshServiceSubset,
    MeshHTTPRoute,
];

/// `to[]` kinds of a MeshHTTPRoute or MeshTCPRoute (as in Kuma: a route
/// is for one kind of destination, never the whole mesh).
pub(crate) const ROUTE_TO_KINDS: &[TargetRefKind] =
    &[MeshService, MeshExternalService, MeshMultiZoneService];

/// `to[]` kinds of a MeshTimeout (per route too).
pub(crate) const TIMEOUT_TO_KINDS: &[TargetRefKind] = &[
    Mesh,
    MeshService,
    MeshExternalService,
    MeshMultiZoneService,
    MeshHTTPRoute,
];

/// `to[]` kinds of a MeshRetry (per route too).
pub(crate) const RETRY_TO_KINDS: &[TargetRefKind] = TIMEOUT_TO_KINDS;

/// `from[]` kinds of a MeshTimeout.
pub(crate) const FROM_KINDS: &[TargetRefKind] = &[Mesh, MeshSubset, MeshService];

/// Validates an optional top-level `spec.targetRef` against `allowed`.
pub(crate) fn validate_top(
    errs: &mut Errors,
    target: Option<&TargetRef>,
    allowed: &[TargetRefKind],
) {
    if let Some(t) = target {
        t.validate_allowed(errs, "spec.targetRef", Position::Top, allowed);
    }
}

/// Field rules of a `to[].targetRef` whose kind is allowed.
pub(crate) fn validate_to(t: &TargetRef, errs: &mut Errors, at: &str) {
    let kind = &t.kind;
    let not_allowed = |errs: &mut Errors, field: &str, hint: &str| {
        errs.add(
            format!("{at}.{field}"),
            format!("not allowed when kind is {kind}{hint}"),
        );
    };
    let named = t.name.as_deref().is_some_and(|n| !n.trim().is_empty());
    if *kind == Mesh {
        for (field, set) in [
            ("name", t.name.is_some()),
            ("namespace", t.namespace.is_some()),
            ("labels", t.labels.is_some()),
            ("sectionName", t.section_name.is_some()),
        ] {
            if set {
                not_allowed(errs, field, "");
            }
        }
    } else {
        match (&t.labels, named) {
            (None, false) => errs.add(
                format!("{at}.name"),
                format!("required when kind is {kind}: its name (or select by labels)"),
            ),
            (Some(_), true) => errs.add(
                format!("{at}.labels"),
                "not allowed together with name: reference one by name or select by labels",
            ),
            (Some(labels), false) => {
                for (k, v) in labels {
                    validate::label(errs, &format!("{at}.labels[{k:?}]"), k, v);
                }
            }
            (None, true) => {}
        }
        if t.section_name.is_some() && !matches!(kind, MeshService | MeshMultiZoneService) {
            not_allowed(
                errs,
                "sectionName",
                "; only MeshService and MeshMultiZoneService have ports",
            );
        }
    }
    if t.section_name
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        errs.add(
            format!("{at}.sectionName"),
            "must not be empty: a port's name or number",
        );
    }
    if !t.tags.is_empty() {
        not_allowed(
            errs,
            "tags",
            "; to[] selects destinations by name or labels",
        );
    }
    if t.proxy_types.is_some() {
        errs.add(
            format!("{at}.proxyTypes"),
            "not allowed in to[]: proxyTypes selects the proxies a policy is installed on \
             (spec.targetRef)",
        );
    }
}

/// Validates every `to[].targetRef` of a policy against `allowed`.
pub(crate) fn validate_to_list<'a>(
    errs: &mut Errors,
    targets: impl Iterator<Item = &'a TargetRef>,
    allowed: &[TargetRefKind],
) {
    for (i, t) in targets.enumerate() {
        t.validate_allowed(
            errs,
            &format!("spec.to[{i}].targetRef"),
            Position::To,
            allowed,
        );
    }
}

/// Validates the `from[]` or `to[]` entries of a policy (`position`):
/// each `targetRef` among `allowed` and each `default` by `default` at
/// its path (`spec.from[i].default`).
pub(crate) fn validate_entries<E>(
    errs: &mut Errors,
    position: Position,
    entries: &[E],
    allowed: &[TargetRefKind],
    target: impl Fn(&E) -> &TargetRef,
    mut default: impl FnMut(&mut Errors, &E, &str),
) {
    let list = match position {
        Position::Top => "targetRef",
        Position::From => "from",
        Position::To => "to",
    };
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("spec.{list}[{i}]");
        target(entry).validate_allowed(errs, &format!("{at}.targetRef"), position, allowed);
        default(errs, entry, &format!("{at}.default"));
    }
}

/// Validates a policy's `to[]` list of destinations: at least one entry
/// (else an error showing `example`), each `targetRef` among
/// [`TIMEOUT_TO_KINDS`], and each `default` by `default` at its path
/// (`spec.to[i].default`).
pub(crate) fn validate_to_entries<E>(
    errs: &mut Errors,
    entries: &[E],
    example: &str,
    target: impl Fn(&E) -> &TargetRef,
    mut default: impl FnMut(&mut Errors, &E, &str),
) {
    if entries.is_empty() {
        errs.add(
            "spec.to",
            format!("at least one entry is required, e.g. {example}"),
        );
    }
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("spec.to[{i}]");
        target(entry).validate_allowed(
            errs,
            &format!("{at}.targetRef"),
            Position::To,
            TIMEOUT_TO_KINDS,
        );
        default(errs, entry, &format!("{at}.default"));
    }
}
