//! The work queue and the chunk feed on PostgreSQL. Claims take the claim lock, so instances
//! hand out work in one turn order; the feed is read by every instance, and is trimmed only
//! through the slowest reader heard from lately.

use std::collections::HashMap;

use engram_types::UnixMs;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Pool, Postgres};

use crate::backend::{one, Backend, Param, Sql};
use crate::queue::{feed_trimmed, runnable, QueueDialect};
use crate::rows::{Columns as _, CLAIMED_COLUMNS};
use crate::{ClaimRequest, DatabaseScope, NewItem, StoreError, StoreResult};

/// A reader of the feed not heard from for this long is taken for gone: trimming no longer
/// waits for it (every instance notes its position at least every few minutes, even when idle).
const FEED_READER_TIMEOUT_MS: i64 = 15 * 60 * 1000;

impl QueueDialect for Postgres {
    const CHUNKS_PER_INSERT: usize = 1_000;
    const ONE_PROCESS: bool = false;
    const FOR_UPDATE_OF_ITEM: &'static str = " FOR UPDATE OF i";
    const FEED_STATE: (&'static str, &'static str, &'static str) =
        ("chunk_log_trimmed", "through", "feed");
    const CLOCK: Option<&'static str> =
        Some("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now");

    /// The request's ids in one statement by their unique key (per item, the planner could
    /// pick a scan of the collection from plans made while the table was small).
    async fn existing_items<'c>(
        conn: &'c mut PgConnection,
        scope: &'c DatabaseScope,
        items: &'c [NewItem],
        now: UnixMs,
    ) -> StoreResult<HashMap<(String, String), (i64, bool)>> {
        let (collections, ids): (Vec<String>, Vec<String>) = items
            .iter()
            .map(|item| (item.collection.as_str().to_owned(), item.id.clone()))
            .unzip();
        let probe = Sql::new(
            "SELECT i.collection, i.id, i.item_key,
                    i.expires_at IS NOT NULL AND i.expires_at <= $1 AS expired
             FROM items i JOIN unnest($3::text[], $4::text[]) AS n(collection, id)
               ON i.collection = n.collection AND i.id = n.id
             WHERE i.database_id = $2",
        )
        .bind(now)
        .bind(scope.id.as_str())
        .bind(Param::Texts(collections))
        .bind(Param::Texts(ids));
        let mut existing = HashMap::new();
        for row in Postgres::fetch_all(conn, probe).await? {
            existing.insert(
                (row.text("collection")?, row.text("id")?),
                (row.int("item_key")?, row.flag("expired")?),
            );
        }
        Ok(existing)
    }

    /// One claim at a time across instances, so the turn order and the organizations' shares
    /// hold exactly.
    async fn lock_claims(conn: &mut PgConnection) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(7405, 2)")
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn claim_next<'c>(
        conn: &'c mut PgConnection,
        claim: &'c ClaimRequest<'_>,
        light: Option<u64>,
    ) -> StoreResult<Option<PgRow>> {
        let runnable = runnable(light);
        // The runnable item is looked up in queue order, so the planner walks the queue
        // index (an EXISTS let it scan the table, past every completed and dead row).
        let turn = Sql::new(format!(
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
        .bind(claim.org_share)
        .bind(claim.owner);
        let Some(database) = Postgres::fetch_optional(conn, turn).await? else {
            return Ok(None);
        };
        let database = database.text("id")?;
        // The database's row is locked before the item's: a delete holds the row shared
        // (scope check) while it waits for the item, so the other order deadlocks with it.
        let turn = Sql::new(
            "UPDATE databases SET served_turn = (SELECT MAX(served_turn) FROM databases) + 1
             WHERE id = $1",
        )
        .bind(database.as_str());
        Postgres::execute(conn, turn).await?;
        let take = Sql::new(format!(
            "UPDATE items SET status = CASE WHEN status = 'graph_creation' THEN status ELSE 'processing' END,
                 lease_owner = $2, lease_until = $3, attempts = attempts + 1, updated_at = $1
             WHERE item_key = (SELECT i.item_key FROM items i WHERE i.database_id = $4 AND {runnable}
                               ORDER BY i.run_after, i.item_key LIMIT 1
                               FOR UPDATE OF i SKIP LOCKED)
             RETURNING {CLAIMED_COLUMNS}"
        ))
        .bind(claim.now)
        .bind(claim.owner)
        .bind(claim.now.after(claim.lease))
        .bind(database);
        Postgres::fetch_optional(conn, take).await
    }

    /// Waits for the chunk writers in flight (they hold the feed's lock until they commit), so
    /// every change up to the head is visible to the scan that follows. The sequence keeps the
    /// highest number ever handed out, trimmed or not.
    async fn feed_head(pool: &Pool<Postgres>) -> StoreResult<i64> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock_shared(7405, 1)")
            .execute(&mut *tx)
            .await?;
        let head = Sql::new(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence('chunk_log', 'seq')::regclass) AS head",
        );
        let head = one::<Postgres>(&mut tx, head).await?.opt_int("head")?;
        tx.commit().await?;
        Ok(head.unwrap_or(0))
    }

    /// Trimming waits for every live reader, so only one that was taken for gone can be behind
    /// the trimmed part. Readers are compared on the server's clock.
    async fn feed_reader_at<'p>(
        pool: &'p Pool<Postgres>,
        reader: &'p str,
        at: i64,
    ) -> StoreResult<i64> {
        let mut conn = pool.acquire().await?;
        let trimmed = feed_trimmed::<Postgres>(&mut conn).await?;
        if at < trimmed {
            let forget = Sql::new("DELETE FROM chunk_feed_readers WHERE reader = $1").bind(reader);
            Postgres::execute(&mut conn, forget).await?;
            return Err(StoreError::FeedBehind(format!(
                "changes up to {trimmed} were trimmed while this reader was away (it is at {at})"
            )));
        }
        let now = Sql::new("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT AS now");
        let now = one::<Postgres>(&mut conn, now).await?.int("now")?;
        let note = Sql::new(
            "WITH noted AS (
                 INSERT INTO chunk_feed_readers (reader, through, seen_at) VALUES ($1, $2, $3)
                 ON CONFLICT (reader) DO UPDATE SET through = excluded.through, seen_at = excluded.seen_at)
             SELECT LEAST($2, MIN(through)) AS slowest FROM chunk_feed_readers
             WHERE reader <> $1 AND seen_at > $3 - $4",
        )
        .bind(reader)
        .bind(at)
        .bind(now)
        .bind(FEED_READER_TIMEOUT_MS);
        let slowest = one::<Postgres>(&mut conn, note).await?.opt_int("slowest")?;
        let gone = Sql::new("DELETE FROM chunk_feed_readers WHERE seen_at < $1 - $2")
            .bind(now)
            .bind(FEED_READER_TIMEOUT_MS);
        Postgres::execute(&mut conn, gone).await?;
        Ok(slowest.unwrap_or(at))
    }
}
