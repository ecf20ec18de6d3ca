//! Items on both backends: enqueueing (a replaced item goes back to the queue with its old
//! chunks gone), statuses, deletion, listing, an item's source and its metadata edits.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use engram_types::{CollectionName, IndexingStatus, ItemKind, UnixMs};
use serde_json::{Map, Value};

use crate::backend::{check_scope, one, push_live_scope, ListParam, Sql, SqlStore};
use crate::error::corrupt;
use crate::queue::QueueDialect;
use crate::rows::Columns as _;
use crate::{
    DatabaseScope, DeletedItem, EnqueueOutcome, HistoryEntry, ItemPage, ItemQuery, ItemSource,
    ItemStatus, ItemStore, MetadataCheck, MetadataEdit, MetadataEditOutcome, NewItem, StoreResult,
};

/// `SELECT i.* FROM items i …` of one live item, by collection and id.
pub(crate) fn select_live_item(
    scope: &DatabaseScope,
    collection: &CollectionName,
    id: &str,
    now: UnixMs,
) -> Sql {
    let mut select = Sql::new(
        "SELECT i.* FROM items i JOIN databases d ON d.id = i.database_id WHERE i.collection = ",
    );
    select
        .push_bind(collection.as_str())
        .push(" AND i.id = ")
        .push_bind(id);
    push_live_scope(&mut select, scope, "i.database_id", now);
    select
}

/// Writes one item (new, or replacing `existing`: its key and whether it had expired); its key.
async fn write_item<B: QueueDialect>(
    conn: &mut B::Connection,
    scope: &DatabaseScope,
    item: &NewItem,
    existing: Option<(i64, bool)>,
    now: UnixMs,
) -> StoreResult<i64> {
    if let Some((key, _)) = existing {
        B::execute(
            conn,
            Sql::new("DELETE FROM chunks WHERE item_key = $1").bind(key),
        )
        .await?;
        let payload = Sql::new("DELETE FROM item_payloads WHERE item_key = $1").bind(key);
        B::execute(conn, payload).await?;
    }
    let f = &item.fields;
    // One statement for new and replaced items: a replaced item keeps its key and creation time,
    // gets a new version and goes back to the queue.
    let upsert = Sql::new(
        "INSERT INTO items (database_id, collection, id, kind, origin, filename, media_type, title, source_type,
             description, note, url, timestamp, text, metadata, additional_metadata, attachments, relations,
             user_name, infer, expires_at, instructions, title_key, request_id, status, run_after, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $25, 'queued', $24, $24, $24)
         ON CONFLICT (database_id, collection, id) DO UPDATE SET
             kind = excluded.kind, origin = excluded.origin, filename = excluded.filename,
             media_type = excluded.media_type, title = excluded.title, source_type = excluded.source_type,
             description = excluded.description, note = excluded.note, url = excluded.url,
             timestamp = excluded.timestamp, text = excluded.text, metadata = excluded.metadata,
             additional_metadata = excluded.additional_metadata, attachments = excluded.attachments,
             relations = excluded.relations, user_name = excluded.user_name, infer = excluded.infer,
             expires_at = excluded.expires_at, instructions = excluded.instructions,
             title_key = excluded.title_key, request_id = excluded.request_id,
             version = items.version + 1, status = 'queued',
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
    .bind(f.text.as_deref())
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
    .bind(&f.request_id);
    let item_key = one::<B>(conn, upsert).await?.int("item_key")?;
    if let Some(payload) = &item.payload {
        let insert = Sql::new("INSERT INTO item_payloads (item_key, bytes) VALUES ($1, $2)")
            .bind(item_key)
            .bind(payload.as_slice());
        B::execute(conn, insert).await?;
    }
    crate::graph::write_declared::<B>(
        conn,
        scope,
        item_key,
        item,
        existing.map(|(_, expired)| expired),
    )
    .await?;
    Ok(item_key)
}

/// ` FROM … WHERE …` of a listing: scope, liveness and every filter.
fn push_list_where<B: QueueDialect>(
    sql: &mut Sql,
    scope: &DatabaseScope,
    query: &ItemQuery,
    now: UnixMs,
) -> StoreResult<()> {
    sql.push(" FROM items i JOIN databases d ON d.id = i.database_id WHERE 1 = 1");
    push_live_scope(sql, scope, "i.database_id", now);
    if let Some(kind) = query.kind {
        sql.push(" AND i.kind = ").push_bind(kind.as_str());
    }
    let collections = query
        .collections
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    B::push_in(sql, "i.collection", ListParam::Texts(collections));
    B::push_in(sql, "i.id", ListParam::Texts(query.ids.clone()));
    let statuses = query
        .statuses
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    B::push_in(sql, "i.status", ListParam::Texts(statuses));
    for (key, value) in &query.metadata {
        B::push_filter(sql, "metadata", key, value)?;
    }
    for (key, value) in &query.additional_metadata {
        B::push_filter(sql, "additional_metadata", key, value)?;
    }
    for (field, value) in &query.fields {
        sql.push(format!(" AND i.{} = ", field.column()))
            .push_bind(value);
    }
    Ok(())
}

#[async_trait]
impl<B: QueueDialect> ItemStore for SqlStore<B> {
    async fn enqueue_items(
        &self,
        scope: &DatabaseScope,
        items: &[NewItem],
        upsert: bool,
        now: UnixMs,
    ) -> StoreResult<Vec<EnqueueOutcome>> {
        let mut tx = B::begin_write(&self.pool).await?;
        check_scope::<B>(&mut tx, scope).await?;
        let mut outcomes = Vec::with_capacity(items.len());
        let mut feed_locked = false;
        let mut existing: HashMap<(String, String), (i64, bool)> =
            B::existing_items(&mut tx, scope, items, now).await?;
        let collections: BTreeSet<&str> = items.iter().map(|i| i.collection.as_str()).collect();
        for collection in collections {
            let insert = Sql::new(
                "INSERT INTO collections (database_id, name, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
            )
            .bind(scope.id.as_str())
            .bind(collection)
            .bind(now);
            B::execute(&mut tx, insert).await?;
        }
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
                B::lock_feed(&mut tx).await?;
                feed_locked = true;
            }
            let key = write_item::<B>(&mut tx, scope, item, found, now).await?;
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
        let mut select = Sql::new(
            "SELECT i.id, i.kind, i.status, i.error_code, i.error_message
             FROM items i JOIN databases d ON d.id = i.database_id
             WHERE i.database_id = ",
        );
        select
            .push_bind(scope.id.as_str())
            .push(" AND d.org_id = ")
            .push_bind(scope.org.as_str())
            .push(" AND i.collection = ")
            .push_bind(collection.as_str())
            .push(" AND (i.expires_at IS NULL OR i.expires_at > ")
            .push_bind(now)
            .push(")");
        B::push_in(&mut select, "i.id", ListParam::Texts(ids.to_vec()));
        let rows = self.all(select).await?;
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
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        check_scope::<B>(&mut tx, scope).await?;
        let mut results = Vec::with_capacity(ids.len());
        for id in ids {
            let find = Sql::new(
                "SELECT item_key FROM items
                 WHERE database_id = $1 AND collection = $2 AND id = $3
                   AND (CAST($4 AS TEXT) IS NULL OR kind = $4)
                   AND (expires_at IS NULL OR expires_at > $5)",
            )
            .bind(scope.id.as_str())
            .bind(collection.as_str())
            .bind(id)
            .bind(kind.map(ItemKind::as_str))
            .bind(now);
            let Some(row) = B::fetch_optional(&mut tx, find).await? else {
                results.push(DeletedItem {
                    id: id.clone(),
                    deleted: false,
                });
                continue;
            };
            let delete =
                Sql::new("DELETE FROM items WHERE item_key = $1").bind(row.int("item_key")?);
            B::execute(&mut tx, delete).await?;
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
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        check_scope::<B>(&mut tx, scope).await?;
        let of_collection = |text: &str| {
            Sql::new(text)
                .bind(scope.id.as_str())
                .bind(collection.as_str())
        };
        let exists =
            of_collection("SELECT name FROM collections WHERE database_id = $1 AND name = $2");
        if B::fetch_optional(&mut tx, exists).await?.is_none() {
            return Ok(None);
        }
        let deleted = B::execute(
            &mut tx,
            of_collection("DELETE FROM items WHERE database_id = $1 AND collection = $2"),
        )
        .await?;
        B::execute(
            &mut tx,
            of_collection("DELETE FROM raw_embeddings WHERE database_id = $1 AND collection = $2"),
        )
        .await?;
        if forget {
            B::execute(
                &mut tx,
                of_collection("DELETE FROM collections WHERE database_id = $1 AND name = $2"),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some(deleted))
    }

    async fn item_history(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        now: UnixMs,
    ) -> StoreResult<Vec<HistoryEntry>> {
        let mut select = Sql::new(
            "SELECT h.status AS status, h.error_code AS error_code,
                    h.error_message AS error_message, h.at AS at
             FROM item_history h JOIN items i ON i.item_key = h.item_key
             JOIN databases d ON d.id = i.database_id WHERE 1 = 1",
        );
        push_live_scope(&mut select, scope, "i.database_id", now);
        select
            .push(" AND i.collection = ")
            .push_bind(collection.as_str())
            .push(" AND i.id = ")
            .push_bind(id)
            .push(" ORDER BY h.entry_key");
        self.all(select)
            .await?
            .iter()
            .map(|row| {
                let status = row.text("status")?;
                Ok(HistoryEntry {
                    status: IndexingStatus::parse(&status)
                        .ok_or_else(|| corrupt("status", format!("unknown state `{status}`")))?,
                    error_code: row.text("error_code")?,
                    error_message: row.text("error_message")?,
                    at: UnixMs::from_millis(row.int("at")?),
                })
            })
            .collect()
    }

    async fn item_status_counts(
        &self,
        scope: &DatabaseScope,
        only: &[IndexingStatus],
        now: UnixMs,
    ) -> StoreResult<Vec<(IndexingStatus, u64)>> {
        let mut count = Sql::new("SELECT i.status AS status, COUNT(*) AS n");
        let query = ItemQuery {
            statuses: only.to_vec(),
            ..ItemQuery::default()
        };
        push_list_where::<B>(&mut count, scope, &query, now)?;
        count.push(" GROUP BY i.status");
        self.all(count)
            .await?
            .iter()
            .map(|row| {
                let status = row.text("status")?;
                let status = IndexingStatus::parse(&status)
                    .ok_or_else(|| corrupt("status", format!("unknown state `{status}`")))?;
                let n = u64::try_from(row.int("n")?).map_err(|e| corrupt("count", e))?;
                Ok((status, n))
            })
            .collect()
    }

    async fn list_items(
        &self,
        scope: &DatabaseScope,
        query: &ItemQuery,
        now: UnixMs,
    ) -> StoreResult<ItemPage> {
        let mut count = Sql::new("SELECT COUNT(*) AS n");
        push_list_where::<B>(&mut count, scope, query, now)?;
        let total = self.one(count).await?.int("n")?;
        let mut select = Sql::new("SELECT i.*");
        push_list_where::<B>(&mut select, scope, query, now)?;
        let offset = i64::from(query.page.max(1) - 1) * i64::from(query.page_size);
        select
            .push(" ORDER BY i.created_at DESC, i.item_key DESC LIMIT ")
            .push_bind(query.page_size)
            .push(" OFFSET ")
            .push_bind(offset);
        let rows = self.all(select).await?;
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
        let select = select_live_item(scope, collection, id, now);
        let Some(row) = B::fetch_optional(&mut tx, select).await? else {
            return Ok(None);
        };
        let payload = Sql::new("SELECT bytes FROM item_payloads WHERE item_key = $1")
            .bind(row.int("item_key")?);
        let payload = match B::fetch_optional(&mut tx, payload).await? {
            Some(found) => Some(found.bytes("bytes")?),
            None => None,
        };
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
        let mut tx = B::begin_write(&self.pool).await?;
        let mut select = select_live_item(scope, collection, id, now);
        select.push(B::FOR_UPDATE_OF_ITEM);
        let Some(row) = B::fetch_optional(&mut tx, select).await? else {
            return Ok(MetadataEditOutcome::NotFound);
        };
        let item_key = row.int("item_key")?;
        let object = |column: &str| -> StoreResult<Map<String, Value>> {
            Ok(row.json(column)?.as_object().cloned().unwrap_or_default())
        };
        let mut metadata = object("metadata")?;
        let mut additional_metadata = object("additional_metadata")?;
        edit.apply(&mut metadata, &mut additional_metadata);
        if let Err(reason) = check(&metadata, &additional_metadata) {
            return Ok(MetadataEditOutcome::Refused(reason));
        }
        let update = Sql::new(
            "UPDATE items SET metadata = $1, additional_metadata = $2, updated_at = $3
             WHERE item_key = $4",
        )
        .bind(Value::Object(metadata.clone()))
        .bind(Value::Object(additional_metadata.clone()))
        .bind(now)
        .bind(item_key);
        B::execute(&mut tx, update).await?;
        // The indexes hold the item's metadata with each of its chunks (to filter inside them):
        // its chunks enter the feed again, in this transaction.
        B::lock_feed(&mut tx).await?;
        let logged = Sql::new(
            "INSERT INTO chunk_log (chunk_key, database_id)
             SELECT chunk_key, database_id FROM chunks WHERE item_key = $1",
        )
        .bind(item_key);
        B::execute(&mut tx, logged).await?;
        let count = Sql::new("SELECT COUNT(*) AS n FROM chunks WHERE item_key = $1").bind(item_key);
        let chunks = one::<B>(&mut tx, count).await?.int("n")?;
        tx.commit().await?;
        Ok(MetadataEditOutcome::Edited {
            metadata,
            additional_metadata,
            chunks: u64::try_from(chunks).map_err(|e| corrupt("count", e))?,
        })
    }
}
