//! Events providers push to a connector (`POST /connectors/{id}/events`): no API key; the
//! provider's signature with the connector's `webhook_secret` authenticates each delivery
//! ([`engram_connectors::push`]). A verified delivery not seen before asks for a sync of the
//! connector, which the scheduler starts at once and which reads what changed from the
//! provider's cursor, as a scheduled sync does; scheduled syncs go on beside, catching what a
//! lost event missed.

use std::time::Duration;

use engram_connectors::oauth::Secret;
use engram_connectors::push::{PushError, PushRequest, SECRET_FIELD};
use engram_store::{ConnectorRecord, SyncLease, SyncRequest};
use serde_json::{Map, Value};

use crate::connectors::new_id;
use crate::{App, AppError, AppResult};

/// How long delivery ids are remembered to refuse replays.
const DELIVERIES_KEPT: Duration = Duration::from_secs(86_400);
/// How long keeping a provider's endpoint secret may hold the connector's lease.
const SECRET_LEASE: Duration = Duration::from_secs(30);
/// The largest event body read (GitHub caps its payloads at 25 MB; what engram needs is small).
pub const PUSH_MAX_BYTES: usize = 25 * 1024 * 1024;

/// What became of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReceived {
    pub connector_id: String,
    /// A sync was asked for.
    pub sync_run_id: Option<String>,
    pub message: String,
    /// The body the provider expects back (`Provider::push_answer`).
    pub answer: Option<serde_json::Value>,
}

impl App {
    /// Verifies and applies one delivery to connector `id`.
    pub async fn receive_push(
        &self,
        id: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> AppResult<PushReceived> {
        let not_found = || AppError::ConnectorNotFound(id.to_owned());
        let record = self
            .store()
            .connector_for_push(id)
            .await?
            .ok_or_else(not_found)?;
        let provider = self.catalog().get(&record.provider).ok_or_else(not_found)?;
        let credentials = self.open_credentials(&record).await?;
        let request = PushRequest {
            headers,
            body,
            now_unix: self.now().as_millis() / 1000,
        };
        if let Some(token) = provider.push_endpoint_secret(&request) {
            return self
                .keep_endpoint_secret(&record, &credentials, &token)
                .await;
        }
        let event = match provider.verify_push(&credentials, &request) {
            None => {
                return Err(AppError::ConnectorNotFound(format!(
                    "{id}: provider `{}` sends no events",
                    record.provider
                )))
            }
            Some(Err(PushError::Unsigned(reason) | PushError::Stale(reason))) => {
                tracing::warn!(connector = %id, reason = %reason, "a pushed event was refused");
                return Err(AppError::Unauthorized(
                    "the event's signature does not verify with the connector's webhook_secret, or it is too old",
                ));
            }
            Some(Err(PushError::Malformed(reason))) => {
                return Err(AppError::InvalidParameters(reason))
            }
            Some(Ok(event)) => event,
        };
        if let Some(answer) = provider.push_answer(&event, body) {
            // The provider checks the endpoint (Slack's url_verification): answered every time.
            return Ok(PushReceived {
                connector_id: record.id,
                sync_run_id: None,
                message: format!("`{}` answered", event.event),
                answer: Some(answer),
            });
        }
        let now = self.now();
        if !self
            .store()
            .note_delivery(
                &record.id,
                &event.delivery_id,
                now,
                now.before(DELIVERIES_KEPT),
            )
            .await?
        {
            return Ok(PushReceived {
                connector_id: record.id,
                sync_run_id: None,
                message: format!(
                    "delivery {} was received before: a replay, ignored",
                    event.delivery_id
                ),
                answer: None,
            });
        }
        if event.ping {
            return Ok(PushReceived {
                connector_id: record.id,
                sync_run_id: None,
                message: "the endpoint is reachable and the signature verifies".into(),
                answer: None,
            });
        }
        let queued = self
            .store()
            .request_sync(&record.org, &record.id, &new_id("run"), now)
            .await?;
        let (sync_run_id, message) = match queued {
            SyncRequest::Queued(run) => {
                self.inner.connectors.wake.notify_one();
                tracing::info!(connector = %record.id, event = %event.event, run = %run, "a pushed event asked for a sync");
                (
                    Some(run),
                    format!("`{}` event: a sync is queued", event.event),
                )
            }
            SyncRequest::Paused => (None, "the connector is paused: nothing synced".into()),
            SyncRequest::NoResources => (
                None,
                "the connector has no resources configured: nothing synced".into(),
            ),
            SyncRequest::NotFound => return Err(not_found()),
        };
        Ok(PushReceived {
            connector_id: record.id,
            sync_run_id,
            message,
            answer: None,
        })
    }
}

impl App {
    /// Keeps the signing secret a provider handed the endpoint (Notion's verification token) as
    /// the connector's `webhook_secret`, sealed, under the connector's lease so that no sync's
    /// token refresh writes over it. Refused when the connector keeps another secret already
    /// (a stranger cannot replace it; clearing it through the connector's update takes a new
    /// one), and answered 503 while a sync holds the lease (the provider's "resend" sends it
    /// again). The secret is never logged nor answered: the vault's reveal shows it.
    async fn keep_endpoint_secret(
        &self,
        record: &ConnectorRecord,
        credentials: &Map<String, Value>,
        token: &Secret,
    ) -> AppResult<PushReceived> {
        let kept = |message: &str| PushReceived {
            connector_id: record.id.clone(),
            sync_run_id: None,
            message: message.to_owned(),
            answer: None,
        };
        let reveal = format!(
            "read it with POST /credential-vault/{}/reveal (field `{SECRET_FIELD}`) and paste it \
             into the provider's verification",
            record.id
        );
        if let Some(current) = credentials.get(SECRET_FIELD).and_then(Value::as_str) {
            if engram_connectors::push::same_secret(current, token.expose()) {
                return Ok(kept(&format!(
                    "the verification token is the connector's webhook_secret already: {reveal}"
                )));
            }
            tracing::warn!(connector = %record.id, "a verification token was refused: the connector keeps another webhook_secret");
            return Err(AppError::Unauthorized(
                "the connector keeps another webhook_secret; to take a new verification token, \
                 update the connector's credentials without one first",
            ));
        }
        let Some(lease) = self
            .take_connector_lease(record, "secret", SECRET_LEASE)
            .await?
        else {
            return Err(AppError::Unavailable(
                "a sync of the connector is running; send the verification again in a minute"
                    .into(),
            ));
        };
        let kept_secret = self.kept_under_lease(record, &lease, token).await;
        self.store().release_lease(&lease).await?;
        kept_secret?;
        tracing::info!(connector = %record.id, provider = %record.provider, "the provider's verification token is kept as the connector's webhook_secret");
        Ok(kept(&format!(
            "the verification token is kept as the connector's webhook_secret: {reveal}"
        )))
    }

    /// The write of [`App::keep_endpoint_secret`], with the credentials read again under the
    /// lease.
    async fn kept_under_lease(
        &self,
        record: &ConnectorRecord,
        lease: &SyncLease,
        token: &Secret,
    ) -> AppResult<()> {
        let (_, mut credentials) = self.current_credentials(record).await?;
        if credentials.contains_key(SECRET_FIELD) {
            return Err(AppError::Unauthorized(
                "the connector keeps another webhook_secret; to take a new verification token, \
                 update the connector's credentials without one first",
            ));
        }
        credentials.insert(SECRET_FIELD.to_owned(), Value::from(token.expose()));
        let sealed = self.seal(&record.id, &credentials).await?;
        if !self
            .store()
            .replace_credentials(lease, &sealed, self.now())
            .await?
        {
            return Err(AppError::Unavailable(
                "the connector's lease was lost while keeping the verification token; send it \
                 again"
                    .into(),
            ));
        }
        Ok(())
    }
}
