//! Vectors a client computed itself, kept in an embeddings database (`is_embeddings_tenant`)
//! and searched by exact scan. Every call is scoped to one live database of one organization.

use async_trait::async_trait;
use engram_types::{CollectionName, UnixMs};
use serde_json::Value;

use crate::backend::{check_scope, Backend, ListParam, Sql, SqlStore};
use crate::rows::Columns as _;
use crate::{DatabaseScope, StoreResult};

/// One stored vector: a chunk of a source, with its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct RawVector {
    pub source_id: String,
    pub chunk_id: String,
    pub embedding: Vec<f32>,
    pub metadata: Value,
}

/// Which vectors a read or delete names: those of one source, these chunk ids, or both (ANDed).
#[derive(Debug, Clone, Copy)]
pub struct RawSelection<'a> {
    pub source_id: Option<&'a str>,
    pub chunk_ids: &'a [String],
}

#[async_trait]
pub trait RawEmbeddingStore: Send + Sync {
    /// Stores vectors in one transaction. A chunk id that exists is replaced with `upsert`,
    /// else kept as it is. Returns the chunk ids written. [`crate::StoreError::NotFound`] when
    /// the database is not live.
    async fn put_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        vectors: &[RawVector],
        upsert: bool,
        at: UnixMs,
    ) -> StoreResult<Vec<String>>;
    /// Up to `limit` vectors of the collection after row `after`, in row order, each with its
    /// row: the pages of a scan.
    async fn raw_page(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<(i64, RawVector)>>;
    /// Up to `limit` vectors named by `which`, by source then chunk id.
    async fn select_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
        limit: u32,
    ) -> StoreResult<Vec<RawVector>>;
    /// Deletes the vectors named by `which`; returns how many went.
    async fn delete_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
    ) -> StoreResult<u64>;
}

/// `… FROM raw_embeddings r JOIN databases d … WHERE` the scope and collection.
fn scoped(head: &str, scope: &DatabaseScope, collection: &CollectionName) -> Sql {
    let mut sql = Sql::new(head);
    sql.push(
        " FROM raw_embeddings r JOIN databases d ON d.id = r.database_id WHERE r.database_id = ",
    )
    .push_bind(scope.id.as_str())
    .push(" AND d.org_id = ")
    .push_bind(scope.org.as_str())
    .push(" AND d.state <> 'deleting' AND r.collection = ")
    .push_bind(collection.as_str());
    sql
}

fn push_selection<B: Backend>(sql: &mut Sql, which: RawSelection<'_>) {
    if let Some(source) = which.source_id {
        sql.push(" AND r.source_id = ").push_bind(source);
    }
    B::push_in(
        sql,
        "r.chunk_id",
        ListParam::Texts(which.chunk_ids.to_vec()),
    );
}

#[async_trait]
impl<B: Backend> RawEmbeddingStore for SqlStore<B> {
    async fn put_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        vectors: &[RawVector],
        upsert: bool,
        at: UnixMs,
    ) -> StoreResult<Vec<String>> {
        let mut tx = B::begin_write(&self.pool).await?;
        check_scope::<B>(&mut tx, scope).await?;
        let conflict = if upsert {
            "DO UPDATE SET source_id = excluded.source_id, embedding = excluded.embedding,
                 metadata = excluded.metadata, created_at = excluded.created_at"
        } else {
            "DO NOTHING"
        };
        let text = format!(
            "INSERT INTO raw_embeddings (database_id, collection, source_id, chunk_id, embedding, metadata, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (database_id, collection, chunk_id) {conflict}"
        );
        let mut written = Vec::with_capacity(vectors.len());
        for vector in vectors {
            let insert = Sql::new(text.as_str())
                .bind(scope.id.as_str())
                .bind(collection.as_str())
                .bind(&vector.source_id)
                .bind(&vector.chunk_id)
                .bind(crate::backend::Param::Vector(vector.embedding.clone()))
                .bind(&vector.metadata)
                .bind(at);
            if B::execute(&mut tx, insert).await? > 0 {
                written.push(vector.chunk_id.clone());
            }
        }
        let collection_row = Sql::new(
            "INSERT INTO collections (database_id, name, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (database_id, name) DO NOTHING",
        )
        .bind(scope.id.as_str())
        .bind(collection.as_str())
        .bind(at);
        B::execute(&mut tx, collection_row).await?;
        tx.commit().await?;
        Ok(written)
    }

    async fn raw_page(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<(i64, RawVector)>> {
        let mut sql = scoped("SELECT r.*", scope, collection);
        sql.push(" AND r.row_key > ")
            .push_bind(after)
            .push(" ORDER BY r.row_key LIMIT ")
            .push_bind(limit);
        let rows = self.all(sql).await?;
        rows.iter()
            .map(|row| Ok((row.int("row_key")?, crate::rows::raw_vector(row)?)))
            .collect()
    }

    async fn select_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
        limit: u32,
    ) -> StoreResult<Vec<RawVector>> {
        let mut sql = scoped("SELECT r.*", scope, collection);
        push_selection::<B>(&mut sql, which);
        sql.push(" ORDER BY r.source_id, r.chunk_id LIMIT ")
            .push_bind(limit);
        let rows = self.all(sql).await?;
        rows.iter().map(crate::rows::raw_vector).collect()
    }

    async fn delete_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
    ) -> StoreResult<u64> {
        let mut delete = scoped(
            "DELETE FROM raw_embeddings WHERE row_key IN (SELECT r.row_key",
            scope,
            collection,
        );
        push_selection::<B>(&mut delete, which);
        delete.push(")");
        let mut tx = B::begin_write(&self.pool).await?;
        let deleted = B::execute(&mut tx, delete).await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
