//! Indexing webhooks: the `indexing.status_changed` payload, its signature, and the dispatcher
//! that works the delivery outbox.
//!
//! Every item that reaches a terminal state while its organization has a webhook gets an outbox
//! row in the same transaction (the store does that). The [`Dispatcher`] claims due rows with a
//! lease: new ones are sent at once (`pending`), failed ones when their backoff has passed and
//! those whose lease ran out (a crash mid-delivery) are swept up (`sweeping`). Each attempt ends
//! `delivered`, `failed` (another attempt scheduled with capped, jittered exponential backoff) or
//! `permanently_failed` after the last attempt. Bodies are rendered from the stored row, so every
//! attempt of one event sends the same bytes with the same delivery id; the signature is made at
//! send time with the secret in force then, so a rotation takes effect at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use engram_config::WebhooksConfig;
use engram_outbound::{Outbound, OutboundError, Url};
use engram_store::{
    ClaimedDelivery, DeliveryOutcome, DeliveryRecord, Store, StoreResult, WebhookRecord,
    INDEXING_STATUS_CHANGED,
};
use engram_types::clock::format_ms;
use engram_types::{Backoff, Clock, FailureCode, IndexingStatus, OrgId, UnixMs};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use engram_outbound::sign_sha256;

/// Header carrying the event's stable id.
pub const DELIVERY_ID_HEADER: &str = "X-Service-Delivery-ID";
/// Header carrying the event name.
pub const EVENT_HEADER: &str = "X-Service-Event";
/// Header carrying `sha256=<hex>` when signing is on.
pub const SIGNATURE_HEADER: &str = "X-Service-Signature";

/// The JSON body of a real event, rendered from its outbox row (the same bytes every attempt).
pub fn event_body(record: &DeliveryRecord) -> Vec<u8> {
    let mut body = Map::new();
    body.insert("event".into(), json!(record.event_type));
    body.insert("delivery_id".into(), json!(record.delivery_id));
    body.insert("id".into(), json!(record.item_id));
    // Older forms of the payload call the item id `doc_id`.
    body.insert("doc_id".into(), json!(record.item_id));
    body.insert("database".into(), json!(record.database_name));
    body.insert("collection".into(), json!(record.collection));
    // Deprecated names: `tenant_id` identifies the database (it is not its name).
    body.insert("tenant_id".into(), json!(record.database_id.as_str()));
    body.insert("sub_tenant_id".into(), json!(record.collection));
    body.insert("status".into(), json!(record.indexing_status.as_str()));
    body.insert("timestamp".into(), json!(format_ms(record.created_at)));
    if record.indexing_status == IndexingStatus::Errored {
        body.insert("error_code".into(), json!(record.item_error_code));
        body.insert("error_message".into(), json!(record.item_error_message));
    }
    to_bytes(body)
}

/// The synthetic body of a test delivery: every scope field is the organization id.
pub fn test_body(org: &OrgId, delivery_id: &str, now: UnixMs) -> Vec<u8> {
    let org = org.as_str();
    let body = json!({
        "event": INDEXING_STATUS_CHANGED,
        "delivery_id": delivery_id,
        "id": "test_document",
        "doc_id": "test_document",
        "database": org,
        "collection": org,
        "tenant_id": org,
        "sub_tenant_id": org,
        "status": IndexingStatus::Completed.as_str(),
        "timestamp": format_ms(now),
        "test": true,
    });
    let Value::Object(map) = body else {
        unreachable!("a json! object literal is an object")
    };
    to_bytes(map)
}

fn to_bytes(body: Map<String, Value>) -> Vec<u8> {
    // Serialising a map of strings and booleans cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The headers of one attempt. The signature covers the exact body bytes sent.
pub fn delivery_headers(
    delivery_id: &str,
    secret: Option<&str>,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (DELIVERY_ID_HEADER, delivery_id.to_owned()),
        (EVENT_HEADER, INDEXING_STATUS_CHANGED.to_owned()),
    ];
    if let Some(secret) = secret {
        headers.push((SIGNATURE_HEADER, sign_sha256(secret.as_bytes(), body)));
    }
    headers
}

/// How deliveries are attempted.
#[derive(Debug, Clone)]
pub struct DispatchOptions {
    /// Attempts before `permanently_failed`.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// How long the receiver has to answer.
    pub timeout: Duration,
    /// How long a claim lasts (longer than `timeout`).
    pub lease: Duration,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// How often the sweep looks for due retries and expired leases.
    pub sweep_every: Duration,
    /// How long finished deliveries stay in the history; `None` keeps them.
    pub retention: Option<Duration>,
}

impl From<&WebhooksConfig> for DispatchOptions {
    /// The `[webhooks]` configuration, the one source of these settings.
    fn from(config: &WebhooksConfig) -> Self {
        Self {
            max_attempts: config.max_attempts,
            backoff: Backoff {
                base: config.retry_base,
                max: config.retry_max,
                jitter: config.retry_jitter,
            },
            timeout: config.timeout,
            lease: config.lease,
            concurrency: config.concurrency as usize,
            sweep_every: config.sweep,
            retention: (config.retention_days > 0)
                .then(|| Duration::from_secs(u64::from(config.retention_days) * 86_400)),
        }
    }
}

/// How often finished deliveries past their retention are removed.
const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// The result of one send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    pub delivered: bool,
    /// The receiver's HTTP status; 0 when it never answered.
    pub status_code: u16,
    pub message: String,
}

/// Sends one body to a webhook, signed with its current secret.
pub async fn send(
    outbound: &Outbound,
    webhook: &WebhookRecord,
    delivery_id: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<u16, OutboundError> {
    let url =
        Url::parse(&webhook.url).map_err(|_| OutboundError::InvalidUrl(webhook.url.clone()))?;
    let headers = delivery_headers(delivery_id, webhook.signing_secret.as_deref(), &body);
    let answer = outbound.post_json(&url, &headers, body, timeout).await?;
    Ok(answer.status)
}

/// Sends the synthetic test event (not recorded in the history).
pub async fn send_test(
    outbound: &Outbound,
    webhook: &WebhookRecord,
    now: UnixMs,
    timeout: Duration,
) -> SendResult {
    let delivery_id = format!("test_{}", uuid::Uuid::new_v4().simple());
    let body = test_body(&webhook.org, &delivery_id, now);
    match send(outbound, webhook, &delivery_id, body, timeout).await {
        Ok(status) if (200..300).contains(&status) => SendResult {
            delivered: true,
            status_code: status,
            message: format!("test delivery accepted with HTTP {status}"),
        },
        Ok(status) => SendResult {
            delivered: false,
            status_code: status,
            message: format!("the receiver answered HTTP {status}"),
        },
        Err(err) => SendResult {
            delivered: false,
            status_code: 0,
            message: err.to_string(),
        },
    }
}

fn log_attempt(claimed: &ClaimedDelivery, outcome: &DeliveryOutcome) {
    let attempt = claimed.record.attempts + 1;
    let delivery_id = &claimed.record.delivery_id;
    match outcome {
        DeliveryOutcome::Delivered { status_code, .. } => {
            metrics::counter!("engram_webhook_attempts_total", "outcome" => "delivered")
                .increment(1);
            tracing::info!(%delivery_id, status_code, attempt, "webhook delivered")
        }
        DeliveryOutcome::Failed { code, retry_at, .. } => {
            metrics::counter!("engram_webhook_attempts_total", "outcome" => "failed").increment(1);
            tracing::warn!(%delivery_id, code, attempt, retry_at = retry_at.map(UnixMs::as_millis), "webhook delivery failed")
        }
    }
}

/// Works the delivery outbox: first sends, retries and crash recovery.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    outbound: Outbound,
    clock: Arc<dyn Clock>,
    options: DispatchOptions,
    owner: String,
}

/// Attempts recorded in one write transaction, at most; also the recorder's queue length.
const RECORD_BATCH: usize = 256;

impl Dispatcher {
    pub fn new(
        store: Arc<dyn Store>,
        outbound: Outbound,
        clock: Arc<dyn Clock>,
        options: DispatchOptions,
    ) -> Self {
        Self {
            store,
            outbound,
            clock,
            options,
            owner: format!("dispatcher_{}", uuid::Uuid::new_v4().simple()),
        }
    }

    /// Claims and sends until `token` is cancelled, then lets the sends in flight finish (each
    /// is bounded by the receiver time-out). `wake` is notified when new events are stored.
    pub async fn run(self: Arc<Self>, wake: Arc<Notify>, token: CancellationToken) {
        tracing::debug!(owner = %self.owner, "webhook dispatcher started");
        let permits = Arc::new(Semaphore::new(self.options.concurrency.max(1)));
        let mut in_flight = JoinSet::new();
        // Attempts are recorded by one task, many per transaction (group commit). The channel
        // is bounded: a send keeps its permit until the recorder has room, so a slow store
        // slows sending instead of piling up outcomes in memory.
        let (attempts, recorded) = mpsc::channel(RECORD_BATCH.max(self.options.concurrency));
        let recorder = tokio::spawn(self.clone().record(recorded));
        let mut next_purge = tokio::time::Instant::now();
        loop {
            if token.is_cancelled() {
                break;
            }
            if tokio::time::Instant::now() >= next_purge {
                next_purge += RETENTION_EVERY;
                self.purge_old().await;
            }
            while in_flight.try_join_next().is_some() {}
            let free = permits.available_permits();
            if free > 0 {
                match self.claim(free).await {
                    Ok(claimed) => {
                        let full = claimed.len() == free;
                        let webhooks = self.webhooks_of(&claimed).await;
                        for delivery in claimed {
                            let Ok(permit) = permits.clone().acquire_owned().await else {
                                break;
                            };
                            let webhook = webhooks.get(&delivery.record.org).cloned().flatten();
                            let (me, wake, attempts) =
                                (self.clone(), wake.clone(), attempts.clone());
                            in_flight.spawn(async move {
                                let outcome =
                                    me.attempt(&delivery.record, webhook.as_deref()).await;
                                let _ = attempts.send((delivery, outcome)).await;
                                drop(permit);
                                wake.notify_one();
                            });
                        }
                        if full {
                            // More may be due; claim again once a permit frees up.
                            continue;
                        }
                    }
                    Err(err) => tracing::error!(error = %err, "claiming webhook deliveries failed"),
                }
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = wake.notified() => {}
                () = tokio::time::sleep(self.options.sweep_every) => {}
            }
        }
        while in_flight.join_next().await.is_some() {}
        drop(attempts);
        let _ = recorder.await;
        tracing::debug!(owner = %self.owner, "webhook dispatcher stopped");
    }

    /// Removes finished deliveries older than the retention, a bounded batch at a time.
    async fn purge_old(&self) {
        const BATCH: u32 = 10_000;
        let Some(retention) = self.options.retention else {
            return;
        };
        let before = self.clock.now().before(retention);
        loop {
            match self.store.purge_deliveries(before, BATCH).await {
                Ok(removed) => {
                    if removed > 0 {
                        tracing::info!(removed, "removed deliveries past their retention");
                    }
                    if removed < u64::from(BATCH) {
                        break;
                    }
                }
                Err(err) => {
                    tracing::error!(error = %err, "removing old deliveries failed");
                    break;
                }
            }
        }
    }

    async fn claim(&self, limit: usize) -> StoreResult<Vec<ClaimedDelivery>> {
        self.store
            .claim_deliveries(
                &self.owner,
                self.clock.now(),
                self.options.lease,
                u32::try_from(limit).unwrap_or(u32::MAX),
            )
            .await
    }

    /// The current registration of each organization among `claimed`, read when they are
    /// claimed, right before they are sent (so a rotated secret signs them at once).
    async fn webhooks_of(
        &self,
        claimed: &[ClaimedDelivery],
    ) -> HashMap<OrgId, Option<Arc<WebhookRecord>>> {
        let mut webhooks = HashMap::new();
        for delivery in claimed {
            let org = &delivery.record.org;
            if webhooks.contains_key(org) {
                continue;
            }
            match self.store.webhook(org).await {
                Ok(found) => {
                    webhooks.insert(org.clone(), found.map(Arc::new));
                }
                // Not inserted: its deliveries fail this attempt and are retried.
                Err(err) => tracing::error!(error = %err, "reading the webhook failed"),
            }
        }
        webhooks
    }

    /// Records attempts as they finish, as many per transaction as have arrived.
    async fn record(
        self: Arc<Self>,
        mut finished: mpsc::Receiver<(ClaimedDelivery, DeliveryOutcome)>,
    ) {
        let mut batch = Vec::new();
        while finished.recv_many(&mut batch, RECORD_BATCH).await > 0 {
            for (claimed, outcome) in &batch {
                log_attempt(claimed, outcome);
            }
            match self.store.finish_deliveries(&batch, self.clock.now()).await {
                Ok(done) => {
                    for ((claimed, _), written) in batch.iter().zip(done) {
                        if !written {
                            tracing::warn!(
                                delivery_id = %claimed.record.delivery_id,
                                "webhook claim lost before its attempt was recorded; the sweep owns it now"
                            );
                        }
                    }
                }
                // The leases run out and the sweep sends these again (at least once).
                Err(err) => tracing::error!(error = %err, "recording webhook attempts failed"),
            }
            batch.clear();
        }
    }

    /// One attempt to the organization's current webhook (`None`: none registered).
    async fn attempt(
        &self,
        record: &DeliveryRecord,
        webhook: Option<&WebhookRecord>,
    ) -> DeliveryOutcome {
        let Some(webhook) = webhook else {
            return self.failed(
                record,
                FailureCode::WebhookNotRegistered,
                "no webhook is registered for the organization".into(),
                None,
                record.webhook_url.clone(),
            );
        };
        let body = event_body(record);
        let sent = send(
            &self.outbound,
            webhook,
            &record.delivery_id,
            body,
            self.options.timeout,
        )
        .await;
        let url = webhook.url.clone();
        match sent {
            Ok(status) if (200..300).contains(&status) => DeliveryOutcome::Delivered {
                status_code: status,
                url,
            },
            Ok(status) => self.failed(
                record,
                FailureCode::ReceiverError,
                format!("the receiver answered HTTP {status}"),
                Some(status),
                url,
            ),
            Err(err) => self.failed(record, err.code(), err.to_string(), None, url),
        }
    }

    /// A failed attempt: retried after the backoff, or final after the last attempt.
    fn failed(
        &self,
        record: &DeliveryRecord,
        code: FailureCode,
        message: String,
        status_code: Option<u16>,
        url: String,
    ) -> DeliveryOutcome {
        let attempts = record.attempts.saturating_add(1);
        let retry_at = (attempts < self.options.max_attempts).then(|| {
            let delay = self.options.backoff.delay(attempts, rand::random::<f64>());
            self.clock.now().after(delay)
        });
        DeliveryOutcome::Failed {
            code: code.as_str().to_owned(),
            message,
            status_code,
            url,
            retry_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engram_types::{DatabaseId, DeliveryStatus, UnixMs};

    fn record(status: IndexingStatus) -> DeliveryRecord {
        DeliveryRecord {
            key: 1,
            delivery_id: "dlv_1".into(),
            org: OrgId::from_trusted("org_1"),
            database_id: DatabaseId::from_trusted("db_0f3a"),
            database_name: "docs".into(),
            collection: "alice".into(),
            item_id: "notes".into(),
            event_type: INDEXING_STATUS_CHANGED.into(),
            indexing_status: status,
            item_error_code: "E2002".into(),
            item_error_message: "no text".into(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: UnixMs::from_millis(0),
            last_status_code: None,
            error_code: None,
            error_message: None,
            webhook_url: String::new(),
            created_at: UnixMs::from_millis(1_700_000_000_000),
            updated_at: UnixMs::from_millis(1_700_000_000_000),
        }
    }

    #[test]
    fn event_bodies_carry_the_spec_fields() {
        let body: Value =
            serde_json::from_slice(&event_body(&record(IndexingStatus::Completed))).unwrap();
        assert_eq!(
            body,
            json!({
                "event": "indexing.status_changed", "delivery_id": "dlv_1", "id": "notes",
                "doc_id": "notes", "database": "docs", "collection": "alice", "tenant_id": "db_0f3a",
                "sub_tenant_id": "alice", "status": "completed",
                "timestamp": "2023-11-14T22:13:20Z"
            })
        );
        let errored: Value =
            serde_json::from_slice(&event_body(&record(IndexingStatus::Errored))).unwrap();
        assert_eq!(errored["status"], "errored");
        assert_eq!(errored["error_code"], "E2002");
        assert_eq!(errored["error_message"], "no text");
        assert_eq!(
            event_body(&record(IndexingStatus::Completed)),
            event_body(&record(IndexingStatus::Completed)),
            "every attempt sends the same bytes"
        );
    }

    #[test]
    fn test_bodies_are_synthetic() {
        let org = OrgId::from_trusted("org_9");
        let body: Value =
            serde_json::from_slice(&test_body(&org, "test_1", UnixMs::from_millis(0))).unwrap();
        for field in ["database", "collection", "tenant_id", "sub_tenant_id"] {
            assert_eq!(body[field], "org_9");
        }
        assert_eq!(body["id"], "test_document");
        assert_eq!(body["doc_id"], "test_document");
        assert_eq!(body["test"], true);
        assert_eq!(body["status"], "completed");
    }

    #[test]
    fn the_signature_header_is_present_only_with_a_secret() {
        let unsigned = delivery_headers("dlv_1", None, b"{}");
        assert!(unsigned.iter().all(|(name, _)| *name != SIGNATURE_HEADER));
        let signed = delivery_headers("dlv_1", Some("0123456789abcdef"), b"{}");
        let (_, value) = signed
            .iter()
            .find(|(name, _)| *name == SIGNATURE_HEADER)
            .unwrap();
        assert_eq!(value, &sign_sha256(b"0123456789abcdef", b"{}"));
        assert!(value.starts_with("sha256=") && value.len() == 7 + 64);
    }
}

/// The dispatcher against a real receiver on loopback, with a clock the test moves.
#[cfg(test)]
mod dispatch_tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use engram_outbound::AddressPolicy;
    use engram_store::conformance::{chunk, claim_ours, item, setup};
    use engram_store::{DeliveryQuery, ItemStore, SecretChange, WebhookStore, WorkQueue};
    use engram_testkit::{ManualClock, TempStore};
    use engram_types::DeliveryStatus;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// Answers each request with the next status of `script` (then 200), and keeps what came.
    async fn receiver(script: Vec<u16>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            let mut script = script.into_iter();
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Headers, then as many body bytes as Content-Length says.
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (name, value) = l.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length || n == 0 {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&request).to_lowercase());
                let status = script.next().unwrap_or(200);
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (url, seen)
    }

    fn delivery_id(request: &str) -> String {
        request
            .lines()
            .find_map(|l| l.strip_prefix("x-service-delivery-id:"))
            .unwrap()
            .trim()
            .to_owned()
    }

    #[tokio::test]
    async fn a_failed_delivery_is_retried_after_its_backoff_with_the_same_id() {
        let kit = TempStore::new().await;
        let clock = ManualClock::at(1_000_000);
        let (url, seen) = receiver(vec![500]).await;
        let scope = setup(kit.store.as_ref(), "db_dispatch", "org-dispatch").await;
        kit.store
            .put_webhook(
                &scope.org,
                &url,
                &[INDEXING_STATUS_CHANGED.to_owned()],
                SecretChange::Keep,
                UnixMs::from_millis(0),
            )
            .await
            .unwrap();
        kit.store
            .enqueue_items(
                &scope,
                &[item("c", "a", "text")],
                true,
                UnixMs::from_millis(0),
            )
            .await
            .unwrap();
        let claimed = claim_ours(kit.store.as_ref(), &scope, "w", clock.now()).await;
        assert!(kit
            .store
            .complete_item(
                &claimed[0],
                &[chunk("a-0", 0, "text")],
                engram_store::AfterChunks::Completed,
                clock.now()
            )
            .await
            .unwrap());

        let outbound = Outbound::new(AddressPolicy {
            allow_private: true,
        })
        .unwrap();
        let options = DispatchOptions::from(&engram_config::WebhooksConfig::default());
        let backoff_ms = i64::try_from(options.backoff.base.as_millis()).unwrap();
        let dispatcher = Arc::new(Dispatcher::new(
            kit.store.clone(),
            outbound,
            clock.clone(),
            options,
        ));
        let (wake, token) = (Arc::new(Notify::new()), CancellationToken::new());
        let running = tokio::spawn(dispatcher.run(wake.clone(), token.clone()));
        let history = || async {
            let query = DeliveryQuery {
                status: None,
                before: None,
                limit: 10,
            };
            kit.store.list_deliveries(&scope.org, &query).await.unwrap()
        };
        let until = |n: usize| {
            let seen = seen.clone();
            async move {
                for _ in 0..500 {
                    if seen.lock().unwrap().len() >= n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("the receiver never got request {n}");
            }
        };
        until(1).await;
        for _ in 0..500 {
            if history().await[0].status == DeliveryStatus::Failed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let failed = &history().await[0];
        assert_eq!(failed.status, DeliveryStatus::Failed);
        assert_eq!(failed.error_code.as_deref(), Some("RECEIVER_ERROR"));
        assert_eq!(failed.last_status_code, Some(500));
        assert!(
            failed.next_attempt_at > clock.now(),
            "retried later, not now"
        );

        // Nothing more before the backoff ends, however often the dispatcher is woken.
        for _ in 0..5 {
            wake.notify_one();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen.lock().unwrap().len(), 1);

        clock.advance(backoff_ms);
        wake.notify_one();
        until(2).await;
        token.cancel();
        running.await.unwrap();
        let requests = seen.lock().unwrap().clone();
        assert_eq!(
            delivery_id(&requests[0]),
            delivery_id(&requests[1]),
            "one id per event"
        );
        let delivered = &history().await[0];
        assert_eq!(delivered.status, DeliveryStatus::Delivered);
        assert_eq!(delivered.attempts, 2);
    }
}
