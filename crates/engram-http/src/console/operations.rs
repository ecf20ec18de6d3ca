//! The console's operations page: the signed-in organization's indexing queue by database (read
//! as the session's key, so no other organization's figures), and the instance's indexing rate
//! and query latency percentiles computed from the figures `/metrics` exports (the process's
//! Prometheus recorder, read back from its rendered text), refreshed by htmx and drawn over
//! time with uPlot (`console/operations.js`, reading the numbers the server rendered into
//! `data-*` attributes).
//!
//! Rates and windows need two readings: the page keeps the recorder's last readings (one per
//! refresh at most every [`MIN_GAP_MS`], for [`KEEP_MS`]), taken while someone has the page
//! open.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Router};
use engram_app::App;
use engram_types::IndexingStatus;
use maud::{html, Markup};
use serde_json::json;

use super::pages::{database_href, layout};
use super::session::Session;
use super::{html as page_response, Page};
use crate::error::ApiError;
use crate::metrics::{figures as recorded, Histogram};

/// Readings closer together than this are not taken again (ms).
const MIN_GAP_MS: i64 = 2_000;
/// Readings older than this are dropped (ms): the plot's span.
const KEEP_MS: i64 = 30 * 60 * 1_000;
/// Most readings kept.
const KEEP_MAX: usize = 1_000;
/// The window of the rate and of the recent percentiles (ms).
const WINDOW_MS: i64 = 60_000;
/// The latency histogram every API request is recorded in (`metrics::record_request`).
const LATENCY: &str = "engram_http_request_duration_seconds";

/// The operations routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/console/operations", get(page))
        .route("/console/operations/figures", get(fragment))
}

/// One reading of the instance's recorder.
#[derive(Clone)]
struct Reading {
    /// When (Unix ms, the service's clock).
    at: i64,
    /// Items indexed since the process started: completed, and errored.
    completed: f64,
    errored: f64,
    chunks: f64,
    /// Latency of the query routes since the process started.
    queries: Histogram,
}

static READINGS: Mutex<VecDeque<Reading>> = Mutex::new(VecDeque::new());

/// Whether a route template is a query: `/query` and the legacy `/recall/*`.
fn is_query(route: &str) -> bool {
    route == "/query" || route.starts_with("/recall/")
}

/// A reading now, kept with the earlier ones; every reading kept, oldest first. `None` when the
/// recorder is not installed.
fn read(now: i64) -> Option<Vec<Reading>> {
    let figures = recorded()?;
    let mut readings = READINGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if readings
        .back()
        .is_none_or(|last| now - last.at >= MIN_GAP_MS)
    {
        let outcome = |outcome: &'static str| {
            figures.sum("engram_items_indexed_total", |l| {
                l.get("outcome") == Some(outcome)
            })
        };
        readings.push_back(Reading {
            at: now,
            completed: outcome("completed"),
            errored: outcome("errored"),
            chunks: figures.sum("engram_chunks_indexed_total", |_| true),
            queries: figures.histogram(LATENCY, |l| l.get("route").is_some_and(is_query)),
        });
    }
    while readings
        .front()
        .is_some_and(|first| now - first.at > KEEP_MS)
        || readings.len() > KEEP_MAX
    {
        readings.pop_front();
    }
    Some(readings.iter().cloned().collect())
}

/// What happened in the window ending at a reading: since the earliest reading at most
/// [`WINDOW_MS`] before it.
struct Window {
    seconds: f64,
    /// Items indexed per minute, chunks per minute.
    items_per_minute: f64,
    chunks_per_minute: f64,
    queries: Histogram,
}

fn window(readings: &[Reading], end: usize) -> Option<Window> {
    let last = readings.get(end)?;
    let first = readings[..end]
        .iter()
        .find(|r| last.at - r.at <= WINDOW_MS)?;
    let seconds = (last.at - first.at) as f64 / 1000.0;
    if seconds <= 0.0 {
        return None;
    }
    let per_minute = |now: f64, then: f64| (now - then).max(0.0) * 60.0 / seconds;
    Some(Window {
        seconds,
        items_per_minute: per_minute(
            last.completed + last.errored,
            first.completed + first.errored,
        ),
        chunks_per_minute: per_minute(last.chunks, first.chunks),
        queries: last.queries.since(&first.queries),
    })
}

/// A quantile in milliseconds.
fn ms(histogram: &Histogram, q: f64) -> Option<f64> {
    histogram.quantile(q).map(|s| s * 1000.0)
}

fn shown_ms(value: Option<f64>) -> String {
    match value {
        None => "–".to_owned(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.1} ms"),
    }
}

/// A count read as a float (a sum of nothing is -0).
fn whole(value: f64) -> u64 {
    value.max(0.0).round() as u64
}

/// A number for a `data-*` attribute: empty when there is none.
fn data(value: Option<f64>) -> String {
    value
        .filter(|v| v.is_finite())
        .map(|v| format!("{v:.3}"))
        .unwrap_or_default()
}

/// The plot's history: for each reading, its time (Unix seconds), the rate and the windowed
/// percentiles (ms), `null` where the window is empty.
fn series(readings: &[Reading]) -> String {
    let round = |v: Option<f64>| {
        v.filter(|v| v.is_finite())
            .map(|v| (v * 1000.0).round() / 1000.0)
    };
    let mut t = Vec::with_capacity(readings.len());
    let (mut rate, mut p50, mut p95, mut p99) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, reading) in readings.iter().enumerate() {
        let w = window(readings, i);
        t.push(reading.at as f64 / 1000.0);
        rate.push(round(w.as_ref().map(|w| w.items_per_minute)));
        let q = |q| round(w.as_ref().and_then(|w| ms(&w.queries, q)));
        p50.push(q(0.5));
        p95.push(q(0.95));
        p99.push(q(0.99));
    }
    json!({"t": t, "rate": rate, "p50": p50, "p95": p95, "p99": p99}).to_string()
}

/// One database's items waiting in the indexing pipeline, by state.
struct Queue {
    database: engram_types::DatabaseName,
    counts: [u64; 3],
}

/// Most databases whose queue the page counts (each count is one read of the state index).
const QUEUE_DATABASES: usize = 100;

const QUEUE_STATES: [(IndexingStatus, &str); 3] = [
    (IndexingStatus::Queued, "Queued"),
    (IndexingStatus::Processing, "Processing"),
    (IndexingStatus::GraphCreation, "Graph creation"),
];

/// The organization's queue: each database the key may see, its items in each state before the
/// end (one count by state per database, read from the items' state index).
async fn queue(app: &App, session: &Session) -> Result<Vec<Queue>, ApiError> {
    let databases = app.list_databases(&session.who).await?;
    let mut queues = Vec::with_capacity(databases.len().min(QUEUE_DATABASES));
    for db in databases.into_iter().take(QUEUE_DATABASES) {
        // A database being deleted may be gone by now: left out.
        let waiting = QUEUE_STATES.map(|(state, _)| state);
        let Ok(by_state) = app
            .item_status_counts(&session.who, &db.name, &waiting)
            .await
        else {
            continue;
        };
        let mut counts = [0; 3];
        for (count, (state, _)) in counts.iter_mut().zip(QUEUE_STATES) {
            *count = by_state
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
        }
        queues.push(Queue {
            database: db.name,
            counts,
        });
    }
    Ok(queues)
}

/// The figures, refreshed every 5 seconds; the plot reads the newest from its `data-*`.
async fn figures(app: &App, session: &Session) -> Result<(Markup, Option<Vec<Reading>>), ApiError> {
    let queues = queue(app, session).await?;
    let waiting: u64 = queues.iter().map(|q| q.counts.iter().sum::<u64>()).sum();
    let shown = app.config().console.instance_figures;
    let readings = shown.then(|| read(app.now().as_millis())).flatten();
    let last = readings.as_ref().and_then(|r| r.last()).cloned();
    let recent = readings
        .as_ref()
        .and_then(|r| window(r, r.len().saturating_sub(1)));
    let recent_q = |q| recent.as_ref().and_then(|w| ms(&w.queries, q));
    let markup = html! {
        div id="ops-figures" hx-get="/console/operations/figures" hx-trigger="every 5s" hx-headers=(super::POLL) hx-swap="outerHTML"
            data-t=(data(last.as_ref().map(|r| r.at as f64 / 1000.0)))
            data-queue=(waiting)
            data-rate=(data(recent.as_ref().map(|w| w.items_per_minute)))
            data-p50=(data(recent_q(0.5)))
            data-p95=(data(recent_q(0.95)))
            data-p99=(data(recent_q(0.99))) {
            h2 { "Indexing queue of organization " code { (session.who.org.to_string()) } }
            @if queues.is_empty() {
                p { "No database." }
            } @else {
                table id="ops-queue" {
                    caption class="visually-hidden" { "Items waiting to be indexed, by database" }
                    thead { tr {
                        th scope="col" { "Database" }
                        @for (_, label) in QUEUE_STATES { th scope="col" { (label) } }
                        th scope="col" { "Waiting" }
                    } }
                    tbody {
                        @for q in &queues {
                            tr {
                                th scope="row" { a href=(database_href(&q.database)) { (q.database.as_str()) } }
                                @for count in q.counts { td class="num" { (count) } }
                                td class="num" { (q.counts.iter().sum::<u64>()) }
                            }
                        }
                    }
                    tfoot { tr {
                        th scope="row" { "All databases" }
                        @for i in 0..QUEUE_STATES.len() { td class="num" { (queues.iter().map(|q| q.counts[i]).sum::<u64>()) } }
                        td class="num" id="ops-waiting" { (waiting) }
                    } }
                }
            }
            @match &last {
                None if !shown => {
                    p class="hint" id="ops-instance-off" {
                        "The instance's indexing rate and query latency (every organization's together) are not shown: its operator can turn them on with "
                        code { "console.instance_figures = true" } "."
                    }
                }
                None => {
                    p class="hint" { "The metrics recorder is not running in this process: no indexing or latency figures." }
                }
                Some(last) => {
                    h2 { "Indexing (this instance)" }
                    dl class="facts" id="ops-indexing" {
                        dt { "Rate" } dd {
                            @if let Some(w) = &recent {
                                (format!("{:.1}", w.items_per_minute)) " items/min, " (format!("{:.1}", w.chunks_per_minute)) " chunks/min "
                                span class="hint" { "(over the last " (format!("{:.0}", w.seconds)) " s)" }
                            } @else {
                                "measuring… " span class="hint" { "(a rate needs two readings)" }
                            }
                        }
                        dt { "Since start" } dd {
                            (whole(last.completed)) " items completed, " (whole(last.errored)) " errored, " (whole(last.chunks)) " chunks"
                        }
                    }
                    h2 { "Query latency (this instance)" }
                    table id="ops-latency" {
                        caption class="visually-hidden" { "Latency of /query and the legacy /recall routes" }
                        thead { tr {
                            th scope="col" { "Window" } th scope="col" { "Queries" }
                            th scope="col" { "p50" } th scope="col" { "p95" } th scope="col" { "p99" }
                        } }
                        tbody {
                            @if let Some(w) = &recent {
                                tr {
                                    th scope="row" { "Last " (format!("{:.0}", w.seconds)) " s" }
                                    td class="num" { (whole(w.queries.count())) }
                                    td class="num" { (shown_ms(ms(&w.queries, 0.5))) }
                                    td class="num" { (shown_ms(ms(&w.queries, 0.95))) }
                                    td class="num" { (shown_ms(ms(&w.queries, 0.99))) }
                                }
                            }
                            tr {
                                th scope="row" { "Since start" }
                                td class="num" { (whole(last.queries.count())) }
                                td class="num" { (shown_ms(ms(&last.queries, 0.5))) }
                                td class="num" { (shown_ms(ms(&last.queries, 0.95))) }
                                td class="num" { (shown_ms(ms(&last.queries, 0.99))) }
                            }
                        }
                    }
                    p class="hint" { "Percentiles are estimated from the histogram buckets of " code { (LATENCY) } " (as Prometheus' " code { "histogram_quantile" } " does)." }
                }
            }
        }
    };
    Ok((markup, readings))
}

async fn page(State(app): State<App>, Extension(session): Extension<Session>) -> Page {
    let (figures, readings) = figures(&app, &session).await?;
    let history = series(readings.as_deref().unwrap_or_default());
    Ok(page_response(layout(
        "Operations",
        Some(&session),
        html! {
            p class="hint" {
                @if app.config().console.instance_figures {
                    "The indexing rate and query latency are this instance's (every organization's), from the same recorder "
                    code { "GET /metrics" } " serves. "
                }
                "The queue is your organization's. Refreshed every 5 seconds."
            }
            figure class="plot" {
                div id="ops-plot" role="img" aria-label="Plot over time of the organization's waiting items, the indexing rate and the query latency percentiles; the figures are in the tables below" data-series=(history) {}
                figcaption class="hint" { "Waiting items and items indexed per minute (left axis); query latency p50, p95 and p99 over the last minute, in ms (right axis). Kept for 30 minutes while the page is open." }
            }
            (figures)
            script src="/console/assets/operations.js" defer {}
        },
    )))
}

async fn fragment(State(app): State<App>, Extension(session): Extension<Session>) -> Page {
    Ok(page_response(figures(&app, &session).await?.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at: i64, completed: f64, queries: &[(f64, f64)]) -> Reading {
        Reading {
            at,
            completed,
            errored: 0.0,
            chunks: completed * 2.0,
            queries: Histogram {
                buckets: queries.to_vec(),
                sum: 0.0,
            },
        }
    }

    #[test]
    fn the_rate_and_percentiles_are_of_the_last_minute() {
        let readings = [
            reading(0, 0.0, &[(0.01, 0.0), (f64::INFINITY, 0.0)]),
            reading(30_000, 5.0, &[(0.01, 4.0), (f64::INFINITY, 4.0)]),
            reading(70_000, 20.0, &[(0.01, 4.0), (f64::INFINITY, 8.0)]),
        ];
        assert!(window(&readings, 0).is_none(), "one reading: no window");
        let w = window(&readings, 1).expect("a window");
        assert_eq!(w.items_per_minute, 10.0);
        assert_eq!(w.chunks_per_minute, 20.0);
        assert_eq!(w.queries.count(), 4.0);
        // The reading at 0 is more than a minute before 70 s: the window starts at 30 s.
        let w = window(&readings, 2).expect("a window");
        assert_eq!(w.seconds, 40.0);
        assert_eq!(w.items_per_minute, 22.5);
        assert_eq!(w.queries.count(), 4.0);
        assert_eq!(
            ms(&w.queries, 0.5),
            Some(10.0),
            "all in +Inf: the largest bound"
        );
        let plotted: serde_json::Value = serde_json::from_str(&series(&readings)).expect("JSON");
        assert_eq!(plotted["t"], json!([0.0, 30.0, 70.0]));
        assert_eq!(plotted["rate"], json!([null, 10.0, 22.5]));
        assert_eq!(plotted["p50"][0], json!(null));
    }

    #[test]
    fn only_query_routes_count_as_queries() {
        assert!(is_query("/query"));
        assert!(is_query("/recall/full_recall"));
        assert!(!is_query("/context/ingest"));
        assert!(!is_query("unmatched"));
    }
}
