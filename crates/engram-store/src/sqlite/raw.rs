//! Client-computed vectors on SQLite: one row per chunk id, the vector as little-endian f32.

use async_trait::async_trait;
use engram_types::CollectionName;
use engram_types::UnixMs;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::sql::*;
use super::SqliteStore;
use crate::{DatabaseScope, RawEmbeddingStore, RawSelection, RawVector, StoreResult};

/// `… FROM raw_embeddings r JOIN databases d … WHERE` the scope and collection.
fn scoped<'a>(
    head: &str,
    scope: &DatabaseScope,
    collection: &CollectionName,
) -> QueryBuilder<'a, Sqlite> {
    let mut query = QueryBuilder::<Sqlite>::new(head);
    query
        .push(" FROM raw_embeddings r JOIN databases d ON d.id = r.database_id WHERE r.database_id = ")
        .push_bind(scope.id.as_str().to_owned())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str().to_owned())
        .push(" AND d.state <> 'deleting' AND r.collection = ")
        .push_bind(collection.as_str().to_owned());
    query
}

fn push_selection(query: &mut QueryBuilder<'_, Sqlite>, which: RawSelection<'_>) {
    if let Some(source) = which.source_id {
        query
            .push(" AND r.source_id = ")
            .push_bind(source.to_owned());
    }
    push_in(query, "r.chunk_id", which.chunk_ids.iter().cloned());
}

#[async_trait]
impl RawEmbeddingStore for SqliteStore {
    async fn put_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        vectors: &[RawVector],
        upsert: bool,
        at: UnixMs,
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        check_scope(&mut tx, scope).await?;
        let conflict = if upsert {
            "DO UPDATE SET source_id = excluded.source_id, embedding = excluded.embedding,
                 metadata = excluded.metadata, created_at = excluded.created_at"
        } else {
            "DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO raw_embeddings (database_id, collection, source_id, chunk_id, embedding, metadata, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (database_id, collection, chunk_id) {conflict}"
        );
        let mut written = Vec::with_capacity(vectors.len());
        for vector in vectors {
            let done = sqlx::query(&sql)
                .bind(scope.id.as_str())
                .bind(collection.as_str())
                .bind(&vector.source_id)
                .bind(&vector.chunk_id)
                .bind(embedding_bytes(&vector.embedding))
                .bind(json_text(&vector.metadata, "metadata")?)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() > 0 {
                written.push(vector.chunk_id.clone());
            }
        }
        sqlx::query(
            "INSERT INTO collections (database_id, name, created_at) VALUES (?, ?, ?)
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
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let keys: Vec<i64> = {
            let mut select = scoped("SELECT r.row_key", scope, collection);
            push_selection(&mut select, which);
            select
                .build()
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<Result<_, _>>()?
        };
        let mut deleted = 0;
        for slice in keys.chunks(10_000) {
            let mut delete =
                QueryBuilder::<Sqlite>::new("DELETE FROM raw_embeddings WHERE row_key IN (");
            let mut sep = delete.separated(", ");
            for key in slice {
                sep.push_bind(*key);
            }
            delete.push(")");
            deleted += delete.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(deleted)
    }
}
