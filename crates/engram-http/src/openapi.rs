//! The OpenAPI 3.1 document, generated from the route declarations themselves.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi, SecurityRequirement};

#[derive(utoipa::OpenApi)]
#[openapi(info(
    title = "engram",
    description = "Self-hosted context retrieval: knowledge and memories, hybrid search. Current routes take \
                   `API-Version: 2` and answer in the envelope; legacy routes answer plain objects."
))]
struct ApiDoc;

pub fn base() -> OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// Adds what applies to every route: bearer authentication.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("prefix.secret")
                .description(Some("An API key made by `engram keys create`"))
                .build(),
        ),
    );
    doc.security = Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
    doc
}
