//! The web console under `/console`: HTML pages rendered here (maud templates, htmx for the
//! parts that change without a reload) whose every read and action calls the same [`App`]
//! functions as the API, as the signed-in key, so its scopes and database restrictions hold.
//!
//! - **Sessions**: signing in with an API key sets a cookie holding the key, sealed with the
//!   credentials key (AES-256-GCM, bound to the console), with the time of its last request and
//!   a CSRF token. Every request opens it, ends it after `console.idle_timeout_ms` without a
//!   request of the user's (polls, marked `X-Console-Poll`, do not count) or
//!   `console.max_session_ms` after sign-in, and authenticates the key again (a revoked key ends
//!   the session; a rate limit or a store that is away answers as the API does, the session
//!   kept). The cookie has no expiry (it goes when the browser closes), is `HttpOnly` and
//!   `SameSite=Strict`; nothing of the key reaches the page, its scripts or `localStorage`. A
//!   session belongs to its tab: `console.js` marks the tab at sign-in (`sessionStorage`) and
//!   signs out from a signed-in page loaded in a tab without the mark.
//! - **State changes** are `POST`s that carry the session's CSRF token in `X-CSRF-Token` (htmx
//!   sends it from the page's `hx-headers`), compared in constant time; an `Origin` other than
//!   the console's (`console.public_origin`, or the request's scheme and host) or a cross-site
//!   `Sec-Fetch-Site` is refused first.
//! - **Headers**: a Content-Security-Policy allowing the console's own scripts and styles only
//!   (no inline script or style), `frame-ancestors 'none'`, `X-Frame-Options: DENY`,
//!   `nosniff`, no referrer sent to another site (`same-origin`: a form post then carries its
//!   `Origin`, which `no-referrer` would make `null`), pages never cached.

mod assets;
mod connectors;
mod graph;
mod memories;
mod operations;
mod pages;
mod search;
mod session;
mod webhooks;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use engram_app::App;
use maud::Markup;

use crate::error::ApiError;

/// The `hx-headers` of a polling element: marks its requests as polls
/// ([`session::POLL_HEADER`]), which do not keep an idle session open.
const POLL: &str = r#"{"X-Console-Poll": "1"}"#;

/// Where the console lives.
pub(crate) const PATH: &str = "/console";

/// The console's routes, or none when `console.enabled` is false.
pub(crate) fn routes(app: &App) -> Router<App> {
    if !app.config().console.enabled {
        return Router::new();
    }
    let signed_in = Router::new()
        .route(
            "/console/databases",
            get(pages::databases).post(pages::create_database),
        )
        .route("/console/databases/{database}", get(pages::database))
        .route(
            "/console/databases/{database}/delete",
            post(pages::delete_database),
        )
        .route(
            "/console/databases/{database}/items",
            get(pages::items_fragment),
        )
        .route("/console/databases/{database}/upload", post(pages::upload))
        .route("/console/databases/{database}/item", get(pages::item))
        .route(
            "/console/databases/{database}/item/status",
            get(pages::item_status),
        )
        .route(
            "/console/databases/{database}/item/delete",
            post(pages::delete_item),
        )
        .route("/console/databases/{database}/search", get(search::page))
        .route("/console/sign-out", post(session::sign_out))
        .merge(connectors::routes())
        .merge(webhooks::routes())
        .merge(operations::routes())
        .merge(memories::routes())
        .merge(graph::routes())
        .layer(from_fn_with_state(app.clone(), session::require));
    Router::new()
        .route("/console", get(session::sign_in_page))
        .route("/console/", get(session::sign_in_page))
        .route("/console/sign-in", post(session::sign_in))
        .route("/console/assets/{name}", get(assets::serve))
        .merge(signed_in)
        .layer(from_fn_with_state(app.clone(), same_origin))
        .layer(from_fn(headers))
}

/// The security headers of every console response, and the marker that keeps its HTML bodies
/// as they are (the API's error bodies are JSON).
async fn headers(request: Request, next: Next) -> Response {
    let htmx = request.headers().contains_key("hx-request");
    let mut response = whole_page(next.run(request).await, None, htmx);
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; \
             base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response.extensions_mut().insert(crate::envelope::Rendered);
    response
}

/// Refuses a state change sent from another site: an `Origin` other than the console's, or
/// `Sec-Fetch-Site: cross-site`. Together with the `SameSite=Strict` cookie and the CSRF token
/// of [`session::require`], and for the sign-in form, which has no session yet.
async fn same_origin(State(app): State<App>, request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::GET && request.method() != axum::http::Method::HEAD {
        let origin_ok = match request.headers().get(header::ORIGIN) {
            None => true,
            Some(origin) => origin.to_str().is_ok_and(|origin| {
                ours(
                    &app.config().console.public_origin,
                    origin,
                    request.headers(),
                )
            }),
        };
        let site_ok = request
            .headers()
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_none_or(|site| site == "same-origin" || site == "none");
        if !origin_ok || !site_ok {
            return refusal(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "a console action must come from the console's own pages",
            );
        }
    }
    next.run(request).await
}

/// Whether a request's `Origin` is the console's own: exactly `console.public_origin` when it is
/// set; otherwise the scheme the request came in with (`X-Forwarded-Proto`, or `http`, as
/// engram itself serves) and its `Host` or `X-Forwarded-Host` (a proxy's; a cross-site page
/// cannot set that header without a preflight the console never grants).
fn ours(public: &str, origin: &str, headers: &axum::http::HeaderMap) -> bool {
    if !public.is_empty() {
        return origin.eq_ignore_ascii_case(public);
    }
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let came_in = header("x-forwarded-proto")
        .and_then(|p| p.split(',').next())
        .map_or("http", str::trim);
    scheme.eq_ignore_ascii_case(came_in)
        && [header(header::HOST.as_str()), header("x-forwarded-host")]
            .into_iter()
            .flatten()
            .any(|host| host.eq_ignore_ascii_case(authority))
}

/// An HTML page.
fn html(markup: Markup) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// An error as a page (or, for htmx, a fragment it shows in place): the API's status, code and
/// message for the same failure.
fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    let mut response = html(pages::error_fragment(code, message));
    *response.status_mut() = status;
    response
        .extensions_mut()
        .insert(Refused(code.to_owned(), message.to_owned()));
    // htmx swaps error answers too, into the form's result area.
    response
        .headers_mut()
        .insert("hx-reswap", HeaderValue::from_static("innerHTML"));
    response
}

/// The code and message of a refusal, for [`headers`] to show as a whole page.
#[derive(Clone)]
struct Refused(String, String);

/// A refusal of a page the browser asked for itself (not htmx) as a whole page, with the
/// session's frame when there is one.
fn whole_page(mut response: Response, session: Option<&session::Session>, htmx: bool) -> Response {
    if htmx {
        return response;
    }
    match response.extensions_mut().remove::<Refused>() {
        Some(Refused(code, message)) => {
            let (parts, _) = response.into_parts();
            let page = html(pages::error_page(&code, &message, session));
            Response::from_parts(parts, page.into_body())
        }
        None => response,
    }
}

/// What a console handler returns: a page, or the API's error for the same call as HTML.
pub(crate) struct Failure(ApiError);

impl<E: Into<ApiError>> From<E> for Failure {
    fn from(err: E) -> Self {
        Self(err.into())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let parts = self.0 .0;
        let status = StatusCode::from_u16(parts.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        refusal(status, parts.code.as_str(), &parts.message)
    }
}

pub(crate) type Page = Result<Response, Failure>;

/// Longest form body a console page posts (uploads are multipart, read by [`crate::form::Form`]).
const FORM_MAX_BYTES: usize = 256 * 1024;

/// An `application/x-www-form-urlencoded` body.
pub(crate) struct UrlForm<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequest<S> for UrlForm<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, _: &S) -> Result<Self, Failure> {
        let bytes = axum::body::to_bytes(request.into_body(), FORM_MAX_BYTES)
            .await
            .map_err(|e| ApiError::invalid(format!("the form could not be read: {e}")))?;
        serde_html_form::from_bytes(&bytes)
            .map(Self)
            .map_err(|e| ApiError::invalid(format!("the form is malformed: {e}")).into())
    }
}
