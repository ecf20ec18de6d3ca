//! A real HTTP server on loopback serving RSS feeds and a small web site for connector tests: a
//! bearer token guards them (and can be revoked), each feed's entries and each page can change
//! or go, `ETag` and `If-None-Match` work on feeds and pages, and the server can stop
//! (unreachable).
#![allow(clippy::unwrap_used)] // test code

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Shared {
    token: String,
    /// Feed name to its entries (guid, title, text).
    feeds: BTreeMap<String, Vec<(String, String, String)>>,
    /// Site paths to (content type, body).
    pages: BTreeMap<String, (String, String)>,
    /// Paths requested, in order.
    log: Vec<String>,
    /// Requests per feed, and how many were answered `304`.
    requests: usize,
    not_modified: usize,
}

pub(crate) struct FeedServer {
    pub base: String,
    shared: Arc<Mutex<Shared>>,
    stop: CancellationToken,
}

fn render(name: &str, entries: &[(String, String, String)]) -> String {
    let items: String = entries
        .iter()
        .map(|(guid, title, text)| {
            format!(
                "<item><guid>{guid}</guid><title>{title}</title><link>https://example.com/{guid}</link>\
                 <description>{text}</description><pubDate>Mon, 02 Nov 2026 10:00:00 GMT</pubDate></item>"
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel><title>{name} feed</title>\
         <link>https://example.com</link><description>test</description>{items}</channel></rss>"
    )
}

/// A weak stand-in for a content hash, enough to tell the bodies of a test apart.
fn etag_of(body: &str) -> String {
    format!(
        "\"{:x}\"",
        body.len() * 31 + body.bytes().map(usize::from).sum::<usize>()
    )
}

async fn serve(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut shared = shared.lock().unwrap();
    shared.requests += 1;
    let expected = format!("Bearer {}", shared.token);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let name = name.trim_end_matches(".xml").to_owned();
    let Some(entries) = shared.feeds.get(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let body = render(&name, entries);
    let etag = etag_of(&body);
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        shared.not_modified += 1;
        return (StatusCode::NOT_MODIFIED, [("etag", etag)]).into_response();
    }
    (
        StatusCode::OK,
        [
            ("content-type", "application/rss+xml".to_owned()),
            ("etag", etag),
        ],
        body,
    )
        .into_response()
}

async fn page(
    State(shared): State<Arc<Mutex<Shared>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let mut shared = shared.lock().unwrap();
    shared.log.push(uri.path().to_owned());
    let expected = format!("Bearer {}", shared.token);
    let authorized =
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str());
    if uri.path() != "/robots.txt" && !authorized {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Some((kind, body)) = shared.pages.get(uri.path()).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if uri.path() == "/robots.txt" {
        return (StatusCode::OK, [("content-type", kind)], body).into_response();
    }
    let etag = etag_of(&body);
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        shared.not_modified += 1;
        return (StatusCode::NOT_MODIFIED, [("etag", etag)]).into_response();
    }
    (
        StatusCode::OK,
        [("content-type", kind), ("etag", etag)],
        body,
    )
        .into_response()
}

impl FeedServer {
    pub(crate) async fn start(token: &str) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            token: token.to_owned(),
            ..Shared::default()
        }));
        let router = Router::new()
            .route("/feeds/{name}", axum::routing::get(serve))
            .fallback(axum::routing::get(page))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await
        });
        Self {
            base: format!("http://{addr}"),
            shared,
            stop,
        }
    }

    pub(crate) fn url(&self, feed: &str) -> String {
        format!("{}/feeds/{feed}.xml", self.base)
    }

    pub(crate) fn set_feed(&self, feed: &str, entries: &[(&str, &str, &str)]) {
        self.shared.lock().unwrap().feeds.insert(
            feed.to_owned(),
            entries
                .iter()
                .map(|(g, t, x)| ((*g).to_owned(), (*t).to_owned(), (*x).to_owned()))
                .collect(),
        );
    }

    /// Serves `body` at `path` of the site.
    pub(crate) fn set_page(&self, path: &str, content_type: &str, body: &str) {
        self.shared
            .lock()
            .unwrap()
            .pages
            .insert(path.to_owned(), (content_type.to_owned(), body.to_owned()));
    }

    pub(crate) fn remove_page(&self, path: &str) {
        self.shared.lock().unwrap().pages.remove(path);
    }

    /// Paths requested so far, in order.
    pub(crate) fn requested(&self) -> Vec<String> {
        self.shared.lock().unwrap().log.clone()
    }

    pub(crate) fn remove_feed(&self, feed: &str) {
        self.shared.lock().unwrap().feeds.remove(feed);
    }

    pub(crate) fn set_token(&self, token: &str) {
        token.clone_into(&mut self.shared.lock().unwrap().token);
    }

    /// Requests answered `304 Not Modified` so far.
    pub(crate) fn not_modified(&self) -> usize {
        self.shared.lock().unwrap().not_modified
    }

    /// Stops listening: the feeds become unreachable.
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}
