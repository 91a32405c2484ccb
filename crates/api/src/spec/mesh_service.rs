//! The MeshService kind (Kuma's `kuma.io/v1alpha1` MeshService) and the
//! Dataplane outbound `backendRef` that names one.
//!
//! Owns the MeshService spec (selector, ports, identities), its status
//! (which Dataplanes it selects), validation, and the pure rules Kuma
//! defines for it: which Dataplanes a selector selects, which inbound a
//! port's `targetPort` names, and which identities a client accepts. It
//! must never look anything up: callers pass the Dataplanes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;
use super::{DataplaneSpec, Inbound, Port, Tags};
use crate::validate::{self, Errors};

/// Kuma's application protocols of a MeshService port.
const APP_PROTOCOLS: &[&str] = &["tcp", "http", "http2", "grpc", "kafka"];

/// `spec` of a MeshService.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServiceSpec {
    /// Which Dataplanes serve this service (none: it selects nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<MeshServiceSelector>,
    /// The ports clients reach it on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<MeshServicePort>,
    /// The identities its Dataplanes present (default: the services of
    /// the selected Dataplanes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identities: Option<Vec<MeshServiceIdentity>>,
}

/// `spec.selector`: exactly one of Kuma's three forms.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServiceSelector {
    /// Dataplanes with an inbound whose tags include all of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataplane_tags: Option<Tags>,
    /// The one Dataplane with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataplane_ref: Option<DataplaneRef>,
    /// Dataplanes whose labels include all of `matchLabels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataplane_labels: Option<LabelSelector>,
}

/// `selector.dataplaneRef`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneRef {
    /// The Dataplane's name.
    #[serde(default)]
    pub name: String,
}

/// `selector.dataplaneLabels`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels a Dataplane must have, with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
}

/// One entry of `spec.ports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServicePort {
    /// Optional name of the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port clients name in `backendRef.port`.
    pub port: Port,
    /// The selected Dataplanes' inbound: its port, or its `name`
    /// (default: `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<TargetPort>,
    /// Kuma's protocol (`tcp` by default); informational here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

/// `ports[].targetPort`: an inbound port number or an inbound name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetPort {
    /// Matches the inbound with this `port`.
    Number(Port),
    /// Matches the inbound with this `name`.
    Name(String),
}

string_enum! {
    /// How a MeshService identity is given.
    pub enum IdentityType ("identity type") {
        /// A `kuma.io/service` value: `spiffe://<trust domain>/<value>`.
        ServiceTag = "ServiceTag",
        /// A whole SPIFFE ID.
        SpiffeID = "SpiffeID",
    }
}

/// One entry of `spec.identities`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServiceIdentity {
    /// `ServiceTag` or `SpiffeID`.
    #[serde(rename = "type")]
    pub type_: IdentityType,
    /// The service name or SPIFFE ID.
    pub value: String,
}

/// Dataplane `networking.outbound[].backendRef`: a MeshService port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendRef {
    /// `MeshService` (the only kind implemented).
    pub kind: String,
    /// The MeshService's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The MeshService port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Kuma's label form (selects the oldest matching MeshService); not
    /// implemented yet, refused with a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

string_enum! {
    /// Kuma's `meshServices.mode` of a Mesh.
    pub enum MeshServicesMode ("meshServices mode") {
        /// `kuma.io/service` tags define destinations; MeshServices are
        /// not used (the default).
        Disabled = "Disabled",
        /// Both define destinations.
        Everywhere = "Everywhere",
        /// Both define destinations (Kuma limits MeshService outbounds to
        /// a proxy's reachable backends under transparent proxying).
        ReachableBackends = "ReachableBackends",
        /// Only MeshServices define destinations; tag outbounds get no
        /// endpoints.
        Exclusive = "Exclusive",
    }
}

/// Mesh `spec.meshServices`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServices {
    /// The mode (default `Disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<MeshServicesMode>,
}

// === impl MeshServices ===

impl MeshServices {
    /// The effective mode.
    pub fn effective_mode(&self) -> MeshServicesMode {
        self.mode.clone().unwrap_or(MeshServicesMode::Disabled)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(m) = &self.mode {
            m.validate(errs, "spec.meshServices.mode");
        }
    }
}

/// Warns about a Kuma Mesh `meshServices.mode` (in `spec`, paths after
/// `prefix`) other than `Disabled`: Kuma then generates MeshServices from
/// `kuma.io/service` tags, which meshlink does not.
pub(crate) fn mesh_services_mode_warning(
    spec: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    warnings: &mut Vec<String>,
) {
    let mode = spec
        .get("meshServices")
        .and_then(|m| m.get("mode"))
        .and_then(serde_json::Value::as_str);
    if let Some(mode @ ("Everywhere" | "ReachableBackends" | "Exclusive")) = mode {
        warnings.push(format!(
            "{prefix}meshServices.mode: {mode}: meshlink does not generate MeshServices from \
             kuma.io/service tags as Kuma does in this mode; apply a MeshService for each \
             destination that outbounds name with backendRef"
        ));
    }
}

/// `status` of a MeshService: what it selects now. Server-owned.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshServiceStatus {
    /// Counts of the selected Dataplanes (Kuma's `dataplaneProxies`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataplane_proxies: Option<DataplaneProxies>,
    /// Names of the selected Dataplanes, sorted (at most
    /// [`MeshServiceStatus::MAX_NAMES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dataplanes: Vec<String>,
}

/// `status.dataplaneProxies`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneProxies {
    /// Selected Dataplanes whose proxy has an open xDS stream.
    #[serde(default)]
    pub connected: u64,
    /// Selected Dataplanes.
    #[serde(default)]
    pub total: u64,
}

// === impl MeshServiceStatus ===

impl MeshServiceStatus {
    /// How many Dataplane names the status lists.
    pub const MAX_NAMES: usize = 100;
}

// === impl MeshServiceSpec ===

impl MeshServiceSpec {
    /// Whether the selector selects the Dataplane `name` with `labels`
    /// (Kuma's rules: a Dataplane without inbounds is never selected; tags
    /// match any one inbound's tags, and empty `dataplaneTags` select
    /// nothing; empty `matchLabels` select every Dataplane).
    pub fn selects(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        dp: &DataplaneSpec,
    ) -> bool {
        let Some(sel) = &self.selector else {
            return false;
        };
        if dp.networking.inbound.is_empty() {
            return false;
        }
        if let Some(tags) = &sel.dataplane_tags {
            !tags.is_empty() && dp.networking.inbound.iter().any(|i| i.tags.includes(tags))
        } else if let Some(r) = &sel.dataplane_ref {
            r.name == name
        } else if let Some(l) = &sel.dataplane_labels {
            l.match_labels
                .iter()
                .flatten()
                .all(|(k, v)| labels.get(k) == Some(v))
        } else {
            false
        }
    }

    /// The port entry numbered `port`.
    pub fn port(&self, port: u16) -> Option<&MeshServicePort> {
        self.ports.iter().find(|p| p.port.get() == port)
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        if let Some(sel) = &self.selector {
            sel.validate(errs);
        }
        for (i, p) in self.ports.iter().enumerate() {
            let at = format!("spec.ports[{i}]");
            if p.port.validate(errs, &format!("{at}.port"))
                && let Some(j) = self.ports[..i].iter().position(|o| o.port == p.port)
            {
                errs.add(
                    format!("{at}.port"),
                    format!("duplicate port {} (also ports[{j}])", p.port),
                );
            }
            if let Some(name) = &p.name {
                dns_label(errs, &format!("{at}.name"), name);
                if let Some(j) = self.ports[..i]
                    .iter()
                    .position(|o| o.name.as_ref() == Some(name))
                {
                    errs.add(
                        format!("{at}.name"),
                        format!("duplicate port name {name:?} (also ports[{j}])"),
                    );
                }
            }
            match &p.target_port {
                Some(TargetPort::Number(n)) => {
                    n.validate(errs, &format!("{at}.targetPort"));
                }
                Some(TargetPort::Name(n)) if n.bytes().all(|b| b.is_ascii_digit()) => errs.add(
                    format!("{at}.targetPort"),
                    format!("{n:?} is a string of digits; write the port as a number: {n}"),
                ),
                Some(TargetPort::Name(n)) => dns_label(errs, &format!("{at}.targetPort"), n),
                None => {}
            }
            if let Some(proto) = &p.app_protocol
                && !APP_PROTOCOLS.contains(&proto.as_str())
            {
                errs.add(
                    format!("{at}.appProtocol"),
                    super::string_enum::unknown_message("appProtocol", proto, APP_PROTOCOLS),
                );
            }
        }
        for (i, id) in self.identities.iter().flatten().enumerate() {
            let at = format!("spec.identities[{i}]");
            id.type_.validate(errs, &format!("{at}.type"));
            if id.value.trim().is_empty() {
                errs.add(format!("{at}.value"), "must not be empty");
            } else if id.type_ == IdentityType::SpiffeID && !id.value.starts_with("spiffe://") {
                errs.add(
                    format!("{at}.value"),
                    format!(
                        "{:?} is not a SPIFFE ID; write spiffe://<trust domain>/<path>, \
                         or use type ServiceTag for a service name",
                        id.value
                    ),
                );
            }
        }
    }
}

// === impl MeshServiceSelector ===

impl MeshServiceSelector {
    fn validate(&self, errs: &mut Errors) {
        let set = [
            self.dataplane_tags.is_some(),
            self.dataplane_ref.is_some(),
            self.dataplane_labels.is_some(),
        ];
        if set.iter().filter(|s| **s).count() > 1 {
            errs.add(
                "spec.selector",
                "must specify only one of: dataplaneTags, dataplaneRef, or dataplaneLabels",
            );
        }
        for (k, v) in self.dataplane_tags.iter().flatten() {
            let at = format!("spec.selector.dataplaneTags[{k:?}]");
            if k.trim().is_empty() {
                errs.add(at, "tag keys must not be empty");
            } else if v.trim().is_empty() {
                errs.add(at, "tag values must not be empty");
            }
        }
        if let Some(r) = &self.dataplane_ref {
            if r.name.is_empty() {
                errs.add(
                    "spec.selector.dataplaneRef.name",
                    "required: the name of the Dataplane this MeshService selects",
                );
            } else {
                validate::dns_name(errs, "spec.selector.dataplaneRef.name", &r.name);
            }
        }
        let labels = self.dataplane_labels.iter().flat_map(|l| &l.match_labels);
        for (k, v) in labels.flatten() {
            let at = format!("spec.selector.dataplaneLabels.matchLabels[{k:?}]");
            validate::label(errs, &at, k, v);
        }
    }
}

// === impl MeshServicePort ===

impl MeshServicePort {
    /// Whether `inbound` serves this port: `targetPort` names its port or
    /// its `name` (unset: `port` names its port).
    pub fn targets(&self, inbound: &Inbound) -> bool {
        match &self.target_port {
            Some(TargetPort::Number(n)) => *n == inbound.port,
            Some(TargetPort::Name(n)) => inbound.name.as_deref() == Some(n.as_str()),
            None => self.port == inbound.port,
        }
    }
}

// === impl BackendRef ===

impl BackendRef {
    /// The MeshService name and port, for a valid `kind: MeshService` ref.
    pub fn mesh_service(&self) -> Option<(&str, u16)> {
        match (self.kind.as_str(), &self.name, self.port) {
            ("MeshService", Some(name), Some(port)) => Some((name, port.get())),
            _ => None,
        }
    }

    /// Validates a ref found at `at` (`spec.networking.outbound[i].backendRef`).
    pub(crate) fn validate(&self, errs: &mut Errors, at: &str) {
        match self.kind.as_str() {
            "MeshService" => {}
            "MeshExternalService" | "MeshMultiZoneService" => errs.add(
                format!("{at}.kind"),
                format!(
                    "{} is not supported yet; meshlink implements backendRef kind MeshService",
                    self.kind
                ),
            ),
            other => errs.add(
                format!("{at}.kind"),
                format!("invalid value {other:?}; expected MeshService"),
            ),
        }
        if self.labels.is_some() {
            errs.add(
                format!("{at}.labels"),
                "selecting a MeshService by labels is not supported yet; name it with \
                 backendRef.name",
            );
        }
        match &self.name {
            Some(name) => validate::dns_name(errs, &format!("{at}.name"), name),
            None if self.labels.is_none() => errs.add(
                format!("{at}.name"),
                "required: the name of the MeshService this outbound reaches",
            ),
            None => {}
        }
        match self.port {
            Some(p) => {
                p.validate(errs, &format!("{at}.port"));
            }
            None => errs.add(
                format!("{at}.port"),
                "required: one of the MeshService's spec.ports[].port",
            ),
        }
    }
}

/// A DNS label (RFC 1123): lowercase letters, digits and `-`, starting and
/// ending with a letter or digit, at most 63 characters.
fn dns_label(errs: &mut Errors, at: &str, name: &str) {
    let ok = validate::is_dns_label(name);
    if !ok {
        errs.add(
            at,
            format!(
                "invalid name {name:?}: a DNS label (lowercase letters, digits and '-', \
                 starting and ending with a letter or digit, at most 63 characters)"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(v: serde_json::Value) -> MeshServiceSpec {
        serde_json::from_value(v).expect("a MeshService spec")
    }

    fn dp(inbounds: serde_json::Value) -> DataplaneSpec {
        serde_json::from_value(json!({"networking": {"address": "10.0.0.1", "inbound": inbounds}}))
            .expect("a Dataplane spec")
    }

    #[test]
    fn selectors_follow_kumas_rules() {
        let labels = BTreeMap::from([("app".to_owned(), "db".to_owned())]);
        let tagged = dp(json!([
            {"port": 5432, "name": "pg", "tags": {"kuma.io/service": "db", "version": "v1"}},
            {"port": 9000, "tags": {"kuma.io/service": "metrics"}},
        ]));
        let selects = |s: serde_json::Value, d: &DataplaneSpec| {
            spec(json!({"selector": s})).selects("db-0", &labels, d)
        };
        // Tags match one inbound's tags, all of them.
        assert!(selects(
            json!({"dataplaneTags": {"kuma.io/service": "db"}}),
            &tagged
        ));
        assert!(!selects(
            json!({"dataplaneTags": {"kuma.io/service": "db", "version": "v2"}}),
            &tagged
        ));
        assert!(!selects(
            json!({"dataplaneTags": {"kuma.io/service": "db", "version": "v1", "x": "y"}}),
            &tagged
        ));
        // Empty tags select nothing; empty matchLabels everything.
        assert!(!selects(json!({"dataplaneTags": {}}), &tagged));
        assert!(selects(json!({"dataplaneLabels": {}}), &tagged));
        assert!(selects(
            json!({"dataplaneLabels": {"matchLabels": {"app": "db"}}}),
            &tagged
        ));
        assert!(!selects(
            json!({"dataplaneLabels": {"matchLabels": {"app": "web"}}}),
            &tagged
        ));
        assert!(selects(json!({"dataplaneRef": {"name": "db-0"}}), &tagged));
        assert!(!selects(json!({"dataplaneRef": {"name": "db-1"}}), &tagged));
        // No selector, or no inbounds: nothing.
        assert!(!spec(json!({})).selects("db-0", &labels, &tagged));
        assert!(!selects(
            json!({"dataplaneRef": {"name": "db-0"}}),
            &dp(json!([]))
        ));

        // targetPort: a number names the inbound port, a string its name,
        // unset the MeshService port.
        let inbound = &tagged.networking.inbound[0];
        let port = |p: serde_json::Value| -> MeshServicePort { serde_json::from_value(p).unwrap() };
        assert!(port(json!({"port": 80, "targetPort": 5432})).targets(inbound));
        assert!(port(json!({"port": 80, "targetPort": "pg"})).targets(inbound));
        assert!(!port(json!({"port": 80, "targetPort": "http"})).targets(inbound));
        assert!(port(json!({"port": 5432})).targets(inbound));
        assert!(!port(json!({"port": 80})).targets(inbound));
    }
}
