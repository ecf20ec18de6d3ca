//! Events providers push to a connector (`POST /connectors/{id}/events`): no API key; the
//! provider's signature with the connector's `webhook_secret` authenticates each delivery
//! ([`engram_connectors::push`]). A verified delivery not seen before asks for a sync of the
//! connector, which the scheduler starts at once and which reads what changed from the
//! provider's cursor, as a scheduled sync does; scheduled syncs go on beside, catching what a
//! lost event missed.

use std::time::Duration;

use engram_connectors::push::{PushError, PushRequest};
use engram_store::SyncRequest;

use crate::connectors::new_id;
use crate::{App, AppError, AppResult};

/// How long delivery ids are remembered to refuse replays.
const DELIVERIES_KEPT: Duration = Duration::from_secs(86_400);
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
