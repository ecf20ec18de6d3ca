//! Client-computed vectors on PostgreSQL: one row per chunk id, the vector as little-endian f32.

use async_trait::async_trait;
use engram_types::CollectionName;
use engram_types::UnixMs;
use sqlx::{Postgres, QueryBuilder, Row};

use super::sql::*;
use super::PgStore;
use crate::{DatabaseScope, RawEmbeddingStore, RawSelection, RawVector, StoreResult};

/// `… FROM raw_embeddings r JOIN databases d … WHERE` the scope and collection.
fn scoped<'a>(
    head: &str,
    scope: &DatabaseScope,
    collection: &CollectionName,
) -> QueryBuilder<'a, Postgres> {
    let mut query = QueryBuilder::<Postgres>::new(head);
    query
        .push(" FROM raw_embeddings r JOIN databases d ON d.id = r.database_id WHERE r.database_id = ")
        .push_bind(scope.id.as_str().to_owned())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str().to_owned())
        .push(" AND d.state <> 'deleting' AND r.collection = ")
        .push_bind(collection.as_str().to_owned());
    query
}

fn push_selection(query: &mut QueryBuilder<'_, Postgres>, which: RawSelection<'_>) {
    if let Some(source) = which.source_id {
        query
            .push(" AND r.source_id = ")
            .push_bind(source.to_owned());
    }
    push_any(query, "r.chunk_id", which.chunk_ids.to_vec());
}

#[async_trait]
impl RawEmbeddingStore for PgStore {
    async fn put_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        vectors: &[RawVector],
        upsert: bool,
        at: UnixMs,
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        check_scope(&mut tx, scope).await?;
        let conflict = if upsert {
            "DO UPDATE SET source_id = excluded.source_id, embedding = excluded.embedding,
                 metadata = excluded.metadata, created_at = excluded.created_at"
        } else {
            "DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO raw_embeddings (database_id, collection, source_id, chunk_id, embedding, metadata, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (database_id, collection, chunk_id) {conflict}"
        );
        let mut written = Vec::with_capacity(vectors.len());
        for vector in vectors {
            let done = sqlx::query(&sql)
                .bind(scope.id.as_str())
                .bind(collection.as_str())
                .bind(&vector.source_id)
                .bind(&vector.chunk_id)
                .bind(pgvector::Vector::from(vector.embedding.clone()))
                .bind(&vector.metadata)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() > 0 {
                written.push(vector.chunk_id.clone());
            }
        }
        sqlx::query(
            "INSERT INTO collections (database_id, name, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (database_id, name) DO NOTHING",
        )
        .bind(scope.id.as_str())
        .bind(collection.as_str())
        .bind(at)
        .execute(&mut *tx)
        .await?;
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
        let mut query = scoped("SELECT r.*", scope, collection);
        query
            .push(" AND r.row_key > ")
            .push_bind(after)
            .push(" ORDER BY r.row_key LIMIT ")
            .push_bind(i64::from(limit));
        let rows = query.build().fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("row_key")?, crate::rows::raw_vector(row)?)))
            .collect()
    }

    async fn select_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
        limit: u32,
    ) -> StoreResult<Vec<RawVector>> {
        let mut query = scoped("SELECT r.*", scope, collection);
        push_selection(&mut query, which);
        query
            .push(" ORDER BY r.source_id, r.chunk_id LIMIT ")
            .push_bind(i64::from(limit));
        let rows = query.build().fetch_all(&self.pool).await?;
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
        push_selection(&mut delete, which);
        delete.push(")");
        Ok(delete.build().execute(&self.pool).await?.rows_affected())
    }
}
