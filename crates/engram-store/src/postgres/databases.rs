//! Databases, their collections and their lifecycle on PostgreSQL.

use async_trait::async_trait;
use engram_types::schema::{MetadataSchema, SchemaError, SchemaField};
use engram_types::UnixMs;
use engram_types::{CollectionName, DatabaseId, DatabaseName, OrgId};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::sql::{corrupt, is_unique_violation, lock_feed};
use super::PgStore;
use crate::rows::DATABASE_COLUMNS;
use crate::{
    DatabaseCounts, DatabaseRecord, DatabaseScope, DatabaseStore, InfraFlags, Instructions,
    InstructionsUpdate, LifecycleStore, NewDatabase, ServiceCounts, StoreError, StoreResult,
};

fn schema_json(schema: &MetadataSchema) -> StoreResult<serde_json::Value> {
    serde_json::to_value(schema).map_err(|e| corrupt("metadata schema", e))
}

/// One column of a live database, its row locked until the transaction ends;
/// [`StoreError::NotFound`] when the database is not live in that organization.
async fn live_column<T>(
    conn: &mut PgConnection,
    scope: &DatabaseScope,
    column: &'static str,
) -> StoreResult<T>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    let value: Option<T> = sqlx::query_scalar(&format!(
        "SELECT {column} FROM databases WHERE id = $1 AND org_id = $2 AND state <> 'deleting' FOR UPDATE"
    ))
    .bind(scope.id.as_str())
    .bind(scope.org.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    value.ok_or_else(|| StoreError::NotFound(format!("database {}", scope.id)))
}

#[async_trait]
impl DatabaseStore for PgStore {
    async fn create_database(&self, new: &NewDatabase) -> StoreResult<DatabaseRecord> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO databases (id, org_id, name, state, metadata_schema, embeddings_dimension,
                 is_embeddings_tenant, default_collection, created_at, updated_at)
             VALUES ($1, $2, $3, 'provisioning', $4, $5, $6, $7, $8, $9)",
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
        sqlx::query("INSERT INTO collections (database_id, name, created_at) VALUES ($1, $2, $3)")
            .bind(new.id.as_str())
            .bind(new.default_collection.as_str())
            .bind(new.created_at)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE id = $1"
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
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE org_id = $1 AND name = $2 AND state <> 'deleting'"
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
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE org_id = $1 AND state <> 'deleting' ORDER BY name"
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
        let mut tx = self.pool.begin().await?;
        let current: serde_json::Value = live_column(&mut tx, scope, "metadata_schema").await?;
        let mut schema: MetadataSchema =
            serde_json::from_value(current).map_err(|e| corrupt("databases.metadata_schema", e))?;
        if let Err(refused) = schema.add(fields.to_vec()) {
            tx.rollback().await?;
            return Ok(Err(refused));
        }
        sqlx::query("UPDATE databases SET metadata_schema = $1, updated_at = $2 WHERE id = $3")
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
        let mut tx = self.pool.begin().await?;
        let old: String = live_column(&mut tx, scope, "name").await?;
        let renamed = sqlx::query("UPDATE databases SET name = $1, updated_at = $2 WHERE id = $3")
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
                 SELECT jsonb_agg(CASE WHEN value = to_jsonb($1::text) THEN to_jsonb($2::text) ELSE value END
                                  ORDER BY n)
                 FROM jsonb_array_elements(api_keys.databases) WITH ORDINALITY AS e(value, n))
             WHERE org_id = $3 AND databases @> jsonb_build_array($1::text)",
        )
        .bind(&old)
        .bind(new_name.as_str())
        .bind(scope.org.as_str())
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!(
            "SELECT {DATABASE_COLUMNS} FROM databases WHERE id = $1"
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
        let mut tx = self.pool.begin().await?;
        let current: serde_json::Value = live_column(&mut tx, scope, "instructions").await?;
        let mut instructions = Instructions::from_json(&current);
        instructions.apply(update);
        if instructions.collections.len() > max_collections {
            return Err(StoreError::Conflict(format!(
                "{} collections would have instructions; at most {max_collections}",
                instructions.collections.len()
            )));
        }
        sqlx::query("UPDATE databases SET instructions = $1, updated_at = $2 WHERE id = $3")
            .bind(instructions.to_json())
            .bind(at)
            .bind(scope.id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(instructions)
    }

    async fn schedule_deletion(&self, scope: &DatabaseScope, at: UnixMs) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE databases SET state = 'deleting', deletion_requested_at = $1, updated_at = $2
             WHERE id = $3 AND org_id = $4 AND state <> 'deleting'",
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
             SELECT id, $1, $2 FROM databases WHERE id = $3 AND org_id = $4 AND state <> 'deleting'
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
             WHERE d.id = $1 AND d.org_id = $2 ORDER BY c.name",
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
                  WHERE c.database_id = d.id AND c.kind = 'knowledge' AND (i.expires_at IS NULL OR i.expires_at > $1)),
                (SELECT COUNT(*) FROM chunks c JOIN items i ON i.item_key = c.item_key
                  WHERE c.database_id = d.id AND c.kind = 'memory' AND (i.expires_at IS NULL OR i.expires_at > $1))
             FROM databases d WHERE d.id = $2 AND d.org_id = $3",
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
impl LifecycleStore for PgStore {
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
            "UPDATE databases SET scheduler_ready = $1, graph_ready = $2, knowledge_vectors_ready = $3,
                 memory_vectors_ready = $4, updated_at = $5,
                 state = CASE WHEN $6::boolean THEN 'ready' ELSE state END
             WHERE id = $7 AND state = 'provisioning'",
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
        let pairs = |rows: Vec<PgRow>| -> StoreResult<Vec<(String, u64)>> {
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
        // Rows of the database cascade from it (foreign keys with ON DELETE CASCADE); its
        // chunks leave through the feed.
        let mut tx = self.pool.begin().await?;
        lock_feed(&mut tx).await?;
        sqlx::query("DELETE FROM databases WHERE id = $1 AND state = 'deleting'")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
