//! The graph on SQLite (design in migration 12).

use std::collections::HashMap;

use async_trait::async_trait;
use engram_graph::ItemGraph;
use engram_types::{IndexingStatus, UnixMs};
use sqlx::Row;

use super::items::select_live_item;
use super::sql::BEGIN_WRITE;
use super::SqliteStore;
use crate::graph::GraphWrite;
use crate::rows::{relation, RELATION_COLUMNS};
use crate::{
    ClaimedItem, DatabaseScope, GraphSize, GraphStore, RelationQuery, RelationRecord, StoreResult,
};

#[async_trait]
impl GraphStore for SqliteStore {
    async fn item_passages(&self, item: &ClaimedItem) -> StoreResult<Vec<(u32, String)>> {
        let rows = sqlx::query(
            "SELECT position, content FROM chunks WHERE item_key = ? ORDER BY position",
        )
        .bind(item.item_key)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let position: i64 = r.try_get("position")?;
                Ok((
                    u32::try_from(position).unwrap_or(u32::MAX),
                    r.try_get("content")?,
                ))
            })
            .collect()
    }

    async fn complete_graph(
        &self,
        item: &ClaimedItem,
        graph: &ItemGraph,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let done = sqlx::query(
            "UPDATE items SET status = 'completed', lease_owner = NULL, lease_until = NULL,
                 updated_at = ?
             WHERE item_key = ? AND version = ? AND status = 'graph_creation' AND lease_owner = ?",
        )
        .bind(now)
        .bind(item.item_key)
        .bind(item.version)
        .bind(&item.lease_owner)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        for table in ["graph_relations", "graph_mentions"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE item_key = ?"))
                .bind(item.item_key)
                .execute(&mut *tx)
                .await?;
        }
        let chunks: HashMap<u32, i64> = sqlx::query_as::<_, (i64, i64)>(
            "SELECT position, chunk_key FROM chunks WHERE item_key = ?",
        )
        .bind(item.item_key)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(position, key)| (u32::try_from(position).unwrap_or(u32::MAX), key))
        .collect();
        let write = GraphWrite::plan(graph, &chunks);
        let mut keys: HashMap<usize, i64> = HashMap::with_capacity(write.entities.len());
        for &at in &write.entities {
            let e = &graph.entities[at];
            let key: i64 = sqlx::query_scalar(
                "INSERT INTO graph_entities (database_id, collection, kind, key, name, type, namespace, identifier)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (database_id, collection, kind, key) DO UPDATE SET
                     type = CASE WHEN graph_entities.type = 'ENTITY' THEN excluded.type ELSE graph_entities.type END,
                     identifier = COALESCE(graph_entities.identifier, excluded.identifier)
                 RETURNING entity_key",
            )
            .bind(item.database_id.as_str())
            .bind(item.collection.as_str())
            .bind(item.kind.as_str())
            .bind(&e.key)
            .bind(&e.name)
            .bind(&e.kind)
            .bind(&e.namespace)
            .bind(&e.identifier)
            .fetch_one(&mut *tx)
            .await?;
            keys.insert(at, key);
        }
        for (entity, chunk) in &write.mentions {
            sqlx::query(
                "INSERT OR IGNORE INTO graph_mentions (entity_key, chunk_key, item_key) VALUES (?, ?, ?)",
            )
            .bind(keys[entity])
            .bind(chunk)
            .bind(item.item_key)
            .execute(&mut *tx)
            .await?;
        }
        for (r, chunk) in &write.relations {
            sqlx::query(
                "INSERT INTO graph_relations (chunk_key, item_key, source_key, target_key, raw_predicate,
                     canonical_predicate, context, confidence, temporal_details, origin, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(chunk)
            .bind(item.item_key)
            .bind(keys[&r.source])
            .bind(keys[&r.target])
            .bind(&r.raw_predicate)
            .bind(&r.canonical_predicate)
            .bind(&r.context)
            .bind(f64::from(r.confidence))
            .bind(&r.temporal_details)
            .bind(graph.origin.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        super::webhooks::record_event(&mut tx, item, IndexingStatus::Completed, "", "", now)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn item_relations(
        &self,
        scope: &DatabaseScope,
        query: &RelationQuery<'_>,
        now: UnixMs,
    ) -> StoreResult<Option<Vec<RelationRecord>>> {
        let mut tx = self.pool.begin().await?;
        let Some(row) = select_live_item(scope, query.collection, query.id, now)
            .build()
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        if crate::rows::kind(&row)? != query.kind {
            return Ok(None);
        }
        let item_key: i64 = row.try_get("item_key")?;
        let rows = sqlx::query(&format!(
            "SELECT {RELATION_COLUMNS}
             WHERE r.item_key = ? AND r.relation_key > ? ORDER BY r.relation_key LIMIT ?"
        ))
        .bind(item_key)
        .bind(query.after.unwrap_or(0))
        .bind(i64::from(query.limit))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter()
            .map(relation)
            .collect::<StoreResult<_>>()
            .map(Some)
    }

    async fn graph_size(&self, scope: &DatabaseScope) -> StoreResult<GraphSize> {
        let (entities, relations): (i64, i64) = sqlx::query_as(
            "SELECT
                 (SELECT COUNT(*) FROM graph_entities e JOIN databases d ON d.id = e.database_id
                  WHERE d.id = ? AND d.org_id = ?),
                 (SELECT COUNT(*) FROM graph_relations r JOIN chunks c ON c.chunk_key = r.chunk_key
                  JOIN databases d ON d.id = c.database_id WHERE d.id = ? AND d.org_id = ?)",
        )
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(GraphSize {
            entities: u64::try_from(entities).unwrap_or(0),
            relations: u64::try_from(relations).unwrap_or(0),
        })
    }
}
