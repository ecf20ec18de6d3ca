//! SQL the PostgreSQL backend's resources share: locks, scope checks, filters, key lists and
//! vector columns.

use pgvector::Vector;
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{PgConnection, Pool, Postgres, Transaction};

use crate::backend::{Backend, Kind, ListParam, Param, Sql};
use crate::{FilterValue, StoreResult};

/// Taken first by every transaction that writes chunks (directly or by cascade), so the chunk
/// feed's sequence numbers commit in the order they are handed out. The feed's trigger takes it
/// too; taking it first keeps the lock order fixed (no deadlock with row locks).
pub(crate) async fn lock_feed(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(7405, 1)")
        .execute(&mut *conn)
        .await?;
    Ok(())
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

/// A statement with its values bound.
fn query(sql: &Sql) -> sqlx::query::Query<'_, Postgres, PgArguments> {
    let mut query = sqlx::query(&sql.text);
    for param in &sql.params {
        query = match param {
            Param::Text(v) => query.bind(v.as_str()),
            Param::Int(v) => query.bind(*v),
            Param::Real(v) => query.bind(*v),
            Param::Bool(v) => query.bind(*v),
            Param::Bytes(v) => query.bind(v.as_slice()),
            Param::Json(v) => query.bind(v),
            Param::Vector(v) => query.bind(to_vector(v)),
            Param::Texts(v) => query.bind(v.as_slice()),
            Param::Ints(v) => query.bind(v.as_slice()),
            Param::Jsons(v) => query.bind(v.as_slice()),
            Param::Null(Kind::Text) => query.bind(None::<String>),
            Param::Null(Kind::Int) => query.bind(None::<i64>),
            Param::Null(Kind::Real) => query.bind(None::<f64>),
            Param::Null(Kind::Bool) => query.bind(None::<bool>),
            Param::Null(Kind::Bytes) => query.bind(None::<Vec<u8>>),
            Param::Null(Kind::Json) => query.bind(None::<Value>),
        };
    }
    query
}

impl Backend for Postgres {
    const FOR_SHARE: &'static str = " FOR SHARE";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const RANDOM_HEX: &'static str = "replace(gen_random_uuid()::text, '-', '')";
    const GREATEST: &'static str = "GREATEST";
    const MAX_LIST: usize = usize::MAX;

    fn json_has(column: &str, key: &str) -> String {
        format!("{column} ? '{key}'")
    }

    fn octets(column: &str) -> String {
        format!("COALESCE(pg_column_size({column}), 0)")
    }

    /// The keys are probed first, alone (primary-key lookups), and scope and filter apply to
    /// what they found: planned with statistics from before a database filled up (its id
    /// unseen), the scope's index looked selective, and every chunk of the database was read
    /// instead.
    fn push_chunks_among(
        sql: &mut Sql,
        columns: &str,
        joins: &str,
        keys: &[i64],
        conditions: &dyn Fn(&mut Sql) -> StoreResult<()>,
    ) -> StoreResult<()> {
        sql.push("WITH c AS MATERIALIZED (SELECT c.* FROM unnest(")
            .push_bind(Param::Ints(keys.to_vec()))
            .push(format!(
                "::bigint[]) AS k(chunk_key) JOIN chunks c ON c.chunk_key = k.chunk_key) \
                 SELECT {columns} FROM c{joins} WHERE 1 = 1"
            ));
        conditions(sql)
    }

    async fn begin_write(pool: &Pool<Self>) -> StoreResult<Transaction<'static, Self>> {
        Ok(pool.begin().await?)
    }

    async fn begin_snapshot(pool: &Pool<Self>) -> StoreResult<Transaction<'static, Self>> {
        let mut tx = pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn fetch_all(conn: &mut PgConnection, sql: Sql) -> StoreResult<Vec<PgRow>> {
        Ok(query(&sql).fetch_all(conn).await?)
    }

    async fn fetch_optional(conn: &mut PgConnection, sql: Sql) -> StoreResult<Option<PgRow>> {
        Ok(query(&sql).fetch_optional(conn).await?)
    }

    async fn execute(conn: &mut PgConnection, sql: Sql) -> StoreResult<u64> {
        Ok(query(&sql).execute(conn).await?.rows_affected())
    }

    async fn lock_feed(conn: &mut PgConnection) -> StoreResult<()> {
        lock_feed(conn).await
    }

    /// One array parameter.
    fn push_in(sql: &mut Sql, column: &str, values: ListParam) {
        if values.is_empty() {
            return;
        }
        sql.push(format!(" AND {column} = ANY("))
            .push_bind(values.array())
            .push(")");
    }

    /// Equal JSON (numbers by value), a filter on null matching a null or absent value.
    /// Equality on a non-null value also tests containment, which the column's GIN index
    /// serves.
    fn push_filter(sql: &mut Sql, column: &str, key: &str, value: &FilterValue) -> StoreResult<()> {
        let field = |sql: &mut Sql| {
            sql.push(format!(" COALESCE(i.{column} -> "))
                .push_bind(key)
                .push(", 'null'::jsonb)");
        };
        match value {
            FilterValue::Eq(v) => {
                if !v.is_null() {
                    sql.push(format!(" AND i.{column} @> jsonb_build_object("))
                        .push_bind(key)
                        .push("::text, ")
                        .push_bind(v)
                        .push("::jsonb)");
                }
                sql.push(" AND");
                field(sql);
                sql.push(" = ").push_bind(v).push("::jsonb");
            }
            FilterValue::In(values) => {
                sql.push(" AND");
                field(sql);
                sql.push(" = ANY(")
                    .push_bind(Param::Jsons(values.clone()))
                    .push("::jsonb[])");
            }
            FilterValue::Readable(principals) => {
                // No rule (absent, null, not a list, an empty list), or a principal in the list.
                sql.push(" AND (jsonb_typeof(");
                field(sql);
                sql.push(") <> 'array' OR jsonb_array_length(");
                field(sql);
                sql.push(") = 0 OR");
                field(sql);
                sql.push(" ?| ")
                    .push_bind(Param::Texts(principals.clone()))
                    .push("::text[])");
            }
        }
        Ok(())
    }
}
