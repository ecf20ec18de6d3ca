//! SQL the SQLite backend's resources share: transactions, scope checks, filters, key lists,
//! JSON and vector columns, error mapping.

use std::borrow::Cow;

use serde_json::Value;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Pool, Row, Sqlite, SqliteConnection, Transaction};

use crate::backend::{Backend, ListParam, Param, Sql};
pub(crate) use crate::error::corrupt;
use crate::{FilterValue, StoreResult};

pub(crate) const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

pub(crate) fn json_text(value: &Value, what: &str) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| corrupt(what, e))
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

/// The statement's text as SQLite runs it: when its parameters are `$1`, `$2`… in order, each
/// once, as anonymous `?`s. SQLite finds a named parameter's name by walking a list
/// (`sqlite3_bind_parameter_name`), which sqlx asks for every parameter of every execution, so
/// a list of 1,000 keys cost quadratic time (checking 1,000 hits against a filter took 1.3x as
/// long with named parameters).
fn positional(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut next, mut copied, mut at) = (1_u64, 0, 0);
    while let Some(found) = text[at..].find('$') {
        let start = at + found;
        let digits = bytes[start + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        at = start + 1 + digits;
        if digits == 0 {
            continue;
        }
        if text[start + 1..at].parse::<u64>() != Ok(next) {
            return Cow::Borrowed(text);
        }
        next += 1;
        out.push_str(&text[copied..start]);
        out.push('?');
        copied = at;
    }
    if next == 1 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// A statement with its values bound.
fn query<'q>(
    text: &'q str,
    sql: &'q Sql,
) -> StoreResult<sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>> {
    let mut query = sqlx::query(text);
    for param in &sql.params {
        query = match param {
            Param::Text(v) => query.bind(v.as_str()),
            Param::Int(v) => query.bind(*v),
            Param::Real(v) => query.bind(*v),
            Param::Bool(v) => query.bind(*v),
            Param::Bytes(v) => query.bind(v.as_slice()),
            Param::Json(v) => query.bind(json_text(v, "parameter")?),
            Param::Vector(v) => query.bind(embedding_bytes(v)),
            Param::Null(_) => query.bind(None::<i64>),
            Param::Texts(_) | Param::Ints(_) | Param::Jsons(_) => {
                return Err(corrupt(
                    "statement",
                    "a list parameter on SQLite (push_in writes one per value)",
                ))
            }
        };
    }
    Ok(query)
}

impl Backend for Sqlite {
    const FOR_SHARE: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const RANDOM_HEX: &'static str = "lower(hex(randomblob(16)))";
    const GREATEST: &'static str = "MAX";
    const MAX_LIST: usize = 10_000;

    fn json_has(column: &str, key: &str) -> String {
        format!("json_extract({column}, '$.{key}') IS NOT NULL")
    }

    fn octets(column: &str) -> String {
        format!("COALESCE(length(CAST({column} AS BLOB)), 0)")
    }

    /// The keys' condition comes last, as the plan tests and benchmarks have seen it (SQLite
    /// probes the keys by primary key either way).
    fn push_chunks_among(
        sql: &mut Sql,
        columns: &str,
        joins: &str,
        keys: &[i64],
        conditions: &dyn Fn(&mut Sql) -> StoreResult<()>,
    ) -> StoreResult<()> {
        sql.push(format!("SELECT {columns} FROM chunks c{joins} WHERE 1 = 1"));
        conditions(sql)?;
        sql.push(" AND c.chunk_key IN (")
            .push_list(keys.iter().copied())
            .push(")");
        Ok(())
    }

    async fn begin_write(pool: &Pool<Self>) -> StoreResult<Transaction<'static, Self>> {
        Ok(pool.begin_with(BEGIN_WRITE).await?)
    }

    /// A deferred transaction: its snapshot is taken at its first read.
    async fn begin_snapshot(pool: &Pool<Self>) -> StoreResult<Transaction<'static, Self>> {
        Ok(pool.begin().await?)
    }

    async fn fetch_all(conn: &mut SqliteConnection, sql: Sql) -> StoreResult<Vec<SqliteRow>> {
        let text = positional(&sql.text);
        Ok(query(&text, &sql)?.fetch_all(conn).await?)
    }

    async fn fetch_optional(
        conn: &mut SqliteConnection,
        sql: Sql,
    ) -> StoreResult<Option<SqliteRow>> {
        let text = positional(&sql.text);
        Ok(query(&text, &sql)?.fetch_optional(conn).await?)
    }

    async fn execute(conn: &mut SqliteConnection, sql: Sql) -> StoreResult<u64> {
        let text = positional(&sql.text);
        Ok(query(&text, &sql)?.execute(conn).await?.rows_affected())
    }

    /// SQLite's writers are serialized by the immediate transaction itself.
    async fn lock_feed(_: &mut SqliteConnection) -> StoreResult<()> {
        Ok(())
    }

    fn push_in(sql: &mut Sql, column: &str, values: ListParam) {
        if values.is_empty() {
            return;
        }
        sql.push(format!(" AND {column} IN ("))
            .push_list(values.each())
            .push(")");
    }

    fn push_filter(sql: &mut Sql, column: &str, key: &str, value: &FilterValue) -> StoreResult<()> {
        let path = format!("$.\"{}\"", key.replace('"', ""));
        if let FilterValue::Readable(principals) = value {
            sql.push(format!(" AND (COALESCE(json_array_length(i.{column}, "))
                .push_bind(path.clone())
                .push(format!(
                    "), 0) = 0 OR EXISTS (SELECT 1 FROM json_each(i.{column}, "
                ))
                .push_bind(path)
                .push(") WHERE value IN (")
                .push_list(principals.iter().map(String::as_str))
                .push(")))");
            return Ok(());
        }
        sql.push(format!(" AND json_extract(i.{column}, "))
            .push_bind(path)
            .push(")");
        match value {
            FilterValue::Eq(v) => {
                // `IS`: a filter on null matches a null (or absent) value.
                sql.push(" IS json_extract(")
                    .push_bind(json_text(v, "filter")?)
                    .push(", '$')");
            }
            FilterValue::In(values) => {
                sql.push(" IN (");
                for (i, v) in values.iter().enumerate() {
                    if i > 0 {
                        sql.push(", ");
                    }
                    sql.push("json_extract(")
                        .push_bind(json_text(v, "filter")?)
                        .push(", '$')");
                }
                sql.push(")");
            }
            FilterValue::Readable(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::positional;

    #[test]
    fn parameters_in_order_run_as_anonymous_ones() {
        assert_eq!(
            positional("a = $1 AND b IN ($2, $3)"),
            "a = ? AND b IN (?, ?)"
        );
        assert_eq!(positional("x = $10"), "x = $10", "not in order from 1");
        assert_eq!(
            positional("a = $1 OR b = $1"),
            "a = $1 OR b = $1",
            "one used twice"
        );
        assert_eq!(positional("a = $2 AND b = $1"), "a = $2 AND b = $1");
        assert_eq!(
            positional("no parameters, '$.key'"),
            "no parameters, '$.key'"
        );
        assert_eq!(
            positional("json_extract(x, '$.k') = $1"),
            "json_extract(x, '$.k') = ?"
        );
    }
}
