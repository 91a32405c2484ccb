//! The assignment rule: a pure function from the Mesh's stored VIPs and
//! the destinations that exist now to the VIPs to store.
//!
//! - A destination that keeps existing keeps its address (while the
//!   address is still inside the configured ranges).
//! - A destination that no longer exists loses its entry, and its address
//!   may go to another one later.
//! - A new destination starts probing at a slot drawn from a hash of its
//!   kind and name, so it usually gets the same address when it comes
//!   back after a deletion, and two control planes computing at once
//!   agree; the next free slot is taken on a clash. Two destinations never
//!   share an address, whatever the stored status held.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use meshlink_api::spec::MeshStatus;

use super::VipRanges;

/// The VIPs to store for `services` (`kuma.io/service` names) and
/// `mesh_services` (MeshService names), given what `stored` holds.
/// An error when a new destination finds no free address (the ranges
/// are full); nothing is assigned then, and the stored status stands.
pub fn assign(
    stored: &MeshStatus,
    services: &BTreeSet<String>,
    mesh_services: &BTreeSet<String>,
    ranges: &VipRanges,
) -> Result<MeshStatus, String> {
    let mut taken: HashSet<IpAddr> = HashSet::new();
    let mut out = MeshStatus::default();
    // Keep what stays, first come first kept (a duplicate address in a
    // hand-edited status goes to the first holder only).
    let keep = |map: &BTreeMap<String, String>,
                names: &BTreeSet<String>,
                taken: &mut HashSet<IpAddr>|
     -> BTreeMap<String, String> {
        map.iter()
            .filter(|(name, _)| names.contains(*name))
            .filter_map(|(name, ip)| {
                let addr: IpAddr = ip.parse().ok()?;
                (ranges.contains(&addr) && taken.insert(addr)).then(|| (name.clone(), ip.clone()))
            })
            .collect()
    };
    out.vips = keep(&stored.vips, services, &mut taken);
    out.mesh_service_vips = keep(&stored.mesh_service_vips, mesh_services, &mut taken);
    for (kind, names, map) in [
        ("service", services, &mut out.vips),
        ("meshservice", mesh_services, &mut out.mesh_service_vips),
    ] {
        for name in names {
            if map.contains_key(name) {
                continue;
            }
            let addr = free_address(ranges, &taken, kind, name).ok_or_else(|| {
                format!(
                    "no free virtual IP left for {kind} {name:?}: the VIP ranges ({}) are full; \
                     give a larger --vip-range",
                    ranges
                        .ranges()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            taken.insert(addr);
            map.insert(name.clone(), addr.to_string());
        }
    }
    Ok(out)
}

/// The first free address probing from the hash of `kind`/`name`.
fn free_address(
    ranges: &VipRanges,
    taken: &HashSet<IpAddr>,
    kind: &str,
    name: &str,
) -> Option<IpAddr> {
    let size = ranges.size();
    if (taken.len() as u128) >= size {
        return None;
    }
    let start = u128::from(xxhash_rust::xxh64::xxh64(
        format!("{kind}/{name}").as_bytes(),
        0,
    )) % size;
    (0..size)
        .map(|i| (start + i) % size)
        .filter_map(|n| ranges.nth(n))
        .find(|a| !taken.contains(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn destinations_keep_their_address_and_new_ones_get_free_ones() {
        let ranges = VipRanges::parse("240.0.0.0/4", &[]).unwrap();
        let first = assign(
            &MeshStatus::default(),
            &set(&["backend", "web"]),
            &set(&["redis"]),
            &ranges,
        )
        .unwrap();
        assert_eq!(first.vips.len(), 2);
        assert_eq!(first.mesh_service_vips.len(), 1);
        let all: HashSet<&str> = first.addresses().collect();
        assert_eq!(all.len(), 3, "distinct addresses: {first:?}");
        // Adding one keeps the others; removing one drops only it.
        let second = assign(&first, &set(&["backend", "db"]), &set(&["redis"]), &ranges).unwrap();
        assert_eq!(second.vips["backend"], first.vips["backend"]);
        assert_eq!(
            second.mesh_service_vips["redis"],
            first.mesh_service_vips["redis"]
        );
        assert!(!second.vips.contains_key("web"));
        // A destination that comes back after a deletion gets its address
        // again (the hash slot is free).
        let third = assign(
            &second,
            &set(&["backend", "db", "web"]),
            &set(&["redis"]),
            &ranges,
        )
        .unwrap();
        assert_eq!(third.vips["web"], first.vips["web"]);
    }

    #[test]
    fn a_clash_takes_the_next_slot_and_a_full_range_is_an_error() {
        let ranges = VipRanges::parse("240.0.0.0/30", &[]).unwrap();
        let two = assign(
            &MeshStatus::default(),
            &set(&["a", "b"]),
            &set(&[]),
            &ranges,
        )
        .unwrap();
        let mut addrs: Vec<&str> = two.addresses().collect();
        addrs.sort_unstable();
        assert_eq!(addrs, ["240.0.0.1", "240.0.0.2"]);
        let err = assign(&two, &set(&["a", "b", "c"]), &set(&[]), &ranges).unwrap_err();
        assert_eq!(
            err,
            "no free virtual IP left for service \"c\": the VIP ranges (240.0.0.0/30) are full; \
             give a larger --vip-range"
        );
    }

    #[test]
    fn stored_entries_outside_the_ranges_or_duplicated_are_reassigned() {
        let ranges = VipRanges::parse("240.0.0.0/4", &[]).unwrap();
        let mut stored = MeshStatus::default();
        stored.vips.insert("a".into(), "10.0.0.1".into());
        stored.vips.insert("b".into(), "240.0.0.9".into());
        stored.vips.insert("c".into(), "240.0.0.9".into());
        let out = assign(&stored, &set(&["a", "b", "c"]), &set(&[]), &ranges).unwrap();
        assert_eq!(out.vips["b"], "240.0.0.9");
        assert_ne!(out.vips["c"], "240.0.0.9");
        assert!(ranges.contains(&out.vips["a"].parse().unwrap()));
    }
}
