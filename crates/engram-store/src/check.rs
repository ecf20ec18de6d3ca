//! The consistency check (`engram check`): what the store holds that no correct run leaves
//! behind, each as a count. It only reads, so it runs while the service does.

use async_trait::async_trait;
use engram_types::UnixMs;

use crate::backend::{Backend, Sql, SqlStore};
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
        "SELECT COUNT(*) AS n FROM items i
         JOIN databases d ON d.id = i.database_id
         JOIN webhooks w ON w.org_id = d.org_id
         WHERE i.updated_at >= $2
           AND ((i.status = 'completed'
                 AND EXISTS (SELECT 1 FROM chunks c
                             WHERE c.item_key = i.item_key AND c.created_at > w.created_at))
             OR (i.status = 'errored' AND i.updated_at > w.created_at))
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x
                           WHERE x.database_id = i.database_id AND x.collection = i.collection
                             AND x.item_id = i.id)
           AND CAST($1 AS BIGINT) IS NOT NULL",
    ),
];

/// The consistency check of a store.
#[async_trait]
pub trait Consistency: Send + Sync {
    /// Every check, in order, with its count at `now`; deliveries are kept from `kept_since`
    /// (`webhooks.retention_days` before now).
    async fn check(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Finding>>;
}

#[async_trait]
impl<B: Backend> Consistency for SqlStore<B> {
    async fn check(&self, now: UnixMs, kept_since: UnixMs) -> StoreResult<Vec<Finding>> {
        let mut findings = Vec::with_capacity(CHECKS.len());
        for (check, meaning, query) in CHECKS {
            let sql = Sql::new(*query);
            let sql = if query.contains("$2") {
                sql.bind(now).bind(kept_since)
            } else if query.contains("$1") {
                sql.bind(now)
            } else {
                sql
            };
            let count = self.one(sql).await?.int("n")?;
            findings.push(Finding {
                check,
                meaning,
                count,
            });
        }
        Ok(findings)
    }
}
