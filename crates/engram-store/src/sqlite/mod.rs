//! The embedded backend: one SQLite file in WAL mode under the data directory. Several
//! processes (the server and `engram keys`) may open it at once.

pub mod backup;
mod migrate;
mod queue;
mod sql;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Connection;

use crate::StoreResult;

/// File name of the store inside the data directory.
pub const DB_FILE: &str = "engram.sqlite3";

/// The SQLite store.
pub type SqliteStore = crate::SqlStore<sqlx::Sqlite>;

impl SqliteStore {
    /// Opens (creating if needed) the store in `data_dir` and applies pending migrations.
    pub async fn open(data_dir: &Path) -> StoreResult<Self> {
        std::fs::create_dir_all(data_dir)?;
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(data_dir.join(DB_FILE))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
        migrate::run(&mut conn).await?;
        conn.close().await?;
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // A COMMIT that fails (a full disk: `SQLITE_FULL`) leaves SQLite's transaction
            // open on its connection, and no later transaction could begin there: such a
            // connection is closed instead of going back to the pool.
            .after_release(|conn, _| {
                Box::pin(async move {
                    if !sqlx::Connection::is_in_transaction(conn) {
                        return Ok(true);
                    }
                    // A transaction dropped unfinished has its ROLLBACK queued on the
                    // connection's worker: a ping runs after it.
                    sqlx::Connection::ping(conn).await?;
                    Ok(!sqlx::Connection::is_in_transaction(conn))
                })
            })
            .connect_with(options)
            .await?;
        Ok(crate::SqlStore { pool })
    }
}

#[cfg(test)]
mod tests {
    use engram_types::UnixMs;
    use sqlx::Row;

    use super::*;
    use crate::backend::Sql;
    use crate::Store as _;
    use crate::{DatabaseStore, KeyStore, StoreError};

    #[tokio::test]
    async fn sqlite_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        crate::conformance::run_all(&store).await;
    }

    /// A writer that finds the file busy (another process holding the write lock past the wait)
    /// is transient: the service answers 503, which clients retry.
    #[tokio::test]
    async fn a_busy_file_is_transient() {
        use sqlx::sqlite::SqliteConnectOptions;
        use sqlx::{ConnectOptions as _, Connection as _};
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("busy.db"))
            .create_if_missing(true)
            .busy_timeout(std::time::Duration::ZERO);
        let mut holder = options.connect().await.unwrap();
        let mut other = options.connect().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut holder)
            .await
            .unwrap();
        let busy = sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap_err();
        let busy = StoreError::from(busy);
        assert!(busy.is_transient(), "{busy}");
        holder.close().await.unwrap();
    }

    /// A claim finds a database's runnable work through the queue's partial index, never by
    /// walking the database's items (which made claims slower with every finished item).
    #[tokio::test]
    async fn a_claim_reads_only_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let turn = Sql::new(queue::database_in_turn(crate::queue::RUNNABLE))
            .bind(1_i64)
            .bind(1_i64)
            .bind("owner");
        assert_plan(
            &store,
            turn,
            "SEARCH i USING INDEX items_queue",
            "items_by_id",
        )
        .await;
    }

    /// The graph lane's read of specific entities' mentions finds each entity by its key,
    /// never by walking the database's entities (which grew with the database).
    #[tokio::test]
    async fn specific_mentions_find_each_entity_by_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let scope = crate::conformance::setup(&store, "db_plan", "org_plan").await;
        let select = crate::graph_store::specific_mentions_select(&scope, &[1, 2, 3], 40, 100);
        assert_plan(
            &store,
            select,
            "SEARCH e USING INTEGER PRIMARY KEY",
            "database_id=?",
        )
        .await;
    }

    /// Asserts that the plan of a statement has a step containing `uses` and none containing
    /// `avoids`.
    async fn assert_plan(store: &SqliteStore, select: Sql, uses: &str, avoids: &str) {
        let mut explain = Sql::new(format!("EXPLAIN QUERY PLAN {}", select.sql()));
        explain.params = select.params;
        let plan: Vec<String> = store
            .all(explain)
            .await
            .unwrap()
            .iter()
            .map(|row| row.try_get::<String, _>("detail").unwrap())
            .collect();
        assert!(plan.iter().any(|step| step.contains(uses)), "{plan:?}");
        assert!(!plan.iter().any(|step| step.contains(avoids)), "{plan:?}");
    }

    async fn count(store: &SqliteStore, sql: &str) -> i64 {
        sqlx::query(sql)
            .fetch_one(&store.pool)
            .await
            .unwrap()
            .try_get(0)
            .unwrap()
    }

    /// The embedded store has one serving process: at its start, every claim is a dead
    /// process's and is released, so interrupted work resumes at once rather than after its
    /// lease.
    #[tokio::test]
    async fn a_restart_releases_the_dead_processs_claims() {
        use crate::{ClaimRequest, ItemStore, WorkQueue};
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let scope = crate::conformance::setup(&store, "db_restart", "org_restart").await;
        let items = [
            crate::conformance::item("c", "a", "text"),
            crate::conformance::item("c", "b", "text"),
        ];
        store
            .enqueue_items(&scope, &items, true, UnixMs::from_millis(1))
            .await
            .unwrap();
        let claim = |owner| {
            ClaimRequest::new(
                owner,
                UnixMs::from_millis(10),
                Duration::from_millis(60_000),
                10,
            )
        };
        let dead = store.claim_items(&claim("dead")).await.unwrap();
        assert_eq!(dead.len(), 2);
        store.close().await;

        let store = SqliteStore::open(dir.path()).await.unwrap();
        assert!(store.claim_items(&claim("new")).await.unwrap().is_empty());
        assert_eq!(store.release_dead_claims().await.unwrap(), 2);
        let resumed = store.claim_items(&claim("new")).await.unwrap();
        assert_eq!(resumed.len(), 2, "taken up at once, not after 60 s");
        assert!(
            !store
                .complete_item(
                    &dead[0],
                    &[],
                    crate::AfterChunks::Completed,
                    UnixMs::from_millis(11)
                )
                .await
                .unwrap(),
            "the dead claim can no longer write"
        );
    }

    /// The index owner keeps a cursor into the feed: an emptied log must not hand out the
    /// numbers it held again, not even after a reopen.
    #[tokio::test]
    async fn an_emptied_chunk_log_never_reuses_a_sequence_number() {
        use crate::{ChunkFeed, ItemStore, WorkQueue};
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let db = store
            .create_database(&crate::conformance::new_db("db_log", "org_log", "log"))
            .await
            .unwrap();
        let index_one = |store: SqliteStore, id: &'static str, now: UnixMs| {
            let scope = db.scope();
            async move {
                let item = crate::conformance::item("c", id, "text");
                store
                    .enqueue_items(&scope, &[item], true, now)
                    .await
                    .unwrap();
                for claimed in store
                    .claim_items(&crate::ClaimRequest::new(
                        "w",
                        now,
                        Duration::from_millis(1000),
                        10,
                    ))
                    .await
                    .unwrap()
                {
                    let chunk = crate::conformance::chunk(id, 0, "text");
                    assert!(store
                        .complete_item(&claimed, &[chunk], crate::AfterChunks::Completed, now)
                        .await
                        .unwrap());
                }
            }
        };
        index_one(store.clone(), "a", UnixMs::from_millis(1)).await;
        let head = store.chunk_feed_head().await.unwrap();
        assert!(head > 0);
        store.trim_chunk_changes(head).await.unwrap();
        assert_eq!(count(&store, "SELECT COUNT(*) FROM chunk_log").await, 0);
        store.close().await;
        let store = SqliteStore::open(dir.path()).await.unwrap();
        assert_eq!(store.chunk_feed_head().await.unwrap(), head);
        index_one(store.clone(), "b", UnixMs::from_millis(2)).await;
        let changes = store.chunk_changes(head, 100).await.unwrap();
        assert_eq!(changes.current.len(), 1, "{changes:?}");
        assert!(changes.through > head);
    }

    #[tokio::test]
    async fn reopening_applies_no_migration_twice_and_keeps_data() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let key = crate::conformance::sample_key("reopen", "org_a");
        store.insert_key(&key).await.unwrap();
        store.close().await;
        let store = SqliteStore::open(dir.path()).await.unwrap();
        assert_eq!(store.find_key(&key.prefix).await.unwrap(), Some(key));
    }

    #[tokio::test]
    async fn a_data_directory_from_a_newer_engram_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        sqlx::query("INSERT INTO _engram_migrations VALUES (999, 'future', x'00', 0)")
            .execute(&store.pool)
            .await
            .unwrap();
        store.close().await;
        let err = SqliteStore::open(dir.path()).await.err().expect("refused");
        assert!(matches!(err, StoreError::Migration(_)), "{err}");
    }
}
