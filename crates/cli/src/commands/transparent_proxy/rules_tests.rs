//! Unit tests of the rule generator: the whole default IPv4 input, then the
//! rules each flag adds, per family.

use super::*;
use crate::commands::transparent_proxy::options::{Config, parse_cidr, parse_port_range};

fn default_config() -> Config {
    Config {
        outbound_port: 15001,
        inbound_port: 15006,
        dns_port: None,
        dns_zone_split: false,
        uid: 5678,
        gid: None,
        exclude_inbound_ports: vec![],
        exclude_outbound_ports: vec![],
        exclude_outbound_ips: vec![],
        families: vec![Family::V4, Family::V6],
    }
}

fn text(config: &Config, family: Family) -> String {
    install_input(config, family, &State::default(), false)
}

const DEFAULT_V4: &str = r#"*nat
:MESHLINK_INBOUND - [0:0]
:MESHLINK_INBOUND_REDIRECT - [0:0]
:MESHLINK_OUTPUT - [0:0]
:MESHLINK_OUTBOUND_REDIRECT - [0:0]
-A PREROUTING -p tcp -m comment --comment "meshlink/transparent-proxy: inbound" -j MESHLINK_INBOUND
-A OUTPUT -m comment --comment "meshlink/transparent-proxy: outbound" -j MESHLINK_OUTPUT
-A MESHLINK_INBOUND -p tcp -m comment --comment "meshlink/transparent-proxy: to the inbound capture port" -j MESHLINK_INBOUND_REDIRECT
-A MESHLINK_INBOUND_REDIRECT -p tcp -m comment --comment "meshlink/transparent-proxy: inbound capture port" -j REDIRECT --to-ports 15006
-A MESHLINK_OUTPUT -m owner --uid-owner 5678 -m comment --comment "meshlink/transparent-proxy: sidecar traffic (uid)" -j RETURN
-A MESHLINK_OUTPUT -d 127.0.0.0/8 -m comment --comment "meshlink/transparent-proxy: loopback" -j RETURN
-A MESHLINK_OUTPUT -o lo -m comment --comment "meshlink/transparent-proxy: to own addresses via lo" -j RETURN
-A MESHLINK_OUTPUT -p tcp -m comment --comment "meshlink/transparent-proxy: to the outbound capture port" -j MESHLINK_OUTBOUND_REDIRECT
-A MESHLINK_OUTBOUND_REDIRECT -p tcp -m comment --comment "meshlink/transparent-proxy: outbound capture port" -j REDIRECT --to-ports 15001
COMMIT
"#;

#[test]
fn the_default_ipv4_rules() {
    assert_eq!(text(&default_config(), Family::V4), DEFAULT_V4);
}

#[test]
fn ipv6_differs_only_in_the_loopback_network() {
    let v6 = text(&default_config(), Family::V6);
    assert_eq!(v6, DEFAULT_V4.replace("-d 127.0.0.0/8", "-d ::1/128"));
}

#[test]
fn each_flag_adds_its_rules() {
    let mut c = default_config();
    c.outbound_port = 16001;
    c.inbound_port = 16006;
    c.dns_port = Some(16053);
    c.dns_zone_split = true;
    c.uid = 1337;
    c.gid = Some(1338);
    c.exclude_inbound_ports = vec![
        parse_port_range("22").unwrap(),
        parse_port_range("9901").unwrap(),
    ];
    c.exclude_outbound_ports = vec![parse_port_range("8000-8100").unwrap()];
    c.exclude_outbound_ips = vec![
        parse_cidr("10.0.0.0/8").unwrap(),
        parse_cidr("fd00::/8").unwrap(),
    ];
    let v4 = text(&c, Family::V4);
    let lines: Vec<&str> = v4.lines().collect();
    let has = |needle: &str| {
        lines
            .iter()
            .position(|l| {
                l.starts_with(needle.split(" ~ ").next().unwrap())
                    && l.ends_with(needle.split(" ~ ").nth(1).unwrap())
            })
            .unwrap_or_else(|| panic!("no rule {needle:?} in\n{v4}"))
    };
    has("-A MESHLINK_INBOUND -p tcp -m tcp --dport 22 ~ -j RETURN");
    has("-A MESHLINK_INBOUND -p tcp -m tcp --dport 9901 ~ -j RETURN");
    has("-A MESHLINK_INBOUND_REDIRECT -p tcp ~ -j REDIRECT --to-ports 16006");
    has("-A MESHLINK_OUTBOUND_REDIRECT -p tcp ~ -j REDIRECT --to-ports 16001");
    let uid = has("-A MESHLINK_OUTPUT -m owner --uid-owner 1337 ~ -j RETURN");
    let gid = has("-A MESHLINK_OUTPUT -m owner --gid-owner 1338 ~ -j RETURN");
    let dns_udp = has("-A MESHLINK_OUTPUT -p udp -m udp --dport 53 ~ -j MESHLINK_DNS_REDIRECT");
    let dns_tcp = has("-A MESHLINK_OUTPUT -p tcp -m tcp --dport 53 ~ -j MESHLINK_DNS_REDIRECT");
    has("-A MESHLINK_DNS_REDIRECT -p udp ~ -j REDIRECT --to-ports 16053");
    has("-A MESHLINK_DNS_REDIRECT -p tcp ~ -j REDIRECT --to-ports 16053");
    let loopback = has("-A MESHLINK_OUTPUT -d 127.0.0.0/8 ~ -j RETURN");
    let ip = has("-A MESHLINK_OUTPUT -d 10.0.0.0/8 ~ -j RETURN");
    let port = has("-A MESHLINK_OUTPUT -p tcp -m tcp --dport 8000:8100 ~ -j RETURN");
    let redirect = has("-A MESHLINK_OUTPUT -p tcp ~ -j MESHLINK_OUTBOUND_REDIRECT");
    assert!(v4.contains(":MESHLINK_DNS_REDIRECT - [0:0]"));
    // The sidecar's DNS upstream queries are not captured; a local stub
    // resolver is; exclusions come before the catch-all redirect.
    assert!(uid < dns_udp && gid < dns_udp && dns_tcp < loopback);
    assert!(loopback < ip && ip < redirect && port < redirect);
    assert!(!v4.contains("fd00::"), "IPv6 CIDR in the IPv4 rules:\n{v4}");
    // iptables-save would escape an apostrophe in a comment.
    assert!(!v4.contains('\''), "{v4}");

    let v6 = text(&c, Family::V6);
    assert!(
        v6.contains("-A MESHLINK_OUTPUT -d fd00::/8 -m comment"),
        "{v6}"
    );
    assert!(
        v6.contains("-A MESHLINK_OUTPUT -d ::1/128 -m comment"),
        "{v6}"
    );
    for v4_only in ["10.0.0.0/8", "127.0.0.0/8"] {
        assert!(
            !v6.contains(v4_only),
            "IPv4 CIDR {v4_only} in the IPv6 rules:\n{v6}"
        );
    }
    assert!(v6.contains("--to-ports 16053") && v6.contains("--dport 9901"));
}

#[test]
fn reinstall_removes_the_earlier_install_in_the_same_transaction() {
    let saved = "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
        :MESHLINK_DNS_REDIRECT - [0:0]\n:MESHLINK_OUTPUT - [0:0]\n\
        -A PREROUTING -p tcp -m comment --comment \"meshlink/transparent-proxy: inbound; install created the nat table\" -j MESHLINK_INBOUND\n\
        -A OUTPUT -m comment --comment \"meshlink/transparent-proxy: outbound\" -j MESHLINK_OUTPUT\nCOMMIT\n";
    let prior = State::parse(saved);
    let input = install_input(&default_config(), Family::V4, &prior, false);
    let lines: Vec<&str> = input.lines().collect();
    assert_eq!(lines[0], "*nat");
    assert!(
        lines[1].starts_with("-D PREROUTING -p tcp -m comment"),
        "{input}"
    );
    assert!(lines[2].starts_with("-D OUTPUT -m comment"), "{input}");
    // Every earlier chain is flushed; the DNS chain, gone from the new
    // config, is then deleted.
    assert_eq!(
        lines[3..6],
        [
            "-F MESHLINK_DNS_REDIRECT",
            "-F MESHLINK_OUTPUT",
            "-X MESHLINK_DNS_REDIRECT"
        ]
    );
    assert_eq!(lines[6], ":MESHLINK_INBOUND - [0:0]");
    // The mark that install created the table is carried over.
    assert!(input.contains("--comment \"meshlink/transparent-proxy: inbound; install created the nat table\" -j MESHLINK_INBOUND"));
    assert!(input.contains("--comment \"meshlink/transparent-proxy: outbound; install created the nat table\" -j MESHLINK_OUTPUT"));
    assert_eq!(input.matches("-A PREROUTING").count(), 1);
    assert!(input.ends_with("COMMIT\n"));
}

#[test]
fn dry_run_names_the_family_and_tool() {
    let t = dry_run_text(&default_config(), Family::V6);
    assert!(
        t.starts_with("# IPv6 rules (ip6tables-restore --noflush)\n*nat\n"),
        "{t}"
    );
}

/// The raw table's section of `input`, from `*raw` to `COMMIT`.
fn raw_section(input: &str) -> &str {
    let start = input
        .find("*raw\n")
        .unwrap_or_else(|| panic!("no *raw in\n{input}"));
    &input[start..]
}

const ZONES_V4: &str = r#"*raw
:MESHLINK_DNS_ZONE_OUTPUT - [0:0]
:MESHLINK_DNS_ZONE_PREROUTING - [0:0]
-A PREROUTING -p udp -m comment --comment "meshlink/transparent-proxy: DNS conntrack zones" -j MESHLINK_DNS_ZONE_PREROUTING
-A OUTPUT -m comment --comment "meshlink/transparent-proxy: DNS conntrack zones" -j MESHLINK_DNS_ZONE_OUTPUT
-A MESHLINK_DNS_ZONE_OUTPUT -s 127.0.0.1/32 -o lo -p icmp -m icmp --icmp-type 3/3 -m comment --comment "meshlink/transparent-proxy: DNS port refusals in zone 2" -j CT --zone 2
-A MESHLINK_DNS_ZONE_OUTPUT -p udp -m udp --dport 53 -m owner --uid-owner 5678 -m comment --comment "meshlink/transparent-proxy: sidecar DNS queries in zone 1" -j CT --zone 1
-A MESHLINK_DNS_ZONE_OUTPUT -p udp -m udp --sport 15053 -m owner --uid-owner 5678 -m comment --comment "meshlink/transparent-proxy: sidecar DNS answers in zone 2" -j CT --zone 2
-A MESHLINK_DNS_ZONE_OUTPUT -p udp -m udp --dport 53 -m comment --comment "meshlink/transparent-proxy: app DNS queries in zone 2" -j CT --zone 2
-A MESHLINK_DNS_ZONE_PREROUTING -p udp -m udp --sport 53 -m comment --comment "meshlink/transparent-proxy: DNS answers in zone 1" -j CT --zone 1
COMMIT
"#;

#[test]
fn dns_adds_the_conntrack_zone_split_in_the_raw_table_after_nat() {
    let mut c = default_config();
    c.dns_port = Some(15053);
    c.dns_zone_split = true;
    for family in [Family::V4, Family::V6] {
        let input = text(&c, family);
        assert!(input.starts_with("*nat\n"), "{input}");
        // The zones are the same for both families but for the refusal.
        let expected = match family {
            Family::V4 => ZONES_V4.to_string(),
            Family::V6 => ZONES_V4.replace(
                "-s 127.0.0.1/32 -o lo -p icmp -m icmp --icmp-type 3/3",
                "-s ::1/128 -o lo -p ipv6-icmp -m icmp6 --icmpv6-type 1/4",
            ),
        };
        assert_eq!(raw_section(&input), expected, "{}", family.name());
        assert_eq!(input.matches("COMMIT\n").count(), 2, "{input}");
    }
    // The sidecar's rules come before the app's catch-all: the first CT
    // target that matches decides.
    let sidecar = ZONES_V4.find("--uid-owner 5678").unwrap();
    assert!(sidecar < ZONES_V4.find("app DNS queries").unwrap());
}

#[test]
fn the_gid_and_the_dns_port_are_in_the_zone_rules() {
    let mut c = default_config();
    c.dns_port = Some(16053);
    c.dns_zone_split = true;
    c.uid = 1337;
    c.gid = Some(1338);
    let input = text(&c, Family::V4);
    let raw: Vec<&str> = raw_section(&input).lines().collect();
    let at = |needle: &str| {
        raw.iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {raw:#?}"))
    };
    let uid_q = at("--dport 53 -m owner --uid-owner 1337");
    let gid_q = at("--dport 53 -m owner --gid-owner 1338");
    let uid_a = at("--sport 16053 -m owner --uid-owner 1337");
    let gid_a = at("--sport 16053 -m owner --gid-owner 1338");
    let app = at("app DNS queries in zone 2");
    assert!(raw[uid_q].ends_with("-j CT --zone 1") && raw[gid_q].ends_with("-j CT --zone 1"));
    assert!(raw[uid_a].ends_with("-j CT --zone 2") && raw[gid_a].ends_with("-j CT --zone 2"));
    assert!(uid_q < app && gid_q < app && uid_a < app && gid_a < app);
    assert!(!input.contains("15053"), "{input}");
}

#[test]
fn no_raw_rules_without_dns_or_with_the_skip_flag() {
    let mut c = default_config();
    assert!(!text(&c, Family::V4).contains("*raw"));
    c.dns_port = Some(15053);
    c.dns_zone_split = false;
    let input = text(&c, Family::V4);
    assert!(
        !input.contains("*raw") && !input.contains("CT --zone"),
        "{input}"
    );
    assert!(input.contains("MESHLINK_DNS_REDIRECT"), "{input}");
    assert!(!writes(&c, Table::Raw) && writes(&c, Table::Nat));
}

#[test]
fn the_created_mark_is_per_table() {
    let mut c = default_config();
    c.dns_port = Some(15053);
    c.dns_zone_split = true;
    // nft backend, neither table there: both are marked as created.
    let input = install_input(&c, Family::V4, &State::default(), true);
    assert!(
        input.contains("\"meshlink/transparent-proxy: outbound; install created the nat table\"")
    );
    assert!(input.contains(
        "\"meshlink/transparent-proxy: DNS conntrack zones; install created the raw table\""
    ));
    // The nat table existed already, the raw table did not.
    let saved = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
    let input = install_input(&c, Family::V4, &State::parse(saved), true);
    assert!(!input.contains("install created the nat table"), "{input}");
    assert_eq!(input.matches("install created the raw table").count(), 2);
    // Legacy backend: the tables always exist; nothing is marked.
    assert!(!install_input(&c, Family::V4, &State::default(), false).contains("install created"));
}

#[test]
fn reinstall_without_the_split_removes_the_earlier_zone_rules() {
    let mut c = default_config();
    c.dns_port = Some(15053);
    c.dns_zone_split = true;
    let first = install_input(&c, Family::V4, &State::default(), true);
    // What iptables-save shows after the first install (close enough: the
    // declarations, then the rules as written).
    let saved = first
        .replace("*nat\n", "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
        .replace("*raw\n", "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n");
    let prior = State::parse(&saved);
    assert!(prior.raw.created_table && prior.nat.created_table);
    c.dns_zone_split = false;
    let second = install_input(&c, Family::V4, &prior, true);
    assert_eq!(
        raw_section(&second).lines().collect::<Vec<_>>(),
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
    // Re-installing the same config replaces the zone rules in place.
    c.dns_zone_split = true;
    let again = install_input(&c, Family::V4, &prior, true);
    let raw = raw_section(&again);
    assert_eq!(raw.matches("-A PREROUTING").count(), 1, "{raw}");
    assert_eq!(raw.matches("-D OUTPUT").count(), 1, "{raw}");
    assert!(!raw.contains("-X "), "no chain is stale: {raw}");
}

#[test]
fn dry_run_prints_the_raw_rules_too() {
    let mut c = default_config();
    c.dns_port = Some(15053);
    c.dns_zone_split = true;
    let t = dry_run_text(&c, Family::V4);
    assert!(t.contains("\nCOMMIT\n*raw\n"), "{t}");
    assert!(t.contains("-j CT --zone 2"), "{t}");
}
