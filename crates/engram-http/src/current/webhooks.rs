//! Webhook routes: `/webhooks/indexing*`. Successful responses are plain objects (the spec's
//! documented contract for webhook management); errors use the current error envelope.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use engram_app::App;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::webhooks_wire::*;
use crate::envelope::{plain, plain_noting, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery};
use crate::wire::Ignored;

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(register_webhook, get_webhook, delete_webhook))
        .routes(routes!(set_signing_secret, clear_signing_secret))
        .routes(routes!(test_webhook))
        .routes(routes!(list_deliveries))
        .routes(routes!(get_delivery))
        .routes(routes!(retry_delivery))
}

/// Register the organization's webhook, replacing any earlier one. Omitting `signing_secret`
/// keeps the current secret.
#[utoipa::path(post, path = "/webhooks/indexing", tag = "webhooks", security(("bearer" = ["admin"])), request_body = RegisterWebhookRequest,
    responses(
        (status = 201, body = RegisteredWebhook, description = "registered"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: `url` missing or a field of the wrong type"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the key is restricted to some databases"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: URL not public HTTPS, secret shorter than 16 characters, both secret options, unknown event type"),
    ))]
async fn register_webhook(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<RegisterWebhookRequest>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let registered = app.register_webhook(&who, body.into()).await?;
    Ok(plain_noting(
        StatusCode::CREATED,
        RegisteredWebhook::from(registered),
        &ignored,
    ))
}

/// The registration (never the secret).
#[utoipa::path(get, path = "/webhooks/indexing", tag = "webhooks", security(("bearer" = ["admin"])),
    responses((status = 200, body = WebhookState)))]
async fn get_webhook(State(app): State<App>, Auth(who): Auth) -> Result<Response, ApiError> {
    let view = app.webhook(&who).await?;
    Ok(plain(StatusCode::OK, WebhookState::from(view)))
}

/// Remove the webhook; its secret is discarded.
#[utoipa::path(delete, path = "/webhooks/indexing", tag = "webhooks", security(("bearer" = ["admin"])),
    responses((status = 200, body = WebhookDeleted)))]
async fn delete_webhook(State(app): State<App>, Auth(who): Auth) -> Result<Response, ApiError> {
    let deleted = app.delete_webhook(&who).await?;
    let message = if deleted {
        "webhook deleted"
    } else {
        "no webhook was registered"
    };
    Ok(plain(
        StatusCode::OK,
        WebhookDeleted {
            deleted,
            message: message.into(),
        },
    ))
}

/// Generate a signing secret (no body), or set your own (`{signing_secret}`, at least 16
/// characters). Takes effect at once, for deliveries in flight too.
#[utoipa::path(post, path = "/webhooks/indexing/signing-secret", tag = "webhooks", security(("bearer" = ["admin"])), request_body = SigningSecretRequest,
    responses(
        (status = 200, body = SigningSecretSet),
        (status = 404, body = ErrorEnvelopeDoc, description = "WEBHOOK_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: secret shorter than 16 characters"),
    ))]
async fn set_signing_secret(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<SigningSecretRequest>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let generated = app.set_signing_secret(&who, body.signing_secret).await?;
    let message = match &generated {
        Some(_) => "signing secret generated; store it now, it is not shown again",
        None => "signing secret set",
    };
    Ok(plain_noting(
        StatusCode::OK,
        SigningSecretSet {
            generated: generated.is_some(),
            signing_secret: generated,
            message: message.into(),
        },
        &ignored,
    ))
}

/// Turn signing off: deliveries lose the signature header.
#[utoipa::path(delete, path = "/webhooks/indexing/signing-secret", tag = "webhooks", security(("bearer" = ["admin"])),
    responses(
        (status = 200, body = SigningDisabled),
        (status = 404, body = ErrorEnvelopeDoc, description = "WEBHOOK_NOT_FOUND"),
    ))]
async fn clear_signing_secret(
    State(app): State<App>,
    Auth(who): Auth,
) -> Result<Response, ApiError> {
    app.clear_signing_secret(&who).await?;
    Ok(plain(
        StatusCode::OK,
        SigningDisabled {
            signing_secret_configured: false,
            message: "signing disabled; deliveries carry no signature header".into(),
        },
    ))
}

/// Send a synthetic `indexing.status_changed` event now (absent from the history).
#[utoipa::path(post, path = "/webhooks/indexing/test", tag = "webhooks", security(("bearer" = ["admin"])),
    responses(
        (status = 200, body = TestDeliveryResult),
        (status = 404, body = ErrorEnvelopeDoc, description = "WEBHOOK_NOT_FOUND"),
    ))]
async fn test_webhook(State(app): State<App>, Auth(who): Auth) -> Result<Response, ApiError> {
    let result = app.test_webhook(&who).await?;
    Ok(plain(
        StatusCode::OK,
        TestDeliveryResult {
            delivered: result.delivered,
            status_code: result.status_code,
            message: result.message,
        },
    ))
}

/// The delivery history, newest first, one page at a time.
#[utoipa::path(get, path = "/webhooks/indexing/deliveries", tag = "webhooks", security(("bearer" = ["admin"])), params(DeliveriesParams),
    responses(
        (status = 200, body = DeliveryList),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: limit, status or cursor"),
    ))]
async fn list_deliveries(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<DeliveriesParams>,
) -> Result<Response, ApiError> {
    let (status, cursor) = (params.status.as_deref(), params.cursor.as_deref());
    let page = app
        .list_deliveries(&who, params.limit, status, cursor)
        .await?;
    Ok(plain_noting(
        StatusCode::OK,
        DeliveryList::from(&page),
        &ignored,
    ))
}

/// One delivery by id.
#[utoipa::path(get, path = "/webhooks/indexing/deliveries/{delivery_id}", tag = "webhooks", security(("bearer" = ["admin"])),
    params(("delivery_id" = String, Path)),
    responses(
        (status = 200, body = DeliveryDto),
        (status = 404, body = ErrorEnvelopeDoc, description = "DELIVERY_NOT_FOUND"),
    ))]
async fn get_delivery(
    State(app): State<App>,
    Auth(who): Auth,
    Path(delivery_id): Path<String>,
) -> Result<Response, ApiError> {
    let delivery = app.delivery(&who, &delivery_id).await?;
    Ok(plain(StatusCode::OK, DeliveryDto::from(&delivery)))
}

/// Queue a `failed` or `permanently_failed` delivery for another attempt, signed with the
/// current secret.
#[utoipa::path(post, path = "/webhooks/indexing/deliveries/{delivery_id}/retry", tag = "webhooks", security(("bearer" = ["admin"])),
    params(("delivery_id" = String, Path)),
    responses(
        (status = 200, body = RetryQueued),
        (status = 404, body = ErrorEnvelopeDoc, description = "DELIVERY_NOT_FOUND"),
        (status = 409, body = ErrorEnvelopeDoc, description = "DELIVERY_NOT_RETRYABLE: not failed or permanently_failed"),
    ))]
async fn retry_delivery(
    State(app): State<App>,
    Auth(who): Auth,
    Path(delivery_id): Path<String>,
) -> Result<Response, ApiError> {
    app.retry_delivery(&who, &delivery_id).await?;
    Ok(plain(
        StatusCode::OK,
        RetryQueued {
            message: "delivery queued for another attempt".into(),
            delivery_id,
            queued: true,
        },
    ))
}
