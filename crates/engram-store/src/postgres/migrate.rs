//! Numbered migrations for PostgreSQL, embedded in the binary. Instances starting together take
//! one session lock, so exactly one applies a migration (each in its own transaction) while the
//! others wait and then find it applied.

use sqlx::{Connection, PgConnection, PgPool, Row};

use crate::migration::{check_not_newer, Migration};
use crate::{StoreError, StoreResult};

/// Every migration, in order. Never edit one that has shipped: add a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "schema",
        sql: include_str!("../../migrations/postgres/0001_schema.sql"),
    },
    Migration {
        version: 2,
        name: "rate_limits",
        sql: include_str!("../../migrations/postgres/0002_rate_limits.sql"),
    },
    Migration {
        version: 3,
        name: "item_lookups",
        sql: include_str!("../../migrations/postgres/0003_item_lookups.sql"),
    },
    Migration {
        version: 4,
        name: "graph",
        sql: include_str!("../../migrations/postgres/0004_graph.sql"),
    },
    Migration {
        version: 5,
        name: "item_links",
        sql: include_str!("../../migrations/postgres/0005_item_links.sql"),
    },
    Migration {
        version: 6,
        name: "memory_facts",
        sql: include_str!("../../migrations/postgres/0006_memory_facts.sql"),
    },
    Migration {
        version: 7,
        name: "connectors",
        sql: include_str!("../../migrations/postgres/0007_connectors.sql"),
    },
    Migration {
        version: 8,
        name: "connector_object_state",
        sql: include_str!("../../migrations/postgres/0008_connector_object_state.sql"),
    },
    Migration {
        version: 9,
        name: "chunk_feed_id",
        sql: include_str!("../../migrations/postgres/0009_chunk_feed_id.sql"),
    },
    Migration {
        version: 10,
        name: "key_scopes",
        sql: include_str!("../../migrations/postgres/0010_key_scopes.sql"),
    },
    Migration {
        version: 11,
        name: "item_request",
        sql: include_str!("../../migrations/postgres/0011_item_request.sql"),
    },
    Migration {
        version: 12,
        name: "items_by_status",
        sql: include_str!("../../migrations/postgres/0012_items_by_status.sql"),
    },
    Migration {
        version: 13,
        name: "item_history",
        sql: include_str!("../../migrations/postgres/0013_item_history.sql"),
    },
    Migration {
        version: 14,
        name: "connector_events",
        sql: include_str!("../../migrations/postgres/0014_connector_events.sql"),
    },
    Migration {
        version: 15,
        name: "page_acl_warning",
        sql: include_str!("../../migrations/postgres/0015_page_acl_warning.sql"),
    },
];

/// The lock key pair engram's schema changes are serialized on.
const MIGRATION_LOCK: (i32, i32) = (7405, 0);
/// The oldest server and extension this schema runs on.
const MIN_SERVER_VERSION: i64 = 150_000;
const MIN_PGVECTOR: [u32; 2] = [0, 8];

pub(crate) async fn run(pool: &PgPool) -> StoreResult<()> {
    let mut conn = pool.acquire().await?;
    check_server(&mut conn).await?;
    sqlx::query("SELECT pg_advisory_lock($1, $2)")
        .bind(MIGRATION_LOCK.0)
        .bind(MIGRATION_LOCK.1)
        .execute(&mut *conn)
        .await?;
    let result = apply_all(&mut conn).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1, $2)")
        .bind(MIGRATION_LOCK.0)
        .bind(MIGRATION_LOCK.1)
        .execute(&mut *conn)
        .await;
    result?;
    unlocked?;
    check_pgvector(&mut conn).await
}

async fn check_server(conn: &mut PgConnection) -> StoreResult<()> {
    let version: String = sqlx::query_scalar("SHOW server_version_num")
        .fetch_one(&mut *conn)
        .await?;
    let version: i64 = version.trim().parse().unwrap_or(0);
    if version < MIN_SERVER_VERSION {
        return Err(StoreError::Migration(format!(
            "PostgreSQL {}.{} is too old: engram needs PostgreSQL 15 or newer",
            version / 10_000,
            version % 10_000
        )));
    }
    let available: Option<String> = sqlx::query_scalar(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    if available.is_none() {
        return Err(StoreError::Migration(
            "the pgvector extension is not installed on this PostgreSQL server: engram needs \
             pgvector 0.8 or newer (https://github.com/pgvector/pgvector; most managed \
             PostgreSQL services offer it)"
                .into(),
        ));
    }
    Ok(())
}

/// The extension as created in this database must be new enough (an older one may have been
/// created before engram's first start).
async fn check_pgvector(conn: &mut PgConnection) -> StoreResult<()> {
    let version: String =
        sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            .fetch_one(&mut *conn)
            .await?;
    let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    if parts.as_slice() < MIN_PGVECTOR.as_slice() {
        return Err(StoreError::Migration(format!(
            "pgvector {version} is too old: engram needs 0.8 or newer (ALTER EXTENSION vector UPDATE)"
        )));
    }
    Ok(())
}

async fn apply_all(conn: &mut PgConnection) -> StoreResult<()> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS _engram_migrations (
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, checksum BYTEA NOT NULL, applied_at BIGINT NOT NULL)",
    )
    .execute(&mut *conn)
    .await?;
    for migration in MIGRATIONS {
        let mut tx = conn.begin().await?;
        let applied: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT checksum FROM _engram_migrations WHERE version = $1")
                .bind(migration.version)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(stored) = applied {
            migration.check_applied(&stored, "PostgreSQL database")?;
            continue;
        }
        sqlx::raw_sql(migration.sql).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO _engram_migrations (version, name, checksum, applied_at)
             VALUES ($1, $2, $3, (extract(epoch FROM now()) * 1000)::BIGINT)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.checksum())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "applied migration"
        );
    }
    let newest: Option<i64> = sqlx::query("SELECT MAX(version) FROM _engram_migrations")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    check_not_newer(MIGRATIONS, newest, "PostgreSQL database")
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_are_numbered_in_order_from_one() {
        crate::migration::assert_numbered_in_order(super::MIGRATIONS);
    }
}
