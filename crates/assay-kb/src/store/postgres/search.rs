//! Vector search over the stored embeddings.

use assay_core::entity::LoadMode;
use pgvector::Vector;
use tokio_postgres::types::ToSql;

use super::{HNSW_MAX_DIM, PgResult, PgStore, entity_index_name};
use crate::KbError;
use crate::store::rows;
use crate::store::{EmbeddingHit, EmbeddingIndex, EmbeddingSearch, SearchMethod};
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
