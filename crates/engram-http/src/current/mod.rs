//! The current generation (`API-Version: 2`): `/databases*`, `/context/*`, `/query`,
//! `/webhooks/indexing*`, `/keys*`. Successes in the envelope (webhook management: plain objects, the
//! spec's documented contract), errors in the current error envelope. Its routes, its wire types
//! and its router live here.

mod connectors;
mod connectors_wire;
mod context;
mod databases;
mod feedback;
mod graph;
mod keys;
mod query;
mod sources;
mod webhooks;
mod webhooks_wire;
mod wire;

use axum::extract::Request;
use axum::http::HeaderName;
use axum::middleware::{from_fn, map_response, Next};
use axum::response::{IntoResponse, Response};
use engram_app::App;
use engram_types::ErrorCode;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;

use crate::envelope::Generation;
use crate::error::{panic_response, ErrorParts};

pub(crate) use context::{ingest_request, Ingest};
pub(crate) use query::run as run_query;

pub(crate) const API_VERSION: HeaderName = HeaderName::from_static("api-version");

/// Every route of the generation, marked as current.
pub(crate) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .merge(databases::routes())
        .merge(context::routes())
        .merge(sources::routes())
        .merge(feedback::routes())
        .merge(graph::routes())
        .merge(query::routes())
        .merge(webhooks::routes())
        .merge(connectors::routes())
        .merge(keys::routes())
        .layer(from_fn(api_version))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(map_response(mark))
}

async fn mark(response: Response) -> Response {
    Generation::Current.mark(response)
}

/// An `API-Version` other than 2 is refused before the route runs; none means 2.
async fn api_version(req: Request, next: Next) -> Response {
    let version = req
        .headers()
        .get(&API_VERSION)
        .map(|v| v.to_str().unwrap_or("").trim().to_owned());
    match version {
        Some(v) if v != "2" => ErrorParts::new(
            ErrorCode::InvalidParameters,
            format!("unsupported API-Version `{v}`; this route serves API-Version 2"),
        )
        .into_response(),
        _ => next.run(req).await,
    }
}
