//! The transparent proxy's NAT rules, as `iptables-restore` input: a pure
//! function of the [`Config`] and the IP family (and, for install, of what
//! an earlier install left, so that the new input replaces it).
//!
//! Layout (Kuma's and Istio's, with our chain names; every rule carries a
//! comment starting with [`TAG`] so uninstall finds it):
//! - `PREROUTING -p tcp -j MESHLINK_INBOUND`: excluded inbound ports
//!   return, the rest jumps to `MESHLINK_INBOUND_REDIRECT`, which
//!   REDIRECTs to the inbound capture port.
//! - `OUTPUT -j MESHLINK_OUTPUT`: the sidecar's uid (and gid) return; with
//!   DNS, UDP and TCP port 53 jump to `MESHLINK_DNS_REDIRECT` (before the
//!   loopback rules, so a local stub resolver is captured too); loopback
//!   destinations and anything leaving through `lo` return; excluded
//!   destinations and ports return; the remaining TCP jumps to
//!   `MESHLINK_OUTBOUND_REDIRECT`, which REDIRECTs to the outbound port.
//!
//! With DNS (unless `--skip-dns-conntrack-zone-split`), the raw table
//! splits UDP DNS into conntrack zones, as Kuma and Istio do:
//! `OUTPUT -j MESHLINK_DNS_ZONE_OUTPUT` puts the sidecar's queries to
//! port 53 (its uid, or gid) in zone 1, the sidecar's answers from its DNS
//! port in zone 2, every other query to port 53 (the app's) in zone 2, and
//! the port-unreachable errors sent from the loopback address through `lo`
//! (a redirected query's refusal while the sidecar's DNS is not up) in
//! zone 2, so that they are translated back like an answer; `PREROUTING -p udp -j MESHLINK_DNS_ZONE_PREROUTING` puts the
//! answers from port 53 in zone 1. The first `CT` target that matches a
//! packet decides (`CT` on a packet that has a conntrack template already
//! does nothing). Without the split, the sidecar's query to upstream:53
//! from port P leaves a conntrack entry that is not NATed; the app's next
//! query from the same port P to the same server matches it, skips the nat
//! table, and bypasses the sidecar.
//!
//! Traffic leaving through `lo` to a non-loopback address (the app calling
//! its own address) is not redirected, and neither is any traffic of the
//! sidecar's uid. Istio and Kuma instead send the sidecar's own
//! connections to its own address back into inbound, which relies on the
//! sidecar marking its inbound forwarding with source 127.0.0.6; meshlink
//! -proxy does not, so that rule would loop its forwarding into itself.
//!
//! Never runs anything: `apply` feeds the text to the tools.

use super::options::Config;
use super::state::{State, Table, TableState};

/// The start of every rule comment; uninstall removes what carries it.
pub(crate) const TAG: &str = "meshlink/transparent-proxy";
/// The prefix of every chain the transparent proxy owns.
pub(crate) const CHAIN_PREFIX: &str = "MESHLINK_";

const INBOUND: &str = "MESHLINK_INBOUND";
const INBOUND_REDIRECT: &str = "MESHLINK_INBOUND_REDIRECT";
const OUTPUT: &str = "MESHLINK_OUTPUT";
const OUTBOUND_REDIRECT: &str = "MESHLINK_OUTBOUND_REDIRECT";
const DNS_REDIRECT: &str = "MESHLINK_DNS_REDIRECT";
const DNS_ZONE_OUTPUT: &str = "MESHLINK_DNS_ZONE_OUTPUT";
const DNS_ZONE_PREROUTING: &str = "MESHLINK_DNS_ZONE_PREROUTING";

/// An IP family: which tools and which loopback network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// IPv4: iptables.
    V4,
    /// IPv6: ip6tables.
    V6,
}

impl Family {
    /// `IPv4` or `IPv6`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    /// The tool family: `iptables` or `ip6tables`.
    pub(crate) fn tool(self) -> &'static str {
        match self {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        }
    }

    /// The family as `nft` names it: `ip` or `ip6`.
    pub(crate) fn nft(self) -> &'static str {
        match self {
            Family::V4 => "ip",
            Family::V6 => "ip6",
        }
    }

    /// The matches of a port-unreachable error sent from the loopback
    /// address (where REDIRECT sends locally generated packets) through
    /// `lo`.
    fn refused_from_loopback(self) -> &'static str {
        match self {
            Family::V4 => "-s 127.0.0.1/32 -o lo -p icmp -m icmp --icmp-type 3/3",
            Family::V6 => "-s ::1/128 -o lo -p ipv6-icmp -m icmp6 --icmpv6-type 1/4",
        }
    }

    fn loopback(self) -> &'static str {
        match self {
            Family::V4 => "127.0.0.0/8",
            Family::V6 => "::1/128",
        }
    }
}

/// One rule: `-A CHAIN MATCHES -m comment --comment "TAG: WHY" -j TARGET`.
/// `why` has no quotes or apostrophes: iptables-save escapes them, and the
/// saved jumps are fed back to iptables-restore to delete them.
fn rule(chain: &str, matches: &str, why: &str, target: &str) -> String {
    let matches = if matches.is_empty() {
        String::new()
    } else {
        format!("{matches} ")
    };
    format!("-A {chain} {matches}-m comment --comment \"{TAG}: {why}\" -j {target}")
}

/// `; install created the TABLE table` when `created_table`, for the
/// comments of the jumps from the built-in chains (see
/// [`Table::created_mark`]).
fn created_suffix(table: Table, created_table: bool) -> String {
    if created_table {
        format!("; {}", table.created_mark())
    } else {
        String::new()
    }
}

/// The chains and rules install writes into `table` for `family` (none in
/// raw without the DNS zone split). `created_table` marks the jumps from
/// the built-in chains.
pub(crate) fn rules(
    config: &Config,
    family: Family,
    table: Table,
    created_table: bool,
) -> (Vec<&'static str>, Vec<String>) {
    match table {
        Table::Nat => nat_rules(config, family, created_table),
        Table::Raw => raw_rules(config, family, created_table),
    }
}

/// The DNS conntrack zones (see the module comment): the same for both
/// families but for the ICMP refusal rule.
fn raw_rules(
    config: &Config,
    family: Family,
    created_table: bool,
) -> (Vec<&'static str>, Vec<String>) {
    let Some(dns_port) = config.zone_split_dns_port() else {
        return (Vec::new(), Vec::new());
    };
    let created = created_suffix(Table::Raw, created_table);
    let mut r = vec![
        rule(
            "PREROUTING",
            "-p udp",
            &format!("DNS conntrack zones{created}"),
            DNS_ZONE_PREROUTING,
        ),
        rule(
            "OUTPUT",
            "",
            &format!("DNS conntrack zones{created}"),
            DNS_ZONE_OUTPUT,
        ),
    ];
    // The refusal (port unreachable) of a query redirected to a DNS port
    // nobody listens on (the sidecar not up yet) is sent from the loopback
    // address through lo; in zone 2 it finds the query's entry and is
    // translated back, so the app's resolver fails at once instead of
    // waiting for its timeout.
    r.push(rule(
        DNS_ZONE_OUTPUT,
        family.refused_from_loopback(),
        "DNS port refusals in zone 2",
        "CT --zone 2",
    ));
    let mut owners = vec![format!("--uid-owner {}", config.uid)];
    owners.extend(config.gid.map(|g| format!("--gid-owner {g}")));
    for owner in &owners {
        r.push(rule(
            DNS_ZONE_OUTPUT,
            &format!("-p udp -m udp --dport 53 -m owner {owner}"),
            "sidecar DNS queries in zone 1",
            "CT --zone 1",
        ));
    }
    for owner in &owners {
        r.push(rule(
            DNS_ZONE_OUTPUT,
            &format!("-p udp -m udp --sport {dns_port} -m owner {owner}"),
            "sidecar DNS answers in zone 2",
            "CT --zone 2",
        ));
    }
    r.push(rule(
        DNS_ZONE_OUTPUT,
        "-p udp -m udp --dport 53",
        "app DNS queries in zone 2",
        "CT --zone 2",
    ));
    r.push(rule(
        DNS_ZONE_PREROUTING,
        "-p udp -m udp --sport 53",
        "DNS answers in zone 1",
        "CT --zone 1",
    ));
    (vec![DNS_ZONE_OUTPUT, DNS_ZONE_PREROUTING], r)
}

/// The nat table's chains and rules (see the module comment).
fn nat_rules(
    config: &Config,
    family: Family,
    created_table: bool,
) -> (Vec<&'static str>, Vec<String>) {
    let mut chains = vec![INBOUND, INBOUND_REDIRECT, OUTPUT, OUTBOUND_REDIRECT];
    let created = created_suffix(Table::Nat, created_table);
    let mut r = vec![
        rule(
            "PREROUTING",
            "-p tcp",
            &format!("inbound{created}"),
            INBOUND,
        ),
        rule("OUTPUT", "", &format!("outbound{created}"), OUTPUT),
    ];
    for p in &config.exclude_inbound_ports {
        r.push(rule(
            INBOUND,
            &format!("-p tcp -m tcp --dport {p}"),
            "excluded inbound port",
            "RETURN",
        ));
    }
    r.push(rule(
        INBOUND,
        "-p tcp",
        "to the inbound capture port",
        INBOUND_REDIRECT,
    ));
    let inbound_port = config.inbound_port;
    r.push(rule(
        INBOUND_REDIRECT,
        "-p tcp",
        "inbound capture port",
        &format!("REDIRECT --to-ports {inbound_port}"),
    ));

    r.push(rule(
        OUTPUT,
        &format!("-m owner --uid-owner {}", config.uid),
        "sidecar traffic (uid)",
        "RETURN",
    ));
    if let Some(gid) = config.gid {
        r.push(rule(
            OUTPUT,
            &format!("-m owner --gid-owner {gid}"),
            "sidecar traffic (gid)",
            "RETURN",
        ));
    }
    if config.dns_port.is_some() {
        chains.push(DNS_REDIRECT);
        r.push(rule(
            OUTPUT,
            "-p udp -m udp --dport 53",
            "DNS",
            DNS_REDIRECT,
        ));
        r.push(rule(
            OUTPUT,
            "-p tcp -m tcp --dport 53",
            "DNS",
            DNS_REDIRECT,
        ));
    }
    r.push(rule(
        OUTPUT,
        &format!("-d {}", family.loopback()),
        "loopback",
        "RETURN",
    ));
    r.push(rule(OUTPUT, "-o lo", "to own addresses via lo", "RETURN"));
    for cidr in config
        .exclude_outbound_ips
        .iter()
        .filter(|c| c.family() == family)
    {
        r.push(rule(
            OUTPUT,
            &format!("-d {cidr}"),
            "excluded destination",
            "RETURN",
        ));
    }
    for p in &config.exclude_outbound_ports {
        r.push(rule(
            OUTPUT,
            &format!("-p tcp -m tcp --dport {p}"),
            "excluded outbound port",
            "RETURN",
        ));
    }
    r.push(rule(
        OUTPUT,
        "-p tcp",
        "to the outbound capture port",
        OUTBOUND_REDIRECT,
    ));
    let outbound_port = config.outbound_port;
    r.push(rule(
        OUTBOUND_REDIRECT,
        "-p tcp",
        "outbound capture port",
        &format!("REDIRECT --to-ports {outbound_port}"),
    ));
    if let Some(dns) = config.dns_port {
        for proto in ["udp", "tcp"] {
            r.push(rule(
                DNS_REDIRECT,
                &format!("-p {proto}"),
                "DNS port",
                &format!("REDIRECT --to-ports {dns}"),
            ));
        }
    }
    (chains, r)
}

/// The `iptables-restore --noflush` input of install: for each table,
/// removes what an earlier install left (`prior`), then writes the rules;
/// one `*TABLE` section per table that has either. A table is marked as
/// created by install when the earlier install had created it, or when it
/// does not exist and the tools drive nf_tables (`nft_backend`), where
/// writing a rule creates it.
pub(crate) fn install_input(
    config: &Config,
    family: Family,
    prior: &State,
    nft_backend: bool,
) -> String {
    Table::ALL
        .iter()
        .filter_map(|t| {
            let prior = prior.table(*t);
            let created = prior.created_table || (!prior.table_exists && nft_backend);
            let (chains, rules) = rules(config, family, *t, created);
            table_section(prior, &chains, rules)
        })
        .collect()
}

/// One table's section of the install input; `None` when the table gets
/// no rules and has none of an earlier install. Declaring a chain that
/// exists (`:CHAIN - [0:0]`) flushes it.
fn table_section(prior: &TableState, chains: &[&str], rules: Vec<String>) -> Option<String> {
    if chains.is_empty() && !prior.installed() {
        return None;
    }
    let mut out = vec![format!("*{}", prior.table.name())];
    out.extend(prior.jumps.iter().map(|j| format!("-D {j}")));
    // Flush every earlier chain first: a stale one can only be deleted
    // once no rule of ours jumps to it any more.
    out.extend(prior.chains.iter().map(|c| format!("-F {c}")));
    let stale = prior
        .chains
        .iter()
        .filter(|c| !chains.contains(&c.as_str()));
    out.extend(stale.map(|c| format!("-X {c}")));
    out.extend(chains.iter().map(|c| format!(":{c} - [0:0]")));
    out.extend(rules);
    out.push("COMMIT".into());
    Some(out.join("\n") + "\n")
}

/// Whether install writes any rule into `table`.
pub(crate) fn writes(config: &Config, table: Table) -> bool {
    match table {
        Table::Nat => true,
        Table::Raw => config.zone_split_dns_port().is_some(),
    }
}

/// What `--dry-run` prints for `family`: the rules install writes into a
/// namespace without an earlier install (nat, then raw).
pub(crate) fn dry_run_text(config: &Config, family: Family) -> String {
    let input = install_input(config, family, &State::default(), false);
    format!(
        "# {} rules ({}-restore --noflush)\n{input}",
        family.name(),
        family.tool()
    )
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
