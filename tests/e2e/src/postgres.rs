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
