//! The work queue and the chunk change feed on both backends. What the backends do their own
//! way is a [`QueueDialect`]: which item is claimed next (one serving process on SQLite, several
//! instances taking turns under one lock on PostgreSQL), how the request's existing items are
//! found, and where the feed keeps its head and its readers.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use async_trait::async_trait;
use engram_types::{DatabaseId, IndexingStatus, ItemKind, UnixMs};
use sqlx::Pool;

use crate::backend::{one, Backend, ListParam, Param, Sql, SqlStore};
use crate::rows::{Columns as _, INDEXED_COLUMNS, INDEXED_JOIN};
use crate::webhooks::record_event;
use crate::{
    AfterChunks, ChunkChanges, ChunkFeed, ChunkKey, ChunkScan, ClaimRequest, ClaimedItem,
    Completion, DatabaseScope, IndexedChunk, ItemFailure, ItemOrigin, NewItem, StoreResult,
    WorkQueue,
};

/// An item is runnable: queued and due, or processing under an expired lease; never expired
/// (`$1` is now).
pub(crate) const RUNNABLE: &str = "i.status IN ('queued', 'processing', 'graph_creation')
    AND ((i.status = 'queued' AND i.run_after <= $1) OR (i.status <> 'queued' AND i.lease_until < $1))
    AND (i.expires_at IS NULL OR i.expires_at > $1)";

/// `RUNNABLE`, and with `light`, only items of given text of at most that many bytes.
pub(crate) fn runnable(light: Option<u64>) -> String {
    match light {
        None => RUNNABLE.to_owned(),
        Some(most) => format!(
            "{RUNNABLE} AND i.origin <> 'file' AND octet_length(COALESCE(i.text, '')) <= {most}"
        ),
    }
}

/// What the queue and the feed do their own way on a backend.
pub(crate) trait QueueDialect: Backend {
    /// Chunks written per `INSERT` (SQLite: one, a statement prepared once; PostgreSQL: a batch,
    /// 11 parameters each, at most 65,535 per statement).
    const CHUNKS_PER_INSERT: usize;
    /// Whether one process serves the store, so at its start every claim is a dead process's.
    const ONE_PROCESS: bool;
    /// Locks an item row read for an edit (` FOR UPDATE OF i`), where rows can be locked.
    const FOR_UPDATE_OF_ITEM: &'static str;
    /// The feed's state row: its table, the column of the trimmed sequence number and the
    /// column of the feed's id.
    const FEED_STATE: (&'static str, &'static str, &'static str);
    /// The statement reading the store's own clock (milliseconds since the epoch, as `now`),
    /// where instances on several machines share the store; `None` where one process serves it.
    const CLOCK: Option<&'static str>;

    /// The request's items that exist: `(collection, id)` to their key and whether they
    /// expired.
    fn existing_items<'c>(
        conn: &'c mut Self::Connection,
        scope: &'c DatabaseScope,
        items: &'c [NewItem],
        now: UnixMs,
    ) -> impl Future<Output = StoreResult<HashMap<(String, String), (i64, bool)>>> + Send + 'c;

    /// Taken by claims of indexing work (PostgreSQL: one claim at a time across instances).
    fn lock_claims(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = StoreResult<()>> + Send + '_;

    /// Claims the next item in turn (see [`ClaimRequest`]), or `None` when nothing is runnable
    /// within the organizations' shares; with `light`, only small items of given text. The
    /// database whose turn it was moves to the back.
    fn claim_next<'c>(
        conn: &'c mut Self::Connection,
        claim: &'c ClaimRequest<'_>,
        light: Option<u64>,
    ) -> impl Future<Output = StoreResult<Option<Self::Row>>> + Send + 'c;

    /// The highest sequence number the feed ever handed out, every change up to it visible.
    fn feed_head(pool: &Pool<Self>) -> impl Future<Output = StoreResult<i64>> + Send + '_;

    /// Notes a reader's position; how far the feed may be trimmed (see
    /// [`ChunkFeed::feed_reader_at`]).
    fn feed_reader_at<'p>(
        pool: &'p Pool<Self>,
        reader: &'p str,
        at: i64,
    ) -> impl Future<Output = StoreResult<i64>> + Send + 'p;
}

/// How far the feed was trimmed: a reader behind it must rebuild (read from [`QueueDialect::FEED_STATE`]).
pub(crate) async fn feed_trimmed<B: QueueDialect>(conn: &mut B::Connection) -> StoreResult<i64> {
    let (table, trimmed, _) = B::FEED_STATE;
    one::<B>(
        conn,
        Sql::new(format!("SELECT {trimmed} AS trimmed FROM {table}")),
    )
    .await?
    .int("trimmed")
}

#[async_trait]
impl<B: QueueDialect> WorkQueue for SqlStore<B> {
    async fn claim_items(&self, claim: &ClaimRequest<'_>) -> StoreResult<Vec<ClaimedItem>> {
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_claims(&mut tx).await?;
        let mut rows = Vec::new();
        for n in 0..claim.limit {
            let light = if n == 0 { None } else { claim.light_bytes };
            let Some(row) = B::claim_next(&mut tx, claim, light).await? else {
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
                let read = Sql::new("SELECT bytes FROM item_payloads WHERE item_key = $1")
                    .bind(row.int("item_key")?);
                match self.optional(read).await? {
                    Some(found) => Some(found.bytes("bytes")?),
                    None => None,
                }
            } else {
                None
            };
            claimed.push(crate::rows::claimed_item(row, claim.owner, payload)?);
        }
        Ok(claimed)
    }

    /// With one serving process, every claim found at its start is a dead process's: it is
    /// released, so interrupted work resumes at once. Where several instances share the store,
    /// a claim may be a live instance's: none is released, and a dead instance's claims are
    /// taken up when their leases run out.
    async fn release_dead_claims(&self) -> StoreResult<u64> {
        if !B::ONE_PROCESS {
            return Ok(0);
        }
        let mut tx = B::begin_write(&self.pool).await?;
        let items = Sql::new(
            "UPDATE items SET lease_owner = NULL, lease_until = 0
             WHERE status IN ('processing', 'graph_creation')",
        );
        let items = B::execute(&mut tx, items).await?;
        let deliveries = Sql::new(
            "UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL
             WHERE lease_owner IS NOT NULL",
        );
        let deliveries = B::execute(&mut tx, deliveries).await?;
        tx.commit().await?;
        Ok(items + deliveries)
    }

    async fn extend_lease(&self, item: &ClaimedItem, until: UnixMs) -> StoreResult<bool> {
        let extended = self
            .run(
                Sql::new(
                    "UPDATE items SET lease_until = $1
                     WHERE item_key = $2 AND version = $3 AND status IN ('processing', 'graph_creation')
                       AND lease_owner = $4
                       AND EXISTS (SELECT 1 FROM databases d
                                   WHERE d.id = items.database_id AND d.state <> 'deleting')",
                )
                .bind(until)
                .bind(item.item_key)
                .bind(item.version)
                .bind(item.lease_owner.as_str()),
            )
            .await?;
        Ok(extended == 1)
    }

    async fn complete_items(
        &self,
        batch: &[Completion<'_>],
        now: UnixMs,
    ) -> StoreResult<Vec<bool>> {
        let mut done = Vec::with_capacity(batch.len());
        if batch.is_empty() {
            return Ok(done);
        }
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        for completion in batch {
            done.push(complete_one::<B>(&mut tx, completion, now).await?);
        }
        tx.commit().await?;
        Ok(done)
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
        let mut tx = B::begin_write(&self.pool).await?;
        let fail = Sql::new(
            "UPDATE items SET status = $1, run_after = $2, error_code = $3, error_message = $4,
                 lease_owner = NULL, lease_until = NULL, updated_at = $5
             WHERE item_key = $6 AND version = $7 AND status = 'processing' AND lease_owner = $8",
        )
        .bind(status)
        .bind(run_after)
        .bind(failure.code.as_str())
        .bind(&failure.message)
        .bind(now)
        .bind(item.item_key)
        .bind(item.version)
        .bind(&item.lease_owner);
        if B::execute(&mut tx, fail).await? != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        if failure.retry_at.is_none() {
            record_event::<B>(
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
        const EXPIRED: &str =
            "SELECT item_key FROM items WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2";
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        let count = Sql::new(format!(
            "SELECT COUNT(*) AS n FROM chunks c WHERE c.item_key IN ({EXPIRED})"
        ))
        .bind(now)
        .bind(limit);
        let chunks = one::<B>(&mut tx, count).await?.int("n")?;
        let delete = Sql::new(format!("DELETE FROM items WHERE item_key IN ({EXPIRED})"))
            .bind(now)
            .bind(limit);
        B::execute(&mut tx, delete).await?;
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
        let row = self
            .optional(
                Sql::new(
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
                .bind(now),
            )
            .await?;
        let text = match row {
            Some(row) => row.opt_text("text")?,
            None => None,
        };
        Ok(text.filter(|t| !t.trim().is_empty()))
    }
}

#[async_trait]
impl<B: QueueDialect> ChunkFeed for SqlStore<B> {
    async fn chunk_feed_head(&self) -> StoreResult<i64> {
        B::feed_head(&self.pool).await
    }

    async fn chunk_changes(&self, after: i64, limit: u32) -> StoreResult<ChunkChanges> {
        let nothing_new = || ChunkChanges {
            through: after,
            ..ChunkChanges::default()
        };
        // Every query asks: answer "nothing new" with one primary-key probe.
        let pending =
            Sql::new("SELECT seq FROM chunk_log WHERE seq > $1 ORDER BY seq LIMIT 1").bind(after);
        if self.optional(pending).await?.is_none() {
            return Ok(nothing_new());
        }
        // One snapshot for the log page and the rows it names.
        let mut tx = B::begin_snapshot(&self.pool).await?;
        let page = Sql::new(
            "SELECT seq, chunk_key, database_id FROM chunk_log WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(after)
        .bind(limit);
        let mut logged = Vec::new();
        for row in B::fetch_all(&mut tx, page).await? {
            logged.push((
                row.int("seq")?,
                row.int("chunk_key")?,
                row.text("database_id")?,
            ));
        }
        let Some(&(through, _, _)) = logged.last() else {
            return Ok(nothing_new());
        };
        let mut seen = std::collections::HashSet::new();
        let removed: Vec<(DatabaseId, ChunkKey)> = logged
            .into_iter()
            .filter(|(_, key, database)| seen.insert((*key, database.clone())))
            .map(|(_, key, database)| (DatabaseId::from_trusted(database), ChunkKey(key)))
            .collect();
        let keys: BTreeSet<i64> = removed.iter().map(|r| r.1 .0).collect();
        let keys: Vec<i64> = keys.into_iter().collect();
        let mut current = Vec::with_capacity(keys.len());
        for slice in keys.chunks(B::MAX_LIST) {
            let mut select = Sql::default();
            B::push_chunks_among(&mut select, INDEXED_COLUMNS, INDEXED_JOIN, slice, &|_| {
                Ok(())
            })?;
            for row in B::fetch_all(&mut tx, select).await? {
                current.push(crate::rows::indexed_chunk(&row)?);
            }
        }
        let databases: BTreeSet<&str> = removed.iter().map(|r| r.0.as_str()).collect();
        let mut select = Sql::new("SELECT id FROM databases WHERE 1 = 1");
        let named = databases.iter().map(|d| (*d).to_owned()).collect();
        B::push_in(&mut select, "id", ListParam::Texts(named));
        let mut found = BTreeSet::new();
        for row in B::fetch_all(&mut tx, select).await? {
            found.insert(row.text("id")?);
        }
        tx.commit().await?;
        let gone = databases
            .into_iter()
            .filter(|d| !found.contains(*d))
            .map(|d| DatabaseId::from_trusted(d.to_owned()))
            .collect();
        Ok(ChunkChanges {
            through,
            removed,
            current,
            gone,
        })
    }

    async fn feed_reader_at(&self, reader: &str, at: i64) -> StoreResult<i64> {
        B::feed_reader_at(&self.pool, reader, at).await
    }

    async fn chunk_feed_id(&self) -> StoreResult<String> {
        let (table, _, id) = B::FEED_STATE;
        self.one(Sql::new(format!("SELECT {id} AS id FROM {table}")))
            .await?
            .text("id")
    }

    async fn trim_chunk_changes(&self, through: i64) -> StoreResult<()> {
        let (table, trimmed, _) = B::FEED_STATE;
        let greatest = B::GREATEST;
        let mut tx = B::begin_write(&self.pool).await?;
        let delete = Sql::new("DELETE FROM chunk_log WHERE seq <= $1").bind(through);
        B::execute(&mut tx, delete).await?;
        let note = Sql::new(format!(
            "UPDATE {table} SET {trimmed} = {greatest}({trimmed}, $1)"
        ))
        .bind(through);
        B::execute(&mut tx, note).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn scan_chunks(
        &self,
        after: ChunkKey,
        limit: u32,
        scan: ChunkScan,
    ) -> StoreResult<Vec<IndexedChunk>> {
        let rows = self
            .all(
                Sql::new(format!(
                    "SELECT {} FROM chunks c JOIN databases d ON d.id = c.database_id{INDEXED_JOIN}
                     WHERE c.chunk_key > $1 AND d.state <> 'deleting'
                     ORDER BY c.chunk_key LIMIT $2",
                    crate::rows::scan_columns(scan)
                ))
                .bind(after.0)
                .bind(limit),
            )
            .await?;
        rows.iter().map(crate::rows::indexed_chunk).collect()
    }
}

#[async_trait]
impl<B: QueueDialect> crate::Store for SqlStore<B> {
    /// Closes every connection (on SQLite, checkpointing the WAL).
    async fn close(&self) {
        self.pool.close().await;
    }

    async fn clock(&self) -> StoreResult<Option<UnixMs>> {
        let Some(statement) = B::CLOCK else {
            return Ok(None);
        };
        let row = self.one(Sql::new(statement)).await?;
        Ok(Some(UnixMs::from_millis(row.int("now")?)))
    }
}

/// One item of [`WorkQueue::complete_items`], in its transaction: false (and nothing written)
/// when its claim is no longer current.
async fn complete_one<B: QueueDialect>(
    conn: &mut B::Connection,
    completion: &Completion<'_>,
    now: UnixMs,
) -> StoreResult<bool> {
    let Completion { item, chunks, then } = *completion;
    let graph = then == AfterChunks::Graph;
    let complete = Sql::new(
        "UPDATE items SET status = CASE WHEN $6 THEN 'graph_creation' ELSE 'completed' END,
             text = COALESCE($1, text),
             lease_owner = CASE WHEN $6 THEN lease_owner END,
             lease_until = CASE WHEN $6 THEN lease_until END,
             error_code = '', error_message = '', updated_at = $2
         WHERE item_key = $3 AND version = $4 AND status = 'processing' AND lease_owner = $5",
    )
    .bind(item.text.as_deref())
    .bind(now)
    .bind(item.item_key)
    .bind(item.version)
    .bind(&item.lease_owner)
    .bind(graph);
    if B::execute(conn, complete).await? != 1 {
        return Ok(false);
    }
    let clear = Sql::new("DELETE FROM chunks WHERE item_key = $1").bind(item.item_key);
    B::execute(conn, clear).await?;
    // The new chunks' keys by position, for a graph stored with them.
    let mut keys: HashMap<u32, i64> = HashMap::new();
    for batch in chunks.chunks(B::CHUNKS_PER_INSERT) {
        let mut insert = Sql::new(
            "INSERT INTO chunks (chunk_id, item_key, database_id, collection, kind, position, content,
                 context, layout, embedding, created_at) VALUES ",
        );
        for (n, chunk) in batch.iter().enumerate() {
            insert.push(if n == 0 { "(" } else { ", (" }).push_list([
                Param::from(&chunk.chunk_id),
                Param::from(item.item_key),
                Param::from(item.database_id.as_str()),
                Param::from(item.collection.as_str()),
                Param::from(item.kind.as_str()),
                Param::from(chunk.position),
                Param::from(&chunk.content),
                Param::from(&chunk.context),
                Param::from(&chunk.layout),
                Param::Vector(chunk.embedding.clone()),
                Param::from(now),
            ]);
            insert.push(")");
        }
        if let AfterChunks::WithGraph(_) = then {
            insert.push(" RETURNING position, chunk_key");
            for row in B::fetch_all(conn, insert).await? {
                let position = u32::try_from(row.int("position")?).unwrap_or(u32::MAX);
                keys.insert(position, row.int("chunk_key")?);
            }
        } else {
            B::execute(conn, insert).await?;
        }
    }
    if let AfterChunks::WithGraph(item_graph) = then {
        crate::graph_store::store_graph::<B>(conn, item, item_graph, &keys, now).await?;
    }
    if !graph {
        record_event::<B>(conn, item, IndexingStatus::Completed, "", "", now).await?;
    }
    Ok(true)
}
