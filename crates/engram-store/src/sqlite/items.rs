//! Items, chunks and the work queue on SQLite. Writes run in `BEGIN IMMEDIATE` transactions so
//! concurrent writers wait for each other instead of failing on a stale snapshot.

use async_trait::async_trait;
use engram_types::UnixMs;
use engram_types::{CollectionName, DatabaseId, IndexingStatus, ItemKind};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

use super::sql::*;
use super::SqliteStore;
use crate::rows::{Columns as _, CLAIMED_COLUMNS, INDEXED_COLUMNS};
use crate::ChunkKey;
use crate::{
    AfterChunks, ChunkChanges, ChunkFeed, ChunkScan, ClaimRequest, ClaimedItem, DatabaseScope,
    DeletedItem, EnqueueOutcome, IndexedChunk, ItemFailure, ItemOrigin, ItemPage, ItemQuery,
    ItemSource, ItemStatus, ItemStore, MetadataCheck, MetadataEdit, MetadataEditOutcome, NewChunk,
    NewItem, StoreError, StoreResult, WorkQueue,
};

/// `SELECT i.* FROM items i …` of one live item, by collection and id.
pub(super) fn select_live_item<'a>(
    scope: &DatabaseScope,
    collection: &CollectionName,
    id: &str,
    now: UnixMs,
) -> QueryBuilder<'a, Sqlite> {
    let mut select = QueryBuilder::<Sqlite>::new(
        "SELECT i.* FROM items i JOIN databases d ON d.id = i.database_id WHERE i.collection = ",
    );
    select
        .push_bind(collection.as_str().to_owned())
        .push(" AND i.id = ")
        .push_bind(id.to_owned());
    push_live_scope(&mut select, scope, "i.database_id", now);
    select
}

async fn write_item(
    conn: &mut SqliteConnection,
    scope: &DatabaseScope,
    item: &NewItem,
    // The item this one replaces, and whether it had expired.
    existing: Option<(i64, bool)>,
    now: UnixMs,
) -> StoreResult<()> {
    if let Some((key, _)) = existing {
        sqlx::query("DELETE FROM chunks WHERE item_key = ?")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM item_payloads WHERE item_key = ?")
            .bind(key)
            .execute(&mut *conn)
            .await?;
    }
    let f = &item.fields;
    // One statement for new and replaced items: a replaced item keeps its key and creation time,
    // gets a new version and goes back to the queue.
    let item_key: i64 = sqlx::query(
        "INSERT INTO items (database_id, collection, id, kind, origin, filename, media_type, title, source_type,
             description, note, url, timestamp, text, metadata, additional_metadata, attachments, relations,
             user_name, infer, expires_at, instructions, title_key, status, run_after, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)
         ON CONFLICT (database_id, collection, id) DO UPDATE SET
             kind = excluded.kind, origin = excluded.origin, filename = excluded.filename,
             media_type = excluded.media_type, title = excluded.title, source_type = excluded.source_type,
             description = excluded.description, note = excluded.note, url = excluded.url,
             timestamp = excluded.timestamp, text = excluded.text, metadata = excluded.metadata,
             additional_metadata = excluded.additional_metadata, attachments = excluded.attachments,
             relations = excluded.relations, user_name = excluded.user_name, infer = excluded.infer,
             expires_at = excluded.expires_at, instructions = excluded.instructions,
             title_key = excluded.title_key, version = items.version + 1, status = 'queued',
             error_code = '', error_message = '', attempts = 0, run_after = excluded.run_after,
             lease_owner = NULL, lease_until = NULL, updated_at = excluded.updated_at
         RETURNING item_key",
    )
    .bind(scope.id.as_str())
    .bind(item.collection.as_str())
    .bind(&item.id)
    .bind(item.kind.as_str())
    .bind(item.origin.as_str())
    .bind(&f.filename)
    .bind(&f.media_type)
    .bind(&f.title)
    .bind(&f.source_type)
    .bind(&f.description)
    .bind(&f.note)
    .bind(&f.url)
    .bind(&f.timestamp)
    .bind(&f.text)
    .bind(json_text(&f.metadata, "metadata")?)
    .bind(json_text(&f.additional_metadata, "additional_metadata")?)
    .bind(json_text(&f.attachments, "attachments")?)
    .bind(json_text(&f.relations, "relations")?)
    .bind(&f.user_name)
    .bind(f.infer)
    .bind(f.expires_at)
    .bind(&f.instructions)
    .bind(f.title.to_lowercase())
    .bind(now)
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    if let Some(payload) = &item.payload {
        sqlx::query("INSERT INTO item_payloads (item_key, bytes) VALUES (?, ?)")
            .bind(item_key)
            .bind(payload)
            .execute(&mut *conn)
            .await?;
    }
    super::graph::write_declared(
        &mut *conn,
        scope,
        item_key,
        item,
        existing.map(|(_, expired)| expired),
    )
    .await?;
    Ok(())
}

/// `WHERE …` of a listing: scope, liveness and every filter.
fn push_list_where(
    builder: &mut QueryBuilder<'_, Sqlite>,
    scope: &DatabaseScope,
    query: &ItemQuery,
    now: UnixMs,
) -> StoreResult<()> {
    builder.push(" FROM items i JOIN databases d ON d.id = i.database_id WHERE 1 = 1");
    push_live_scope(builder, scope, "i.database_id", now);
    if let Some(kind) = query.kind {
        builder.push(" AND i.kind = ").push_bind(kind.as_str());
    }
    push_in(
        builder,
        "i.collection",
        query.collections.iter().map(|c| c.as_str().to_owned()),
    );
    push_in(builder, "i.id", query.ids.iter().cloned());
    for (key, value) in &query.metadata {
        push_filter(builder, "metadata", key, value)?;
    }
    for (key, value) in &query.additional_metadata {
        push_filter(builder, "additional_metadata", key, value)?;
    }
    for (field, value) in &query.fields {
        builder
            .push(format!(" AND i.{} = ", field.column()))
            .push_bind(value.clone());
    }
    Ok(())
}

#[async_trait]
impl ItemStore for SqliteStore {
    async fn enqueue_items(
        &self,
        scope: &DatabaseScope,
        items: &[NewItem],
        upsert: bool,
        now: UnixMs,
    ) -> StoreResult<Vec<EnqueueOutcome>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        check_scope(&mut tx, scope).await?;
        let mut outcomes = Vec::with_capacity(items.len());
        for item in items {
            sqlx::query("INSERT INTO collections (database_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
                .bind(scope.id.as_str())
                .bind(item.collection.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let existing = sqlx::query(
                "SELECT item_key, expires_at IS NOT NULL AND expires_at <= ? AS expired
                 FROM items WHERE database_id = ? AND collection = ? AND id = ?",
            )
            .bind(now)
            .bind(scope.id.as_str())
            .bind(item.collection.as_str())
            .bind(&item.id)
            .fetch_optional(&mut *tx)
            .await?;
            let existing = match existing {
                Some(row) => Some((row.try_get::<i64, _>(0)?, row.try_get::<bool, _>(1)?)),
                None => None,
            };
            if let Some((_, false)) = existing {
                if !upsert {
                    outcomes.push(EnqueueOutcome::Exists);
                    continue;
                }
            }
            write_item(&mut tx, scope, item, existing, now).await?;
            outcomes.push(EnqueueOutcome::Queued);
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn item_statuses(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<ItemStatus>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut builder = QueryBuilder::<Sqlite>::new(
            "SELECT i.id, i.kind, i.status, i.error_code, i.error_message
             FROM items i JOIN databases d ON d.id = i.database_id
             WHERE i.database_id = ",
        );
        builder
            .push_bind(scope.id.as_str())
            .push(" AND d.org_id = ")
            .push_bind(scope.org.as_str())
            .push(" AND i.collection = ")
            .push_bind(collection.as_str())
            .push(" AND (i.expires_at IS NULL OR i.expires_at > ")
            .push_bind(now)
            .push(") AND i.id IN (");
        let mut sep = builder.separated(", ");
        for id in ids {
            sep.push_bind(id.as_str());
        }
        builder.push(")");
        let rows = builder.build().fetch_all(&self.pool).await?;
        rows.iter().map(crate::rows::item_status).collect()
    }

    async fn delete_items(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        kind: Option<ItemKind>,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<DeletedItem>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        check_scope(&mut tx, scope).await?;
        let mut results = Vec::with_capacity(ids.len());
        for id in ids {
            let key: Option<i64> = sqlx::query(
                "SELECT item_key FROM items WHERE database_id = ?1 AND collection = ?2 AND id = ?3 AND (?4 IS NULL OR kind = ?4)
                   AND (expires_at IS NULL OR expires_at > ?5)",
            )
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .bind(id)
            .bind(kind.map(ItemKind::as_str))
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get(0))
            .transpose()?;
            let Some(key) = key else {
                results.push(DeletedItem {
                    id: id.clone(),
                    deleted: false,
                });
                continue;
            };
            sqlx::query("DELETE FROM items WHERE item_key = ?")
                .bind(key)
                .execute(&mut *tx)
                .await?;
            results.push(DeletedItem {
                id: id.clone(),
                deleted: true,
            });
        }
        tx.commit().await?;
        Ok(results)
    }

    async fn delete_collection(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        forget: bool,
    ) -> StoreResult<Option<u64>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        check_scope(&mut tx, scope).await?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM collections WHERE database_id = ? AND name = ?)",
        )
        .bind(scope.id.as_str())
        .bind(collection.as_str())
        .fetch_one(&mut *tx)
        .await?;
        if !exists {
            return Ok(None);
        }
        let deleted = sqlx::query("DELETE FROM items WHERE database_id = ? AND collection = ?")
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM raw_embeddings WHERE database_id = ? AND collection = ?")
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .execute(&mut *tx)
            .await?;
        if forget {
            sqlx::query("DELETE FROM collections WHERE database_id = ? AND name = ?")
                .bind(scope.id.as_str())
                .bind(collection.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(deleted))
    }

    async fn list_items(
        &self,
        scope: &DatabaseScope,
        query: &ItemQuery,
        now: UnixMs,
    ) -> StoreResult<ItemPage> {
        let mut count = QueryBuilder::<Sqlite>::new("SELECT COUNT(*)");
        push_list_where(&mut count, scope, query, now)?;
        let total: i64 = count.build().fetch_one(&self.pool).await?.try_get(0)?;
        let mut select = QueryBuilder::<Sqlite>::new("SELECT i.*");
        push_list_where(&mut select, scope, query, now)?;
        let offset = i64::from(query.page.max(1) - 1) * i64::from(query.page_size);
        select
            .push(" ORDER BY i.created_at DESC, i.item_key DESC LIMIT ")
            .push_bind(i64::from(query.page_size))
            .push(" OFFSET ")
            .push_bind(offset);
        let rows = select.build().fetch_all(&self.pool).await?;
        let items = rows
            .iter()
            .map(crate::rows::item)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(ItemPage {
            items,
            total: u64::try_from(total).map_err(|e| corrupt("count", e))?,
        })
    }

    async fn item_source(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        now: UnixMs,
    ) -> StoreResult<Option<ItemSource>> {
        let mut tx = self.pool.begin().await?;
        let Some(row) = select_live_item(scope, collection, id, now)
            .build()
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        let item_key: i64 = row.try_get("item_key")?;
        let payload = sqlx::query_scalar("SELECT bytes FROM item_payloads WHERE item_key = ?")
            .bind(item_key)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(ItemSource {
            item: crate::rows::item(&row)?,
            payload,
        }))
    }

    async fn edit_item_metadata(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        edit: &MetadataEdit,
        check: &MetadataCheck<'_>,
        now: UnixMs,
    ) -> StoreResult<MetadataEditOutcome> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let Some(row) = select_live_item(scope, collection, id, now)
            .build()
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(MetadataEditOutcome::NotFound);
        };
        let item_key: i64 = row.try_get("item_key")?;
        let object = |column: &str| -> StoreResult<serde_json::Map<String, serde_json::Value>> {
            Ok(row.json(column)?.as_object().cloned().unwrap_or_default())
        };
        let mut metadata = object("metadata")?;
        let mut additional_metadata = object("additional_metadata")?;
        edit.apply(&mut metadata, &mut additional_metadata);
        if let Err(reason) = check(&metadata, &additional_metadata) {
            return Ok(MetadataEditOutcome::Refused(reason));
        }
        sqlx::query(
            "UPDATE items SET metadata = ?, additional_metadata = ?, updated_at = ? WHERE item_key = ?",
        )
        .bind(serde_json::Value::Object(metadata.clone()).to_string())
        .bind(serde_json::Value::Object(additional_metadata.clone()).to_string())
        .bind(now)
        .bind(item_key)
        .execute(&mut *tx)
        .await?;
        let chunks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM chunks WHERE item_key = ?")
            .bind(item_key)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(MetadataEditOutcome::Edited {
            metadata,
            additional_metadata,
            chunks: u64::try_from(chunks).map_err(|e| corrupt("count", e))?,
        })
    }
}

#[async_trait]
impl ChunkFeed for SqliteStore {
    async fn chunk_feed_head(&self) -> StoreResult<i64> {
        // `sqlite_sequence` keeps the highest sequence ever handed out, trimmed or not.
        let head: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'")
                .fetch_optional(&self.pool)
                .await?;
        Ok(head.unwrap_or(0))
    }

    async fn chunk_changes(&self, after: i64, limit: u32) -> StoreResult<ChunkChanges> {
        // Every query asks: answer "nothing new" with one primary-key probe.
        let pending: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM chunk_log WHERE seq > ? ORDER BY seq LIMIT 1")
                .bind(after)
                .fetch_optional(&self.pool)
                .await?;
        if pending.is_none() {
            return Ok(ChunkChanges {
                through: after,
                ..ChunkChanges::default()
            });
        }
        // One read transaction, so the log page and the rows it names are one snapshot.
        let mut tx = self.pool.begin().await?;
        let logged: Vec<(i64, i64, String)> = sqlx::query_as(
            "SELECT seq, chunk_key, database_id FROM chunk_log WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        let Some(&(through, _, _)) = logged.last() else {
            return Ok(ChunkChanges {
                through: after,
                ..ChunkChanges::default()
            });
        };
        let mut seen = std::collections::HashSet::new();
        let removed: Vec<(DatabaseId, ChunkKey)> = logged
            .into_iter()
            .filter(|(_, key, database)| seen.insert((*key, database.clone())))
            .map(|(_, key, database)| (DatabaseId::from_trusted(database), ChunkKey(key)))
            .collect();
        let mut keys: Vec<i64> = removed.iter().map(|r| r.1 .0).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut current = Vec::with_capacity(keys.len());
        for slice in keys.chunks(10_000) {
            let mut select = QueryBuilder::<Sqlite>::new(format!(
                "SELECT {INDEXED_COLUMNS} FROM chunks c WHERE 1 = 1"
            ));
            push_in(&mut select, "c.chunk_key", slice.iter().copied());
            for row in select.build().fetch_all(&mut *tx).await? {
                current.push(crate::rows::indexed_chunk(&row)?);
            }
        }
        let mut databases: Vec<&DatabaseId> = removed.iter().map(|r| &r.0).collect();
        databases.sort_unstable();
        databases.dedup();
        let mut gone = Vec::new();
        for database in databases {
            let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM databases WHERE id = ?")
                .bind(database.as_str())
                .fetch_optional(&mut *tx)
                .await?;
            if exists.is_none() {
                gone.push(database.clone());
            }
        }
        tx.commit().await?;
        Ok(ChunkChanges {
            through,
            removed,
            current,
            gone,
        })
    }

    /// The embedded store is served by one process: its reader is the only one.
    async fn feed_reader_at(&self, _reader: &str, at: i64) -> StoreResult<i64> {
        let trimmed: i64 = sqlx::query_scalar("SELECT trimmed FROM chunk_feed")
            .fetch_one(&self.pool)
            .await?;
        if at < trimmed {
            return Err(StoreError::FeedBehind(format!(
                "changes up to {trimmed} were trimmed (the reader is at {at})"
            )));
        }
        Ok(at)
    }

    async fn trim_chunk_changes(&self, through: i64) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM chunk_log WHERE seq <= ?")
            .bind(through)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE chunk_feed SET trimmed = MAX(trimmed, ?)")
            .bind(through)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn chunk_feed_id(&self) -> StoreResult<String> {
        Ok(sqlx::query_scalar("SELECT id FROM chunk_feed")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn scan_chunks(
        &self,
        after: ChunkKey,
        limit: u32,
        scan: ChunkScan,
    ) -> StoreResult<Vec<IndexedChunk>> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM chunks c JOIN databases d ON d.id = c.database_id
             WHERE c.chunk_key > ? AND d.state <> 'deleting'
             ORDER BY c.chunk_key LIMIT ?",
            crate::rows::scan_columns(scan)
        ))
        .bind(after.0)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::rows::indexed_chunk).collect()
    }
}

/// An item is runnable: queued and due, or processing under an expired lease; never expired.
pub(crate) const RUNNABLE: &str = "i.status IN ('queued', 'processing', 'graph_creation')
    AND ((i.status = 'queued' AND i.run_after <= ?1) OR (i.status <> 'queued' AND i.lease_until < ?1))
    AND (i.expires_at IS NULL OR i.expires_at > ?1)";

/// The database whose turn it is among those with `runnable` items and room in their
/// organization's share (`?1` now, `?2` the share, `?3` the claiming owner). Whether a database
/// has runnable work is read from the queue's partial index: the planner, without statistics,
/// preferred `items_by_id` and walked every finished item of the database on every claim
/// (indexing fell from 850 to 140 chunks/s between 50k and 63k chunks).
pub(crate) fn database_in_turn(runnable: &str) -> String {
    format!(
        "SELECT d.id FROM databases d
         WHERE d.state <> 'deleting'
           AND EXISTS (SELECT 1 FROM items i INDEXED BY items_queue
                       WHERE i.database_id = d.id AND {runnable})
           AND (SELECT COUNT(DISTINCT f.lease_owner) FROM databases od JOIN items f ON f.database_id = od.id
                WHERE od.org_id = d.org_id AND f.status IN ('processing', 'graph_creation') AND f.lease_until >= ?1
                  AND f.lease_owner <> ?3) < ?2
         ORDER BY (SELECT MAX(o.served_turn) FROM databases o WHERE o.org_id = d.org_id),
                  d.served_turn, d.id
         LIMIT 1"
    )
}

/// Claims the next item in turn (see [`ClaimRequest`]), or `None` when nothing is runnable
/// within the organizations' shares; with `light`, only items of given text of at most that
/// many bytes. The database whose turn it was moves to the back.
async fn claim_next(
    tx: &mut SqliteConnection,
    claim: &ClaimRequest<'_>,
    light: Option<u64>,
) -> StoreResult<Option<SqliteRow>> {
    let runnable = match light {
        None => RUNNABLE.to_owned(),
        Some(most) => format!(
            "{RUNNABLE} AND i.origin <> 'file' AND octet_length(COALESCE(i.text, '')) <= {most}"
        ),
    };
    let database: Option<String> = sqlx::query_scalar(&database_in_turn(&runnable))
        .bind(claim.now)
        .bind(i64::from(claim.org_share))
        .bind(claim.owner)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(database) = database else {
        return Ok(None);
    };
    let row = sqlx::query(&format!(
        "UPDATE items SET status = CASE WHEN status = 'graph_creation' THEN status ELSE 'processing' END, lease_owner = ?2, lease_until = ?3,
             attempts = attempts + 1, updated_at = ?1
         WHERE item_key = (SELECT i.item_key FROM items i WHERE i.database_id = ?4 AND {runnable}
                           ORDER BY i.run_after, i.item_key LIMIT 1)
         RETURNING {CLAIMED_COLUMNS}"
    ))
    .bind(claim.now)
    .bind(claim.owner)
    .bind(claim.now.after(claim.lease))
    .bind(&database)
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE databases SET served_turn = (SELECT MAX(served_turn) FROM databases) + 1
         WHERE id = ?",
    )
    .bind(&database)
    .execute(&mut *tx)
    .await?;
    Ok(row)
}

#[async_trait]
impl WorkQueue for SqliteStore {
    async fn claim_items(&self, claim: &ClaimRequest<'_>) -> StoreResult<Vec<ClaimedItem>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let mut rows = Vec::new();
        for n in 0..claim.limit {
            let light = if n == 0 { None } else { claim.light_bytes };
            let Some(row) = claim_next(&mut tx, claim, light).await? else {
                break;
            };
            let heavy = crate::rows::ends_light_batch(&row, claim.light_bytes);
            rows.push(row);
            if heavy {
                break;
            }
        }
        tx.commit().await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let payload = if crate::rows::origin(row)? == ItemOrigin::File {
                sqlx::query("SELECT bytes FROM item_payloads WHERE item_key = ?")
                    .bind(row.int("item_key")?)
                    .fetch_optional(&self.pool)
                    .await?
                    .map(|r| r.try_get::<Vec<u8>, _>(0))
                    .transpose()?
            } else {
                None
            };
            claimed.push(crate::rows::claimed_item(row, claim.owner, payload)?);
        }
        Ok(claimed)
    }

    async fn release_dead_claims(&self) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let items = sqlx::query(
            "UPDATE items SET lease_owner = NULL, lease_until = 0
             WHERE status IN ('processing', 'graph_creation')",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let deliveries = sqlx::query(
            "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
             WHERE lease_owner IS NOT NULL",
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(items + deliveries)
    }

    async fn extend_lease(&self, item: &ClaimedItem, until: UnixMs) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE items SET lease_until = ?
             WHERE item_key = ? AND version = ? AND status IN ('processing', 'graph_creation')
               AND lease_owner = ?
               AND EXISTS (SELECT 1 FROM databases d
                           WHERE d.id = items.database_id AND d.state <> 'deleting')",
        )
        .bind(until)
        .bind(item.item_key)
        .bind(item.version)
        .bind(item.lease_owner.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn complete_item(
        &self,
        item: &ClaimedItem,
        chunks: &[NewChunk],
        then: AfterChunks,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let graph = then == AfterChunks::Graph;
        let done = sqlx::query(
            "UPDATE items SET status = CASE WHEN ? THEN 'graph_creation' ELSE 'completed' END,
                 text = COALESCE(?, text),
                 lease_owner = CASE WHEN ? THEN lease_owner END,
                 lease_until = CASE WHEN ? THEN lease_until END,
                 error_code = '', error_message = '', updated_at = ?
             WHERE item_key = ? AND version = ? AND status = 'processing' AND lease_owner = ?",
        )
        .bind(graph)
        .bind(&item.text)
        .bind(graph)
        .bind(graph)
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
        sqlx::query("DELETE FROM chunks WHERE item_key = ?")
            .bind(item.item_key)
            .execute(&mut *tx)
            .await?;
        for chunk in chunks {
            sqlx::query(
                "INSERT INTO chunks (chunk_id, item_key, database_id, collection, kind, position, content,
                     context, layout, embedding, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&chunk.chunk_id)
            .bind(item.item_key)
            .bind(item.database_id.as_str())
            .bind(item.collection.as_str())
            .bind(item.kind.as_str())
            .bind(i64::from(chunk.position))
            .bind(&chunk.content)
            .bind(&chunk.context)
            .bind(json_text(&chunk.layout, "layout")?)
            .bind(embedding_bytes(&chunk.embedding))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        if !graph {
            super::webhooks::record_event(&mut tx, item, IndexingStatus::Completed, "", "", now)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn fail_item(
        &self,
        item: &ClaimedItem,
        failure: &ItemFailure,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let (status, run_after) = match failure.retry_at {
            Some(at) => ("queued", at),
            None => ("errored", now),
        };
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let done = sqlx::query(
            "UPDATE items SET status = ?, run_after = ?, error_code = ?, error_message = ?, lease_owner = NULL,
                 lease_until = NULL, updated_at = ?
             WHERE item_key = ? AND version = ? AND status = 'processing' AND lease_owner = ?",
        )
        .bind(status)
        .bind(run_after)
        .bind(failure.code.as_str())
        .bind(&failure.message)
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
        if failure.retry_at.is_none() {
            super::webhooks::record_event(
                &mut tx,
                item,
                IndexingStatus::Errored,
                failure.code.as_str(),
                &failure.message,
                now,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn purge_expired(&self, now: UnixMs, limit: u32) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let chunks: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM chunks c WHERE c.item_key IN (
                 SELECT item_key FROM items WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM items WHERE item_key IN (
                 SELECT item_key FROM items WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?)",
        )
        .bind(now)
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(u64::try_from(chunks).unwrap_or(0))
    }

    async fn preceding_memory(
        &self,
        item: &ClaimedItem,
        now: UnixMs,
    ) -> StoreResult<Option<String>> {
        if item.kind != ItemKind::Memory || item.title.is_empty() {
            return Ok(None);
        }
        let text: Option<Option<String>> = sqlx::query_scalar(
            "SELECT p.text FROM items c JOIN items p
                 ON p.database_id = c.database_id AND p.collection = c.collection
                AND p.kind = 'memory' AND p.title <> '' AND p.user_name = c.user_name
                AND p.title = c.title AND p.item_key < c.item_key
             WHERE c.item_key = ? AND c.database_id = ?
               AND (p.expires_at IS NULL OR p.expires_at > ?)
             ORDER BY p.item_key DESC LIMIT 1",
        )
        .bind(item.item_key)
        .bind(item.database_id.as_str())
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(text.flatten().filter(|t| !t.trim().is_empty()))
    }
}
