//! Control-plane configuration: defaults, the YAML config file, environment
//! and flags, merged in that order of increasing precedence.
//!
//! Owns what each setting means and its default (DESIGN.md §5). It never
//! touches the filesystem beyond reading the config file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
}

/// The effective control-plane configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }

    /// Fills defaults and validates.
    pub fn resolve(self) -> Result<CpConfig, ConfigError> {
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
        Ok(CpConfig {
            data_dir,
            store,
            api_addr: self.api_addr.unwrap_or(([127, 0, 0, 1], 5681).into()),
            xds_addr: self.xds_addr.unwrap_or(([0, 0, 0, 0], 5678).into()),
            grant_addr: self.grant_addr.unwrap_or(([0, 0, 0, 0], 9090).into()),
            advertised_host: self.advertised_host,
        })
    }
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
