//! Connectors: an organization's connections to external providers, the resources each syncs,
//! the objects each has synced (the dedupe key), and the record of every run. The scheduler
//! claims a due connector with a lease (design in SQLite's migration 15); every progress write
//! is fenced by that lease, so a sync that lost it (its instance stalled, the connector was
//! paused or deleted) writes nothing more.
//!
//! Its tables keep integer flags and JSON as text on both backends.

use async_trait::async_trait;
use engram_types::{DatabaseId, OrgId, UnixMs};
use serde_json::Value;
use std::collections::HashMap;

use crate::backend::{one, Backend, Sql, SqlStore};
use crate::error::corrupt;
use crate::rows::Columns;
use crate::StoreResult;

/// A connector to create.
#[derive(Clone, PartialEq)]
pub struct NewConnector {
    pub id: String,
    pub org: OrgId,
    pub provider: String,
    pub name: String,
    pub auth_type: String,
    pub database_id: DatabaseId,
    pub collection: String,
    pub account_scope: String,
    pub custom_instructions: String,
    pub sync_interval_s: u32,
    /// Sealed credentials.
    pub credentials: Option<Vec<u8>>,
    pub at: UnixMs,
}

/// A connector as stored, with the name of its database and counts of its resources.
#[derive(Clone, PartialEq)]
pub struct ConnectorRecord {
    pub id: String,
    pub org: OrgId,
    pub provider: String,
    pub name: String,
    pub auth_type: String,
    pub database_id: DatabaseId,
    pub database_name: String,
    pub collection: String,
    pub account_scope: String,
    pub custom_instructions: String,
    pub sync_interval_s: u32,
    /// Sealed credentials: opened only to sync and to the vault's reveal.
    pub credentials: Option<Vec<u8>>,
    pub credentials_updated_at: Option<UnixMs>,
    pub documents_dispatched: i64,
    pub first_data_dispatched_at: Option<UnixMs>,
    pub first_sync_at: Option<UnixMs>,
    pub last_attempted_sync_at: Option<UnixMs>,
    pub last_successful_sync_at: Option<UnixMs>,
    pub next_sync_at: Option<UnixMs>,
    pub last_error: String,
    pub error_action: String,
    /// Failed runs since the last success.
    pub failures: u32,
    pub paused_at: Option<UnixMs>,
    pub needs_reauth_at: Option<UnixMs>,
    pub needs_reauth_reason: String,
    pub sync_blocked_at: Option<UnixMs>,
    pub sync_blocked_reason: String,
    pub capped_at: Option<UnixMs>,
    /// The limit stopping syncs, when one does.
    pub plan_cap: Option<PlanCap>,
    /// The run holding the lease, while one runs.
    pub run_id: Option<String>,
    pub lease_until: Option<UnixMs>,
    /// A manual sync asked for and not started yet.
    pub requested_run_id: Option<String>,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
    pub active_resources: u32,
    /// Resources whose first pass has not completed.
    pub resources_pending_first_sync: u32,
    /// Resources whose status says their access has not been tested yet.
    pub resources_checking: u32,
}

impl std::fmt::Debug for ConnectorRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorRecord")
            .field("id", &self.id)
            .field("org", &self.org)
            .field("provider", &self.provider)
            .field("database_id", &self.database_id)
            .field("collection", &self.collection)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<sealed>"),
            )
            .field("next_sync_at", &self.next_sync_at)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for NewConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewConnector")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<sealed>"),
            )
            .finish_non_exhaustive()
    }
}

/// A change to a connector's settings; `None` leaves a field as it is. New credentials clear
/// `needs_reauth`; any change clears `sync_blocked` (the user fixed what blocked it), and a
/// connector that was held by either is due at once.
#[derive(Clone, Default, PartialEq)]
pub struct ConnectorUpdate {
    pub name: Option<String>,
    pub credentials: Option<Vec<u8>>,
    pub sync_interval_s: Option<u32>,
    pub custom_instructions: Option<String>,
}

impl std::fmt::Debug for ConnectorUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorUpdate")
            .field("name", &self.name)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<sealed>"),
            )
            .field("sync_interval_s", &self.sync_interval_s)
            .finish_non_exhaustive()
    }
}

/// How a resource is synced: `rescan` dispatches every object whose version changed since the
/// last pass; `new_only` only objects never synced before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    #[default]
    Rescan,
    NewOnly,
}

impl SyncMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rescan => "rescan",
            Self::NewOnly => "new_only",
        }
    }

    /// A mode by its name (empty: the default).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "" | "rescan" => Some(Self::Rescan),
            "new_only" => Some(Self::NewOnly),
            _ => None,
        }
    }
}

/// What the last run found of a resource: `checking` until its first run ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceStatus {
    #[default]
    Checking,
    /// Synced, with objects.
    Ok,
    /// Synced, and it holds nothing (or nothing changed on a first pass).
    Empty,
    Failed,
}

impl ResourceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Checking => "checking",
            Self::Ok => "ok",
            Self::Empty => "empty",
            Self::Failed => "failed",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Self::Checking, Self::Ok, Self::Empty, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// Which document limit stopped a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapMeter {
    DocumentsPerConnector,
    DocumentsPerOrganization,
}

impl CapMeter {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DocumentsPerConnector => "documents_per_connector",
            Self::DocumentsPerOrganization => "documents_per_organization",
        }
    }
}

/// The limit stopping a connector's syncs, as the spec's `plan_cap` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanCap {
    pub meter: CapMeter,
    pub limit: u64,
    /// `self-hosted`: the limit is this instance's setting, not a plan's.
    pub plan: String,
    pub message: String,
}

impl PlanCap {
    /// The cap of `meter` at `limit`, with the setting that raises it.
    pub fn self_hosted(meter: CapMeter, limit: u64) -> Self {
        let meter_name = meter.as_str();
        Self {
            meter,
            limit,
            plan: "self-hosted".into(),
            message: format!(
                "{meter_name} is limited to {limit} (connectors.max_{meter_name}); raise it or remove documents"
            ),
        }
    }
}

/// A resource to configure (created, or its settings replaced; its sync position is kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewResource {
    pub resource_id: String,
    pub resource_type: String,
    pub display_name: String,
    pub database_override: String,
    pub collection_override: String,
    pub custom_instructions: String,
    pub metadata: Value,
    pub additional_metadata: Value,
    pub filters: Value,
    /// Principals allowed to read its objects; `None` for no rule.
    pub acl: Option<Vec<String>>,
    pub sync_mode: SyncMode,
    pub provider_metadata: Value,
    pub backfill_oldest: Option<UnixMs>,
}

/// A resource as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRecord {
    pub connector_id: String,
    pub resource: NewResource,
    pub provider_cursor: String,
    pub pass_id: String,
    pub pass_position: String,
    pub state: ResourceState,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

/// What the last run found of a resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceState {
    pub resource_id: String,
    pub status: ResourceStatus,
    pub last_row_count: i64,
    pub message: String,
    pub retryable: bool,
    pub http_status: u16,
    pub checked_at: Option<UnixMs>,
    pub action: String,
    /// Non-empty: the resource stopped syncing until this is fixed.
    pub sync_blocked_reason: String,
    /// Non-empty: who may read the resource could not be read from the source.
    pub acl_warning: String,
    /// Non-empty: the restrictions of some of its objects could not be read.
    pub page_acl_warning: String,
}

/// A change to one resource; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceUpdate {
    pub custom_instructions: Option<String>,
    /// `Some(None)` removes the rule.
    pub acl: Option<Option<Vec<String>>>,
}

/// What asking for a sync did.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncRequest {
    /// Queued under this run id (a sync already asked for keeps its id).
    Queued(String),
    Paused,
    NoResources,
    NotFound,
}

/// A sync held under a lease.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedSync {
    pub connector: ConnectorRecord,
    pub run_id: String,
    pub manual: bool,
}

/// The lease a sync writes under.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncLease {
    pub connector_id: String,
    pub run_id: String,
}

/// An object a sync dispatched: where its item is and which version of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncedObject {
    pub native_id: String,
    pub item_id: String,
    pub database_id: DatabaseId,
    pub collection: String,
    pub version: String,
    /// What the provider keeps of the object between passes (opaque to engram).
    pub state: String,
}

/// What the store holds of an object a provider lists again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownObject {
    pub version: String,
    pub state: String,
}

/// One page of a resource's sync, written at once: what was dispatched, what was seen
/// unchanged, what left, where the pass has got to and the run's counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncPage {
    pub resource_id: String,
    pub pass_id: String,
    /// Where the pass has got to (empty once it is done).
    pub position: String,
    /// `Some(cursor)` when the page ends the pass: the provider's position after it.
    pub finished_cursor: Option<String>,
    pub dispatched: Vec<SyncedObject>,
    /// Native ids seen unchanged.
    pub unchanged: Vec<String>,
    /// Native ids whose items were deleted.
    pub removed: Vec<String>,
    pub added: u32,
    pub updated: u32,
    pub failed: u32,
}

/// How a sync ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncOutcome {
    pub succeeded: bool,
    pub error: String,
    pub action: String,
    /// The provider rejected the credentials.
    pub needs_reauth: Option<String>,
    /// A failure retrying cannot fix.
    pub blocked: Option<String>,
    /// The limit stopping syncs; `None` clears a cap.
    pub capped: Option<PlanCap>,
    pub next_sync_at: UnixMs,
    pub resources: Vec<ResourceState>,
}

/// A connector read at one moment with its resources and latest runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorSnapshot {
    pub connector: ConnectorRecord,
    pub resources: Vec<ResourceRecord>,
    pub runs: Vec<RunRecord>,
}

/// One sync run as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub connector_id: String,
    pub manual: bool,
    /// queued, running, succeeded, failed or abandoned.
    pub state: String,
    pub queued_at: UnixMs,
    pub started_at: Option<UnixMs>,
    pub finished_at: Option<UnixMs>,
    pub added: i64,
    pub updated: i64,
    pub deleted: i64,
    pub failed: i64,
    pub error: String,
}

/// Connectors, their resources, synced objects and runs.
#[async_trait]
pub trait ConnectorStore: Send + Sync {
    /// [`crate::StoreError::Conflict`] when the organization has a connector of that provider and
    /// account scope, or more than `max_per_org` connectors would exist (nothing written).
    async fn create_connector(
        &self,
        new: &NewConnector,
        max_per_org: u32,
    ) -> StoreResult<ConnectorRecord>;
    async fn get_connector(&self, org: &OrgId, id: &str) -> StoreResult<Option<ConnectorRecord>>;
    /// The organization's connectors (of one provider when given), oldest first.
    async fn list_connectors(
        &self,
        org: &OrgId,
        provider: Option<&str>,
    ) -> StoreResult<Vec<ConnectorRecord>>;
    async fn update_connector(
        &self,
        org: &OrgId,
        id: &str,
        update: &ConnectorUpdate,
        at: UnixMs,
    ) -> StoreResult<Option<ConnectorRecord>>;
    /// Deletes the connector, its resources, runs and object records (the items stay).
    async fn delete_connector(&self, org: &OrgId, id: &str) -> StoreResult<bool>;
    /// Pauses (a running sync stops at its next lease renewal) or resumes (due at once).
    async fn set_paused(
        &self,
        org: &OrgId,
        id: &str,
        paused: bool,
        at: UnixMs,
    ) -> StoreResult<Option<ConnectorRecord>>;
    /// Creates or replaces the settings of resources (their sync positions are kept); the
    /// connector is due at once. `None` when there is no such connector.
    async fn configure_resources(
        &self,
        org: &OrgId,
        id: &str,
        resources: &[NewResource],
        at: UnixMs,
    ) -> StoreResult<Option<u32>>;
    /// The connector's resources by id; `None` when there is no such connector.
    async fn list_resources(
        &self,
        org: &OrgId,
        id: &str,
    ) -> StoreResult<Option<Vec<ResourceRecord>>>;
    /// A changed access rule makes the resource's objects due for dispatch again (they carry
    /// it) and the connector due at once.
    async fn update_resource(
        &self,
        org: &OrgId,
        id: &str,
        resource_id: &str,
        update: &ResourceUpdate,
        at: UnixMs,
    ) -> StoreResult<Option<ResourceRecord>>;
    /// Stops syncing a resource (its object records go; its items stay).
    async fn delete_resource(&self, org: &OrgId, id: &str, resource_id: &str) -> StoreResult<bool>;
    /// Asks for a sync now, recorded as a queued manual run.
    async fn request_sync(
        &self,
        org: &OrgId,
        id: &str,
        run_id: &str,
        at: UnixMs,
    ) -> StoreResult<SyncRequest>;
    /// Claims the most overdue connector with resources that is not paused, held for
    /// credentials or blocked, and not under a live lease; `run_id` names the run unless a
    /// manual one was queued. A lapsed lease's run is recorded abandoned.
    async fn claim_sync(
        &self,
        run_id: &str,
        now: UnixMs,
        lease_until: UnixMs,
    ) -> StoreResult<Option<ClaimedSync>>;
    /// Extends the lease; false when it was lost (taken over, paused, deleted): stop.
    async fn renew_sync(&self, lease: &SyncLease, until: UnixMs) -> StoreResult<bool>;
    /// A connector by id alone, whatever its organization: for the public route a provider
    /// pushes events to, which the event's signature authenticates, never for a caller's API.
    async fn connector_for_push(&self, id: &str) -> StoreResult<Option<ConnectorRecord>>;
    /// Notes a push delivery; false when the connector has seen `delivery_id` already (a
    /// replay). Deliveries noted before `forget_before` are dropped.
    async fn note_delivery(
        &self,
        connector_id: &str,
        delivery_id: &str,
        at: UnixMs,
        forget_before: UnixMs,
    ) -> StoreResult<bool>;
    /// Takes the connector's lease for `holder` until `until` when no live lease holds it (a
    /// token refresh outside a sync, so no two instances refresh one connector at once); false
    /// when one does.
    async fn take_lease(
        &self,
        org: &OrgId,
        id: &str,
        holder: &str,
        now: UnixMs,
        until: UnixMs,
    ) -> StoreResult<bool>;
    /// Replaces the sealed credentials under the lease (a refreshed access token with the
    /// refresh token the server rotated to, in one write); false (nothing written) when the
    /// lease was lost. `credentials_updated_at` stays: it marks the user's changes.
    async fn replace_credentials(
        &self,
        lease: &SyncLease,
        sealed: &[u8],
        at: UnixMs,
    ) -> StoreResult<bool>;
    /// Gives back a lease [`ConnectorStore::take_lease`] took.
    async fn release_lease(&self, lease: &SyncLease) -> StoreResult<()>;
    /// Versions and provider state of the resource's objects among `native_ids`.
    async fn object_versions(
        &self,
        connector_id: &str,
        resource_id: &str,
        native_ids: &[String],
    ) -> StoreResult<HashMap<String, KnownObject>>;
    /// Objects of the resource the pass has not seen, at most `limit`.
    async fn unseen_objects(
        &self,
        connector_id: &str,
        resource_id: &str,
        pass_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<SyncedObject>>;
    /// Writes a page under the lease, renewing it; false (nothing written) when it was lost.
    async fn record_page(
        &self,
        lease: &SyncLease,
        page: &SyncPage,
        now: UnixMs,
        lease_until: UnixMs,
    ) -> StoreResult<bool>;
    /// Ends the run under the lease; false (nothing written) when it was lost.
    async fn finish_sync(
        &self,
        lease: &SyncLease,
        outcome: &SyncOutcome,
        now: UnixMs,
    ) -> StoreResult<bool>;
    /// The connector's runs, newest first.
    async fn list_runs(&self, org: &OrgId, id: &str, limit: u32) -> StoreResult<Vec<RunRecord>>;
    /// The connector, its resources and its last `runs` runs as of one moment (one read
    /// transaction), so a status never pairs one run's outcome with another's.
    async fn connector_snapshot(
        &self,
        org: &OrgId,
        id: &str,
        runs: u32,
    ) -> StoreResult<Option<ConnectorSnapshot>>;
    /// Objects synced by the connector, and by every connector of the organization.
    async fn object_counts(&self, org: &OrgId, id: &str) -> StoreResult<(u64, u64)>;
}

/// The most overdue connector a sync may claim at `$1`: due, not paused, held for credentials
/// or blocked, not under a live lease, with resources.
pub(crate) const DUE_CONNECTOR: &str = "SELECT c.connector_id FROM connectors c
    WHERE c.next_sync_at IS NOT NULL AND c.next_sync_at <= $1
      AND c.paused_at IS NULL AND c.needs_reauth_at IS NULL AND c.sync_blocked_at IS NULL
      AND (c.lease_until IS NULL OR c.lease_until < $1)
      AND EXISTS (SELECT 1 FROM connector_resources r WHERE r.connector_id = c.connector_id)
    ORDER BY c.next_sync_at, c.connector_id LIMIT 1";

/// The columns of a connector read with its database name and resource counts (`c`, `d`).
pub(crate) const CONNECTOR_SELECT: &str = "SELECT c.*, d.name AS database_name,
    (SELECT COUNT(*) FROM connector_resources r WHERE r.connector_id = c.connector_id) AS active_resources,
    (SELECT COUNT(*) FROM connector_resources r WHERE r.connector_id = c.connector_id AND r.provider_cursor = '')
        AS pending_resources,
    (SELECT COUNT(*) FROM connector_resources r WHERE r.connector_id = c.connector_id AND r.status = 'checking')
        AS checking_resources
    FROM connectors c JOIN databases d ON d.id = c.database_id";

fn small<T: TryFrom<i64>>(row: &impl Columns, column: &str) -> StoreResult<T>
where
    T::Error: std::fmt::Display,
{
    T::try_from(row.int(column)?).map_err(|e| corrupt(column, e))
}

fn json_column(row: &impl Columns, column: &str) -> StoreResult<Value> {
    let text = row.text(column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(column, e))
}

pub(crate) fn connector(row: &impl Columns) -> StoreResult<ConnectorRecord> {
    Ok(ConnectorRecord {
        id: row.text("connector_id")?,
        org: OrgId::from_trusted(row.text("org_id")?),
        provider: row.text("provider")?,
        name: row.text("name")?,
        auth_type: row.text("auth_type")?,
        database_id: DatabaseId::from_trusted(row.text("database_id")?),
        database_name: row.text("database_name")?,
        collection: row.text("collection")?,
        account_scope: row.text("account_scope")?,
        custom_instructions: row.text("custom_instructions")?,
        sync_interval_s: small(row, "sync_interval_s")?,
        credentials: row.opt_bytes("credentials")?,
        credentials_updated_at: row.opt_time("credentials_updated_at")?,
        documents_dispatched: row.int("documents_dispatched")?,
        first_data_dispatched_at: row.opt_time("first_data_dispatched_at")?,
        first_sync_at: row.opt_time("first_sync_at")?,
        last_attempted_sync_at: row.opt_time("last_attempted_sync_at")?,
        last_successful_sync_at: row.opt_time("last_successful_sync_at")?,
        next_sync_at: row.opt_time("next_sync_at")?,
        last_error: row.text("last_error")?,
        error_action: row.text("error_action")?,
        failures: small(row, "failures")?,
        paused_at: row.opt_time("paused_at")?,
        needs_reauth_at: row.opt_time("needs_reauth_at")?,
        needs_reauth_reason: row.text("needs_reauth_reason")?,
        sync_blocked_at: row.opt_time("sync_blocked_at")?,
        sync_blocked_reason: row.text("sync_blocked_reason")?,
        capped_at: row.opt_time("capped_at")?,
        plan_cap: match row.text("plan_cap")?.as_str() {
            "" => None,
            cap => Some(serde_json::from_str(cap).map_err(|e| corrupt("connectors.plan_cap", e))?),
        },
        run_id: row.opt_text("run_id")?,
        lease_until: row.opt_time("lease_until")?,
        requested_run_id: row.opt_text("requested_run_id")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        active_resources: small(row, "active_resources")?,
        resources_pending_first_sync: small(row, "pending_resources")?,
        resources_checking: small(row, "checking_resources")?,
    })
}

pub(crate) fn resource(row: &impl Columns) -> StoreResult<ResourceRecord> {
    let acl = match row.opt_text("acl")? {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| corrupt("acl", e))?),
        None => None,
    };
    let resource_id = row.text("resource_id")?;
    Ok(ResourceRecord {
        connector_id: row.text("connector_id")?,
        resource: NewResource {
            resource_id: resource_id.clone(),
            resource_type: row.text("resource_type")?,
            display_name: row.text("display_name")?,
            database_override: row.text("database_override")?,
            collection_override: row.text("collection_override")?,
            custom_instructions: row.text("custom_instructions")?,
            metadata: json_column(row, "metadata")?,
            additional_metadata: json_column(row, "additional_metadata")?,
            filters: json_column(row, "filters")?,
            acl,
            sync_mode: {
                let mode = row.text("sync_mode")?;
                SyncMode::parse(&mode)
                    .ok_or_else(|| corrupt("connector_resources.sync_mode", &mode))?
            },
            provider_metadata: json_column(row, "provider_metadata")?,
            backfill_oldest: row.opt_time("backfill_oldest")?,
        },
        provider_cursor: row.text("provider_cursor")?,
        pass_id: row.text("pass_id")?,
        pass_position: row.text("pass_position")?,
        state: ResourceState {
            resource_id,
            status: {
                let status = row.text("status")?;
                ResourceStatus::parse(&status)
                    .ok_or_else(|| corrupt("connector_resources.status", &status))?
            },
            last_row_count: row.int("last_row_count")?,
            message: row.text("message")?,
            retryable: row.int("retryable")? != 0,
            http_status: small(row, "http_status")?,
            checked_at: row.opt_time("checked_at")?,
            action: row.text("action")?,
            sync_blocked_reason: row.text("sync_blocked_reason")?,
            acl_warning: row.text("acl_warning")?,
            page_acl_warning: row.text("page_acl_warning")?,
        },
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

pub(crate) fn synced_object(row: &impl Columns) -> StoreResult<SyncedObject> {
    Ok(SyncedObject {
        native_id: row.text("native_id")?,
        item_id: row.text("item_id")?,
        database_id: DatabaseId::from_trusted(row.text("database_id")?),
        collection: row.text("collection")?,
        version: row.text("version")?,
        state: row.text("state")?,
    })
}

pub(crate) fn run(row: &impl Columns) -> StoreResult<RunRecord> {
    Ok(RunRecord {
        run_id: row.text("run_id")?,
        connector_id: row.text("connector_id")?,
        manual: row.text("trigger")? == "manual",
        state: row.text("state")?,
        queued_at: row.time("queued_at")?,
        started_at: row.opt_time("started_at")?,
        finished_at: row.opt_time("finished_at")?,
        added: row.int("added")?,
        updated: row.int("updated")?,
        deleted: row.int("deleted")?,
        failed: row.int("failed")?,
        error: row.text("error")?,
    })
}

pub(crate) fn json_text(value: &Value) -> String {
    if value.is_null() {
        "{}".to_owned()
    } else {
        value.to_string()
    }
}

pub(crate) fn acl_text(acl: &Option<Vec<String>>) -> Option<String> {
    acl.as_ref()
        .map(|principals| Value::from(principals.clone()).to_string())
}

async fn connector_by_id<B: Backend>(
    conn: &mut B::Connection,
    org: &engram_types::OrgId,
    id: &str,
) -> crate::StoreResult<Option<crate::ConnectorRecord>> {
    let row = B::fetch_optional(
        conn,
        Sql::new(format!(
            "{} WHERE c.org_id = $1 AND c.connector_id = $2",
            crate::connectors::CONNECTOR_SELECT
        ))
        .bind(org.as_str())
        .bind(id),
    )
    .await?;
    row.as_ref().map(crate::connectors::connector).transpose()
}

/// Whether the lease is still the run's; renews it to `until`.
async fn hold_lease<B: Backend>(
    conn: &mut B::Connection,
    lease: &crate::SyncLease,
    until: engram_types::UnixMs,
) -> crate::StoreResult<bool> {
    let renewed = B::execute(
        conn,
        Sql::new(
            "UPDATE connectors SET lease_until = $1
         WHERE connector_id = $2 AND run_id = $3 AND paused_at IS NULL",
        )
        .bind(until)
        .bind(&lease.connector_id)
        .bind(&lease.run_id),
    )
    .await?;
    Ok(renewed == 1)
}

/// Runs `sql` once per slice of at most 500 ids, the ids bound from `$first` on after `binds`.
async fn for_each_slice<B: Backend>(
    conn: &mut B::Connection,
    sql: &str,
    binds: &[&str],
    ids: &[String],
) -> crate::StoreResult<()> {
    for slice in ids.chunks(500) {
        let first = binds.len() + 1;
        let list = (first..first + slice.len())
            .map(|n| format!("${n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut query = Sql::new(sql.replace("{ids}", &list));
        for bind in binds {
            query = query.bind(*bind);
        }
        for id in slice {
            query = query.bind(id.as_str());
        }
        B::execute(conn, query).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl<B: Backend> crate::ConnectorStore for SqlStore<B> {
    async fn create_connector(
        &self,
        new: &crate::NewConnector,
        max_per_org: u32,
    ) -> crate::StoreResult<crate::ConnectorRecord> {
        let mut tx = B::begin_write(&self.pool).await?;
        let live = Sql::new(
            "SELECT id FROM databases WHERE id = $1 AND org_id = $2 AND state <> 'deleting'",
        )
        .bind(new.database_id.as_str())
        .bind(new.org.as_str());
        if B::fetch_optional(&mut tx, live).await?.is_none() {
            return Err(crate::StoreError::NotFound(format!(
                "database {}",
                new.database_id
            )));
        }
        let count = one::<B>(
            &mut tx,
            Sql::new("SELECT COUNT(*) AS n FROM connectors WHERE org_id = $1")
                .bind(new.org.as_str()),
        )
        .await?
        .int("n")?;
        if count >= i64::from(max_per_org) {
            return Err(crate::StoreError::Conflict(format!(
                "the organization has {count} connectors, the most it may have"
            )));
        }
        let insert = Sql::new(
            "INSERT INTO connectors (connector_id, org_id, provider, name, auth_type, database_id, collection,
                 account_scope, custom_instructions, sync_interval_s, credentials, credentials_updated_at,
                 created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)",
        )
        .bind(&new.id)
        .bind(new.org.as_str())
        .bind(&new.provider)
        .bind(&new.name)
        .bind(&new.auth_type)
        .bind(new.database_id.as_str())
        .bind(&new.collection)
        .bind(&new.account_scope)
        .bind(&new.custom_instructions)
        .bind(new.sync_interval_s)
        .bind(new.credentials.clone())
        .bind(new.credentials.as_ref().map(|_| new.at))
        .bind(new.at);
        B::execute(&mut tx, insert).await.map_err(|e| {
            e.on_unique(|| {
                format!(
                    "a `{}` connector with account scope `{}` exists",
                    new.provider, new.account_scope
                )
            })
        })?;
        let record = connector_by_id::<B>(&mut tx, &new.org, &new.id).await?;
        tx.commit().await?;
        record.ok_or_else(|| crate::StoreError::NotFound(format!("connector {}", new.id)))
    }

    async fn get_connector(
        &self,
        org: &engram_types::OrgId,
        id: &str,
    ) -> crate::StoreResult<Option<crate::ConnectorRecord>> {
        let mut conn = self.pool.acquire().await?;
        connector_by_id::<B>(&mut conn, org, id).await
    }

    async fn list_connectors(
        &self,
        org: &engram_types::OrgId,
        provider: Option<&str>,
    ) -> crate::StoreResult<Vec<crate::ConnectorRecord>> {
        let rows = self.all(Sql::new(format!(
            "{} WHERE c.org_id = $1 AND ($2 = '' OR c.provider = $2) ORDER BY c.created_at, c.connector_id",
            crate::connectors::CONNECTOR_SELECT
        ))
        .bind(org.as_str())
        .bind(provider.unwrap_or(""))).await?;
        rows.iter().map(crate::connectors::connector).collect()
    }

    async fn update_connector(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        update: &crate::ConnectorUpdate,
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<Option<crate::ConnectorRecord>> {
        let mut tx = B::begin_write(&self.pool).await?;
        let changed = B::execute(&mut tx, Sql::new("UPDATE connectors SET
                 name = COALESCE($3, name),
                 sync_interval_s = COALESCE($4, sync_interval_s),
                 custom_instructions = COALESCE($5, custom_instructions),
                 credentials = COALESCE($6, credentials),
                 credentials_updated_at = CASE WHEN $6 IS NULL THEN credentials_updated_at ELSE $7 END,
                 next_sync_at = CASE
                     WHEN (sync_blocked_at IS NOT NULL OR ($6 IS NOT NULL AND needs_reauth_at IS NOT NULL))
                         AND EXISTS (SELECT 1 FROM connector_resources r WHERE r.connector_id = connectors.connector_id)
                     THEN $7 ELSE next_sync_at END,
                 needs_reauth_at = CASE WHEN $6 IS NULL THEN needs_reauth_at ELSE NULL END,
                 needs_reauth_reason = CASE WHEN $6 IS NULL THEN needs_reauth_reason ELSE '' END,
                 sync_blocked_at = NULL, sync_blocked_reason = '',
                 updated_at = $7
             WHERE org_id = $1 AND connector_id = $2",)
        .bind(org.as_str())
        .bind(id)
        .bind(update.name.as_deref())
        .bind(update.sync_interval_s.map(i64::from))
        .bind(update.custom_instructions.as_deref())
        .bind(update.credentials.clone())
        .bind(at)).await?;
        if changed == 0 {
            return Ok(None);
        }
        // The user changed the settings: resources blocked by the old ones are tried again.
        B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connector_resources SET sync_blocked_reason = '' WHERE connector_id = $1",
            )
            .bind(id),
        )
        .await?;
        let record = connector_by_id::<B>(&mut tx, org, id).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn delete_connector(
        &self,
        org: &engram_types::OrgId,
        id: &str,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        let deleted = B::execute(
            &mut tx,
            Sql::new("DELETE FROM connectors WHERE org_id = $1 AND connector_id = $2")
                .bind(org.as_str())
                .bind(id),
        )
        .await?;
        tx.commit().await?;
        Ok(deleted == 1)
    }

    async fn set_paused(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        paused: bool,
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<Option<crate::ConnectorRecord>> {
        let mut tx = B::begin_write(&self.pool).await?;
        let sql = if paused {
            "UPDATE connectors SET paused_at = COALESCE(paused_at, $3), updated_at = $3
             WHERE org_id = $1 AND connector_id = $2"
        } else {
            "UPDATE connectors SET paused_at = NULL, updated_at = $3,
                 next_sync_at = CASE WHEN paused_at IS NOT NULL AND EXISTS
                     (SELECT 1 FROM connector_resources r WHERE r.connector_id = connectors.connector_id)
                     THEN $3 ELSE next_sync_at END
             WHERE org_id = $1 AND connector_id = $2"
        };
        B::execute(&mut tx, Sql::new(sql).bind(org.as_str()).bind(id).bind(at)).await?;
        let record = connector_by_id::<B>(&mut tx, org, id).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn configure_resources(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        resources: &[crate::NewResource],
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<Option<u32>> {
        let mut tx = B::begin_write(&self.pool).await?;
        let touched = B::execute(&mut tx, Sql::new("UPDATE connectors SET next_sync_at = $3, sync_blocked_at = NULL, sync_blocked_reason = '',
                 updated_at = $3
             WHERE org_id = $1 AND connector_id = $2",)
        .bind(org.as_str())
        .bind(id)
        .bind(at)).await?;
        if touched == 0 {
            return Ok(None);
        }
        for r in resources {
            B::execute(&mut tx, Sql::new("INSERT INTO connector_resources (connector_id, resource_id, resource_type, display_name,
                     database_override, collection_override, custom_instructions, metadata, additional_metadata,
                     filters, acl, sync_mode, provider_metadata, backfill_oldest, status, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'checking', $15, $15)
                 ON CONFLICT (connector_id, resource_id) DO UPDATE SET
                     resource_type = excluded.resource_type, display_name = excluded.display_name,
                     database_override = excluded.database_override,
                     collection_override = excluded.collection_override,
                     custom_instructions = excluded.custom_instructions, metadata = excluded.metadata,
                     additional_metadata = excluded.additional_metadata, filters = excluded.filters,
                     acl = excluded.acl, sync_mode = excluded.sync_mode,
                     provider_metadata = excluded.provider_metadata,
                     backfill_oldest = excluded.backfill_oldest, sync_blocked_reason = '',
                     updated_at = excluded.updated_at",)
        .bind(id)
        .bind(&r.resource_id)
        .bind(&r.resource_type)
        .bind(&r.display_name)
        .bind(&r.database_override)
        .bind(&r.collection_override)
        .bind(&r.custom_instructions)
        .bind(crate::connectors::json_text(&r.metadata))
        .bind(crate::connectors::json_text(&r.additional_metadata))
        .bind(crate::connectors::json_text(&r.filters))
        .bind(crate::connectors::acl_text(&r.acl))
        .bind(r.sync_mode.as_str())
        .bind(crate::connectors::json_text(&r.provider_metadata))
        .bind(r.backfill_oldest)
        .bind(at)).await?;
        }
        tx.commit().await?;
        Ok(Some(u32::try_from(resources.len()).unwrap_or(u32::MAX)))
    }

    async fn list_resources(
        &self,
        org: &engram_types::OrgId,
        id: &str,
    ) -> crate::StoreResult<Option<Vec<crate::ResourceRecord>>> {
        let mut conn = self.pool.acquire().await?;
        if connector_by_id::<B>(&mut conn, org, id).await?.is_none() {
            return Ok(None);
        }
        let rows = B::fetch_all(
            &mut conn,
            Sql::new(
                "SELECT * FROM connector_resources WHERE connector_id = $1 ORDER BY resource_id",
            )
            .bind(id),
        )
        .await?;
        rows.iter()
            .map(crate::connectors::resource)
            .collect::<crate::StoreResult<Vec<_>>>()
            .map(Some)
    }

    async fn update_resource(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        resource_id: &str,
        update: &crate::ResourceUpdate,
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<Option<crate::ResourceRecord>> {
        let mut tx = B::begin_write(&self.pool).await?;
        if connector_by_id::<B>(&mut tx, org, id).await?.is_none() {
            return Ok(None);
        }
        let (set_acl, acl) = match &update.acl {
            Some(acl) => (1_i64, crate::connectors::acl_text(acl)),
            None => (0, None),
        };
        let row = B::fetch_optional(
            &mut tx,
            Sql::new(
                "UPDATE connector_resources SET
                 custom_instructions = COALESCE($3, custom_instructions),
                 acl = CASE WHEN $4 = 1 THEN $5 ELSE acl END,
                 updated_at = $6
             WHERE connector_id = $1 AND resource_id = $2
             RETURNING *",
            )
            .bind(id)
            .bind(resource_id)
            .bind(update.custom_instructions.as_deref())
            .bind(set_acl)
            .bind(acl)
            .bind(at),
        )
        .await?;
        let record = row.as_ref().map(crate::connectors::resource).transpose()?;
        if record.is_some() && set_acl == 1 {
            // Synced objects carry their resource's rule: every one is dispatched again by the
            // next sync, which is due at once.
            B::execute(&mut tx, Sql::new("UPDATE connector_objects SET version = '' WHERE connector_id = $1 AND resource_id = $2")
        .bind(id)
        .bind(resource_id)).await?;
            B::execute(
                &mut tx,
                Sql::new("UPDATE connectors SET next_sync_at = $2 WHERE connector_id = $1")
                    .bind(id)
                    .bind(at),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(record)
    }

    async fn delete_resource(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        resource_id: &str,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        if connector_by_id::<B>(&mut tx, org, id).await?.is_none() {
            return Ok(false);
        }
        let deleted = B::execute(
            &mut tx,
            Sql::new(
                "DELETE FROM connector_resources WHERE connector_id = $1 AND resource_id = $2",
            )
            .bind(id)
            .bind(resource_id),
        )
        .await?;
        B::execute(
            &mut tx,
            Sql::new("DELETE FROM connector_objects WHERE connector_id = $1 AND resource_id = $2")
                .bind(id)
                .bind(resource_id),
        )
        .await?;
        tx.commit().await?;
        Ok(deleted == 1)
    }

    async fn request_sync(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        run_id: &str,
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<crate::SyncRequest> {
        let mut tx = B::begin_write(&self.pool).await?;
        let Some(connector) = connector_by_id::<B>(&mut tx, org, id).await? else {
            return Ok(crate::SyncRequest::NotFound);
        };
        if connector.paused_at.is_some() {
            return Ok(crate::SyncRequest::Paused);
        }
        if connector.active_resources == 0 {
            return Ok(crate::SyncRequest::NoResources);
        }
        if let Some(queued) = connector.requested_run_id {
            return Ok(crate::SyncRequest::Queued(queued));
        }
        B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connectors SET requested_run_id = $2, next_sync_at = $3, updated_at = $3
             WHERE connector_id = $1",
            )
            .bind(id)
            .bind(run_id)
            .bind(at),
        )
        .await?;
        B::execute(
            &mut tx,
            Sql::new(
                "INSERT INTO connector_runs (run_id, connector_id, trigger, state, queued_at)
             VALUES ($1, $2, 'manual', 'queued', $3)",
            )
            .bind(run_id)
            .bind(id)
            .bind(at),
        )
        .await?;
        tx.commit().await?;
        Ok(crate::SyncRequest::Queued(run_id.to_owned()))
    }

    async fn claim_sync(
        &self,
        run_id: &str,
        now: engram_types::UnixMs,
        lease_until: engram_types::UnixMs,
    ) -> crate::StoreResult<Option<crate::ClaimedSync>> {
        // Polled every second by every instance: a read first, so that nothing due takes no
        // write lock (on SQLite the write lock is the whole store's).
        let due = Sql::new(format!(
            "SELECT connector_id FROM ({}) due",
            crate::connectors::DUE_CONNECTOR
        ))
        .bind(now);
        if self.optional(due).await?.is_none() {
            return Ok(None);
        }
        let mut tx = B::begin_write(&self.pool).await?;
        let row = B::fetch_optional(
            &mut tx,
            Sql::new(format!(
            "UPDATE connectors SET run_id = COALESCE(requested_run_id, $3), requested_run_id = NULL,
                 lease_until = $2, last_attempted_sync_at = $1
             WHERE connector_id = ({})
               AND (lease_until IS NULL OR lease_until < $1)
             RETURNING connector_id, org_id, run_id",
            crate::connectors::DUE_CONNECTOR
        ))
            .bind(now)
            .bind(lease_until)
            .bind(run_id),
        )
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let (connector_id, org, claimed_run): (String, String, String) = (
            row.text("connector_id")?,
            row.text("org_id")?,
            row.text("run_id")?,
        );
        // A run whose lease lapsed (its instance died) is over.
        B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connector_runs SET state = 'abandoned', finished_at = $3
             WHERE connector_id = $1 AND state = 'running' AND run_id <> $2",
            )
            .bind(&connector_id)
            .bind(&claimed_run)
            .bind(now),
        )
        .await?;
        let manual = claimed_run != run_id;
        B::execute(&mut tx, Sql::new("INSERT INTO connector_runs (run_id, connector_id, trigger, state, queued_at, started_at)
             VALUES ($1, $2, 'scheduled', 'running', $3, $3)
             ON CONFLICT (run_id) DO UPDATE SET state = 'running', started_at = excluded.started_at",)
        .bind(&claimed_run)
        .bind(&connector_id)
        .bind(now)).await?;
        let org = engram_types::OrgId::from_trusted(org);
        let connector = connector_by_id::<B>(&mut tx, &org, &connector_id).await?;
        tx.commit().await?;
        Ok(connector.map(|connector| crate::ClaimedSync {
            connector,
            run_id: claimed_run,
            manual,
        }))
    }

    async fn renew_sync(
        &self,
        lease: &crate::SyncLease,
        until: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let mut conn = self.pool.acquire().await?;
        hold_lease::<B>(&mut conn, lease, until).await
    }

    async fn connector_for_push(
        &self,
        id: &str,
    ) -> crate::StoreResult<Option<crate::ConnectorRecord>> {
        let row = self
            .optional(
                Sql::new(format!(
                    "{} WHERE c.connector_id = $1",
                    crate::connectors::CONNECTOR_SELECT
                ))
                .bind(id),
            )
            .await?;
        row.as_ref().map(crate::connectors::connector).transpose()
    }

    async fn note_delivery(
        &self,
        connector_id: &str,
        delivery_id: &str,
        at: engram_types::UnixMs,
        forget_before: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        B::execute(
            &mut tx,
            Sql::new("DELETE FROM connector_events WHERE connector_id = $1 AND received_at < $2")
                .bind(connector_id)
                .bind(forget_before),
        )
        .await?;
        let noted = B::execute(
            &mut tx,
            Sql::new(
                "INSERT INTO connector_events (connector_id, delivery_id, received_at)
             VALUES ($1, $2, $3) ON CONFLICT (connector_id, delivery_id) DO NOTHING",
            )
            .bind(connector_id)
            .bind(delivery_id)
            .bind(at),
        )
        .await?;
        tx.commit().await?;
        Ok(noted == 1)
    }

    async fn take_lease(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        holder: &str,
        now: engram_types::UnixMs,
        until: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        let taken = B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connectors SET run_id = $3, lease_until = $5
             WHERE org_id = $1 AND connector_id = $2
               AND (lease_until IS NULL OR lease_until < $4)",
            )
            .bind(org.as_str())
            .bind(id)
            .bind(holder)
            .bind(now)
            .bind(until),
        )
        .await?;
        tx.commit().await?;
        Ok(taken == 1)
    }

    async fn replace_credentials(
        &self,
        lease: &crate::SyncLease,
        sealed: &[u8],
        at: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        let written = B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connectors SET credentials = $3, updated_at = $4
             WHERE connector_id = $1 AND run_id = $2 AND lease_until >= $4",
            )
            .bind(&lease.connector_id)
            .bind(&lease.run_id)
            .bind(sealed.to_vec())
            .bind(at),
        )
        .await?;
        tx.commit().await?;
        Ok(written == 1)
    }

    async fn release_lease(&self, lease: &crate::SyncLease) -> crate::StoreResult<()> {
        let mut tx = B::begin_write(&self.pool).await?;
        B::execute(
            &mut tx,
            Sql::new(
                "UPDATE connectors SET run_id = NULL, lease_until = NULL
             WHERE connector_id = $1 AND run_id = $2",
            )
            .bind(&lease.connector_id)
            .bind(&lease.run_id),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn object_versions(
        &self,
        connector_id: &str,
        resource_id: &str,
        native_ids: &[String],
    ) -> crate::StoreResult<std::collections::HashMap<String, crate::KnownObject>> {
        let mut versions = std::collections::HashMap::new();
        for slice in native_ids.chunks(500) {
            let list = (3..3 + slice.len())
                .map(|n| format!("${n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "SELECT native_id, version, state FROM connector_objects
                 WHERE connector_id = $1 AND resource_id = $2 AND native_id IN ({list})"
            );
            let mut query = Sql::new(sql).bind(connector_id).bind(resource_id);
            for id in slice {
                query = query.bind(id.as_str());
            }
            for row in self.all(query).await? {
                versions.insert(
                    row.text("native_id")?,
                    crate::KnownObject {
                        version: row.text("version")?,
                        state: row.text("state")?,
                    },
                );
            }
        }
        Ok(versions)
    }

    async fn unseen_objects(
        &self,
        connector_id: &str,
        resource_id: &str,
        pass_id: &str,
        limit: u32,
    ) -> crate::StoreResult<Vec<crate::SyncedObject>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT * FROM connector_objects
             WHERE connector_id = $1 AND resource_id = $2 AND pass_id <> $3
             ORDER BY native_id LIMIT $4",
                )
                .bind(connector_id)
                .bind(resource_id)
                .bind(pass_id)
                .bind(i64::from(limit)),
            )
            .await?;
        rows.iter().map(crate::connectors::synced_object).collect()
    }

    async fn record_page(
        &self,
        lease: &crate::SyncLease,
        page: &crate::SyncPage,
        now: engram_types::UnixMs,
        lease_until: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        if !hold_lease::<B>(&mut tx, lease, lease_until).await? {
            return Ok(false);
        }
        let (connector, resource) = (lease.connector_id.as_str(), page.resource_id.as_str());
        for object in &page.dispatched {
            B::execute(&mut tx, Sql::new("INSERT INTO connector_objects (connector_id, resource_id, native_id, item_id, database_id,
                     collection, version, pass_id, synced_at, state)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (connector_id, resource_id, native_id) DO UPDATE SET
                     item_id = excluded.item_id, database_id = excluded.database_id,
                     collection = excluded.collection, version = excluded.version,
                     pass_id = excluded.pass_id, synced_at = excluded.synced_at,
                     state = excluded.state",)
        .bind(connector)
        .bind(resource)
        .bind(&object.native_id)
        .bind(&object.item_id)
        .bind(object.database_id.as_str())
        .bind(&object.collection)
        .bind(&object.version)
        .bind(&page.pass_id)
        .bind(now)
        .bind(&object.state)).await?;
        }
        for_each_slice::<B>(
            &mut tx,
            "UPDATE connector_objects SET pass_id = $3
             WHERE connector_id = $1 AND resource_id = $2 AND native_id IN ({ids})",
            &[connector, resource, page.pass_id.as_str()],
            &page.unchanged,
        )
        .await?;
        for_each_slice::<B>(
            &mut tx,
            "DELETE FROM connector_objects
             WHERE connector_id = $1 AND resource_id = $2 AND native_id IN ({ids})",
            &[connector, resource],
            &page.removed,
        )
        .await?;
        let finished = page.finished_cursor.is_some();
        B::execute(&mut tx, Sql::new("UPDATE connector_resources SET pass_id = $3, pass_position = $4,
                 provider_cursor = CASE WHEN $5 = 1 THEN $6 ELSE provider_cursor END, updated_at = $7
             WHERE connector_id = $1 AND resource_id = $2",)
        .bind(connector)
        .bind(resource)
        .bind(&page.pass_id)
        .bind(&page.position)
        .bind(i64::from(finished))
        .bind(page.finished_cursor.as_deref().unwrap_or(""))
        .bind(now)).await?;
        let dispatched = i64::try_from(page.dispatched.len()).unwrap_or(i64::MAX);
        B::execute(&mut tx, Sql::new("UPDATE connectors SET documents_dispatched = documents_dispatched + $2,
                 first_data_dispatched_at = CASE WHEN $2 > 0 THEN COALESCE(first_data_dispatched_at, $3)
                     ELSE first_data_dispatched_at END
             WHERE connector_id = $1",)
        .bind(connector)
        .bind(dispatched)
        .bind(now)).await?;
        B::execute(&mut tx, Sql::new("UPDATE connector_runs SET added = added + $2, updated = updated + $3, deleted = deleted + $4,
                 failed = failed + $5
             WHERE run_id = $1",)
        .bind(&lease.run_id)
        .bind(i64::from(page.added))
        .bind(i64::from(page.updated))
        .bind(i64::try_from(page.removed.len()).unwrap_or(i64::MAX))
        .bind(i64::from(page.failed))).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn finish_sync(
        &self,
        lease: &crate::SyncLease,
        outcome: &crate::SyncOutcome,
        now: engram_types::UnixMs,
    ) -> crate::StoreResult<bool> {
        let capped = match &outcome.capped {
            Some(cap) => Some(
                serde_json::to_string(cap)
                    .map_err(|e| crate::error::corrupt("connectors.plan_cap", e))?,
            ),
            None => None,
        };
        let mut tx = B::begin_write(&self.pool).await?;
        // A paused connector's run still records how it ended.
        let held = B::execute(&mut tx, Sql::new("UPDATE connectors SET
                 run_id = NULL, lease_until = NULL,
                 next_sync_at = CASE WHEN requested_run_id IS NOT NULL THEN $3 ELSE $4 END,
                 last_successful_sync_at = CASE WHEN $5 = 1 THEN $3 ELSE last_successful_sync_at END,
                 first_sync_at = CASE WHEN $5 = 1 THEN COALESCE(first_sync_at, $3) ELSE first_sync_at END,
                 failures = CASE WHEN $5 = 1 THEN 0 ELSE failures + 1 END,
                 last_error = $6, error_action = $7,
                 needs_reauth_at = CASE WHEN $8 IS NULL THEN needs_reauth_at ELSE $3 END,
                 needs_reauth_reason = COALESCE($8, needs_reauth_reason),
                 sync_blocked_at = CASE WHEN $9 IS NULL THEN sync_blocked_at ELSE $3 END,
                 sync_blocked_reason = COALESCE($9, sync_blocked_reason),
                 capped_at = CASE WHEN $10 IS NULL THEN NULL ELSE COALESCE(capped_at, $3) END,
                 plan_cap = COALESCE($10, ''),
                 updated_at = $3
             WHERE connector_id = $1 AND run_id = $2",)
        .bind(&lease.connector_id)
        .bind(&lease.run_id)
        .bind(now)
        .bind(outcome.next_sync_at)
        .bind(i64::from(outcome.succeeded))
        .bind(&outcome.error)
        .bind(&outcome.action)
        .bind(outcome.needs_reauth.as_deref())
        .bind(outcome.blocked.as_deref())
        .bind(capped.as_deref())).await?;
        if held == 0 {
            return Ok(false);
        }
        for state in &outcome.resources {
            B::execute(
                &mut tx,
                Sql::new(
                    "UPDATE connector_resources SET status = $3, last_row_count = $4, message = $5,
                     retryable = $6, http_status = $7, checked_at = $8, action = $9,
                     sync_blocked_reason = $10, acl_warning = $11, page_acl_warning = $12,
                     updated_at = $8
                 WHERE connector_id = $1 AND resource_id = $2",
                )
                .bind(&lease.connector_id)
                .bind(&state.resource_id)
                .bind(state.status.as_str())
                .bind(state.last_row_count)
                .bind(&state.message)
                .bind(i64::from(state.retryable))
                .bind(i64::from(state.http_status))
                .bind(state.checked_at.unwrap_or(now))
                .bind(&state.action)
                .bind(&state.sync_blocked_reason)
                .bind(&state.acl_warning)
                .bind(&state.page_acl_warning),
            )
            .await?;
        }
        B::execute(&mut tx, Sql::new("UPDATE connector_runs SET state = $2, finished_at = $3, error = $4 WHERE run_id = $1",)
        .bind(&lease.run_id)
        .bind(if outcome.succeeded { "succeeded" } else { "failed" })
        .bind(now)
        .bind(&outcome.error)).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn list_runs(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        limit: u32,
    ) -> crate::StoreResult<Vec<crate::RunRecord>> {
        let rows = self.all(Sql::new("SELECT r.* FROM connector_runs r JOIN connectors c ON c.connector_id = r.connector_id
             WHERE c.org_id = $1 AND r.connector_id = $2
             ORDER BY r.queued_at DESC, r.run_id DESC LIMIT $3",)
        .bind(org.as_str())
        .bind(id)
        .bind(i64::from(limit))).await?;
        rows.iter().map(crate::connectors::run).collect()
    }

    async fn connector_snapshot(
        &self,
        org: &engram_types::OrgId,
        id: &str,
        runs: u32,
    ) -> crate::StoreResult<Option<crate::ConnectorSnapshot>> {
        let mut tx = B::begin_snapshot(&self.pool).await?;
        let Some(connector) = connector_by_id::<B>(&mut tx, org, id).await? else {
            return Ok(None);
        };
        let resources = B::fetch_all(
            &mut tx,
            Sql::new(
                "SELECT * FROM connector_resources WHERE connector_id = $1 ORDER BY resource_id",
            )
            .bind(id),
        )
        .await?
        .iter()
        .map(crate::connectors::resource)
        .collect::<crate::StoreResult<Vec<_>>>()?;
        let runs = B::fetch_all(
            &mut tx,
            Sql::new(
                "SELECT * FROM connector_runs WHERE connector_id = $1
             ORDER BY queued_at DESC, run_id DESC LIMIT $2",
            )
            .bind(id)
            .bind(i64::from(runs)),
        )
        .await?
        .iter()
        .map(crate::connectors::run)
        .collect::<crate::StoreResult<Vec<_>>>()?;
        tx.commit().await?;
        Ok(Some(crate::ConnectorSnapshot {
            connector,
            resources,
            runs,
        }))
    }

    async fn object_counts(
        &self,
        org: &engram_types::OrgId,
        id: &str,
    ) -> crate::StoreResult<(u64, u64)> {
        let row = self.one(Sql::new("SELECT
                 (SELECT COUNT(*) FROM connector_objects o JOIN connectors c ON c.connector_id = o.connector_id
                  WHERE c.org_id = $1 AND o.connector_id = $2) AS one,
                 (SELECT COUNT(*) FROM connector_objects o JOIN connectors c ON c.connector_id = o.connector_id
                  WHERE c.org_id = $1) AS every",)
        .bind(org.as_str())
        .bind(id)).await?;
        let one: i64 = row.int("one")?;
        let every: i64 = row.int("every")?;
        Ok((one.max(0).unsigned_abs(), every.max(0).unsigned_abs()))
    }
}
