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

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use assay_core::UserState;
use assay_core::entity::{Entity, EntityType, LoadMode, Priority};
use chrono::{DateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use pgvector::Vector;
use serde_json::{Map, Value};
use tokio_postgres::config::Host;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, GenericClient, NoTls, Row, Transaction};

use super::rows::{self, EDITABLE_BY, LOAD_MODES, VersionRow, by_name, check, editable_by_name};
use super::{
    Edit, EmbeddingHit, EmbeddingIndex, EmbeddingSearch, EntityUpdate, EntityVersion, ImportReport,
    KbStats, KbStore, SearchMethod, Staleness, StoredEntity, ViewEmbedding, changed_fields,
};
use crate::user_state::{Record, interaction};
use crate::{EntityFilter, KbError, KnowledgeBase, StateStore};

/// The migrations, in order: `(version, name, SQL)`. Append; never edit one once released.
const MIGRATIONS: &[(i32, &str, &str)] =
    &[(1, "initial", include_str!("pg_migrations/0001_initial.sql"))];

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The advisory lock that serialises migrations (per database).
const MIGRATION_LOCK: i64 = 0x6173_7361_795f_6d67; // "assay_mg"
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

/// Whether `store` names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(store: &str) -> bool {
    let lower = store.trim().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A connection target, parsed and checked: no password in it, the user filled in, the password
/// looked up from `PGPASSWORD` or the pgpass file. `env` reads the environment.
pub fn connection_config(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, KbError> {
    let mut config = Config::from_str(url.trim()).map_err(|e| {
        KbError::Invalid(format!(
            "the store `{}` is not a PostgreSQL URL: {e}",
            redact(url)
        ))
    })?;
    if config.get_password().is_some() {
        return Err(KbError::Invalid(format!(
            "the store URL `{}` contains a password: remove it, and give the password in \
             PGPASSWORD or a pgpass file (~/.pgpass or PGPASSFILE) instead",
            redact(url)
        )));
    }
    if config.get_user().is_none() {
        let user = env("PGUSER").or_else(|| env("USER")).ok_or_else(|| {
            KbError::Invalid(format!(
                "the store URL `{}` names no user: write postgres://USER@host/db or set PGUSER",
                redact(url)
            ))
        })?;
        config.user(user);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("assay");
    }
    if let Some(password) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password);
    } else if let Some(password) = pgpass_lookup(&config, env) {
        config.password(password);
    }
    Ok(config)
}

/// `url` with any password replaced by `***`, for messages.
fn redact(url: &str) -> String {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        // A key-value string: hide the value of `password=`.
        return url
            .split_whitespace()
            .map(|part| {
                if part.to_ascii_lowercase().starts_with("password=") {
                    "password=***"
                } else {
                    part
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            let masked = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{masked}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

/// How a target reads in messages: `postgres://user@host:port/db`, never with a password.
fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// The password for `config` from the pgpass file (`PGPASSFILE`, else `~/.pgpass`), as libpq
/// finds it: the first line whose host, port, database and user match (`*` matches anything).
fn pgpass_lookup(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let path = match env("PGPASSFILE") {
        Some(path) => PathBuf::from(path),
        None => Path::new(&env("HOME")?).join(".pgpass"),
    };
    let text = std::fs::read_to_string(&path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                "the password file is readable by others and is ignored (chmod 600 it)"
            );
            return None;
        }
    }
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(_)) | None => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_owned();
    let db = config.get_dbname().unwrap_or(&user).to_owned();
    pgpass_find(&text, [&host, &port, &db, &user])
}

/// The password of the first pgpass line matching `want` (host, port, database, user).
fn pgpass_find(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = pgpass_fields(line);
        if fields.len() != 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(field, want)| field == "*" || field == want)
        {
            return Some(fields[4].clone());
        }
    }
    None
}

/// The colon-separated fields of a pgpass line (`\:` and `\\` escape).
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next()
                    && let Some(f) = fields.last_mut()
                {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
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

    /// Loads a user's record (or the defaults), changes it, and saves it, in one transaction.
    fn modify_user(
        &self,
        user_id: &str,
        now: DateTime<Utc>,
        change: impl FnOnce(&mut Record) -> Result<(), KbError> + Send,
    ) -> Result<UserState, KbError> {
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let mut record = load_user(&*tx, user_id).await?.unwrap_or_default();
            change(&mut record)?;
            save_user(&tx, &record, user_id, now).await?;
            tx.commit().await.pg()?;
            Ok(record.to_state(user_id, now))
        })
    }
}

/// The statements that create the HNSW indexes (`vector_cosine_ops`) for embeddings of `dim`
/// dimensions, on current entities (`idx_kb_embedding_hnsw_<dim>`, the index
/// [`PgStore::nearest`] uses) and on views, with build parameters `m` and `ef_construction`,
/// unless they exist.
pub fn hnsw_index_sql(dim: u32, m: u32, ef_construction: u32) -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS idx_kb_embedding_hnsw_{dim} ON kb_content_entities \
         USING hnsw ((embedding::vector({dim})) vector_cosine_ops) \
         WITH (m = {m}, ef_construction = {ef_construction}) \
         WHERE embedding_dim = {dim} AND is_current; \
         CREATE INDEX IF NOT EXISTS idx_kb_view_embedding_hnsw_{dim} ON kb_view_embeddings \
         USING hnsw ((embedding::vector({dim})) vector_cosine_ops) \
         WITH (m = {m}, ef_construction = {ef_construction}) WHERE dim = {dim};"
    )
}

/// The highest applied migration (0 for a new database).
async fn applied_version(client: &impl GenericClient) -> Result<i32, KbError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await
        .pg()?
        .try_get(0)
        .pg()?;
    if !exists {
        return Ok(0);
    }
    client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .pg()?
        .try_get(0)
        .pg()
}

/// Brings the database to [`PG_SCHEMA_VERSION`], one migration per transaction.
async fn migrate(client: &mut Object) -> Result<(), KbError> {
    loop {
        let tx = client.transaction().await.pg()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .pg()?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )
        .await
        .pg()?;
        let current = applied_version(&*tx).await?;
        if current > PG_SCHEMA_VERSION {
            return Err(KbError::Store(format!(
                "the database has schema version {current}, newer than this assay supports \
                 ({PG_SCHEMA_VERSION}): upgrade assay"
            )));
        }
        let Some((version, name, sql)) = MIGRATIONS
            .iter()
            .find(|(version, _, _)| *version == current + 1)
        else {
            return Ok(());
        };
        tx.batch_execute(sql).await.pg()?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await
        .pg()?;
        tx.commit().await.pg()?;
        tracing::debug!(
            version,
            name,
            "migrated the PostgreSQL knowledge-base schema"
        );
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

/// The columns every entity query reads, in this order (see [`read_row`]).
const COLUMNS: &str = "id::text, entity_id, entity_type, subtype, title, concept_summary, \
     recognition, keywords, guidance_do, guidance_dont, examples, red_flags, load_mode, priority, \
     state_conditions, audience_types, source_author, source_title, source_year, is_active, \
     editable_by, version, previous_version_id::text, is_current, retrieval_count, created_at, \
     updated_at, created_by, embedding_model, embedding_text_hash, changed_fields";

fn read_row(row: &Row) -> Result<VersionRow, KbError> {
    let id: String = row.try_get(0).pg()?;
    let bad =
        |column: &str, value: &str| KbError::Store(format!("row {id}: bad {column} `{value}`"));
    let text = |at: usize| -> Result<Option<String>, KbError> { row.try_get(at).pg() };
    let entity_type: String = row.try_get(2).pg()?;
    let load_mode: String = row.try_get(12).pg()?;
    let priority: i32 = row.try_get(13).pg()?;
    let state_conditions: Option<Value> = row.try_get(14).pg()?;
    let editable_by: String = row.try_get(20).pg()?;
    let version: i32 = row.try_get(21).pg()?;
    let retrieval_count: i64 = row.try_get(24).pg()?;
    let changed: Option<Value> = row.try_get(30).pg()?;
    let entity = Entity {
        entity_id: row.try_get(1).pg()?,
        entity_type: by_name(&EntityType::ALL, EntityType::as_str, &entity_type)
            .ok_or_else(|| bad("entity_type", &entity_type))?,
        subtype: text(3)?,
        title: row.try_get(4).pg()?,
        concept_summary: text(5)?,
        recognition: text(6)?,
        keywords: text(7)?,
        guidance_do: text(8)?,
        guidance_dont: text(9)?,
        examples: text(10)?,
        red_flags: text(11)?,
        load_mode: by_name(&LOAD_MODES, LoadMode::as_str, &load_mode)
            .ok_or_else(|| bad("load_mode", &load_mode))?,
        priority: u8::try_from(priority)
            .ok()
            .and_then(Priority::new)
            .ok_or_else(|| bad("priority", &priority.to_string()))?,
        state_conditions: match state_conditions {
            None => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => return Err(bad("state_conditions", &other.to_string())),
        },
        audience_types: row.try_get(15).pg()?,
        source_author: text(16)?,
        source_title: text(17)?,
        source_year: row.try_get(18).pg()?,
        is_active: row.try_get(19).pg()?,
        editable_by: by_name(&EDITABLE_BY, editable_by_name, &editable_by)
            .ok_or_else(|| bad("editable_by", &editable_by))?,
    };
    Ok(VersionRow {
        entity,
        version: u32::try_from(version).map_err(|_| bad("version", &version.to_string()))?,
        previous_version_id: row.try_get(22).pg()?,
        is_current: row.try_get(23).pg()?,
        retrieval_count: u64::try_from(retrieval_count)
            .map_err(|_| bad("retrieval_count", &retrieval_count.to_string()))?,
        created_at: row.try_get(25).pg()?,
        updated_at: row.try_get(26).pg()?,
        created_by: row.try_get(27).pg()?,
        embedding_model: text(28)?,
        embedding_text_hash: text(29)?,
        changed_fields: match changed {
            None => Vec::new(),
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|_| bad("changed_fields", &value.to_string()))?,
        },
        id,
    })
}

fn read_rows(rows: &[Row]) -> Result<Vec<VersionRow>, KbError> {
    rows.iter().map(read_row).collect()
}

/// The current version of an entity.
async fn current(
    client: &impl GenericClient,
    entity_id: &str,
) -> Result<Option<VersionRow>, KbError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM kb_content_entities WHERE entity_id = $1 AND is_current"
            ),
            &[&entity_id],
        )
        .await
        .pg()?;
    rows.first().map(read_row).transpose()
}

async fn must_current(client: &impl GenericClient, entity_id: &str) -> Result<VersionRow, KbError> {
    current(client, entity_id)
        .await?
        .ok_or_else(|| KbError::NotFound(entity_id.to_owned()))
}

/// The current versions passing `filter`, by priority (highest first), then id (byte order).
async fn current_rows(
    client: &impl GenericClient,
    filter: &EntityFilter,
) -> Result<Vec<VersionRow>, KbError> {
    let mut sql = format!("SELECT {COLUMNS} FROM kb_content_entities WHERE is_current");
    let entity_type = filter.entity_type.map(EntityType::as_str);
    let load_mode = filter.load_mode.map(LoadMode::as_str);
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some(entity_type) = &entity_type {
        params.push(entity_type);
        sql.push_str(&format!(" AND entity_type = ${}", params.len()));
    }
    if let Some(load_mode) = &load_mode {
        params.push(load_mode);
        sql.push_str(&format!(" AND load_mode = ${}", params.len()));
    }
    if let Some(active) = &filter.active {
        params.push(active);
        sql.push_str(&format!(" AND is_active = ${}", params.len()));
    }
    if let Some(audience) = &filter.audience {
        // Served by the GIN index on audience_types.
        params.push(audience);
        sql.push_str(&format!(
            " AND audience_types @> ARRAY[${}::text]",
            params.len()
        ));
    }
    sql.push_str(" ORDER BY priority DESC, entity_id COLLATE \"C\"");
    let rows = client.query(&sql, &params).await.pg()?;
    Ok(read_rows(&rows)?
        .into_iter()
        .filter(|r| filter.accepts(&r.entity))
        .collect())
}

/// Writes `entity` as a new row: version 1 without `previous`, else the version after it, which
/// stops being current and active. The embedding and the retrieval count carry over.
const INSERT: &str = "INSERT INTO kb_content_entities (id, entity_id, entity_type, subtype, \
     title, concept_summary, recognition, keywords, guidance_do, guidance_dont, examples, \
     red_flags, load_mode, priority, state_conditions, audience_types, source_author, \
     source_title, source_year, is_active, editable_by, embedding, embedding_model, \
     embedding_dim, embedding_text_hash, retrieval_count, created_at, updated_at, created_by, \
     version, previous_version_id, is_current, changed_fields) \
     SELECT $1::text::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, \
     $8::text, $9::text, $10::text, $11::text, $12::text, $13::text, $14::int4, $15::json, \
     $16::text[], $17::text, $18::text, $19::int4, $20::bool, $21::text, p.embedding, \
     p.embedding_model, p.embedding_dim, p.embedding_text_hash, coalesce(p.retrieval_count, 0), \
     $22::timestamptz, $22::timestamptz, $23::text, coalesce(p.version, 0) + 1, p.id, TRUE, \
     $24::json \
     FROM (SELECT 1) AS one LEFT JOIN kb_content_entities p ON p.id = $25::text::uuid";

/// Writes `entity` as version 1 (`previous` is `None`) or as the version after `previous`,
/// which stops being current and active. `changed` names the fields that differ.
async fn write_version(
    tx: &Transaction<'_>,
    entity: &Entity,
    previous: Option<&VersionRow>,
    changed: &[&str],
    edit: &Edit,
) -> Result<(), KbError> {
    if let Some(previous) = previous {
        let superseded = tx
            .execute(
                "UPDATE kb_content_entities SET is_current = FALSE, is_active = FALSE, \
                 updated_at = $1 WHERE id = $2::text::uuid AND is_current",
                &[&edit.at, &previous.id],
            )
            .await
            .pg()?;
        if superseded != 1 {
            return Err(KbError::Store(format!(
                "entity `{}`: version {} is no longer current",
                entity.entity_id, previous.version
            )));
        }
    }
    let state_conditions = entity.state_conditions.clone().map(Value::Object);
    let changed_fields = previous.map(|_| Value::from(changed.to_vec()));
    let id = uuid::Uuid::new_v4().to_string();
    let priority = i32::from(entity.priority.get());
    let previous_id = previous.map(|p| p.id.as_str());
    tx.execute(
        INSERT,
        &[
            &id,
            &entity.entity_id,
            &entity.entity_type.as_str(),
            &entity.subtype,
            &entity.title,
            &entity.concept_summary,
            &entity.recognition,
            &entity.keywords,
            &entity.guidance_do,
            &entity.guidance_dont,
            &entity.examples,
            &entity.red_flags,
            &entity.load_mode.as_str(),
            &priority,
            &state_conditions,
            &entity.audience_types,
            &entity.source_author,
            &entity.source_title,
            &entity.source_year,
            &entity.is_active,
            &editable_by_name(entity.editable_by),
            &edit.at,
            &edit.by,
            &changed_fields,
            &previous_id,
        ],
    )
    .await
    .map_err(|e| {
        if e.as_db_error()
            .and_then(|db| db.constraint())
            .is_some_and(|c| c == "idx_kb_current_entity")
        {
            KbError::AlreadyExists(entity.entity_id.clone())
        } else {
            pg_err(&e)
        }
    })?;
    Ok(())
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

/// Searches the current entities' embeddings (see [`EmbeddingIndex`]).
///
/// With [`SearchMethod::Index`], the query is the one the HNSW index answers:
/// `ORDER BY embedding::vector(d) <=> $1 LIMIT n`, with the filters in its `WHERE` clause.
/// pgvector applies a filter to the rows the index yields, so on its own it would return fewer
/// than `n` rows when fewer than `n` of the `ef_search` it explores pass; from pgvector 0.8.0 the
/// search sets `hnsw.iterative_scan = relaxed_order`, so that the scan goes on until `n` rows
/// pass (or `hnsw.max_scan_tuples`, 20,000 by default, have been visited). The rows may come
/// slightly out of order: callers rescore them. With [`SearchMethod::Exact`] the same filters
/// and order without the index (`embedding <=> $1` is not the indexed expression): every
/// matching row is scored.
impl EmbeddingIndex for PgStore {
    fn describe(&self) -> String {
        let (major, minor, patch) = self.pgvector;
        format!("PostgreSQL HNSW (pgvector {major}.{minor}.{patch})")
    }

    fn has_index(&self, dimension: usize) -> Result<bool, KbError> {
        let Ok(dim) = u32::try_from(dimension) else {
            return Ok(false);
        };
        if dim == 0 || dim > HNSW_MAX_DIM {
            return Ok(false);
        }
        let name = entity_index_name(dim);
        self.block(async {
            let client = self.client().await?;
            client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                     WHERE c.relname = $1 AND i.indisvalid)",
                    &[&name],
                )
                .await
                .pg()?
                .try_get(0)
                .pg()
        })
    }

    fn embedding_dimension(&self, model: &str) -> Result<Option<usize>, KbError> {
        self.block(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT embedding_dim FROM kb_content_entities \
                     WHERE is_current AND embedding_model = $1 LIMIT 1",
                    &[&model],
                )
                .await
                .pg()?;
            rows.first()
                .map(|row| {
                    let dim: i32 = row.try_get(0).pg()?;
                    usize::try_from(dim)
                        .map_err(|_| KbError::Store(format!("bad embedding_dim {dim}")))
                })
                .transpose()
        })
    }

    fn search_embeddings(
        &self,
        search: &EmbeddingSearch<'_>,
    ) -> Result<Vec<EmbeddingHit>, KbError> {
        let dim = rows::check_embedding("(query)", search.model, search.query)?;
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let limit = search.limit;
        let mut filters =
            format!("embedding_dim = {dim} AND is_current AND is_active AND embedding_model = $2");
        let load_mode = search.load_mode.map(LoadMode::as_str);
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(4);
        let vector = Vector::from(search.query.to_vec());
        params.push(&vector);
        params.push(&search.model);
        if let Some(mode) = &load_mode {
            params.push(mode);
            filters.push_str(&format!(" AND load_mode = ${}", params.len()));
        }
        if let Some(audience) = &search.audience {
            params.push(audience);
            filters.push_str(&format!(
                " AND audience_types @> ARRAY[${}::text]",
                params.len()
            ));
        }
        let (order, set) = match search.method {
            SearchMethod::Index { ef_search } => {
                let ef = ef_search
                    .max(u32::try_from(limit).unwrap_or(u32::MAX))
                    .min(1000);
                (
                    format!("embedding::vector({dim}) <=> $1"),
                    Some(self.search_settings(ef, true)),
                )
            }
            SearchMethod::Exact => ("embedding <=> $1".to_owned(), None),
        };
        let sql = format!(
            "SELECT entity_id, embedding_text_hash, embedding FROM kb_content_entities \
             WHERE {filters} ORDER BY {order} LIMIT {limit}"
        );
        self.block(async {
            let client = self.client().await?;
            let statement = client.prepare_cached(&sql).await.pg()?;
            // As in `nearest`: the settings and the query pipelined, one round trip.
            let rows = match &set {
                Some(set) => {
                    let (set, rows) =
                        tokio::join!(client.batch_execute(set), client.query(&statement, &params));
                    set.pg()?;
                    rows.pg()?
                }
                None => client.query(&statement, &params).await.pg()?,
            };
            rows.iter()
                .map(|row| {
                    let vector: Vector = row.try_get(2).pg()?;
                    Ok(EmbeddingHit {
                        entity_id: row.try_get(0).pg()?,
                        text_hash: row.try_get(1).pg()?,
                        vector: vector.to_vec(),
                    })
                })
                .collect()
        })
    }
}

impl KnowledgeBase for PgStore {
    fn get(&self, entity_id: &str) -> Result<Option<Entity>, KbError> {
        self.block(async {
            let client = self.client().await?;
            Ok(current(&**client, entity_id).await?.map(|r| r.entity))
        })
    }

    fn list(&self, filter: &EntityFilter) -> Result<Vec<Entity>, KbError> {
        self.block(async {
            let client = self.client().await?;
            Ok(current_rows(&**client, filter)
                .await?
                .into_iter()
                .map(|r| r.entity)
                .collect())
        })
    }

    fn contains(&self, entity_id: &str) -> Result<bool, KbError> {
        self.block(async {
            let client = self.client().await?;
            client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM kb_content_entities \
                     WHERE entity_id = $1 AND is_current)",
                    &[&entity_id],
                )
                .await
                .pg()?
                .try_get(0)
                .pg()
        })
    }
}

impl KbStore for PgStore {
    fn get_stored(&self, entity_id: &str) -> Result<Option<StoredEntity>, KbError> {
        self.block(async {
            let client = self.client().await?;
            Ok(current(&**client, entity_id)
                .await?
                .map(VersionRow::into_stored))
        })
    }

    fn create(&self, entity: &Entity, edit: &Edit) -> Result<StoredEntity, KbError> {
        check(entity)?;
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            if current(&*tx, &entity.entity_id).await?.is_some() {
                return Err(KbError::AlreadyExists(entity.entity_id.clone()));
            }
            write_version(&tx, entity, None, &[], edit).await?;
            let stored = must_current(&*tx, &entity.entity_id).await?.into_stored();
            tx.commit().await.pg()?;
            Ok(stored)
        })
    }

    fn update(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        edit: &Edit,
    ) -> Result<StoredEntity, KbError> {
        self.change(entity_id, edit, |entity| update.apply(entity))
    }

    fn deactivate(&self, entity_id: &str, edit: &Edit) -> Result<StoredEntity, KbError> {
        self.change(entity_id, edit, |entity| Entity {
            is_active: false,
            ..entity.clone()
        })
    }

    fn history(&self, entity_id: &str) -> Result<Vec<EntityVersion>, KbError> {
        self.block(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM kb_content_entities WHERE entity_id = $1 \
                         ORDER BY version"
                    ),
                    &[&entity_id],
                )
                .await
                .pg()?;
            rows::history(entity_id, read_rows(&rows)?)
        })
    }

    fn import(&self, entities: &[Entity], edit: &Edit) -> Result<ImportReport, KbError> {
        let ids = rows::check_import(entities)?;
        let report = self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let stored: BTreeMap<String, VersionRow> = current_rows(&*tx, &EntityFilter::default())
                .await?
                .into_iter()
                .map(|r| (r.entity.entity_id.clone(), r))
                .collect();
            let (report, writes) = rows::plan_import(&stored, entities, &ids);
            for write in &writes {
                write_version(&tx, &write.entity, write.previous, &write.changed, edit).await?;
            }
            tx.commit().await.pg()?;
            Ok(report)
        })?;
        rows::log_import(&report);
        Ok(report)
    }

    fn export(&self) -> Result<Vec<Entity>, KbError> {
        self.block(async {
            let client = self.client().await?;
            Ok(rows::export(
                current_rows(&**client, &EntityFilter::default()).await?,
            ))
        })
    }

    fn set_embedding(&self, entity_id: &str, model: &str, vector: &[f32]) -> Result<(), KbError> {
        let dim = rows::check_embedding(entity_id, model, vector)?;
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let row = must_current(&*tx, entity_id).await?;
            self.ensure_index_in(&tx, dim).await?;
            tx.execute(
                "UPDATE kb_content_entities SET embedding = $1, embedding_model = $2, \
                 embedding_dim = $3, embedding_text_hash = $4 WHERE id = $5::text::uuid",
                &[
                    &Vector::from(vector.to_vec()),
                    &model,
                    &i32::try_from(dim).unwrap_or(i32::MAX),
                    &rows::text_hash(&row.entity),
                    &row.id,
                ],
            )
            .await
            .pg()?;
            tx.commit().await.pg()
        })
    }

    fn embedding_status(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Staleness)>, KbError> {
        self.block(async {
            let client = self.client().await?;
            Ok(current_rows(&**client, filter)
                .await?
                .into_iter()
                .map(|r| {
                    let staleness = r.staleness(model);
                    (r.entity.entity_id, staleness)
                })
                .collect())
        })
    }

    fn current_embeddings(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Vec<f32>)>, KbError> {
        self.block(async {
            let client = self.client().await?;
            let fresh: Vec<String> = current_rows(&**client, filter)
                .await?
                .into_iter()
                .filter(|r| r.staleness(model).is_fresh())
                .map(|r| r.entity.entity_id)
                .collect();
            if fresh.is_empty() {
                return Ok(Vec::new());
            }
            let rows = client
                .query(
                    "SELECT entity_id, embedding FROM kb_content_entities \
                     WHERE is_current AND embedding_model = $1",
                    &[&model],
                )
                .await
                .pg()?;
            let mut vectors = std::collections::HashMap::with_capacity(rows.len());
            for row in &rows {
                let id: String = row.try_get(0).pg()?;
                let vector: Vector = row.try_get(1).pg()?;
                vectors.insert(id, vector.to_vec());
            }
            Ok(fresh
                .into_iter()
                .filter_map(|id| vectors.remove(&id).map(|v| (id, v)))
                .collect())
        })
    }

    fn view_embeddings(&self, model: &str) -> Result<Vec<ViewEmbedding>, KbError> {
        self.block(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT entity_id, view, text_hash, embedding FROM kb_view_embeddings \
                     WHERE model = $1 ORDER BY entity_id COLLATE \"C\", view COLLATE \"C\"",
                    &[&model],
                )
                .await
                .pg()?;
            rows.iter()
                .map(|row| {
                    let vector: Vector = row.try_get(3).pg()?;
                    Ok(ViewEmbedding {
                        entity_id: row.try_get(0).pg()?,
                        view: row.try_get(1).pg()?,
                        text_hash: row.try_get(2).pg()?,
                        vector: vector.to_vec(),
                    })
                })
                .collect()
        })
    }

    fn set_view_embeddings(
        &self,
        model: &str,
        rows: &[ViewEmbedding],
        remove: &[(String, String)],
    ) -> Result<(), KbError> {
        rows::check_view_embeddings(model, rows)?;
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let dims: HashSet<u32> = rows
                .iter()
                .map(|r| u32::try_from(r.vector.len()).unwrap_or(u32::MAX))
                .collect();
            for dim in dims {
                self.ensure_index_in(&tx, dim).await?;
            }
            let delete = tx
                .prepare(
                    "DELETE FROM kb_view_embeddings \
                     WHERE model = $1 AND entity_id = $2 AND view = $3",
                )
                .await
                .pg()?;
            for (entity_id, view) in remove {
                tx.execute(&delete, &[&model, entity_id, view]).await.pg()?;
            }
            let insert = tx
                .prepare(
                    "INSERT INTO kb_view_embeddings \
                     (entity_id, view, model, text_hash, dim, embedding) \
                     VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (model, entity_id, view) DO UPDATE SET \
                     text_hash = excluded.text_hash, dim = excluded.dim, \
                     embedding = excluded.embedding",
                )
                .await
                .pg()?;
            for r in rows {
                let dim = i32::try_from(r.vector.len()).unwrap_or(i32::MAX);
                tx.execute(
                    &insert,
                    &[
                        &r.entity_id,
                        &r.view,
                        &model,
                        &r.text_hash,
                        &dim,
                        &Vector::from(r.vector.clone()),
                    ],
                )
                .await
                .pg()?;
            }
            tx.commit().await.pg()
        })
    }

    fn record_retrievals(&self, entity_ids: &[String]) -> Result<usize, KbError> {
        self.block(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.pg()?;
            let stmt = tx
                .prepare(
                    "UPDATE kb_content_entities SET retrieval_count = retrieval_count + 1 \
                     WHERE entity_id = $1 AND is_current",
                )
                .await
                .pg()?;
            let mut counted = 0;
            for id in entity_ids {
                counted += tx.execute(&stmt, &[id]).await.pg()?;
            }
            tx.commit().await.pg()?;
            Ok(usize::try_from(counted).unwrap_or(usize::MAX))
        })
    }

    fn stats(&self, embedding_model: &str) -> Result<KbStats, KbError> {
        self.block(async {
            let mut client = self.client().await?;
            // One snapshot for both reads.
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .pg()?;
            let rows = current_rows(&*tx, &EntityFilter::default()).await?;
            let versions: i64 = tx
                .query_one("SELECT count(*) FROM kb_content_entities", &[])
                .await
                .pg()?
                .try_get(0)
                .pg()?;
            tx.commit().await.pg()?;
            Ok(rows::stats(
                &rows,
                usize::try_from(versions).unwrap_or_default(),
                embedding_model,
            ))
        })
    }
}

async fn load_user(client: &impl GenericClient, user_id: &str) -> Result<Option<Record>, KbError> {
    let rows = client
        .query(
            "SELECT user_type, conversation_count, session_type, interaction_rating, \
             just_logged, skills_practiced, last_topics, first_seen, last_seen, state_data \
             FROM user_state WHERE user_id = $1",
            &[&user_id],
        )
        .await
        .pg()?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let bad = |column: &str, value: String| {
        KbError::Store(format!("user `{user_id}`: bad {column} `{value}`"))
    };
    let count: i32 = row.try_get(1).pg()?;
    let rating: Option<i32> = row.try_get(3).pg()?;
    let state_data: Value = row.try_get(9).pg()?;
    Ok(Some(Record {
        user_type: row.try_get(0).pg()?,
        conversation_count: u32::try_from(count)
            .map_err(|_| bad("conversation_count", count.to_string()))?,
        session_type: row.try_get(2).pg()?,
        interaction_rating: rating
            .map(|r| u8::try_from(r).map_err(|_| bad("interaction_rating", r.to_string())))
            .transpose()?,
        just_logged: row.try_get(4).pg()?,
        skills_practiced: row.try_get(5).pg()?,
        last_topics: row.try_get(6).pg()?,
        first_seen: row.try_get(7).pg()?,
        last_seen: row.try_get(8).pg()?,
        state_data: match state_data {
            Value::Object(map) => map,
            other => return Err(bad("state_data", other.to_string())),
        },
    }))
}

async fn save_user(
    tx: &Transaction<'_>,
    record: &Record,
    user_id: &str,
    now: DateTime<Utc>,
) -> Result<(), KbError> {
    let count = i32::try_from(record.conversation_count).unwrap_or(i32::MAX);
    let rating = record.interaction_rating.map(i32::from);
    let state_data = Value::Object(record.state_data.clone());
    tx.execute(
        "INSERT INTO user_state (user_id, user_type, conversation_count, session_type, \
         interaction_rating, just_logged, skills_practiced, last_topics, first_seen, last_seen, \
         state_data, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12) \
         ON CONFLICT (user_id) DO UPDATE SET user_type = excluded.user_type, \
         conversation_count = excluded.conversation_count, \
         session_type = excluded.session_type, interaction_rating = excluded.interaction_rating, \
         just_logged = excluded.just_logged, skills_practiced = excluded.skills_practiced, \
         last_topics = excluded.last_topics, first_seen = excluded.first_seen, \
         last_seen = excluded.last_seen, state_data = excluded.state_data, \
         updated_at = excluded.updated_at",
        &[
            &user_id,
            &record.user_type,
            &count,
            &record.session_type,
            &rating,
            &record.just_logged,
            &record.skills_practiced,
            &record.last_topics,
            &record.first_seen,
            &record.last_seen,
            &state_data,
            &now,
        ],
    )
    .await
    .pg()?;
    Ok(())
}

impl StateStore for PgStore {
    fn get_user_state(&self, user_id: &str, now: DateTime<Utc>) -> Result<UserState, KbError> {
        let record = self.block(async {
            let client = self.client().await?;
            load_user(&**client, user_id).await
        })?;
        Ok(record.unwrap_or_default().to_state(user_id, now))
    }

    fn update_user_state(
        &self,
        user_id: &str,
        updates: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError> {
        self.modify_user(user_id, now, |record| record.apply(user_id, updates, now))
    }

    fn record_interaction(
        &self,
        user_id: &str,
        rating: Option<u8>,
        topics: &[String],
        skills: &[String],
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError> {
        self.modify_user(user_id, now, interaction(rating, topics, skills, now)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn a_password_in_the_url_is_refused_and_never_shown() {
        let err = connection_config("postgres://ann:s3cret@db.example:5433/kb", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("contains a password"), "{err}");
        assert!(err.contains("PGPASSWORD"), "{err}");
        assert!(
            err.contains("postgres://ann:***@db.example:5433/kb"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
        let err = connection_config("host=db user=ann password=s3cret", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains("s3cret") && err.contains("password=***"),
            "{err}"
        );
    }

    #[test]
    fn the_password_comes_from_the_environment_and_the_user_has_a_default() {
        let config = connection_config(
            "postgres://db.example/kb",
            &env(&[("PGPASSWORD", "pw"), ("USER", "ann")]),
        )
        .unwrap();
        assert_eq!(config.get_user(), Some("ann"));
        assert_eq!(config.get_password(), Some(&b"pw"[..]));
        assert_eq!(describe(&config), "postgres://ann@db.example:5432/kb");
        let err = connection_config("postgres://db.example/kb", &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("names no user"), "{err}");
    }

    #[test]
    fn pgpass_lines_match_like_libpq() {
        let text = "# comment\n\
                    other:5432:kb:ann:wrong\n\
                    db.example:5433:*:ann:first\\:part\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            pgpass_find(text, ["db.example", "5433", "kb", "ann"]).as_deref(),
            Some("first:part")
        );
        assert_eq!(
            pgpass_find(text, ["db.example", "5432", "kb", "bob"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_find("a:b:c:d", ["a", "b", "c", "d"]), None);
    }

    #[test]
    fn a_pgpass_file_readable_by_others_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        let path_text = path.to_str().unwrap().to_owned();
        let vars = [("PGPASSFILE", path_text.as_str()), ("USER", "ann")];
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let config = connection_config("postgres://h/kb", &env(&vars)).unwrap();
        assert_eq!(config.get_password(), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = connection_config("postgres://h/kb", &env(&vars)).unwrap();
        assert_eq!(config.get_password(), Some(&b"secret"[..]));
    }

    #[test]
    fn postgres_urls_are_recognised() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url(" PostgreSQL://h/db"));
        assert!(!is_postgres_url(".assay/kb.db"));
    }

    #[test]
    fn migrations_are_numbered_from_one() {
        for (i, (version, _, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(usize::try_from(*version).unwrap(), i + 1);
        }
    }
}
