//! Items, chunks, the chunk change feed and the work queue on PostgreSQL. Every transaction that
//! writes chunks (directly or by cascade) takes the feed's lock first; claims take the claim
//! lock, so instances hand out work in one turn order.

use async_trait::async_trait;
use engram_types::UnixMs;
use engram_types::{CollectionName, DatabaseId, IndexingStatus, ItemKind};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Postgres, QueryBuilder, Row};

use super::sql::*;
use super::PgStore;
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
) -> QueryBuilder<'a, Postgres> {
    let mut select = QueryBuilder::<Postgres>::new(
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
    conn: &mut PgConnection,
    scope: &DatabaseScope,
    item: &NewItem,
    // The item this one replaces, and whether it had expired.
    existing: Option<(i64, bool)>,
    now: UnixMs,
) -> StoreResult<i64> {
    if let Some((key, _)) = existing {
        sqlx::query("DELETE FROM chunks WHERE item_key = $1")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM item_payloads WHERE item_key = $1")
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
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, 'queued', $24, $25, $26)
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
    .bind(&f.metadata)
    .bind(&f.additional_metadata)
    .bind(&f.attachments)
    .bind(&f.relations)
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
        sqlx::query("INSERT INTO item_payloads (item_key, bytes) VALUES ($1, $2)")
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
    Ok(item_key)
}

/// `WHERE …` of a listing: scope, liveness and every filter.
fn push_list_where(
    builder: &mut QueryBuilder<'_, Postgres>,
    scope: &DatabaseScope,
    query: &ItemQuery,
    now: UnixMs,
) -> StoreResult<()> {
    builder.push(" FROM items i JOIN databases d ON d.id = i.database_id WHERE 1 = 1");
    push_live_scope(builder, scope, "i.database_id", now);
    if let Some(kind) = query.kind {
        builder.push(" AND i.kind = ").push_bind(kind.as_str());
    }
    push_any(
        builder,
        "i.collection",
        query
            .collections
            .iter()
            .map(|c| c.as_str().to_owned())
            .collect(),
    );
    push_any(builder, "i.id", query.ids.clone());
    for (key, value) in &query.metadata {
        push_filter(builder, "metadata", key, value);
    }
    for (key, value) in &query.additional_metadata {
        push_filter(builder, "additional_metadata", key, value);
    }
    for (field, value) in &query.fields {
        builder
            .push(format!(" AND i.{} = ", field.column()))
            .push_bind(value.clone());
    }
    Ok(())
}

#[async_trait]
impl ItemStore for PgStore {
    async fn enqueue_items(
        &self,
        scope: &DatabaseScope,
        items: &[NewItem],
        upsert: bool,
        now: UnixMs,
    ) -> StoreResult<Vec<EnqueueOutcome>> {
        let mut tx = self.pool.begin().await?;
        check_scope(&mut tx, scope).await?;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut feed_locked = false;
        // The request's ids that exist, in one statement by their unique key (per item, the
        // planner could pick a scan of the collection from plans made while the table was small).
        let (collections, ids): (Vec<&str>, Vec<&str>) = items
            .iter()
            .map(|item| (item.collection.as_str(), item.id.as_str()))
            .unzip();
        let rows: Vec<(String, String, i64, bool)> = sqlx::query_as(
            "SELECT i.collection, i.id, i.item_key, i.expires_at IS NOT NULL AND i.expires_at <= $1
             FROM items i JOIN unnest($3::text[], $4::text[]) AS n(collection, id)
               ON i.collection = n.collection AND i.id = n.id
             WHERE i.database_id = $2",
        )
        .bind(now)
        .bind(scope.id.as_str())
        .bind(&collections)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        let mut existing: std::collections::HashMap<(String, String), (i64, bool)> = rows
            .into_iter()
            .map(|(collection, id, key, expired)| ((collection, id), (key, expired)))
            .collect();
        sqlx::query(
            "INSERT INTO collections (database_id, name, created_at)
             SELECT $1, name, $3 FROM unnest($2::text[]) AS n(name)
             ON CONFLICT DO NOTHING",
        )
        .bind(scope.id.as_str())
        .bind(&collections)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        for item in items {
            let name = (item.collection.as_str().to_owned(), item.id.clone());
            let found = existing.get(&name).copied();
            if let Some((_, false)) = found {
                if !upsert {
                    outcomes.push(EnqueueOutcome::Exists);
                    continue;
                }
            }
            // A replaced item (an upsert, or an expired one) takes its old chunks with it: the
            // feed's lock comes first, before this transaction touches any existing item row.
            if found.is_some() && !feed_locked {
                lock_feed(&mut tx).await?;
                feed_locked = true;
            }
            let key = write_item(&mut tx, scope, item, found, now).await?;
            // The same id again later in the request is an existing item.
            existing.insert(name, (key, false));
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
        let mut builder = QueryBuilder::<Postgres>::new(
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
            .push(")");
        push_any(&mut builder, "i.id", ids.to_vec());
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
        let mut tx = self.pool.begin().await?;
        lock_feed(&mut tx).await?;
        check_scope(&mut tx, scope).await?;
        let mut results = Vec::with_capacity(ids.len());
        for id in ids {
            let key: Option<i64> = sqlx::query(
                "SELECT item_key FROM items WHERE database_id = $1 AND collection = $2 AND id = $3 AND ($4::text IS NULL OR kind = $4)
                   AND (expires_at IS NULL OR expires_at > $5)",
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
            sqlx::query("DELETE FROM items WHERE item_key = $1")
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
        let mut tx = self.pool.begin().await?;
        lock_feed(&mut tx).await?;
        check_scope(&mut tx, scope).await?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM collections WHERE database_id = $1 AND name = $2)",
        )
        .bind(scope.id.as_str())
        .bind(collection.as_str())
        .fetch_one(&mut *tx)
        .await?;
        if !exists {
            return Ok(None);
        }
        let deleted = sqlx::query("DELETE FROM items WHERE database_id = $1 AND collection = $2")
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM raw_embeddings WHERE database_id = $1 AND collection = $2")
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .execute(&mut *tx)
            .await?;
        if forget {
            sqlx::query("DELETE FROM collections WHERE database_id = $1 AND name = $2")
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
        let mut count = QueryBuilder::<Postgres>::new("SELECT COUNT(*)");
        push_list_where(&mut count, scope, query, now)?;
        let total: i64 = count.build().fetch_one(&self.pool).await?.try_get(0)?;
        let mut select = QueryBuilder::<Postgres>::new("SELECT i.*");
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
        let payload = sqlx::query_scalar("SELECT bytes FROM item_payloads WHERE item_key = $1")
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
        let mut tx = self.pool.begin().await?;
        let mut select = select_live_item(scope, collection, id, now);
        select.push(" FOR UPDATE OF i");
        let Some(row) = select.build().fetch_optional(&mut *tx).await? else {
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
            "UPDATE items SET metadata = $1, additional_metadata = $2, updated_at = $3 WHERE item_key = $4",
        )
        .bind(serde_json::Value::Object(metadata.clone()))
        .bind(serde_json::Value::Object(additional_metadata.clone()))
        .bind(now)
        .bind(item_key)
        .execute(&mut *tx)
        .await?;
        let chunks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM chunks WHERE item_key = $1")
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

/// A reader of the feed not heard from for this long is taken for gone: trimming no longer
/// waits for it (every instance notes its position at least every few minutes, even when idle).
const FEED_READER_TIMEOUT_MS: i64 = 15 * 60 * 1000;

/// The server's clock (Unix ms): readers of several instances are compared on one clock.
async fn server_now_ms(pool: &sqlx::PgPool) -> StoreResult<i64> {
    Ok(
        sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT")
            .fetch_one(pool)
            .await?,
    )
}

#[async_trait]
impl ChunkFeed for PgStore {
    async fn chunk_feed_head(&self) -> StoreResult<i64> {
        // Waits for the chunk writers in flight (they hold the feed's lock until they commit),
        // so every change up to the head is visible to the scan that follows.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock_shared(7405, 1)")
            .execute(&mut *tx)
            .await?;
        // The sequence keeps the highest number ever handed out, trimmed or not.
        let head: Option<i64> = sqlx::query_scalar(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence('chunk_log', 'seq')::regclass)",
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(head.unwrap_or(0))
    }

    async fn chunk_changes(&self, after: i64, limit: u32) -> StoreResult<ChunkChanges> {
        // Every query asks: answer "nothing new" with one primary-key probe.
        let pending: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM chunk_log WHERE seq > $1 ORDER BY seq LIMIT 1")
                .bind(after)
                .fetch_optional(&self.pool)
                .await?;
        if pending.is_none() {
            return Ok(ChunkChanges {
                through: after,
                ..ChunkChanges::default()
            });
        }
        // One snapshot for the log page and the rows it names.
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let logged: Vec<(i64, i64, String)> = sqlx::query_as(
            "SELECT seq, chunk_key, database_id FROM chunk_log WHERE seq > $1 ORDER BY seq LIMIT $2",
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
        let rows = sqlx::query(&format!(
            "SELECT {INDEXED_COLUMNS} FROM unnest($1::bigint[]) AS k(chunk_key)
             JOIN chunks c ON c.chunk_key = k.chunk_key"
        ))
        .bind(keys)
        .fetch_all(&mut *tx)
        .await?;
        let current = rows
            .iter()
            .map(crate::rows::indexed_chunk)
            .collect::<StoreResult<Vec<_>>>()?;
        let mut databases: Vec<String> = removed.iter().map(|r| r.0.as_str().to_owned()).collect();
        databases.sort_unstable();
        databases.dedup();
        let gone: Vec<String> = sqlx::query_scalar(
            "SELECT n.id FROM unnest($1::text[]) AS n(id)
             WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = n.id)",
        )
        .bind(databases)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ChunkChanges {
            through,
            removed,
            current,
            gone: gone.into_iter().map(DatabaseId::from_trusted).collect(),
        })
    }

    async fn feed_reader_at(&self, reader: &str, at: i64) -> StoreResult<i64> {
        // Trimming waits for every live reader, so only one that was taken for gone can be
        // behind the trimmed part.
        let trimmed: i64 = sqlx::query_scalar("SELECT through FROM chunk_log_trimmed")
            .fetch_one(&self.pool)
            .await?;
        if at < trimmed {
            sqlx::query("DELETE FROM chunk_feed_readers WHERE reader = $1")
                .bind(reader)
                .execute(&self.pool)
                .await?;
            return Err(StoreError::FeedBehind(format!(
                "changes up to {trimmed} were trimmed while this reader was away (it is at {at})"
            )));
        }
        let now = server_now_ms(&self.pool).await?;
        let slowest: Option<i64> = sqlx::query_scalar(
            "WITH noted AS (
                 INSERT INTO chunk_feed_readers (reader, through, seen_at) VALUES ($1, $2, $3)
                 ON CONFLICT (reader) DO UPDATE SET through = excluded.through, seen_at = excluded.seen_at)
             SELECT LEAST($2, MIN(through)) FROM chunk_feed_readers
             WHERE reader <> $1 AND seen_at > $3 - $4",
        )
        .bind(reader)
        .bind(at)
        .bind(now)
        .bind(FEED_READER_TIMEOUT_MS)
        .fetch_one(&self.pool)
        .await?;
        sqlx::query("DELETE FROM chunk_feed_readers WHERE seen_at < $1 - $2")
            .bind(now)
            .bind(FEED_READER_TIMEOUT_MS)
            .execute(&self.pool)
            .await?;
        Ok(slowest.unwrap_or(at))
    }

    async fn chunk_feed_id(&self) -> StoreResult<String> {
        Ok(sqlx::query_scalar("SELECT feed FROM chunk_log_trimmed")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn trim_chunk_changes(&self, through: i64) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM chunk_log WHERE seq <= $1")
            .bind(through)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE chunk_log_trimmed SET through = GREATEST(through, $1)")
            .bind(through)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn scan_chunks(
        &self,
        after: ChunkKey,
        limit: u32,
        scan: ChunkScan,
    ) -> StoreResult<Vec<IndexedChunk>> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM chunks c JOIN databases d ON d.id = c.database_id
             WHERE c.chunk_key > $1 AND d.state <> 'deleting'
             ORDER BY c.chunk_key LIMIT $2",
            crate::rows::scan_columns(scan)
        ))
        .bind(after.0)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::rows::indexed_chunk).collect()
    }
}

/// Chunks per `INSERT` (11 parameters each; PostgreSQL takes at most 65,535 per statement).
const CHUNKS_PER_INSERT: usize = 1_000;

/// An item is runnable: queued and due, or processing under an expired lease; never expired.
const RUNNABLE: &str = "i.status IN ('queued', 'processing', 'graph_creation')
    AND ((i.status = 'queued' AND i.run_after <= $1) OR (i.status <> 'queued' AND i.lease_until < $1))
    AND (i.expires_at IS NULL OR i.expires_at > $1)";

/// Claims the next item in turn (see [`ClaimRequest`]), or `None` when nothing is runnable
/// within the organizations' shares; with `light`, only items of given text of at most that
/// many bytes. The database whose turn it was moves to the back.
async fn claim_next(
    tx: &mut PgConnection,
    claim: &ClaimRequest<'_>,
    light: Option<u64>,
) -> StoreResult<Option<PgRow>> {
    let runnable = match light {
        None => RUNNABLE.to_owned(),
        Some(most) => format!(
            "{RUNNABLE} AND i.origin <> 'file' AND octet_length(COALESCE(i.text, '')) <= {most}"
        ),
    };
    let database: Option<String> = sqlx::query_scalar(&format!(
        // The runnable item is looked up in queue order, so the planner walks the queue index
        // (an EXISTS let it scan the table, past every completed and dead row).
        "SELECT d.id FROM databases d
         JOIN LATERAL (SELECT 1 FROM items i WHERE i.database_id = d.id AND {runnable}
                       ORDER BY i.run_after, i.item_key LIMIT 1) due ON TRUE
         WHERE d.state <> 'deleting'
           AND (SELECT COUNT(DISTINCT f.lease_owner) FROM databases od JOIN items f ON f.database_id = od.id
                WHERE od.org_id = d.org_id AND f.status IN ('processing', 'graph_creation') AND f.lease_until >= $1
                  AND f.lease_owner <> $3) < $2
         ORDER BY (SELECT MAX(o.served_turn) FROM databases o WHERE o.org_id = d.org_id),
                  d.served_turn, d.id
         LIMIT 1"
    ))
    .bind(claim.now)
    .bind(i64::from(claim.org_share))
    .bind(claim.owner)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(database) = database else {
        return Ok(None);
    };
    // The database's row is locked before the item's: a delete holds the row shared (scope
    // check) while it waits for the item, so the other order deadlocks with it.
    sqlx::query(
        "UPDATE databases SET served_turn = (SELECT MAX(served_turn) FROM databases) + 1
         WHERE id = $1",
    )
    .bind(&database)
    .execute(&mut *tx)
    .await?;
    let row = sqlx::query(&format!(
        "UPDATE items SET status = CASE WHEN status = 'graph_creation' THEN status ELSE 'processing' END, lease_owner = $2, lease_until = $3,
             attempts = attempts + 1, updated_at = $1
         WHERE item_key = (SELECT i.item_key FROM items i WHERE i.database_id = $4 AND {runnable}
                           ORDER BY i.run_after, i.item_key LIMIT 1
                           FOR UPDATE OF i SKIP LOCKED)
         RETURNING {CLAIMED_COLUMNS}"
    ))
    .bind(claim.now)
    .bind(claim.owner)
    .bind(claim.now.after(claim.lease))
    .bind(&database)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row)
}

#[async_trait]
impl WorkQueue for PgStore {
    async fn claim_items(&self, claim: &ClaimRequest<'_>) -> StoreResult<Vec<ClaimedItem>> {
        let mut tx = self.pool.begin().await?;
        lock_claims(&mut tx).await?;
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
                sqlx::query("SELECT bytes FROM item_payloads WHERE item_key = $1")
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

    /// Several instances share the store: a claim found at start may be a live instance's, so
    /// none is released; a dead instance's claims are taken up when their leases run out.
    async fn release_dead_claims(&self) -> StoreResult<u64> {
        Ok(0)
    }

    async fn extend_lease(&self, item: &ClaimedItem, until: UnixMs) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE items SET lease_until = $1
             WHERE item_key = $2 AND version = $3 AND status IN ('processing', 'graph_creation')
               AND lease_owner = $4
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
        let mut tx = self.pool.begin().await?;
        lock_feed(&mut tx).await?;
        let graph = then == AfterChunks::Graph;
        let done = sqlx::query(
            "UPDATE items SET status = CASE WHEN $6 THEN 'graph_creation' ELSE 'completed' END,
                 text = COALESCE($1, text),
                 lease_owner = CASE WHEN $6 THEN lease_owner END,
                 lease_until = CASE WHEN $6 THEN lease_until END,
                 error_code = '', error_message = '', updated_at = $2
             WHERE item_key = $3 AND version = $4 AND status = 'processing' AND lease_owner = $5",
        )
        .bind(&item.text)
        .bind(now)
        .bind(item.item_key)
        .bind(item.version)
        .bind(&item.lease_owner)
        .bind(graph)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query("DELETE FROM chunks WHERE item_key = $1")
            .bind(item.item_key)
            .execute(&mut *tx)
            .await?;
        for batch in chunks.chunks(CHUNKS_PER_INSERT) {
            let mut insert = QueryBuilder::<Postgres>::new(
                "INSERT INTO chunks (chunk_id, item_key, database_id, collection, kind, position, content,
                     context, layout, embedding, created_at) ",
            );
            insert.push_values(batch, |mut row, chunk| {
                row.push_bind(&chunk.chunk_id)
                    .push_bind(item.item_key)
                    .push_bind(item.database_id.as_str())
                    .push_bind(item.collection.as_str())
                    .push_bind(item.kind.as_str())
                    .push_bind(i64::from(chunk.position))
                    .push_bind(&chunk.content)
                    .push_bind(&chunk.context)
                    .push_bind(&chunk.layout)
                    .push_bind(to_vector(&chunk.embedding))
                    .push_bind(now);
            });
            insert.build().execute(&mut *tx).await?;
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
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE items SET status = $1, run_after = $2, error_code = $3, error_message = $4, lease_owner = NULL,
                 lease_until = NULL, updated_at = $5
             WHERE item_key = $6 AND version = $7 AND status = 'processing' AND lease_owner = $8",
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
        let mut tx = self.pool.begin().await?;
        lock_feed(&mut tx).await?;
        let chunks: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM chunks c WHERE c.item_key IN (
                 SELECT item_key FROM items WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM items WHERE item_key IN (
                 SELECT item_key FROM items WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)",
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
             WHERE c.item_key = $1 AND c.database_id = $2
               AND (p.expires_at IS NULL OR p.expires_at > $3)
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
