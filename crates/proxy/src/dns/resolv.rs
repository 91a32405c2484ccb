//! The upstream resolvers: the `nameserver` lines of the namespace's
//! original resolv.conf (`--dns-resolv-conf`), read once at start with the
//! `resolv-conf` crate, each on port 53.
//!
//! A file that cannot be read or has no nameserver leaves glibc's default
//! (the local machine) and a warning; nothing here stops the proxy.

use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::path::Path;

use resolv_conf::ScopedIp;

/// The port of every resolver resolv.conf names.
const DNS_PORT: u16 = 53;

/// Why the resolvers could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ResolvConfError {
    /// The file cannot be read.
    #[error(
        "cannot read {path}: {source}; pass the namespace's resolv.conf with --dns-resolv-conf"
    )]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The resolvers of the resolv.conf at `path`, in file order. Lines that
/// do not parse are skipped with a warning; no nameserver at all means
/// the local machine (127.0.0.1 and ::1), as glibc does.
pub fn upstreams(path: &Path) -> Result<Vec<SocketAddr>, ResolvConfError> {
    let bytes = std::fs::read(path).map_err(|source| ResolvConfError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse(&bytes, path))
}

fn parse(bytes: &[u8], path: &Path) -> Vec<SocketAddr> {
    let (config, errors) = resolv_conf::Config::parse_with_errors(bytes);
    for e in errors {
        tracing::warn!(file = %path.display(), error = %e, "resolv.conf: line skipped");
    }
    config
        .get_nameservers_or_local()
        .iter()
        .map(|ip| match ip {
            // A link-local server's numeric scope (`fe80::1%2`); a named
            // one (`%eth0`) is not resolved here.
            ScopedIp::V6(v6, Some(scope)) => SocketAddr::V6(SocketAddrV6::new(
                *v6,
                DNS_PORT,
                0,
                scope.parse().unwrap_or(0),
            )),
            other => SocketAddr::new(IpAddr::from(other), DNS_PORT),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    fn v6_local() -> SocketAddr {
        SocketAddr::new(Ipv6Addr::LOCALHOST.into(), DNS_PORT)
    }

    #[test]
    fn nameservers_are_read_in_order_on_port_53() {
        let text = b"# generated\nsearch default.svc.cluster.local svc.cluster.local\n\
                     nameserver 10.96.0.10\nnameserver fd00::a\noptions ndots:5\n";
        let got = parse(text, Path::new("resolv.conf"));
        assert_eq!(
            got,
            [
                "10.96.0.10:53".parse::<SocketAddr>().unwrap(),
                "[fd00::a]:53".parse().unwrap()
            ]
        );
    }

    #[test]
    fn no_nameserver_means_the_local_machine_and_a_bad_line_is_skipped() {
        let got = parse(
            b"nameserver not-an-ip\nsearch x\n",
            Path::new("resolv.conf"),
        );
        assert_eq!(got, ["127.0.0.1:53".parse().unwrap(), v6_local()]);
    }

    #[test]
    fn a_missing_file_names_the_flag() {
        let e = upstreams(Path::new("/nonexistent/resolv.conf")).unwrap_err();
        assert!(e.to_string().contains("--dns-resolv-conf"), "{e}");
    }
}
