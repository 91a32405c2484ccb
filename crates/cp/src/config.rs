//! Control-plane configuration: defaults, the YAML config file, environment
//! and flags, merged in that order of increasing precedence.
//!
//! Owns what each setting means and its default (DESIGN.md §5). It never
//! touches the filesystem beyond reading the config file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Settings as given by one source (file, or flags+env); `None` = not given.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigOverrides {
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// Store URL: `sqlite://PATH` or `postgres://…`.
    pub store: Option<String>,
    /// REST API listen address.
    pub api_addr: Option<SocketAddr>,
    /// xDS + Certify listen address.
    pub xds_addr: Option<SocketAddr>,
    /// Grant server listen address.
    pub grant_addr: Option<SocketAddr>,
    /// Host name or IP that other sites and proxies use to reach this CP.
    pub advertised_host: Option<String>,
    /// How long shutdown waits for streams and requests, e.g. `10s`.
    pub drain_timeout: Option<String>,
    /// New ADS streams admitted at once after a quiet period.
    pub xds_stream_burst: Option<u32>,
    /// New ADS streams admitted per second once the burst is spent.
    pub xds_streams_per_second: Option<f64>,
    /// This replica's name among the control planes sharing a store.
    pub instance: Option<String>,
    /// How long a leader's lease lasts without renewal, e.g. `15s`.
    pub leader_lease: Option<String>,
    /// How long a dynamically registered Dataplane may stay offline before
    /// the leader deletes it, e.g. `72h`.
    pub dataplane_gc_grace: Option<String>,
    /// Longest wait for a request header on the HTTP ports, e.g. `10s`.
    pub http_header_read_timeout: Option<String>,
    /// Longest wait between requests on a kept-alive HTTP connection.
    pub http_idle_timeout: Option<String>,
    /// Most connections open at once on each HTTP port.
    pub http_max_connections: Option<usize>,
    /// Change-feed history kept by count (see [`CpConfig::feed_retention`]).
    pub feed_retain_revisions: Option<u64>,
    /// Change-feed history kept by age, e.g. `10m`.
    pub feed_retain_for: Option<String>,
    /// Ranges virtual IPs come from (comma-separated CIDRs).
    pub vip_range: Option<String>,
    /// The DNS domain of mesh service names (`<service>.<domain>`).
    pub dns_domain: Option<String>,
}

/// Default `--dns-domain` (Kuma's).
pub const DEFAULT_DNS_DOMAIN: &str = "mesh";

/// Default `--drain-timeout`.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `--xds-stream-burst` (see docs/operations.md "Admission").
pub const DEFAULT_XDS_STREAM_BURST: u32 = 5_000;

/// Default `--xds-streams-per-second` (see docs/operations.md "Admission").
pub const DEFAULT_XDS_STREAMS_PER_SECOND: f64 = 5_000.0;

/// Default `--leader-lease`.
pub const DEFAULT_LEADER_LEASE: Duration = Duration::from_secs(15);

/// Default `--dataplane-gc-grace` (Kuma's dataplane cleanup age).
pub const DEFAULT_DATAPLANE_GC_GRACE: Duration = Duration::from_secs(72 * 3600);

/// Default `--http-header-read-timeout`.
pub const DEFAULT_HTTP_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `--http-idle-timeout`: longer than the clients' own pool idle
/// time (reqwest's 90 s), so a client never reuses a connection the
/// control plane is closing.
pub const DEFAULT_HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Default `--http-max-connections`.
pub const DEFAULT_HTTP_MAX_CONNECTIONS: usize = 4096;

/// The limits against slow and idle clients of each HTTP port (the REST
/// API and the grant server; see docs/operations.md "Slow clients").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Longest wait for a complete request header: from the accept
    /// (through the TLS handshake on the grant port), or from the first
    /// byte of a later request on a kept-alive connection.
    pub header_read_timeout: Duration,
    /// Longest wait, with no request in flight, for the next one to begin.
    pub idle_timeout: Duration,
    /// Most connections open at once; more are closed on accept.
    pub max_connections: usize,
}

/// The effective control-plane configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CpConfig {
    /// Where the admin token, the lock file, TLS material and the default
    /// SQLite store live.
    pub data_dir: PathBuf,
    /// Store URL.
    pub store: String,
    /// REST API listen address (default `127.0.0.1:5681`).
    pub api_addr: SocketAddr,
    /// xDS listen address (default `0.0.0.0:5678`).
    pub xds_addr: SocketAddr,
    /// Grant server listen address (default `0.0.0.0:9090`).
    pub grant_addr: SocketAddr,
    /// Advertised host; `None` means "detect at start-up".
    pub advertised_host: Option<String>,
    /// How long shutdown waits for streams and in-flight requests before
    /// forcing the exit (default 10 s).
    pub drain_timeout: Duration,
    /// New ADS streams admitted at once (token-bucket size).
    pub xds_stream_burst: u32,
    /// New ADS streams admitted per second (token-bucket refill).
    pub xds_streams_per_second: f64,
    /// This replica's name; `None` means "hostname and xDS port", chosen
    /// once the port is bound.
    pub instance: Option<String>,
    /// The leader's lease (default 15 s); singleton jobs run every two
    /// leases.
    pub leader_lease: Duration,
    /// How long a dynamically registered Dataplane may stay offline before
    /// it is deleted (default 72 h).
    pub dataplane_gc_grace: Duration,
    /// Limits of the REST API and grant ports against slow clients.
    pub http_limits: HttpLimits,
    /// How much change-feed history the store keeps: the last
    /// `--feed-retain-revisions` changes and those of the last
    /// `--feed-retain-for`, whichever is more (default 10,000 and 10 min).
    /// A watcher further behind gets 410 Gone and lists again.
    pub feed_retention: meshlink_store::Retention,
    /// `--vip-range`: where virtual IPs come from (checked against this
    /// host's interfaces at start).
    pub vip_range: String,
    /// `--dns-domain`: mesh service names are `<service>.<domain>`.
    pub dns_domain: String,
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file is not valid.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field.
        message: String,
    },
    /// A setting is invalid.
    #[error("invalid setting {field}: {message}")]
    Invalid {
        /// The setting, spelled as the flag.
        field: &'static str,
        /// What is wrong and what would be accepted.
        message: String,
    },
}

impl ConfigOverrides {
    /// Reads a YAML config file whose keys are the flag names in camelCase
    /// (`dataDir`, `store`, `apiAddr`, …).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let de = serde_yaml_ng::Deserializer::from_str(&text);
        ConfigOverrides::deserialize(de).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Layers `self` (higher precedence) over `lower`.
    pub fn over(self, lower: ConfigOverrides) -> ConfigOverrides {
        ConfigOverrides {
            data_dir: self.data_dir.or(lower.data_dir),
            store: self.store.or(lower.store),
            api_addr: self.api_addr.or(lower.api_addr),
            xds_addr: self.xds_addr.or(lower.xds_addr),
            grant_addr: self.grant_addr.or(lower.grant_addr),
            advertised_host: self.advertised_host.or(lower.advertised_host),
            drain_timeout: self.drain_timeout.or(lower.drain_timeout),
            xds_stream_burst: self.xds_stream_burst.or(lower.xds_stream_burst),
            xds_streams_per_second: self.xds_streams_per_second.or(lower.xds_streams_per_second),
            instance: self.instance.or(lower.instance),
            leader_lease: self.leader_lease.or(lower.leader_lease),
            dataplane_gc_grace: self.dataplane_gc_grace.or(lower.dataplane_gc_grace),
            http_header_read_timeout: self
                .http_header_read_timeout
                .or(lower.http_header_read_timeout),
            http_idle_timeout: self.http_idle_timeout.or(lower.http_idle_timeout),
            http_max_connections: self.http_max_connections.or(lower.http_max_connections),
            feed_retain_revisions: self.feed_retain_revisions.or(lower.feed_retain_revisions),
            feed_retain_for: self.feed_retain_for.or(lower.feed_retain_for),
            vip_range: self.vip_range.or(lower.vip_range),
            dns_domain: self.dns_domain.or(lower.dns_domain),
        }
    }

    /// Fills defaults and validates.
    pub fn resolve(self) -> Result<CpConfig, ConfigError> {
        let http_limits = self.http_limits()?;
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| PathBuf::from("./meshlink-data"));
        let store = self
            .store
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("store.db").display()));
        if !(store.starts_with("sqlite://")
            || store.starts_with("postgres://")
            || store.starts_with("postgresql://"))
        {
            return Err(ConfigError::Invalid {
                field: "--store",
                message: format!(
                    "unsupported store URL {store:?}; use sqlite://PATH or postgres://USER@HOST:PORT/DB"
                ),
            });
        }
        if let Some(h) = &self.advertised_host
            && (h.is_empty() || h.contains('/') || h.contains(' '))
        {
            return Err(ConfigError::Invalid {
                field: "--advertised-host",
                message: format!("{h:?} is not a host name or IP address"),
            });
        }
        let drain_timeout = duration(
            "--drain-timeout",
            self.drain_timeout.as_deref(),
            DEFAULT_DRAIN_TIMEOUT,
        )?;
        let leader_lease = duration(
            "--leader-lease",
            self.leader_lease.as_deref(),
            DEFAULT_LEADER_LEASE,
        )?;
        if leader_lease < Duration::from_secs(1) {
            return Err(ConfigError::Invalid {
                field: "--leader-lease",
                message: format!(
                    "{leader_lease:?} is too short to renew over a database round trip; give at least 1s"
                ),
            });
        }
        let dataplane_gc_grace = duration(
            "--dataplane-gc-grace",
            self.dataplane_gc_grace.as_deref(),
            DEFAULT_DATAPLANE_GC_GRACE,
        )?;
        if let Some(i) = &self.instance
            && (i.is_empty()
                || i.len() > 200
                || i.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(ConfigError::Invalid {
                field: "--instance",
                message: format!(
                    "{i:?} is not a usable instance name; give 1-200 characters without spaces, e.g. cp-1"
                ),
            });
        }
        let feed_retention =
            feed_retention(self.feed_retain_revisions, self.feed_retain_for.as_deref())?;
        let xds_stream_burst = self.xds_stream_burst.unwrap_or(DEFAULT_XDS_STREAM_BURST);
        if xds_stream_burst == 0 {
            return Err(ConfigError::Invalid {
                field: "--xds-stream-burst",
                message: "0 would refuse every stream; give at least 1".to_owned(),
            });
        }
        let xds_streams_per_second = self
            .xds_streams_per_second
            .unwrap_or(DEFAULT_XDS_STREAMS_PER_SECOND);
        if !(xds_streams_per_second.is_finite() && xds_streams_per_second > 0.0) {
            return Err(ConfigError::Invalid {
                field: "--xds-streams-per-second",
                message: format!(
                    "{xds_streams_per_second} is not a positive number of streams per second"
                ),
            });
        }
        let vip_range = self
            .vip_range
            .unwrap_or_else(|| crate::vips::DEFAULT_VIP_RANGE.to_owned());
        // The interface check needs the host: it is made at start.
        crate::vips::VipRanges::parse(&vip_range, &[]).map_err(|message| ConfigError::Invalid {
            field: "--vip-range",
            message,
        })?;
        let dns_domain = self
            .dns_domain
            .unwrap_or_else(|| DEFAULT_DNS_DOMAIN.to_owned());
        let domain = dns_domain.trim_end_matches('.');
        if domain.is_empty() || !domain.split('.').all(is_dns_label) {
            return Err(ConfigError::Invalid {
                field: "--dns-domain",
                message: format!(
                    "{dns_domain:?} is not a DNS domain: give dot-separated DNS labels \
                     (lowercase letters, digits and '-'), e.g. {DEFAULT_DNS_DOMAIN}"
                ),
            });
        }
        let dns_domain = domain.to_owned();
        Ok(CpConfig {
            vip_range,
            dns_domain,
            http_limits,
            drain_timeout,
            instance: self.instance,
            leader_lease,
            dataplane_gc_grace,
            feed_retention,
            xds_stream_burst,
            xds_streams_per_second,
            data_dir,
            store,
            api_addr: self.api_addr.unwrap_or(([127, 0, 0, 1], 5681).into()),
            xds_addr: self.xds_addr.unwrap_or(([0, 0, 0, 0], 5678).into()),
            grant_addr: self.grant_addr.unwrap_or(([0, 0, 0, 0], 9090).into()),
            advertised_host: self.advertised_host,
        })
    }
}

impl ConfigOverrides {
    /// The HTTP ports' limits: defaults filled, zero refused.
    fn http_limits(&self) -> Result<HttpLimits, ConfigError> {
        let positive = |field: &'static str, given: Option<&str>, default: Duration| {
            let d = duration(field, given, default)?;
            if d.is_zero() {
                return Err(ConfigError::Invalid {
                    field,
                    message: "0 would close every connection at once; give a duration such as 10s"
                        .to_owned(),
                });
            }
            Ok(d)
        };
        let max_connections = self
            .http_max_connections
            .unwrap_or(DEFAULT_HTTP_MAX_CONNECTIONS);
        if max_connections == 0 {
            return Err(ConfigError::Invalid {
                field: "--http-max-connections",
                message: "0 would refuse every connection; give at least 1".to_owned(),
            });
        }
        Ok(HttpLimits {
            header_read_timeout: positive(
                "--http-header-read-timeout",
                self.http_header_read_timeout.as_deref(),
                DEFAULT_HTTP_HEADER_READ_TIMEOUT,
            )?,
            idle_timeout: positive(
                "--http-idle-timeout",
                self.http_idle_timeout.as_deref(),
                DEFAULT_HTTP_IDLE_TIMEOUT,
            )?,
            max_connections,
        })
    }
}

/// The change-feed window from `--feed-retain-revisions` and
/// `--feed-retain-for`; both zero would let compaction delete changes a
/// watcher a moment behind still needs.
fn feed_retention(
    revisions: Option<u64>,
    age: Option<&str>,
) -> Result<meshlink_store::Retention, ConfigError> {
    use meshlink_store::Retention;
    let retention = Retention {
        revisions: revisions.unwrap_or(Retention::DEFAULT_REVISIONS),
        age: duration("--feed-retain-for", age, Retention::DEFAULT_AGE)?,
    };
    if retention.revisions == 0 && retention.age.is_zero() {
        return Err(ConfigError::Invalid {
            field: "--feed-retain-revisions",
            message:
                "0 together with --feed-retain-for 0s would compact changes a watcher a moment \
                behind still needs; keep some history by count or by age (defaults: 10000 and 10m)"
                    .to_owned(),
        });
    }
    Ok(retention)
}

/// Parses a duration setting, naming the flag when it is not one.
fn duration(
    field: &'static str,
    given: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match given {
        None => Ok(default),
        Some(s) => humantime::parse_duration(s).map_err(|e| ConfigError::Invalid {
            field,
            message: format!("{s:?}: {e}; give a duration such as 10s or 1m"),
        }),
    }
}

/// An RFC 1123 label: 1-63 lowercase letters, digits and `-`, not
/// starting or ending with `-`.
fn is_dns_label(label: &str) -> bool {
    (1..=63).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_design() {
        let c = ConfigOverrides::default().resolve().unwrap();
        assert_eq!(c.api_addr.to_string(), "127.0.0.1:5681");
        assert_eq!(c.xds_addr.to_string(), "0.0.0.0:5678");
        assert_eq!(c.grant_addr.to_string(), "0.0.0.0:9090");
        assert_eq!(c.store, "sqlite://./meshlink-data/store.db");
        assert_eq!(c.drain_timeout, Duration::from_secs(10));
        assert_eq!(
            c.http_limits,
            HttpLimits {
                header_read_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(120),
                max_connections: 4096,
            }
        );
    }

    #[test]
    fn http_limits_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cp.yaml");
        std::fs::write(
            &f,
            "httpHeaderReadTimeout: 2s\nhttpIdleTimeout: 1m\nhttpMaxConnections: 10\n",
        )
        .unwrap();
        let c = ConfigOverrides::from_file(&f).unwrap().resolve().unwrap();
        assert_eq!(c.http_limits.header_read_timeout, Duration::from_secs(2));
        assert_eq!(c.http_limits.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.http_limits.max_connections, 10);
        for (bad, field) in [
            (
                ConfigOverrides {
                    http_header_read_timeout: Some("0s".into()),
                    ..Default::default()
                },
                "--http-header-read-timeout",
            ),
            (
                ConfigOverrides {
                    http_idle_timeout: Some("later".into()),
                    ..Default::default()
                },
                "--http-idle-timeout",
            ),
            (
                ConfigOverrides {
                    http_max_connections: Some(0),
                    ..Default::default()
                },
                "--http-max-connections",
            ),
        ] {
            let err = bad.resolve().unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }

    #[test]
    fn drain_timeout_and_admission_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cp.yaml");
        std::fs::write(&f, "drainTimeout: 3s\nxdsStreamBurst: 5\n").unwrap();
        let c = ConfigOverrides::from_file(&f).unwrap().resolve().unwrap();
        assert_eq!(c.drain_timeout, Duration::from_secs(3));
        assert_eq!(c.xds_stream_burst, 5);
        let err = ConfigOverrides {
            drain_timeout: Some("soon".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--drain-timeout") && err.contains("10s"),
            "{err}"
        );
        let err = ConfigOverrides {
            xds_streams_per_second: Some(0.0),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(err.contains("--xds-streams-per-second"), "{err}");
    }

    #[test]
    fn flags_override_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cp.yaml");
        std::fs::write(&f, "dataDir: /srv/a\napiAddr: 127.0.0.1:7000\n").unwrap();
        let file = ConfigOverrides::from_file(&f).unwrap();
        let flags = ConfigOverrides {
            api_addr: Some("127.0.0.1:7001".parse().unwrap()),
            ..Default::default()
        };
        let c = flags.over(file).resolve().unwrap();
        assert_eq!(c.api_addr.to_string(), "127.0.0.1:7001");
        assert_eq!(c.data_dir, PathBuf::from("/srv/a"));
        assert_eq!(c.store, "sqlite:///srv/a/store.db");
    }

    #[test]
    fn unknown_file_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cp.yaml");
        std::fs::write(&f, "apiAdress: 127.0.0.1:7000\n").unwrap();
        let err = ConfigOverrides::from_file(&f).unwrap_err().to_string();
        assert!(err.contains("apiAdress"), "{err}");
    }

    #[test]
    fn feed_retention_has_defaults_and_refuses_keeping_nothing() {
        let c = ConfigOverrides::default().resolve().unwrap();
        assert_eq!(c.feed_retention, meshlink_store::Retention::default());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cp.yaml");
        std::fs::write(&f, "feedRetainRevisions: 500\nfeedRetainFor: 2m\n").unwrap();
        let c = ConfigOverrides::from_file(&f).unwrap().resolve().unwrap();
        assert_eq!(c.feed_retention.revisions, 500);
        assert_eq!(c.feed_retention.age, Duration::from_secs(120));
        let err = ConfigOverrides {
            feed_retain_revisions: Some(0),
            feed_retain_for: Some("0s".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--feed-retain-revisions") && err.contains("keep some history"),
            "{err}"
        );
        let err = ConfigOverrides {
            feed_retain_for: Some("ten minutes".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(err.contains("--feed-retain-for"), "{err}");
    }

    #[test]
    fn bad_store_url_is_rejected() {
        let err = ConfigOverrides {
            store: Some("mysql://x".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--store") && err.contains("sqlite://"),
            "{err}"
        );
    }
}
