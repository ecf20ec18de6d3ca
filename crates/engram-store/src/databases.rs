//! Databases, their collections and their lifecycle, once for both backends.

use async_trait::async_trait;
use engram_types::schema::{MetadataSchema, SchemaError, SchemaField};
use engram_types::{CollectionName, DatabaseId, DatabaseName, OrgId, UnixMs};
use serde_json::Value;

use crate::backend::{one, Backend, Sql, SqlStore};
use crate::error::corrupt;
use crate::rows::{Columns, DATABASE_COLUMNS};
use crate::{
    DatabaseCounts, DatabaseRecord, DatabaseScope, DatabaseStore, InfraFlags, Instructions,
    InstructionsUpdate, LifecycleStore, NewDatabase, ServiceCounts, StoreError, StoreResult,
};

fn schema_json(schema: &MetadataSchema) -> StoreResult<Value> {
    serde_json::to_value(schema).map_err(|e| corrupt("metadata schema", e))
}

/// The row of a live database inside a write transaction (locked until it ends where the
/// backend locks rows); [`StoreError::NotFound`] when it is not live in that organization.
async fn live_row<B: Backend>(
    conn: &mut B::Connection,
    scope: &DatabaseScope,
    column: &'static str,
) -> StoreResult<B::Row> {
    let sql = Sql::new(format!(
        "SELECT {column} FROM databases WHERE id = $1 AND org_id = $2 AND state <> 'deleting'{}",
        B::FOR_UPDATE
    ))
    .bind(scope.id.as_str())
    .bind(scope.org.as_str());
    B::fetch_optional(conn, sql)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("database {}", scope.id)))
}

/// The database's row, read back after a write.
async fn database_by_id<B: Backend>(
    conn: &mut B::Connection,
    id: &DatabaseId,
) -> StoreResult<DatabaseRecord> {
    let sql = Sql::new(format!(
        "SELECT {DATABASE_COLUMNS} FROM databases WHERE id = $1"
    ))
    .bind(id.as_str());
    crate::rows::database(&one::<B>(conn, sql).await?)
}

fn count(row: &impl Columns, column: &str) -> StoreResult<u64> {
    u64::try_from(row.int(column)?).map_err(|e| corrupt(column, e))
}

#[async_trait]
impl<B: Backend> DatabaseStore for SqlStore<B> {
    async fn create_database(&self, new: &NewDatabase) -> StoreResult<DatabaseRecord> {
        let mut tx = B::begin_write(&self.pool).await?;
        let insert = Sql::new(
            "INSERT INTO databases (id, org_id, name, state, metadata_schema, embeddings_dimension,
                 is_embeddings_tenant, default_collection, created_at, updated_at)
             VALUES ($1, $2, $3, 'provisioning', $4, $5, $6, $7, $8, $9)",
        )
        .bind(new.id.as_str())
        .bind(new.org.as_str())
        .bind(new.name.as_str())
        .bind(schema_json(&new.schema)?)
        .bind(new.embeddings_dimension)
        .bind(new.is_embeddings_tenant)
        .bind(new.default_collection.as_str())
        .bind(new.created_at)
        .bind(new.created_at);
        B::execute(&mut tx, insert)
            .await
            .map_err(|e| e.on_unique(|| format!("database {} exists", new.name)))?;
        let collection =
            Sql::new("INSERT INTO collections (database_id, name, created_at) VALUES ($1, $2, $3)")
                .bind(new.id.as_str())
                .bind(new.default_collection.as_str())
                .bind(new.created_at);
        B::execute(&mut tx, collection).await?;
        let record = database_by_id::<B>(&mut tx, &new.id).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn find_database(
        &self,
        org: &OrgId,
        name: &DatabaseName,
    ) -> StoreResult<Option<DatabaseRecord>> {
        self.optional(
            Sql::new(format!(
                "SELECT {DATABASE_COLUMNS} FROM databases
                 WHERE org_id = $1 AND name = $2 AND state <> 'deleting'"
            ))
            .bind(org.as_str())
            .bind(name.as_str()),
        )
        .await?
        .as_ref()
        .map(crate::rows::database)
        .transpose()
    }

    async fn list_databases(&self, org: &OrgId) -> StoreResult<Vec<DatabaseRecord>> {
        let rows = self
            .all(
                Sql::new(format!(
                    "SELECT {DATABASE_COLUMNS} FROM databases
                     WHERE org_id = $1 AND state <> 'deleting' ORDER BY name"
                ))
                .bind(org.as_str()),
            )
            .await?;
        rows.iter().map(crate::rows::database).collect()
    }

    async fn add_schema_fields(
        &self,
        scope: &DatabaseScope,
        fields: &[SchemaField],
        at: UnixMs,
    ) -> StoreResult<Result<MetadataSchema, SchemaError>> {
        let mut tx = B::begin_write(&self.pool).await?;
        let current = live_row::<B>(&mut tx, scope, "metadata_schema")
            .await?
            .json("metadata_schema")?;
        let mut schema: MetadataSchema =
            serde_json::from_value(current).map_err(|e| corrupt("databases.metadata_schema", e))?;
        if let Err(refused) = schema.add(fields.to_vec()) {
            tx.rollback().await?;
            return Ok(Err(refused));
        }
        let update =
            Sql::new("UPDATE databases SET metadata_schema = $1, updated_at = $2 WHERE id = $3")
                .bind(schema_json(&schema)?)
                .bind(at)
                .bind(scope.id.as_str());
        B::execute(&mut tx, update).await?;
        tx.commit().await?;
        Ok(Ok(schema))
    }

    async fn rename_database(
        &self,
        scope: &DatabaseScope,
        new_name: &DatabaseName,
        at: UnixMs,
    ) -> StoreResult<DatabaseRecord> {
        let mut tx = B::begin_write(&self.pool).await?;
        let old = live_row::<B>(&mut tx, scope, "name").await?.text("name")?;
        let rename = Sql::new("UPDATE databases SET name = $1, updated_at = $2 WHERE id = $3")
            .bind(new_name.as_str())
            .bind(at)
            .bind(scope.id.as_str());
        B::execute(&mut tx, rename)
            .await
            .map_err(|e| e.on_unique(|| format!("database {new_name} exists")))?;
        // Keys restricted to the database follow it to its new name. A key's list changes
        // only here, under the database's lock, so reading and writing it back is safe.
        let keys = Sql::new(format!(
            "SELECT prefix, databases FROM api_keys WHERE org_id = $1{}",
            B::FOR_UPDATE
        ))
        .bind(scope.org.as_str());
        for key in B::fetch_all(&mut tx, keys).await? {
            let Value::Array(names) = key.json("databases")? else {
                continue;
            };
            if !names.iter().any(|name| name.as_str() == Some(old.as_str())) {
                continue;
            }
            let renamed: Vec<Value> = names
                .into_iter()
                .map(|name| {
                    if name.as_str() == Some(old.as_str()) {
                        Value::from(new_name.as_str())
                    } else {
                        name
                    }
                })
                .collect();
            let update = Sql::new("UPDATE api_keys SET databases = $1 WHERE prefix = $2")
                .bind(Value::Array(renamed))
                .bind(key.text("prefix")?);
            B::execute(&mut tx, update).await?;
        }
        let record = database_by_id::<B>(&mut tx, &scope.id).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn update_instructions(
        &self,
        scope: &DatabaseScope,
        update: &InstructionsUpdate,
        max_collections: usize,
        at: UnixMs,
    ) -> StoreResult<Instructions> {
        let mut tx = B::begin_write(&self.pool).await?;
        let current = live_row::<B>(&mut tx, scope, "instructions")
            .await?
            .json("instructions")?;
        let mut instructions = Instructions::from_json(&current);
        instructions.apply(update);
        if instructions.collections.len() > max_collections {
            return Err(StoreError::Conflict(format!(
                "{} collections would have instructions; at most {max_collections}",
                instructions.collections.len()
            )));
        }
        let write =
            Sql::new("UPDATE databases SET instructions = $1, updated_at = $2 WHERE id = $3")
                .bind(instructions.to_json())
                .bind(at)
                .bind(scope.id.as_str());
        B::execute(&mut tx, write).await?;
        tx.commit().await?;
        Ok(instructions)
    }

    async fn schedule_deletion(&self, scope: &DatabaseScope, at: UnixMs) -> StoreResult<bool> {
        let marked = self
            .run(
                Sql::new(
                    "UPDATE databases SET state = 'deleting', deletion_requested_at = $1, updated_at = $1
                     WHERE id = $2 AND org_id = $3 AND state <> 'deleting'",
                )
                .bind(at)
                .bind(scope.id.as_str())
                .bind(scope.org.as_str()),
            )
            .await?;
        Ok(marked == 1)
    }

    async fn ensure_collection(
        &self,
        scope: &DatabaseScope,
        name: &CollectionName,
        at: UnixMs,
    ) -> StoreResult<()> {
        self.run(
            Sql::new(
                "INSERT INTO collections (database_id, name, created_at)
                 SELECT id, $1, $2 FROM databases WHERE id = $3 AND org_id = $4 AND state <> 'deleting'
                 ON CONFLICT (database_id, name) DO NOTHING",
            )
            .bind(name.as_str())
            .bind(at)
            .bind(scope.id.as_str())
            .bind(scope.org.as_str()),
        )
        .await?;
        Ok(())
    }

    async fn list_collections(&self, scope: &DatabaseScope) -> StoreResult<Vec<CollectionName>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT c.name FROM collections c JOIN databases d ON d.id = c.database_id
                     WHERE d.id = $1 AND d.org_id = $2 ORDER BY c.name",
                )
                .bind(scope.id.as_str())
                .bind(scope.org.as_str()),
            )
            .await?;
        rows.iter()
            .map(|row| Ok(CollectionName::from_trusted(row.text("name")?)))
            .collect()
    }

    async fn counts(&self, scope: &DatabaseScope, now: UnixMs) -> StoreResult<DatabaseCounts> {
        // One pass over the live chunks counts both kinds and sums their bytes.
        let bytes = format!("{} + {}", B::octets("c.content"), B::octets("c.embedding"));
        let row = self
            .optional(
                Sql::new(format!(
                    "SELECT
                        (SELECT COUNT(*) FROM collections WHERE database_id = d.id) AS collections,
                        COALESCE(t.knowledge, 0) AS knowledge,
                        COALESCE(t.memory, 0) AS memory,
                        COALESCE(t.bytes, 0) AS bytes
                     FROM databases d
                     LEFT JOIN (
                        SELECT c.database_id,
                            SUM(CASE WHEN c.kind = 'knowledge' THEN 1 ELSE 0 END) AS knowledge,
                            SUM(CASE WHEN c.kind = 'memory' THEN 1 ELSE 0 END) AS memory,
                            SUM({bytes}) AS bytes
                        FROM chunks c JOIN items i ON i.item_key = c.item_key
                        WHERE c.database_id = $2 AND (i.expires_at IS NULL OR i.expires_at > $1)
                        GROUP BY c.database_id
                     ) t ON t.database_id = d.id
                     WHERE d.id = $3 AND d.org_id = $4",
                ))
                .bind(now)
                .bind(scope.id.as_str())
                .bind(scope.id.as_str())
                .bind(scope.org.as_str()),
            )
            .await?;
        let Some(row) = row else {
            return Ok(DatabaseCounts::default());
        };
        Ok(DatabaseCounts {
            collections: count(&row, "collections")?,
            knowledge_chunks: count(&row, "knowledge")?,
            memory_chunks: count(&row, "memory")?,
            stored_bytes: count(&row, "bytes")?,
        })
    }
}

#[async_trait]
impl<B: Backend> LifecycleStore for SqlStore<B> {
    async fn databases_needing_work(&self) -> StoreResult<Vec<DatabaseRecord>> {
        let rows = self
            .all(Sql::new(format!(
                "SELECT {DATABASE_COLUMNS} FROM databases WHERE state <> 'ready' ORDER BY updated_at"
            )))
            .await?;
        rows.iter().map(crate::rows::database).collect()
    }

    async fn set_infra(&self, id: &DatabaseId, infra: InfraFlags, at: UnixMs) -> StoreResult<()> {
        self.run(
            Sql::new(
                "UPDATE databases SET scheduler_ready = $1, graph_ready = $2, knowledge_vectors_ready = $3,
                     memory_vectors_ready = $4, updated_at = $5,
                     state = CASE WHEN $6 THEN 'ready' ELSE state END
                 WHERE id = $7 AND state = 'provisioning'",
            )
            .bind(infra.scheduler)
            .bind(infra.graph)
            .bind(infra.knowledge_vectors)
            .bind(infra.memory_vectors)
            .bind(at)
            .bind(infra.all_ready())
            .bind(id.as_str()),
        )
        .await?;
        Ok(())
    }

    async fn service_counts(&self) -> StoreResult<ServiceCounts> {
        let pairs = |rows: Vec<B::Row>| -> StoreResult<Vec<(String, u64)>> {
            rows.iter()
                .map(|row| Ok((row.text("name")?, count(row, "n")?)))
                .collect()
        };
        let items = self
            .all(Sql::new(
                "SELECT i.status AS name, COUNT(*) AS n FROM items i JOIN databases d ON d.id = i.database_id
                 WHERE d.state <> 'deleting' GROUP BY i.status ORDER BY i.status",
            ))
            .await?;
        let chunks = self
            .all(Sql::new(
                "SELECT c.database_id AS name, COUNT(*) AS n FROM chunks c JOIN databases d ON d.id = c.database_id
                 WHERE d.state <> 'deleting' GROUP BY c.database_id ORDER BY c.database_id",
            ))
            .await?;
        let deliveries = self
            .all(Sql::new(
                "SELECT status AS name, COUNT(*) AS n FROM webhook_deliveries
                 GROUP BY status ORDER BY status",
            ))
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
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        let delete = Sql::new("DELETE FROM databases WHERE id = $1 AND state = 'deleting'")
            .bind(id.as_str());
        B::execute(&mut tx, delete).await?;
        tx.commit().await?;
        Ok(())
    }
}
