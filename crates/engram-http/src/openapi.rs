//! The OpenAPI 3.1 document, generated from the route declarations themselves.

use utoipa::openapi::path::{HttpMethod, OperationBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi, ResponseBuilder, SecurityRequirement};

#[derive(utoipa::OpenApi)]
#[openapi(info(
    title = "engram",
    description = "Self-hosted context retrieval: knowledge and memories, hybrid search. Current routes take \
                   `API-Version: 2` and answer in the envelope; legacy routes answer plain objects."
))]
struct ApiDoc;

/// Where the document is served.
pub(crate) const PATH: &str = "/openapi.json";

pub(crate) fn base() -> OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// Adds what applies to every route: bearer authentication.
pub(crate) fn finish(mut doc: OpenApi) -> OpenApi {
    // A catch-all segment (`{*name}`, an id that may hold `/`) is an ordinary path parameter in
    // the document.
    let paths = std::mem::take(&mut doc.paths.paths);
    doc.paths.paths = paths
        .into_iter()
        .map(|(path, item)| (path.replace("{*", "{"), item))
        .collect();
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
    doc.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    let describe_self = OperationBuilder::new()
        .tag("service")
        .summary(Some("This OpenAPI 3.1 document"))
        .security(SecurityRequirement::default())
        .response(
            "200",
            ResponseBuilder::new()
                .description("the OpenAPI document")
                .build(),
        )
        .build();
    doc.paths
        .add_path_operation(PATH, vec![HttpMethod::Get], describe_self);
    doc
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_route_is_documented_and_the_document_is_3_1() {
        let doc = crate::openapi_document();
        let json = serde_json::to_value(&doc).unwrap();
        assert!(json["openapi"].as_str().unwrap().starts_with("3.1"));
        for path in ["/healthz", "/openapi.json", "/databases", "/tenants/create"] {
            assert!(json["paths"].get(path).is_some(), "{path} missing");
        }
        assert_eq!(
            json["paths"]["/healthz"]["get"]["security"],
            serde_json::json!([{}])
        );
    }
}
