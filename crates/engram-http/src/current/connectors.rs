//! Connector routes: the catalog, connectors and their resources, syncs, status, and the
//! credential vault. Successful responses are plain objects (the spec's documented contract for
//! connector management; fields a request sent that the route does not know are listed in
//! `ignored_parameters`); errors use the current error envelope.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use engram_app::{App, CreateConnector, ResourceMapping, ResourceUpdate, UpdateConnector};
use serde::Serialize;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::connectors_wire::*;
use crate::envelope::ErrorEnvelopeDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery};
use crate::wire::{Deprecations, Ignored};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(catalog))
        .routes(routes!(providers))
        .routes(routes!(discover_preview))
        .routes(routes!(list_connectors, create_connector))
        .routes(routes!(get_connector, update_connector, delete_connector))
        .routes(routes!(discover))
        .routes(routes!(configure))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(list_resources, create_resource))
        .routes(routes!(update_resource, delete_resource))
        .routes(routes!(status))
        .routes(routes!(sync))
        .routes(routes!(rotate_refresh_token))
        .routes(routes!(oauth_start))
        .routes(routes!(oauth_callback))
        .routes(routes!(push_event))
        .routes(routes!(vault))
        .routes(routes!(vault_update))
        .routes(routes!(vault_reveal))
}

/// A plain object, with the request's unknown fields in `ignored_parameters` and deprecated
/// aliases in `deprecation` (and the `Deprecation` header).
fn object(
    status: StatusCode,
    body: impl Serialize,
    ignored: &Ignored,
    deprecations: Deprecations,
) -> Response {
    let mut value = serde_json::to_value(body).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        if let Some(list) = ignored.to_json() {
            map.insert("ignored_parameters".into(), list);
        }
        if !deprecations.is_empty() {
            map.insert(
                "deprecation".into(),
                serde_json::to_value(deprecations.into_vec()).unwrap_or(Value::Null),
            );
        }
    }
    let deprecated = value.get("deprecation").is_some();
    let mut response = (status, axum::Json(value)).into_response();
    if deprecated {
        response
            .headers_mut()
            .insert("deprecation", HeaderValue::from_static("true"));
    }
    response
}

fn ok(body: impl Serialize) -> Response {
    object(
        StatusCode::OK,
        body,
        &Ignored::default(),
        Deprecations::default(),
    )
}

/// The catalog of providers this server offers, in display order.
#[utoipa::path(get, path = "/connector-catalog", tag = "connectors", security(("bearer" = ["read"])),
    responses((status = 200, body = CatalogList)))]
async fn catalog(State(app): State<App>, Auth(_who): Auth) -> Result<Response, ApiError> {
    let connectors = app
        .provider_catalog()
        .into_iter()
        .map(CatalogEntry::from)
        .collect();
    Ok(ok(CatalogList { connectors }))
}

/// Without `id`: the catalog in display order. With `id`: the provider's description
/// (fields, filters, credential schema, interval bounds).
#[utoipa::path(get, path = "/connectors/providers", tag = "connectors", security(("bearer" = ["read"])), params(ProvidersParams),
    responses(
        (status = 200, body = ProviderList, description = "the catalog, or with `id` a ProviderDescription"),
        (status = 404, body = ErrorEnvelopeDoc, description = "NOT_FOUND: no such provider"),
    ))]
async fn providers(
    State(app): State<App>,
    Auth(_who): Auth,
    NotedQuery(params, ignored): NotedQuery<ProvidersParams>,
) -> Result<Response, ApiError> {
    let none = Deprecations::default();
    match params.id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => {
            let info = app.provider_info(id)?;
            Ok(object(
                StatusCode::OK,
                ProviderDescription::from(info),
                &ignored,
                none,
            ))
        }
        None => {
            let providers = app
                .provider_catalog()
                .into_iter()
                .map(CatalogEntry::from)
                .collect();
            Ok(object(
                StatusCode::OK,
                ProviderList { providers },
                &ignored,
                none,
            ))
        }
    }
}

/// The resources an account offers, from credentials given now (nothing is stored).
#[utoipa::path(post, path = "/connector-discovery", tag = "connectors", security(("bearer" = ["admin"])), params(DiscoverParams),
    request_body = DiscoverPreviewRequest,
    responses(
        (status = 200, body = DiscoverResponse),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: provider missing or unknown"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: credentials do not match the schema"),
        (status = 502, body = ErrorEnvelopeDoc, description = "PROVIDER_ERROR: the source could not be read"),
    ))]
async fn discover_preview(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, mut ignored): NotedQuery<DiscoverParams>,
    Json(body): Json<DiscoverPreviewRequest>,
) -> Result<Response, ApiError> {
    ignored.unknown_fields(&body.unknown);
    ignored.note_if(
        body.auth_type.is_some(),
        "auth_type",
        "every provider here has one way to authenticate",
    );
    let provider = body
        .provider
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::invalid("missing required field `provider`"))?;
    let found = app
        .discover_preview(&who, &provider, body.credentials)
        .await?;
    let page = DiscoverResponse::page(provider, found, params.cursor.as_deref(), params.limit);
    Ok(object(
        StatusCode::OK,
        page,
        &ignored,
        Deprecations::default(),
    ))
}

/// The organization's connectors (those of databases the key may use), oldest first.
#[utoipa::path(get, path = "/connectors", tag = "connectors", security(("bearer" = ["admin"])), params(ListParams),
    responses((status = 200, body = ConnectorList)))]
async fn list_connectors(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<ListParams>,
) -> Result<Response, ApiError> {
    let mut views = app.list_connectors(&who).await?;
    let all = views.len();
    if let Some(provider) = params.provider.as_deref().filter(|p| !p.is_empty()) {
        views.retain(|v| v.record.provider == provider);
    }
    let limit = app.config().connectors.max_per_org;
    let list = ConnectorList {
        connectors: views.iter().map(ConnectorDto::from).collect(),
        connector_limit: ConnectorLimit {
            count: all,
            limit,
            plan: "self-hosted".into(),
            message: format!("{all} of {limit} connectors (connectors.max_per_org)"),
        },
    };
    Ok(object(
        StatusCode::OK,
        list,
        &ignored,
        Deprecations::default(),
    ))
}

/// Create a connector and store its credentials (sealed); nothing syncs until resources are
/// configured.
#[utoipa::path(post, path = "/connectors", tag = "connectors", security(("bearer" = ["admin"])), request_body = CreateConnectorRequest,
    responses(
        (status = 201, body = ConnectorChanged, description = "created"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: provider or database missing, provider unknown, sync_interval_seconds out of range"),
        (status = 402, body = ErrorEnvelopeDoc, description = "PLAN_LIMIT_EXCEEDED: the organization's connector limit"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the key may not use the database"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 409, body = ErrorEnvelopeDoc, description = "CONNECTOR_ALREADY_EXISTS: same provider and account scope"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: credentials do not match the provider's credential_schema"),
    ))]
async fn create_connector(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<CreateConnectorRequest>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let mut deprecations = Deprecations::default();
    let database = deprecations.pick(body.database, body.tenant_id, "database", "tenant_id")?;
    let collection = deprecations.pick(
        body.collection,
        body.sub_tenant_id,
        "collection",
        "sub_tenant_id",
    )?;
    let view = app
        .create_connector(
            &who,
            CreateConnector {
                provider: body.provider.unwrap_or_default(),
                database: database.unwrap_or_default(),
                collection,
                credentials: body.credentials,
                auth_type: body.auth_type.unwrap_or_default(),
                name: body.name.unwrap_or_default(),
                account_scope: body.provider_account_scope.unwrap_or_default(),
                custom_instructions: body.custom_instructions.unwrap_or_default(),
                sync_interval_seconds: body.sync_interval_seconds,
            },
        )
        .await?;
    let changed = ConnectorChanged {
        connector: ConnectorDto::from(&view),
        min_sync_interval_seconds: view.bounds.min_s,
        max_sync_interval_seconds: view.bounds.max_s,
        credentials_updated: None,
        custom_instructions_updated: None,
    };
    let mut body = serde_json::to_value(changed).unwrap_or(Value::Null);
    if let Some(map) = body.as_object_mut() {
        map.insert(
            "message".into(),
            Value::from("connector created; configure resources (POST /connectors/{id}/configure) to start syncing"),
        );
    }
    Ok(object(StatusCode::CREATED, body, &ignored, deprecations))
}

/// One connector.
#[utoipa::path(get, path = "/connectors/{id}", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = ConnectorDto),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn get_connector(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = app.connector(&who, &id).await?;
    Ok(ok(ConnectorDto::from(&view)))
}

/// Update credentials (merged into the stored ones, checked against the schema; clears
/// `needs_reauth`), the interval (0 resets to the provider default; out of bounds is 400),
/// instructions or the name. Any update clears `sync_blocked`.
#[utoipa::path(patch, path = "/connectors/{id}", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    request_body = UpdateConnectorRequest,
    responses(
        (status = 200, body = ConnectorChanged),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: sync_interval_seconds out of range"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: credentials do not match the schema"),
    ))]
async fn update_connector(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<UpdateConnectorRequest>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let (credentials_updated, instructions_updated) = (
        body.credentials.is_some(),
        body.custom_instructions.is_some(),
    );
    let view = app
        .update_connector(
            &who,
            &id,
            UpdateConnector {
                credentials: body.credentials,
                sync_interval_seconds: body.sync_interval_seconds,
                custom_instructions: body.custom_instructions,
                name: body.name,
            },
        )
        .await?;
    let changed = ConnectorChanged {
        connector: ConnectorDto::from(&view),
        min_sync_interval_seconds: view.bounds.min_s,
        max_sync_interval_seconds: view.bounds.max_s,
        credentials_updated: Some(credentials_updated),
        custom_instructions_updated: Some(instructions_updated),
    };
    Ok(object(
        StatusCode::OK,
        changed,
        &ignored,
        Deprecations::default(),
    ))
}

/// Delete a connector, its resources and stored credentials; syncs stop; what it synced stays.
#[utoipa::path(delete, path = "/connectors/{id}", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = ConnectorDeleted),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn delete_connector(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    app.delete_connector(&who, &id).await?;
    Ok(ok(ConnectorDeleted {
        connector_id: id,
        deleted: true,
    }))
}

/// The resources the connector's account offers, read with its stored credentials.
#[utoipa::path(get, path = "/connectors/{id}/discover", tag = "connectors", security(("bearer" = ["admin"])),
    params(("id" = String, Path), DiscoverParams),
    responses(
        (status = 200, body = DiscoverResponse),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
        (status = 502, body = ErrorEnvelopeDoc, description = "PROVIDER_ERROR: the source could not be read"),
    ))]
async fn discover(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    NotedQuery(params, ignored): NotedQuery<DiscoverParams>,
) -> Result<Response, ApiError> {
    let (provider, found) = app.discover(&who, &id).await?;
    let page = DiscoverResponse::page(provider, found, params.cursor.as_deref(), params.limit);
    Ok(object(
        StatusCode::OK,
        page,
        &ignored,
        Deprecations::default(),
    ))
}

fn mapping(
    dto: ResourceMappingDto,
    deprecations: &mut Deprecations,
    ignored: &mut Ignored,
) -> Result<ResourceMapping, ApiError> {
    ignored.unknown_fields(&dto.unknown);
    let database = deprecations.pick(
        dto.database.or(dto.database_override),
        dto.tenant_id.or(dto.tenant_id_override),
        "database",
        "tenant_id",
    )?;
    let collection = deprecations.pick(
        dto.collection.or(dto.collection_override),
        dto.sub_tenant_id.or(dto.sub_tenant_id_override),
        "collection",
        "sub_tenant_id",
    )?;
    Ok(ResourceMapping {
        resource_id: dto.resource_id.unwrap_or_default(),
        resource_type: dto.resource_type.unwrap_or_default(),
        display_name: dto.name.or(dto.display_name).unwrap_or_default(),
        database: database.unwrap_or_default(),
        collection: collection.unwrap_or_default(),
        custom_instructions: dto.custom_instructions.unwrap_or_default(),
        metadata: dto.metadata.unwrap_or_default(),
        additional_metadata: dto.additional_metadata.unwrap_or_default(),
        filters: dto.filters.unwrap_or(Value::Null),
        acl: dto.acl,
        sync_mode: dto.sync_mode.unwrap_or_default(),
        provider_metadata: dto.provider_metadata.unwrap_or(Value::Null),
    })
}

/// Choose what to sync (resources are created or their settings replaced; sync positions are
/// kept). The first sync starts at once.
#[utoipa::path(post, path = "/connectors/{id}/configure", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    request_body = ConfigureRequest,
    responses(
        (status = 200, body = Configured),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: no resources, a resource without id, an unknown sync_mode"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND or DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: metadata not in the database's schema"),
    ))]
async fn configure(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<ConfigureRequest>,
) -> Result<Response, ApiError> {
    let mut ignored = Ignored::of_unknown(&body.unknown);
    ignored.note_if(
        body.lookback_days.is_some(),
        "lookback_days",
        "every provider here syncs whole resources",
    );
    let mut deprecations = Deprecations::default();
    let mut mappings = Vec::new();
    for dto in body.resources.unwrap_or_default() {
        mappings.push(mapping(dto, &mut deprecations, &mut ignored)?);
    }
    let configured = app.configure_resources(&who, &id, mappings).await?;
    let view = app.connector(&who, &id).await?;
    let done = Configured {
        connector_id: id,
        configured,
        backfill: true,
        first_sync_at: view.record.next_sync_at.map(engram_app::format_ms),
        message: format!("{configured} resource(s) configured; the first sync starts now"),
        warnings: Vec::new(),
    };
    Ok(object(StatusCode::OK, done, &ignored, deprecations))
}

fn pause_state(view: &engram_app::ConnectorView) -> PauseState {
    PauseState {
        connector_id: view.record.id.clone(),
        paused: view.record.paused_at.is_some(),
        paused_at: view.record.paused_at.map(engram_app::format_ms),
        lifecycle: view.health.lifecycle.as_str().to_owned(),
        next_sync_at: view.record.next_sync_at.map(engram_app::format_ms),
    }
}

/// Stop syncing: no scheduled or manual sync runs until resumed; a running sync stops at its
/// next step; positions are kept.
#[utoipa::path(post, path = "/connectors/{id}/pause", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = PauseState),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn pause(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = app.pause_connector(&who, &id, true).await?;
    Ok(ok(pause_state(&view)))
}

/// Resume syncing; the connector is due at once.
#[utoipa::path(post, path = "/connectors/{id}/resume", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = PauseState),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn resume(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = app.pause_connector(&who, &id, false).await?;
    Ok(ok(pause_state(&view)))
}

/// The configured resources.
#[utoipa::path(get, path = "/connectors/{id}/resources", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = ResourceList),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn list_resources(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let resources = app.list_resources(&who, &id).await?;
    Ok(ok(ResourceList {
        resources: resources.iter().map(ResourceDto::from).collect(),
    }))
}

/// Add one resource (or replace its settings); it syncs at once.
#[utoipa::path(post, path = "/connectors/{id}/resources", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    request_body = ResourceMappingDto,
    responses(
        (status = 201, body = ResourceDto),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: resource_id missing"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn create_resource(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<ResourceMappingDto>,
) -> Result<Response, ApiError> {
    let (mut ignored, mut deprecations) = (Ignored::default(), Deprecations::default());
    let mapping = mapping(body, &mut deprecations, &mut ignored)?;
    let resource_id = mapping.resource_id.clone();
    app.configure_resources(&who, &id, vec![mapping]).await?;
    let resource = app.resource(&who, &id, &resource_id).await?;
    Ok(object(
        StatusCode::CREATED,
        ResourceDto::from(&resource),
        &ignored,
        deprecations,
    ))
}

/// Change one resource's access rule or instructions.
#[utoipa::path(patch, path = "/connectors/{id}/resources/{*resource_id}", tag = "connectors", security(("bearer" = ["admin"])),
    params(("id" = String, Path), ("resource_id" = String, Path)),
    request_body = ResourcePatch,
    responses(
        (status = 200, body = ResourceDto),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: neither acl nor custom_instructions, or acl not a list of strings"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn update_resource(
    State(app): State<App>,
    Auth(who): Auth,
    Path((id, resource_id)): Path<(String, String)>,
    Json(body): Json<ResourcePatch>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let acl = match body.acl {
        None => None,
        Some(Value::Null) => Some(None),
        Some(value) => Some(Some(serde_json::from_value::<Vec<String>>(value).map_err(
            |_| ApiError::invalid("`acl` must be a list of principals (strings) or null"),
        )?)),
    };
    let resource = app
        .update_resource(
            &who,
            &id,
            &resource_id,
            ResourceUpdate {
                custom_instructions: body.custom_instructions,
                acl,
            },
        )
        .await?;
    Ok(object(
        StatusCode::OK,
        ResourceDto::from(&resource),
        &ignored,
        Deprecations::default(),
    ))
}

/// Stop syncing one resource; what it synced stays.
#[utoipa::path(delete, path = "/connectors/{id}/resources/{*resource_id}", tag = "connectors", security(("bearer" = ["admin"])),
    params(("id" = String, Path), ("resource_id" = String, Path)),
    responses(
        (status = 200, body = ResourceDeleted),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn delete_resource(
    State(app): State<App>,
    Auth(who): Auth,
    Path((id, resource_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    app.delete_resource(&who, &id, &resource_id).await?;
    Ok(ok(ResourceDeleted {
        connector_id: id,
        resource_id,
        deleted: true,
    }))
}

/// Health, lifecycle, each resource's state and the latest runs.
#[utoipa::path(get, path = "/connectors/{id}/status", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = StatusResponse),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
    ))]
async fn status(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let status = app.connector_status(&who, &id).await?;
    Ok(ok(StatusResponse::of(&status)))
}

/// Sync now. A sync asked for while one runs starts when it ends.
#[utoipa::path(post, path = "/connectors/{id}/sync", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 202, body = SyncQueued),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: no resources configured"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
        (status = 409, body = ErrorEnvelopeDoc, description = "CONNECTOR_PAUSED"),
    ))]
async fn sync(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let run_id = app.request_sync(&who, &id).await?;
    Ok(object(
        StatusCode::ACCEPTED,
        SyncQueued {
            workflow_id: run_id.clone(),
            run_id,
            connector_id: id,
            message: "sync queued".into(),
        },
        &Ignored::default(),
        Deprecations::default(),
    ))
}

/// Start an OAuth authorization of the connector with its `oauth` app (`client_id`,
/// `client_secret` in its credentials): answers the provider's page to send the user to. The
/// provider sends them back to `redirect_uri` (`connectors.public_url` +
/// `/connectors/oauth/callback`, else this request's host), which stores the tokens.
#[utoipa::path(post, path = "/connectors/{id}/oauth/start", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses(
        (status = 200, body = OAuthStarted),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: the provider authorizes with tokens only"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: the credentials hold no `oauth.client_id`"),
    ))]
async fn oauth_start(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok());
    let started = app.start_oauth(&who, &id, host, None).await?;
    Ok(ok(OAuthStarted {
        connector_id: started.connector_id,
        authorization_url: started.authorization_url,
        redirect_uri: started.redirect_uri,
        expires_at: started.expires_at.rfc3339(),
    }))
}

/// Where the provider sends the user back after an OAuth authorization. No API key: the sealed
/// `state` engram made at the start authenticates it (once, for 10 minutes). The code is
/// exchanged, the tokens sealed into the connector's credentials (clearing `needs_reauth`), and
/// a sync starts when the connector has resources.
#[utoipa::path(get, path = "/connectors/oauth/callback", tag = "connectors", security(()),
    params(
        ("state" = String, Query, description = "engram's sealed state, as the provider returns it"),
        ("code" = Option<String>, Query, description = "the authorization code"),
        ("error" = Option<String>, Query, description = "the provider's refusal (`access_denied`)"),
    ),
    responses(
        (status = 200, body = OAuthAuthorized),
        (status = 303, description = "authorized; an authorization started from the console goes back to the connector's page there"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: unknown, used or expired state; the authorization refused"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: the provider refused the app (its id or secret)"),
        (status = 502, body = ErrorEnvelopeDoc, description = "PROVIDER_ERROR: the token endpoint could not be reached"),
    ))]
async fn oauth_callback(
    State(app): State<App>,
    uri: axum::http::Uri,
) -> Result<Response, ApiError> {
    let finished = app.finish_oauth(uri.query().unwrap_or("")).await?;
    // Started from the console: back to the connector's page there.
    if let Some(page) = &finished.return_to {
        return Ok(axum::response::Redirect::to(page).into_response());
    }
    Ok(ok(OAuthAuthorized {
        message: format!(
            "connector {} is authorized; you may close this page",
            finished.connector_id
        ),
        connector_id: finished.connector_id,
        provider: finished.provider,
        authorized: true,
        run_id: finished.sync_run_id,
    }))
}

/// Where a provider pushes events (GitHub and Linear webhooks): no API key; each delivery is
/// verified by the provider's signature with the connector's `webhook_secret` (GitHub's
/// `X-Hub-Signature-256`; Linear's `Linear-Signature` and a timestamp within a minute), a
/// delivery id seen before is refused as a replay, and a verified event queues a sync at once.
/// An event that checks the endpoint (Slack's `url_verification`, signed with `X-Slack-Signature`)
/// is answered with the body the provider expects (`{"challenge": …}`).
#[utoipa::path(post, path = "/connectors/{id}/events", tag = "connectors", security(()), params(("id" = String, Path)),
    request_body(content = String, content_type = "application/json", description = "the provider's event, as it signed it"),
    responses(
        (status = 202, body = PushAnswer, description = "verified; a sync is queued"),
        (status = 200, body = PushAnswer, description = "verified; nothing to sync (a ping, a replay, a paused connector)"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: not an event of this provider; FILE_TOO_LARGE: over 25 MiB"),
        (status = 401, body = ErrorEnvelopeDoc, description = "UNAUTHORIZED: the signature does not verify, or the event is too old"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND: no such connector, or its provider sends no events"),
    ))]
async fn push_event(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    if body.len() > engram_app::PUSH_MAX_BYTES {
        return Err(ApiError::new(
            engram_types::ErrorCode::FileTooLarge,
            format!(
                "the event is {} bytes; at most {} are read",
                body.len(),
                engram_app::PUSH_MAX_BYTES
            ),
        ));
    }
    let headers: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let received = app.receive_push(&id, &headers, &body).await?;
    if let Some(answer) = received.answer {
        // The body the provider expects, as it is (Slack's `{"challenge": …}`).
        return Ok((StatusCode::OK, axum::Json(answer)).into_response());
    }
    let status = if received.sync_run_id.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(object(
        status,
        PushAnswer {
            connector_id: received.connector_id,
            run_id: received.sync_run_id,
            message: received.message,
        },
        &Ignored::default(),
        Deprecations::default(),
    ))
}

/// The hosted service's internal refresh-token rotation: not for API keys.
#[utoipa::path(patch, path = "/connectors/{id}/credentials", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path)),
    responses((status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: always, for API keys; use PATCH /connectors/{id}")))]
async fn rotate_refresh_token(
    Auth(_who): Auth,
    Path(_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(engram_app::AppError::Forbidden(
        "refresh-token rotation is internal; update credentials with PATCH /connectors/{id}".into(),
    )
    .into())
}

/// Stored credentials, by connector: field names only, never values.
#[utoipa::path(get, path = "/credential-vault", tag = "connectors", security(("bearer" = ["admin"])),
    responses((status = 200, body = VaultList)))]
async fn vault(State(app): State<App>, Auth(who): Auth) -> Result<Response, ApiError> {
    let (entries, unavailable) = app.vault(&who).await?;
    let credentials: Vec<VaultEntryDto> = entries
        .into_iter()
        .map(|e| VaultEntryDto {
            credential_id: e.connector.id.clone(),
            connector_id: e.connector.id,
            provider: e.connector.provider,
            database: e.connector.database_name,
            collection: e.connector.collection,
            label: e.connector.name,
            fields: e.fields,
        })
        .collect();
    Ok(ok(VaultList {
        count: credentials.len(),
        credentials,
        unavailable_count: unavailable,
    }))
}

/// Update a connector's stored credentials (merged, checked against the schema).
#[utoipa::path(patch, path = "/credential-vault/{id}", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path, description = "the connector id")),
    request_body = VaultUpdate,
    responses(
        (status = 200, body = VaultUpdated),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: credentials do not match the schema"),
    ))]
async fn vault_update(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<VaultUpdate>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let credentials = body
        .credentials
        .ok_or_else(|| ApiError::invalid("missing required field `credentials`"))?;
    let update = UpdateConnector {
        credentials: Some(credentials),
        ..UpdateConnector::default()
    };
    app.update_connector(&who, &id, update).await?;
    Ok(object(
        StatusCode::OK,
        VaultUpdated {
            credential_id: id,
            updated: true,
        },
        &ignored,
        Deprecations::default(),
    ))
}

/// One credential field's value, to the organization that stored it. Never cached.
#[utoipa::path(post, path = "/credential-vault/{id}/reveal", tag = "connectors", security(("bearer" = ["admin"])), params(("id" = String, Path, description = "the connector id")),
    request_body = RevealRequest,
    responses(
        (status = 200, body = Revealed),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: field missing"),
        (status = 404, body = ErrorEnvelopeDoc, description = "CONNECTOR_NOT_FOUND: no such connector or field"),
    ))]
async fn vault_reveal(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<RevealRequest>,
) -> Result<Response, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let field = body
        .field
        .filter(|f| !f.is_empty())
        .ok_or_else(|| ApiError::invalid("missing required field `field`"))?;
    let (provider, value) = app.reveal_credential(&who, &id, &field).await?;
    let mut response = object(
        StatusCode::OK,
        Revealed {
            credential_id: id,
            field,
            provider,
            value,
        },
        &ignored,
        Deprecations::default(),
    );
    response
        .headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-store"));
    Ok(response)
}
