//! The embedded backend: one SQLite file in WAL mode under the data directory. Several
//! processes (the server and `engram keys`) may open it at once.

mod items;
mod migrate;
mod search;
mod webhooks;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use engram_types::schema::{MetadataSchema, SchemaError, SchemaField};
use engram_types::{ApiKeyPrefix, CollectionName, DatabaseId, DatabaseName, OrgId};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection, Row, SqlitePool};

use crate::{
    ApiKeyRecord, DatabaseCounts, DatabaseRecord, DatabaseScope, DatabaseState, DatabaseStore,
    InfraFlags, KeyStore, LifecycleStore, NewDatabase, StoreError, StoreResult,
};

/// File name of the store inside the data directory.
pub const DB_FILE: &str = "engram.sqlite3";

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
}

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
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl crate::Store for SqliteStore {
    /// Closes every connection (checkpointing the WAL).
    async fn close(&self) {
        self.pool.close().await;
    }
}

pub(crate) fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn key_from_row(row: &SqliteRow) -> StoreResult<ApiKeyRecord> {
    let databases: String = row.try_get("databases")?;
    let databases: Vec<String> =
        serde_json::from_str(&databases).map_err(|e| corrupt("api_keys.databases", e))?;
    Ok(ApiKeyRecord {
        prefix: ApiKeyPrefix::from_trusted(row.try_get::<String, _>("prefix")?),
        secret_hash: row.try_get("secret_hash")?,
        org: OrgId::from_trusted(row.try_get::<String, _>("org_id")?),
        name: row.try_get("name")?,
        databases: databases
            .into_iter()
            .map(DatabaseName::from_trusted)
            .collect(),
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

const DATABASE_COLUMNS: &str = "id, org_id, name, state, metadata_schema, embeddings_dimension, is_embeddings_tenant, \
     scheduler_ready, graph_ready, knowledge_vectors_ready, memory_vectors_ready, created_at, updated_at";

fn database_from_row(row: &SqliteRow) -> StoreResult<DatabaseRecord> {
    let state: String = row.try_get("state")?;
    let schema: String = row.try_get("metadata_schema")?;
    let dimension: i64 = row.try_get("embeddings_dimension")?;
    Ok(DatabaseRecord {
        id: DatabaseId::from_trusted(row.try_get::<String, _>("id")?),
        org: OrgId::from_trusted(row.try_get::<String, _>("org_id")?),
        name: DatabaseName::from_trusted(row.try_get::<String, _>("name")?),
        state: DatabaseState::parse(&state).ok_or_else(|| corrupt("databases.state", &state))?,
        schema: serde_json::from_str::<MetadataSchema>(&schema)
            .map_err(|e| corrupt("databases.metadata_schema", e))?,
        embeddings_dimension: u32::try_from(dimension)
            .map_err(|e| corrupt("databases.embeddings_dimension", e))?,
        is_embeddings_tenant: row.try_get("is_embeddings_tenant")?,
        infra: InfraFlags {
            scheduler: row.try_get("scheduler_ready")?,
            graph: row.try_get("graph_ready")?,
            knowledge_vectors: row.try_get("knowledge_vectors_ready")?,
            memory_vectors: row.try_get("memory_vectors_ready")?,
        },
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn schema_json(schema: &MetadataSchema) -> StoreResult<String> {
    serde_json::to_string(schema).map_err(|e| corrupt("metadata schema", e))
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn insert_key(&self, key: &ApiKeyRecord) -> StoreResult<()> {
        let databases: Vec<&str> = key.databases.iter().map(DatabaseName::as_str).collect();
        let databases =
            serde_json::to_string(&databases).map_err(|e| corrupt("api_keys.databases", e))?;
        sqlx::query(
            "INSERT INTO api_keys (prefix, secret_hash, org_id, name, databases, created_at, expires_at, revoked_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(key.prefix.as_str())
        .bind(&key.secret_hash)
        .bind(key.org.as_str())
        .bind(&key.name)
        .bind(databases)
        .bind(key.created_at)
        .bind(key.expires_at)
        .bind(key.revoked_at)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::Conflict(format!("api key prefix {} exists", key.prefix))
            } else {
                e.into()
            }
        })?;
        Ok(())
    }

    async fn find_key(&self, prefix: &ApiKeyPrefix) -> StoreResult<Option<ApiKeyRecord>> {
        sqlx::query("SELECT * FROM api_keys WHERE prefix = ?")
            .bind(prefix.as_str())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(key_from_row)
            .transpose()
    }

    async fn list_keys(&self, org: Option<&OrgId>) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM api_keys WHERE ?1 IS NULL OR org_id = ?1 ORDER BY created_at, prefix",
        )
        .bind(org.map(OrgId::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(key_from_row).collect()
    }

    async fn revoke_key(&self, prefix: &ApiKeyPrefix, at_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = ? WHERE prefix = ? AND revoked_at IS NULL",
        )
        .bind(at_ms)
        .bind(prefix.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl DatabaseStore for SqliteStore {
    async fn create_database(&self, new: &NewDatabase) -> StoreResult<DatabaseRecord> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO databases (id, org_id, name, state, metadata_schema, embeddings_dimension,
                 is_embeddings_tenant, created_at, updated_at)
             VALUES (?, ?, ?, 'provisioning', ?, ?, ?, ?, ?)",
        )
        .bind(new.id.as_str())
        .bind(new.org.as_str())
        .bind(new.name.as_str())
        .bind(schema_json(&new.schema)?)
        .bind(i64::from(new.embeddings_dimension))
        .bind(new.is_embeddings_tenant)
        .bind(new.created_at)
        .bind(new.created_at)
        .execute(&mut *tx)
        .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!(
                    "database {} exists",
                    new.name
                )));
            }
            other => other?,
        };
        sqlx::query("INSERT INTO collections (database_id, name, created_at) VALUES (?, ?, ?)")
            .bind(new.id.as_str())
            .bind(new.default_collection.as_str())
            .bind(new.created_at)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE id = ?"
        ))
        .bind(new.id.as_str())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        database_from_row(&row)
    }

    async fn find_database(
        &self,
        org: &OrgId,
        name: &DatabaseName,
    ) -> StoreResult<Option<DatabaseRecord>> {
        sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE org_id = ? AND name = ? AND state <> 'deleting'"
        ))
        .bind(org.as_str())
        .bind(name.as_str())
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(database_from_row)
        .transpose()
    }

    async fn name_taken_elsewhere(&self, org: &OrgId, name: &DatabaseName) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM databases WHERE name = ? AND org_id <> ? AND state <> 'deleting')",
        )
        .bind(name.as_str())
        .bind(org.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    async fn list_databases(&self, org: &OrgId) -> StoreResult<Vec<DatabaseRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE org_id = ? AND state <> 'deleting' ORDER BY name"
        ))
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(database_from_row).collect()
    }

    async fn add_schema_fields(
        &self,
        scope: &DatabaseScope,
        fields: &[SchemaField],
        at_ms: i64,
    ) -> StoreResult<Result<MetadataSchema, SchemaError>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query("SELECT metadata_schema FROM databases WHERE id = ? AND org_id = ? AND state <> 'deleting'")
            .bind(scope.id.as_str())
            .bind(scope.org.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("database {}", scope.id)))?;
        let current: String = row.try_get(0)?;
        let mut schema: MetadataSchema =
            serde_json::from_str(&current).map_err(|e| corrupt("databases.metadata_schema", e))?;
        if let Err(refused) = schema.add(fields.to_vec()) {
            tx.rollback().await?;
            return Ok(Err(refused));
        }
        sqlx::query("UPDATE databases SET metadata_schema = ?, updated_at = ? WHERE id = ?")
            .bind(schema_json(&schema)?)
            .bind(at_ms)
            .bind(scope.id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(schema))
    }

    async fn schedule_deletion(&self, scope: &DatabaseScope, at_ms: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE databases SET state = 'deleting', deletion_requested_at = ?, updated_at = ?
             WHERE id = ? AND org_id = ? AND state <> 'deleting'",
        )
        .bind(at_ms)
        .bind(at_ms)
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn ensure_collection(
        &self,
        scope: &DatabaseScope,
        name: &CollectionName,
        at_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO collections (database_id, name, created_at)
             SELECT id, ?, ? FROM databases WHERE id = ? AND org_id = ? AND state <> 'deleting'
             ON CONFLICT (database_id, name) DO NOTHING",
        )
        .bind(name.as_str())
        .bind(at_ms)
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn list_collections(&self, scope: &DatabaseScope) -> StoreResult<Vec<CollectionName>> {
        let rows = sqlx::query(
            "SELECT c.name FROM collections c JOIN databases d ON d.id = c.database_id
             WHERE d.id = ? AND d.org_id = ? ORDER BY c.name",
        )
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok(CollectionName::from_trusted(row.try_get::<String, _>(0)?)))
            .collect()
    }

    async fn counts(&self, scope: &DatabaseScope, now: i64) -> StoreResult<DatabaseCounts> {
        let row = sqlx::query(
            "SELECT
                (SELECT COUNT(*) FROM collections WHERE database_id = d.id),
                (SELECT COUNT(*) FROM chunks c JOIN items i ON i.item_key = c.item_key
                  WHERE c.database_id = d.id AND c.kind = 'knowledge' AND (i.expires_at IS NULL OR i.expires_at > ?1)),
                (SELECT COUNT(*) FROM chunks c JOIN items i ON i.item_key = c.item_key
                  WHERE c.database_id = d.id AND c.kind = 'memory' AND (i.expires_at IS NULL OR i.expires_at > ?1))
             FROM databases d WHERE d.id = ?2 AND d.org_id = ?3",
        )
        .bind(now)
        .bind(scope.id.as_str())
        .bind(scope.org.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(DatabaseCounts::default());
        };
        let count = |i: usize| -> StoreResult<u64> {
            let n: i64 = row.try_get(i)?;
            u64::try_from(n).map_err(|e| corrupt("count", e))
        };
        Ok(DatabaseCounts {
            collections: count(0)?,
            knowledge_chunks: count(1)?,
            memory_chunks: count(2)?,
        })
    }
}

#[async_trait]
impl LifecycleStore for SqliteStore {
    async fn databases_needing_work(&self) -> StoreResult<Vec<DatabaseRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE state <> 'ready' ORDER BY updated_at"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(database_from_row).collect()
    }

    async fn set_infra(&self, id: &DatabaseId, infra: InfraFlags, at_ms: i64) -> StoreResult<()> {
        sqlx::query(
            "UPDATE databases SET scheduler_ready = ?, graph_ready = ?, knowledge_vectors_ready = ?,
                 memory_vectors_ready = ?, updated_at = ?,
                 state = CASE WHEN ? THEN 'ready' ELSE state END
             WHERE id = ? AND state = 'provisioning'",
        )
        .bind(infra.scheduler)
        .bind(infra.graph)
        .bind(infra.knowledge_vectors)
        .bind(infra.memory_vectors)
        .bind(at_ms)
        .bind(infra.all_ready())
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn purge_database(&self, id: &DatabaseId) -> StoreResult<()> {
        // Rows of the database cascade from it (foreign keys with ON DELETE CASCADE).
        sqlx::query("DELETE FROM databases WHERE id = ? AND state = 'deleting'")
            .bind(id.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store as _;

    #[tokio::test]
    async fn sqlite_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        crate::conformance::run_all(&store).await;
    }

    async fn count(store: &SqliteStore, sql: &str) -> i64 {
        sqlx::query(sql)
            .fetch_one(&store.pool)
            .await
            .unwrap()
            .try_get(0)
            .unwrap()
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
        let index_one = |store: SqliteStore, id: &'static str, now: i64| {
            let scope = db.scope();
            async move {
                let item = crate::conformance::item("c", id, "text");
                store
                    .enqueue_items(&scope, &[item], true, now)
                    .await
                    .unwrap();
                for claimed in store.claim_items("w", now, 1000, 10).await.unwrap() {
                    let chunk = crate::conformance::chunk(id, 0, "text");
                    assert!(store.complete_item(&claimed, &[chunk], now).await.unwrap());
                }
            }
        };
        index_one(store.clone(), "a", 1).await;
        let head = store.chunk_feed_head().await.unwrap();
        assert!(head > 0);
        store.trim_chunk_changes(head).await.unwrap();
        assert_eq!(count(&store, "SELECT COUNT(*) FROM chunk_log").await, 0);
        store.close().await;
        let store = SqliteStore::open(dir.path()).await.unwrap();
        assert_eq!(store.chunk_feed_head().await.unwrap(), head);
        index_one(store.clone(), "b", 2).await;
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
