//! API keys on SQLite: the prefix and a hash of the secret, never the secret.

use async_trait::async_trait;
use engram_types::UnixMs;
use engram_types::{ApiKeyPrefix, DatabaseName, OrgId};

use super::sql::{corrupt, is_unique_violation};
use super::SqliteStore;
use crate::{ApiKeyRecord, KeyStore, RateRule, StoreError, StoreResult};

#[async_trait]
impl KeyStore for SqliteStore {
    async fn insert_key(&self, key: &ApiKeyRecord) -> StoreResult<()> {
        let databases: Vec<&str> = key.databases.iter().map(DatabaseName::as_str).collect();
        let databases =
            serde_json::to_string(&databases).map_err(|e| corrupt("api_keys.databases", e))?;
        sqlx::query(
            "INSERT INTO api_keys (prefix, secret_hash, org_id, name, databases, created_at, expires_at, revoked_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(key.prefix.as_str())
        .bind(&key.secret_hash)
        .bind(key.org.as_str())
        .bind(&key.name)
        .bind(databases)
        .bind(key.created_at)
        .bind(key.expires_at)
        .bind(key.revoked_at)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::Conflict(format!("api key prefix {} exists", key.prefix))
            } else {
                e.into()
            }
        })?;
        Ok(())
    }

    async fn find_key(&self, prefix: &ApiKeyPrefix) -> StoreResult<Option<ApiKeyRecord>> {
        sqlx::query("SELECT * FROM api_keys WHERE prefix = ?")
            .bind(prefix.as_str())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(crate::rows::api_key)
            .transpose()
    }

    async fn list_keys(&self, org: Option<&OrgId>) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM api_keys WHERE ?1 IS NULL OR org_id = ?1 ORDER BY created_at, prefix",
        )
        .bind(org.map(OrgId::as_str))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::rows::api_key).collect()
    }

    async fn revoke_key(&self, prefix: &ApiKeyPrefix, at: UnixMs) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = ? WHERE prefix = ? AND revoked_at IS NULL",
        )
        .bind(at)
        .bind(prefix.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn service_secret(
        &self,
        name: &str,
        candidate: &[u8],
        at: UnixMs,
    ) -> StoreResult<Vec<u8>> {
        // Read first: only the first use ever writes (a write would take the database's lock).
        let stored: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT value FROM service_secrets WHERE name = ?")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?;
        if let Some(stored) = stored {
            return Ok(stored);
        }
        sqlx::query(
            "INSERT INTO service_secrets (name, value, created_at) VALUES (?, ?, ?)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(candidate)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT value FROM service_secrets WHERE name = ?")
                .bind(name)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn take_request(
        &self,
        prefix: &ApiKeyPrefix,
        rule: RateRule,
        now_us: i64,
    ) -> StoreResult<Option<i64>> {
        let (interval, tolerance) = (rule.interval_us(), rule.tolerance_us());
        let taken: Option<i64> = sqlx::query_scalar(
            "INSERT INTO rate_limits (prefix, tat_us) VALUES (?1, ?2 + ?3)
             ON CONFLICT (prefix) DO UPDATE SET tat_us = MAX(rate_limits.tat_us, ?2) + ?3
             WHERE MAX(rate_limits.tat_us, ?2) + ?3 - ?2 <= ?4
             RETURNING tat_us",
        )
        .bind(prefix.as_str())
        .bind(now_us)
        .bind(interval)
        .bind(tolerance)
        .fetch_optional(&self.pool)
        .await?;
        if taken.is_some() {
            return Ok(None);
        }
        let tat: i64 = sqlx::query_scalar("SELECT tat_us FROM rate_limits WHERE prefix = ?1")
            .bind(prefix.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(Some(
            (tat.max(now_us) + interval - now_us - tolerance).max(1),
        ))
    }
}
