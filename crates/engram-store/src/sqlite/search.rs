//! Retrieval reads on SQLite: the keys that pass a filter and chunks joined with their items.

use async_trait::async_trait;
use engram_types::UnixMs;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::sql::*;
use super::SqliteStore;
use crate::ChunkKey;
use crate::{ChunkFilter, ChunkHit, ChunkSearch, ChunkSelection, DatabaseScope, StoreResult};

/// ` AND …` conditions on `c` (chunks) and `i` (items) for scope, liveness and `filter`.
fn push_chunk_where(
    builder: &mut QueryBuilder<'_, Sqlite>,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    now: UnixMs,
) -> StoreResult<()> {
    push_live_scope(builder, scope, "c.database_id", now);
    push_in(builder, "c.kind", filter.kinds.iter().map(|k| k.as_str()));
    push_in(
        builder,
        "c.collection",
        filter.collections.iter().map(|c| c.as_str().to_owned()),
    );
    if let Some(origin) = filter.origin {
        builder.push(" AND i.origin = ").push_bind(origin.as_str());
    }
    if filter.apps {
        builder.push(" AND (i.origin = 'app' OR json_extract(i.additional_metadata, '$.connector_id') IS NOT NULL)");
    }
    push_in(builder, "i.id", filter.ids.iter().cloned());
    push_in(
        builder,
        "i.title_key",
        filter.titles.iter().map(|t| t.to_lowercase()),
    );
    for (key, value) in &filter.metadata {
        push_filter(builder, "metadata", key, value)?;
    }
    for (key, value) in &filter.additional_metadata {
        push_filter(builder, "additional_metadata", key, value)?;
    }
    Ok(())
}

const CHUNK_JOINS: &str =
    " JOIN items i ON i.item_key = c.item_key JOIN databases d ON d.id = c.database_id";

/// SQLite binds at most 32766 parameters per statement; key lists are sent in slices.
const KEYS_PER_STATEMENT: usize = 10_000;

/// `SELECT` of the keys of live chunks passing `filter`; the caller adds conditions and order.
fn live_chunk_keys<'a>(
    scope: &'a DatabaseScope,
    filter: &'a ChunkFilter,
    now: UnixMs,
) -> StoreResult<QueryBuilder<'a, Sqlite>> {
    let mut select = QueryBuilder::<Sqlite>::new("SELECT c.chunk_key FROM chunks c");
    select.push(CHUNK_JOINS).push(" WHERE 1 = 1");
    push_chunk_where(&mut select, scope, filter, now)?;
    Ok(select)
}

impl SqliteStore {
    async fn chunk_keys(&self, mut select: QueryBuilder<'_, Sqlite>) -> StoreResult<Vec<ChunkKey>> {
        let rows = select.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok(ChunkKey(row.try_get("chunk_key")?)))
            .collect()
    }
}

#[async_trait]
impl ChunkSearch for SqliteStore {
    async fn filtered_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut select = live_chunk_keys(scope, filter, now)?;
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
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut select = live_chunk_keys(scope, filter, now)?;
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
                push_in(
                    &mut select,
                    "c.chunk_id",
                    ids.iter().take(KEYS_PER_STATEMENT).cloned(),
                );
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
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut passing = Vec::with_capacity(keys.len());
        for slice in keys.chunks(KEYS_PER_STATEMENT) {
            let mut select = among_chunks("c.chunk_key", scope, filter, slice, now)?;
            for row in select.build().fetch_all(&self.pool).await? {
                passing.push(ChunkKey(row.try_get("chunk_key")?));
            }
        }
        Ok(passing)
    }

    async fn fetch_chunks(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkHit>> {
        let mut hits = Vec::with_capacity(keys.len());
        for slice in keys.chunks(KEYS_PER_STATEMENT) {
            let mut select = among_chunks(
                &crate::rows::chunk_hit_columns("NULL"),
                scope,
                filter,
                slice,
                now,
            )?;
            for row in select.build().fetch_all(&self.pool).await? {
                hits.push(crate::rows::chunk_hit(&row)?);
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
    now: UnixMs,
) -> StoreResult<QueryBuilder<'a, Sqlite>> {
    let mut select = QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM chunks c"));
    select.push(CHUNK_JOINS).push(" WHERE 1 = 1");
    push_chunk_where(&mut select, scope, filter, now)?;
    push_in(&mut select, "c.chunk_key", keys.iter().map(|k| k.0));
    Ok(select)
}
