//! The backends the behaviour tests run against: each test is written once, generic over
//! [`Backend`], and [`backend_tests!`] runs it on SQLite always and on PostgreSQL with the
//! `postgres` feature.
//!
//! The PostgreSQL tests need a server with pgvector: `scripts/test-pg-up` starts one (and
//! `scripts/ci-setup` runs it) and writes its URL to `target/test-pg/url`; `ASSAY_TEST_PG_URL`
//! overrides. Without a server they fail, saying so. Each test gets a database of its own, so
//! the tests run in parallel.

use assay_kb::{KbStore, StateStore};
use serde_json::Value;

/// A fresh, empty store of one backend, with raw access to its rows for the checks that the
/// store's interface cannot make.
pub trait Backend: Sized {
    /// The store.
    type Store: KbStore + StateStore + 'static;

    /// A fresh, empty store.
    fn new() -> Self;

    /// The store.
    fn store(&self) -> &Self::Store;

    /// Another store on the same database (as another process would open it).
    fn reopen(&self) -> Self::Store;

    /// `(version, is_current, is_active)` of every row of an entity, as stored, by version.
    fn rows(&self, entity_id: &str) -> Vec<(u32, bool, bool)>;

    /// How many entity rows the database holds.
    fn total_rows(&self) -> i64;

    /// Makes every insert of a row for `entity_id` fail, as a crash between the two steps of a
    /// version (supersede the old row, insert the new one) would.
    fn crash_on_insert(&self, entity_id: &str);

    /// Undoes [`Backend::crash_on_insert`].
    fn heal(&self);

    /// `(user_type, state_data)` of a user's row, as stored.
    fn user_row(&self, user_id: &str) -> (String, Value);
}

/// Runs each named generic test (`fn name<B: Backend>()`) on every backend.
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::$name::<$crate::backend::Sqlite>();
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[test]
                fn $name() {
                    super::$name::<$crate::backend::Postgres>();
                }
            )*
        }
    };
}
pub(crate) use backend_tests;

/// SQLite in a temporary folder.
pub struct Sqlite {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    store: assay_kb::SqliteStore,
    conn: rusqlite::Connection,
}

impl Backend for Sqlite {
    type Store = assay_kb::SqliteStore;

    fn new() -> Self {
        let (dir, path, store) = crate::file_store();
        let conn = rusqlite::Connection::open(&path).unwrap();
        Sqlite {
            _dir: dir,
            path,
            store,
            conn,
        }
    }

    fn store(&self) -> &Self::Store {
        &self.store
    }

    fn reopen(&self) -> Self::Store {
        assay_kb::SqliteStore::open(&self.path).unwrap()
    }

    fn rows(&self, entity_id: &str) -> Vec<(u32, bool, bool)> {
        self.conn
            .prepare(
                "SELECT version, is_current, is_active FROM kb_content_entities \
                 WHERE entity_id = ?1 ORDER BY version",
            )
            .unwrap()
            .query_map([entity_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn total_rows(&self) -> i64 {
        self.conn
            .query_row("SELECT count(*) FROM kb_content_entities", [], |r| r.get(0))
            .unwrap()
    }

    fn crash_on_insert(&self, entity_id: &str) {
        self.conn
            .execute_batch(&format!(
                "CREATE TRIGGER crash BEFORE INSERT ON kb_content_entities \
                 WHEN NEW.entity_id = '{entity_id}' \
                 BEGIN SELECT RAISE(ABORT, 'simulated crash'); END;"
            ))
            .unwrap();
    }

    fn heal(&self) {
        self.conn.execute_batch("DROP TRIGGER crash").unwrap();
    }

    fn user_row(&self, user_id: &str) -> (String, Value) {
        let (user_type, data): (String, String) = self
            .conn
            .query_row(
                "SELECT user_type, state_data FROM user_state WHERE user_id = ?1",
                [user_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        (user_type, serde_json::from_str(&data).unwrap())
    }
}

#[cfg(feature = "postgres")]
pub use pg::Postgres;

#[cfg(feature = "postgres")]
mod pg {
    use std::path::Path;

    use assay_kb::PgStore;
    use serde_json::Value;

    use super::Backend;

    /// A database of its own on the test server, dropped afterwards.
    pub struct Postgres {
        store: Option<PgStore>,
        url: String,
        admin_url: String,
        database: String,
        runtime: tokio::runtime::Runtime,
        client: tokio_postgres::Client,
    }

    /// The test server's URL: `ASSAY_TEST_PG_URL`, else `target/test-pg/url`.
    pub fn server_url() -> String {
        const HOW: &str = "start one with `scripts/test-pg-up` (scripts/ci-setup does it), or \
                           set ASSAY_TEST_PG_URL to a server with pgvector";
        if let Ok(url) = std::env::var("ASSAY_TEST_PG_URL") {
            return url;
        }
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-pg/url");
        match std::fs::read_to_string(&file) {
            Ok(url) => url.trim().to_owned(),
            Err(e) => panic!(
                "the PostgreSQL store tests need a PostgreSQL server, and none is set up \
                 ({} : {e}): {HOW}",
                file.display()
            ),
        }
    }

    fn connect(runtime: &tokio::runtime::Runtime, url: &str) -> tokio_postgres::Client {
        let (client, connection) = runtime
            .block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))
            .unwrap_or_else(|e| {
                panic!(
                    "cannot reach the PostgreSQL server for the store tests at {url}: {e}; \
                     start it with `scripts/test-pg-up` (scripts/ci-setup does it)"
                )
            });
        runtime.spawn(connection);
        client
    }

    /// `url` with its database replaced by `database`.
    fn with_database(url: &str, database: &str) -> String {
        let (base, _) = url.rsplit_once('/').expect("a URL with a database");
        format!("{base}/{database}")
    }

    impl Postgres {
        /// A new, empty database on the test server (pgvector created in it).
        pub fn database() -> (String, String, String) {
            let admin_url = server_url();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let admin = connect(&runtime, &admin_url);
            let database = format!("assay_test_{}", uuid::Uuid::new_v4().simple());
            runtime
                .block_on(admin.batch_execute(&format!("CREATE DATABASE {database}")))
                .unwrap();
            let url = with_database(&admin_url, &database);
            (admin_url, url, database)
        }
    }

    impl Backend for Postgres {
        type Store = PgStore;

        fn new() -> Self {
            let (admin_url, url, database) = Postgres::database();
            let store = PgStore::connect(&url).unwrap();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let client = connect(&runtime, &url);
            Postgres {
                store: Some(store),
                url,
                admin_url,
                database,
                runtime,
                client,
            }
        }

        fn store(&self) -> &Self::Store {
            self.store.as_ref().unwrap()
        }

        fn reopen(&self) -> Self::Store {
            PgStore::connect(&self.url).unwrap()
        }

        fn rows(&self, entity_id: &str) -> Vec<(u32, bool, bool)> {
            self.runtime
                .block_on(self.client.query(
                    "SELECT version, is_current, is_active FROM kb_content_entities \
                     WHERE entity_id = $1 ORDER BY version",
                    &[&entity_id],
                ))
                .unwrap()
                .iter()
                .map(|r| (r.get::<_, i32>(0).try_into().unwrap(), r.get(1), r.get(2)))
                .collect()
        }

        fn total_rows(&self) -> i64 {
            self.runtime
                .block_on(
                    self.client
                        .query_one("SELECT count(*) FROM kb_content_entities", &[]),
                )
                .unwrap()
                .get(0)
        }

        fn crash_on_insert(&self, entity_id: &str) {
            self.runtime
                .block_on(self.client.batch_execute(&format!(
                    "CREATE FUNCTION crash() RETURNS trigger LANGUAGE plpgsql AS $$ \
                     BEGIN RAISE EXCEPTION 'simulated crash'; END $$; \
                     CREATE TRIGGER crash BEFORE INSERT ON kb_content_entities FOR EACH ROW \
                     WHEN (NEW.entity_id = '{entity_id}') EXECUTE FUNCTION crash();"
                )))
                .unwrap();
        }

        fn heal(&self) {
            self.runtime
                .block_on(self.client.batch_execute(
                    "DROP TRIGGER crash ON kb_content_entities; DROP FUNCTION crash();",
                ))
                .unwrap();
        }

        fn user_row(&self, user_id: &str) -> (String, Value) {
            let row = self
                .runtime
                .block_on(self.client.query_one(
                    "SELECT user_type, state_data FROM user_state WHERE user_id = $1",
                    &[&user_id],
                ))
                .unwrap();
            (row.get(0), row.get(1))
        }
    }

    impl Drop for Postgres {
        fn drop(&mut self) {
            drop(self.store.take());
            let admin = connect(&self.runtime, &self.admin_url);
            // Best effort: the test server is thrown away anyway.
            let _ = self.runtime.block_on(admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.database
            )));
        }
    }
}
