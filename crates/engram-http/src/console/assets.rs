//! The console's scripts and styles, embedded in the binary: its own (`console/console.js`,
//! `console/console.css`) and the pinned libraries `scripts/vendor-console.sh` fetched
//! (htmx, Cytoscape.js for graphs, uPlot for plots). Served with their hash as `ETag`.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

macro_rules! asset {
    ($name:literal, $file:literal, $type:expr) => {
        (
            $name,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $file)).as_slice(),
            $type,
        )
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Name served, bytes, media type.
const ASSETS: &[(&str, &[u8], &str)] = &[
    asset!("console.js", "console.js", JS),
    asset!("console.css", "console.css", CSS),
    asset!("operations.js", "operations.js", JS),
    asset!("htmx.min.js", "vendor/htmx.min.js", JS),
    asset!("cytoscape.min.js", "vendor/cytoscape.min.js", JS),
    asset!("uPlot.iife.min.js", "vendor/uPlot.iife.min.js", JS),
    asset!("uPlot.min.css", "vendor/uPlot.min.css", CSS),
];

/// One asset; `If-None-Match` with its tag answers 304.
pub(super) async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some((_, bytes, media_type)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return super::refusal(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!("the console has no asset `{name}`"),
        );
    };
    let tag = format!("\"{:016x}\"", fnv(bytes));
    let cache = [
        (header::ETAG, tag.clone()),
        (header::CACHE_CONTROL, "no-cache".to_owned()),
    ];
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == tag)
    {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    let mut response = (cache, *bytes).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    response
}

/// FNV-1a over the bytes: a stable tag for a build's asset.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
