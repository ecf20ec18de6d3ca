//! Numbered migrations, embedded in the binary and applied in order, each in its own
//! `BEGIN IMMEDIATE` transaction so two processes opening one data directory cannot race.

use sqlx::{Connection, Row, SqliteConnection};

use crate::migration::{check_not_newer, Migration};
use crate::StoreResult;

/// Every migration, in order. Never edit one that has shipped: add a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "foundation",
        sql: include_str!("../../migrations/sqlite/0001_foundation.sql"),
    },
    Migration {
        version: 2,
        name: "items",
        sql: include_str!("../../migrations/sqlite/0002_items.sql"),
    },
    Migration {
        version: 3,
        name: "webhooks",
        sql: include_str!("../../migrations/sqlite/0003_webhooks.sql"),
    },
    Migration {
        version: 4,
        name: "lexical_log",
        sql: include_str!("../../migrations/sqlite/0004_lexical_log.sql"),
    },
    Migration {
        version: 5,
        name: "chunk_context",
        sql: include_str!("../../migrations/sqlite/0005_chunk_context.sql"),
    },
    Migration {
        version: 6,
        name: "conversations",
        sql: include_str!("../../migrations/sqlite/0006_conversations.sql"),
    },
    Migration {
        version: 7,
        name: "chunk_log",
        sql: include_str!("../../migrations/sqlite/0007_chunk_log.sql"),
    },
    Migration {
        version: 8,
        name: "fair_queue",
        sql: include_str!("../../migrations/sqlite/0008_fair_queue.sql"),
    },
    Migration {
        version: 9,
        name: "database_edits",
        sql: include_str!("../../migrations/sqlite/0009_database_edits.sql"),
    },
    Migration {
        version: 10,
        name: "raw_embeddings",
        sql: include_str!("../../migrations/sqlite/0010_raw_embeddings.sql"),
    },
    Migration {
        version: 11,
        name: "rate_limits",
        sql: include_str!("../../migrations/sqlite/0011_rate_limits.sql"),
    },
    Migration {
        version: 12,
        name: "graph",
        sql: include_str!("../../migrations/sqlite/0012_graph.sql"),
    },
    Migration {
        version: 13,
        name: "item_links",
        sql: include_str!("../../migrations/sqlite/0013_item_links.sql"),
    },
    Migration {
        version: 14,
        name: "memory_facts",
        sql: include_str!("../../migrations/sqlite/0014_memory_facts.sql"),
    },
    Migration {
        version: 15,
        name: "connectors",
        sql: include_str!("../../migrations/sqlite/0015_connectors.sql"),
    },
    Migration {
        version: 16,
        name: "connector_object_state",
        sql: include_str!("../../migrations/sqlite/0016_connector_object_state.sql"),
    },
    Migration {
        version: 17,
        name: "chunk_feed",
        sql: include_str!("../../migrations/sqlite/0017_chunk_feed.sql"),
    },
    Migration {
        version: 18,
        name: "key_scopes",
        sql: include_str!("../../migrations/sqlite/0018_key_scopes.sql"),
    },
    Migration {
        version: 19,
        name: "item_request",
        sql: include_str!("../../migrations/sqlite/0019_item_request.sql"),
    },
    Migration {
        version: 20,
        name: "items_by_status",
        sql: include_str!("../../migrations/sqlite/0020_items_by_status.sql"),
    },
    Migration {
        version: 21,
        name: "item_history",
        sql: include_str!("../../migrations/sqlite/0021_item_history.sql"),
    },
    Migration {
        version: 22,
        name: "connector_events",
        sql: include_str!("../../migrations/sqlite/0022_connector_events.sql"),
    },
    Migration {
        version: 23,
        name: "page_acl_warning",
        sql: include_str!("../../migrations/sqlite/0023_page_acl_warning.sql"),
    },
];

pub(crate) async fn run(conn: &mut SqliteConnection) -> StoreResult<()> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS _engram_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum BLOB NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .execute(&mut *conn)
    .await?;
    for migration in MIGRATIONS {
        sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        match apply(conn, migration).await {
            Ok(()) => {
                sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
            }
            Err(err) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await?;
                return Err(err);
            }
        }
    }
    let newest: Option<i64> = sqlx::query("SELECT MAX(version) FROM _engram_migrations")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    check_not_newer(MIGRATIONS, newest, "data directory")?;
    conn.ping().await?;
    Ok(())
}

async fn apply(conn: &mut SqliteConnection, migration: &Migration) -> StoreResult<()> {
    let applied = sqlx::query("SELECT checksum FROM _engram_migrations WHERE version = ?")
        .bind(migration.version)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = applied {
        let stored: Vec<u8> = row.try_get(0)?;
        return migration.check_applied(&stored, "data directory");
    }
    sqlx::raw_sql(migration.sql).execute(&mut *conn).await?;
    sqlx::query("INSERT INTO _engram_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, strftime('%s','now') * 1000)")
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.checksum())
        .execute(&mut *conn)
        .await?;
    tracing::info!(
        version = migration.version,
        name = migration.name,
        "applied migration"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_are_numbered_in_order_from_one() {
        crate::migration::assert_numbered_in_order(super::MIGRATIONS);
    }
}
