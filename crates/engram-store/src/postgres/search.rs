//! Retrieval reads on PostgreSQL: the keys that pass a filter and chunks joined with their items.
//! Key lists travel as one array parameter (`= ANY($n)`).

use async_trait::async_trait;
use sqlx::{Postgres, QueryBuilder, Row};

use super::items::item_from_row;
use super::sql::*;
use super::PgStore;
use crate::ChunkKey;
use crate::{ChunkFilter, ChunkHit, ChunkSearch, ChunkSelection, DatabaseScope, StoreResult};

/// ` AND …` conditions on `c` (chunks) and `i` (items) for scope, liveness and `filter`.
fn push_chunk_where(
    builder: &mut QueryBuilder<'_, Postgres>,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    now: i64,
) {
    push_live_scope(builder, scope, "c.database_id", now);
    push_any(
        builder,
        "c.kind",
        filter.kinds.iter().map(|k| k.as_str().to_owned()).collect(),
    );
    push_any(
        builder,
        "c.collection",
        filter
            .collections
            .iter()
            .map(|c| c.as_str().to_owned())
            .collect(),
    );
    if let Some(origin) = filter.origin {
        builder.push(" AND i.origin = ").push_bind(origin.as_str());
    }
    push_any(builder, "i.id", filter.ids.clone());
    push_any(
        builder,
        "i.title_key",
        filter.titles.iter().map(|t| t.to_lowercase()).collect(),
    );
    for (key, value) in &filter.metadata {
        push_filter(builder, "metadata", key, value);
    }
    for (key, value) in &filter.additional_metadata {
        push_filter(builder, "additional_metadata", key, value);
    }
}

const CHUNK_JOINS: &str =
    " JOIN items i ON i.item_key = c.item_key JOIN databases d ON d.id = c.database_id";

/// `SELECT` of the keys of live chunks passing `filter`; the caller adds conditions and order.
fn live_chunk_keys<'a>(
    scope: &'a DatabaseScope,
    filter: &'a ChunkFilter,
    now: i64,
) -> QueryBuilder<'a, Postgres> {
    let mut select = QueryBuilder::<Postgres>::new("SELECT c.chunk_key FROM chunks c");
    select.push(CHUNK_JOINS).push(" WHERE 1 = 1");
    push_chunk_where(&mut select, scope, filter, now);
    select
}

impl PgStore {
    async fn chunk_keys(
        &self,
        mut select: QueryBuilder<'_, Postgres>,
    ) -> StoreResult<Vec<ChunkKey>> {
        let rows = select.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok(ChunkKey(row.try_get("chunk_key")?)))
            .collect()
    }
}

#[async_trait]
impl ChunkSearch for PgStore {
    async fn filtered_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: u32,
        now: i64,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut select = live_chunk_keys(scope, filter, now);
        select
            .push(" ORDER BY c.chunk_key LIMIT ")
            .push_bind(i64::from(limit));
        self.chunk_keys(select).await
    }

    async fn selected_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        which: ChunkSelection<'_>,
        limit: u32,
        now: i64,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut select = live_chunk_keys(scope, filter, now);
        match which {
            ChunkSelection::Item(id) => {
                select.push(" AND i.id = ").push_bind(id.to_owned());
            }
            ChunkSelection::Span { id, from, to } => {
                select
                    .push(" AND i.id = ")
                    .push_bind(id.to_owned())
                    .push(" AND c.position BETWEEN ")
                    .push_bind(i64::from(from))
                    .push(" AND ")
                    .push_bind(i64::from(to));
            }
            ChunkSelection::Ids(ids) => {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                push_any(&mut select, "c.chunk_id", ids.to_vec());
            }
        }
        select
            .push(" ORDER BY c.collection, i.id, c.position LIMIT ")
            .push_bind(i64::from(limit));
        self.chunk_keys(select).await
    }

    async fn passing_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: i64,
    ) -> StoreResult<Vec<ChunkKey>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.chunk_keys(among_chunks("c.chunk_key", scope, filter, keys, now))
            .await
    }

    async fn fetch_chunks(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: i64,
    ) -> StoreResult<Vec<ChunkHit>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut hits = Vec::with_capacity(keys.len());
        {
            // Every item column but the full text, which a hit does not need.
            let mut select = among_chunks(
                "c.chunk_key, c.chunk_id, c.position, c.content, c.layout, c.embedding,
                     c.created_at AS chunk_created_at,
                     i.id, i.collection, i.kind, i.origin, i.filename, i.media_type, i.title, i.source_type,
                     i.description, i.note, i.url, i.timestamp, NULL::text AS text, i.metadata, i.additional_metadata,
                     i.attachments, i.relations, i.user_name, i.infer, i.expires_at, i.instructions, i.status, i.created_at,
                     i.updated_at",
                scope,
                filter,
                keys,
                now,
            );
            for row in select.build().fetch_all(&self.pool).await? {
                let position: i64 = row.try_get("position")?;
                hits.push(ChunkHit {
                    chunk_key: ChunkKey(row.try_get("chunk_key")?),
                    chunk_id: row.try_get("chunk_id")?,
                    position: u32::try_from(position).map_err(|e| corrupt("position", e))?,
                    content: row.try_get("content")?,
                    layout: json(&row, "layout")?,
                    embedding: from_vector(row.try_get("embedding")?),
                    created_at: row.try_get("chunk_created_at")?,
                    item: item_from_row(&row)?,
                });
            }
        }
        Ok(hits)
    }
}

/// `SELECT columns` of the given chunks that are live and pass `filter`.
fn among_chunks<'a>(
    columns: &str,
    scope: &'a DatabaseScope,
    filter: &'a ChunkFilter,
    keys: &[ChunkKey],
    now: i64,
) -> QueryBuilder<'a, Postgres> {
    let mut select = QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM chunks c"));
    select.push(CHUNK_JOINS).push(" WHERE 1 = 1");
    push_chunk_where(&mut select, scope, filter, now);
    push_any(
        &mut select,
        "c.chunk_key",
        keys.iter().map(|k| k.0).collect(),
    );
    select
}
