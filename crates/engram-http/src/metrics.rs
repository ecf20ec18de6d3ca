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

/// The recorder's figures read back from the text `GET /metrics` serves (so a page shows the
/// very figures a scrape would get); `None` before [`install`].
pub(crate) fn figures() -> Option<Figures> {
    rendered().map(Figures)
}

/// Rendered figures in Prometheus' text format, to read counters and histograms from.
pub(crate) struct Figures(pub(crate) String);

/// One sample line: `name{label="value",...} value`.
struct Line<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
}

impl Line<'_> {
    fn label(&self, name: &str) -> Option<&str> {
        Labels(&self.labels).get(name)
    }
}

/// The labels of one sample line.
pub(crate) struct Labels<'a>(&'a [(&'a str, String)]);

impl<'a> Labels<'a> {
    /// A label's value.
    pub(crate) fn get(&self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one sample line; `None` for comments, blank lines and anything malformed.
fn parse_line(line: &str) -> Option<Line<'_>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            rest = rest.trim_start_matches(',');
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = rest.split_once("=\"")?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.push((label, value));
            rest = &after[end + 1..];
        }
    }
    let value = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        number => number.parse().ok()?,
    };
    Some(Line {
        name,
        labels,
        value,
    })
}

impl Figures {
    fn lines(&self) -> impl Iterator<Item = Line<'_>> {
        self.0.lines().filter_map(parse_line)
    }

    /// A counter's (or gauge's) value summed over the label sets `keep` accepts; 0 when none
    /// was recorded.
    pub(crate) fn sum(&self, name: &str, keep: impl Fn(&Labels<'_>) -> bool) -> f64 {
        self.lines()
            .filter(|l| l.name == name && keep(&Labels(&l.labels)))
            .map(|l| l.value)
            .sum()
    }

    /// A histogram's buckets summed over the label sets `keep` accepts; empty when none was
    /// recorded.
    pub(crate) fn histogram(&self, name: &str, keep: impl Fn(&Labels<'_>) -> bool) -> Histogram {
        let bucket = format!("{name}_bucket");
        let sum = format!("{name}_sum");
        let mut histogram = Histogram::default();
        for line in self.lines() {
            if !keep(&Labels(&line.labels)) {
                continue;
            }
            if line.name == bucket {
                let Some(le) = line.label("le").and_then(|le| match le {
                    "+Inf" => Some(f64::INFINITY),
                    le => le.parse::<f64>().ok(),
                }) else {
                    continue;
                };
                match histogram.buckets.iter_mut().find(|(bound, _)| *bound == le) {
                    Some((_, count)) => *count += line.value,
                    None => histogram.buckets.push((le, line.value)),
                }
            } else if line.name == sum {
                histogram.sum += line.value;
            }
        }
        histogram.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        histogram
    }
}

/// A cumulative histogram: each bucket's upper bound (seconds, the last `+Inf`) with the count
/// of observations at or below it, and the sum of the observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Histogram {
    pub(crate) buckets: Vec<(f64, f64)>,
    pub(crate) sum: f64,
}

impl Histogram {
    /// How many observations it holds.
    pub(crate) fn count(&self) -> f64 {
        self.buckets.last().map_or(0.0, |(_, count)| *count)
    }

    /// The observations made after `earlier` (an earlier reading of the same histogram); all of
    /// them when the counts went down (the process restarted in between).
    pub(crate) fn since(&self, earlier: &Histogram) -> Histogram {
        if earlier.count() > self.count() {
            return self.clone();
        }
        let buckets = self
            .buckets
            .iter()
            .map(|(bound, count)| {
                let before = earlier
                    .buckets
                    .iter()
                    .find(|(b, _)| b == bound)
                    .map_or(0.0, |(_, c)| *c);
                (*bound, (count - before).max(0.0))
            })
            .collect();
        Histogram {
            buckets,
            sum: (self.sum - earlier.sum).max(0.0),
        }
    }

    /// The `q`-quantile (0 to 1) estimated from the buckets as Prometheus' `histogram_quantile`
    /// does: linear within the bucket it falls in, the largest finite bound when it falls in
    /// `+Inf`; `None` without observations.
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total <= 0.0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total;
        let mut previous = (0.0, 0.0);
        for (i, &(bound, count)) in self.buckets.iter().enumerate() {
            if count >= rank && count > 0.0 {
                if bound.is_infinite() {
                    return Some(if i == 0 { 0.0 } else { self.buckets[i - 1].0 });
                }
                let (lower, below) = previous;
                if count <= below {
                    return Some(bound);
                }
                return Some(lower + (bound - lower) * (rank - below) / (count - below));
            }
            previous = (bound, count);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE engram_http_request_duration_seconds histogram
engram_http_request_duration_seconds_bucket{route="/query",method="POST",le="0.01"} 2
engram_http_request_duration_seconds_bucket{route="/query",method="POST",le="0.1"} 8
engram_http_request_duration_seconds_bucket{route="/query",method="POST",le="1"} 10
engram_http_request_duration_seconds_bucket{route="/query",method="POST",le="+Inf"} 10
engram_http_request_duration_seconds_sum{route="/query",method="POST"} 0.9
engram_http_request_duration_seconds_count{route="/query",method="POST"} 10
engram_http_request_duration_seconds_bucket{route="/x \"y\"",method="GET",le="0.01"} 5
engram_http_request_duration_seconds_bucket{route="/x \"y\"",method="GET",le="0.1"} 5
engram_http_request_duration_seconds_bucket{route="/x \"y\"",method="GET",le="1"} 5
engram_http_request_duration_seconds_bucket{route="/x \"y\"",method="GET",le="+Inf"} 5
# TYPE engram_items_indexed_total counter
engram_items_indexed_total{outcome="completed"} 7
engram_items_indexed_total{outcome="errored"} 1
engram_chunks_indexed_total 30
"#;

    #[test]
    fn counters_and_histograms_read_back_from_the_text() {
        let figures = Figures(TEXT.to_owned());
        assert_eq!(figures.sum("engram_items_indexed_total", |_| true), 8.0);
        assert_eq!(
            figures.sum("engram_items_indexed_total", |l| l.get("outcome")
                == Some("completed")),
            7.0
        );
        assert_eq!(figures.sum("engram_chunks_indexed_total", |_| true), 30.0);
        assert_eq!(figures.sum("absent", |_| true), 0.0);
        let query = figures.histogram("engram_http_request_duration_seconds", |l| {
            l.get("route") == Some("/query")
        });
        assert_eq!(
            query.buckets,
            vec![(0.01, 2.0), (0.1, 8.0), (1.0, 10.0), (f64::INFINITY, 10.0)]
        );
        assert_eq!(query.count(), 10.0);
        let other = figures.histogram("engram_http_request_duration_seconds", |l| {
            l.get("route") == Some("/x \"y\"")
        });
        assert_eq!(other.count(), 5.0);
        let every = figures.histogram("engram_http_request_duration_seconds", |_| true);
        assert_eq!(every.count(), 15.0);
    }

    #[test]
    fn quantiles_interpolate_within_buckets_as_prometheus_does() {
        let h = Histogram {
            buckets: vec![(0.01, 2.0), (0.1, 8.0), (1.0, 10.0), (f64::INFINITY, 10.0)],
            sum: 0.9,
        };
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
        // rank 5 of 10: 3 of the 6 in (0.01, 0.1].
        assert!(close(h.quantile(0.5), 0.055), "{:?}", h.quantile(0.5));
        assert!(close(h.quantile(0.1), 0.005));
        // rank 9.9: 1.9 of the 2 in (0.1, 1].
        assert!(close(h.quantile(0.99), 0.955));
        assert_eq!(Histogram::default().quantile(0.5), None);
        let tail = Histogram {
            buckets: vec![(0.01, 0.0), (1.0, 1.0), (f64::INFINITY, 4.0)],
            sum: 40.0,
        };
        assert_eq!(tail.quantile(0.99), Some(1.0), "in +Inf: the largest bound");
    }

    #[test]
    fn a_window_is_the_difference_of_two_readings() {
        let before = Histogram {
            buckets: vec![(0.1, 2.0), (f64::INFINITY, 3.0)],
            sum: 1.0,
        };
        let after = Histogram {
            buckets: vec![(0.1, 2.0), (f64::INFINITY, 5.0)],
            sum: 4.0,
        };
        let window = after.since(&before);
        assert_eq!(window.buckets, vec![(0.1, 0.0), (f64::INFINITY, 2.0)]);
        assert_eq!(window.count(), 2.0);
        assert_eq!(before.since(&after), before, "a restart: all of it");
    }
}
