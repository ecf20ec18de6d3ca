//! `postgres`: rows of a PostgreSQL table as documents. A resource is a table (`schema.table`);
//! each row becomes a text document of its columns (`column: value` lines; `filters.title_column`
//! names its title). With `filters.replication_key` (a column that grows whenever a row changes,
//! such as `updated_at` or a sequence) a pass reads only the rows past the last one seen,
//! ordered by that column and the key; without one, a pass reads every row and rows that are
//! gone leave engram. The row's id is `filters.id_column` (default: the primary key's first
//! column). The server is reached only when the outbound policy allows its address.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Row;
use std::str::FromStr;
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Rows read per page.
const ROWS: i64 = 200;
/// Longest text one row may give (a longer one is cut).
const ROW_TEXT_MAX: usize = 256 * 1024;

pub struct PostgresProvider {
    info: ProviderInfo,
}

impl Default for PostgresProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl PostgresProvider {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                provider: "postgres",
                category: "database",
                connector_type: "sql",
                rank: Some(4),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["row"],
                fields: vec![
                    FieldInfo {
                        name: "table",
                        data_type: "string",
                        description: "The row's table (schema.table)",
                        filter_key: Some("additional_metadata.table"),
                    },
                    FieldInfo {
                        name: "row_id",
                        data_type: "string",
                        description: "The row's id",
                        filter_key: Some("additional_metadata.row_id"),
                    },
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "url": {"type": "string", "pattern": "^postgres(ql)?://", "minLength": 12}
                    },
                    "required": ["url"],
                    "additionalProperties": false
                }),
                setup_guide: "Give a connection URL (postgres://user:password@host:5432/database) of a user \
                    that may read the tables. Configure a resource per table (schema.table, from discovery); \
                    `filters.replication_key` names a column that grows whenever a row changes (read \
                    incrementally), `filters.id_column` the row id (default: the primary key) and \
                    `filters.title_column` the title.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

fn transient(err: impl std::fmt::Display) -> ProviderError {
    ProviderError::Transient {
        message: format!("PostgreSQL: {err}"),
        http_status: 0,
    }
}

/// Maps a connection failure: rejected credentials are the user's to fix.
fn connect_error(err: sqlx::Error) -> ProviderError {
    if let sqlx::Error::Database(db) = &err {
        // 28P01 invalid_password, 28000 invalid_authorization_specification.
        if matches!(db.code().as_deref(), Some("28P01" | "28000")) {
            return ProviderError::Unauthorized {
                message: format!("PostgreSQL refused the credentials: {}", db.message()),
                http_status: 401,
            };
        }
        if db.code().as_deref() == Some("3D000") {
            return ProviderError::Invalid(format!("PostgreSQL: {}", db.message()));
        }
    }
    transient(err)
}

/// A read that failed: a missing column is the settings' fault, anything else is retried.
#[allow(clippy::wildcard_enum_match_arm)] // every other error is retried alike
fn read_error(err: sqlx::Error, table: &str) -> ProviderError {
    match &err {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("42703") => {
            ProviderError::Invalid(format!("table {table}: {}", db.message()))
        }
        _ => transient(err),
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

impl PostgresProvider {
    /// A one-connection pool to the configured server, after the outbound policy allowed it.
    async fn connect(&self, access: &Access) -> Result<sqlx::PgPool, ProviderError> {
        let url = access
            .credentials
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::Invalid("credentials.url is required".into()))?;
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            ProviderError::Invalid("credentials.url is not a PostgreSQL URL".into())
        })?;
        // The same address policy as every outbound request, on the server's host.
        let target = format!("https://{}:{}/", options.get_host(), options.get_port());
        access
            .outbound
            .check_url(&target)
            .await
            .map_err(|e| ProviderError::Invalid(format!("PostgreSQL server: {e}")))?;
        PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(options)
            .await
            .map_err(connect_error)
    }

    /// The table's schema and name, checked to exist, and the id column to use.
    async fn table(
        &self,
        pool: &sqlx::PgPool,
        resource: &ResourceRef,
    ) -> Result<(String, String, String), ProviderError> {
        let (schema, name) = resource
            .id
            .split_once('.')
            .unwrap_or(("public", resource.id.as_str()));
        let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(format!("{}.{}", quote(schema), quote(name)))
            .fetch_one(pool)
            .await
            .map_err(transient)?;
        if exists.is_none() {
            return Err(ProviderError::Resource {
                message: format!(
                    "table {} does not exist (removed at the source?)",
                    resource.id
                ),
                http_status: 404,
            });
        }
        let id_column = match resource.filters.get("id_column").and_then(Value::as_str) {
            Some(column) => column.to_owned(),
            None => sqlx::query_scalar::<_, String>(
                "SELECT a.attname FROM pg_index i
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                 WHERE i.indrelid = $1::regclass AND i.indisprimary",
            )
            .bind(format!("{}.{}", quote(schema), quote(name)))
            .fetch_optional(pool)
            .await
            .map_err(transient)?
            .ok_or_else(|| {
                ProviderError::Invalid(format!(
                    "table {} has no primary key: set filters.id_column",
                    resource.id
                ))
            })?,
        };
        Ok((schema.to_owned(), name.to_owned(), id_column))
    }
}

/// A row (as JSON) in words: one `column: value` line each, the title column first.
fn row_text(row: &Map<String, Value>, title_column: Option<&str>) -> (String, String) {
    let show = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other @ (Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_)) => {
            other.to_string()
        }
    };
    let title = title_column
        .and_then(|c| row.get(c))
        .map(show)
        .unwrap_or_default();
    let mut text = String::new();
    if !title.is_empty() {
        text.push_str(&title);
        text.push_str("\n\n");
    }
    for (column, value) in row {
        if value.is_null() || Some(column.as_str()) == title_column {
            continue;
        }
        text.push_str(column);
        text.push_str(": ");
        text.push_str(&show(value));
        text.push('\n');
        if text.len() > ROW_TEXT_MAX {
            break;
        }
    }
    (title, text)
}

#[async_trait]
impl Provider for PostgresProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let pool = self.connect(access).await?;
        let rows = sqlx::query(
            "SELECT table_schema, table_name FROM information_schema.tables
             WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
             ORDER BY 1, 2 LIMIT 1000",
        )
        .fetch_all(&pool)
        .await
        .map_err(transient)?;
        pool.close().await;
        Ok(rows
            .iter()
            .map(|row| {
                let (schema, name): (String, String) = (row.get(0), row.get(1));
                DiscoveredResource {
                    id: format!("{schema}.{name}"),
                    name: name.clone(),
                    resource_type: "table".to_owned(),
                    metadata: json!({"schema": schema, "table": name}),
                }
            })
            .collect())
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        _known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let pool = self.connect(access).await?;
        let (schema, name, id_column) = self.table(&pool, resource).await?;
        let replication = resource
            .filters
            .get("replication_key")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let title_column = resource.filters.get("title_column").and_then(Value::as_str);
        let table = format!("{}.{}", quote(&schema), quote(&name));
        let id = quote(&id_column);
        // Rows are read in (replication key, id) order, or id order; `within` is the last
        // (key, id) read in this pass, `cursor` the last key of the pass before.
        let saved: Value = serde_json::from_str(&position.within).unwrap_or(Value::Null);
        let last_id = saved
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let select = format!(
            "SELECT row_to_json(t)::text AS row, {{key}} AS rk, t.{id}::text AS rid FROM {table} t"
        );
        let (sql, binds): (String, Vec<String>) = match &replication {
            Some(column) => {
                let key = quote(column);
                // Compared in the column's own type, so numbers and times order as they do.
                let kind: Option<String> = sqlx::query_scalar(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                     WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped",
                )
                .bind(&table)
                .bind(column)
                .fetch_optional(&pool)
                .await
                .map_err(transient)?;
                let kind = kind.ok_or_else(|| {
                    ProviderError::Invalid(format!(
                        "table {} has no column `{column}` (filters.replication_key)",
                        resource.id
                    ))
                })?;
                let select = select.replace("{key}", &format!("t.{key}::text"));
                let after = saved
                    .get("key")
                    .and_then(Value::as_str)
                    .map_or_else(|| position.cursor.clone(), str::to_owned);
                let order = format!("ORDER BY t.{key}, t.{id}::text LIMIT {ROWS}");
                if after.is_empty() {
                    (format!("{select} {order}"), Vec::new())
                } else {
                    (
                        format!(
                            "{select} WHERE (t.{key}, t.{id}::text) > ($1::{kind}, $2) {order}"
                        ),
                        vec![after, last_id.clone()],
                    )
                }
            }
            None => {
                let select = select.replace("{key}", "''");
                let order = format!("ORDER BY t.{id}::text LIMIT {ROWS}");
                if last_id.is_empty() {
                    (format!("{select} {order}"), Vec::new())
                } else {
                    (
                        format!("{select} WHERE t.{id}::text > $1 {order}"),
                        vec![last_id.clone()],
                    )
                }
            }
        };
        let mut query = sqlx::query(&sql);
        for value in &binds {
            query = query.bind(value);
        }
        let rows = query
            .fetch_all(&pool)
            .await
            .map_err(|e| read_error(e, &resource.id))?;
        pool.close().await;
        let mut entries = Vec::with_capacity(rows.len());
        let (mut last_key, mut last_row) = (String::new(), String::new());
        for row in &rows {
            let (json_text, rk, rid): (String, Option<String>, Option<String>) =
                (row.get("row"), row.get("rk"), row.get("rid"));
            let Some(rid) = rid else { continue };
            let object: Map<String, Value> = serde_json::from_str(&json_text).unwrap_or_default();
            let (title, text) = row_text(&object, title_column);
            let version = crate::short_hash(json_text.as_bytes());
            let mut fields = Map::new();
            fields.insert("table".into(), Value::from(resource.id.clone()));
            fields.insert("row_id".into(), Value::from(rid.clone()));
            entries.push(Entry {
                native_id: format!("{}#{rid}", resource.id),
                version,
                title: if title.is_empty() {
                    format!("{} {rid}", resource.id)
                } else {
                    title
                },
                file_name: String::new(),
                url: String::new(),
                modified_at: String::new(),
                fields,
                content: Some(Content::Text(text)),
                state: String::new(),
            });
            last_key = rk.unwrap_or_default();
            last_row = rid;
        }
        let more = rows.len() as i64 == ROWS;
        let next = more.then(|| json!({"key": last_key, "id": last_row}).to_string());
        // After the pass: the greatest key read (or the previous one when nothing was new).
        let cursor = if replication.is_some() && !last_key.is_empty() {
            last_key
        } else {
            position.cursor.clone()
        };
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next,
            cursor,
            complete_listing: replication.is_none(),
            ..Page::default()
        })
    }

    async fn fetch(
        &self,
        _access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        _max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        entry
            .content
            .clone()
            .ok_or_else(|| ProviderError::Object(format!("row {} has no content", entry.native_id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_as_lines_under_their_title() {
        let row: Map<String, Value> = serde_json::from_str(
            r#"{"id": 7, "subject": "Printer jammed", "body": "Tray 2 is stuck", "closed": null, "priority": 2}"#,
        )
        .unwrap();
        let (title, text) = row_text(&row, Some("subject"));
        assert_eq!(title, "Printer jammed");
        assert_eq!(
            text,
            "Printer jammed\n\nid: 7\nbody: Tray 2 is stuck\npriority: 2\n"
        );
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote("we\"ird"), "\"we\"\"ird\"");
    }
}
