//! Console sessions: sign-in with an API key, the sealed cookie, the idle end, the CSRF token.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use engram_app::{App, Principal};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::{html, pages, refusal, Failure, Page};

/// The session cookie's name.
const COOKIE: &str = "engram_console";
/// A session's last-request time is written again once it is this old (ms, or half the idle
/// timeout when that is shorter), not on every request.
const TOUCH_MS: i64 = 30_000;
/// The header the console's polling elements send (`hx-headers`): a poll is not the user's
/// activity, so it does not keep an idle session open.
pub(super) const POLL_HEADER: &str = "x-console-poll";
/// Longest key a sign-in form may carry.
const KEY_MAX: usize = 512;

/// What the sealed cookie holds.
#[derive(Serialize, Deserialize)]
struct Sealed {
    /// The API key, as given at sign-in.
    k: String,
    /// The time of the session's last request (Unix ms, the service's clock).
    s: i64,
    /// The CSRF token.
    c: String,
    /// When the session was signed in (Unix ms): it ends `console.max_session_ms` later.
    #[serde(default)]
    i: i64,
}

/// The signed-in caller of a console request.
#[derive(Clone)]
pub(crate) struct Session {
    pub who: Principal,
    /// The token state changes must carry.
    pub csrf: String,
}

/// The sign-in page, or the databases when a session is open.
pub(super) async fn sign_in_page(State(app): State<App>, headers: HeaderMap) -> Page {
    if open(&app, &headers).await?.is_some() {
        return Ok(Redirect::to("/console/databases").into_response());
    }
    Ok(html(pages::sign_in(None)))
}

#[derive(Deserialize)]
pub(super) struct SignIn {
    key: String,
}

/// Signs in with an API key: the key is authenticated as the API does, then sealed into the
/// session cookie.
pub(super) async fn sign_in(
    State(app): State<App>,
    headers: HeaderMap,
    super::UrlForm(form): super::UrlForm<SignIn>,
) -> Page {
    let key = form.key.trim();
    if key.is_empty() || key.len() > KEY_MAX {
        return Ok(unauthorized("enter an API key (from `engram keys create`)"));
    }
    match app.authenticate(key).await {
        Ok(_) => {}
        Err(engram_app::AppError::Unauthorized(_)) => {
            return Ok(unauthorized(
                "this key is not valid (unknown, revoked or expired)",
            ))
        }
        // A rate limit or a store that is away is not a wrong key: the API's answer for it.
        Err(e) => return Err(e.into()),
    }
    let now = app.now().as_millis();
    let sealed = Sealed {
        k: key.to_owned(),
        s: now,
        c: token(),
        i: now,
    };
    let cookie = seal(&app, &sealed, secure(&app, &headers)).await?;
    let mut response = to("/console/databases", &headers);
    response.headers_mut().append(header::SET_COOKIE, cookie);
    Ok(response)
}

fn unauthorized(message: &str) -> Response {
    let mut response = html(pages::sign_in(Some(message)));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
}

/// Ends the session: the cookie is cleared.
pub(super) async fn sign_out(State(app): State<App>, headers: HeaderMap) -> Response {
    let mut response = to("/console", &headers);
    response
        .headers_mut()
        .append(header::SET_COOKIE, clear(secure(&app, &headers)));
    response
}

/// The session of every signed-in route: an open, unexpired session whose key still
/// authenticates; a state change must carry its CSRF token. Without one the browser is sent to
/// the sign-in page; when the key cannot be checked now (rate limited, store away) the API's
/// answer for that, and the session stays. The cookie is written again as the user (not a poll)
/// uses the session. A refused poll answers 286, which stops htmx polling.
pub(super) async fn require(State(app): State<App>, request: Request, next: Next) -> Response {
    let poll = request.headers().contains_key(POLL_HEADER);
    let response = guarded(app, request, next).await;
    if poll && (response.status().is_client_error() || response.status().is_server_error()) {
        let mut response = response;
        *response.status_mut() = StatusCode::from_u16(286).unwrap_or(StatusCode::OK);
        response
            .headers_mut()
            .insert("hx-reswap", HeaderValue::from_static("outerHTML"));
        return response;
    }
    response
}

async fn guarded(app: App, mut request: Request, next: Next) -> Response {
    let (mut sealed, session) = match open(&app, request.headers()).await {
        Ok(Some(open)) => open,
        Ok(None) => {
            let mut response = to("/console", request.headers());
            response
                .headers_mut()
                .append(header::SET_COOKIE, clear(secure(&app, request.headers())));
            return response;
        }
        Err(failure) => return failure.into_response(),
    };
    let changes =
        request.method() != axum::http::Method::GET && request.method() != axum::http::Method::HEAD;
    if changes {
        let sent = request
            .headers()
            .get("x-csrf-token")
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !bool::from(sent.ct_eq(session.csrf.as_bytes())) {
            return refusal(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "this action did not carry the console's CSRF token; reload the page",
            );
        }
    }
    let secure = secure(&app, request.headers());
    let touch = !request.headers().contains_key(POLL_HEADER);
    let mut session = session;
    if let Some(id) = request.extensions().get::<crate::context::RequestId>() {
        session.who.request_id.clone_from(&id.0);
    }
    let htmx = request.headers().contains_key("hx-request");
    request.extensions_mut().insert(session.clone());
    let mut response = super::whole_page(next.run(request).await, Some(&session), htmx);
    let now = app.now().as_millis();
    if touch && now - sealed.s >= TOUCH_MS.min(idle_ms(&app) / 2) {
        sealed.s = now;
        if let Ok(cookie) = seal(&app, &sealed, secure).await {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
    }
    response
}

fn idle_ms(app: &App) -> i64 {
    i64::try_from(app.config().console.idle_timeout.as_millis()).unwrap_or(i64::MAX)
}

/// The session the request's cookie holds, when it opens, has neither idled out nor outlived
/// `console.max_session_ms`, and its key still authenticates: `None` when it is signed out. An
/// error when the key cannot be checked now (the rate limit, a store that is away).
async fn open(app: &App, headers: &HeaderMap) -> Result<Option<(Sealed, Session)>, Failure> {
    let Some(value) = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)
    else {
        return Ok(None);
    };
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(value.value()) else {
        return Ok(None);
    };
    let Some(plain) = app.open_console_session(&bytes).await? else {
        return Ok(None);
    };
    let Ok(sealed) = serde_json::from_slice::<Sealed>(&plain) else {
        return Ok(None);
    };
    let now = app.now().as_millis();
    let longest = i64::try_from(app.config().console.max_session.as_millis()).unwrap_or(i64::MAX);
    if now.saturating_sub(sealed.s) > idle_ms(app) || now.saturating_sub(sealed.i) > longest {
        return Ok(None);
    }
    let who = match app.authenticate(&sealed.k).await {
        Ok(who) => who,
        Err(engram_app::AppError::Unauthorized(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let session = Session {
        who,
        csrf: sealed.c.clone(),
    };
    Ok(Some((sealed, session)))
}

async fn seal(app: &App, sealed: &Sealed, secure: bool) -> Result<HeaderValue, Failure> {
    let plain =
        serde_json::to_vec(sealed).map_err(|e| engram_app::AppError::Internal(Box::new(e)))?;
    let bytes = app.seal_console_session(&plain).await?;
    let cookie = cookie::Cookie::build((COOKIE, URL_SAFE_NO_PAD.encode(bytes)))
        .path(super::PATH)
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure)
        .build();
    HeaderValue::from_str(&cookie.to_string())
        .map_err(|e| engram_app::AppError::Internal(Box::new(e)).into())
}

fn clear(secure: bool) -> HeaderValue {
    let cookie = cookie::Cookie::build((COOKIE, ""))
        .path(super::PATH)
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::ZERO)
        .build();
    HeaderValue::from_str(&cookie.to_string()).unwrap_or(HeaderValue::from_static(""))
}

/// Whether the browser reaches engram over HTTPS (`console.public_origin` is `https`, or a
/// proxy says so): the cookie is then `Secure`.
fn secure(app: &App, headers: &HeaderMap) -> bool {
    app.config().console.public_origin.starts_with("https://")
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

/// Sends the browser to `path`: htmx follows `HX-Redirect` with a whole-page load; a plain
/// form post gets 303.
pub(super) fn to(path: &str, headers: &HeaderMap) -> Response {
    if headers.contains_key("hx-request") {
        let mut response = StatusCode::OK.into_response();
        if let Ok(value) = HeaderValue::from_str(path) {
            response.headers_mut().insert("hx-redirect", value);
        }
        response
    } else {
        Redirect::to(path).into_response()
    }
}

/// A fresh random token (two v4 UUIDs: 244 random bits from the system's generator).
fn token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}
