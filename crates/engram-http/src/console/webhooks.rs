//! The console's webhooks page: the organization's endpoint (its URL, events, whether a signing
//! secret is set; never a secret), registering, replacing and deleting it, a test event, the
//! recent deliveries (status, attempts, the last error, times; page by page) with a retry for
//! failed ones, and a delivery's detail. Every read and action is the [`App`] call the API's
//! `/webhooks/indexing*` handlers make, as the session's key: only an admin key not restricted
//! to some databases may see or change any of it.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Extension, Router};
use engram_app::{App, DeliveryRecord, DeliveryStatus, RegisterWebhook, WebhookView};
use engram_types::limits;
use maud::{html, Markup};
use serde::Deserialize;

use super::pages::{error_fragment, layout, time, urlencoding};
use super::session::{to, Session};
use super::{html as page_response, Page};
use crate::error::ApiError;

/// Deliveries per page of the history.
const PER_PAGE: u32 = 20;
/// The one event type (the API's default).
const EVENT: &str = "indexing.status_changed";
/// The history refreshes itself this often while its first page is shown.
const REFRESH: &str = "every 3s";

/// The webhooks routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/console/webhooks", get(page).post(register))
        .route("/console/webhooks/delete", post(delete))
        .route("/console/webhooks/test", post(test))
        .route("/console/webhooks/deliveries", get(deliveries_fragment))
        .route("/console/webhooks/deliveries/{id}", get(delivery))
        .route("/console/webhooks/deliveries/{id}/retry", post(retry))
}

/// The history's filters: `GET /webhooks/indexing/deliveries`'s `status` and `cursor`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct HistoryQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    cursor: String,
}

impl HistoryQuery {
    fn status(&self) -> Option<&str> {
        Some(self.status.as_str()).filter(|s| !s.is_empty())
    }

    fn cursor(&self) -> Option<&str> {
        Some(self.cursor.as_str()).filter(|c| !c.is_empty())
    }

    fn href(&self, path: &str, cursor: Option<&str>) -> String {
        format!(
            "{path}?status={}&cursor={}",
            urlencoding(&self.status),
            urlencoding(cursor.unwrap_or_default())
        )
    }
}

/// Whether the key may manage the webhook: `Ok(None)` is a key that may not (the API's 403,
/// shown as a notice), an error anything else.
async fn registration(
    app: &App,
    session: &Session,
) -> Result<Result<Option<WebhookView>, ApiError>, ApiError> {
    match app.webhook(&session.who).await {
        Ok(view) => Ok(Ok(view)),
        Err(err) => {
            let err = ApiError::from(err);
            if err.0.code.http_status() == 403 {
                Ok(Err(err))
            } else {
                Err(err)
            }
        }
    }
}

async fn page(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Query(query): Query<HistoryQuery>,
) -> Page {
    let view = match registration(&app, &session).await? {
        Ok(view) => view,
        Err(refused) => {
            return Ok(page_response(layout(
                "Webhooks",
                Some(&session),
                html! {
                    p { "The organization's webhook reports every database's indexing, so only an admin key that is not restricted to some databases may see or change it." }
                    (error_fragment(refused.0.code.as_str(), &refused.0.message))
                },
            )))
        }
    };
    let history = history(&app, &session, &query).await?;
    Ok(page_response(layout(
        "Webhooks",
        Some(&session),
        html! {
            p class="hint" {
                "engram posts an " code { (EVENT) } " event to this endpoint each time an item of any of the organization's databases finishes indexing (completed or errored), retrying failed attempts with back-off."
            }
            h2 { "Endpoint" }
            @if let Some(view) = &view {
                dl class="facts" id="endpoint" {
                    dt { "URL" } dd { code { (view.url) } }
                    dt { "Events" } dd { @for event in &view.event_types { code { (event) } " " } }
                    dt { "Signing" } dd {
                        @if view.signing_secret_configured {
                            "a signing secret is set (deliveries carry " code { "X-Service-Signature" } ")"
                        } @else {
                            "no signing secret (deliveries are not signed)"
                        }
                    }
                }
                form method="post" action="/console/webhooks/test" hx-post="/console/webhooks/test" hx-target="#test-result" class="card" {
                    p class="hint" { "A synthetic event, sent now; it is not kept in the history." }
                    button type="submit" { "Send test event" }
                    div id="test-result" aria-live="polite" {}
                }
            } @else {
                p id="endpoint" { "No endpoint is registered." }
                h2 { "Register an endpoint" }
                (register_form(None))
            }
            h2 { "Recent deliveries" }
            form method="get" action="/console/webhooks" class="filters" hx-get="/console/webhooks/deliveries" hx-target="#deliveries" {
                label for="d-status" { "Status" }
                select id="d-status" name="status" {
                    option value="" { "any" }
                    @for status in DeliveryStatus::ALL {
                        option value=(status.as_str()) selected[query.status == status.as_str()] { (status.as_str().replace('_', " ")) }
                    }
                }
                button type="submit" { "Filter" }
            }
            div id="deliveries" { (history) }
            @if let Some(view) = &view {
                h2 { "Replace the endpoint" }
                (register_form(Some(view)))
                h2 { "Delete the endpoint" }
                form method="post" action="/console/webhooks/delete" hx-post="/console/webhooks/delete" hx-target="#delete-result" hx-confirm="Delete the webhook and its signing secret?" class="card danger" {
                    p class="hint" { "Events are no longer sent; the history stays." }
                    button type="submit" class="danger" { "Delete endpoint" }
                    div id="delete-result" aria-live="polite" {}
                }
            }
        },
    )))
}

fn register_form(view: Option<&WebhookView>) -> Markup {
    let signed = view.is_some_and(|v| v.signing_secret_configured);
    html! {
        form method="post" action="/console/webhooks" hx-post="/console/webhooks" hx-target="#register-result" class="card" {
            label for="w-url" { "Endpoint URL" }
            input id="w-url" name="url" type="url" required maxlength=(limits::WEBHOOK_URL_MAX_CHARS) value=[view.map(|v| v.url.as_str())] placeholder="https://example.com/hooks/engram" aria-describedby="w-url-hint";
            p id="w-url-hint" class="hint" { "Public HTTPS; private and loopback addresses only where the service allows them." }
            fieldset {
                legend { "Events" }
                input id="w-event" name="event_types" type="checkbox" value=(EVENT) checked;
                label for="w-event" { code { (EVENT) } " (an item finished indexing)" }
            }
            fieldset {
                legend { "Signing secret" }
                @if view.is_some() {
                    div {
                        input id="w-keep" name="signing" type="radio" value="keep" checked;
                        label for="w-keep" { @if signed { "Keep the current secret" } @else { "Keep unsigned" } }
                    }
                }
                div {
                    input id="w-own" name="signing" type="radio" value="own";
                    label for="w-own" { "Set this secret" }
                }
                @if view.is_none() || signed {
                    div {
                        input id="w-off" name="signing" type="radio" value="off" checked[view.is_none()];
                        label for="w-off" { @if signed { "Turn signing off" } @else { "No signing" } }
                    }
                }
                label for="w-secret" { "Secret (at least 16 characters; never shown again)" }
                input id="w-secret" name="signing_secret" type="password" autocomplete="new-password" minlength="16";
            }
            button type="submit" { @if view.is_some() { "Replace endpoint" } @else { "Register endpoint" } }
            div id="register-result" aria-live="polite" {}
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct RegisterForm {
    #[serde(default)]
    url: String,
    /// The checked event boxes (none checked: none, which the API refuses as it would).
    #[serde(default)]
    event_types: Vec<String>,
    /// `keep`, `own` or `off`.
    #[serde(default)]
    signing: String,
    #[serde(default)]
    signing_secret: String,
}

/// Registers or replaces the endpoint: `POST /webhooks/indexing` with the form's URL, events and
/// secret (kept, set, or, after registering, turned off as `DELETE .../signing-secret` does).
async fn register(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
    super::UrlForm(form): super::UrlForm<RegisterForm>,
) -> Page {
    if !form.signing_secret.is_empty() && form.signing != "own" {
        return Err(ApiError::invalid(
            "a secret was typed: choose \"Set this secret\" to use it, or clear it",
        )
        .into());
    }
    let secret = match form.signing.as_str() {
        "" | "keep" | "off" => None,
        "own" if form.signing_secret.is_empty() => {
            return Err(ApiError::invalid("type the signing secret to set").into())
        }
        "own" => Some(form.signing_secret),
        other => return Err(ApiError::invalid(format!("unknown signing choice `{other}`")).into()),
    };
    let registered = app
        .register_webhook(
            &session.who,
            RegisterWebhook {
                url: Some(form.url),
                event_types: Some(form.event_types),
                signing_secret: secret,
                generate_signing_secret: false,
            },
        )
        .await?;
    if form.signing == "off" && registered.webhook.signing_secret_configured {
        app.clear_signing_secret(&session.who).await?;
    }
    Ok(to("/console/webhooks", &headers))
}

async fn delete(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
) -> Page {
    app.delete_webhook(&session.who).await?;
    Ok(to("/console/webhooks", &headers))
}

/// Sends the test event (`POST /webhooks/indexing/test`) and says what the endpoint answered.
async fn test(State(app): State<App>, Extension(session): Extension<Session>) -> Page {
    let result = app.test_webhook(&session.who).await?;
    Ok(page_response(html! {
        @if result.delivered {
            p role="status" data-delivered="true" {
                span class="badge completed" { "delivered" }
                " The endpoint answered HTTP " (result.status_code) "."
            }
        } @else {
            p role="status" data-delivered="false" class="error" {
                span class="badge errored" { "not delivered" } " "
                @if result.status_code > 0 { "HTTP " (result.status_code) ": " }
                (result.message)
            }
        }
    }))
}

async fn deliveries_fragment(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Query(query): Query<HistoryQuery>,
) -> Page {
    Ok(page_response(history(&app, &session, &query).await?))
}

/// One page of the history (`GET /webhooks/indexing/deliveries`), refreshing itself while it is
/// the newest page.
async fn history(app: &App, session: &Session, query: &HistoryQuery) -> Result<Markup, ApiError> {
    let page = app
        .list_deliveries(&session.who, Some(PER_PAGE), query.status(), query.cursor())
        .await?;
    let newest = query.cursor().is_none();
    let refresh = newest.then(|| query.href("/console/webhooks/deliveries", None));
    Ok(html! {
        div hx-get=[refresh] hx-trigger=[newest.then_some(REFRESH)] hx-headers=[newest.then_some(super::POLL)] hx-swap="outerHTML" hx-target="this" {
            @if page.deliveries.is_empty() {
                p class="hint" { "No delivery" @if query.status().is_some() { " in this state" } " yet." }
            } @else {
                table id="delivery-list" {
                    caption class="visually-hidden" { "Webhook deliveries, newest first" }
                    thead { tr {
                        th scope="col" { "Delivery" } th scope="col" { "Item" } th scope="col" { "Item status" }
                        th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Last answer" }
                        th scope="col" { "Created" } th scope="col" { "Updated" } th scope="col" { span class="visually-hidden" { "Actions" } }
                    } }
                    tbody {
                        @for d in &page.deliveries {
                            tr data-delivery=(d.delivery_id) data-status=(d.status.as_str()) {
                                td { a href=(delivery_href(&d.delivery_id)) { code { (d.delivery_id) } } }
                                td { (d.database_name) " / " (item_link(d)) }
                                td { (d.indexing_status.as_str()) }
                                td { (delivery_badge(d.status)) }
                                td class="num" { (d.attempts) }
                                td { (last_answer(d)) }
                                td { (time(d.created_at)) }
                                td { (time(d.updated_at)) }
                                td { @if retryable(d.status) { (retry_form(d, "list")) } }
                            }
                        }
                    }
                }
            }
            nav class="pager" aria-label="Delivery pages" {
                @if !newest {
                    a href=(query.href("/console/webhooks", None)) { "← Newest" }
                }
                @if newest { span class="hint" { "Refreshing every 3 seconds" } }
                @if let Some(next) = &page.next_cursor {
                    a href=(query.href("/console/webhooks", Some(next))) rel="next" { "Older →" }
                }
            }
        }
    })
}

fn delivery_href(id: &str) -> String {
    format!("/console/webhooks/deliveries/{}", urlencoding(id))
}

/// The delivery's item, linked to its page in the console.
fn item_link(d: &DeliveryRecord) -> Markup {
    let href = super::pages::database_name(&d.database_name)
        .ok()
        .map(|db| super::pages::item_path(&db, &d.collection, &d.item_id, ""));
    html! {
        @if let Some(href) = href { a href=(href) { (d.item_id) } } @else { (d.item_id) }
    }
}

fn retryable(status: DeliveryStatus) -> bool {
    matches!(
        status,
        DeliveryStatus::Failed | DeliveryStatus::PermanentlyFailed
    )
}

/// A delivery's state, in the console's badge colours.
fn delivery_badge(status: DeliveryStatus) -> Markup {
    let tone = match status {
        DeliveryStatus::Delivered => "completed",
        DeliveryStatus::Failed | DeliveryStatus::PermanentlyFailed => "errored",
        DeliveryStatus::Pending | DeliveryStatus::Sweeping => "queued",
    };
    html! { span class={ "badge " (tone) } { (status.as_str().replace('_', " ")) } }
}

/// The last attempt's HTTP status and error, if any.
fn last_answer(d: &DeliveryRecord) -> Markup {
    html! {
        @if let Some(code) = d.last_status_code { "HTTP " (code) }
        @if let Some(error) = &d.error_code {
            @if d.last_status_code.is_some() { " · " }
            code { (error) }
        }
        @if let Some(message) = &d.error_message {
            " " span class="error" { (message) }
        }
    }
}

fn retry_form(d: &DeliveryRecord, from: &str) -> Markup {
    let action = format!("{}/retry", delivery_href(&d.delivery_id));
    let result = format!("retry-{}", d.key);
    html! {
        form method="post" action=(action) hx-post=(action) hx-target={ "#" (result) } hx-swap="innerHTML" {
            input type="hidden" name="from" value=(from);
            button type="submit" aria-label={ "Retry delivery " (d.delivery_id) } { "Retry" }
            span id=(result) aria-live="polite" {}
        }
    }
}

async fn delivery(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
) -> Page {
    let d = app.delivery(&session.who, &id).await?;
    Ok(page_response(layout(
        &format!("Delivery {}", d.delivery_id),
        Some(&session),
        html! {
            p { a href="/console/webhooks" { "← Webhooks" } }
            dl class="facts" id="delivery" data-status=(d.status.as_str()) {
                dt { "Status" } dd { (delivery_badge(d.status)) }
                dt { "Attempts" } dd { (d.attempts) }
                @if d.status == DeliveryStatus::Failed {
                    dt { "Next attempt" } dd { (time(d.next_attempt_at)) }
                }
                dt { "Last answer" } dd { (last_answer(&d)) }
                dt { "Event" } dd { code { (d.event_type) } }
                dt { "Item" } dd {
                    (item_link(&d)) " in " (d.database_name) " / " (d.collection)
                }
                dt { "Indexing status" } dd {
                    (d.indexing_status.as_str())
                    @if !d.item_error_code.is_empty() || !d.item_error_message.is_empty() {
                        " " code { (d.item_error_code) } " " span class="error" { (d.item_error_message) }
                    }
                }
                dt { "Sent to" } dd { code { (d.webhook_url) } }
                dt { "Created" } dd { (time(d.created_at)) }
                dt { "Updated" } dd { (time(d.updated_at)) }
            }
            @if retryable(d.status) {
                h2 { "Retry" }
                div class="card" {
                    p class="hint" { "Queues another attempt, to the registered endpoint, signed with the current secret." }
                    (retry_form(&d, "detail"))
                }
            }
        },
    )))
}

#[derive(Debug, Deserialize)]
pub(super) struct RetryForm {
    #[serde(default)]
    from: String,
}

/// Queues a failed delivery again (`POST .../deliveries/{id}/retry`); from its page, the page
/// again, from the list, a note in place (the list's refresh shows the new state).
async fn retry(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
    super::UrlForm(form): super::UrlForm<RetryForm>,
) -> Page {
    app.retry_delivery(&session.who, &id).await?;
    if form.from == "detail" {
        return Ok(to(&delivery_href(&id), &headers));
    }
    Ok(page_response(html! { " queued" }))
}
