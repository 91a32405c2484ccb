//! Policy `targetRef`s as Kuma defines them: which proxies a policy is
//! installed on (the top level) and which clients a `from[]` rule matches.
//!
//! Owns the shape (`kind`, `name`, `namespace`, `labels`, `sectionName`,
//! `tags`), its validation per position, matching against one Dataplane
//! inbound, and the specificity rank Kuma sorts policies by. It decides
//! nothing about how matching policies combine; that belongs to the
//! translator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Tags;
use super::dataplane::service_from_tags;
use super::string_enum::string_enum;
use crate::validate::{self, Errors};

/// The Dataplane label Kuma on Kubernetes puts the namespace in; a
/// `targetRef.namespace` matches it.
pub const NAMESPACE_LABEL: &str = "k8s.kuma.io/namespace";

string_enum! {
    /// What a [`TargetRef`] selects.
    pub enum TargetRefKind ("targetRef kind") {
        /// Every proxy in the mesh.
        Mesh = "Mesh",
        /// Dataplanes by `name` (and `namespace`) or by `labels`, optionally
        /// one inbound (`sectionName`). Top level only.
        Dataplane = "Dataplane",
        /// Inbounds whose tags include all of `tags`.
        MeshSubset = "MeshSubset",
        /// Inbounds serving the service `name` (top level, `from[]`), or
        /// the destination service `name` (`to[]`, routes' `backendRefs`).
        MeshService = "MeshService",
        /// Kuma's legacy kind: the service `name` restricted to the
        /// endpoints whose tags include `tags`.
        MeshServiceSubset = "MeshServiceSubset",
        /// A MeshHTTPRoute by `name`: `to[]` of a policy that configures
        /// one route (MeshTimeout, MeshRetry).
        MeshHTTPRoute = "MeshHTTPRoute",
        /// Kuma's MeshExternalService by `name` (`to[]` only; meshlink
        /// has no such resource, so it selects nothing yet).
        MeshExternalService = "MeshExternalService",
        /// Kuma's MeshMultiZoneService by `name` (`to[]` only; meshlink
        /// has no such resource, so it selects nothing yet).
        MeshMultiZoneService = "MeshMultiZoneService",
    }
}

string_enum! {
    /// Kuma's `targetRef.proxyTypes`: which kinds of proxy a `Mesh` or
    /// `MeshSubset` target selects.
    pub enum ProxyType ("proxy type") {
        /// Sidecars (Dataplanes with inbounds).
        Sidecar = "Sidecar",
        /// Gateway Dataplanes (`networking.gateway`).
        Gateway = "Gateway",
    }
}

/// Where a [`TargetRef`] appears: the accepted kinds differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// `spec.targetRef`: the proxies the policy is installed on.
    Top,
    /// `spec.from[].targetRef`: the clients a rule matches.
    From,
    /// `spec.to[].targetRef`: the destinations (or routes) an entry
    /// configures; see `super::policy_target`.
    To,
}

/// A selection of proxies (top level) or of clients (`from[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetRef {
    /// `Mesh`, `Dataplane`, `MeshSubset` or `MeshService`.
    pub kind: TargetRefKind,
    /// `MeshService`: the service name (required). `Dataplane`: the
    /// Dataplane's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Dataplane` with `name` only: the Dataplane's `k8s.kuma.io/namespace`
    /// label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `Dataplane` only: labels the Dataplane must carry (all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// `Dataplane` only: one inbound, by its `name`, else by its port (e.g.
    /// `"8080"`; inbound names are never all digits, so the two never clash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    /// `MeshSubset` only (required there): tags to match.
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// `Mesh` or `MeshSubset` at the top level only: the kinds of proxy
    /// selected (default: all). A MeshTrafficPermission acts on sidecar
    /// inbounds, so without `Sidecar` it selects nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_types: Option<Vec<ProxyType>>,
}

/// One inbound of one Dataplane, as a top-level [`TargetRef`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct InboundTarget<'a> {
    /// The Dataplane's name.
    pub dataplane: &'a str,
    /// The Dataplane's labels (`metadata.labels`; Kuma universal's top-level
    /// `labels`).
    pub labels: &'a BTreeMap<String, String>,
    /// The inbound's `port`.
    pub port: u16,
    /// The inbound's `name`, if it has one.
    pub name: Option<&'a str>,
    /// The inbound's tags.
    pub tags: &'a Tags,
}

// === impl TargetRef ===

impl TargetRef {
    /// A target of `kind` with no other field set.
    pub fn of_kind(kind: TargetRefKind) -> Self {
        Self {
            kind,
            name: None,
            namespace: None,
            labels: None,
            section_name: None,
            tags: Tags::new(),
            proxy_types: None,
        }
    }

    /// Whether a client (`from[]`) or an inbound with these tags is matched.
    /// `Dataplane` and unknown kinds match nothing here.
    pub fn matches(&self, tags: &Tags) -> bool {
        match self.kind {
            TargetRefKind::Mesh => true,
            TargetRefKind::MeshService => {
                self.name.is_some() && service_from_tags(tags) == self.name.as_deref()
            }
            TargetRefKind::MeshSubset => tags.includes(&self.tags),
            TargetRefKind::MeshServiceSubset => {
                self.name.is_some()
                    && service_from_tags(tags) == self.name.as_deref()
                    && tags.includes(&self.tags)
            }
            TargetRefKind::Dataplane
            | TargetRefKind::MeshHTTPRoute
            | TargetRefKind::MeshExternalService
            | TargetRefKind::MeshMultiZoneService
            | TargetRefKind::Unknown(_) => false,
        }
    }

    /// Whether a top-level target selects this inbound.
    pub fn selects(&self, inbound: &InboundTarget<'_>) -> bool {
        // An inbound is a sidecar's: gateways have none.
        if self
            .proxy_types
            .as_ref()
            .is_some_and(|t| !t.contains(&ProxyType::Sidecar))
        {
            return false;
        }
        if self.kind != TargetRefKind::Dataplane {
            return self.matches(inbound.tags);
        }
        let name_ok = self.name.as_deref().is_none_or(|n| n == inbound.dataplane);
        let namespace_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| inbound.labels.get(NAMESPACE_LABEL).map(String::as_str) == Some(ns));
        let labels_ok = self
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| inbound.labels.get(k) == Some(v));
        let section_ok = self
            .section_name
            .as_deref()
            .is_none_or(|s| inbound.name == Some(s) || s == inbound.port.to_string());
        name_ok && namespace_ok && labels_ok && section_ok
    }

    /// Kuma's priority of a top-level target: a higher rank wins over a
    /// lower one. `Mesh` < `Dataplane` < `Dataplane` with `labels` <
    /// with `labels` and `sectionName` < with `name` < with `name` and
    /// `sectionName` (Kuma's policy docs) < `MeshSubset` < `MeshService`
    /// (the legacy kinds, ranked after `Dataplane` as in Kuma's source) <
    /// `MeshExternalService` < `MeshMultiZoneService` < `MeshServiceSubset`
    /// < `MeshHTTPRoute` (Kuma's `TargetRefKind` order).
    pub fn rank(&self) -> u8 {
        match self.kind {
            TargetRefKind::Mesh | TargetRefKind::Unknown(_) => 0,
            TargetRefKind::Dataplane => {
                let section = u8::from(self.section_name.is_some());
                if self.name.is_some() {
                    4 + section
                } else if self.labels.is_some() {
                    2 + section
                } else {
                    1 + section
                }
            }
            TargetRefKind::MeshSubset => 6,
            TargetRefKind::MeshService => 7,
            TargetRefKind::MeshExternalService => 8,
            TargetRefKind::MeshMultiZoneService => 9,
            TargetRefKind::MeshServiceSubset => 10,
            TargetRefKind::MeshHTTPRoute => 11,
        }
    }

    /// Reports every problem of a MeshTrafficPermission target at `at`.
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str, position: Position) {
        use TargetRefKind::{Dataplane, Mesh, MeshService, MeshSubset};
        // Dataplane in from[] gets its own message in `validate_fields`.
        self.validate_allowed(
            errs,
            at,
            position,
            &[Mesh, Dataplane, MeshSubset, MeshService],
        );
    }

    /// Reports every problem of this target at `at`, where only the kinds
    /// in `allowed` are accepted (they differ per policy and position).
    pub(crate) fn validate_allowed(
        &self,
        errs: &mut Errors,
        at: &str,
        position: Position,
        allowed: &[TargetRefKind],
    ) {
        // Which fields apply depends on the kind: with an unknown kind, only
        // the kind is reported, with the kinds accepted at this position.
        let names: Vec<&str> = allowed.iter().map(TargetRefKind::as_str).collect();
        if let TargetRefKind::Unknown(given) = &self.kind {
            errs.add(
                format!("{at}.kind"),
                super::string_enum::unknown_message("targetRef kind", given, &names),
            );
            return;
        }
        if !allowed.contains(&self.kind) {
            errs.add(
                format!("{at}.kind"),
                format!(
                    "{} is not allowed here (as in Kuma); expected {}",
                    self.kind,
                    super::string_enum::one_of(&names)
                ),
            );
            return;
        }
        match position {
            Position::To => super::policy_target::validate_to(self, errs, at),
            Position::Top | Position::From => self.validate_fields(errs, at, position),
        }
    }

    fn validate_fields(&self, errs: &mut Errors, at: &str, position: Position) {
        let kind = &self.kind;
        if position == Position::From && *kind == TargetRefKind::Dataplane {
            errs.add(
                format!("{at}.kind"),
                "Dataplane is not allowed in from[]: select clients with kind Mesh, \
                 MeshSubset (tags) or MeshService (name)",
            );
            return;
        }
        let not_allowed = |errs: &mut Errors, field: &str, hint: &str| {
            errs.add(
                format!("{at}.{field}"),
                format!("not allowed when kind is {kind}{hint}"),
            );
        };
        let has_name = self.name.as_deref().is_some_and(|n| !n.trim().is_empty());
        match kind {
            TargetRefKind::MeshService
            | TargetRefKind::MeshServiceSubset
            | TargetRefKind::MeshHTTPRoute
                if !has_name =>
            {
                errs.add(
                    format!("{at}.name"),
                    match kind {
                        TargetRefKind::MeshHTTPRoute => {
                            "required when kind is MeshHTTPRoute: the route's name".to_string()
                        }
                        _ => format!("required when kind is {kind}: the service name"),
                    },
                )
            }
            TargetRefKind::Dataplane if self.name.is_some() && !has_name => errs.add(
                format!("{at}.name"),
                "must not be empty: the Dataplane's name, or remove it",
            ),
            TargetRefKind::Mesh | TargetRefKind::MeshSubset if self.name.is_some() => {
                not_allowed(errs, "name", "")
            }
            _ => {}
        }
        if self.namespace.is_some() {
            if *kind != TargetRefKind::Dataplane {
                not_allowed(errs, "namespace", "");
            } else if self.name.is_none() {
                errs.add(
                    format!("{at}.namespace"),
                    "only allowed together with name: namespace and name reference one Dataplane",
                );
            }
        }
        self.validate_labels(errs, at);
        self.validate_proxy_types(errs, at, position);
        if self.section_name.is_some() && *kind != TargetRefKind::Dataplane {
            not_allowed(
                errs,
                "sectionName",
                "; use kind: Dataplane to select one inbound",
            );
        }
        if self
            .section_name
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            errs.add(
                format!("{at}.sectionName"),
                "must not be empty: an inbound's name or port, e.g. sectionName: \"8080\"",
            );
        }
        match kind {
            TargetRefKind::MeshSubset | TargetRefKind::MeshServiceSubset
                if self.tags.is_empty() =>
            {
                errs.add(
                    format!("{at}.tags"),
                    format!("required when kind is {kind}: the tags to match"),
                )
            }
            TargetRefKind::Dataplane if !self.tags.is_empty() => not_allowed(
                errs,
                "tags",
                "; a Dataplane is selected by labels (use labels:)",
            ),
            TargetRefKind::Mesh | TargetRefKind::MeshService if !self.tags.is_empty() => {
                not_allowed(errs, "tags", "; use kind: MeshSubset to select by tags")
            }
            _ => {}
        }
    }

    fn validate_proxy_types(&self, errs: &mut Errors, at: &str, position: Position) {
        let Some(types) = &self.proxy_types else {
            return;
        };
        let path = format!("{at}.proxyTypes");
        let kind = &self.kind;
        if position == Position::From {
            errs.add(
                &path,
                "not allowed in from[]: a client is matched by its identity; proxyTypes \
                 selects the proxies a policy is installed on (spec.targetRef)",
            );
        } else if !matches!(kind, TargetRefKind::Mesh | TargetRefKind::MeshSubset) {
            errs.add(
                &path,
                format!("not allowed when kind is {kind} (as in Kuma); only Mesh and MeshSubset"),
            );
        } else if types.is_empty() {
            errs.add(
                &path,
                "must be left out or have at least one element (as in Kuma): Sidecar or Gateway",
            );
        }
        for (i, t) in types.iter().enumerate() {
            t.validate(errs, &format!("{path}[{i}]"));
        }
    }

    fn validate_labels(&self, errs: &mut Errors, at: &str) {
        let Some(labels) = &self.labels else { return };
        let path = format!("{at}.labels");
        if self.kind != TargetRefKind::Dataplane {
            errs.add(
                path,
                format!(
                    "not allowed when kind is {}; use kind: Dataplane to select Dataplanes by labels",
                    self.kind
                ),
            );
            return;
        }
        if labels.is_empty() {
            errs.add(
                path,
                "must not be empty: list the labels a Dataplane must carry, or remove labels \
                 to select every Dataplane",
            );
            return;
        }
        if self.name.is_some() {
            errs.add(
                path.clone(),
                "not allowed together with name: select one Dataplane by name or several by \
                 labels",
            );
        }
        for (k, v) in labels {
            validate::label(errs, &format!("{path}[{k:?}]"), k, v);
        }
    }
}
