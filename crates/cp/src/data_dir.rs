//! The control plane's data directory: the single-instance lock and the
//! admin token.
//!
//! Owns file creation and permissions under `<data-dir>`. It must never
//! overwrite an existing admin token: tokens handed out must keep working.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Another control plane holds the lock.
    #[error(
        "another meshlink-cp is already running with data dir {dir} (lock held on {lock}); stop it first or pass a different --data-dir"
    )]
    Locked {
        /// The data dir.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// A file operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or dir.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// An opened data dir. Holding it holds the exclusive lock; dropping it
/// releases the lock.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> DataDirError + 'a {
    move |source| DataDirError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

impl DataDir {
    /// Creates the directory (0700) if needed and takes its exclusive lock.
    pub fn open(path: &Path) -> Result<Self, DataDirError> {
        std::fs::create_dir_all(path).map_err(io("cannot create data dir", path))?;
        let lock_path = path.join("cp.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io("cannot open lock file", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(DataDirError::Locked {
                    dir: path.to_path_buf(),
                    lock: lock_path,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(io("cannot lock", &lock_path)(e));
            }
        }
        Ok(DataDir {
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `<data-dir>/admin-token` if it exists and is not empty.
    pub fn read_admin_token(&self) -> Result<Option<String>, DataDirError> {
        let path = self.path.join("admin-token");
        match std::fs::read_to_string(&path) {
            Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("cannot read admin token", &path)(e)),
        }
    }

    /// Writes `<data-dir>/admin-token` (0600, atomically).
    pub fn write_admin_token(&self, token: &str) -> Result<(), DataDirError> {
        write_secret_file(&self.path.join("admin-token"), token.as_bytes())
    }

    /// Reads `<data-dir>/admin-token`, creating it (0600, 256 random bits)
    /// on first start.
    pub fn admin_token(&self) -> Result<String, DataDirError> {
        let path = self.path.join("admin-token");
        match std::fs::read_to_string(&path) {
            Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot read admin token", &path)(e)),
        }
        let token = random_token();
        write_secret_file(&path, token.as_bytes())?;
        tracing::info!(path = %path.display(), "created admin token");
        Ok(token)
    }
}

/// 256 random bits, hex encoded.
pub fn random_token() -> String {
    use rand::RngCore;
    let mut buf = [0u8; 32];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a secret file atomically (temp file + rename) with mode 0600, so a
/// reader never sees a half-written file.
pub fn write_secret_file(path: &Path, contents: &[u8]) -> Result<(), DataDirError> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("cannot create", &tmp))?;
    f.write_all(contents).map_err(io("cannot write", &tmp))?;
    f.sync_all().map_err(io("cannot sync", &tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(io("cannot chmod", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("cannot rename into place", path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        let _first = DataDir::open(dir.path()).unwrap();
        let err = DataDir::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("already running"), "{err}");
        assert!(err.contains("--data-dir"), "{err}");
    }

    #[test]
    fn admin_token_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let d = DataDir::open(dir.path()).unwrap();
        let t1 = d.admin_token().unwrap();
        let t2 = d.admin_token().unwrap();
        assert_eq!(t1, t2);
        assert_eq!(t1.len(), 64);
        let mode = std::fs::metadata(dir.path().join("admin-token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
