//! The schema: versioned migrations and the HNSW indexes.

use deadpool_postgres::Object;
use tokio_postgres::GenericClient;

use super::PgResult;
use crate::KbError;
/// The migrations, in order: `(version, name, SQL)`. Append; never edit one once released.
const MIGRATIONS: &[(i32, &str, &str)] = &[(
    1,
    "initial",
    include_str!("../pg_migrations/0001_initial.sql"),
)];

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The advisory lock that serialises migrations (per database).
const MIGRATION_LOCK: i64 = 0x6173_7361_795f_6d67; // "assay_mg"

/// The statements that create the HNSW indexes (`vector_cosine_ops`) for embeddings of `dim`
/// dimensions, on current entities (`idx_kb_embedding_hnsw_<dim>`, the index
/// [`PgStore::nearest`] uses) and on views, with build parameters `m` and `ef_construction`,
/// unless they exist.
///
/// [`PgStore::nearest`]: super::PgStore::nearest
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
pub(super) async fn applied_version(client: &impl GenericClient) -> Result<i32, KbError> {
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
pub(super) async fn migrate(client: &mut Object) -> Result<(), KbError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one() {
        for (i, (version, _, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(usize::try_from(*version).unwrap(), i + 1);
        }
    }
}
