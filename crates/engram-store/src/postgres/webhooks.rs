//! Webhook registration and the delivery outbox on PostgreSQL. Dispatchers of every instance
//! claim from the one outbox: `SKIP LOCKED` hands each due delivery to one of them.

use async_trait::async_trait;
use engram_types::UnixMs;
use engram_types::{DeliveryStatus, IndexingStatus, OrgId};
use sqlx::{PgConnection, Postgres, QueryBuilder};
use std::time::Duration;

use super::sql::*;
use super::PgStore;
use crate::{
    ClaimedDelivery, ClaimedItem, DeliveryOutcome, DeliveryQuery, DeliveryQueue, DeliveryRecord,
    Requeue, SecretChange, StoreResult, WebhookRecord, WebhookStore, INDEXING_STATUS_CHANGED,
};

/// Writes the outbox row of an item's terminal state, inside the transaction that stores the
/// state, when the item's organization has a webhook. Nothing is written otherwise.
pub(super) async fn record_event(
    tx: &mut PgConnection,
    item: &ClaimedItem,
    status: IndexingStatus,
    error_code: &str,
    error_message: &str,
    now: UnixMs,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO webhook_deliveries (delivery_id, org_id, database_id, database_name, collection, item_id,
             event_type, indexing_status, item_error_code, item_error_message, status, attempts, next_attempt_at,
             webhook_url, created_at, updated_at)
         SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), w.org_id, d.id, d.name, $1, $2, $3, $4, $5, $6, 'pending', 0, $7,
             w.url, $8, $9
         FROM webhooks w JOIN databases d ON d.id = $10 AND d.org_id = w.org_id
         WHERE w.org_id = $11",
    )
    .bind(item.collection.as_str())
    .bind(&item.id)
    .bind(INDEXING_STATUS_CHANGED)
    .bind(status.as_str())
    .bind(error_code)
    .bind(error_message)
    .bind(now)
    .bind(now)
    .bind(now)
    .bind(item.database_id.as_str())
    .bind(item.org.as_str())
    .execute(&mut *tx)
    .await?;
    Ok(())
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn put_webhook(
        &self,
        org: &OrgId,
        url: &str,
        event_types: &[String],
        secret: SecretChange,
        now: UnixMs,
    ) -> StoreResult<WebhookRecord> {
        let event_types = serde_json::json!(event_types);
        let (set_secret, secret) = match secret {
            SecretChange::Keep => (false, None),
            SecretChange::Set(secret) => (true, Some(secret)),
        };
        let row = sqlx::query(
            "INSERT INTO webhooks (org_id, url, event_types, signing_secret, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (org_id) DO UPDATE SET url = excluded.url, event_types = excluded.event_types,
                 signing_secret = CASE WHEN $7 THEN excluded.signing_secret ELSE webhooks.signing_secret END,
                 updated_at = excluded.updated_at
             RETURNING *",
        )
        .bind(org.as_str())
        .bind(url)
        .bind(event_types)
        .bind(secret)
        .bind(now)
        .bind(now)
        .bind(set_secret)
        .fetch_one(&self.pool)
        .await?;
        crate::rows::webhook(&row)
    }

    async fn webhook(&self, org: &OrgId) -> StoreResult<Option<WebhookRecord>> {
        sqlx::query("SELECT * FROM webhooks WHERE org_id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(crate::rows::webhook)
            .transpose()
    }

    async fn delete_webhook(&self, org: &OrgId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM webhooks WHERE org_id = $1")
            .bind(org.as_str())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_signing_secret(
        &self,
        org: &OrgId,
        secret: Option<&str>,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE webhooks SET signing_secret = $1, updated_at = $2 WHERE org_id = $3",
        )
        .bind(secret)
        .bind(now)
        .bind(org.as_str())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_deliveries(
        &self,
        org: &OrgId,
        query: &DeliveryQuery,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let mut sql =
            QueryBuilder::<Postgres>::new("SELECT * FROM webhook_deliveries WHERE org_id = ");
        sql.push_bind(org.as_str());
        if let Some(status) = query.status {
            sql.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(before) = query.before {
            sql.push(" AND delivery_key < ").push_bind(before);
        }
        sql.push(" ORDER BY delivery_key DESC LIMIT ")
            .push_bind(i64::from(query.limit));
        let rows = sql.build().fetch_all(&self.pool).await?;
        rows.iter().map(crate::rows::delivery).collect()
    }

    async fn delivery(
        &self,
        org: &OrgId,
        delivery_id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        sqlx::query("SELECT * FROM webhook_deliveries WHERE org_id = $1 AND delivery_id = $2")
            .bind(org.as_str())
            .bind(delivery_id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(crate::rows::delivery)
            .transpose()
    }

    async fn requeue_delivery(
        &self,
        org: &OrgId,
        delivery_id: &str,
        now: UnixMs,
    ) -> StoreResult<Requeue> {
        let mut tx = self.pool.begin().await?;
        let status: Option<String> = sqlx::query_scalar(
            "SELECT status FROM webhook_deliveries WHERE org_id = $1 AND delivery_id = $2 FOR UPDATE",
        )
        .bind(org.as_str())
        .bind(delivery_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(status) = status else {
            return Ok(Requeue::NotFound);
        };
        let status = DeliveryStatus::parse(&status)
            .ok_or_else(|| corrupt("webhook_deliveries.status", &status))?;
        if !status.is_retryable() {
            return Ok(Requeue::NotRetryable(status));
        }
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $1, lease_owner = NULL,
                 lease_until = NULL, updated_at = $2
             WHERE org_id = $3 AND delivery_id = $4",
        )
        .bind(now)
        .bind(now)
        .bind(org.as_str())
        .bind(delivery_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Requeue::Queued)
    }
}

#[async_trait]
impl DeliveryQueue for PgStore {
    async fn claim_deliveries(
        &self,
        owner: &str,
        now: UnixMs,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        let lease_owner = format!("{owner}:{}", claim_number());
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(
            "UPDATE webhook_deliveries
             SET status = CASE WHEN status = 'pending' AND lease_owner IS NULL THEN 'pending' ELSE 'sweeping' END,
                 lease_owner = $1, lease_until = $2, updated_at = $3
             WHERE delivery_key IN (
                 SELECT delivery_key FROM webhook_deliveries
                 WHERE status IN ('pending', 'sweeping', 'failed') AND next_attempt_at <= $4
                   AND (lease_owner IS NULL OR lease_until <= $5)
                 ORDER BY next_attempt_at, delivery_key LIMIT $6
                 FOR UPDATE SKIP LOCKED)
             RETURNING *",
        )
        .bind(&lease_owner)
        .bind(now.after(lease))
        .bind(now)
        .bind(now)
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut claimed = rows
            .iter()
            .map(|row| {
                Ok(ClaimedDelivery {
                    record: crate::rows::delivery(row)?,
                    lease: lease_owner.clone(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        claimed.sort_by_key(|c| (c.record.next_attempt_at, c.record.key));
        Ok(claimed)
    }

    async fn finish_deliveries(
        &self,
        attempts: &[(ClaimedDelivery, DeliveryOutcome)],
        now: UnixMs,
    ) -> StoreResult<Vec<bool>> {
        let mut tx = self.pool.begin().await?;
        let mut done = Vec::with_capacity(attempts.len());
        for (claimed, outcome) in attempts {
            let written = finish_query(claimed, outcome, now)
                .execute(&mut *tx)
                .await?;
            done.push(written.rows_affected() == 1);
        }
        tx.commit().await?;
        Ok(done)
    }

    async fn purge_deliveries(&self, before: UnixMs, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM webhook_deliveries WHERE delivery_key IN (
                 SELECT delivery_key FROM webhook_deliveries
                 WHERE status IN ('delivered', 'permanently_failed') AND updated_at < $1
                 LIMIT $2)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

/// The statement recording one attempt, guarded by the claim's lease.
fn finish_query<'q>(
    claimed: &'q ClaimedDelivery,
    outcome: &'q DeliveryOutcome,
    now: UnixMs,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let query = match outcome {
        DeliveryOutcome::Delivered { status_code, url } => sqlx::query(
            "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1,
                 last_status_code = $1, error_code = NULL, error_message = NULL, webhook_url = $2,
                 lease_owner = NULL, lease_until = NULL, updated_at = $3
             WHERE delivery_key = $4 AND lease_owner = $5",
        )
        .bind(i64::from(*status_code))
        .bind(url),
        DeliveryOutcome::Failed {
            code,
            message,
            status_code,
            url,
            retry_at,
        } => sqlx::query(
            "UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, next_attempt_at = $2,
                 last_status_code = $3, error_code = $4, error_message = $5, webhook_url = $6,
                 lease_owner = NULL, lease_until = NULL, updated_at = $7
             WHERE delivery_key = $8 AND lease_owner = $9",
        )
        .bind(if retry_at.is_some() {
            DeliveryStatus::Failed.as_str()
        } else {
            DeliveryStatus::PermanentlyFailed.as_str()
        })
        .bind(retry_at.unwrap_or(now))
        .bind(status_code.map(i64::from))
        .bind(code)
        .bind(message)
        .bind(url),
    };
    query
        .bind(now)
        .bind(claimed.record.key)
        .bind(&claimed.lease)
}

/// Numbers this process's claims, so each claim's lease is distinct (owners are unique).
fn claim_number() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    format!("{}", CLAIMS.fetch_add(1, Ordering::Relaxed))
}
