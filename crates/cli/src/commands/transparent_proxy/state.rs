//! What `iptables-save` shows of the tables the transparent proxy writes
//! (nat, and raw for the DNS conntrack zones): the transparent proxy's
//! rules and chains (an earlier install), and whether anything else is
//! there. Pure parsing; uninstall and re-install build their
//! `iptables-restore` input from it.
//!
//! A rule is ours when its comment starts with [`TAG`] or it jumps to a
//! `MESHLINK_` chain; a chain is ours when its name starts with
//! `MESHLINK_`. Nothing else is ever removed.

use super::rules::{CHAIN_PREFIX, TAG};

/// A netfilter table the transparent proxy writes rules into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Table {
    /// The REDIRECTs to the capture ports.
    Nat,
    /// The DNS conntrack zones (`CT --zone`).
    Raw,
}

impl Table {
    /// Both, in the order install writes them.
    pub(crate) const ALL: [Table; 2] = [Table::Nat, Table::Raw];

    /// `nat` or `raw`, as `iptables-save` and `nft` name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Table::Nat => "nat",
            Table::Raw => "raw",
        }
    }

    /// The table's built-in chains.
    fn builtin(self) -> &'static [&'static str] {
        match self {
            Table::Nat => &["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
            Table::Raw => &["PREROUTING", "OUTPUT"],
        }
    }

    /// Added to the comments of the jumps from the built-in chains when
    /// the install created this table (nft backend), so that uninstall
    /// deletes it again: `install created the nat table`.
    pub(crate) fn created_mark(self) -> String {
        format!("install created the {} table", self.name())
    }
}

/// One table as one family's `iptables-save` shows it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TableState {
    /// Which table.
    pub(crate) table: Table,
    /// `iptables-save` has a section for the table.
    pub(crate) table_exists: bool,
    /// Our rules in chains that are not ours (the jumps from the built-in
    /// chains), as saved without the leading `-A `.
    pub(crate) jumps: Vec<String>,
    /// Our chains (`MESHLINK_*`).
    pub(crate) chains: Vec<String>,
    /// A jump says the install created the table.
    pub(crate) created_table: bool,
    /// The table holds something that is not ours: a rule, a user chain,
    /// or a built-in chain whose policy is not ACCEPT.
    pub(crate) foreign: bool,
}

impl TableState {
    /// A table that `iptables-save` does not show.
    pub(crate) fn absent(table: Table) -> TableState {
        TableState {
            table,
            table_exists: false,
            jumps: Vec::new(),
            chains: Vec::new(),
            created_table: false,
            foreign: false,
        }
    }

    /// Parses `table` out of the output of `iptables-save` (all tables, or
    /// `-t TABLE`).
    pub(crate) fn parse(save: &str, table: Table) -> TableState {
        let mut state = TableState::absent(table);
        let created_mark = table.created_mark();
        let mut inside = false;
        for line in save.lines().map(str::trim_end) {
            if let Some(name) = line.strip_prefix('*') {
                inside = name == table.name();
                state.table_exists |= inside;
                continue;
            }
            if !inside || line.is_empty() || line.starts_with('#') || line == "COMMIT" {
                continue;
            }
            if let Some(decl) = line.strip_prefix(':') {
                let mut words = decl.split_whitespace();
                let (name, policy) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                if name.starts_with(CHAIN_PREFIX) {
                    state.chains.push(name.to_owned());
                } else if !table.builtin().contains(&name) || policy != "ACCEPT" {
                    state.foreign = true;
                }
            } else if let Some(rule) = line.strip_prefix("-A ") {
                let chain = rule.split_whitespace().next().unwrap_or("");
                if chain.starts_with(CHAIN_PREFIX) {
                    continue;
                }
                let jumps_to_ours = rule
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| matches!(w[0], "-j" | "-g") && w[1].starts_with(CHAIN_PREFIX));
                if jumps_to_ours || rule.contains(TAG) {
                    state.created_table |= rule.contains(&created_mark);
                    state.jumps.push(rule.to_owned());
                } else {
                    state.foreign = true;
                }
            } else {
                state.foreign = true;
            }
        }
        state
    }

    /// Something of an install is there.
    pub(crate) fn installed(&self) -> bool {
        !self.jumps.is_empty() || !self.chains.is_empty()
    }

    /// The table exists and holds nothing: no rules, no user chains.
    pub(crate) fn empty_table(&self) -> bool {
        self.table_exists && !self.installed() && !self.foreign
    }

    /// The `iptables-restore` section (`*TABLE` to `COMMIT`) that removes
    /// everything of ours: the jumps, then our chains (flushed, then
    /// deleted). `None` when there is nothing to remove.
    pub(crate) fn removal_section(&self) -> Option<String> {
        if !self.installed() {
            return None;
        }
        let mut out = vec![format!("*{}", self.table.name())];
        out.extend(self.jumps.iter().map(|j| format!("-D {j}")));
        out.extend(self.chains.iter().map(|c| format!("-F {c}")));
        out.extend(self.chains.iter().map(|c| format!("-X {c}")));
        out.push("COMMIT".into());
        Some(out.join("\n") + "\n")
    }
}

/// Every table of ours as one family's `iptables-save` shows it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct State {
    /// The nat table.
    pub(crate) nat: TableState,
    /// The raw table.
    pub(crate) raw: TableState,
}

impl Default for State {
    fn default() -> State {
        State {
            nat: TableState::absent(Table::Nat),
            raw: TableState::absent(Table::Raw),
        }
    }
}

impl State {
    /// Parses the output of `iptables-save` (all tables).
    pub(crate) fn parse(save: &str) -> State {
        State {
            nat: TableState::parse(save, Table::Nat),
            raw: TableState::parse(save, Table::Raw),
        }
    }

    /// The state of `table`.
    pub(crate) fn table(&self, table: Table) -> &TableState {
        match table {
            Table::Nat => &self.nat,
            Table::Raw => &self.raw,
        }
    }

    /// Something of an install is there, in any table.
    pub(crate) fn installed(&self) -> bool {
        self.nat.installed() || self.raw.installed()
    }

    /// The `iptables-restore --noflush` input that removes everything of
    /// ours from every table, in one run. `None` when there is nothing to
    /// remove.
    pub(crate) fn removal_input(&self) -> Option<String> {
        let sections: Vec<String> = Table::ALL
            .iter()
            .filter_map(|t| self.table(*t).removal_section())
            .collect();
        (!sections.is_empty()).then(|| sections.concat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAVED: &str = r#"# Generated by iptables-save v1.8.9 (nf_tables) on Sun Dec  6 02:02:05 2026
*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 7 -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:MESHLINK_OUTBOUND_REDIRECT - [0:0]
:MESHLINK_OUTPUT - [0:0]
-A PREROUTING -p tcp -m comment --comment "meshlink/transparent-proxy: inbound; install created the nat table" -j MESHLINK_INBOUND
-A OUTPUT -m comment --comment "meshlink/transparent-proxy: outbound" -j MESHLINK_OUTPUT
-A MESHLINK_OUTPUT -p tcp -m comment --comment "meshlink/transparent-proxy: to the outbound capture port" -j MESHLINK_OUTBOUND_REDIRECT
-A MESHLINK_OUTBOUND_REDIRECT -p tcp -m comment --comment "meshlink/transparent-proxy: outbound capture port" -j REDIRECT --to-ports 15001
COMMIT
# Completed on Sun Dec  6 02:02:05 2026
"#;

    #[test]
    fn finds_our_jumps_and_chains_and_nothing_else() {
        let s = State::parse(SAVED).nat;
        assert!(s.table_exists && s.created_table && !s.foreign);
        assert_eq!(s.chains, ["MESHLINK_OUTBOUND_REDIRECT", "MESHLINK_OUTPUT"]);
        assert_eq!(s.jumps.len(), 2);
        assert!(s.jumps[1].starts_with("OUTPUT -m comment"));
        let removal = s.removal_section().unwrap();
        assert_eq!(
            removal.lines().collect::<Vec<_>>(),
            [
                "*nat",
                "-D PREROUTING -p tcp -m comment --comment \"meshlink/transparent-proxy: inbound; install created the nat table\" -j MESHLINK_INBOUND",
                "-D OUTPUT -m comment --comment \"meshlink/transparent-proxy: outbound\" -j MESHLINK_OUTPUT",
                "-F MESHLINK_OUTBOUND_REDIRECT",
                "-F MESHLINK_OUTPUT",
                "-X MESHLINK_OUTBOUND_REDIRECT",
                "-X MESHLINK_OUTPUT",
                "COMMIT",
            ]
        );
    }

    #[test]
    fn user_rules_and_chains_are_foreign() {
        let user = SAVED.replace(
            ":MESHLINK_OUTPUT - [0:0]\n",
            ":MESHLINK_OUTPUT - [0:0]\n:USER - [0:0]\n-A OUTPUT -p tcp --dport 9 -j DNAT --to-destination 10.0.0.1:80\n",
        );
        let s = State::parse(&user).nat;
        assert!(s.foreign);
        assert_eq!(s.jumps.len(), 2, "the user's DNAT is not ours");
        let dropped = SAVED.replace(":OUTPUT ACCEPT", ":OUTPUT DROP");
        assert!(State::parse(&dropped).nat.foreign);
    }

    #[test]
    fn nothing_installed_means_nothing_to_remove() {
        assert_eq!(State::parse(""), State::default());
        let empty = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
        let s = TableState::parse(empty, Table::Nat);
        assert!(s.table_exists && s.empty_table() && !s.installed());
        assert_eq!(s.removal_section(), None);
        assert_eq!(State::parse(empty).removal_input(), None);
        // A filter rule mentioning our tag is not in the nat table.
        let filter = "*filter\n-A INPUT -m comment --comment \"meshlink/transparent-proxy\" -j ACCEPT\nCOMMIT\n";
        assert!(!State::parse(filter).installed());
    }

    const RAW: &str = r#"*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:MESHLINK_DNS_ZONE_OUTPUT - [0:0]
:MESHLINK_DNS_ZONE_PREROUTING - [0:0]
-A PREROUTING -p udp -m comment --comment "meshlink/transparent-proxy: DNS conntrack zones; install created the raw table" -j MESHLINK_DNS_ZONE_PREROUTING
-A OUTPUT -m comment --comment "meshlink/transparent-proxy: DNS conntrack zones; install created the raw table" -j MESHLINK_DNS_ZONE_OUTPUT
-A MESHLINK_DNS_ZONE_OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 5678 -m comment --comment "meshlink/transparent-proxy: sidecar DNS queries in zone 1" -j CT --zone 1
-A MESHLINK_DNS_ZONE_PREROUTING -p udp -m udp --sport 53 -m comment --comment "meshlink/transparent-proxy: DNS answers in zone 1" -j CT --zone 1
COMMIT
"#;

    #[test]
    fn both_tables_are_parsed_each_on_its_own() {
        let all = format!("{SAVED}{RAW}");
        let s = State::parse(&all);
        assert_eq!(s.nat, State::parse(SAVED).nat, "the raw section is not nat");
        let raw = &s.raw;
        assert_eq!(raw.table, Table::Raw);
        assert!(raw.table_exists && raw.created_table && !raw.foreign);
        assert_eq!(
            raw.chains,
            ["MESHLINK_DNS_ZONE_OUTPUT", "MESHLINK_DNS_ZONE_PREROUTING"]
        );
        assert_eq!(raw.jumps.len(), 2);
        assert!(
            raw.jumps[0].starts_with("PREROUTING -p udp"),
            "{:?}",
            raw.jumps
        );
        // The nat table's mark does not say the raw table was created.
        assert!(
            !State::parse(&all.replace("; install created the raw table", ""))
                .raw
                .created_table
        );
        // One removal input, nat then raw.
        let removal = s.removal_input().unwrap();
        assert!(removal.starts_with("*nat\n"), "{removal}");
        let raw_part = &removal[removal.find("*raw\n").expect("a raw section")..];
        assert_eq!(
            raw_part.lines().collect::<Vec<_>>(),
            [
                "*raw",
                "-D PREROUTING -p udp -m comment --comment \"meshlink/transparent-proxy: DNS conntrack zones; install created the raw table\" -j MESHLINK_DNS_ZONE_PREROUTING",
                "-D OUTPUT -m comment --comment \"meshlink/transparent-proxy: DNS conntrack zones; install created the raw table\" -j MESHLINK_DNS_ZONE_OUTPUT",
                "-F MESHLINK_DNS_ZONE_OUTPUT",
                "-F MESHLINK_DNS_ZONE_PREROUTING",
                "-X MESHLINK_DNS_ZONE_OUTPUT",
                "-X MESHLINK_DNS_ZONE_PREROUTING",
                "COMMIT",
            ]
        );
        // Only raw installed: the removal touches only raw.
        let only_raw = State::parse(RAW);
        assert!(!only_raw.nat.table_exists && only_raw.installed());
        assert!(only_raw.removal_input().unwrap().starts_with("*raw\n"));
    }

    #[test]
    fn raw_built_ins_and_foreign_rules() {
        // An empty raw table has PREROUTING and OUTPUT only.
        let empty = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n";
        let s = State::parse(empty).raw;
        assert!(s.empty_table() && !s.foreign);
        // nat's INPUT is not a raw built-in chain.
        assert!(
            State::parse("*raw\n:INPUT ACCEPT [0:0]\nCOMMIT\n")
                .raw
                .foreign
        );
        // The user's NOTRACK rule is foreign and kept.
        let user = RAW.replace(
            "COMMIT",
            "-A OUTPUT -p udp -m udp --dport 123 -j CT --notrack\nCOMMIT",
        );
        let s = State::parse(&user).raw;
        assert!(s.foreign && s.jumps.len() == 2);
        assert!(!s.removal_section().unwrap().contains("--dport 123"));
    }
}
