//! API keys over HTTP, for a key with the `admin` scope: `POST /keys` makes one of the caller's
//! organization (its secret shown once), `GET /keys` lists them by prefix, `DELETE
//! /keys/{prefix}` revokes one. `engram keys` on the command line writes the same store.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use engram_app::{ApiKeyRecord, App, KeySpec};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::Ignored;

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_key, list_keys))
        .routes(routes!(revoke_key))
}

/// `POST /keys`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateKeyBody {
    /// A label (at most 200 characters).
    #[serde(default)]
    pub name: String,
    /// `read`, `write` (brings `read`), `admin` (brings both); none for all three. At most
    /// the caller's own.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Databases the key is restricted to; none for every database of the organization. A
    /// caller restricted to some databases must name some of its own.
    #[serde(default)]
    pub databases: Vec<String>,
    /// Seconds until the key expires (1 to ten years); none for never.
    pub expires_in: Option<u64>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// A key as listed: never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct KeyDto {
    /// The public part of the key, which names it.
    pub prefix: String,
    pub name: String,
    pub scopes: Vec<String>,
    /// Empty: every database of the organization.
    pub databases: Vec<String>,
    /// `active`, `expired` or `revoked`.
    pub status: &'static str,
    /// RFC 3339.
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

impl KeyDto {
    fn of(key: &ApiKeyRecord, app: &App) -> Self {
        Self {
            prefix: key.prefix.to_string(),
            name: key.name.clone(),
            scopes: key.scopes.names().into_iter().map(str::to_owned).collect(),
            databases: key.databases.iter().map(ToString::to_string).collect(),
            status: key.status(app.now()),
            created_at: engram_app::format_ms(key.created_at),
            expires_at: key.expires_at.map(engram_app::format_ms),
            revoked_at: key.revoked_at.map(engram_app::format_ms),
        }
    }
}

/// A key just made.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CreatedKeyDto {
    #[serde(flatten)]
    pub key: KeyDto,
    /// The whole `prefix.secret` to send as `Authorization: Bearer …`: shown this once, and
    /// kept nowhere (the store holds a hash).
    pub token: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct KeyListDto {
    pub keys: Vec<KeyDto>,
    pub count: usize,
}

/// Make a key of the caller's organization, with at most the caller's scopes and databases.
#[utoipa::path(post, path = "/keys", tag = "keys", security(("bearer" = ["admin"])), request_body = CreateKeyBody,
    responses(
        (status = 201, body = EnvelopeDoc<CreatedKeyDto>, description = "made; `token` is shown only now"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: unknown scope, bad database name, name too long, expires_in out of range"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the caller is not admin, or asked for more than it holds"),
    ))]
async fn create_key(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<CreateKeyBody>,
) -> Result<Envelope, ApiError> {
    let ignored = Ignored::of_unknown(&body.unknown);
    let created = app
        .create_key_as(
            &who,
            KeySpec {
                org: String::new(),
                name: body.name,
                databases: body.databases,
                scopes: body.scopes,
                expires_in_secs: body.expires_in,
            },
        )
        .await?;
    let dto = CreatedKeyDto {
        key: KeyDto::of(&created.record, &app),
        token: created.token,
        message: "store the token now; it is not shown again".into(),
    };
    Ok(Envelope::new(StatusCode::CREATED, &dto).ignored(&ignored))
}

/// The organization's keys the caller could have made, oldest first, by prefix.
#[utoipa::path(get, path = "/keys", tag = "keys", security(("bearer" = ["admin"])),
    responses(
        (status = 200, body = EnvelopeDoc<KeyListDto>),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the caller is not admin"),
    ))]
async fn list_keys(State(app): State<App>, Auth(who): Auth) -> Result<Envelope, ApiError> {
    let keys: Vec<KeyDto> = app
        .keys_of(&who)
        .await?
        .iter()
        .map(|k| KeyDto::of(k, &app))
        .collect();
    Ok(Envelope::ok(&KeyListDto {
        count: keys.len(),
        keys,
    }))
}

/// Revoke a key: it is refused from the next request on. Revoking it again is harmless.
#[utoipa::path(delete, path = "/keys/{prefix}", tag = "keys", security(("bearer" = ["admin"])),
    params(("prefix" = String, Path, description = "the key's prefix")),
    responses(
        (status = 200, body = EnvelopeDoc<KeyDto>, description = "revoked"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the caller is not admin"),
        (status = 404, body = ErrorEnvelopeDoc, description = "NOT_FOUND: no such key in the caller's reach"),
    ))]
async fn revoke_key(
    State(app): State<App>,
    Auth(who): Auth,
    Path(prefix): Path<String>,
) -> Result<Envelope, ApiError> {
    let key = app.revoke_key_as(&who, &prefix).await?;
    Ok(Envelope::ok(&KeyDto::of(&key, &app)))
}
