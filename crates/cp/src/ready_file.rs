//! `meshlink-cp run --ready-file PATH`: once every listener is bound, the
//! bound addresses are written to `PATH` as one JSON object,
//! `{"apiAddr": "127.0.0.1:5681", "xdsAddr": "0.0.0.0:5678", "grantAddr": "0.0.0.0:9090"}`.
//!
//! Owns the file's format and its atomic write (a temporary file in the
//! same directory, then a rename), so a reader that sees the file sees it
//! whole. With `--api-addr 127.0.0.1:0` this is how a script or test
//! learns the ports the kernel picked, without racing anyone for a port.
//! It never writes before the listeners are bound.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::RunningControlPlane;

/// Why the ready file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write --ready-file {path}: {source}; pass a path in a writable directory")]
pub struct ReadyFileError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// The file's contents for `cp`.
pub fn contents(cp: &RunningControlPlane) -> String {
    let json = serde_json::json!({
        "apiAddr": cp.api_addr.to_string(),
        "xdsAddr": cp.xds_addr.to_string(),
        "grantAddr": cp.grant_addr.to_string(),
    });
    format!("{json}\n")
}

impl RunningControlPlane {
    /// Writes the bound addresses to `path` atomically (see the module).
    pub fn write_ready_file(&self, path: &Path) -> Result<(), ReadyFileError> {
        write_atomically(path, contents(self).as_bytes()).map_err(|source| ReadyFileError {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_appears_whole_and_replaces_an_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        std::fs::write(&path, "stale").unwrap();
        write_atomically(&path, b"{\"apiAddr\":\"127.0.0.1:1\"}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"apiAddr\":\"127.0.0.1:1\"}\n"
        );
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }

    #[test]
    fn an_unwritable_path_names_the_flag() {
        let err = write_atomically(Path::new("/nonexistent/dir/ready.json"), b"x").unwrap_err();
        let e = ReadyFileError {
            path: "/nonexistent/dir/ready.json".into(),
            source: err,
        };
        assert!(
            e.to_string()
                .contains("--ready-file /nonexistent/dir/ready.json"),
            "{e}"
        );
    }
}
