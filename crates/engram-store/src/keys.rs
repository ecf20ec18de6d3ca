//! API keys, the service's own secrets and the request budgets: the prefix and a hash of a
//! key's secret, never the secret.

use async_trait::async_trait;
use engram_types::{ApiKeyPrefix, DatabaseName, OrgId, UnixMs};

use crate::backend::{Backend, Sql, SqlStore};
use crate::rows::Columns as _;
use crate::{ApiKeyRecord, StoreResult};

/// Storage of API keys. Only hashes of secrets are stored.
#[async_trait]
pub trait KeyStore: Send + Sync {
    async fn insert_key(&self, key: &ApiKeyRecord) -> StoreResult<()>;
    async fn find_key(&self, prefix: &ApiKeyPrefix) -> StoreResult<Option<ApiKeyRecord>>;
    /// Every key, or the keys of one organization, oldest first.
    async fn list_keys(&self, org: Option<&OrgId>) -> StoreResult<Vec<ApiKeyRecord>>;
    /// Marks a key revoked; false when no such key exists or it was revoked already.
    async fn revoke_key(&self, prefix: &ApiKeyPrefix, at: UnixMs) -> StoreResult<bool>;
    /// The service's own secret of that name (the key signing download links): the stored one,
    /// or `candidate` stored now when there is none. Every instance on the store gets the same.
    async fn service_secret(
        &self,
        name: &str,
        candidate: &[u8],
        at: UnixMs,
    ) -> StoreResult<Vec<u8>>;
    /// Takes one request from the key's budget at `now_us` (GCRA, one statement, so every
    /// instance on the store shares the budget): `None` when allowed, else how many
    /// microseconds until the next request would be.
    async fn take_request(
        &self,
        prefix: &ApiKeyPrefix,
        rule: RateRule,
        now_us: i64,
    ) -> StoreResult<Option<i64>>;
}

/// A request budget per API key: `per_second` requests a second, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateRule {
    pub per_second: u32,
    pub burst: u32,
}

impl RateRule {
    /// Microseconds between two requests at the sustained rate.
    pub fn interval_us(self) -> i64 {
        1_000_000 / i64::from(self.per_second.max(1))
    }

    /// How far ahead of now a key's next arrival time may be (the burst).
    pub fn tolerance_us(self) -> i64 {
        self.interval_us() * i64::from(self.burst.max(1))
    }
}

#[async_trait]
impl<B: Backend> KeyStore for SqlStore<B> {
    async fn insert_key(&self, key: &ApiKeyRecord) -> StoreResult<()> {
        let databases: Vec<&str> = key.databases.iter().map(DatabaseName::as_str).collect();
        self.run(
            Sql::new(
                "INSERT INTO api_keys (prefix, secret_hash, org_id, name, databases, scopes, created_at, expires_at, revoked_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(key.prefix.as_str())
            .bind(key.secret_hash.as_slice())
            .bind(key.org.as_str())
            .bind(&key.name)
            .bind(serde_json::json!(databases))
            .bind(serde_json::json!(key.scopes.names()))
            .bind(key.created_at)
            .bind(key.expires_at)
            .bind(key.revoked_at),
        )
        .await
        .map_err(|e| e.on_unique(|| format!("api key prefix {} exists", key.prefix)))?;
        Ok(())
    }

    async fn find_key(&self, prefix: &ApiKeyPrefix) -> StoreResult<Option<ApiKeyRecord>> {
        self.optional(Sql::new("SELECT * FROM api_keys WHERE prefix = $1").bind(prefix.as_str()))
            .await?
            .as_ref()
            .map(crate::rows::api_key)
            .transpose()
    }

    async fn list_keys(&self, org: Option<&OrgId>) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT * FROM api_keys WHERE CAST($1 AS TEXT) IS NULL OR org_id = $1
                     ORDER BY created_at, prefix",
                )
                .bind(org.map(OrgId::as_str)),
            )
            .await?;
        rows.iter().map(crate::rows::api_key).collect()
    }

    async fn revoke_key(&self, prefix: &ApiKeyPrefix, at: UnixMs) -> StoreResult<bool> {
        let revoked = self
            .run(
                Sql::new(
                    "UPDATE api_keys SET revoked_at = $1 WHERE prefix = $2 AND revoked_at IS NULL",
                )
                .bind(at)
                .bind(prefix.as_str()),
            )
            .await?;
        Ok(revoked == 1)
    }

    async fn service_secret(
        &self,
        name: &str,
        candidate: &[u8],
        at: UnixMs,
    ) -> StoreResult<Vec<u8>> {
        let read = || Sql::new("SELECT value FROM service_secrets WHERE name = $1").bind(name);
        // Read first: only the first use ever writes (a write would take SQLite's write lock).
        if let Some(stored) = self.optional(read()).await? {
            return stored.bytes("value");
        }
        self.run(
            Sql::new(
                "INSERT INTO service_secrets (name, value, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(candidate)
            .bind(at),
        )
        .await?;
        self.one(read()).await?.bytes("value")
    }

    async fn take_request(
        &self,
        prefix: &ApiKeyPrefix,
        rule: RateRule,
        now_us: i64,
    ) -> StoreResult<Option<i64>> {
        let (interval, tolerance) = (rule.interval_us(), rule.tolerance_us());
        let greatest = B::GREATEST;
        let taken = self
            .optional(
                Sql::new(format!(
                    "INSERT INTO rate_limits (prefix, tat_us) VALUES ($1, $2 + $3)
                     ON CONFLICT (prefix) DO UPDATE SET tat_us = {greatest}(rate_limits.tat_us, $2) + $3
                     WHERE {greatest}(rate_limits.tat_us, $2) + $3 - $2 <= $4
                     RETURNING tat_us"
                ))
                .bind(prefix.as_str())
                .bind(now_us)
                .bind(interval)
                .bind(tolerance),
            )
            .await?;
        if taken.is_some() {
            return Ok(None);
        }
        let tat = self
            .one(Sql::new("SELECT tat_us FROM rate_limits WHERE prefix = $1").bind(prefix.as_str()))
            .await?
            .int("tat_us")?;
        Ok(Some(
            (tat.max(now_us) + interval - now_us - tolerance).max(1),
        ))
    }
}
