//! Reading chunks for retrieval: the keys that pass a filter (to check or restrict what the
//! derived indexes found), and the chunks themselves joined with their items. Every call is
//! scoped to one database of one organization and sees only live chunks (a live database, an
//! unexpired item), so the derived indexes may be briefly stale but a query never returns
//! anything the store does not hold for that scope.

use async_trait::async_trait;
use engram_types::{CollectionName, ItemKind, UnixMs};
use serde_json::Value;

use crate::backend::{push_live_scope, Backend, ListParam, Sql, SqlStore};
use crate::rows::Columns as _;
use crate::ChunkKey;
use crate::{DatabaseScope, FilterValue, ItemOrigin, ItemRecord, StoreResult};

/// Which chunks a retrieval call may see, beyond its database. All conditions are ANDed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkFilter {
    /// Only these kinds; empty means both.
    pub kinds: Vec<ItemKind>,
    /// Only these collections; empty means every collection of the database.
    pub collections: Vec<CollectionName>,
    /// Exact matches on the item's `metadata.<key>` (schema fields).
    pub metadata: Vec<(String, FilterValue)>,
    /// Exact matches on the item's `additional_metadata.<key>`.
    pub additional_metadata: Vec<(String, FilterValue)>,
    /// Only items that arrived this way.
    pub origin: Option<ItemOrigin>,
    /// Only app sources: app knowledge, and items a connector synced (files included; they
    /// carry `additional_metadata.connector_id`).
    pub apps: bool,
    /// Only these items (by id); empty means any.
    pub ids: Vec<String>,
    /// Only items with one of these titles, compared case-insensitively (Unicode lowercase);
    /// empty means any.
    pub titles: Vec<String>,
}

impl ChunkFilter {
    /// Whether the filter looks into item fields (so the vector scan must be restricted to the
    /// keys the store selects).
    pub fn has_item_conditions(&self) -> bool {
        !self.metadata.is_empty()
            || !self.additional_metadata.is_empty()
            || self.origin.is_some()
            || self.apps
            || !self.ids.is_empty()
            || !self.titles.is_empty()
    }
}

/// A chunk found by retrieval, with its item.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHit {
    pub chunk_key: ChunkKey,
    pub chunk_id: String,
    pub position: u32,
    pub content: String,
    pub layout: Value,
    /// The chunk's stored embedding (empty when none was stored).
    pub embedding: Vec<f32>,
    pub created_at: UnixMs,
    /// The item, without its full text.
    pub item: ItemRecord,
}

/// Which chunks a direct read names.
#[derive(Debug, Clone, Copy)]
pub enum ChunkSelection<'a> {
    /// Every chunk of the item with this id, in position order.
    Item(&'a str),
    /// These chunks (by chunk id), in item then position order.
    Ids(&'a [String]),
    /// The chunks of the item with this id at positions `from..=to`, in position order.
    Span { id: &'a str, from: u32, to: u32 },
}

/// Retrieval reads, scoped by organization and database.
#[async_trait]
pub trait ChunkSearch: Send + Sync {
    /// Keys of the live chunks passing `filter`, at most `limit`, in key order.
    async fn filtered_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// Which of the given chunks are live and pass `filter`, in no set order: `fetch_chunks`
    /// without reading them.
    async fn passing_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// Keys of the live chunks `which` names that pass `filter`, in item then position order,
    /// at most `limit`.
    async fn selected_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        which: ChunkSelection<'_>,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// The given chunks that are live and pass `filter`, with their items, in no set order.
    async fn fetch_chunks(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkHit>>;
}

/// ` AND …` conditions on `c` (chunks) and `i` (items) for scope, liveness and `filter`.
pub(crate) fn push_chunk_where<B: Backend>(
    sql: &mut Sql,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    now: UnixMs,
) -> StoreResult<()> {
    push_live_scope(sql, scope, "c.database_id", now);
    let texts = |values: Vec<String>| ListParam::Texts(values);
    B::push_in(
        sql,
        "c.kind",
        texts(filter.kinds.iter().map(|k| k.as_str().to_owned()).collect()),
    );
    B::push_in(
        sql,
        "c.collection",
        texts(
            filter
                .collections
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
        ),
    );
    if let Some(origin) = filter.origin {
        sql.push(" AND i.origin = ").push_bind(origin.as_str());
    }
    if filter.apps {
        sql.push(format!(
            " AND (i.origin = 'app' OR {})",
            B::json_has("i.additional_metadata", "connector_id")
        ));
    }
    B::push_in(sql, "i.id", texts(filter.ids.clone()));
    B::push_in(
        sql,
        "i.title_key",
        texts(filter.titles.iter().map(|t| t.to_lowercase()).collect()),
    );
    for (key, value) in &filter.metadata {
        B::push_filter(sql, "metadata", key, value)?;
    }
    for (key, value) in &filter.additional_metadata {
        B::push_filter(sql, "additional_metadata", key, value)?;
    }
    Ok(())
}

const CHUNK_JOINS: &str =
    " JOIN items i ON i.item_key = c.item_key JOIN databases d ON d.id = c.database_id";

/// `SELECT` of the keys of live chunks passing `filter`; the caller adds conditions and order.
fn live_chunk_keys<B: Backend>(
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    now: UnixMs,
) -> StoreResult<Sql> {
    let mut select = Sql::new("SELECT c.chunk_key FROM chunks c");
    select.push(CHUNK_JOINS).push(" WHERE 1 = 1");
    push_chunk_where::<B>(&mut select, scope, filter, now)?;
    Ok(select)
}

/// `SELECT columns` of the given chunks that are live and pass `filter`.
fn among_chunks<B: Backend>(
    columns: &str,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    keys: &[ChunkKey],
    now: UnixMs,
) -> StoreResult<Sql> {
    let keys: Vec<i64> = keys.iter().map(|k| k.0).collect();
    let mut select = Sql::default();
    B::push_chunks_among(&mut select, columns, CHUNK_JOINS, &keys, &|sql| {
        push_chunk_where::<B>(sql, scope, filter, now)
    })?;
    Ok(select)
}

impl<B: Backend> SqlStore<B> {
    async fn chunk_keys(&self, select: Sql) -> StoreResult<Vec<ChunkKey>> {
        let rows = self.all(select).await?;
        rows.iter()
            .map(|row| Ok(ChunkKey(row.int("chunk_key")?)))
            .collect()
    }
}

#[async_trait]
impl<B: Backend> ChunkSearch for SqlStore<B> {
    async fn filtered_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>> {
        let mut select = live_chunk_keys::<B>(scope, filter, now)?;
        select.push(" ORDER BY c.chunk_key LIMIT ").push_bind(limit);
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
        let mut select = live_chunk_keys::<B>(scope, filter, now)?;
        match which {
            ChunkSelection::Item(id) => {
                select.push(" AND i.id = ").push_bind(id);
            }
            ChunkSelection::Span { id, from, to } => {
                select
                    .push(" AND i.id = ")
                    .push_bind(id)
                    .push(" AND c.position BETWEEN ")
                    .push_bind(from)
                    .push(" AND ")
                    .push_bind(to);
            }
            ChunkSelection::Ids(ids) => {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let ids = ids.iter().take(B::MAX_LIST).cloned().collect();
                B::push_in(&mut select, "c.chunk_id", ListParam::Texts(ids));
            }
        }
        select
            .push(" ORDER BY c.collection, i.id, c.position LIMIT ")
            .push_bind(limit);
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
        for slice in keys.chunks(B::MAX_LIST) {
            let select = among_chunks::<B>("c.chunk_key", scope, filter, slice, now)?;
            passing.extend(self.chunk_keys(select).await?);
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
        let columns = crate::rows::chunk_hit_columns("CAST(NULL AS TEXT)");
        let mut hits = Vec::with_capacity(keys.len());
        for slice in keys.chunks(B::MAX_LIST) {
            let select = among_chunks::<B>(&columns, scope, filter, slice, now)?;
            for row in self.all(select).await? {
                hits.push(crate::rows::chunk_hit(&row)?);
            }
        }
        Ok(hits)
    }
}
