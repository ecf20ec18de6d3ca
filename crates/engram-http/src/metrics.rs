//! Prometheus metrics: the process's recorder (the `metrics` facade with the Prometheus
//! exporter), request counts and latencies by route template, and `GET /metrics`. Gauges of
//! stored state (items by state, chunks by database, webhook deliveries by state) are read from
//! the store when scraped. No label carries an item id or a key.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use engram_app::App;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;
use subtle::ConstantTimeEq;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

const ITEM_STATES: [&str; 5] = [
    "queued",
    "processing",
    "graph_creation",
    "completed",
    "errored",
];
const DELIVERY_STATES: [&str; 5] = [
    "pending",
    "sweeping",
    "delivered",
    "failed",
    "permanently_failed",
];

/// Latency buckets (seconds) of every `*_seconds` histogram.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Installs the process's metrics recorder, once; `GET /metrics` serves nothing without it.
pub fn install() -> bool {
    if HANDLE.get().is_some() {
        return true;
    }
    // Stored-state gauges are set at each scrape; one no scrape has set for 15 minutes (a
    // deleted database's) is dropped, so labels do not pile up.
    let built = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::GAUGE, Some(Duration::from_secs(15 * 60)))
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .and_then(PrometheusBuilder::install_recorder);
    match built {
        Ok(handle) => HANDLE.set(handle).is_ok() || HANDLE.get().is_some(),
        Err(err) => {
            tracing::warn!(error = %err, "metrics recorder not installed");
            false
        }
    }
}

/// The recorder's figures in Prometheus' text format, as `GET /metrics` serves them (without
/// the stored-state gauges, which a scrape reads); `None` before [`install`].
pub fn rendered() -> Option<String> {
    HANDLE.get().map(PrometheusHandle::render)
}

/// The route template a request matched, carried to the outer request layer in the response.
#[derive(Clone)]
pub(crate) struct RouteTemplate(pub String);

/// `route_layer` of the API: remembers which template served the request.
pub(crate) async fn remember_route(request: Request, next: Next) -> Response {
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let mut response = next.run(request).await;
    if let Some(template) = template {
        response.extensions_mut().insert(RouteTemplate(template));
    }
    response
}

/// Counts one served request and its latency.
pub(crate) fn record_request(route: &str, method: &str, status: u16, latency: Duration) {
    let labels = [
        ("route", route.to_owned()),
        ("method", method.to_owned()),
        ("status", status.to_string()),
    ];
    metrics::counter!("engram_http_requests_total", &labels).increment(1);
    metrics::histogram!(
        "engram_http_request_duration_seconds",
        "route" => route.to_owned(),
        "method" => method.to_owned()
    )
    .record(latency);
}

/// The Prometheus text of every metric, with the stored-state gauges read now.
async fn render(app: &App) -> Response {
    let Some(handle) = HANDLE.get() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match app.service_counts().await {
        Ok(counts) => {
            // Every state is reported, 0 when nothing is in it (a drained queue reads 0).
            for state in ITEM_STATES {
                metrics::gauge!("engram_items", "state" => state).set(0.0);
            }
            for state in DELIVERY_STATES {
                metrics::gauge!("engram_webhook_deliveries", "state" => state).set(0.0);
            }
            for (state, n) in &counts.items_by_state {
                metrics::gauge!("engram_items", "state" => state.clone()).set(*n as f64);
            }
            for (database, n) in &counts.chunks_by_database {
                metrics::gauge!("engram_chunks", "database_id" => database.as_str().to_owned())
                    .set(*n as f64);
            }
            for (state, n) in &counts.deliveries_by_state {
                metrics::gauge!("engram_webhook_deliveries", "state" => state.clone())
                    .set(*n as f64);
            }
        }
        Err(err) => tracing::warn!(error = %err, "metrics: stored counts unavailable"),
    }
    let mut response = handle.render().into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// `GET /metrics` on the main listener: only with `metrics.token` as the bearer token (compared
/// in constant time); not served when no token is configured.
pub(crate) async fn main_listener(State(app): State<App>, headers: HeaderMap) -> Response {
    let token = app.config().metrics.token.clone();
    if token.is_empty() {
        return crate::error::ApiError::new(
            engram_types::ErrorCode::NotFound,
            "metrics are not served here; set metrics.token or metrics.listen",
        )
        .into_response();
    }
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        return crate::error::ApiError::new(
            engram_types::ErrorCode::Unauthorized,
            "send the metrics token as `Authorization: Bearer <token>`",
        )
        .into_response();
    }
    render(&app).await
}

/// The router of the separate metrics listener (`metrics.listen`): `/metrics`, no token.
pub fn listener_router(app: App) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(app): State<App>| async move { render(&app).await }),
        )
        .with_state(app)
}
