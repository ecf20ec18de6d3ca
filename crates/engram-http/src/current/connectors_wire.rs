//! Wire types of the connector routes and the credential vault. Their successful responses are
//! plain objects (the spec's documented contract for connector management), with the field
//! names of the hosted service's clients; deprecated copies (`tenant_id`, `sub_tenant_id`,
//! `*_override`) are written beside the current names.

use engram_app::{
    format_ms, ConnectorView, DiscoveredResource, Health, ProviderInfo, ResourceRecord, UnixMs,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

fn time(at: Option<UnixMs>) -> Option<String> {
    at.map(format_ms)
}

/// A catalog entry.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CatalogEntry {
    pub provider: String,
    pub category: String,
    /// Always true in the catalog.
    pub supported: bool,
    pub moveit_support: bool,
    /// True when the provider pushes events (`POST /connectors/{id}/events`) besides
    /// scheduled syncs.
    pub webhook_support: bool,
    pub rbac_support: bool,
    pub is_alpha: bool,
    pub is_beta: bool,
    /// Display order; null entries come last, alphabetically.
    pub rank: Option<u32>,
}

impl From<&ProviderInfo> for CatalogEntry {
    fn from(info: &ProviderInfo) -> Self {
        Self {
            provider: info.provider.to_owned(),
            category: info.category.to_owned(),
            supported: true,
            moveit_support: false,
            webhook_support: info.webhook_support,
            rbac_support: info.rbac_support,
            is_alpha: false,
            is_beta: info.is_beta,
            rank: info.rank,
        }
    }
}

/// `GET /connector-catalog`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CatalogList {
    pub connectors: Vec<CatalogEntry>,
}

/// `GET /connectors/providers`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ProviderList {
    pub providers: Vec<CatalogEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SearchableField {
    pub name: String,
    pub data_type: String,
    pub description: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct FilterableField {
    pub name: String,
    pub data_type: String,
    /// `additional_metadata.<field>` is written nested under `metadata_filters`.
    pub filter_key: String,
    pub description: String,
}

/// `GET /connectors/providers?id=`: one provider described.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ProviderDescription {
    pub provider: String,
    pub connector_type: String,
    pub indexed_object_types: Vec<String>,
    pub searchable_fields: Vec<SearchableField>,
    pub filterable_fields: Vec<FilterableField>,
    /// JSON Schema for `credentials` on create and update.
    #[schema(value_type = Object)]
    pub credential_schema: Value,
    pub setup_guide: String,
    pub min_sync_interval_seconds: u32,
    pub max_sync_interval_seconds: u32,
    pub default_sync_interval_seconds: u32,
    /// The catalog entry, as the list shows it.
    pub providers: Vec<CatalogEntry>,
}

impl From<&ProviderInfo> for ProviderDescription {
    fn from(info: &ProviderInfo) -> Self {
        Self {
            provider: info.provider.to_owned(),
            connector_type: info.connector_type.to_owned(),
            indexed_object_types: info
                .indexed_object_types
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            searchable_fields: info
                .fields
                .iter()
                .map(|f| SearchableField {
                    name: f.name.to_owned(),
                    data_type: f.data_type.to_owned(),
                    description: f.description.to_owned(),
                })
                .collect(),
            filterable_fields: info
                .fields
                .iter()
                .filter_map(|f| {
                    f.filter_key.map(|key| FilterableField {
                        name: f.name.to_owned(),
                        data_type: f.data_type.to_owned(),
                        filter_key: key.to_owned(),
                        description: f.description.to_owned(),
                    })
                })
                .collect(),
            credential_schema: info.credential_schema.clone(),
            setup_guide: info.setup_guide.to_owned(),
            min_sync_interval_seconds: info.interval.min_s,
            max_sync_interval_seconds: info.interval.max_s,
            default_sync_interval_seconds: info.interval.default_s,
            providers: vec![CatalogEntry::from(info)],
        }
    }
}

/// `GET /connectors/providers` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ProvidersParams {
    /// A provider: its description instead of the catalog.
    pub id: Option<String>,
}

/// `GET /connectors` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListParams {
    /// Only connectors of this provider.
    pub provider: Option<String>,
}

/// Discovery paging (every provider answers in one page).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DiscoverParams {
    pub cursor: Option<String>,
    /// 1-100.
    pub limit: Option<u32>,
}

/// `POST /connector-discovery`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct DiscoverPreviewRequest {
    pub provider: Option<String>,
    #[schema(value_type = Object)]
    pub credentials: Option<Value>,
    pub auth_type: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DiscoveredDto {
    pub id: String,
    pub name: String,
    pub resource_type: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
}

/// Discovery's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DiscoverResponse {
    pub provider: String,
    pub resources: Vec<DiscoveredDto>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

impl DiscoverResponse {
    /// A page of the discovered resources from `cursor` (an offset), `limit` at a time.
    pub(super) fn page(
        provider: String,
        found: Vec<DiscoveredResource>,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Self {
        let start = cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        let limit = limit.map_or(found.len().max(1), |l| l.clamp(1, 100) as usize);
        let total = found.len();
        let resources: Vec<DiscoveredDto> = found
            .into_iter()
            .skip(start)
            .take(limit)
            .map(|r| DiscoveredDto {
                id: r.id,
                name: r.name,
                resource_type: r.resource_type,
                metadata: r.metadata,
            })
            .collect();
        let end = start + resources.len();
        Self {
            provider,
            resources,
            has_more: end < total,
            next_cursor: (end < total).then(|| end.to_string()),
        }
    }
}

/// `POST /connectors`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateConnectorRequest {
    pub provider: Option<String>,
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    pub tenant_id: Option<String>,
    pub collection: Option<String>,
    /// Deprecated alias of `collection`.
    pub sub_tenant_id: Option<String>,
    /// Must match the provider's `credential_schema`.
    #[schema(value_type = Object)]
    pub credentials: Option<Value>,
    pub auth_type: Option<String>,
    pub name: Option<String>,
    /// Distinct per account when connecting several of one provider.
    pub provider_account_scope: Option<String>,
    /// Up to 4000 characters.
    pub custom_instructions: Option<String>,
    /// 0 or omitted: the provider default; bounded per provider.
    pub sync_interval_seconds: Option<i64>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// `PATCH /connectors/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct UpdateConnectorRequest {
    /// Merged into the stored credentials (null removes a key); checked against the schema.
    #[schema(value_type = Object)]
    pub credentials: Option<Map<String, Value>>,
    pub sync_interval_seconds: Option<i64>,
    pub custom_instructions: Option<String>,
    pub name: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// A connector.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConnectorDto {
    pub connector_id: String,
    pub provider: String,
    pub name: String,
    pub auth_type: String,
    pub database: String,
    pub collection: String,
    /// Deprecated copy of `database`.
    pub tenant_id: String,
    /// Deprecated copy of `collection`.
    pub sub_tenant_id: String,
    pub provider_account_scope: String,
    pub custom_instructions: String,
    pub sync_interval_seconds: u32,
    pub active_resource_count: u32,
    pub resources_pending_first_sync: u32,
    /// Objects sent, a running total (updates count again; deletes are not subtracted).
    pub documents_dispatched: i64,
    pub first_data_dispatched_at: Option<String>,
    pub first_sync_at: Option<String>,
    pub last_attempted_sync_at: Option<String>,
    pub last_successful_sync_at: Option<String>,
    pub next_sync_at: Option<String>,
    /// Empty when none.
    pub last_error: String,
    /// pending_setup, ingesting, syncing, active, paused or reconnect.
    pub lifecycle: String,
    /// syncing or idle.
    pub sync_status: String,
    /// Deprecated: always `active`; read `lifecycle`.
    pub status: String,
    pub message: String,
    pub needs_reauth: bool,
    pub needs_reauth_at: Option<String>,
    pub needs_reauth_reason: String,
    pub paused: bool,
    pub paused_at: Option<String>,
    pub sync_blocked: bool,
    pub sync_blocked_at: Option<String>,
    pub sync_blocked_reason: String,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&ConnectorView> for ConnectorDto {
    fn from(view: &ConnectorView) -> Self {
        let r = &view.record;
        Self {
            connector_id: r.id.clone(),
            provider: r.provider.clone(),
            name: r.name.clone(),
            auth_type: r.auth_type.clone(),
            database: r.database_name.clone(),
            collection: r.collection.clone(),
            tenant_id: r.database_name.clone(),
            sub_tenant_id: r.collection.clone(),
            provider_account_scope: r.account_scope.clone(),
            custom_instructions: r.custom_instructions.clone(),
            sync_interval_seconds: r.sync_interval_s,
            active_resource_count: r.active_resources,
            resources_pending_first_sync: r.resources_pending_first_sync,
            documents_dispatched: r.documents_dispatched,
            first_data_dispatched_at: time(r.first_data_dispatched_at),
            first_sync_at: time(r.first_sync_at),
            last_attempted_sync_at: time(r.last_attempted_sync_at),
            last_successful_sync_at: time(r.last_successful_sync_at),
            next_sync_at: time(r.next_sync_at),
            last_error: r.last_error.clone(),
            lifecycle: view.health.lifecycle.as_str().to_owned(),
            sync_status: view.health.sync_status.as_str().to_owned(),
            status: "active".to_owned(),
            message: view.health.message.clone(),
            needs_reauth: r.needs_reauth_at.is_some(),
            needs_reauth_at: time(r.needs_reauth_at),
            needs_reauth_reason: r.needs_reauth_reason.clone(),
            paused: r.paused_at.is_some(),
            paused_at: time(r.paused_at),
            sync_blocked: r.sync_blocked_at.is_some(),
            sync_blocked_at: time(r.sync_blocked_at),
            sync_blocked_reason: r.sync_blocked_reason.clone(),
            created_at: format_ms(r.created_at),
            updated_at: format_ms(r.updated_at),
        }
    }
}

/// The connector limit of the organization.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConnectorLimit {
    pub count: usize,
    pub limit: u32,
    pub plan: String,
    pub message: String,
}

/// `GET /connectors`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConnectorList {
    pub connectors: Vec<ConnectorDto>,
    pub connector_limit: ConnectorLimit,
}

/// `POST /connectors`, `PATCH /connectors/{id}`: the connector and what the call did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConnectorChanged {
    #[serde(flatten)]
    pub connector: ConnectorDto,
    pub min_sync_interval_seconds: u32,
    pub max_sync_interval_seconds: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_updated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_instructions_updated: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConnectorDeleted {
    pub connector_id: String,
    pub deleted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PauseState {
    pub connector_id: String,
    pub paused: bool,
    pub paused_at: Option<String>,
    pub lifecycle: String,
    pub next_sync_at: Option<String>,
}

/// A resource to sync (`POST /connectors/{id}/configure`, `POST /connectors/{id}/resources`).
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct ResourceMappingDto {
    pub resource_id: Option<String>,
    pub resource_type: Option<String>,
    /// Display name (`display_name` on `POST /connectors/{id}/resources`).
    pub name: Option<String>,
    pub display_name: Option<String>,
    /// Another database of the organization to write to.
    pub database: Option<String>,
    pub database_override: Option<String>,
    pub tenant_id: Option<String>,
    pub tenant_id_override: Option<String>,
    pub collection: Option<String>,
    pub collection_override: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub sub_tenant_id_override: Option<String>,
    pub custom_instructions: Option<String>,
    /// Values of the database's schema fields, given to every synced object.
    #[schema(value_type = Object)]
    pub metadata: Option<Map<String, Value>>,
    #[schema(value_type = Object)]
    pub additional_metadata: Option<Map<String, Value>>,
    #[schema(value_type = Object)]
    pub filters: Option<Value>,
    /// Principals who may read the resource's objects; omitted: everyone.
    pub acl: Option<Vec<String>>,
    /// rescan (default) or new_only.
    pub sync_mode: Option<String>,
    #[schema(value_type = Object)]
    pub provider_metadata: Option<Value>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// `POST /connectors/{id}/configure`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct ConfigureRequest {
    pub resources: Option<Vec<ResourceMappingDto>>,
    /// How far back the first sync reads, where the provider dates objects (default 30).
    pub lookback_days: Option<u32>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Configured {
    pub connector_id: String,
    pub configured: u32,
    pub backfill: bool,
    pub first_sync_at: Option<String>,
    pub message: String,
    pub warnings: Vec<String>,
}

/// A configured resource.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ResourceDto {
    pub connector_id: String,
    pub resource_id: String,
    pub resource_type: String,
    pub display_name: String,
    pub status: String,
    /// Saved sync position; empty until the first sync completes.
    pub provider_cursor: String,
    pub database_override: String,
    pub collection_override: String,
    pub tenant_id_override: String,
    pub sub_tenant_id_override: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub custom_instructions: String,
    #[schema(value_type = Object)]
    pub provider_metadata: Value,
    #[schema(value_type = Object)]
    pub filters: Value,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(value_type = Object)]
    pub additional_metadata: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acl: Option<Vec<String>>,
    pub acl_warning: String,
    pub sync_mode: String,
    pub backfill_oldest: String,
    pub sync_blocked: bool,
    pub sync_blocked_reason: String,
    pub last_row_count: i64,
    pub checked_at: Option<String>,
}

impl From<&ResourceRecord> for ResourceDto {
    fn from(r: &ResourceRecord) -> Self {
        let m = &r.resource;
        Self {
            connector_id: r.connector_id.clone(),
            resource_id: m.resource_id.clone(),
            resource_type: m.resource_type.clone(),
            display_name: m.display_name.clone(),
            status: r.state.status.as_str().to_owned(),
            provider_cursor: r.provider_cursor.clone(),
            database_override: m.database_override.clone(),
            collection_override: m.collection_override.clone(),
            tenant_id_override: m.database_override.clone(),
            sub_tenant_id_override: m.collection_override.clone(),
            custom_instructions: m.custom_instructions.clone(),
            provider_metadata: m.provider_metadata.clone(),
            filters: m.filters.clone(),
            metadata: m.metadata.clone(),
            additional_metadata: m.additional_metadata.clone(),
            acl: m.acl.clone(),
            acl_warning: r.state.acl_warning.clone(),
            sync_mode: m.sync_mode.as_str().to_owned(),
            backfill_oldest: m.backfill_oldest.map(format_ms).unwrap_or_default(),
            sync_blocked: !r.state.sync_blocked_reason.is_empty(),
            sync_blocked_reason: r.state.sync_blocked_reason.clone(),
            last_row_count: r.state.last_row_count,
            checked_at: time(r.state.checked_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ResourceList {
    pub resources: Vec<ResourceDto>,
}

/// `PATCH /connectors/{id}/resources/{resource_id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct ResourcePatch {
    /// The access rule; `[]` lets no one read, null removes the rule.
    #[serde(default, deserialize_with = "crate::wire::present_value")]
    #[schema(value_type = Option<Vec<String>>)]
    pub acl: Option<Value>,
    /// "" clears the resource's own instructions.
    pub custom_instructions: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ResourceDeleted {
    pub connector_id: String,
    pub resource_id: String,
    pub deleted: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SyncQueued {
    pub run_id: String,
    /// The same id: the run is its own workflow.
    pub workflow_id: String,
    pub connector_id: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StatusError {
    pub message: String,
    pub action: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ResourceStatusDto {
    pub resource_id: String,
    pub display_name: String,
    /// ok, empty, failed, checking or unknown.
    pub status: String,
    pub last_row_count: i64,
    pub message: String,
    pub retryable: bool,
    pub http_status: u16,
    pub checked_at: Option<String>,
    pub action: String,
    pub sync_blocked: bool,
    pub sync_blocked_reason: String,
    pub acl_warning: String,
    pub page_acl_warning: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RunDto {
    pub run_id: String,
    /// scheduled or manual.
    pub trigger: String,
    /// queued, running, succeeded, failed or abandoned.
    pub state: String,
    pub queued_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub added: i64,
    pub updated: i64,
    pub deleted: i64,
    pub failed: i64,
    pub error: String,
}

/// `GET /connectors/{id}/status`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StatusResponse {
    pub connector_id: String,
    pub provider: String,
    /// healthy, degraded, failed, checking, paused or capped.
    pub status: String,
    pub lifecycle: String,
    pub sync_status: String,
    pub last_successful_sync_at: Option<String>,
    pub last_attempted_sync_at: Option<String>,
    pub next_sync_at: Option<String>,
    /// Null when the connector itself is fine.
    pub error: Option<StatusError>,
    /// The limit stopping syncs.
    #[schema(value_type = Option<Object>)]
    pub plan_cap: Option<Value>,
    pub message: String,
    pub resources: Vec<ResourceStatusDto>,
    /// The latest runs, newest first.
    pub runs: Vec<RunDto>,
}

impl StatusResponse {
    pub(super) fn of(status: &engram_app::ConnectorStatus) -> Self {
        let (r, h): (_, &Health) = (&status.view.record, &status.view.health);
        Self {
            connector_id: r.id.clone(),
            provider: r.provider.clone(),
            status: h.status.as_str().to_owned(),
            lifecycle: h.lifecycle.as_str().to_owned(),
            sync_status: h.sync_status.as_str().to_owned(),
            last_successful_sync_at: time(r.last_successful_sync_at),
            last_attempted_sync_at: time(r.last_attempted_sync_at),
            next_sync_at: time(r.next_sync_at),
            error: h.error.as_ref().map(|(message, action)| StatusError {
                message: message.clone(),
                action: action.clone(),
            }),
            plan_cap: h
                .plan_cap
                .as_ref()
                .and_then(|cap| serde_json::to_value(cap).ok()),
            message: h.message.clone(),
            resources: status
                .resources
                .iter()
                .map(|res| ResourceStatusDto {
                    resource_id: res.resource.resource_id.clone(),
                    display_name: res.resource.display_name.clone(),
                    status: res.state.status.as_str().to_owned(),
                    last_row_count: res.state.last_row_count,
                    message: res.state.message.clone(),
                    retryable: res.state.retryable,
                    http_status: res.state.http_status,
                    checked_at: time(res.state.checked_at),
                    action: res.state.action.clone(),
                    sync_blocked: !res.state.sync_blocked_reason.is_empty(),
                    sync_blocked_reason: res.state.sync_blocked_reason.clone(),
                    acl_warning: res.state.acl_warning.clone(),
                    page_acl_warning: res.state.page_acl_warning.clone(),
                })
                .collect(),
            runs: status
                .runs
                .iter()
                .map(|run| RunDto {
                    run_id: run.run_id.clone(),
                    trigger: if run.manual { "manual" } else { "scheduled" }.to_owned(),
                    state: run.state.clone(),
                    queued_at: format_ms(run.queued_at),
                    started_at: time(run.started_at),
                    finished_at: time(run.finished_at),
                    added: run.added,
                    updated: run.updated,
                    deleted: run.deleted,
                    failed: run.failed,
                    error: run.error.clone(),
                })
                .collect(),
        }
    }
}

/// One connector's stored credentials in the vault: field names, never values.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VaultEntryDto {
    /// The connector's id (the vault keys credentials by connector).
    pub credential_id: String,
    pub connector_id: String,
    pub provider: String,
    pub database: String,
    pub collection: String,
    pub label: String,
    pub fields: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VaultList {
    pub credentials: Vec<VaultEntryDto>,
    pub count: usize,
    /// Credentials this instance's key cannot open.
    pub unavailable_count: usize,
}

/// `PATCH /credential-vault/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct VaultUpdate {
    #[schema(value_type = Object)]
    pub credentials: Option<Map<String, Value>>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VaultUpdated {
    pub credential_id: String,
    pub updated: bool,
}

/// `POST /credential-vault/{id}/reveal`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct RevealRequest {
    pub field: Option<String>,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Revealed {
    pub credential_id: String,
    pub field: String,
    pub provider: String,
    #[schema(value_type = Object)]
    pub value: Value,
}

/// A started OAuth authorization: send the user to `authorization_url`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct OAuthStarted {
    pub connector_id: String,
    /// The provider's authorization page, with engram's sealed `state` and a PKCE challenge.
    pub authorization_url: String,
    /// The callback address the provider's OAuth app must have registered.
    pub redirect_uri: String,
    /// When the authorization stops being accepted (RFC 3339).
    pub expires_at: String,
}

/// A completed OAuth authorization: the tokens are sealed into the connector's credentials.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct OAuthAuthorized {
    pub connector_id: String,
    pub provider: String,
    pub authorized: bool,
    /// The sync started, when the connector has resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub message: String,
}

/// What became of a pushed event.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PushAnswer {
    pub connector_id: String,
    /// The sync the event asked for (none for a ping, a replay, a paused connector).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub message: String,
}
