//! Unit tests of the rule generator: the whole default IPv4 input, then the
//! rules each flag adds, per family.

use super::*;
use crate::commands::transparent_proxy::options::{Config, parse_cidr, parse_port_range};

fn default_config() -> Config {
    Config {
        outbound_port: 15001,
        inbound_port: 15006,
        dns_port: None,
        uid: 5678,
        gid: None,
        exclude_inbound_ports: vec![],
        exclude_outbound_ports: vec![],
        exclude_outbound_ips: vec![],
        families: vec![Family::V4, Family::V6],
    }
}

fn text(config: &Config, family: Family) -> String {
    install_input(config, family, &NatState::default(), false)
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
    let prior = NatState::parse(saved);
    let input = install_input(&default_config(), Family::V4, &prior, prior.created_table);
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
