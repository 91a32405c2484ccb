//! `meshlink install transparent-proxy` and `meshlink uninstall
//! transparent-proxy` (issue 37): NAT rules in the current network
//! namespace that redirect the app's TCP traffic (and, optionally, its
//! DNS) to the sidecar's capture ports, like `kumactl install
//! transparent-proxy`; with DNS, raw-table rules that split DNS into
//! conntrack zones so that the sidecar's upstream queries cannot let the
//! app's queries bypass it.
//!
//! Install reads each family's rules (`iptables-save`), builds one
//! `iptables-restore --noflush` input that removes an earlier install and
//! writes the new rules, checks every family's input (`--test`), then
//! applies them. Uninstall removes exactly what install wrote, and the nat
//! and raw tables too when install created them (nft backend), so that
//! `iptables-save` shows what it showed before install. Both refuse to
//! start without CAP_NET_ADMIN. The capture listeners and the DNS server
//! the rules send traffic to are meshlink-proxy's (`capture.rs`, `dns/`).
//!
//! Owns the `MESHLINK_` chains of the nat and raw tables and the rules
//! whose comment starts with `meshlink/transparent-proxy`; never touches
//! anything else.

mod apply;
mod options;
mod privilege;
mod rules;
mod state;

use std::path::Path;

pub(crate) use options::InstallArgs;

use apply::Tools;
use options::Config;
use rules::Family;
use state::{State, Table};

use crate::failure::Failure;

/// Why install or uninstall failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A flag's value is unusable (exit code 2).
    #[error("{0}")]
    BadFlag(String),
    /// The process lacks CAP_NET_ADMIN.
    #[error(
        "meshlink {command} transparent-proxy needs CAP_NET_ADMIN in this network namespace (run as root, or grant the capability)"
    )]
    NoPrivilege {
        /// `install` or `uninstall`.
        command: &'static str,
    },
    /// A netfilter tool is not installed.
    #[error(
        "{tool} not found (looked in PATH, /usr/sbin and /sbin); install the Debian package iptables (apt-get install iptables)"
    )]
    MissingTool {
        /// The tool's name.
        tool: String,
    },
    /// A tool refused its input or failed.
    #[error("{tool} refused the change: {stderr}")]
    Refused {
        /// The tool's path.
        tool: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Running a tool or reading a file failed.
    #[error("cannot {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::BadFlag(m) => Failure::BadInput(m),
            e => Failure::Runtime(e.to_string()),
        }
    }
}

/// Whether the kernel has IPv6 in this namespace; without it there are no
/// IPv6 rules to write or remove.
fn ipv6_available() -> bool {
    Path::new("/proc/net/if_inet6").exists()
}

/// The families to act on, skipping IPv6 (with a note) when absent.
fn usable(families: &[Family]) -> Vec<Family> {
    families
        .iter()
        .copied()
        .filter(|f| {
            let ok = *f == Family::V4 || ipv6_available();
            if !ok {
                eprintln!("note: IPv6 is disabled in this kernel; no IPv6 rules");
            }
            ok
        })
        .collect()
}

/// One family's checked `iptables-restore` input, ready to apply.
struct Plan {
    family: Family,
    tools: Tools,
    input: String,
    /// What the earlier install left.
    prior: State,
}

/// `meshlink install transparent-proxy`.
pub(crate) fn install(args: &InstallArgs) -> Result<(), Failure> {
    let config = Config::from_args(args, Path::new("/etc/passwd"))?;
    if args.dry_run {
        for family in &config.families {
            println!("{}", rules::dry_run_text(&config, *family));
        }
        println!("# dry run: nothing was changed");
        return Ok(());
    }
    privilege::require_net_admin("install")?;
    let mut plans = Vec::new();
    for family in usable(&config.families) {
        let tools = Tools::find(family)?;
        let prior = State::parse(&tools.save()?);
        let input = rules::install_input(&config, family, &prior, tools.nft_backend);
        tools.restore(&input, true)?;
        plans.push(Plan {
            family,
            tools,
            input,
            prior,
        });
    }
    for (i, plan) in plans.iter().enumerate() {
        if let Err(e) = plan.tools.restore(&plan.input, false) {
            for done in &plans[..i] {
                if let Err(undo) = remove(&done.tools) {
                    eprintln!(
                        "error: removing the {} rules again failed: {undo}",
                        done.family.name()
                    );
                }
            }
            let undone = if i > 0 {
                "; the rules of the other family were removed again"
            } else {
                ""
            };
            return Err(Failure::Runtime(format!(
                "{} rules: {e}{undone}",
                plan.family.name()
            )));
        }
    }
    // A table an earlier install created and this one writes nothing into
    // (the raw table, once the DNS zone split is left out) goes again.
    for plan in &plans {
        for table in Table::ALL {
            if plan.prior.table(table).created_table && !rules::writes(&config, table) {
                delete_created_table(&plan.tools, table)
                    .map_err(|e| Failure::Runtime(format!("{} rules: {e}", plan.family.name())))?;
            }
        }
    }
    let names: Vec<&str> = plans.iter().map(|p| p.family.name()).collect();
    let replaced = if plans.iter().any(|p| p.prior.installed()) {
        ", replacing the earlier install"
    } else {
        ""
    };
    println!(
        "installed the transparent proxy in this network namespace ({}){replaced}",
        names.join(", ")
    );
    println!("{}", summary(&config));
    if !config
        .exclude_inbound_ports
        .iter()
        .any(|r| r.first <= 22 && 22 <= r.last)
    {
        eprintln!(
            "note: inbound TCP port 22 (SSH) is redirected too; add it to --exclude-inbound-ports to reach sshd without the sidecar"
        );
    }
    Ok(())
}

/// `items` comma-separated.
fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// What the installed rules do, in two lines.
fn summary(c: &Config) -> String {
    let mut redirected = format!(
        "  redirected: outbound TCP -> port {}, inbound TCP -> port {}",
        c.outbound_port, c.inbound_port
    );
    if let Some(dns) = c.dns_port {
        redirected.push_str(&format!(", DNS (UDP and TCP port 53) -> port {dns}"));
        if c.dns_zone_split {
            redirected.push_str(" (conntrack zones split for UDP DNS)");
        }
    }
    let mut kept = vec![format!("traffic of uid {}", c.uid)];
    kept.extend(c.gid.map(|g| format!("of gid {g}")));
    kept.push("to loopback and this host's addresses".into());
    if !c.exclude_inbound_ports.is_empty() {
        kept.push(format!("inbound ports {}", list(&c.exclude_inbound_ports)));
    }
    if !c.exclude_outbound_ports.is_empty() {
        kept.push(format!(
            "outbound ports {}",
            list(&c.exclude_outbound_ports)
        ));
    }
    if !c.exclude_outbound_ips.is_empty() {
        kept.push(format!("destinations {}", list(&c.exclude_outbound_ips)));
    }
    format!("{redirected}\n  not redirected: {}", kept.join(", "))
}

/// What [`remove`] took away in one family.
struct Removed {
    jumps: usize,
    chains: usize,
    /// The tables install had created, deleted again.
    tables_deleted: Vec<Table>,
}

/// Deletes `table` when it is empty (install created it); whether it did.
fn delete_created_table(tools: &Tools, table: Table) -> Result<bool, Error> {
    let now = State::parse(&tools.save()?);
    if !now.table(table).empty_table() {
        return Ok(false);
    }
    let deleted = tools.delete_table(table)?;
    if !deleted {
        eprintln!(
            "note: the empty {} table that install created is left (nft not found; install the Debian package nftables to remove it)",
            table.name()
        );
    }
    Ok(deleted)
}

/// Removes everything of ours in one family, and each table that install
/// created and is left empty. `None` when nothing was there.
fn remove(tools: &Tools) -> Result<Option<Removed>, Error> {
    let prior = State::parse(&tools.save()?);
    let Some(input) = prior.removal_input() else {
        return Ok(None);
    };
    tools.restore(&input, false)?;
    let mut tables_deleted = Vec::new();
    for table in Table::ALL {
        if prior.table(table).created_table && delete_created_table(tools, table)? {
            tables_deleted.push(table);
        }
    }
    Ok(Some(Removed {
        jumps: prior.nat.jumps.len() + prior.raw.jumps.len(),
        chains: prior.nat.chains.len() + prior.raw.chains.len(),
        tables_deleted,
    }))
}

/// `meshlink uninstall transparent-proxy`.
pub(crate) fn uninstall() -> Result<(), Failure> {
    privilege::require_net_admin("uninstall")?;
    let mut done = Vec::new();
    for family in usable(&[Family::V4, Family::V6]) {
        let tools = Tools::find(family)?;
        if let Some(r) =
            remove(&tools).map_err(|e| Failure::Runtime(format!("{} rules: {e}", family.name())))?
        {
            let table = match r.tables_deleted[..] {
                [] => String::new(),
                [t] => format!(", and the {} table install had created", t.name()),
                _ => {
                    let names: Vec<&str> = r.tables_deleted.iter().map(|t| t.name()).collect();
                    format!(
                        ", and the {} tables install had created",
                        names.join(" and ")
                    )
                }
            };
            done.push(format!(
                "{}: {} jumps, {} chains{table}",
                family.name(),
                r.jumps,
                r.chains
            ));
        }
    }
    if done.is_empty() {
        println!(
            "nothing to uninstall: no meshlink transparent-proxy rules in this network namespace"
        );
    } else {
        println!(
            "removed the transparent proxy's rules ({})",
            done.join("; ")
        );
    }
    Ok(())
}
