//! The privilege check: changing netfilter rules needs CAP_NET_ADMIN, so
//! install and uninstall look for it in the effective set (`CapEff` in
//! `/proc/self/status`) before doing anything, and say which capability is
//! missing instead of relaying iptables' "Permission denied".
//!
//! Reads `/proc/self/status` only; never changes anything.

use super::Error;

/// CAP_NET_ADMIN's bit in the capability sets (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;

/// Whether `CapEff` in the text of `/proc/self/status` has CAP_NET_ADMIN;
/// `None` when the line is missing or unreadable.
fn has_net_admin(status: &str) -> Option<bool> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    let eff = u64::from_str_radix(hex, 16).ok()?;
    Some(eff & (1 << CAP_NET_ADMIN) != 0)
}

/// Fails, naming the capability, unless this process may change the
/// network namespace's rules. `command` is `install` or `uninstall`.
pub(crate) fn require_net_admin(command: &'static str) -> Result<(), Error> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| Error::Io {
        what: "read /proc/self/status (to check for CAP_NET_ADMIN)".into(),
        source: e,
    })?;
    match has_net_admin(&status) {
        Some(true) => Ok(()),
        Some(false) => Err(Error::NoPrivilege { command }),
        None => Err(Error::Io {
            what: "read /proc/self/status (to check for CAP_NET_ADMIN)".into(),
            source: std::io::Error::other("no CapEff line"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_effective_set() {
        let root = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n";
        assert_eq!(has_net_admin(root), Some(true));
        // capsh --drop=cap_net_admin: every bit but 12.
        assert_eq!(has_net_admin("CapEff:\t000001fffeffefff\n"), Some(false));
        assert_eq!(has_net_admin("CapEff:\t0000000000001000\n"), Some(true));
        assert_eq!(has_net_admin("CapEff:\t0000000000000000\n"), Some(false));
        assert_eq!(has_net_admin("Name:\tx\n"), None);
    }

    #[test]
    fn the_error_names_the_capability() {
        let e = Error::NoPrivilege { command: "install" }.to_string();
        assert_eq!(
            e,
            "meshlink install transparent-proxy needs CAP_NET_ADMIN in this network namespace (run as root, or grant the capability)"
        );
    }
}
