//! The organization's indexing webhook and its delivery outbox. Delivery rows are written by
//! the work queue in the same transaction as an item's terminal state (see
//! [`WorkQueue::complete_item`](crate::WorkQueue::complete_item) and
//! [`WorkQueue::fail_item`](crate::WorkQueue::fail_item)); the dispatcher claims them with a
//! lease, like indexing jobs, so a crash mid-delivery is recovered by the sweep.

use async_trait::async_trait;
use engram_types::{DatabaseId, DeliveryStatus, IndexingStatus, OrgId, UnixMs};
use std::time::Duration;

use crate::StoreResult;

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
