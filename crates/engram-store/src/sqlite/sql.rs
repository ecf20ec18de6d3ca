//! SQL the SQLite backend's resources share: transactions, scope checks, filters, key lists,
//! JSON and vector columns, error mapping.

use engram_types::UnixMs;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

pub(crate) use crate::error::{corrupt, is_unique_violation};
use crate::{DatabaseScope, FilterValue, StoreError, StoreResult};

pub(crate) const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

pub(crate) fn json_text(value: &Value, what: &str) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| corrupt(what, e))
}

/// Fails with `NotFound` unless the scope names a live database of its organization.
pub(crate) async fn check_scope(
    conn: &mut SqliteConnection,
    scope: &DatabaseScope,
) -> StoreResult<()> {
    let live: bool = sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM databases WHERE id = ? AND org_id = ? AND state <> 'deleting')",
    )
    .bind(scope.id.as_str())
    .bind(scope.org.as_str())
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    if live {
        Ok(())
    } else {
        Err(StoreError::NotFound(format!("database {}", scope.id)))
    }
}

pub(crate) fn push_filter(
    builder: &mut QueryBuilder<'_, Sqlite>,
    column: &str,
    key: &str,
    value: &FilterValue,
) -> StoreResult<()> {
    let path = format!("$.\"{}\"", key.replace('"', ""));
    if let FilterValue::Readable(principals) = value {
        builder
            .push(format!(" AND (COALESCE(json_array_length(i.{column}, "))
            .push_bind(path.clone())
            .push(format!(
                "), 0) = 0 OR EXISTS (SELECT 1 FROM json_each(i.{column}, "
            ))
            .push_bind(path)
            .push(") WHERE value IN (");
        let mut sep = builder.separated(", ");
        for principal in principals {
            sep.push_bind(principal.clone());
        }
        builder.push(")))");
        return Ok(());
    }
    builder
        .push(format!(" AND json_extract(i.{column}, "))
        .push_bind(path)
        .push(")");
    match value {
        FilterValue::Eq(v) => {
            // `IS`: a filter on null matches a null (or absent) value.
            builder
                .push(" IS json_extract(")
                .push_bind(json_text(v, "filter")?)
                .push(", '$')");
        }
        FilterValue::In(values) => {
            builder.push(" IN (");
            let mut sep = builder.separated(", ");
            for v in values {
                sep.push("json_extract(")
                    .push_bind_unseparated(json_text(v, "filter")?)
                    .push_unseparated(", '$')");
            }
            builder.push(")");
        }
        FilterValue::Readable(_) => {}
    }
    Ok(())
}

/// ` AND` the scope's database (by `database_column`) in a live database of its organization,
/// and an unexpired item `i`. Expects `d` (databases) and `i` (items) joined.
pub(crate) fn push_live_scope(
    builder: &mut QueryBuilder<'_, Sqlite>,
    scope: &DatabaseScope,
    database_column: &str,
    now: UnixMs,
) {
    builder
        .push(format!(" AND {database_column} = "))
        .push_bind(scope.id.as_str().to_owned())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str().to_owned())
        .push(" AND d.state <> 'deleting' AND (i.expires_at IS NULL OR i.expires_at > ")
        .push_bind(now)
        .push(")");
}

/// ` AND column IN (…)`; nothing when `values` is empty (no condition).
pub(crate) fn push_in<'a, T>(
    builder: &mut QueryBuilder<'a, Sqlite>,
    column: &str,
    values: impl IntoIterator<Item = T>,
) where
    T: 'a + sqlx::Encode<'a, Sqlite> + sqlx::Type<Sqlite> + Send,
{
    let mut values = values.into_iter().peekable();
    if values.peek().is_none() {
        return;
    }
    builder.push(format!(" AND {column} IN ("));
    let mut sep = builder.separated(", ");
    for v in values {
        sep.push_bind(v);
    }
    builder.push(")");
}

/// A vector stored as little-endian `f32`s.
pub(crate) fn vector_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

pub(crate) fn embedding_bytes(embedding: &[f32]) -> Vec<u8> {
    embedding.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl crate::rows::Columns for SqliteRow {
    crate::rows::plain_columns!();

    /// JSON is stored as text.
    fn json(&self, column: &str) -> StoreResult<Value> {
        let text: String = self.try_get(column)?;
        serde_json::from_str(&text).map_err(|e| corrupt(column, e))
    }

    /// Vectors are stored as little-endian `f32`s.
    fn vector(&self, column: &str) -> StoreResult<Vec<f32>> {
        let bytes: Option<Vec<u8>> = self.try_get(column)?;
        Ok(vector_from_bytes(&bytes.unwrap_or_default()))
    }
}
