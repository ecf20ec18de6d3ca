//! The work queue and the chunk feed on SQLite: one serving process, its writers serialized by
//! `BEGIN IMMEDIATE`, so a claim needs no lock of its own and the feed has one reader.

use std::collections::HashMap;

use engram_types::UnixMs;
use sqlx::sqlite::SqliteRow;
use sqlx::{Pool, Sqlite, SqliteConnection};

use crate::backend::{Backend, Sql};
use crate::queue::{feed_trimmed, runnable, QueueDialect};
use crate::rows::{Columns as _, CLAIMED_COLUMNS};
use crate::{ClaimRequest, DatabaseScope, NewItem, StoreError, StoreResult};

/// The database whose turn it is among those with `runnable` items and room in their
/// organization's share (`$1` now, `$2` the share, `$3` the claiming owner). Whether a database
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
                WHERE od.org_id = d.org_id AND f.status IN ('processing', 'graph_creation') AND f.lease_until >= $1
                  AND f.lease_owner <> $3) < $2
         ORDER BY (SELECT MAX(o.served_turn) FROM databases o WHERE o.org_id = d.org_id),
                  d.served_turn, d.id
         LIMIT 1"
    )
}

impl QueueDialect for Sqlite {
    const CHUNKS_PER_INSERT: usize = 1;
    const ONE_PROCESS: bool = true;
    const FOR_UPDATE_OF_ITEM: &'static str = "";
    const FEED_STATE: (&'static str, &'static str, &'static str) = ("chunk_feed", "trimmed", "id");
    const CLOCK: Option<&'static str> = None;

    /// One probe per item, by its unique key.
    async fn existing_items<'c>(
        conn: &'c mut SqliteConnection,
        scope: &'c DatabaseScope,
        items: &'c [NewItem],
        now: UnixMs,
    ) -> StoreResult<HashMap<(String, String), (i64, bool)>> {
        let mut existing = HashMap::new();
        for item in items {
            let probe = Sql::new(
                "SELECT item_key, expires_at IS NOT NULL AND expires_at <= $1 AS expired
                 FROM items WHERE database_id = $2 AND collection = $3 AND id = $4",
            )
            .bind(now)
            .bind(scope.id.as_str())
            .bind(item.collection.as_str())
            .bind(&item.id);
            if let Some(row) = Sqlite::fetch_optional(conn, probe).await? {
                existing.insert(
                    (item.collection.as_str().to_owned(), item.id.clone()),
                    (row.int("item_key")?, row.flag("expired")?),
                );
            }
        }
        Ok(existing)
    }

    async fn lock_claims(_: &mut SqliteConnection) -> StoreResult<()> {
        Ok(())
    }

    async fn claim_next<'c>(
        conn: &'c mut SqliteConnection,
        claim: &'c ClaimRequest<'_>,
        light: Option<u64>,
    ) -> StoreResult<Option<SqliteRow>> {
        let runnable = runnable(light);
        let turn = Sql::new(database_in_turn(&runnable))
            .bind(claim.now)
            .bind(claim.org_share)
            .bind(claim.owner);
        let Some(database) = Sqlite::fetch_optional(conn, turn).await? else {
            return Ok(None);
        };
        let database = database.text("id")?;
        let take = Sql::new(format!(
            "UPDATE items SET status = CASE WHEN status = 'graph_creation' THEN status ELSE 'processing' END,
                 lease_owner = $2, lease_until = $3, attempts = attempts + 1, updated_at = $1
             WHERE item_key = (SELECT i.item_key FROM items i WHERE i.database_id = $4 AND {runnable}
                               ORDER BY i.run_after, i.item_key LIMIT 1)
             RETURNING {CLAIMED_COLUMNS}"
        ))
        .bind(claim.now)
        .bind(claim.owner)
        .bind(claim.now.after(claim.lease))
        .bind(database.as_str());
        let row = Sqlite::fetch_optional(conn, take).await?;
        let turn = Sql::new(
            "UPDATE databases SET served_turn = (SELECT MAX(served_turn) FROM databases) + 1
             WHERE id = $1",
        )
        .bind(database);
        Sqlite::execute(conn, turn).await?;
        Ok(row)
    }

    /// `sqlite_sequence` keeps the highest sequence ever handed out, trimmed or not.
    async fn feed_head(pool: &Pool<Sqlite>) -> StoreResult<i64> {
        let mut conn = pool.acquire().await?;
        let head = Sql::new("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'");
        match Sqlite::fetch_optional(&mut conn, head).await? {
            Some(row) => row.int("seq"),
            None => Ok(0),
        }
    }

    /// The embedded store is served by one process: its reader is the only one.
    async fn feed_reader_at<'p>(
        pool: &'p Pool<Sqlite>,
        _reader: &'p str,
        at: i64,
    ) -> StoreResult<i64> {
        let mut conn = pool.acquire().await?;
        let trimmed = feed_trimmed::<Sqlite>(&mut conn).await?;
        if at < trimmed {
            return Err(StoreError::FeedBehind(format!(
                "changes up to {trimmed} were trimmed (the reader is at {at})"
            )));
        }
        Ok(at)
    }
}
