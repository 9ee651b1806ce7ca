//! The knowledge base read and written: [`KnowledgeBase`] and [`KbStore`] for [`PgStore`].

use std::collections::{BTreeMap, HashSet};

use assay_core::entity::Entity;
use pgvector::Vector;

use super::entities::{COLUMNS, current, current_rows, must_current, read_rows, write_version};
use super::{PgResult, PgStore, write_tx};
use crate::store::rows::{self, VersionRow, check};
use crate::store::{
    Edit, EntityUpdate, EntityVersion, ImportReport, KbStats, KbStore, Staleness, StoredEntity,
    ViewEmbedding,
};
use crate::{EntityFilter, KbError, KnowledgeBase};
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
