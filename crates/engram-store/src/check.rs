//! The consistency check (`engram check`): what the store holds that no correct run leaves
//! behind, each as a count. It only reads, so it runs while the service does.

use async_trait::async_trait;
use engram_types::UnixMs;

use crate::backend::{Sql, SqlStore};
use crate::rows::Columns as _;
use crate::StoreResult;

/// One check and how many rows fail it (0: consistent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub check: &'static str,
    /// What a failing row means.
    pub meaning: &'static str,
    pub count: i64,
}

/// The items of `undelivered_events` (over `items i`, `databases d`, `webhooks w`).
const UNDELIVERED: &str = "i.updated_at >= $2
           AND ((i.status = 'completed'
                 AND EXISTS (SELECT 1 FROM chunks c
                             WHERE c.item_key = i.item_key AND c.created_at > w.created_at))
             OR (i.status = 'errored' AND i.updated_at > w.created_at))
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x
                           WHERE x.database_id = i.database_id AND x.collection = i.collection
                             AND x.item_id = i.id)
           AND CAST($1 AS BIGINT) IS NOT NULL";

/// The checks, each a query counting what fails it; where a check uses them, `$1` is now and
/// `$2` the oldest time deliveries are kept from.
const CHECKS: &[(&str, &str, &str)] = &[
    (
        "stalled_claims",
        "items being indexed whose lease ran out: no live worker holds them (a running service \
         takes them up again within a lease)",
        "SELECT COUNT(*) AS n FROM items
         WHERE status = 'processing' AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $1)",
    ),
    (
        "orphan_chunks",
        "chunks of an item that no longer exists",
        "SELECT COUNT(*) AS n FROM chunks c
         WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.item_key = c.item_key)",
    ),
    (
        "chunks_of_unfinished_items",
        "chunks of an item that errored (its chunks are removed with the failure)",
        "SELECT COUNT(*) AS n FROM chunks c JOIN items i ON i.item_key = c.item_key
         WHERE i.status = 'errored'",
    ),
    (
        "orphan_graph_mentions",
        "graph mentions of a chunk that no longer exists",
        "SELECT COUNT(*) AS n FROM graph_mentions m
         WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.chunk_key = m.chunk_key)",
    ),
    (
        "orphan_items",
        "items of a database that no longer exists",
        "SELECT COUNT(*) AS n FROM items i
         WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = i.database_id)",
    ),
    (
        "undelivered_events",
        "items that reached completed or errored (their chunks written, or their failure) \
         while their organization had a webhook, with no delivery recorded (deliveries older \
         than their retention are not looked for)",
        "SELECT COUNT(*) AS n FROM items i JOIN databases d ON d.id = i.database_id
         JOIN webhooks w ON w.org_id = d.org_id WHERE {UNDELIVERED}",
    ),
];

/// What `engram check --repair` does about each check, in this order (items of a gone database
/// first, with their chunks, so the feed logs every chunk leaving): statements over the same
/// rows the check counts; `$1` is now, `$2` the delivery retention's start; `{RANDOM_HEX}` the
/// backend's random id.
const REPAIRS: &[(&str, &[&str])] = &[
    (
        "orphan_items",
        &[
            "DELETE FROM chunks WHERE item_key IN (SELECT i.item_key FROM items i
             WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = i.database_id))",
            "DELETE FROM items
             WHERE NOT EXISTS (SELECT 1 FROM databases d WHERE d.id = items.database_id)",
        ],
    ),
    (
        "orphan_chunks",
        &["DELETE FROM chunks
           WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.item_key = chunks.item_key)"],
    ),
    (
        "chunks_of_unfinished_items",
        &["DELETE FROM chunks WHERE item_key IN (SELECT item_key FROM items WHERE status = 'errored')"],
    ),
    (
        "orphan_graph_mentions",
        &["DELETE FROM graph_mentions
           WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.chunk_key = graph_mentions.chunk_key)"],
    ),
    (
        // Queued again at once: the next claim takes them up; a stale holder's writes are
        // refused (its lease is gone).
        "stalled_claims",
        &["UPDATE items SET status = 'queued', lease_owner = NULL, lease_until = NULL, run_after = $1
           WHERE status = 'processing'
             AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $1)"],
    ),
    (
        // The missing events, recorded now with the item's state: delivered at least once.
        "undelivered_events",
        &["INSERT INTO webhook_deliveries (delivery_id, org_id, database_id, database_name,
               collection, item_id, event_type, indexing_status, item_error_code, item_error_message,
               status, attempts, next_attempt_at, webhook_url, created_at, updated_at)
           SELECT 'dlv_' || {RANDOM_HEX}, w.org_id, d.id, d.name, i.collection, i.id,
               'indexing.status_changed', i.status, i.error_code, i.error_message, 'pending', 0,
               $1, w.url, $1, $1
           FROM items i JOIN databases d ON d.id = i.database_id
           JOIN webhooks w ON w.org_id = d.org_id WHERE {UNDELIVERED}"],
    ),
];

/// One repair: the check and the rows it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub check: &'static str,
    pub rows: u64,
}

/// A check's or repair's statement, its placeholders filled: `$1` now and `$2` the start of
/// the delivery retention where it reads them.
fn statement(template: &str, now: UnixMs, kept_since: UnixMs, random_hex: &str) -> Sql {
    let text = template
        .replace("{UNDELIVERED}", UNDELIVERED)
        .replace("{RANDOM_HEX}", random_hex);
    let (first, second) = (text.contains("$1"), text.contains("$2"));
    let sql = Sql::new(text);
    match (first, second) {
        (_, true) => sql.bind(now).bind(kept_since),
        (true, false) => sql.bind(now),
        (false, false) => sql,
    }
}

/// The consistency check of a store.
#[async_trait]
pub trait Consistency: Send + Sync {
    /// Every check, in order, with its count at `now`; deliveries are kept from `kept_since`
    /// (`webhooks.retention_days` before now).
    async fn check(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Finding>>;

    /// Repairs what the checks find, each repair in a transaction of its own: what belongs to
    /// nothing is deleted, stalled claims are queued again, missing events are recorded. Only
    /// the repairs that delete chunks take the feed's lock (their deletions are feed changes),
    /// and only for their own transaction, so ingestion waits for one repair at most. Answers
    /// each repair with the rows it changed.
    async fn repair(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Repair>>;

    /// The keys of every chunk above `after`, in key order, at most `limit`, each with its
    /// database and whether that database is live (not being deleted: an index may hold its
    /// chunks or not until the purge): what the derived indexes are checked against.
    async fn indexed_keys(
        &self,
        after: crate::ChunkKey,
        limit: u32,
    ) -> StoreResult<Vec<(crate::ChunkKey, engram_types::DatabaseId, bool)>>;

    /// The sequence number of the newest committed chunk change (a rolled-back write leaves a
    /// gap in the sequence that no reader ever reaches): what an index that applied every
    /// change has reached.
    async fn committed_feed_head(&self) -> StoreResult<i64>;
}

#[async_trait]
impl<B: crate::queue::QueueDialect> Consistency for SqlStore<B> {
    async fn check(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Finding>> {
        let mut findings = Vec::with_capacity(CHECKS.len());
        for (check, meaning, query) in CHECKS {
            let sql = statement(query, now, kept_since, B::RANDOM_HEX);
            let count = self.one(sql).await?.int("n")?;
            findings.push(Finding {
                check,
                meaning,
                count,
            });
        }
        Ok(findings)
    }

    async fn repair(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Repair>> {
        let mut repairs = Vec::with_capacity(REPAIRS.len());
        for (check, statements) in REPAIRS {
            let mut tx = self.pool.begin().await?;
            if statements.iter().any(|s| s.contains("DELETE FROM chunks")) {
                B::lock_feed(&mut tx).await?;
            }
            let mut rows = 0;
            for statement in *statements {
                let sql = self::statement(statement, now, kept_since, B::RANDOM_HEX);
                rows += B::execute(&mut tx, sql).await?;
            }
            tx.commit().await?;
            repairs.push(Repair { check, rows });
        }
        Ok(repairs)
    }

    async fn committed_feed_head(&self) -> StoreResult<i64> {
        let (table, trimmed, _) = B::FEED_STATE;
        let head = Sql::new(format!(
            "SELECT CAST(COALESCE((SELECT MAX(seq) FROM chunk_log), (SELECT MAX({trimmed}) FROM {table}), 0) AS BIGINT) AS head"
        ));
        self.one(head).await?.int("head")
    }

    async fn indexed_keys(
        &self,
        after: crate::ChunkKey,
        limit: u32,
    ) -> StoreResult<Vec<(crate::ChunkKey, engram_types::DatabaseId, bool)>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT c.chunk_key, c.database_id,
                            CAST(CASE WHEN d.state <> 'deleting' THEN 1 ELSE 0 END AS BIGINT) AS live
                     FROM chunks c JOIN databases d ON d.id = c.database_id
                     WHERE c.chunk_key > $1
                     ORDER BY c.chunk_key LIMIT $2",
                )
                .bind(after.0)
                .bind(limit),
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    crate::ChunkKey(row.int("chunk_key")?),
                    engram_types::DatabaseId::from_trusted(row.text("database_id")?),
                    row.int("live")? == 1,
                ))
            })
            .collect()
    }
}
