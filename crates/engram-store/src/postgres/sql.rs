//! SQL the PostgreSQL backend's resources share: locks, scope checks, filters, key lists and
//! vector columns.

use engram_types::UnixMs;
use pgvector::Vector;
use serde_json::Value;
use sqlx::{PgConnection, Postgres, QueryBuilder};

pub(crate) use crate::error::{corrupt, is_unique_violation};
use crate::{DatabaseScope, FilterValue, StoreError, StoreResult};

/// Taken first by every transaction that writes chunks (directly or by cascade), so the chunk
/// feed's sequence numbers commit in the order they are handed out. The feed's trigger takes it
/// too; taking it first keeps the lock order fixed (no deadlock with row locks).
pub(crate) async fn lock_feed(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(7405, 1)")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Taken by claims of indexing work: one claim at a time across instances, so the turn order
/// and the organizations' shares hold exactly.
pub(crate) async fn lock_claims(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(7405, 2)")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Fails with `NotFound` unless the scope names a live database of its organization, and keeps
/// it live (a share lock on its row) until the transaction ends.
pub(crate) async fn check_scope(conn: &mut PgConnection, scope: &DatabaseScope) -> StoreResult<()> {
    let live: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM databases WHERE id = $1 AND org_id = $2 AND state <> 'deleting' FOR SHARE",
    )
    .bind(scope.id.as_str())
    .bind(scope.org.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    match live {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(format!("database {}", scope.id))),
    }
}

/// ` AND` the item's `column.<key>` matches `value`: equal JSON (numbers by value), a filter on
/// null matching a null or absent value. Equality on a non-null value also tests containment,
/// which the column's GIN index serves.
pub(crate) fn push_filter(
    builder: &mut QueryBuilder<'_, Postgres>,
    column: &str,
    key: &str,
    value: &FilterValue,
) {
    let field = |builder: &mut QueryBuilder<'_, Postgres>| {
        builder
            .push(format!(" COALESCE(i.{column} -> "))
            .push_bind(key.to_owned())
            .push(", 'null'::jsonb)");
    };
    match value {
        FilterValue::Eq(v) => {
            if !v.is_null() {
                builder
                    .push(format!(" AND i.{column} @> jsonb_build_object("))
                    .push_bind(key.to_owned())
                    .push("::text, ")
                    .push_bind(v.clone())
                    .push("::jsonb)");
            }
            builder.push(" AND");
            field(builder);
            builder.push(" = ").push_bind(v.clone()).push("::jsonb");
        }
        FilterValue::In(values) => {
            builder.push(" AND");
            field(builder);
            builder
                .push(" = ANY(")
                .push_bind(values.clone())
                .push("::jsonb[])");
        }
        FilterValue::Readable(principals) => {
            // No rule (absent, null, not a list, an empty list), or a principal in the list.
            builder.push(" AND (jsonb_typeof(");
            field(builder);
            builder.push(") <> 'array' OR jsonb_array_length(");
            field(builder);
            builder.push(") = 0 OR");
            field(builder);
            builder
                .push(" ?| ")
                .push_bind(principals.clone())
                .push("::text[])");
        }
    }
}

/// ` AND` the scope's database (by `database_column`) in a live database of its organization,
/// and an unexpired item `i`. Expects `d` (databases) and `i` (items) joined.
pub(crate) fn push_live_scope(
    builder: &mut QueryBuilder<'_, Postgres>,
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

/// ` AND column = ANY(…)`: one array parameter; nothing when `values` is empty (no condition).
pub(crate) fn push_any<'a, T>(
    builder: &mut QueryBuilder<'a, Postgres>,
    column: &str,
    values: Vec<T>,
) where
    Vec<T>: 'a + sqlx::Encode<'a, Postgres> + sqlx::Type<Postgres> + Send,
{
    if values.is_empty() {
        return;
    }
    builder
        .push(format!(" AND {column} = ANY("))
        .push_bind(values)
        .push(")");
}

/// A vector column's value: NULL for an empty vector (pgvector has no zero-dimension vector).
pub(crate) fn to_vector(embedding: &[f32]) -> Option<Vector> {
    (!embedding.is_empty()).then(|| Vector::from(embedding.to_vec()))
}

pub(crate) fn from_vector(vector: Option<Vector>) -> Vec<f32> {
    vector.map(|v| v.to_vec()).unwrap_or_default()
}

impl crate::rows::Columns for sqlx::postgres::PgRow {
    crate::rows::plain_columns!();

    /// JSONB decodes directly.
    fn json(&self, column: &str) -> StoreResult<Value> {
        Ok(sqlx::Row::try_get(self, column)?)
    }

    fn vector(&self, column: &str) -> StoreResult<Vec<f32>> {
        Ok(from_vector(sqlx::Row::try_get(self, column)?))
    }
}
