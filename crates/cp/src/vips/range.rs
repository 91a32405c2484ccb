//! The address ranges VIPs come from (`--vip-range`, default Kuma's
//! `240.0.0.0/4`), and the checks made on them at start: ranges must not
//! overlap each other, nor hold an address of this host's interfaces or
//! a range real traffic uses (loopback, link-local, multicast, the
//! unspecified network), since a VIP there would shadow a real
//! destination.

use std::net::IpAddr;

use ipnet::IpNet;

/// Kuma's default VIP range (`KUMA_DNS_SERVER_CIDR`).
pub const DEFAULT_VIP_RANGE: &str = "240.0.0.0/4";

/// Ranges real traffic uses, which a VIP range must not overlap.
const RESERVED: &[&str] = &[
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "::/128",
    "::1/128",
    "fe80::/10",
    "ff00::/8",
];

/// The configured VIP ranges, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipRanges {
    ranges: Vec<IpNet>,
}

impl VipRanges {
    /// Parses `spec` (comma-separated CIDRs) and checks the ranges
    /// against each other, the reserved ranges and `interfaces` (this
    /// host's addresses). The error names the range and what it clashes
    /// with.
    pub fn parse(spec: &str, interfaces: &[IpAddr]) -> Result<VipRanges, String> {
        let mut ranges: Vec<IpNet> = Vec::new();
        for part in spec.split(',').map(str::trim) {
            let net: IpNet = part.parse().map_err(|_| {
                format!("{part:?} is not a CIDR range (e.g. {DEFAULT_VIP_RANGE} or fd00:fd00::/64)")
            })?;
            if net != net.trunc() {
                return Err(format!(
                    "{part} has host bits set; write the range as {}",
                    net.trunc()
                ));
            }
            if host_count(&net) < 2 {
                return Err(format!("{part} is too small to hand out addresses from"));
            }
            if let Some(other) = ranges.iter().find(|o| overlaps(o, &net)) {
                return Err(format!(
                    "{net} overlaps {other}, also given; give disjoint ranges"
                ));
            }
            for reserved in RESERVED {
                let r: IpNet = reserved.parse().expect("a valid reserved range");
                if overlaps(&r, &net) {
                    return Err(format!(
                        "{net} overlaps {r}, which real traffic uses; pick a range outside it \
                         (Kuma's default is {DEFAULT_VIP_RANGE})"
                    ));
                }
            }
            if let Some(addr) = interfaces.iter().find(|a| net.contains(*a)) {
                return Err(format!(
                    "{net} holds {addr}, an address of this host's interfaces: a VIP there \
                     would shadow a real destination; pick a range no interface uses"
                ));
            }
            ranges.push(net);
        }
        Ok(VipRanges { ranges })
    }

    /// The ranges, in the order given.
    pub fn ranges(&self) -> &[IpNet] {
        &self.ranges
    }

    /// Whether `addr` is in one of the ranges.
    pub fn contains(&self, addr: &IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(addr))
    }

    /// How many addresses the ranges hand out (saturating).
    pub fn size(&self) -> u128 {
        self.ranges
            .iter()
            .map(host_count)
            .fold(0u128, u128::saturating_add)
    }

    /// The `n`th address handed out (`n < size()`), counting each
    /// range's usable addresses in order.
    pub fn nth(&self, mut n: u128) -> Option<IpAddr> {
        for r in &self.ranges {
            let count = host_count(r);
            if n < count {
                return Some(offset(r, n + first_host_offset(r)));
            }
            n -= count;
        }
        None
    }
}

/// The addresses of this host's interfaces (for [`VipRanges::parse`]).
pub fn interface_addresses() -> Vec<IpAddr> {
    if_addrs::get_if_addrs()
        .map(|list| list.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default()
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// IPv4 ranges skip their network and broadcast addresses.
fn first_host_offset(r: &IpNet) -> u128 {
    u128::from(matches!(r, IpNet::V4(_)))
}

fn host_count(r: &IpNet) -> u128 {
    match r {
        IpNet::V4(n) => (1u128 << (32 - n.prefix_len())) - 2,
        IpNet::V6(n) => 1u128
            .checked_shl(u32::from(128 - n.prefix_len()))
            .unwrap_or(u128::MAX),
    }
}

fn offset(r: &IpNet, n: u128) -> IpAddr {
    match r {
        IpNet::V4(net) => IpAddr::from(std::net::Ipv4Addr::from(
            u32::from(net.network()) + n as u32,
        )),
        IpNet::V6(net) => IpAddr::from(std::net::Ipv6Addr::from(
            u128::from(net.network()).wrapping_add(n),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_range_is_accepted_and_counted_without_its_ends() {
        let r = VipRanges::parse(DEFAULT_VIP_RANGE, &[]).unwrap();
        assert_eq!(r.size(), (1 << 28) - 2);
        assert_eq!(r.nth(0), Some("240.0.0.1".parse().unwrap()));
        assert_eq!(
            r.nth((1 << 28) - 3),
            Some("255.255.255.254".parse().unwrap())
        );
        assert_eq!(r.nth((1 << 28) - 2), None);
    }

    #[test]
    fn several_ranges_are_counted_in_order() {
        let r = VipRanges::parse("240.0.0.0/30, fd00:fd00::/126", &[]).unwrap();
        assert_eq!(r.size(), 2 + 4);
        let all: Vec<String> = (0..6).map(|n| r.nth(n).unwrap().to_string()).collect();
        assert_eq!(
            all,
            [
                "240.0.0.1",
                "240.0.0.2",
                "fd00:fd00::",
                "fd00:fd00::1",
                "fd00:fd00::2",
                "fd00:fd00::3"
            ]
        );
    }

    #[test]
    fn bad_ranges_are_refused_with_the_range_named() {
        let err = |spec: &str, ifs: &[&str]| {
            let ifs: Vec<IpAddr> = ifs.iter().map(|a| a.parse().unwrap()).collect();
            VipRanges::parse(spec, &ifs).unwrap_err()
        };
        assert_eq!(
            err("240.0.0.0/4,241.0.0.0/8", &[]),
            "241.0.0.0/8 overlaps 240.0.0.0/4, also given; give disjoint ranges"
        );
        assert_eq!(
            err("10.0.0.0/8", &["10.1.2.3"]),
            "10.0.0.0/8 holds 10.1.2.3, an address of this host's interfaces: a VIP there \
             would shadow a real destination; pick a range no interface uses"
        );
        assert!(err("127.0.0.0/16", &[]).starts_with("127.0.0.0/16 overlaps 127.0.0.0/8"));
        assert!(err("224.0.0.0/3", &[]).starts_with("224.0.0.0/3 overlaps 224.0.0.0/4"));
        assert_eq!(
            err("240.0.0.1/4", &[]),
            "240.0.0.1/4 has host bits set; write the range as 240.0.0.0/4"
        );
        assert!(err("nope", &[]).starts_with("\"nope\" is not a CIDR range"));
        assert_eq!(
            err("240.0.0.0/31", &[]),
            "240.0.0.0/31 is too small to hand out addresses from"
        );
    }
}
