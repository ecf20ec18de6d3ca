//! One store body over both backends. Every store trait is implemented once, for
//! [`SqlStore<B>`], over a [`Backend`]: the SQL statement as text with `$1`, `$2`… parameters
//! (both SQLite and PostgreSQL read them) and its values as [`Param`]s, which the backend binds
//! and runs. What the two dialects say differently (a lock, a JSON filter, a list parameter,
//! `GREATEST` against `MAX`) is one item of the trait each, so a store change is made once.

use std::future::Future;

use engram_types::UnixMs;
use serde_json::Value;
use sqlx::{Pool, Transaction};

use crate::rows::Columns;
use crate::{DatabaseScope, FilterValue, StoreError, StoreResult};

/// A store on one backend: SQLite ([`crate::sqlite::SqliteStore`]) or PostgreSQL
/// ([`crate::postgres::PgStore`]).
pub struct SqlStore<B: sqlx::Database> {
    pub(crate) pool: Pool<B>,
}

impl<B: sqlx::Database> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
        }
    }
}

/// The type of a parameter's value, which PostgreSQL needs even for a NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Int,
    Real,
    Bool,
    Bytes,
    Json,
}

/// One parameter of a statement.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Text(String),
    Int(i64),
    Real(f64),
    Bool(bool),
    Bytes(Vec<u8>),
    /// JSON: text on SQLite, JSONB on PostgreSQL.
    Json(Value),
    /// A vector: little-endian `f32`s on SQLite, pgvector's `vector` on PostgreSQL (NULL when
    /// empty: pgvector has no zero-dimension vector).
    Vector(Vec<f32>),
    /// A list (PostgreSQL only: SQLite has no array; [`Backend::push_in`] writes one
    /// parameter per value there).
    Texts(Vec<String>),
    Ints(Vec<i64>),
    Jsons(Vec<Value>),
    Null(Kind),
}

/// A value type that has a [`Kind`], so its `None` binds as a typed NULL.
pub(crate) trait Typed: Into<Param> {
    const KIND: Kind;
}

macro_rules! param_from {
    ($($ty:ty => $kind:ident, |$v:ident| $make:expr;)+) => {$(
        impl From<$ty> for Param {
            fn from($v: $ty) -> Self {
                $make
            }
        }
        impl Typed for $ty {
            const KIND: Kind = Kind::$kind;
        }
    )+};
}

param_from! {
    String => Text, |v| Param::Text(v);
    &str => Text, |v| Param::Text(v.to_owned());
    &String => Text, |v| Param::Text(v.clone());
    i64 => Int, |v| Param::Int(v);
    i32 => Int, |v| Param::Int(i64::from(v));
    u32 => Int, |v| Param::Int(i64::from(v));
    UnixMs => Int, |v| Param::Int(v.as_millis());
    f64 => Real, |v| Param::Real(v);
    f32 => Real, |v| Param::Real(f64::from(v));
    bool => Bool, |v| Param::Bool(v);
    Vec<u8> => Bytes, |v| Param::Bytes(v);
    &[u8] => Bytes, |v| Param::Bytes(v.to_vec());
    Value => Json, |v| Param::Json(v);
    &Value => Json, |v| Param::Json(v.clone());
}

impl<T: Typed> From<Option<T>> for Param {
    fn from(value: Option<T>) -> Self {
        value.map_or(Param::Null(T::KIND), Into::into)
    }
}

/// A statement: its text (parameters `$1`, `$2`… in the order of [`Sql::params`]) and its
/// values.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    pub(crate) params: Vec<Param>,
}

impl Sql {
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            params: Vec::new(),
        }
    }

    /// Adds the value of the next parameter (the text names it already).
    #[must_use]
    pub(crate) fn bind(mut self, value: impl Into<Param>) -> Self {
        self.params.push(value.into());
        self
    }

    /// Appends text.
    pub(crate) fn push(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.text.push_str(text.as_ref());
        self
    }

    /// Appends the next parameter's placeholder and adds its value.
    pub(crate) fn push_bind(&mut self, value: impl Into<Param>) -> &mut Self {
        self.params.push(value.into());
        let n = self.params.len();
        self.text.push_str(&format!("${n}"));
        self
    }

    /// Appends `values` as a comma-separated list of parameters.
    pub(crate) fn push_list<T: Into<Param>>(
        &mut self,
        values: impl IntoIterator<Item = T>,
    ) -> &mut Self {
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.push_bind(value);
        }
        self
    }

    /// The statement's text (for plans in tests).
    #[cfg(test)]
    pub(crate) fn sql(&self) -> &str {
        &self.text
    }
}

/// What a backend does its own way. Implemented for `sqlx::Sqlite` and `sqlx::Postgres`.
pub(crate) trait Backend: sqlx::Database<Row: Columns> {
    /// `FOR SHARE` where rows read in a transaction can be locked (PostgreSQL); empty where the
    /// write transaction already excludes every other writer (SQLite).
    const FOR_SHARE: &'static str;
    /// `FOR UPDATE`, likewise.
    const FOR_UPDATE: &'static str;
    /// The larger of two values: `GREATEST` or SQLite's two-argument `MAX`.
    const GREATEST: &'static str;
    /// Ends a claim's inner `SELECT`: rows another transaction holds are passed over
    /// (`FOR UPDATE SKIP LOCKED`, so instances claim disjoint rows); empty on SQLite.
    const SKIP_LOCKED: &'static str;
    /// An expression of 32 random lowercase hex digits (new ids made inside a statement).
    const RANDOM_HEX: &'static str;
    /// The most values one list parameter takes: longer lists are sent in slices (SQLite
    /// binds at most 32766 parameters per statement; PostgreSQL sends one array).
    const MAX_LIST: usize;

    /// A condition: the JSON object in `column` has a non-null `key` (a trusted name).
    fn json_has(column: &str, key: &str) -> String;
    /// The bytes `column`'s value takes in the store (0 for NULL): SQLite's length as a blob,
    /// PostgreSQL's `pg_column_size` (after compression, as it lies on disk).
    fn octets(column: &str) -> String;

    /// `SELECT columns FROM` the chunks with these keys as `c`, then `joins`, with the
    /// ` AND …` conditions `conditions` writes on what the keys found.
    fn push_chunks_among(
        sql: &mut Sql,
        columns: &str,
        joins: &str,
        keys: &[i64],
        conditions: &dyn Fn(&mut Sql) -> StoreResult<()>,
    ) -> StoreResult<()>;

    /// Begins a transaction that will write (SQLite: `BEGIN IMMEDIATE`, taking the write lock
    /// at once rather than failing to upgrade later).
    fn begin_write(
        pool: &Pool<Self>,
    ) -> impl Future<Output = StoreResult<Transaction<'static, Self>>> + Send + '_;

    /// Begins a read-only transaction that sees one snapshot for all its reads.
    fn begin_snapshot(
        pool: &Pool<Self>,
    ) -> impl Future<Output = StoreResult<Transaction<'static, Self>>> + Send + '_;

    fn fetch_all(
        conn: &mut Self::Connection,
        sql: Sql,
    ) -> impl Future<Output = StoreResult<Vec<Self::Row>>> + Send + '_;

    fn fetch_optional(
        conn: &mut Self::Connection,
        sql: Sql,
    ) -> impl Future<Output = StoreResult<Option<Self::Row>>> + Send + '_;

    /// Runs a statement; the rows it affected.
    fn execute(
        conn: &mut Self::Connection,
        sql: Sql,
    ) -> impl Future<Output = StoreResult<u64>> + Send + '_;

    /// Taken first by every transaction that writes chunks (PostgreSQL; nothing on SQLite).
    fn lock_feed(conn: &mut Self::Connection) -> impl Future<Output = StoreResult<()>> + Send + '_;

    /// ` AND column IN (values)`; nothing when `values` is empty (no condition).
    fn push_in(sql: &mut Sql, column: &str, values: ListParam);

    /// ` AND` the item's JSON `column.<key>` matches `value`.
    fn push_filter(sql: &mut Sql, column: &str, key: &str, value: &FilterValue) -> StoreResult<()>;
}

/// The values of a list condition.
pub(crate) enum ListParam {
    Texts(Vec<String>),
}

impl ListParam {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Self::Texts(v) => v.is_empty(),
        }
    }

    /// One parameter per value.
    pub(crate) fn each(self) -> Vec<Param> {
        match self {
            Self::Texts(v) => v.into_iter().map(Param::Text).collect(),
        }
    }

    /// One array parameter.
    pub(crate) fn array(self) -> Param {
        match self {
            Self::Texts(v) => Param::Texts(v),
        }
    }
}

impl<B: Backend> SqlStore<B> {
    /// Every row of a statement run on a pooled connection.
    pub(crate) async fn all(&self, sql: Sql) -> StoreResult<Vec<B::Row>> {
        let mut conn = self.pool.acquire().await?;
        B::fetch_all(&mut conn, sql).await
    }

    /// The row of a statement run on a pooled connection, if any.
    pub(crate) async fn optional(&self, sql: Sql) -> StoreResult<Option<B::Row>> {
        let mut conn = self.pool.acquire().await?;
        B::fetch_optional(&mut conn, sql).await
    }

    /// The one row of a statement run on a pooled connection.
    pub(crate) async fn one(&self, sql: Sql) -> StoreResult<B::Row> {
        let mut conn = self.pool.acquire().await?;
        one::<B>(&mut conn, sql).await
    }

    /// Runs a statement on a pooled connection; the rows it affected.
    pub(crate) async fn run(&self, sql: Sql) -> StoreResult<u64> {
        let mut conn = self.pool.acquire().await?;
        B::execute(&mut conn, sql).await
    }
}

/// The one row of a statement (an error when there is none).
pub(crate) async fn one<B: Backend>(conn: &mut B::Connection, sql: Sql) -> StoreResult<B::Row> {
    B::fetch_optional(conn, sql)
        .await?
        .ok_or(StoreError::Backend(sqlx::Error::RowNotFound))
}

/// Fails with `NotFound` unless the scope names a live database of its organization, and keeps
/// it live until the transaction ends (a share lock on its row where the backend has one).
pub(crate) async fn check_scope<B: Backend>(
    conn: &mut B::Connection,
    scope: &DatabaseScope,
) -> StoreResult<()> {
    let sql = Sql::new(format!(
        "SELECT id FROM databases WHERE id = $1 AND org_id = $2 AND state <> 'deleting'{}",
        B::FOR_SHARE
    ))
    .bind(scope.id.as_str())
    .bind(scope.org.as_str());
    match B::fetch_optional(conn, sql).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(format!("database {}", scope.id))),
    }
}

/// ` AND` the scope's database (by `database_column`) in a live database of its organization,
/// and an unexpired item `i`. Expects `d` (databases) and `i` (items) joined.
pub(crate) fn push_live_scope(
    sql: &mut Sql,
    scope: &DatabaseScope,
    database_column: &str,
    now: UnixMs,
) {
    sql.push(format!(" AND {database_column} = "))
        .push_bind(scope.id.as_str())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str())
        .push(" AND d.state <> 'deleting' AND (i.expires_at IS NULL OR i.expires_at > ")
        .push_bind(now)
        .push(")");
}
