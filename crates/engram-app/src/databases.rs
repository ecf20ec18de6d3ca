//! Databases (tenants): create, read, list, collections, stats, schema additions and delete.
//! Provisioning and deletion are finished in the background by the lifecycle worker.

use engram_store::{DatabaseCounts, DatabaseRecord, InstructionsUpdate, NewDatabase};
use engram_types::limits::{self, INSTRUCTIONS_MAX_CHARS, INSTRUCTION_COLLECTIONS_MAX};
use engram_types::schema::{FieldType, MetadataSchema, SchemaField};
use engram_types::{CollectionName, DatabaseId, DatabaseName};

use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// One metadata schema field as given by a client; validated into a [`SchemaField`].
#[derive(Debug, Clone, Default)]
pub struct SchemaFieldSpec {
    pub name: String,
    pub data_type: Option<String>,
    pub max_length: Option<u32>,
    pub enable_match: Option<bool>,
    pub enable_dense_embedding: Option<bool>,
    pub enable_sparse_embedding: Option<bool>,
    pub nullable: Option<bool>,
}

impl SchemaFieldSpec {
    fn validate(self) -> AppResult<SchemaField> {
        let data_type = match self.data_type.as_deref() {
            None => FieldType::Varchar,
            Some(raw) => FieldType::parse(raw).ok_or_else(|| {
                AppError::Validation(format!(
                    "metadata schema field `{}`: unknown data_type `{raw}`; expected one of {}",
                    self.name,
                    FieldType::NAMES
                ))
            })?,
        };
        Ok(SchemaField {
            name: self.name,
            data_type,
            max_length: self.max_length.unwrap_or(SchemaField::DEFAULT_MAX_LENGTH),
            enable_match: self.enable_match.unwrap_or(false),
            enable_dense_embedding: self.enable_dense_embedding.unwrap_or(false),
            enable_sparse_embedding: self.enable_sparse_embedding.unwrap_or(false),
            nullable: self.nullable.unwrap_or(true),
        })
    }
}

fn validate_fields(fields: Vec<SchemaFieldSpec>) -> AppResult<Vec<SchemaField>> {
    fields.into_iter().map(SchemaFieldSpec::validate).collect()
}

/// A request to create a database.
#[derive(Debug, Clone, Default)]
pub struct CreateDatabase {
    pub name: String,
    pub schema: Vec<SchemaFieldSpec>,
    pub embeddings_dimension: Option<u32>,
    pub is_embeddings_tenant: bool,
}

impl CreateDatabase {
    /// The fields of this request that do nothing in its combination, with why.
    pub fn inert(&self) -> Vec<(&'static str, &'static str)> {
        let mut inert = Vec::new();
        if self.embeddings_dimension.is_some() && !self.is_embeddings_tenant {
            inert.push((
                "embeddings_dimension",
                "read only with `is_embeddings_tenant: true`; a knowledge database's vectors have the embedding model's dimension",
            ));
        }
        inert
    }
}

/// A database with its object counts.
#[derive(Debug, Clone)]
pub struct DatabaseStats {
    pub database: DatabaseRecord,
    pub counts: DatabaseCounts,
}

/// Validates a database name given under `field` (`database` or `tenant_id`).
pub fn parse_database_name(field: &'static str, value: &str) -> AppResult<DatabaseName> {
    DatabaseName::parse(value).map_err(|reason| AppError::InvalidName { field, reason })
}

impl App {
    /// Creates a database; it is `provisioning` until the lifecycle worker has built its storage.
    pub async fn create_database(
        &self,
        who: &Principal,
        request: CreateDatabase,
    ) -> AppResult<DatabaseRecord> {
        who.require(Scope::Admin)?;
        let name = parse_database_name("database", &request.name)?;
        if !who.may_use(&name) {
            return Err(AppError::Forbidden(format!(
                "this API key may not use database `{name}`"
            )));
        }
        let dimension = request
            .embeddings_dimension
            .unwrap_or(limits::DEFAULT_EMBEDDING_DIMENSION);
        // Checked either way (a bad value is a bad request), kept only for raw embeddings.
        if !limits::EMBEDDING_DIMENSION_RANGE.contains(&dimension) {
            return Err(AppError::InvalidParameters(format!(
                "`embeddings_dimension` must be between {} and {}",
                limits::EMBEDDING_DIMENSION_RANGE.start(),
                limits::EMBEDDING_DIMENSION_RANGE.end()
            )));
        }
        let schema = MetadataSchema::new(validate_fields(request.schema)?)
            .map_err(|e| AppError::Validation(e.to_string()))?;
        let new = NewDatabase {
            id: DatabaseId::from_trusted(format!("db_{}", uuid::Uuid::now_v7().simple())),
            org: who.org.clone(),
            default_collection: default_collection(&name),
            name,
            schema,
            embeddings_dimension: if request.is_embeddings_tenant {
                dimension
            } else {
                limits::DEFAULT_EMBEDDING_DIMENSION
            },
            is_embeddings_tenant: request.is_embeddings_tenant,
            created_at: self.now(),
        };
        let created = self
            .store()
            .create_database(&new)
            .await
            .map_err(|e| match e {
                engram_store::StoreError::Conflict(_) => {
                    AppError::DatabaseExists(new.name.to_string())
                }
                other => other.into(),
            })?;
        tracing::info!(org = %who.org, database = %created.name, id = %created.id, "database created");
        self.inner.lifecycle_wake.notify_one();
        Ok(created)
    }

    /// The database with its readiness flags.
    pub async fn database(
        &self,
        who: &Principal,
        name: &DatabaseName,
    ) -> AppResult<DatabaseRecord> {
        who.require(Scope::Read)?;
        self.authorize_database(who, name, Scope::Read).await
    }

    /// Databases of the caller's organization that its key may use.
    pub async fn list_databases(&self, who: &Principal) -> AppResult<Vec<DatabaseRecord>> {
        who.require(Scope::Read)?;
        let all = self.store().list_databases(&who.org).await?;
        Ok(all.into_iter().filter(|db| who.may_use(&db.name)).collect())
    }

    /// Collections of the database; the default one always exists.
    pub async fn list_collections(
        &self,
        who: &Principal,
        name: &DatabaseName,
    ) -> AppResult<Vec<CollectionName>> {
        who.require(Scope::Read)?;
        let db = self.authorize_database(who, name, Scope::Read).await?;
        Ok(self.store().list_collections(&db.scope()).await?)
    }

    /// Deletes one collection and everything in it (items, chunks, payloads; work in flight on
    /// them stops at its next heartbeat). The database stays; its default collection stays in
    /// its list, emptied. Deleting a collection that does not exist deletes nothing. Returns the
    /// database, the collection and how many items went.
    pub async fn delete_collection(
        &self,
        who: &Principal,
        name: &DatabaseName,
        collection: &str,
    ) -> AppResult<(DatabaseRecord, CollectionName, u64)> {
        who.require(Scope::Write)?;
        if collection.is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required parameter `collection`".into(),
            ));
        }
        let collection =
            CollectionName::parse(collection).map_err(|reason| AppError::InvalidName {
                field: "collection",
                reason,
            })?;
        let db = self.authorize_database(who, name, Scope::Write).await?;
        let forget = collection != db.default_collection;
        let deleted = self
            .store()
            .delete_collection(&db.scope(), &collection, forget)
            .await?
            .unwrap_or(0);
        tracing::info!(database = %db.name, %collection, deleted, "collection deleted");
        Ok((db, collection, deleted))
    }

    /// The database with its object counts.
    pub async fn database_stats(
        &self,
        who: &Principal,
        name: &DatabaseName,
    ) -> AppResult<DatabaseStats> {
        who.require(Scope::Read)?;
        let database = self.authorize_database(who, name, Scope::Read).await?;
        let counts = self.store().counts(&database.scope(), self.now()).await?;
        Ok(DatabaseStats { database, counts })
    }

    /// Adds fields to the metadata schema; existing fields can be neither changed nor removed.
    /// Returns the names added and the database as it is now.
    pub async fn add_schema_fields(
        &self,
        who: &Principal,
        name: &DatabaseName,
        fields: Vec<SchemaFieldSpec>,
    ) -> AppResult<(Vec<String>, DatabaseRecord)> {
        who.require(Scope::Admin)?;
        if fields.is_empty() {
            return Err(AppError::InvalidParameters(
                "`add_fields` must name at least one field".into(),
            ));
        }
        let fields = validate_fields(fields)?;
        let added: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
        let mut db = self.authorize_database(who, name, Scope::Admin).await?;
        db.schema = self
            .store()
            .add_schema_fields(&db.scope(), &fields, self.now())
            .await
            .map_err(|e| match e {
                engram_store::StoreError::NotFound(_) => {
                    AppError::DatabaseNotFound(name.to_string())
                }
                other => other.into(),
            })?
            .map_err(|e| AppError::Validation(e.to_string()))?;
        Ok((added, db))
    }

    /// Renames a database in place: its data, collections (the default one keeps its name) and
    /// keys restricted to it stay with it; the old name stops resolving at once. Returns the old
    /// name and the database as it is now.
    pub async fn rename_database(
        &self,
        who: &Principal,
        name: &DatabaseName,
        new_name: &str,
    ) -> AppResult<(DatabaseName, DatabaseRecord)> {
        who.require(Scope::Admin)?;
        if new_name.trim().is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required field `new_name`".into(),
            ));
        }
        let new_name = parse_database_name("new_name", new_name)?;
        let db = self.authorize_database(who, name, Scope::Admin).await?;
        if new_name == db.name {
            return Ok((db.name.clone(), db));
        }
        // A key restricted to the new name (a database not created yet, or deleted) would gain
        // this one: refused.
        let keys = self.store().list_keys(Some(&who.org)).await?;
        if keys
            .iter()
            .any(|k| k.revoked_at.is_none() && k.databases.contains(&new_name))
        {
            return Err(AppError::Validation(format!(
                "API keys of this organization are restricted to a database named `{new_name}`; renaming to it would open this database to them"
            )));
        }
        let renamed = self
            .store()
            .rename_database(&db.scope(), &new_name, self.now())
            .await
            .map_err(|e| match e {
                engram_store::StoreError::Conflict(_) => {
                    AppError::DatabaseExists(new_name.to_string())
                }
                engram_store::StoreError::NotFound(_) => {
                    AppError::DatabaseNotFound(name.to_string())
                }
                other => other.into(),
            })?;
        tracing::info!(org = %who.org, from = %db.name, to = %renamed.name, id = %db.id, "database renamed");
        Ok((db.name, renamed))
    }

    /// Sets or clears the database's custom ingestion instructions and its collections' (a
    /// collection absent from the update keeps its own). They apply to items accepted from now
    /// on. Returns the database with the instructions now in force.
    pub async fn update_instructions(
        &self,
        who: &Principal,
        name: &DatabaseName,
        update: InstructionsUpdate,
    ) -> AppResult<DatabaseRecord> {
        who.require(Scope::Admin)?;
        if update.custom_instructions.is_none() && update.collections.is_empty() {
            return Err(AppError::InvalidParameters(
                "send `custom_instructions`, `collections` or both".into(),
            ));
        }
        let too_long = |field: &str, text: &str| {
            (text.chars().count() > INSTRUCTIONS_MAX_CHARS).then(|| {
                AppError::InvalidParameters(format!(
                    "{field} is longer than {INSTRUCTIONS_MAX_CHARS} characters"
                ))
            })
        };
        if let Some(err) = update
            .custom_instructions
            .as_deref()
            .and_then(|text| too_long("`custom_instructions`", text))
        {
            return Err(err);
        }
        if update.collections.len() > INSTRUCTION_COLLECTIONS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "`collections` names {} collections; at most {INSTRUCTION_COLLECTIONS_MAX} at once",
                update.collections.len()
            )));
        }
        for (collection, text) in &update.collections {
            CollectionName::parse(collection).map_err(|reason| AppError::InvalidName {
                field: "collections",
                reason,
            })?;
            if let Some(err) = text
                .as_deref()
                .and_then(|text| too_long(&format!("the instructions of `{collection}`"), text))
            {
                return Err(err);
            }
        }
        let mut db = self.authorize_database(who, name, Scope::Admin).await?;
        db.instructions = self
            .store()
            .update_instructions(
                &db.scope(),
                &update,
                INSTRUCTION_COLLECTIONS_MAX,
                self.now(),
            )
            .await
            .map_err(|e| match e {
                engram_store::StoreError::NotFound(_) => {
                    AppError::DatabaseNotFound(name.to_string())
                }
                engram_store::StoreError::Conflict(why) => AppError::InvalidParameters(why),
                other => other.into(),
            })?;
        Ok(db)
    }

    /// Schedules deletion: the database disappears at once (its name is free again) and the
    /// lifecycle worker purges everything it held.
    pub async fn delete_database(
        &self,
        who: &Principal,
        name: &DatabaseName,
    ) -> AppResult<DatabaseRecord> {
        who.require(Scope::Admin)?;
        let db = self.authorize_database(who, name, Scope::Admin).await?;
        if !self
            .store()
            .schedule_deletion(&db.scope(), self.now())
            .await?
        {
            return Err(AppError::DatabaseNotFound(name.to_string()));
        }
        tracing::info!(org = %who.org, database = %db.name, id = %db.id, "database deletion scheduled");
        self.inner.lifecycle_wake.notify_one();
        Ok(db)
    }
}

/// The collection every database has, used when a call names none: named after the database.
pub fn default_collection(database: &DatabaseName) -> CollectionName {
    CollectionName::from_trusted(database.as_str())
}
