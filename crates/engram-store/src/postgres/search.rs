//! Retrieval reads on PostgreSQL: the keys that pass a filter and chunks joined with their items.
//! Key lists travel as one array parameter (`= ANY($n)`).

use async_trait::async_trait;
use engram_types::UnixMs;
use sqlx::{Postgres, QueryBuilder, Row};

use super::sql::*;
use super::PgStore;
use crate::ChunkKey;
use crate::{ChunkFilter, ChunkHit, ChunkSearch, ChunkSelection, DatabaseScope, StoreResult};

/// ` AND …` conditions on `c` (chunks) and `i` (items) for scope, liveness and `filter`.
fn push_chunk_where(
    builder: &mut QueryBuilder<'_, Postgres>,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    now: UnixMs,
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
    if filter.apps {
        builder.push(" AND (i.origin = 'app' OR i.additional_metadata ? 'connector_id')");
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
    now: UnixMs,
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
        now: UnixMs,
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
        now: UnixMs,
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
        now: UnixMs,
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
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkHit>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut select = among_chunks(
            &crate::rows::chunk_hit_columns("NULL::text"),
            scope,
            filter,
            keys,
            now,
        );
        let rows = select.build().fetch_all(&self.pool).await?;
        rows.iter().map(crate::rows::chunk_hit).collect()
    }
}

/// `SELECT columns` of the given chunks that are live and pass `filter`.
fn among_chunks<'a>(
    columns: &str,
    scope: &'a DatabaseScope,
    filter: &'a ChunkFilter,
    keys: &[ChunkKey],
    now: UnixMs,
) -> QueryBuilder<'a, Postgres> {
    // The keys are probed first, alone (primary-key lookups), and scope and filter apply to
    // what they found: planned with statistics from before a database filled up (its id unseen),
    // the scope's index looked selective, and every chunk of the database was read instead.
    let mut select =
        QueryBuilder::<Postgres>::new("WITH c AS MATERIALIZED (SELECT c.* FROM unnest(");
    select
        .push_bind(keys.iter().map(|k| k.0).collect::<Vec<i64>>())
        .push(format!(
            "::bigint[]) AS k(chunk_key) JOIN chunks c ON c.chunk_key = k.chunk_key) SELECT {columns} FROM c"
        ))
        .push(CHUNK_JOINS)
        .push(" WHERE 1 = 1");
    push_chunk_where(&mut select, scope, filter, now);
    select
}
