//! The organization's indexing webhook: registration, signing secrets, test deliveries, the
//! delivery history and manual retries. Deliveries themselves are made by the dispatcher
//! (`engram-webhooks`), started with the other background workers.
//!
//! A webhook receives the events of every database of the organization, so only keys that are
//! not restricted to some databases may manage it or read its history.

use engram_store::{
    DeliveryQuery, DeliveryRecord, Requeue, SecretChange, WebhookRecord, INDEXING_STATUS_CHANGED,
};
use engram_types::{limits, DeliveryStatus};
use rand::RngCore;

use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// Shortest signing secret accepted.
pub(crate) const SIGNING_SECRET_MIN: usize = limits::SIGNING_SECRET_MIN_CHARS;
/// Longest signing secret accepted.
pub(crate) const SIGNING_SECRET_MAX: usize = 256;
/// Default and largest page of the delivery history.
pub const DELIVERIES_LIMIT_DEFAULT: u32 = 20;
pub const DELIVERIES_LIMIT_MAX: u32 = 100;

/// A registration request as given.
#[derive(Debug, Clone, Default)]
pub struct RegisterWebhook {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub signing_secret: Option<String>,
    pub generate_signing_secret: bool,
}

/// The registration as clients may read it (never the secret).
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookView {
    pub url: String,
    pub event_types: Vec<String>,
    pub signing_secret_configured: bool,
}

impl From<&WebhookRecord> for WebhookView {
    fn from(record: &WebhookRecord) -> Self {
        Self {
            url: record.url.clone(),
            event_types: record.event_types.clone(),
            signing_secret_configured: record.signing_secret.is_some(),
        }
    }
}

/// The result of a registration: the view, and the secret when this call generated it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registered {
    pub webhook: WebhookView,
    pub generated_secret: Option<String>,
}

/// A page of the delivery history.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryPage {
    pub deliveries: Vec<DeliveryRecord>,
    pub next_cursor: Option<String>,
}

/// What the test delivery did.
pub use engram_webhooks::SendResult as TestDelivery;

/// A fresh signing secret: 32 random bytes, hex, with a recognisable prefix.
fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("whsec_{hex}")
}

fn check_secret(secret: &str) -> AppResult<()> {
    let chars = secret.chars().count();
    if chars < SIGNING_SECRET_MIN {
        return Err(AppError::Validation(format!(
            "`signing_secret` must be at least {SIGNING_SECRET_MIN} characters"
        )));
    }
    if chars > SIGNING_SECRET_MAX || secret.chars().any(char::is_control) {
        return Err(AppError::Validation(format!(
            "`signing_secret` must be at most {SIGNING_SECRET_MAX} printable characters"
        )));
    }
    Ok(())
}

fn check_event_types(event_types: Option<Vec<String>>) -> AppResult<Vec<String>> {
    let Some(event_types) = event_types else {
        return Ok(vec![INDEXING_STATUS_CHANGED.to_owned()]);
    };
    if event_types.is_empty() {
        return Err(AppError::Validation(format!(
            "`event_types` must name at least one event; the only one is `{INDEXING_STATUS_CHANGED}`"
        )));
    }
    if let Some(other) = event_types.iter().find(|e| *e != INDEXING_STATUS_CHANGED) {
        return Err(AppError::Validation(format!(
            "unknown event type `{other}`; the only one is `{INDEXING_STATUS_CHANGED}`"
        )));
    }
    Ok(vec![INDEXING_STATUS_CHANGED.to_owned()])
}

/// The history cursor: the key of the last delivery of the page, opaque to clients.
fn encode_cursor(key: i64) -> String {
    format!("dc_{key}")
}

fn decode_cursor(cursor: &str) -> AppResult<i64> {
    cursor
        .strip_prefix("dc_")
        .and_then(|key| key.parse::<i64>().ok())
        .filter(|key| *key > 0)
        .ok_or_else(|| {
            AppError::InvalidParameters(
                "`cursor` is not a cursor this service returned; pass back `next_cursor`".into(),
            )
        })
}

impl App {
    /// The delivery worker, configured from `[webhooks]`.
    pub(crate) fn webhook_dispatcher(&self) -> std::sync::Arc<engram_webhooks::Dispatcher> {
        let options = engram_webhooks::DispatchOptions::from(&self.config().webhooks);
        std::sync::Arc::new(engram_webhooks::Dispatcher::new(
            self.inner.store.clone(),
            self.inner.outbound.clone(),
            self.inner.clock.clone(),
            options,
        ))
    }

    fn authorize_webhooks(&self, who: &Principal) -> AppResult<()> {
        who.require(Scope::Admin)?;
        if who.databases.is_some() {
            return Err(AppError::Forbidden(
                "webhooks report on every database of the organization; this API key is restricted to some databases".into(),
            ));
        }
        Ok(())
    }

    async fn registered_webhook(&self, who: &Principal) -> AppResult<WebhookRecord> {
        self.store()
            .webhook(&who.org)
            .await?
            .ok_or(AppError::WebhookNotFound)
    }

    /// Registers or replaces the organization's webhook. Omitting a secret keeps the current one.
    pub async fn register_webhook(
        &self,
        who: &Principal,
        request: RegisterWebhook,
    ) -> AppResult<Registered> {
        self.authorize_webhooks(who)?;
        let url = request
            .url
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| AppError::InvalidParameters("`url` is required".into()))?;
        if url.chars().count() > limits::WEBHOOK_URL_MAX_CHARS {
            return Err(AppError::InvalidParameters(format!(
                "`url` is longer than {} characters",
                limits::WEBHOOK_URL_MAX_CHARS
            )));
        }
        if request.signing_secret.is_some() && request.generate_signing_secret {
            return Err(AppError::Validation(
                "send either `signing_secret` or `generate_signing_secret`, not both".into(),
            ));
        }
        let event_types = check_event_types(request.event_types)?;
        if let Some(secret) = &request.signing_secret {
            check_secret(secret)?;
        }
        let url = self
            .inner
            .outbound
            .check_url(url.trim())
            .await
            .map_err(|e| AppError::Validation(format!("`url` is not allowed: {e}")))?;
        let generated = request.generate_signing_secret.then(generate_secret);
        let change = match generated.clone().or(request.signing_secret) {
            Some(secret) => SecretChange::Set(secret),
            None => SecretChange::Keep,
        };
        let record = self
            .store()
            .put_webhook(&who.org, url.as_str(), &event_types, change, self.now())
            .await?;
        tracing::info!(org = %who.org, host = url.host_str().unwrap_or_default(), "webhook registered");
        Ok(Registered {
            webhook: WebhookView::from(&record),
            generated_secret: generated,
        })
    }

    /// The registration, if any.
    pub async fn webhook(&self, who: &Principal) -> AppResult<Option<WebhookView>> {
        self.authorize_webhooks(who)?;
        Ok(self
            .store()
            .webhook(&who.org)
            .await?
            .as_ref()
            .map(WebhookView::from))
    }

    /// Removes the webhook and discards its secret; false when none was registered.
    pub async fn delete_webhook(&self, who: &Principal) -> AppResult<bool> {
        self.authorize_webhooks(who)?;
        Ok(self.store().delete_webhook(&who.org).await?)
    }

    /// Sets the given secret, or generates one (returned, once). Takes effect at once.
    pub async fn set_signing_secret(
        &self,
        who: &Principal,
        own: Option<String>,
    ) -> AppResult<Option<String>> {
        self.authorize_webhooks(who)?;
        if let Some(secret) = &own {
            check_secret(secret)?;
        }
        let generated = own.is_none().then(generate_secret);
        let secret = own.or_else(|| generated.clone());
        if !self
            .store()
            .set_signing_secret(&who.org, secret.as_deref(), self.now())
            .await?
        {
            return Err(AppError::WebhookNotFound);
        }
        Ok(generated)
    }

    /// Turns signing off: deliveries lose the signature header.
    pub async fn clear_signing_secret(&self, who: &Principal) -> AppResult<()> {
        self.authorize_webhooks(who)?;
        if !self
            .store()
            .set_signing_secret(&who.org, None, self.now())
            .await?
        {
            return Err(AppError::WebhookNotFound);
        }
        Ok(())
    }

    /// Sends the synthetic test event now; it is not recorded in the history.
    pub async fn test_webhook(&self, who: &Principal) -> AppResult<TestDelivery> {
        self.authorize_webhooks(who)?;
        let webhook = self.registered_webhook(who).await?;
        let timeout = self.config().webhooks.timeout;
        Ok(engram_webhooks::send_test(&self.inner.outbound, &webhook, self.now(), timeout).await)
    }

    /// One page of the delivery history, newest first.
    pub async fn list_deliveries(
        &self,
        who: &Principal,
        limit: Option<u32>,
        status: Option<&str>,
        cursor: Option<&str>,
    ) -> AppResult<DeliveryPage> {
        self.authorize_webhooks(who)?;
        let limit = limit.unwrap_or(DELIVERIES_LIMIT_DEFAULT);
        if !(1..=DELIVERIES_LIMIT_MAX).contains(&limit) {
            return Err(AppError::InvalidParameters(format!(
                "`limit` must be between 1 and {DELIVERIES_LIMIT_MAX}"
            )));
        }
        let status = status
            .map(|s| {
                DeliveryStatus::parse(s).ok_or_else(|| {
                    let names: Vec<&str> = DeliveryStatus::ALL.iter().map(|s| s.as_str()).collect();
                    AppError::InvalidParameters(format!(
                        "`status` must be one of {}",
                        names.join(", ")
                    ))
                })
            })
            .transpose()?;
        let before = cursor.map(decode_cursor).transpose()?;
        let query = DeliveryQuery {
            status,
            before,
            // One more than asked tells whether another page exists.
            limit: limit + 1,
        };
        let mut deliveries = self.store().list_deliveries(&who.org, &query).await?;
        let more = deliveries.len() > limit as usize;
        deliveries.truncate(limit as usize);
        let next_cursor = more
            .then(|| deliveries.last().map(|d| encode_cursor(d.key)))
            .flatten();
        Ok(DeliveryPage {
            deliveries,
            next_cursor,
        })
    }

    /// One delivery of the organization's history.
    pub async fn delivery(&self, who: &Principal, delivery_id: &str) -> AppResult<DeliveryRecord> {
        self.authorize_webhooks(who)?;
        self.store()
            .delivery(&who.org, delivery_id)
            .await?
            .ok_or_else(|| AppError::DeliveryNotFound(delivery_id.to_owned()))
    }

    /// Queues a `failed` or `permanently_failed` delivery for another attempt, signed with the
    /// secret in force when it is sent.
    pub async fn retry_delivery(&self, who: &Principal, delivery_id: &str) -> AppResult<()> {
        self.authorize_webhooks(who)?;
        match self
            .store()
            .requeue_delivery(&who.org, delivery_id, self.now())
            .await?
        {
            Requeue::Queued => {
                self.inner.webhook_wake.notify_one();
                Ok(())
            }
            Requeue::NotFound => Err(AppError::DeliveryNotFound(delivery_id.to_owned())),
            Requeue::NotRetryable(status) => Err(AppError::DeliveryNotRetryable {
                id: delivery_id.to_owned(),
                status: status.as_str(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_forgeries() {
        assert_eq!(decode_cursor(&encode_cursor(42)).unwrap(), 42);
        for bad in ["", "42", "dc_", "dc_x", "dc_-1", "dc_0"] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn generated_secrets_are_long_and_distinct() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_") && a.len() == 6 + 64);
        assert!(check_secret(&a).is_ok());
        assert!(check_secret("short").is_err());
        assert!(check_secret("0123456789abcde").is_err(), "15 characters");
        assert!(check_secret("0123456789abcdef").is_ok(), "16 characters");
    }

    #[test]
    fn only_the_one_event_type_is_accepted() {
        assert_eq!(check_event_types(None).unwrap(), [INDEXING_STATUS_CHANGED]);
        assert!(check_event_types(Some(vec![])).is_err());
        assert!(check_event_types(Some(vec!["indexing.started".into()])).is_err());
        assert_eq!(
            check_event_types(Some(vec![INDEXING_STATUS_CHANGED.into(); 2])).unwrap(),
            [INDEXING_STATUS_CHANGED]
        );
    }
}

#[cfg(test)]
mod cursor_tests {
    use super::{decode_cursor, encode_cursor};

    proptest::proptest! {
        /// A cursor this service returned reads back as its key; anything else is refused.
        #[test]
        fn cursors_round_trip_and_nothing_else_is_one(key in 1i64.., junk in "\\PC{0,24}") {
            proptest::prop_assert_eq!(decode_cursor(&encode_cursor(key)).ok(), Some(key));
            let decoded = decode_cursor(&junk);
            if let Ok(key) = decoded {
                proptest::prop_assert_eq!(encode_cursor(key), junk);
            }
        }
    }
}
