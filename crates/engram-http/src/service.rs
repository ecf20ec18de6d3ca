//! Routes outside the API generations: health and the OpenAPI document (answered as they
//! are), and the answer to a path no route serves.

use std::collections::HashSet;
use std::sync::Arc;

use axum::http::Uri;
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use engram_app::App;
use engram_types::ErrorCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::Generation;
use crate::error::ApiError;

/// Health, marked plain.
pub(crate) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .layer(map_response(mark))
}

async fn mark(response: Response) -> Response {
    Generation::Plain.mark(response)
}

/// The route serving the OpenAPI document itself (described in the document by `openapi::finish`).
pub(crate) fn openapi_route(openapi: utoipa::openapi::OpenApi) -> Router<App> {
    let doc = Arc::new(openapi);
    Router::new()
        .route(
            crate::openapi::PATH,
            get(move || {
                let doc = doc.clone();
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        .layer(map_response(mark))
}

/// Health: 200 once the service is ready (its store is open and migrated). No key needed.
#[utoipa::path(get, path = "/healthz", tag = "service", security(()),
    responses((status = 200, description = "the service is ready", body = Object, example = json!({"status": "ok"}))))]
async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

/// The first path segment of each of a router's documented routes (`/databases/status` gives
/// `databases`).
pub(crate) fn first_segments(router: &OpenApiRouter<App>) -> HashSet<String> {
    router
        .get_openapi()
        .paths
        .paths
        .keys()
        .filter_map(|path| path.trim_start_matches('/').split('/').next())
        .map(str::to_owned)
        .collect()
}

/// A path no route serves: 404, in the shape of the generation whose routes share its first
/// segment (`current`), else legacy.
pub(crate) fn not_found(current: &HashSet<String>, uri: &Uri) -> Response {
    let first = uri.path().trim_start_matches('/').split('/').next();
    let generation = if first.is_some_and(|s| current.contains(s)) {
        Generation::Current
    } else {
        Generation::Legacy
    };
    let error = ApiError::new(
        ErrorCode::NotFound,
        format!("no route for `{}`", uri.path()),
    );
    generation.mark(error.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_answer_in_the_shape_of_the_generation_owning_their_first_segment() {
        let current = first_segments(&crate::current::routes());
        let expected: HashSet<String> = [
            "databases",
            "context",
            "query",
            "webhooks",
            "feedback",
            "connectors",
            "connector-catalog",
            "connector-discovery",
            "credential-vault",
            "keys",
        ]
        .map(str::to_owned)
        .into();
        assert_eq!(
            current, expected,
            "taken from the routes, never a hand list"
        );
        let generation_of = |path: &str| {
            let uri: Uri = path.parse().unwrap_or_default();
            not_found(&current, &uri)
                .extensions()
                .get::<Generation>()
                .copied()
        };
        assert_eq!(generation_of("/databases/nope"), Some(Generation::Current));
        assert_eq!(generation_of("/databasesx"), Some(Generation::Legacy));
        assert_eq!(generation_of("/tenants/nope"), Some(Generation::Legacy));
        assert_eq!(
            generation_of("/connectors/nope/x"),
            Some(Generation::Current)
        );
        assert_eq!(generation_of("/recall/nope"), Some(Generation::Legacy));
    }
}
