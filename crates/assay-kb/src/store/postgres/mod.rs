//! [`PgStore`]: the knowledge base (and the user state) in PostgreSQL with pgvector, for a team
//! sharing one knowledge base (cargo feature `postgres`).
//!
//! # Behaviour
//!
//! The same as [`super::SqliteStore`], checked by one behaviour test suite run against both:
//! every change writes a new version row (the old row stays, inactive and no longer current,
//! with `previous_version_id` pointing back to it), nothing is deleted, an update that changes
//! nothing adds no version, and every write is one transaction. Versions are written in the
//! store's transaction, as SQLite does, rather than by the seed's trigger: one code path decides
//! what a version holds (changed fields, carried-over embedding and retrieval count) for both
//! backends. Writers are serialised with a transaction-scoped advisory lock, as SQLite's
//! `BEGIN IMMEDIATE` serialises them, so concurrent editors cannot interleave.
//!
//! # Schema
//!
//! Versioned migrations (`pg_migrations/*.sql`, embedded in the binary) are recorded in
//! `schema_migrations (version, name, applied_at)`; [`PgStore::connect`] applies the missing ones,
//! each in its own transaction under an advisory lock (two processes starting at once do not
//! both migrate), and refuses a database migrated by a newer assay. Departures from 003 §1:
//!
//! * As in SQLite, every version is a row; `is_current` marks the one in use and a partial
//!   unique index allows one current row per `entity_id` (the seed's `UNIQUE (entity_id)`
//!   contradicts its own history rows).
//! * Text columns are `TEXT` rather than `VARCHAR(n)`, so both backends accept the same
//!   entities; `retrieval_count` is `BIGINT`.
//! * `state_conditions`, `changed_fields` and `state_data` are `json`, not `jsonb`: `jsonb`
//!   reorders object keys, and conditions and state are shown and exported in the order written,
//!   the same on both backends.
//! * `embedding` is `vector` of any dimension (the model decides, not the schema), with its model,
//!   dimension and text hash beside it (staleness). HNSW indexes (`vector_cosine_ops`, not the
//!   seed's ivfflat) are made per dimension on `embedding::vector(d)` when the first embedding of
//!   that dimension is stored ([`PgStore::ensure_vector_index`]); [`PgStore::nearest`] queries them
//!   with `ORDER BY embedding <=> $1 LIMIT k` and `hnsw.ef_search` set per query.
//! * Entities are ordered by `entity_id COLLATE "C"` (byte order), as SQLite and the in-memory
//!   knowledge base order them, whatever the database's collation.
//!
//! # Calling an async driver from synchronous traits
//!
//! [`KbStore`] and [`StateStore`] are synchronous, and they are called both from plain threads
//! (the CLI's `kb` commands) and from inside tokio runtimes (the harness's engine, the server's
//! handlers). The store owns a small tokio runtime of its own (one worker thread) on which the
//! connection pool (deadpool-postgres over tokio-postgres) and its connections live. A call made
//! outside any runtime blocks on the store's runtime directly; a call made inside a runtime (of
//! either flavour) runs the query on a short-lived scoped thread that blocks on the store's
//! runtime, while the calling thread waits for it. The query's future never needs the caller's
//! runtime to make progress, so no caller can deadlock it, not even a current-thread runtime
//! (where `block_in_place` would panic) or a runtime whose workers are all busy. The extra
//! thread costs tens of microseconds, small beside a round trip to the database.
//!
//! # Connection and passwords
//!
//! [`PgStore::connect`] takes a `postgres://user@host:port/db` URL (or a libpq key-value
//! string). A password in the URL is refused, so it cannot end up in `assay.toml`, shell history
//! or logs: the password comes from `PGPASSWORD` or a pgpass file (`PGPASSFILE`, else
//! `~/.pgpass`, ignored when others can read it, as libpq does). The user defaults to `PGUSER`,
//! then `USER`. No message ever contains the password; [`PgStore::target`] shows
//! `postgres://user@host:port/db`.

//!
//! [`KbStore`]: super::KbStore
//! [`StateStore`]: crate::StateStore

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use assay_core::entity::Entity;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use pgvector::Vector;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Transaction};

use super::rows::{self, check};
use super::{Edit, StoredEntity, changed_fields};
use crate::KbError;

mod connect;
mod entities;
mod kb_store;
mod schema;
mod search;
mod user_state;

use connect::describe;
use entities::{must_current, write_version};
use schema::{applied_version, migrate};

pub use connect::{connection_config, is_postgres_url};
pub use schema::{PG_SCHEMA_VERSION, hnsw_index_sql};

/// The advisory lock that serialises writes (per database).
const WRITE_LOCK: i64 = 0x6173_7361_795f_7772; // "assay_wr"

/// Connections in the pool.
const POOL_SIZE: usize = 8;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call waits for a free connection.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// The HNSW build parameters of [`PgStore::ensure_vector_index`] (pgvector's defaults). With
/// `ef_search` 100, `bench/store/` measured recall@15 0.999 at 100k rows and 0.968 at 300k:
/// larger tables want a larger `ef_search` or denser graph.
pub const HNSW_M: u32 = 16;
/// See [`HNSW_M`].
pub const HNSW_EF_CONSTRUCTION: u32 = 64;
/// The `hnsw.ef_search` of [`PgStore::nearest`] (at least `k` is used).
pub const HNSW_EF_SEARCH: u32 = 100;
/// pgvector indexes `vector` columns of at most this many dimensions.
const HNSW_MAX_DIM: u32 = 2000;

/// A [`KbStore`] (and [`StateStore`]) in a PostgreSQL database with the pgvector extension.
///
/// [`KbStore`]: super::KbStore
/// [`StateStore`]: crate::StateStore
pub struct PgStore {
    /// Taken when dropped, to shut it down without blocking (dropping a runtime inside another
    /// runtime's context would panic).
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    target: String,
    /// Dimensions whose HNSW index is known to exist.
    indexed: Mutex<HashSet<u32>>,
    /// The pgvector extension's version, `(major, minor, patch)`.
    pgvector: (u32, u32, u32),
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A driver error as a store error: the server's message when it sent one.
fn pg_err(e: &tokio_postgres::Error) -> KbError {
    if let Some(db) = e.as_db_error() {
        let mut message = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            message.push_str(&format!(" ({detail})"));
        }
        KbError::Store(message)
    } else {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(&format!(": {text}"));
            }
            source = cause.source();
        }
        KbError::Store(message)
    }
}

trait PgResult<T> {
    fn pg(self) -> Result<T, KbError>;
}

impl<T> PgResult<T> for Result<T, tokio_postgres::Error> {
    fn pg(self) -> Result<T, KbError> {
        self.map_err(|e| pg_err(&e))
    }
}

impl PgStore {
    /// Connects to the database at `url` (see [`connection_config`]; the environment is read
    /// for `PGPASSWORD`, `PGPASSFILE`, `PGUSER`), checks that it answers, and brings its schema
    /// up to date.
    pub fn connect(url: &str) -> Result<PgStore, KbError> {
        PgStore::connect_with(url, &|name| std::env::var(name).ok())
    }

    /// [`PgStore::connect`] with `env` in place of the environment.
    pub fn connect_with(
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PgStore, KbError> {
        let config = connection_config(url, env)?;
        let target = describe(&config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("assay-postgres")
            .enable_all()
            .build()
            .map_err(|e| KbError::Store(format!("cannot start the PostgreSQL client: {e}")))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| KbError::Store(format!("cannot set up connections to {target}: {e}")))?;
        let mut store = PgStore {
            runtime: Some(runtime),
            pool,
            target,
            indexed: Mutex::new(HashSet::new()),
            pgvector: (0, 0, 0),
        };
        store.pgvector = store.block(async {
            let mut client = store.client().await?;
            migrate(&mut client).await?;
            let version: String = client
                .query_one(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
                    &[],
                )
                .await
                .pg()?
                .try_get(0)
                .pg()?;
            Ok(parse_version(&version))
        })?;
        tracing::debug!(target = %store.target, "opened the PostgreSQL store");
        Ok(store)
    }

    /// The database, as `postgres://user@host:port/db` (never with a password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The pgvector extension's version, `(major, minor, patch)`.
    pub fn pgvector_version(&self) -> (u32, u32, u32) {
        self.pgvector
    }

    /// Whether pgvector can continue an index scan until enough rows pass a filter
    /// (`hnsw.iterative_scan`, pgvector 0.8.0 and later).
    fn iterative_scans(&self) -> bool {
        self.pgvector >= (0, 8, 0)
    }

    /// The settings a search sends before its query: `hnsw.ef_search`, and where pgvector has
    /// iterative scans, whether to use them (the setting stays on the pooled connection, so
    /// every search sets both).
    fn search_settings(&self, ef_search: u32, iterative: bool) -> String {
        let mut set = format!("SET hnsw.ef_search = {ef_search}");
        if self.iterative_scans() {
            let mode = if iterative { "relaxed_order" } else { "off" };
            set.push_str(&format!("; SET hnsw.iterative_scan = {mode}"));
        }
        // A filtered search plans with its parameters' values: the generic plan of the
        // prepared statement estimates an audience as rare and scans the audience's GIN index
        // and sorts, an exact scan in the database (measured: 200 ms at 20k rows where the
        // HNSW scan takes a few).
        let plans = if iterative {
            "force_custom_plan"
        } else {
            "auto"
        };
        set.push_str(&format!("; SET plan_cache_mode = {plans}"));
        set
    }

    /// The schema version of the database (the highest applied migration).
    pub fn schema_version(&self) -> Result<i32, KbError> {
        self.block(async {
            let client = self.client().await?;
            applied_version(&**client).await
        })
    }

    /// Runs `work` to completion on the store's runtime and returns its result (see the module
    /// documentation for why this cannot deadlock).
    fn block<T: Send>(
        &self,
        work: impl Future<Output = Result<T, KbError>> + Send,
    ) -> Result<T, KbError> {
        let Some(runtime) = self.runtime.as_ref() else {
            return Err(KbError::Store("the PostgreSQL store is closed".into()));
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return runtime.block_on(work);
        }
        std::thread::scope(|scope| {
            match std::thread::Builder::new()
                .name("assay-postgres-call".into())
                .spawn_scoped(scope, || runtime.block_on(work))
            {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => Err(KbError::Store(format!("cannot start a thread: {e}"))),
            }
        })
    }

    async fn client(&self) -> Result<Object, KbError> {
        self.pool.get().await.map_err(|e| {
            let reason = match &e {
                deadpool_postgres::PoolError::Backend(e) => match pg_err(e) {
                    KbError::Store(message) => message,
                    other => other.to_string(),
                },
                other => other.to_string(),
            };
            KbError::Store(format!("cannot connect to {}: {reason}", self.target))
        })
    }

    /// Creates the HNSW index (`vector_cosine_ops`) for embeddings of `dim` dimensions, on
    /// entities and on views, unless it exists. pgvector indexes at most 2,000 dimensions; larger
    /// embeddings are searched exactly.
    pub fn ensure_vector_index(&self, dim: u32) -> Result<(), KbError> {
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            self.ensure_index_in(&tx, dim).await?;
            tx.commit().await.pg()
        })
    }

    async fn ensure_index_in(&self, tx: &Transaction<'_>, dim: u32) -> Result<(), KbError> {
        if dim > HNSW_MAX_DIM
            || self
                .indexed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&dim)
        {
            return Ok(());
        }
        tx.batch_execute(&hnsw_index_sql(dim, HNSW_M, HNSW_EF_CONSTRUCTION))
            .await
            .pg()?;
        self.indexed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dim);
        Ok(())
    }

    /// The `k` current, active entities whose stored embedding of `model` is nearest to `query`
    /// by cosine distance, nearest first, found through the HNSW index of the query's dimension
    /// (approximate: `ef_search` candidates are explored, at least `k`). Embeddings are used as
    /// stored: check [`KbStore::embedding_status`] for staleness.
    ///
    /// [`KbStore::embedding_status`]: super::KbStore::embedding_status
    pub fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        ef_search: u32,
    ) -> Result<Vec<(String, f32)>, KbError> {
        let dim = rows::check_embedding("(query)", model, query)?;
        let ef = ef_search
            .max(u32::try_from(k).unwrap_or(u32::MAX))
            .min(1000);
        let sql = format!(
            "SELECT entity_id, (embedding::vector({dim}) <=> $1)::real \
             FROM kb_content_entities \
             WHERE embedding_dim = {dim} AND is_current \
             AND is_active AND embedding_model = $2 \
             ORDER BY embedding::vector({dim}) <=> $1 LIMIT {k}"
        );
        let set = self.search_settings(ef, false);
        let vector = Vector::from(query.to_vec());
        self.block(async {
            let client = self.client().await?;
            // The statement is prepared once per pooled connection (the limit is part of its
            // text, so a generic plan still knows it); the `SET` and the query are
            // pipelined (sent together, answered in order), so a search is one round trip. The
            // setting stays on the connection, and every search sets its own.
            let statement = client.prepare_cached(&sql).await.pg()?;
            let params: [&(dyn ToSql + Sync); 2] = [&vector, &model];
            let (set, rows) = tokio::join!(
                client.batch_execute(&set),
                client.query(&statement, &params)
            );
            set.pg()?;
            rows.pg()?
                .iter()
                .map(|row| Ok((row.try_get(0).pg()?, row.try_get(1).pg()?)))
                .collect()
        })
    }

    /// Applies `change` to the current version of an entity and writes the result as a new
    /// version when it differs.
    fn change(
        &self,
        entity_id: &str,
        edit: &Edit,
        change: impl FnOnce(&Entity) -> Entity + Send,
    ) -> Result<StoredEntity, KbError> {
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let row = must_current(&*tx, entity_id).await?;
            edit.check_version(entity_id, row.version)?;
            let new = change(&row.entity);
            let changed = changed_fields(&row.entity, &new);
            if changed.is_empty() {
                return Ok(row.into_stored());
            }
            check(&new)?;
            write_version(&tx, &new, Some(&row), &changed, edit).await?;
            let stored = must_current(&*tx, entity_id).await?.into_stored();
            tx.commit().await.pg()?;
            Ok(stored)
        })
    }
}

/// Starts a transaction that holds the store's write lock, so its reads and writes see one
/// state (as SQLite's `BEGIN IMMEDIATE`).
async fn write_tx(client: &mut Object) -> Result<deadpool_postgres::Transaction<'_>, KbError> {
    let tx = client.transaction().await.pg()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])
        .await
        .pg()?;
    Ok(tx)
}

/// `major.minor.patch` (missing parts 0, anything unreadable 0).
fn parse_version(text: &str) -> (u32, u32, u32) {
    let mut parts = text
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// The name of the HNSW index over current entities' embeddings of `dim` dimensions.
fn entity_index_name(dim: u32) -> String {
    format!("idx_kb_embedding_hnsw_{dim}")
}
