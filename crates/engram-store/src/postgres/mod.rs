//! The PostgreSQL backend: every engram instance of a deployment opens the same database (15 or
//! newer, with pgvector 0.8 or newer) and shares its state: items and their queue, chunks and
//! their change feed, webhooks and their outbox. Nothing is kept per instance but the derived
//! indexes, which follow the shared feed.
//!
//! Concurrency: PostgreSQL runs `READ COMMITTED`, so every read-check-write locks what it reads
//! (`FOR UPDATE`, or `FOR SHARE` on a database row that must stay live), claims of indexing work
//! are serialized by one transaction lock (the turn order and the organizations' shares are then
//! exact across instances), and every transaction that writes chunks takes the feed's lock
//! first, so the feed's sequence numbers commit in order (see `migrations/postgres`).

mod migrate;
mod queue;
mod sql;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::{StoreError, StoreResult};

/// The PostgreSQL store.
pub type PgStore = crate::SqlStore<sqlx::Postgres>;

/// How long a session may sit in an open transaction before the server ends it.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?sslmode=...`
    pub url: String,
    /// Connections this instance keeps open at most.
    pub max_connections: u32,
    /// How long a request waits for a free connection.
    pub acquire_timeout: Duration,
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 16,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

impl PgStore {
    /// Connects, checks the server (PostgreSQL 15+, pgvector 0.8+ available) and applies pending
    /// migrations (one instance at a time: the others wait for it, then find nothing to do).
    pub async fn open(options: &PgOptions) -> StoreResult<Self> {
        let connect: PgConnectOptions = options.url.parse().map_err(|e| {
            StoreError::Migration(format!("storage.url is not a PostgreSQL URL: {e}"))
        })?;
        // engram's transactions last milliseconds; one left open longer belongs to an instance
        // that stalled inside it (a frozen VM, a cut network), and the server ends it so its
        // locks do not hold every other instance up. The stalled instance, woken, finds its
        // connection closed (a transient error: 503, then a new connection).
        // Set once each connection is made (not as a startup option, which PgBouncer and RDS
        // Proxy refuse).
        let idle = format!(
            "SET idle_in_transaction_session_timeout = {}",
            IDLE_IN_TRANSACTION.as_millis()
        );
        let pool = PgPoolOptions::new()
            .after_connect(move |conn, _meta| {
                let idle = idle.clone();
                Box::pin(async move {
                    sqlx::Executor::execute(conn, idle.as_str()).await?;
                    Ok(())
                })
            })
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await?;
        migrate::run(&pool).await?;
        Ok(crate::SqlStore { pool })
    }
}

#[cfg(test)]
mod tests {
    use engram_testkit::TempPostgres;
    use engram_types::UnixMs;

    use super::*;
    use crate::{ChunkFeed, ClaimRequest, ItemStore, WorkQueue};

    async fn open(pg: &TempPostgres) -> PgStore {
        PgStore::open(&PgOptions::new(pg.url())).await.unwrap()
    }

    #[tokio::test]
    async fn postgres_passes_the_conformance_suite() {
        let pg = TempPostgres::start();
        let store = open(&pg).await;
        crate::conformance::run_all(&store).await;
    }

    /// A deadlock between transactions is transient (the service answers 503, which clients
    /// retry); a broken rule is not.
    #[tokio::test]
    async fn a_deadlock_is_transient_and_a_conflict_is_not() {
        let pg = TempPostgres::start();
        let store = open(&pg).await;
        sqlx::query("CREATE TABLE deadlock_probe (id INT PRIMARY KEY)")
            .execute(&store.pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO deadlock_probe VALUES (1), (2)")
            .execute(&store.pool)
            .await
            .unwrap();
        let lock =
            |id: i32| sqlx::query("UPDATE deadlock_probe SET id = id WHERE id = $1").bind(id);
        let mut a = store.pool.begin().await.unwrap();
        let mut b = store.pool.begin().await.unwrap();
        lock(1).execute(&mut *a).await.unwrap();
        lock(2).execute(&mut *b).await.unwrap();
        let (first, second) = tokio::join!(lock(2).execute(&mut *a), lock(1).execute(&mut *b));
        let victim = first
            .err()
            .or(second.err())
            .expect("a deadlock has a victim");
        let victim = crate::StoreError::from(victim);
        assert!(victim.is_transient(), "{victim}");
        drop((a, b));
        let conflict = sqlx::query("INSERT INTO deadlock_probe VALUES (1)")
            .execute(&store.pool)
            .await
            .unwrap_err();
        let conflict = crate::StoreError::from(conflict);
        assert!(!conflict.is_transient(), "{conflict}");
    }

    /// Instances share the store: one starting never takes another's claims; they are taken up
    /// when their lease runs out.
    #[tokio::test]
    async fn a_starting_instance_leaves_live_claims_alone() {
        let pg = TempPostgres::start();
        let a = open(&pg).await;
        let b = open(&pg).await;
        let scope = crate::conformance::setup(&a, "db_pg_claims", "org_pg_claims").await;
        let items = [crate::conformance::item("c", "x", "text")];
        a.enqueue_items(&scope, &items, true, UnixMs::from_millis(1))
            .await
            .unwrap();
        let held = a
            .claim_items(&ClaimRequest::new(
                "a",
                UnixMs::from_millis(10),
                Duration::from_millis(1_000),
                10,
            ))
            .await
            .unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(b.release_dead_claims().await.unwrap(), 0);
        let early = ClaimRequest::new(
            "b",
            UnixMs::from_millis(500),
            Duration::from_millis(1_000),
            10,
        );
        assert!(b.claim_items(&early).await.unwrap().is_empty());
        let late = ClaimRequest::new(
            "b",
            UnixMs::from_millis(2_000),
            Duration::from_millis(1_000),
            10,
        );
        assert_eq!(b.claim_items(&late).await.unwrap().len(), 1);
        assert!(!a
            .complete_item(
                &held[0],
                &[],
                crate::AfterChunks::Completed,
                UnixMs::from_millis(2_001)
            )
            .await
            .unwrap());
    }

    /// Migrations are applied once, however many instances start; a database migrated by a
    /// newer engram is refused.
    #[tokio::test]
    async fn migrations_apply_once_and_a_newer_schema_is_refused() {
        let pg = TempPostgres::start();
        let options = PgOptions::new(pg.url());
        let (a, b) = tokio::join!(PgStore::open(&options), PgStore::open(&options));
        a.unwrap();
        b.unwrap();
        assert_eq!(
            pg.psql("SELECT count(*) FROM _engram_migrations"),
            migrate::MIGRATIONS.len().to_string(),
            "each migration applied once"
        );
        pg.psql("INSERT INTO _engram_migrations VALUES (999, 'future', '\\x00', 0)");
        let err = PgStore::open(&PgOptions::new(pg.url()))
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, StoreError::Migration(_)), "{err}");
    }

    /// The feed is read by several instances: it is trimmed through the slowest reader heard
    /// from lately, and a reader that comes back behind the trimmed part is told to rebuild.
    #[tokio::test]
    async fn the_feed_waits_for_live_readers_and_a_reader_behind_it_rebuilds() {
        let pg = TempPostgres::start();
        let store = open(&pg).await;
        let scope = crate::conformance::setup(&store, "db_pg_feed", "org_pg_feed").await;
        let items = [crate::conformance::item("c", "x", "text")];
        store
            .enqueue_items(&scope, &items, true, UnixMs::from_millis(1))
            .await
            .unwrap();
        let claimed = store
            .claim_items(&ClaimRequest::new(
                "w",
                UnixMs::from_millis(10),
                Duration::from_millis(1_000),
                10,
            ))
            .await
            .unwrap();
        let chunk = crate::conformance::chunk("x", 0, "text");
        assert!(store
            .complete_item(
                &claimed[0],
                &[chunk],
                crate::AfterChunks::Completed,
                UnixMs::from_millis(11)
            )
            .await
            .unwrap());
        let head = store.chunk_feed_head().await.unwrap();
        assert!(head > 0);
        assert_eq!(store.feed_reader_at("slow", 0).await.unwrap(), 0);
        assert_eq!(
            store.feed_reader_at("fast", head).await.unwrap(),
            0,
            "the slow reader holds trimming back"
        );
        pg.psql("UPDATE chunk_feed_readers SET seen_at = 0 WHERE reader = 'slow'");
        let safe = store.feed_reader_at("fast", head).await.unwrap();
        assert_eq!(safe, head, "a reader not heard from holds nothing back");
        store.trim_chunk_changes(safe).await.unwrap();
        let behind = store.feed_reader_at("slow", 0).await;
        assert!(
            matches!(behind, Err(StoreError::FeedBehind(_))),
            "{behind:?}"
        );
        assert_eq!(
            store.feed_reader_at("slow", head).await.unwrap(),
            head,
            "rebuilt"
        );
        assert!(store.chunk_changes(head, 100).await.unwrap().is_empty());
    }
}
