//! A fresh PostgreSQL database per test, on the server named by
//! `MESHLINK_TEST_POSTGRES_URL` (started by `scripts/pg-test-server start`).

use sqlx::Connection;

/// Creates a new, empty database and returns its URL. Panics with the fix
/// when no test server is configured: a PostgreSQL test never silently passes.
pub fn fresh_postgres_database() -> String {
    let admin = std::env::var("MESHLINK_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "MESHLINK_TEST_POSTGRES_URL is not set; start a throwaway server with \
             `scripts/pg-test-server start` and export the URL it prints (scripts/test does both)"
        )
    });
    let name = format!("e2e_{}", uuid::Uuid::new_v4().simple());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {admin}: {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create database");
    });
    match admin.rfind('/') {
        Some(i) if admin[..i].contains("://") && i > admin.find("://").unwrap() + 2 => {
            format!("{}/{name}", &admin[..i])
        }
        _ => panic!("MESHLINK_TEST_POSTGRES_URL {admin:?} must end with /DBNAME"),
    }
}

/// A PostgreSQL server of one test's own (`scripts/pg-test-server` with its
/// own directory and port), so the test may stop and restart it without
/// disturbing other tests. Removed on drop.
pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    /// The server's admin URL (`.../postgres`).
    pub url: String,
}

impl PrivatePostgres {
    /// Starts a new server on a free port from `first_port` on.
    pub fn start(first_port: u16) -> PrivatePostgres {
        let dir = tempfile::tempdir().expect("tempdir");
        // The server runs as the `postgres` user, which must reach its
        // directory inside this one.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod tempdir");
        let mut pg = PrivatePostgres {
            dir,
            url: String::new(),
        };
        pg.url = pg.run("start", first_port);
        pg
    }

    fn run(&self, cmd: &str, first_port: u16) -> String {
        let script = crate::workspace_root().join("scripts/pg-test-server");
        let out = std::process::Command::new(script)
            .arg(cmd)
            .env("MESHLINK_PG_DIR", self.dir.path().join("pg"))
            .env("MESHLINK_PG_PORT", first_port.to_string())
            .output()
            .expect("run scripts/pg-test-server");
        assert!(
            out.status.success(),
            "pg-test-server {cmd} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Stops the server, keeping its data.
    pub fn pause(&self) {
        self.run("pause", 0);
    }

    /// Starts it again on the same port and data.
    pub fn resume(&self) {
        let url = self.run("start", 0);
        assert_eq!(url, self.url, "the server came back on another port");
    }

    /// A URL for database `db` on this server (created with [`Self::create`]).
    pub fn database_url(&self, db: &str) -> String {
        let base = self.url.rsplit_once('/').expect("URL ends with /DB").0;
        format!("{base}/{db}")
    }

    /// Creates database `db`.
    pub fn create(&self, db: &str) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&self.url)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url));
            sqlx::query(&format!("CREATE DATABASE {db}"))
                .execute(&mut conn)
                .await
                .expect("create database");
        });
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.run_quiet("stop");
    }
}

impl PrivatePostgres {
    fn run_quiet(&self, cmd: &str) -> std::io::Result<std::process::Output> {
        let script = crate::workspace_root().join("scripts/pg-test-server");
        std::process::Command::new(script)
            .arg(cmd)
            .env("MESHLINK_PG_DIR", self.dir.path().join("pg"))
            .output()
    }
}
