//! Current database routes: `/databases*`.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engram_app::{parse_database_name, App};
use engram_types::DatabaseName;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::*;
use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery};
use crate::wire::{Deprecations, Ignored, ScopeParams};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_database, list_databases, delete_database))
        .routes(routes!(database_status))
        .routes(routes!(list_collections, delete_collection))
        .routes(routes!(database_stats))
        .routes(routes!(metadata_schema, add_schema_fields))
        .routes(routes!(rename_database))
        .routes(routes!(instructions, update_instructions))
}

/// Resolves `database` (or its deprecated alias `tenant_id`) from a query string.
fn database_param(
    params: DatabaseParams,
    deprecations: &mut Deprecations,
) -> Result<DatabaseName, ApiError> {
    let name = deprecations.require(params.database, params.tenant_id, "database", "tenant_id")?;
    Ok(parse_database_name("database", &name)?)
}

/// Create a database. Provisioning continues in the background; poll `GET /databases/status`.
#[utoipa::path(post, path = "/databases", tag = "databases", security(("bearer" = ["admin"])), request_body = CreateDatabaseRequest,
    responses(
        (status = 202, body = EnvelopeDoc<CreatedDatabase>, description = "accepted; provisioning"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN"),
        (status = 409, body = ErrorEnvelopeDoc, description = "DATABASE_ALREADY_EXISTS"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: bad metadata schema"),
    ))]
async fn create_database(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Json(body): Json<CreateDatabaseRequest>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let mut ignored = Ignored::of_unknown(&body.unknown);
    for (parameter, fields) in [
        ("database_metadata_schema", &body.database_metadata_schema),
        ("tenant_metadata_schema", &body.tenant_metadata_schema),
    ] {
        crate::wire::FieldDto::note_inert(
            fields.as_deref().unwrap_or_default(),
            parameter,
            &mut ignored,
        );
    }
    let request = body.into_request(&mut deprecations)?;
    for (parameter, reason) in request.inert() {
        ignored.note(parameter, reason);
    }
    let db = app.create_database(&who, request).await?;
    Ok(
        Envelope::new(StatusCode::ACCEPTED, &CreatedDatabase::from(&db))
            .scoped(&db, None)
            .deprecations(deprecations)
            .ignored(&ignored),
    )
}

/// List the databases the key may use.
#[utoipa::path(get, path = "/databases", tag = "databases", security(("bearer" = ["read"])),
    responses((status = 200, body = EnvelopeDoc<DatabaseList>)))]
async fn list_databases(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
) -> Result<Envelope, ApiError> {
    let names: Vec<String> = app
        .list_databases(&who)
        .await?
        .into_iter()
        .map(|db| db.name.to_string())
        .collect();
    let message = format!("{} databases", names.len());
    Ok(Envelope::ok(&DatabaseList {
        tenant_ids: names.clone(),
        databases: names,
        message,
    }))
}

/// Readiness flags of a database.
#[utoipa::path(get, path = "/databases/status", tag = "databases", security(("bearer" = ["read"])), params(DatabaseParams),
    responses(
        (status = 200, body = EnvelopeDoc<DatabaseStatus>),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn database_status(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<DatabaseParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let name = database_param(params, &mut deprecations)?;
    let db = app.database(&who, &name).await?;
    Ok(Envelope::ok(&DatabaseStatus::from(&db))
        .scoped(&db, None)
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// Collections of a database (created on first use; the default one always exists).
#[utoipa::path(get, path = "/databases/collections", tag = "databases", security(("bearer" = ["read"])), params(DatabaseParams),
    responses(
        (status = 200, body = EnvelopeDoc<CollectionList>),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn list_collections(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<DatabaseParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let name = database_param(params, &mut deprecations)?;
    let names: Vec<String> = app
        .list_collections(&who, &name)
        .await?
        .into_iter()
        .map(|c| c.to_string())
        .collect();
    let message = format!("{} collections", names.len());
    Ok(Envelope::ok(&CollectionList {
        sub_tenant_ids: names.clone(),
        collections: names,
        message,
    })
    .deprecations(deprecations)
    .ignored(&ignored))
}

/// Permanently remove one collection and everything in it; the database stays (its default
/// collection stays listed, emptied). A collection that does not exist deletes nothing.
#[utoipa::path(delete, path = "/databases/collections", tag = "databases", security(("bearer" = ["write"])), params(ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<CollectionDeleted>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: collection missing or malformed"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn delete_collection(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<ScopeParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (name, collection) = deprecations.scope_params(params)?;
    let collection = collection.unwrap_or_default();
    let (db, collection, deleted) = app.delete_collection(&who, &name, &collection).await?;
    let collection = collection.to_string();
    let data = CollectionDeleted {
        database: db.name.to_string(),
        tenant_id: db.name.to_string(),
        sub_tenant_id: collection.clone(),
        status: "deleted".into(),
        message: format!("collection `{collection}` deleted with its {deleted} items"),
        collection: collection.clone(),
    };
    Ok(Envelope::ok(&data)
        .scoped(&db, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// Object counts of a database.
#[utoipa::path(get, path = "/databases/stats", tag = "databases", security(("bearer" = ["read"])), params(DatabaseParams),
    responses(
        (status = 200, body = EnvelopeDoc<DatabaseStats>),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn database_stats(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<DatabaseParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let name = database_param(params, &mut deprecations)?;
    let stats = app.database_stats(&who, &name).await?;
    Ok(Envelope::ok(&DatabaseStats::from(&stats))
        .scoped(&stats.database, None)
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// Delete a database: scheduled at once, purged in the background. Its name is free again.
#[utoipa::path(delete, path = "/databases", tag = "databases", security(("bearer" = ["admin"])), params(DatabaseParams),
    responses(
        (status = 200, body = EnvelopeDoc<DeletedDatabase>),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn delete_database(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<DatabaseParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let name = database_param(params, &mut deprecations)?;
    let db = app.delete_database(&who, &name).await?;
    let data = DeletedDatabase {
        database: db.name.to_string(),
        tenant_id: db.name.to_string(),
        status: "deletion_scheduled",
        message: format!("database `{}` is scheduled for deletion", db.name),
    };
    Ok(Envelope::ok(&data)
        .scoped(&db, None)
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// A database's metadata schema: its fields, in the order they were declared.
#[utoipa::path(get, path = "/databases/{database}/metadata-schema", tag = "databases", security(("bearer" = ["read"])),
    params(("database" = String, Path, description = "database name")),
    responses(
        (status = 200, body = EnvelopeDoc<MetadataSchema>),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn metadata_schema(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Path(database): Path<String>,
) -> Result<Envelope, ApiError> {
    let name = parse_database_name("database", &database)?;
    let db = app.database(&who, &name).await?;
    let data = MetadataSchema {
        database: db.name.to_string(),
        tenant_id: db.name.to_string(),
        fields: schema_dto(&db),
    };
    Ok(Envelope::ok(&data).scoped(&db, None))
}

/// Add fields to a database's metadata schema. Existing fields cannot be changed or removed.
/// Answered as a plain object (as the hosted service's clients read it).
#[utoipa::path(patch, path = "/databases/{database}/metadata-schema", tag = "databases", security(("bearer" = ["admin"])),
    params(("database" = String, Path, description = "database name")),
    request_body = AddSchemaFieldsRequest,
    responses(
        (status = 200, body = AddedSchemaFields),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: bad type, or field exists"),
    ))]
async fn add_schema_fields(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Path(database): Path<String>,
    Json(body): Json<AddSchemaFieldsRequest>,
) -> Result<Response, ApiError> {
    let name = parse_database_name("database", &database)?;
    let mut ignored = Ignored::of_unknown(&body.unknown);
    crate::wire::FieldDto::note_inert(&body.add_fields, "add_fields", &mut ignored);
    let fields = body.add_fields.into_iter().map(Into::into).collect();
    let (added_fields, db) = app.add_schema_fields(&who, &name, fields).await?;
    let data = AddedSchemaFields {
        added_fields,
        database: db.name.to_string(),
        tenant_id: db.name.to_string(),
        database_metadata_schema: schema_dto(&db),
    };
    Ok(Envelope::ok(&data)
        .scoped(&db, None)
        .plain_too()
        .ignored(&ignored)
        .into_response())
}

/// Rename a database in place: its data, collections and key restrictions move with it; the
/// old name stops resolving at once and is free for a new database.
#[utoipa::path(patch, path = "/databases/{database}", tag = "databases", security(("bearer" = ["admin"])),
    params(("database" = String, Path, description = "current database name")),
    request_body = RenameRequest,
    responses(
        (status = 200, body = EnvelopeDoc<RenamedDatabase>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: new_name missing or malformed"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 409, body = ErrorEnvelopeDoc, description = "DATABASE_ALREADY_EXISTS: the new name is taken"),
    ))]
async fn rename_database(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Path(database): Path<String>,
    Json(body): Json<RenameRequest>,
) -> Result<Envelope, ApiError> {
    let name = parse_database_name("database", &database)?;
    let (old, db) = app.rename_database(&who, &name, &body.new_name).await?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let data = RenamedDatabase {
        database: db.name.to_string(),
        tenant_id: db.name.to_string(),
        old_database: old.to_string(),
        old_tenant_id: old.to_string(),
        status: "renamed",
        message: format!("database `{old}` is now `{}`", db.name),
        connector_reassignment: "complete",
    };
    Ok(Envelope::ok(&data).scoped(&db, None).ignored(&ignored))
}

/// A database's custom ingestion instructions and its collections'.
#[utoipa::path(get, path = "/databases/{database}/instructions", tag = "databases", security(("bearer" = ["read"])),
    params(("database" = String, Path, description = "database name")),
    responses(
        (status = 200, body = InstructionsDto),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn instructions(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Path(database): Path<String>,
) -> Result<Response, ApiError> {
    let name = parse_database_name("database", &database)?;
    let db = app.database(&who, &name).await?;
    Ok(Envelope::ok(&InstructionsDto::from(&db))
        .scoped(&db, None)
        .plain_too()
        .into_response())
}

/// Set or clear the custom ingestion instructions of a database and of its collections (merged:
/// a collection absent from the request keeps its own). Items accepted from now on carry them,
/// database first, then collection, then the item's own; indexed items are not reprocessed.
#[utoipa::path(patch, path = "/databases/{database}/instructions", tag = "databases", security(("bearer" = ["admin"])),
    params(("database" = String, Path, description = "database name")),
    request_body = InstructionsRequest,
    responses(
        (status = 200, body = InstructionsDto),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: nothing to set, over 4000 characters, bad collection name"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn update_instructions(
    axum::extract::State(app): axum::extract::State<App>,
    Auth(who): Auth,
    Path(database): Path<String>,
    Json(body): Json<InstructionsRequest>,
) -> Result<Response, ApiError> {
    let name = parse_database_name("database", &database)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let update = engram_app::InstructionsUpdate {
        custom_instructions: body.custom_instructions,
        collections: body.collections,
    };
    let db = app.update_instructions(&who, &name, update).await?;
    Ok(Envelope::ok(&InstructionsDto::from(&db))
        .scoped(&db, None)
        .plain_too()
        .ignored(&ignored)
        .into_response())
}
