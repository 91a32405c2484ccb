//! Who writes each status: one owner per status object, or per named
//! condition or field within one. Everyone else sends that owner facts (a
//! channel, or a store write it follows through the change feed); nobody
//! writes a status part it does not own. The REST API writes none
//! (`PUT …/status` answers 403 naming the owners, [`refusal`]).
//!
//! This table is the contract. `docs/architecture.md` ("Status owners")
//! prints it, and the test below reads every source file of this crate
//! and fails when a file writes a condition type or a kind's status
//! details that the table does not give it.

use meshlink_api::Kind;

/// One owned part of a kind's status.
#[derive(Debug, Clone, Copy)]
pub struct StatusOwner {
    /// The kind.
    pub kind: Kind,
    /// Condition types (capitalised) and status fields (camelCase) owned.
    pub parts: &'static [&'static str],
    /// The source files (under `crates/cp/src/`) that write them.
    pub files: &'static [&'static str],
    /// The owning task, as an operator would look for it in the logs.
    pub task: &'static str,
    /// What the owner computes them from.
    pub inputs: &'static str,
}

/// Every owned status part. A kind absent here has no status.
pub const OWNERS: &[StatusOwner] = &[
    StatusOwner {
        kind: Kind::Mesh,
        parts: &["Ready", "CARotation"],
        files: &["identity/controller.rs"],
        task: "the mesh CA controller",
        inputs: "the Mesh's mtls backends, their Secrets, issued certificates",
    },
    StatusOwner {
        kind: Kind::Mesh,
        parts: &["vips", "meshServiceVips"],
        files: &["vips/allocator.rs"],
        task: "the VIP allocator of the leading replica",
        inputs: "the services of the mesh's Dataplanes' inbounds, its MeshServices, --vip-range",
    },
    StatusOwner {
        kind: Kind::Mesh,
        parts: &["CertificateRotationStalled"],
        files: &["status/mod.rs", "status/writer.rs"],
        task: "the status task",
        inputs: "each connected proxy's certificate and renewal deadline",
    },
    StatusOwner {
        kind: Kind::Dataplane,
        parts: &[
            "online",
            "controlPlaneInstance",
            "connectionGeneration",
            "lastConnected",
            "lastDisconnected",
            "mtls",
            "Ready",
        ],
        files: &["status/writer.rs", "status/model.rs"],
        task: "the status task of the replica holding the proxy's stream (its connection \
               generation); for a departed replica, the dataplane-gc job by the same rule",
        inputs: "xDS stream opens, closes and ACKs; certificates issued over SDS and Certify; \
                 replica heartbeats; inbound health (declared, and the sidecar's reports)",
    },
    StatusOwner {
        kind: Kind::Dataplane,
        parts: &["AppReachable", "unreachableApps", "unhealthyEndpoints"],
        files: &["status/app_reachable.rs", "status/writer.rs"],
        task: "the status task of the replica holding the proxy's stream (the same claim as \
               Ready, written in the same merge)",
        inputs: "the sidecar's DataplaneHealth reports, sent on the connection of its ADS stream",
    },
    StatusOwner {
        kind: Kind::Dataplane,
        parts: &["ProtocolAgreed"],
        files: &["status/protocol.rs", "status/mod.rs"],
        task: "the status task",
        inputs: "the kuma.io/protocol tags of every inbound of a service",
    },
    StatusOwner {
        kind: Kind::Dataplane,
        parts: &["DuplicateHolder"],
        files: &["status/holders.rs"],
        task: "the status task",
        inputs: "which process (instance id, address) opened each xDS stream and asked Certify, \
                 and which streams were taken over",
    },
    StatusOwner {
        kind: Kind::MeshService,
        parts: &["dataplaneProxies", "ProtocolsAgree", "ProtocolAgreed"],
        files: &["status/mesh_service.rs", "status/mesh_service_protocol.rs"],
        task: "the status task",
        inputs: "the Dataplanes a MeshService selects and their connections",
    },
    StatusOwner {
        kind: Kind::MeshTrafficPermission,
        parts: &["Valid"],
        files: &["status/mod.rs", "status/writer.rs"],
        task: "the status task",
        inputs: "the policy's targets and rules",
    },
    StatusOwner {
        kind: Kind::Site,
        parts: &[
            "siteId",
            "endpoints",
            "status",
            "message",
            "Configured",
            "Resolved",
            "Ready",
        ],
        files: &["site/site_status.rs"],
        task: "the site controller",
        inputs: "the Site, its RouterAccesses, the site CA, and Running (from the router status \
                 task, through the change feed)",
    },
    StatusOwner {
        kind: Kind::Site,
        parts: &[
            "network",
            "sitesInNetwork",
            "meshIngress",
            "Running",
            "Bound",
        ],
        files: &["router/status.rs", "router/bind_status.rs"],
        task: "the router status task",
        inputs: "the site router's RouterStatus reports and the router configuration",
    },
    StatusOwner {
        kind: Kind::RouterAccess,
        parts: &["status", "message", "endpoints", "Ready"],
        files: &["site/site_status.rs"],
        task: "the site controller",
        inputs: "the RouterAccess's roles and its server Secret",
    },
    StatusOwner {
        kind: Kind::RouterAccess,
        parts: &["Bound"],
        files: &["router/status.rs", "router/bind_status.rs"],
        task: "the router status task",
        inputs: "the roles the site's router reports it could not bind",
    },
    StatusOwner {
        kind: Kind::Link,
        parts: &[
            "status",
            "message",
            "remoteSiteId",
            "remoteSiteName",
            "Configured",
            "Operational",
            "Ready",
            "CredentialsValid",
        ],
        files: &[
            "router/status.rs",
            "router/link_status.rs",
            "router/credentials.rs",
        ],
        task: "the router status task",
        inputs: "the router's report of the link, whether its Secret was sent, and the Secret's \
                 certificate",
    },
    StatusOwner {
        kind: Kind::Listener,
        parts: &[
            "hasMatchingConnector",
            "matchingConnectorCount",
            "Matched",
            "Ready",
        ],
        files: &["router/status.rs", "router/bind_status.rs"],
        task: "the router status task",
        inputs: "routing keys in the network (the router's report and this site's Connectors), \
                 and whether the router bound the Listener's port",
    },
    StatusOwner {
        kind: Kind::MultiKeyListener,
        parts: &["hasDestination", "strategy", "Operational", "Ready"],
        files: &["router/multi_key_status.rs"],
        task: "the router status task",
        inputs: "routing keys in the network, and whether the router bound the port",
    },
    StatusOwner {
        kind: Kind::Connector,
        parts: &[
            "hasMatchingListener",
            "matchingListenerCount",
            "selectedPods",
            "Matched",
        ],
        files: &["router/status.rs"],
        task: "the router status task",
        inputs: "routing keys in the network and the Connector's selector",
    },
    StatusOwner {
        kind: Kind::Connector,
        parts: &["Ready"],
        files: &["router/status.rs", "router/connector_status.rs"],
        task: "the router status task",
        inputs: "the connector targets the site's router reports it cannot connect to (flows \
                 and its probe), and whether it was given any target",
    },
    StatusOwner {
        kind: Kind::AccessGrant,
        parts: &[
            "url",
            "code",
            "ca",
            "expirationTime",
            "status",
            "message",
            "Ready",
        ],
        files: &["site/grant_status.rs"],
        task: "the site controller (the move to Expired: the leader's grant-expiry job, by the \
               same rule)",
        inputs: "the grant's spec, the site's readiness, redemptions, the clock",
    },
    StatusOwner {
        kind: Kind::AccessGrant,
        parts: &["redemptions"],
        files: &["grants/redeem.rs"],
        task: "the grant server (one compare-and-swap per redemption)",
        inputs: "redemption requests",
    },
    StatusOwner {
        kind: Kind::AccessToken,
        parts: &["status", "message", "redeemed", "Redeemed", "Ready"],
        files: &["site/tokens.rs"],
        task: "the site controller",
        inputs: "the redemption's outcome at the issuing site's grant server",
    },
];

/// The owners of `kind`'s status.
pub fn owners_of(kind: Kind) -> impl Iterator<Item = &'static StatusOwner> {
    OWNERS.iter().filter(move |o| o.kind == kind)
}

/// Why the REST API refuses to write `kind`'s status, naming its owners.
pub fn refusal(kind: Kind) -> String {
    let owners: Vec<String> = owners_of(kind)
        .map(|o| format!("{} ({})", o.task, o.parts.join(", ")))
        .collect();
    if owners.is_empty() {
        return format!("a {kind} has no status to write");
    }
    format!(
        "the status of a {kind} is written by the control plane only: {}. Change the \
         resource's spec (or what it depends on) instead",
        owners.join("; ")
    )
}

#[cfg(test)]
mod tests {

    /// This crate's directory, as the test runner gives it (cargo and nextest
    /// set `CARGO_MANIFEST_DIR` when they run a test), else as it was at
    /// build time (a target dir shared between checkouts may hold a binary
    /// built in another one).
    fn manifest_dir() -> std::path::PathBuf {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
    }

    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    use super::*;

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("crates/cp/src is readable") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The code before an inline `#[cfg(test)] mod … {` (tests may build
    /// any status).
    fn non_test(text: &str) -> &str {
        let re = regex::Regex::new(r"#\[cfg\(test\)\]\s*mod \w+ \{").unwrap();
        re.find(text).map_or(text, |m| &text[..m.start()])
    }

    /// Every `const NAME: &str = "Value";` of the crate (condition types
    /// are often named by one).
    fn constants(files: &[PathBuf]) -> HashMap<String, String> {
        let re = regex::Regex::new(r#"const (\w+): &str = "([A-Za-z]+)";"#).unwrap();
        let mut out = HashMap::new();
        for f in files {
            let text = std::fs::read_to_string(f).unwrap();
            for c in re.captures_iter(&text) {
                out.insert(c[1].to_owned(), c[2].to_owned());
            }
        }
        out
    }

    /// The condition types `Condition::now(` is called with: a literal,
    /// or a constant resolved through `consts`.
    fn condition_literals(code: &str, consts: &HashMap<String, String>) -> Vec<String> {
        let re =
            regex::Regex::new(r#"Condition::now\(\s*(?:"([A-Za-z]+)"|(?:\w+::)*([A-Z][A-Z_]+)\b)"#)
                .unwrap();
        re.captures_iter(code)
            .filter_map(|c| match (c.get(1), c.get(2)) {
                (Some(l), _) => Some(l.as_str().to_owned()),
                (None, Some(k)) => Some(
                    consts
                        .get(k.as_str())
                        .cloned()
                        .unwrap_or_else(|| format!("<unresolved {}>", k.as_str())),
                ),
                _ => None,
            })
            .collect()
    }

    /// Kinds whose status details this code assigns, or writes whole.
    fn detail_writes(code: &str) -> Vec<String> {
        let re = regex::Regex::new(
            r"details = StatusDetails::(\w+)\(|let StatusDetails::(\w+)\([^)]*\) = &mut|set_status\(\s*Kind::(\w+)|merge\(\s*[\w&.]+,\s*Kind::(\w+)",
        )
        .unwrap();
        re.captures_iter(code)
            .filter_map(|c| {
                (1..=4)
                    .find_map(|i| c.get(i))
                    .map(|m| m.as_str().to_owned())
            })
            .collect()
    }

    #[test]
    fn only_owners_write_status() {
        let root = manifest_dir().join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        assert!(files.len() > 50, "found only {} source files", files.len());
        let consts = constants(&files);
        let mut wrong = Vec::new();
        let mut seen_writes = 0;
        for f in &files {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with("tests.rs") || rel.contains("/tests/") {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            let code = non_test(&text);
            let owned: Vec<&StatusOwner> = OWNERS
                .iter()
                .filter(|o| o.files.contains(&rel.as_str()))
                .collect();
            for t in condition_literals(code, &consts) {
                seen_writes += 1;
                if !owned.iter().any(|o| o.parts.contains(&t.as_str())) {
                    wrong.push(format!("{rel} writes condition {t} but owns no {t}"));
                }
            }
            for k in detail_writes(code) {
                seen_writes += 1;
                if !owned.iter().any(|o| o.kind.to_string() == k) {
                    wrong.push(format!("{rel} writes {k} status but owns no part of it"));
                }
            }
        }
        // The scan must see the writes it polices (a regex that matches
        // nothing would pass vacuously).
        assert!(seen_writes >= 30, "saw only {seen_writes} status writes");
        assert!(
            wrong.is_empty(),
            "status written outside its owner (see crates/cp/src/status/owners.rs):\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn every_owner_file_exists_and_writes_something() {
        let root = manifest_dir().join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let consts = constants(&files);
        for o in OWNERS {
            for f in o.files {
                let text = std::fs::read_to_string(root.join(f))
                    .unwrap_or_else(|e| panic!("{f} (owner of {:?}): {e}", o.kind));
                let code = non_test(&text);
                assert!(
                    !condition_literals(code, &consts).is_empty()
                        || !detail_writes(code).is_empty()
                        || code.contains("set_condition"),
                    "{f} is listed as an owner of {:?} status but writes none",
                    o.kind
                );
            }
        }
    }

    #[test]
    fn the_refusal_names_every_owner() {
        let m = refusal(Kind::Site);
        assert!(m.contains("the site controller"), "{m}");
        assert!(m.contains("the router status task"), "{m}");
        assert!(m.contains("Running"), "{m}");
    }
}
