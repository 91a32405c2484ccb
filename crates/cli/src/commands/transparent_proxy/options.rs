//! The flags of `meshlink install transparent-proxy` and what they mean:
//! [`InstallArgs`] (clap) becomes a checked [`Config`], the only input of
//! the rule generator.
//!
//! Owns flag parsing and validation; it never touches the system beyond
//! reading `/etc/passwd` for `--kuma-dp-user`.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use super::Error;
use super::rules::Family;

/// Kuma's default uid for the sidecar's user (`kuma-dp`), kept as ours.
pub(crate) const DEFAULT_UID: u32 = 5678;

/// Flags of `meshlink install transparent-proxy` (Kuma's names).
#[derive(clap::Args, Debug)]
pub(crate) struct InstallArgs {
    /// Port of the sidecar's outbound capture listener: the app's outbound
    /// TCP connections are redirected there.
    #[arg(long, value_name = "PORT", default_value_t = 15001, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) redirect_outbound_port: u16,
    /// Port of the sidecar's inbound capture listener: TCP connections
    /// arriving at this network namespace are redirected there.
    #[arg(long, value_name = "PORT", default_value_t = 15006, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) redirect_inbound_port: u16,
    /// Also redirect the app's DNS queries (UDP and TCP port 53, to any
    /// server) to the sidecar's DNS port.
    #[arg(long)]
    pub(crate) redirect_dns: bool,
    /// Port of the sidecar's DNS server (with --redirect-dns).
    #[arg(long, value_name = "PORT", default_value_t = 15053, requires = "redirect_dns", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) redirect_dns_port: u16,
    /// With --redirect-dns, do not split DNS into conntrack zones (raw
    /// table). Without the split, an app query from a source port the
    /// sidecar just used to query the same upstream server matches the
    /// sidecar's conntrack entry and bypasses the sidecar's DNS.
    #[arg(long, requires = "redirect_dns")]
    pub(crate) skip_dns_conntrack_zone_split: bool,
    /// The user the sidecar runs as (a name in /etc/passwd, or a uid): its
    /// traffic is never redirected [default: uid 5678, Kuma's].
    #[arg(long, value_name = "NAME", conflicts_with = "kuma_dp_uid")]
    pub(crate) kuma_dp_user: Option<String>,
    /// The uid the sidecar runs as: its traffic is never redirected
    /// [default: 5678, Kuma's].
    #[arg(long, visible_alias = "uid", value_name = "UID")]
    pub(crate) kuma_dp_uid: Option<u32>,
    /// Also leave alone the traffic of processes with this group id.
    #[arg(long, visible_alias = "gid", value_name = "GID")]
    pub(crate) kuma_dp_gid: Option<u32>,
    /// Inbound TCP ports (or ranges, 8000-8100) not redirected, comma-separated, e.g. 22,9901.
    #[arg(long, value_name = "PORTS", value_delimiter = ',', value_parser = parse_port_range)]
    pub(crate) exclude_inbound_ports: Vec<PortRange>,
    /// Outbound TCP ports (or ranges) not redirected, comma-separated.
    #[arg(long, value_name = "PORTS", value_delimiter = ',', value_parser = parse_port_range)]
    pub(crate) exclude_outbound_ports: Vec<PortRange>,
    /// Destinations (addresses or CIDRs, IPv4 and IPv6) not redirected,
    /// comma-separated, e.g. 10.0.0.0/8,fd00::/8.
    #[arg(long, value_name = "CIDRS", value_delimiter = ',', value_parser = parse_cidr)]
    pub(crate) exclude_outbound_ips: Vec<Cidr>,
    /// dualstack writes IPv4 (iptables) and IPv6 (ip6tables) rules; ipv4
    /// only IPv4 ones.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = IpFamilyMode::Dualstack)]
    pub(crate) ip_family_mode: IpFamilyMode,
    /// Print the rules for each IP family and change nothing (needs no
    /// privilege).
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// Which IP families get rules.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpFamilyMode {
    /// IPv4 and IPv6.
    Dualstack,
    /// IPv4 only.
    Ipv4,
}

/// An inclusive TCP port range; one port when `first == last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PortRange {
    /// First port.
    pub(crate) first: u16,
    /// Last port.
    pub(crate) last: u16,
}

impl fmt::Display for PortRange {
    /// iptables' syntax: `22` or `8000:8100`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}:{}", self.first, self.last)
        }
    }
}

/// A destination network: an address and a prefix length, host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    /// The network address.
    pub(crate) addr: IpAddr,
    /// The prefix length.
    pub(crate) prefix: u8,
}

impl Cidr {
    /// The IP family of the network.
    pub(crate) fn family(&self) -> Family {
        match self.addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn parse_port(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u32>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        Ok(p) => Err(format!("port {p} is out of range 1-65535")),
        Err(_) => Err(format!("{s:?} is not a port number")),
    }
}

/// Parses `22` or `8000-8100` (also `8000:8100`).
pub(crate) fn parse_port_range(s: &str) -> Result<PortRange, String> {
    let (first, last) = match s.split_once(['-', ':']) {
        Some((a, b)) => (parse_port(a)?, parse_port(b)?),
        None => {
            let p = parse_port(s)?;
            (p, p)
        }
    };
    if first > last {
        return Err(format!("port range {s:?} ends before it starts"));
    }
    Ok(PortRange { first, last })
}

/// Parses `10.0.0.0/8`, `fd00::/8` or a bare address (a /32 or /128),
/// zeroing host bits as iptables does.
pub(crate) fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let bad = || format!("{s:?} is not an IP address or CIDR (e.g. 10.0.0.0/8 or fd00::/8)");
    let (addr, prefix) = match s.trim().split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s.trim(), None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => match p.parse::<u8>() {
            Ok(p) if p <= max => p,
            _ => return Err(format!("{s:?}: prefix length must be 0-{max}")),
        },
    };
    let addr = match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shl(u32::from(32 - prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shl(u32::from(128 - prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & mask).into())
        }
    };
    Ok(Cidr { addr, prefix })
}

/// What the rules are generated from: checked flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// The sidecar's outbound capture port.
    pub(crate) outbound_port: u16,
    /// The sidecar's inbound capture port.
    pub(crate) inbound_port: u16,
    /// The sidecar's DNS port, when DNS is redirected.
    pub(crate) dns_port: Option<u16>,
    /// DNS (UDP) is split into conntrack zones: the sidecar's upstream
    /// queries in zone 1, the app's queries (redirected) in zone 2.
    pub(crate) dns_zone_split: bool,
    /// The sidecar's uid: its traffic is never redirected.
    pub(crate) uid: u32,
    /// A group whose traffic is never redirected.
    pub(crate) gid: Option<u32>,
    /// Inbound ports left alone.
    pub(crate) exclude_inbound_ports: Vec<PortRange>,
    /// Outbound ports left alone.
    pub(crate) exclude_outbound_ports: Vec<PortRange>,
    /// Destinations left alone, both families.
    pub(crate) exclude_outbound_ips: Vec<Cidr>,
    /// The families that get rules.
    pub(crate) families: Vec<Family>,
}

impl Config {
    /// The sidecar's DNS port when UDP DNS is also split into conntrack
    /// zones (the raw table's rules); `None` without them.
    pub(crate) fn zone_split_dns_port(&self) -> Option<u16> {
        self.dns_port.filter(|_| self.dns_zone_split)
    }

    /// Checks the flags and resolves `--kuma-dp-user` in `passwd` (the
    /// contents of `passwd_path`, named in errors).
    pub(crate) fn from_args(args: &InstallArgs, passwd_path: &Path) -> Result<Config, Error> {
        let uid = match (&args.kuma_dp_user, args.kuma_dp_uid) {
            (Some(user), _) => {
                let passwd = std::fs::read_to_string(passwd_path).unwrap_or_default();
                match uid_of(user, &passwd) {
                    Some(uid) => uid,
                    None => user.parse::<u32>().map_err(|_| {
                        Error::BadFlag(format!(
                            "--kuma-dp-user {user:?}: no such user in {}; create it (useradd --system {user}) or give its uid with --kuma-dp-uid",
                            passwd_path.display()
                        ))
                    })?,
                }
            }
            (None, Some(uid)) => uid,
            (None, None) => DEFAULT_UID,
        };
        let dns_port = args.redirect_dns.then_some(args.redirect_dns_port);
        let mut ports = vec![
            ("--redirect-outbound-port", args.redirect_outbound_port),
            ("--redirect-inbound-port", args.redirect_inbound_port),
        ];
        ports.extend(dns_port.map(|p| ("--redirect-dns-port", p)));
        for (i, (flag, port)) in ports.iter().enumerate() {
            if let Some((other, _)) = ports[..i].iter().find(|(_, p)| p == port) {
                return Err(Error::BadFlag(format!(
                    "{other} and {flag} are both {port}; the sidecar listens on a different port for each"
                )));
            }
        }
        let families = match args.ip_family_mode {
            IpFamilyMode::Dualstack => vec![Family::V4, Family::V6],
            IpFamilyMode::Ipv4 => vec![Family::V4],
        };
        if let Some(c) = args
            .exclude_outbound_ips
            .iter()
            .find(|c| !families.contains(&c.family()))
        {
            return Err(Error::BadFlag(format!(
                "--exclude-outbound-ips {c} is IPv6 but --ip-family-mode is ipv4; drop it or use dualstack"
            )));
        }
        Ok(Config {
            outbound_port: args.redirect_outbound_port,
            inbound_port: args.redirect_inbound_port,
            dns_port,
            dns_zone_split: dns_port.is_some() && !args.skip_dns_conntrack_zone_split,
            uid,
            gid: args.kuma_dp_gid,
            exclude_inbound_ports: args.exclude_inbound_ports.clone(),
            exclude_outbound_ports: args.exclude_outbound_ports.clone(),
            exclude_outbound_ips: args.exclude_outbound_ips.clone(),
            families,
        })
    }
}

/// The uid of `user` in the text of an `/etc/passwd` file.
fn uid_of(user: &str, passwd: &str) -> Option<u32> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(user))
            .then(|| fields.nth(1)?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: InstallArgs,
    }

    fn parse(args: &[&str]) -> Result<InstallArgs, String> {
        Cli::try_parse_from(std::iter::once("install").chain(args.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    fn config(args: &[&str]) -> Result<Config, String> {
        let args = parse(args)?;
        Config::from_args(&args, Path::new("/nonexistent/passwd")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_kumas() {
        let c = config(&[]).unwrap();
        assert_eq!(
            (c.outbound_port, c.inbound_port, c.uid),
            (15001, 15006, 5678)
        );
        assert_eq!(c.dns_port, None);
        assert_eq!(c.families, vec![Family::V4, Family::V6]);
        assert!(!c.dns_zone_split);
        let c = config(&["--redirect-dns"]).unwrap();
        assert_eq!(c.dns_port, Some(15053));
        assert!(c.dns_zone_split, "the zone split comes with --redirect-dns");
        let c = config(&["--redirect-dns", "--skip-dns-conntrack-zone-split"]).unwrap();
        assert!(!c.dns_zone_split && c.dns_port == Some(15053));
        let e = parse(&["--skip-dns-conntrack-zone-split"]).unwrap_err();
        assert!(e.contains("--redirect-dns"), "{e}");
    }

    #[test]
    fn lists_ranges_and_cidrs_parse() {
        let c = config(&[
            "--exclude-inbound-ports",
            "22,9901",
            "--exclude-outbound-ports=8000-8100",
            "--exclude-outbound-ips",
            "10.1.2.3/8,fd00::1/8,192.168.1.7",
            "--uid",
            "1337",
            "--gid=1338",
        ])
        .unwrap();
        let ports: Vec<String> = c
            .exclude_inbound_ports
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(ports, ["22", "9901"]);
        assert_eq!(c.exclude_outbound_ports[0].to_string(), "8000:8100");
        let ips: Vec<String> = c
            .exclude_outbound_ips
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(ips, ["10.0.0.0/8", "fd00::/8", "192.168.1.7/32"]);
        assert_eq!((c.uid, c.gid), (1337, Some(1338)));
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse(&["--redirect-outbound-port", "70000"]).unwrap_err();
        assert!(
            e.contains("70000") && e.contains("--redirect-outbound-port"),
            "{e}"
        );
        let e = parse(&["--redirect-inbound-port", "0"]).unwrap_err();
        assert!(
            e.contains("'0'") && e.contains("--redirect-inbound-port"),
            "{e}"
        );
        let e = parse(&["--exclude-inbound-ports", "22,70000"]).unwrap_err();
        assert!(e.contains("70000 is out of range 1-65535"), "{e}");
        let e = parse(&["--exclude-outbound-ips", "10.0.0.0/33"]).unwrap_err();
        assert!(
            e.contains("10.0.0.0/33") && e.contains("prefix length must be 0-32"),
            "{e}"
        );
        let e = parse(&["--exclude-outbound-ips", "10.0.0/8"]).unwrap_err();
        assert!(
            e.contains("\"10.0.0/8\" is not an IP address or CIDR"),
            "{e}"
        );
        let e = parse(&["--ip-family-mode", "ipv6"]).unwrap_err();
        assert!(
            e.contains("'ipv6'") && e.contains("--ip-family-mode"),
            "{e}"
        );
        let e = parse(&["--redirect-dns-port", "5353"]).unwrap_err();
        assert!(e.contains("--redirect-dns"), "{e}");
        let e = parse(&["--kuma-dp-user", "x", "--kuma-dp-uid", "1"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        let e = config(&["--ip-family-mode", "ipv4", "--exclude-outbound-ips", "::1"]).unwrap_err();
        assert!(e.contains("::1/128 is IPv6"), "{e}");
        let e = config(&["--redirect-inbound-port", "15001"]).unwrap_err();
        assert!(e.contains("both 15001"), "{e}");
    }

    #[test]
    fn the_user_is_looked_up_in_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nkuma-dp:x:5679:5679::/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(uid_of("kuma-dp", passwd), Some(5679));
        assert_eq!(uid_of("kuma", passwd), None);
        let dir = std::env::temp_dir().join(format!("meshlink-passwd-{}", std::process::id()));
        std::fs::write(&dir, passwd).unwrap();
        let args = parse(&["--kuma-dp-user", "kuma-dp"]).unwrap();
        assert_eq!(Config::from_args(&args, &dir).unwrap().uid, 5679);
        let args = parse(&["--kuma-dp-user", "nobody-here"]).unwrap();
        let e = Config::from_args(&args, &dir).unwrap_err().to_string();
        assert!(
            e.contains("--kuma-dp-user \"nobody-here\": no such user in"),
            "{e}"
        );
        let args = parse(&["--kuma-dp-user", "4242"]).unwrap();
        assert_eq!(Config::from_args(&args, &dir).unwrap().uid, 4242);
        let _ = std::fs::remove_file(dir);
    }
}
