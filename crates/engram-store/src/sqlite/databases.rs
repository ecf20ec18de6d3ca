//! Databases, their collections and their lifecycle on SQLite.

use async_trait::async_trait;
use engram_types::schema::{MetadataSchema, SchemaError, SchemaField};
use engram_types::UnixMs;
use engram_types::{CollectionName, DatabaseId, DatabaseName, OrgId};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::sql::{corrupt, is_unique_violation};
use super::SqliteStore;
use crate::rows::DATABASE_COLUMNS;
use crate::{
    DatabaseCounts, DatabaseRecord, DatabaseScope, DatabaseStore, InfraFlags, Instructions,
    InstructionsUpdate, LifecycleStore, NewDatabase, ServiceCounts, StoreError, StoreResult,
};

fn schema_json(schema: &MetadataSchema) -> StoreResult<String> {
    serde_json::to_string(schema).map_err(|e| corrupt("metadata schema", e))
}

/// One text column of a live database, read inside a write transaction;
/// [`StoreError::NotFound`] when the database is not live in that organization.
async fn live_column(
    conn: &mut SqliteConnection,
    scope: &DatabaseScope,
    column: &'static str,
) -> StoreResult<String> {
    let value: Option<String> = sqlx::query_scalar(&format!(
        "SELECT {column} FROM databases WHERE id = ? AND org_id = ? AND state <> 'deleting'"
    ))
    .bind(scope.id.as_str())
    .bind(scope.org.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    value.ok_or_else(|| StoreError::NotFound(format!("database {}", scope.id)))
}

#[async_trait]
impl DatabaseStore for SqliteStore {
    async fn create_database(&self, new: &NewDatabase) -> StoreResult<DatabaseRecord> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO databases (id, org_id, name, state, metadata_schema, embeddings_dimension,
                 is_embeddings_tenant, default_collection, created_at, updated_at)
             VALUES (?, ?, ?, 'provisioning', ?, ?, ?, ?, ?, ?)",
        )
        .bind(new.id.as_str())
        .bind(new.org.as_str())
        .bind(new.name.as_str())
        .bind(schema_json(&new.schema)?)
        .bind(i64::from(new.embeddings_dimension))
        .bind(new.is_embeddings_tenant)
        .bind(new.default_collection.as_str())
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
        crate::rows::database(&row)
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
        .map(crate::rows::database)
        .transpose()
    }

    async fn list_databases(&self, org: &OrgId) -> StoreResult<Vec<DatabaseRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE org_id = ? AND state <> 'deleting' ORDER BY name"
        ))
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::rows::database).collect()
    }

    async fn add_schema_fields(
        &self,
        scope: &DatabaseScope,
        fields: &[SchemaField],
        at: UnixMs,
    ) -> StoreResult<Result<MetadataSchema, SchemaError>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let current = live_column(&mut tx, scope, "metadata_schema").await?;
        let mut schema: MetadataSchema =
            serde_json::from_str(&current).map_err(|e| corrupt("databases.metadata_schema", e))?;
        if let Err(refused) = schema.add(fields.to_vec()) {
            tx.rollback().await?;
            return Ok(Err(refused));
        }
        sqlx::query("UPDATE databases SET metadata_schema = ?, updated_at = ? WHERE id = ?")
            .bind(schema_json(&schema)?)
            .bind(at)
            .bind(scope.id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(schema))
    }

    async fn rename_database(
        &self,
        scope: &DatabaseScope,
        new_name: &DatabaseName,
        at: UnixMs,
    ) -> StoreResult<DatabaseRecord> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let old = live_column(&mut tx, scope, "name").await?;
        let renamed = sqlx::query("UPDATE databases SET name = ?, updated_at = ? WHERE id = ?")
            .bind(new_name.as_str())
            .bind(at)
            .bind(scope.id.as_str())
            .execute(&mut *tx)
            .await;
        match renamed {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict(format!("database {new_name} exists")));
            }
            other => other?,
        };
        // Keys restricted to the database follow it to its new name.
        sqlx::query(
            "UPDATE api_keys SET databases = (
                 SELECT json_group_array(CASE WHEN value = ?1 THEN ?2 ELSE value END)
                 FROM json_each(api_keys.databases))
             WHERE org_id = ?3 AND EXISTS (SELECT 1 FROM json_each(api_keys.databases) WHERE value = ?1)",
        )
        .bind(&old)
        .bind(new_name.as_str())
        .bind(scope.org.as_str())
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE id = ?"
        ))
        .bind(scope.id.as_str())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        crate::rows::database(&row)
    }

    async fn update_instructions(
        &self,
        scope: &DatabaseScope,
        update: &InstructionsUpdate,
        max_collections: usize,
        at: UnixMs,
    ) -> StoreResult<Instructions> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let current = live_column(&mut tx, scope, "instructions").await?;
        let current: serde_json::Value =
            serde_json::from_str(&current).map_err(|e| corrupt("databases.instructions", e))?;
        let mut instructions = Instructions::from_json(&current);
        instructions.apply(update);
        if instructions.collections.len() > max_collections {
            return Err(StoreError::Conflict(format!(
                "{} collections would have instructions; at most {max_collections}",
                instructions.collections.len()
            )));
        }
        sqlx::query("UPDATE databases SET instructions = ?, updated_at = ? WHERE id = ?")
            .bind(instructions.to_json().to_string())
            .bind(at)
            .bind(scope.id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(instructions)
    }

    async fn schedule_deletion(&self, scope: &DatabaseScope, at: UnixMs) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE databases SET state = 'deleting', deletion_requested_at = ?, updated_at = ?
             WHERE id = ? AND org_id = ? AND state <> 'deleting'",
        )
        .bind(at)
        .bind(at)
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
        at: UnixMs,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO collections (database_id, name, created_at)
             SELECT id, ?, ? FROM databases WHERE id = ? AND org_id = ? AND state <> 'deleting'
             ON CONFLICT (database_id, name) DO NOTHING",
        )
        .bind(name.as_str())
        .bind(at)
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

    async fn counts(&self, scope: &DatabaseScope, now: UnixMs) -> StoreResult<DatabaseCounts> {
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
        rows.iter().map(crate::rows::database).collect()
    }

    async fn set_infra(&self, id: &DatabaseId, infra: InfraFlags, at: UnixMs) -> StoreResult<()> {
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
        .bind(at)
        .bind(infra.all_ready())
        .bind(id.as_str())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn service_counts(&self) -> StoreResult<ServiceCounts> {
        let pairs = |rows: Vec<SqliteRow>| -> StoreResult<Vec<(String, u64)>> {
            rows.iter()
                .map(|row| {
                    let n: i64 = row.try_get(1)?;
                    Ok((
                        row.try_get(0)?,
                        u64::try_from(n).map_err(|e| corrupt("count", e))?,
                    ))
                })
                .collect()
        };
        let items = sqlx::query(
            "SELECT i.status, COUNT(*) FROM items i JOIN databases d ON d.id = i.database_id
             WHERE d.state <> 'deleting' GROUP BY i.status ORDER BY i.status",
        )
        .fetch_all(&self.pool)
        .await?;
        let chunks = sqlx::query(
            "SELECT c.database_id, COUNT(*) FROM chunks c JOIN databases d ON d.id = c.database_id
             WHERE d.state <> 'deleting' GROUP BY c.database_id ORDER BY c.database_id",
        )
        .fetch_all(&self.pool)
        .await?;
        let deliveries = sqlx::query(
            "SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status ORDER BY status",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(ServiceCounts {
            items_by_state: pairs(items)?,
            chunks_by_database: pairs(chunks)?
                .into_iter()
                .map(|(id, n)| (DatabaseId::from_trusted(id), n))
                .collect(),
            deliveries_by_state: pairs(deliveries)?,
        })
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
