//! The organization's indexing webhook and its delivery outbox. Delivery rows are written by
//! the work queue in the same transaction as an item's terminal state (see
//! [`WorkQueue::complete_item`](crate::WorkQueue::complete_item) and
//! [`WorkQueue::fail_item`](crate::WorkQueue::fail_item)); the dispatcher claims them with a
//! lease, like indexing jobs, so a crash mid-delivery is recovered by the sweep.

use async_trait::async_trait;
use engram_types::{DatabaseId, DeliveryStatus, IndexingStatus, OrgId, UnixMs};
use std::time::Duration;

use crate::backend::{Backend, Sql, SqlStore};
use crate::error::corrupt;
use crate::rows::Columns as _;
use crate::{ClaimedItem, StoreResult};

/// The one event type.
pub const INDEXING_STATUS_CHANGED: &str = "indexing.status_changed";

/// A registered webhook. `signing_secret` is for signing only: never returned to clients.
#[derive(Clone, PartialEq)]
pub struct WebhookRecord {
    pub org: OrgId,
    pub url: String,
    pub event_types: Vec<String>,
    pub signing_secret: Option<String>,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

impl std::fmt::Debug for WebhookRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRecord")
            .field("org", &self.org)
            .field("url", &self.url)
            .field("event_types", &self.event_types)
            .field(
                "signing_secret",
                &self.signing_secret.as_ref().map(|_| "<set>"),
            )
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .finish()
    }
}

/// What a registration does to the signing secret.
#[derive(Clone, PartialEq)]
pub enum SecretChange {
    /// Keep the current secret (none on a first registration).
    Keep,
    Set(String),
}

impl std::fmt::Debug for SecretChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keep => f.write_str("Keep"),
            Self::Set(_) => f.write_str("Set(<secret>)"),
        }
    }
}

/// One event's delivery, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    /// Order of creation; the history's cursor.
    pub key: i64,
    pub delivery_id: String,
    pub org: OrgId,
    pub database_id: DatabaseId,
    pub database_name: String,
    pub collection: String,
    pub item_id: String,
    pub event_type: String,
    pub indexing_status: IndexingStatus,
    /// The item's failure, when it `errored`.
    pub item_error_code: String,
    pub item_error_message: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    pub next_attempt_at: UnixMs,
    /// HTTP status of the last answer, if there was one.
    pub last_status_code: Option<u16>,
    /// Why the last attempt failed.
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Where the last attempt went.
    pub webhook_url: String,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

/// A page of the delivery history, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryQuery {
    pub status: Option<DeliveryStatus>,
    /// Only deliveries older than this key (the cursor).
    pub before: Option<i64>,
    pub limit: u32,
}

/// A delivery a dispatcher holds a lease on.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedDelivery {
    pub record: DeliveryRecord,
    /// Identifies this claim; only its holder may record the attempt.
    pub lease: String,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryOutcome {
    Delivered {
        status_code: u16,
        url: String,
    },
    Failed {
        code: String,
        message: String,
        status_code: Option<u16>,
        url: String,
        /// `Some(t)`: `failed`, retried at `t`. `None`: `permanently_failed`.
        retry_at: Option<UnixMs>,
    },
}

/// What a manual retry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    Queued,
    NotFound,
    /// The delivery is in a state that may not be retried by hand.
    NotRetryable(DeliveryStatus),
}

/// Webhook registration and delivery history, scoped by organization.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Registers (or replaces) the organization's webhook.
    async fn put_webhook(
        &self,
        org: &OrgId,
        url: &str,
        event_types: &[String],
        secret: SecretChange,
        now: UnixMs,
    ) -> StoreResult<WebhookRecord>;
    async fn webhook(&self, org: &OrgId) -> StoreResult<Option<WebhookRecord>>;
    /// Removes the webhook and its secret; false when none was registered.
    async fn delete_webhook(&self, org: &OrgId) -> StoreResult<bool>;
    /// Sets or clears the signing secret; false when no webhook is registered.
    async fn set_signing_secret(
        &self,
        org: &OrgId,
        secret: Option<&str>,
        now: UnixMs,
    ) -> StoreResult<bool>;
    async fn list_deliveries(
        &self,
        org: &OrgId,
        query: &DeliveryQuery,
    ) -> StoreResult<Vec<DeliveryRecord>>;
    async fn delivery(&self, org: &OrgId, delivery_id: &str)
        -> StoreResult<Option<DeliveryRecord>>;
    /// Queues a `failed` or `permanently_failed` delivery for another attempt now.
    async fn requeue_delivery(
        &self,
        org: &OrgId,
        delivery_id: &str,
        now: UnixMs,
    ) -> StoreResult<Requeue>;
}

/// The delivery queue, worked by dispatchers across organizations.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Leases up to `limit` due deliveries: new `pending` ones stay `pending` (the first send);
    /// due `failed` ones and those whose lease expired (a crash mid-delivery) become `sweeping`.
    async fn claim_deliveries(
        &self,
        owner: &str,
        now: UnixMs,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>>;
    /// Records attempts in one transaction: each only if its claim is still held. One flag per
    /// attempt, in order: false when the claim was lost (nothing written for it).
    async fn finish_deliveries(
        &self,
        attempts: &[(ClaimedDelivery, DeliveryOutcome)],
        now: UnixMs,
    ) -> StoreResult<Vec<bool>>;
    /// Records one attempt if the claim is still held; false (and nothing written) otherwise.
    async fn finish_delivery(
        &self,
        claimed: &ClaimedDelivery,
        outcome: &DeliveryOutcome,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let done = self
            .finish_deliveries(&[(claimed.clone(), outcome.clone())], now)
            .await?;
        Ok(done.first().copied().unwrap_or(false))
    }
    /// Deletes up to `limit` `delivered` and `permanently_failed` deliveries last updated
    /// before `before` (the history's retention); returns how many.
    async fn purge_deliveries(&self, before: UnixMs, limit: u32) -> StoreResult<u64>;
}

/// Writes the outbox row of an item's terminal state, inside the transaction that stores the
/// state, when the item's organization has a webhook. Nothing is written otherwise.
pub(crate) async fn record_event<B: Backend>(
    tx: &mut B::Connection,
    item: &ClaimedItem,
    status: IndexingStatus,
    error_code: &str,
    error_message: &str,
    now: UnixMs,
) -> StoreResult<()> {
    let insert = Sql::new(format!(
        "INSERT INTO webhook_deliveries (delivery_id, org_id, database_id, database_name, collection, item_id,
             event_type, indexing_status, item_error_code, item_error_message, status, attempts, next_attempt_at,
             webhook_url, created_at, updated_at)
         SELECT 'dlv_' || {}, w.org_id, d.id, d.name, $1, $2, $3, $4, $5, $6, 'pending', 0, $7, w.url, $7, $7
         FROM webhooks w JOIN databases d ON d.id = $8 AND d.org_id = w.org_id
         WHERE w.org_id = $9",
        B::RANDOM_HEX
    ))
    .bind(item.collection.as_str())
    .bind(&item.id)
    .bind(INDEXING_STATUS_CHANGED)
    .bind(status.as_str())
    .bind(error_code)
    .bind(error_message)
    .bind(now)
    .bind(item.database_id.as_str())
    .bind(item.org.as_str());
    B::execute(tx, insert).await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> WebhookStore for SqlStore<B> {
    async fn put_webhook(
        &self,
        org: &OrgId,
        url: &str,
        event_types: &[String],
        secret: SecretChange,
        now: UnixMs,
    ) -> StoreResult<WebhookRecord> {
        let (set_secret, secret) = match secret {
            SecretChange::Keep => (false, None),
            SecretChange::Set(secret) => (true, Some(secret)),
        };
        let row = self
            .one(
                Sql::new(
                    "INSERT INTO webhooks (org_id, url, event_types, signing_secret, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $5)
                     ON CONFLICT (org_id) DO UPDATE SET url = excluded.url, event_types = excluded.event_types,
                         signing_secret = CASE WHEN $6 THEN excluded.signing_secret ELSE webhooks.signing_secret END,
                         updated_at = excluded.updated_at
                     RETURNING *",
                )
                .bind(org.as_str())
                .bind(url)
                .bind(serde_json::json!(event_types))
                .bind(secret)
                .bind(now)
                .bind(set_secret),
            )
            .await?;
        crate::rows::webhook(&row)
    }

    async fn webhook(&self, org: &OrgId) -> StoreResult<Option<WebhookRecord>> {
        self.optional(Sql::new("SELECT * FROM webhooks WHERE org_id = $1").bind(org.as_str()))
            .await?
            .as_ref()
            .map(crate::rows::webhook)
            .transpose()
    }

    async fn delete_webhook(&self, org: &OrgId) -> StoreResult<bool> {
        let deleted = self
            .run(Sql::new("DELETE FROM webhooks WHERE org_id = $1").bind(org.as_str()))
            .await?;
        Ok(deleted == 1)
    }

    async fn set_signing_secret(
        &self,
        org: &OrgId,
        secret: Option<&str>,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let updated = self
            .run(
                Sql::new(
                    "UPDATE webhooks SET signing_secret = $1, updated_at = $2 WHERE org_id = $3",
                )
                .bind(secret)
                .bind(now)
                .bind(org.as_str()),
            )
            .await?;
        Ok(updated == 1)
    }

    async fn list_deliveries(
        &self,
        org: &OrgId,
        query: &DeliveryQuery,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let mut sql = Sql::new("SELECT * FROM webhook_deliveries WHERE org_id = ");
        sql.push_bind(org.as_str());
        if let Some(status) = query.status {
            sql.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(before) = query.before {
            sql.push(" AND delivery_key < ").push_bind(before);
        }
        sql.push(" ORDER BY delivery_key DESC LIMIT ")
            .push_bind(query.limit);
        let rows = self.all(sql).await?;
        rows.iter().map(crate::rows::delivery).collect()
    }

    async fn delivery(
        &self,
        org: &OrgId,
        delivery_id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        self.optional(
            Sql::new("SELECT * FROM webhook_deliveries WHERE org_id = $1 AND delivery_id = $2")
                .bind(org.as_str())
                .bind(delivery_id),
        )
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
        let mut tx = B::begin_write(&self.pool).await?;
        let read = Sql::new(format!(
            "SELECT status FROM webhook_deliveries WHERE org_id = $1 AND delivery_id = $2{}",
            B::FOR_UPDATE
        ))
        .bind(org.as_str())
        .bind(delivery_id);
        let Some(row) = B::fetch_optional(&mut tx, read).await? else {
            return Ok(Requeue::NotFound);
        };
        let status = row.text("status")?;
        let status = DeliveryStatus::parse(&status)
            .ok_or_else(|| corrupt("webhook_deliveries.status", &status))?;
        if !status.is_retryable() {
            return Ok(Requeue::NotRetryable(status));
        }
        let requeue = Sql::new(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $1, lease_owner = NULL,
                 lease_until = NULL, updated_at = $1
             WHERE org_id = $2 AND delivery_id = $3",
        )
        .bind(now)
        .bind(org.as_str())
        .bind(delivery_id);
        B::execute(&mut tx, requeue).await?;
        tx.commit().await?;
        Ok(Requeue::Queued)
    }
}

#[async_trait]
impl<B: Backend> DeliveryQueue for SqlStore<B> {
    async fn claim_deliveries(
        &self,
        owner: &str,
        now: UnixMs,
        lease: Duration,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        let lease_owner = format!("{owner}:{}", claim_number());
        let claim = Sql::new(format!(
            "UPDATE webhook_deliveries
             SET status = CASE WHEN status = 'pending' AND lease_owner IS NULL THEN 'pending' ELSE 'sweeping' END,
                 lease_owner = $1, lease_until = $2, updated_at = $3
             WHERE delivery_key IN (
                 SELECT delivery_key FROM webhook_deliveries
                 WHERE status IN ('pending', 'sweeping', 'failed') AND next_attempt_at <= $3
                   AND (lease_owner IS NULL OR lease_until <= $3)
                 ORDER BY next_attempt_at, delivery_key LIMIT $4{})
             RETURNING *",
            B::SKIP_LOCKED
        ))
        .bind(&lease_owner)
        .bind(now.after(lease))
        .bind(now)
        .bind(limit);
        let mut tx = B::begin_write(&self.pool).await?;
        let rows = B::fetch_all(&mut tx, claim).await?;
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
        let mut tx = B::begin_write(&self.pool).await?;
        let mut done = Vec::with_capacity(attempts.len());
        for (claimed, outcome) in attempts {
            let written = B::execute(&mut tx, finish(claimed, outcome, now)).await?;
            done.push(written == 1);
        }
        tx.commit().await?;
        Ok(done)
    }

    async fn purge_deliveries(&self, before: UnixMs, limit: u32) -> StoreResult<u64> {
        self.run(
            Sql::new(
                "DELETE FROM webhook_deliveries WHERE delivery_key IN (
                     SELECT delivery_key FROM webhook_deliveries
                     WHERE status IN ('delivered', 'permanently_failed') AND updated_at < $1
                     LIMIT $2)",
            )
            .bind(before)
            .bind(limit),
        )
        .await
    }
}

/// The statement recording one attempt, guarded by the claim's lease.
fn finish(claimed: &ClaimedDelivery, outcome: &DeliveryOutcome, now: UnixMs) -> Sql {
    let sql = match outcome {
        DeliveryOutcome::Delivered { status_code, url } => Sql::new(
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
        } => Sql::new(
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
    sql.bind(now).bind(claimed.record.key).bind(&claimed.lease)
}

/// Numbers this process's claims, so each claim's lease is distinct (owners are unique).
fn claim_number() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CLAIMS: AtomicU64 = AtomicU64::new(0);
    format!("{}", CLAIMS.fetch_add(1, Ordering::Relaxed))
}
