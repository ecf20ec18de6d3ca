//! What every fake shares: serving on a loopback port until dropped, the fake's clock, JSON
//! answers, a request's query and route parameters, a rate limit, and an answer read to be logged.
#![allow(clippy::unwrap_used)] // a test double: a fake that cannot serve is a bug to see at once

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A fake's listener on a loopback port, not yet serving.
pub struct Loopback {
    listener: tokio::net::TcpListener,
    /// `http://127.0.0.1:PORT`.
    pub host: String,
}

impl Loopback {
    pub async fn bind() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = format!("http://{}", listener.local_addr().unwrap());
        Self { listener, host }
    }

    /// Serves `router` until the answer is dropped.
    pub fn serve(self, router: Router) -> Serving {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(self.listener, router)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await
        });
        Serving {
            stop,
            host: self.host,
        }
    }
}

/// A fake's server, serving until dropped.
pub struct Serving {
    stop: CancellationToken,
    /// `http://127.0.0.1:PORT`.
    pub host: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The time `seconds` after 2026-03-01T00:00:00 (a fake's clock, which covers four weeks),
/// without the fraction and zone.
pub fn clock_time(seconds: u64) -> String {
    let (d, h) = (seconds / 86_400, seconds / 3600 % 24);
    let (m, s) = (seconds / 60 % 60, seconds % 60);
    assert!(d < 28, "the fake's clock covers four weeks");
    format!("2026-03-{:02}T{h:02}:{m:02}:{s:02}", d + 1)
}

/// A fake's log of exchanges, which a benchmark turns off (its memory would grow with every
/// request the fake answers).
#[derive(Debug)]
pub struct Log<T> {
    entries: Vec<T>,
    on: bool,
}

impl<T> Default for Log<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            on: true,
        }
    }
}

impl<T: Clone> Log<T> {
    /// Keeps `entry` while the log is on.
    pub fn push(&mut self, entry: T) {
        if self.on {
            self.entries.push(entry);
        }
    }

    /// Every entry kept, in order.
    pub fn all(&self) -> Vec<T> {
        self.entries.clone()
    }

    /// Turns the log on or off (off also forgets what it held).
    pub fn set_on(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.entries = Vec::new();
        }
    }
}

/// A JSON answer.
pub fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [("content-type", "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

/// A request's query parameters, in order.
pub fn query_pairs(uri: &axum::http::Uri) -> Vec<(String, String)> {
    let url = reqwest::Url::parse(&format!("http://fake/?{}", uri.query().unwrap_or(""))).unwrap();
    url.query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The parameters of a matched route template (`/v1/pages/{page_id}`) in the request's path, in
/// order: (name, value).
pub fn route_params(route: &str, path: &str) -> Vec<(String, String)> {
    route
        .split('/')
        .zip(path.split('/'))
        .filter_map(|(t, v)| {
            t.strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .map(|name| (name.to_owned(), v.to_owned()))
        })
        .collect()
}

/// A fake's rate limit: the next requests it is set for are refused, each asking to wait the same
/// number of seconds.
#[derive(Debug, Default)]
pub struct RateLimit {
    /// Requests still to refuse.
    left: usize,
    /// The `Retry-After` they carry.
    retry_after: u64,
}

impl RateLimit {
    /// The next `count` requests are refused with `Retry-After: retry_after`.
    pub fn set(&mut self, count: usize, retry_after: u64) {
        self.left = count;
        self.retry_after = retry_after;
    }

    /// Whether this request is refused: the seconds it is asked to wait.
    pub fn take(&mut self) -> Option<u64> {
        (self.left > 0).then(|| {
            self.left -= 1;
            self.retry_after
        })
    }
}

/// `response` with `Retry-After: seconds` (a rate limit).
pub fn with_retry_after(mut response: Response, seconds: u64) -> Response {
    response
        .headers_mut()
        .insert("retry-after", seconds.to_string().parse().unwrap());
    response
}

/// Panics with every problem a fake's conformance check found, if it found any: `strays` says
/// who strays from what (`the fake strays from GitHub's description`).
pub fn assert_no_problems(problems: &[String], strays: &str) {
    assert!(problems.is_empty(), "{strays}:\n{}", problems.join("\n"));
}

/// An answer read whole, to be logged: the same answer again, and its JSON (`None` when it had
/// no body).
pub async fn read_answer(response: Response) -> (Response, Option<Value>) {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let json = (!bytes.is_empty()).then(|| serde_json::from_slice(&bytes).unwrap());
    (
        Response::from_parts(parts, axum::body::Body::from(bytes)),
        json,
    )
}

/// Sends `request` and reads its answer's JSON.
pub async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// An authorization server's token introspection (RFC 7662), asked as a resource server asks
/// it: a fake given one accepts the access tokens that server holds active, as a provider's API
/// accepts the tokens its own authorization server issued.
#[derive(Clone, Debug)]
pub struct Introspection {
    endpoint: String,
    client_id: String,
    client_secret: String,
}

impl Introspection {
    pub fn new(endpoint: &str, client_id: &str, client_secret: &str) -> Self {
        Self {
            endpoint: endpoint.to_owned(),
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
        }
    }

    /// Whether the server holds `token` active. The client authenticates as it is registered:
    /// in the form (`client_secret_post`), or, when the server refuses that, with HTTP Basic
    /// (`client_secret_basic`).
    pub async fn active(&self, token: &str) -> bool {
        let client = reqwest::Client::new();
        let answer = json_of(client.post(&self.endpoint).form(&[
            ("token", token),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
        ]))
        .await;
        if answer.get("error").is_none() {
            return answer["active"] == true;
        }
        let answer = json_of(
            client
                .post(&self.endpoint)
                .basic_auth(&self.client_id, Some(&self.client_secret))
                .form(&[("token", token)]),
        )
        .await;
        answer["active"] == true
    }
}

/// `headers` with a bearer token that `introspection`'s server holds active written over by
/// `own`, the token the fake itself accepts, so that its own checks pass the request; unchanged
/// when there is no such server, no bearer token, or the token is not active.
pub async fn vouch(
    headers: &mut axum::http::HeaderMap,
    introspection: Option<Introspection>,
    own: &str,
) {
    let Some(introspection) = introspection else {
        return;
    };
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| *t != own)
        .map(str::to_owned);
    if let Some(token) = token {
        if introspection.active(&token).await {
            headers.insert(
                "authorization",
                format!("Bearer {own}").parse().expect("a header value"),
            );
        }
    }
}
