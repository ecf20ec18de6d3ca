//! Connectors: the use cases behind the connector routes (create, configure, pause, sync, the
//! credential vault) and the health the spec's state section defines. The sync engine that
//! runs due connectors is `crate::sync`.
//!
//! A sync claims its connector under a lease (renewed as it goes; lost when the connector is
//! paused or deleted, or another instance took it over after this one stalled) and walks each
//! resource's pass a page at a time. Per page it compares versions with what it synced before,
//! fetches only what changed, queues those objects as items (the dedupe key becomes the item
//! id, so a change replaces its item) and saves the page with its position in one write. A
//! crash resumes from the last saved page; re-dispatching an object replaces its item, so
//! nothing is duplicated. A pass that listed every object of the resource then deletes the
//! items of objects it did not see; a pass that failed deletes nothing.

use std::sync::Arc;

use engram_connectors::{
    Access, Catalog, CatalogOptions, Provider, ProviderError, ProviderInfo, ResourceRef, Sealer,
};
use engram_store::{
    ConnectorRecord, ConnectorSnapshot, ConnectorUpdate, NewConnector, NewResource, PlanCap,
    ResourceRecord, ResourceStatus, ResourceUpdate, RunRecord, StoreError, SyncMode, SyncRequest,
};
use engram_types::limits::INSTRUCTIONS_MAX_CHARS;
use engram_types::{DatabaseName, UnixMs};
use serde_json::{json, Map, Value};

use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// Longest connector name, account scope, resource id and display name.
const LABEL_MAX: usize = 1024;
/// Most resources one connector may sync.
const RESOURCES_MAX: usize = 500;
/// How long reading the credentials, and then letting go of one resource's hold at the source,
/// may take when a connector or resource is deleted.
const RELEASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// What deleted resources held open at their source, and the access to let go of it.
struct HeldOpen {
    provider: String,
    access: Access,
    resources: Vec<(ResourceRef, String)>,
}

/// The connector half of the application's state.
pub(crate) struct Connectors {
    pub(crate) catalog: Catalog,
    sealer: tokio::sync::OnceCell<Arc<Sealer>>,
    pub(crate) wake: tokio::sync::Notify,
}

impl Connectors {
    pub(crate) fn new(
        config: &engram_config::ConnectorsConfig,
        data_dir: &std::path::Path,
    ) -> Self {
        Self {
            catalog: Catalog::new(&CatalogOptions {
                folder_roots: config.folder_roots.clone(),
                work_dir: data_dir.join("connectors"),
            }),
            sealer: tokio::sync::OnceCell::new(),
            wake: tokio::sync::Notify::new(),
        }
    }
}

/// A connector to create.
#[derive(Debug, Clone, Default)]
pub struct CreateConnector {
    pub provider: String,
    pub database: String,
    pub collection: Option<String>,
    pub credentials: Option<Value>,
    pub auth_type: String,
    pub name: String,
    pub account_scope: String,
    pub custom_instructions: String,
    pub sync_interval_seconds: Option<i64>,
}

/// A change to a connector's settings.
#[derive(Debug, Clone, Default)]
pub struct UpdateConnector {
    /// Merged into the stored credentials (a key set to null is removed).
    pub credentials: Option<Map<String, Value>>,
    pub sync_interval_seconds: Option<i64>,
    pub custom_instructions: Option<String>,
    pub name: Option<String>,
}

/// A resource to sync, as configured by the client.
#[derive(Debug, Clone, Default)]
pub struct ResourceMapping {
    pub resource_id: String,
    pub resource_type: String,
    pub display_name: String,
    pub database: String,
    pub collection: String,
    pub custom_instructions: String,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub filters: Value,
    pub acl: Option<Vec<String>>,
    pub sync_mode: String,
    pub provider_metadata: Value,
}

/// Where a connector is in its life (the spec's `lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// No resources configured yet.
    PendingSetup,
    /// Resources configured; the first sync has not ended.
    Ingesting,
    Active,
    /// A sync runs now.
    Syncing,
    Paused,
    /// The credentials or settings need the user (`needs_reauth`, `sync_blocked`).
    Reconnect,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingSetup => "pending_setup",
            Self::Ingesting => "ingesting",
            Self::Active => "active",
            Self::Syncing => "syncing",
            Self::Paused => "paused",
            Self::Reconnect => "reconnect",
        }
    }
}

/// Whether a sync of the connector runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStatus {
    Idle,
    Syncing,
}

impl SyncStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Syncing => "syncing",
        }
    }
}

/// How a connector is doing (the spec's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthStatus {
    Healthy,
    /// Resources were configured and are being tested.
    Checking,
    Degraded,
    /// A document limit stopped the last sync.
    Capped,
    Failed,
    Paused,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Checking => "checking",
            Self::Degraded => "degraded",
            Self::Capped => "capped",
            Self::Failed => "failed",
            Self::Paused => "paused",
        }
    }
}

/// How a connector is doing, as the spec's state section defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub lifecycle: Lifecycle,
    pub sync_status: SyncStatus,
    pub status: HealthStatus,
    /// `(message, action)` when the connector itself has a problem.
    pub error: Option<(String, String)>,
    pub plan_cap: Option<PlanCap>,
    pub message: String,
}

/// A connector as the API shows it.
#[derive(Debug, Clone)]
pub struct ConnectorView {
    pub record: ConnectorRecord,
    pub health: Health,
    pub bounds: engram_connectors::IntervalBounds,
}

/// A connector's status with its resources.
#[derive(Debug, Clone)]
pub struct ConnectorStatus {
    pub view: ConnectorView,
    pub resources: Vec<ResourceRecord>,
    pub runs: Vec<RunRecord>,
}

/// What the vault shows of one connector's credentials: names, never values.
#[derive(Debug, Clone, PartialEq)]
pub struct VaultEntry {
    pub connector: ConnectorRecord,
    pub fields: Vec<String>,
}

fn health(record: &ConnectorRecord, now: UnixMs) -> Health {
    let running = record.run_id.is_some() && record.lease_until.is_some_and(|until| until > now);
    let lifecycle = if record.paused_at.is_some() {
        Lifecycle::Paused
    } else if record.needs_reauth_at.is_some() || record.sync_blocked_at.is_some() {
        Lifecycle::Reconnect
    } else if record.active_resources == 0 {
        Lifecycle::PendingSetup
    } else if record.first_sync_at.is_none() {
        Lifecycle::Ingesting
    } else if running {
        Lifecycle::Syncing
    } else {
        Lifecycle::Active
    };
    let plan_cap = record.plan_cap.clone();
    let (status, error, message) = if record.paused_at.is_some() {
        (
            HealthStatus::Paused,
            None,
            "Syncing is paused; resume the connector to sync again.".to_owned(),
        )
    } else if record.needs_reauth_at.is_some() {
        let message = format!(
            "The source rejected the credentials: {}",
            record.needs_reauth_reason
        );
        let action =
            "Update the connector's credentials (PATCH /connectors/{id} or the credential vault).";
        (
            HealthStatus::Failed,
            Some((message.clone(), action.to_owned())),
            message,
        )
    } else if record.sync_blocked_at.is_some() {
        let message = format!("Syncing is blocked: {}", record.sync_blocked_reason);
        let action = "Fix the connector's settings or resources; updating them clears the block.";
        (
            HealthStatus::Failed,
            Some((message.clone(), action.to_owned())),
            message,
        )
    } else if plan_cap.is_some() {
        let message = "A limit on synced documents stopped the last sync.".to_owned();
        (HealthStatus::Capped, None, message)
    } else if record.active_resources == 0 {
        (
            HealthStatus::Degraded,
            None,
            "No resources are configured; nothing syncs.".to_owned(),
        )
    } else if record.failures > 0 {
        let message = format!("The last sync failed: {}", record.last_error);
        let action = if record.error_action.is_empty() {
            "None needed: engram retries with backoff.".to_owned()
        } else {
            record.error_action.clone()
        };
        (
            HealthStatus::Degraded,
            Some((message.clone(), action)),
            message,
        )
    } else if record.resources_checking > 0 {
        (
            HealthStatus::Checking,
            None,
            "Resources were configured; access is being tested.".to_owned(),
        )
    } else {
        (HealthStatus::Healthy, None, String::new())
    };
    Health {
        lifecycle,
        sync_status: if running {
            SyncStatus::Syncing
        } else {
            SyncStatus::Idle
        },
        status,
        error,
        plan_cap,
        message,
    }
}

/// A resource failing makes a healthy connector degraded.
fn with_resources(mut health: Health, resources: &[ResourceRecord]) -> Health {
    let failing = resources
        .iter()
        .filter(|r| {
            r.state.status == ResourceStatus::Failed || !r.state.sync_blocked_reason.is_empty()
        })
        .count();
    if failing > 0
        && matches!(
            health.status,
            HealthStatus::Healthy | HealthStatus::Checking
        )
    {
        health.status = HealthStatus::Degraded;
        health.message = format!("{failing} resource(s) failed to sync; see their status.");
    }
    health
}

fn check_label(field: &str, value: &str) -> AppResult<()> {
    if value.chars().count() > LABEL_MAX || value.chars().any(char::is_control) {
        return Err(AppError::InvalidParameters(format!(
            "`{field}` must be at most {LABEL_MAX} characters without control characters"
        )));
    }
    Ok(())
}

fn check_instructions(field: &str, value: &str) -> AppResult<()> {
    if value.chars().count() > INSTRUCTIONS_MAX_CHARS {
        return Err(AppError::InvalidParameters(format!(
            "`{field}` is longer than {INSTRUCTIONS_MAX_CHARS} characters"
        )));
    }
    Ok(())
}

fn credentials_object(value: Option<Value>) -> AppResult<Map<String, Value>> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(AppError::Validation(
            "`credentials` must be a JSON object".into(),
        )),
    }
}

pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

impl App {
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.inner.connectors.catalog
    }

    /// The catalog's description of a provider; 404 for one it does not offer.
    pub fn provider_info(&self, provider: &str) -> AppResult<&ProviderInfo> {
        self.catalog()
            .get(provider)
            .map(Provider::info)
            .ok_or_else(|| AppError::ProviderNotFound(provider.to_owned()))
    }

    /// The providers offered, in display order.
    pub fn provider_catalog(&self) -> Vec<&ProviderInfo> {
        self.catalog().providers().map(Provider::info).collect()
    }

    pub(crate) async fn sealer(&self) -> AppResult<Arc<Sealer>> {
        let config = &self.config().connectors;
        let data_dir = self.inner.data_dir.clone();
        self.inner
            .connectors
            .sealer
            .get_or_try_init(|| async move {
                let key = config.credentials_key.clone();
                tokio::task::spawn_blocking(move || Sealer::load(Some(&key), &data_dir))
                    .await?
                    .map(Arc::new)
                    .map_err(|e| AppError::Unavailable(format!("connector credentials: {e}")))
            })
            .await
            .cloned()
    }

    pub(crate) async fn seal(
        &self,
        connector_id: &str,
        credentials: &Map<String, Value>,
    ) -> AppResult<Vec<u8>> {
        let plain = serde_json::to_vec(credentials).map_err(|e| AppError::Internal(Box::new(e)))?;
        self.sealer()
            .await?
            .seal(connector_id, &plain)
            .map_err(|e| AppError::Unavailable(e.to_string()))
    }

    pub(crate) async fn open_credentials(
        &self,
        record: &ConnectorRecord,
    ) -> AppResult<Map<String, Value>> {
        let Some(sealed) = &record.credentials else {
            return Ok(Map::new());
        };
        let plain = self
            .sealer()
            .await?
            .open(&record.id, sealed)
            .map_err(|e| AppError::Unavailable(e.to_string()))?;
        serde_json::from_slice(&plain).map_err(|e| AppError::Internal(Box::new(e)))
    }

    /// Takes connector `record`'s lease for `hold` outside a sync (a token refresh, a kept
    /// webhook secret), so no sync or other instance writes its credentials meanwhile; `None`
    /// when a live lease holds it. The caller gives it back with `release_lease`.
    pub(crate) async fn take_connector_lease(
        &self,
        record: &ConnectorRecord,
        kind: &str,
        hold: std::time::Duration,
    ) -> AppResult<Option<engram_store::SyncLease>> {
        let lease = engram_store::SyncLease {
            connector_id: record.id.clone(),
            run_id: new_id(kind),
        };
        let taken = self
            .store()
            .take_lease(
                &record.org,
                &record.id,
                &lease.run_id,
                self.now(),
                self.now().after(hold),
            )
            .await?;
        Ok(taken.then_some(lease))
    }

    /// The connector as stored now and its credentials, read again under its lease (another
    /// holder may have just written them).
    pub(crate) async fn current_credentials(
        &self,
        record: &ConnectorRecord,
    ) -> AppResult<(ConnectorRecord, Map<String, Value>)> {
        let current = self
            .store()
            .get_connector(&record.org, &record.id)
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(record.id.clone()))?;
        let credentials = self.open_credentials(&current).await?;
        Ok((current, credentials))
    }

    pub(crate) fn access(&self, owner: &str, credentials: Map<String, Value>) -> Access {
        let public_url = self.config().connectors.public_url.trim_end_matches('/');
        Access {
            credentials,
            outbound: self.inner.outbound.clone(),
            owner: owner.to_owned(),
            events_url: (!public_url.is_empty() && !owner.is_empty())
                .then(|| format!("{public_url}/connectors/{owner}/events")),
        }
    }

    fn view(&self, record: ConnectorRecord) -> ConnectorView {
        let bounds = self.catalog().get(&record.provider).map_or(
            engram_connectors::IntervalBounds {
                min_s: 60,
                max_s: 604_800,
                default_s: 3600,
            },
            |p| p.info().interval,
        );
        ConnectorView {
            health: health(&record, self.now()),
            record,
            bounds,
        }
    }

    /// The caller's connector: 404 when another organization's, unknown, or of a database the
    /// key may not use.
    pub(crate) async fn own_connector(
        &self,
        who: &Principal,
        id: &str,
    ) -> AppResult<ConnectorRecord> {
        who.require(Scope::Admin)?;
        match self.store().get_connector(&who.org, id).await? {
            Some(record) if who.may_use(&DatabaseName::from_trusted(&record.database_name)) => {
                Ok(record)
            }
            _ => Err(AppError::ConnectorNotFound(id.to_owned())),
        }
    }

    pub async fn create_connector(
        &self,
        who: &Principal,
        request: CreateConnector,
    ) -> AppResult<ConnectorView> {
        who.require(Scope::Admin)?;
        if request.provider.trim().is_empty() {
            return Err(AppError::InvalidParameters("`provider` is required".into()));
        }
        if request.database.trim().is_empty() {
            return Err(AppError::InvalidParameters(
                "`database` is required (deprecated alias `tenant_id`)".into(),
            ));
        }
        let provider = self.catalog().get(&request.provider).ok_or_else(|| {
            AppError::InvalidParameters(format!(
                "unknown provider `{}`; GET /connectors/providers lists those offered",
                request.provider
            ))
        })?;
        let info = provider.info();
        for (field, value) in [
            ("name", &request.name),
            ("provider_account_scope", &request.account_scope),
            ("auth_type", &request.auth_type),
        ] {
            check_label(field, value)?;
        }
        check_instructions("custom_instructions", &request.custom_instructions)?;
        let interval = info
            .interval
            .resolve(request.sync_interval_seconds)
            .map_err(AppError::InvalidParameters)?;
        let credentials = credentials_object(request.credentials)?;
        engram_connectors::check_credentials(info, &Value::Object(credentials.clone()))
            .map_err(AppError::Validation)?;
        let name =
            DatabaseName::parse(&request.database).map_err(|reason| AppError::InvalidName {
                field: "database",
                reason,
            })?;
        let db = self.authorize_database(who, &name, Scope::Admin).await?;
        let collection =
            crate::ingest::parse_collection(&db, request.collection.as_deref(), "collection")?;
        let id = new_id("con");
        let sealed = if credentials.is_empty() {
            None
        } else {
            Some(self.seal(&id, &credentials).await?)
        };
        let new = NewConnector {
            id,
            org: who.org.clone(),
            provider: info.provider.to_owned(),
            name: request.name,
            auth_type: request.auth_type,
            database_id: db.id.clone(),
            collection: collection.to_string(),
            account_scope: request.account_scope,
            custom_instructions: request.custom_instructions,
            sync_interval_s: interval,
            credentials: sealed,
            at: self.now(),
        };
        let max = self.config().connectors.max_per_org;
        match self.store().create_connector(&new, max).await {
            Ok(record) => Ok(self.view(record)),
            Err(StoreError::Conflict(message)) if message.contains("most it may have") => {
                Err(AppError::PlanLimit(format!(
                    "this organization has {max} connectors, the most it may have (connectors.max_per_org)"
                )))
            }
            Err(StoreError::Conflict(message)) => Err(AppError::ConnectorExists(format!(
                "{message}; set a distinct provider_account_scope per account"
            ))),
            Err(StoreError::NotFound(_)) => Err(AppError::DatabaseNotFound(name.to_string())),
            Err(other) => Err(other.into()),
        }
    }

    /// The connectors of the databases the key may use, oldest first.
    pub async fn list_connectors(&self, who: &Principal) -> AppResult<Vec<ConnectorView>> {
        who.require(Scope::Admin)?;
        let records = self.store().list_connectors(&who.org, None).await?;
        Ok(records
            .into_iter()
            .filter(|r| who.may_use(&DatabaseName::from_trusted(&r.database_name)))
            .map(|r| self.view(r))
            .collect())
    }

    pub async fn connector(&self, who: &Principal, id: &str) -> AppResult<ConnectorView> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        Ok(self.view(record))
    }

    /// Updates settings; returns the connector and which parts changed.
    pub async fn update_connector(
        &self,
        who: &Principal,
        id: &str,
        update: UpdateConnector,
    ) -> AppResult<ConnectorView> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        let info = self.provider_info(&record.provider).map_err(|_| {
            AppError::Forbidden(format!(
                "provider `{}` is no longer offered by this server",
                record.provider
            ))
        })?;
        if let Some(name) = &update.name {
            check_label("name", name)?;
        }
        if let Some(instructions) = &update.custom_instructions {
            check_instructions("custom_instructions", instructions)?;
        }
        let interval = match update.sync_interval_seconds {
            Some(asked) => Some(
                info.interval
                    .resolve(Some(asked))
                    .map_err(AppError::InvalidParameters)?,
            ),
            None => None,
        };
        let credentials = match update.credentials {
            Some(patch) => {
                let mut merged = self.open_credentials(&record).await?;
                for (key, value) in patch {
                    if value.is_null() {
                        merged.remove(&key);
                    } else {
                        merged.insert(key, value);
                    }
                }
                engram_connectors::check_credentials(info, &Value::Object(merged.clone()))
                    .map_err(AppError::Validation)?;
                Some(self.seal(&record.id, &merged).await?)
            }
            None => None,
        };
        let change = ConnectorUpdate {
            name: update.name,
            credentials,
            sync_interval_s: interval,
            custom_instructions: update.custom_instructions,
        };
        let record = self
            .store()
            .update_connector(&who.org, id, &change, self.now())
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(id.to_owned()))?;
        self.inner.connectors.wake.notify_one();
        Ok(self.view(record))
    }

    /// Deletes a connector, its resources and credentials; what it synced stays. What its
    /// resources held open at the source (Drive's push channels) is let go of.
    pub async fn delete_connector(&self, who: &Principal, id: &str) -> AppResult<()> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        let resources = self
            .store()
            .list_resources(&who.org, id)
            .await?
            .unwrap_or_default();
        let held = self.held_open(&record, resources).await;
        if self.store().delete_connector(&who.org, id).await? {
            self.let_go(held);
            Ok(())
        } else {
            Err(AppError::ConnectorNotFound(id.to_owned()))
        }
    }

    /// What `resources` hold open at the source, with the credentials to let go of it, read
    /// while the connector still has them; `None` when they hold nothing (most providers).
    async fn held_open(
        &self,
        record: &ConnectorRecord,
        resources: Vec<ResourceRecord>,
    ) -> Option<HeldOpen> {
        let provider = self.catalog().get(&record.provider)?;
        let resources: Vec<(ResourceRef, String)> = resources
            .into_iter()
            .filter(|r| provider.holds_open(&r.provider_cursor))
            .map(|r| (crate::sync::resource_ref(&r), r.provider_cursor))
            .collect();
        if resources.is_empty() {
            return None;
        }
        let credentials =
            tokio::time::timeout(RELEASE_TIMEOUT, self.provider_credentials(record)).await;
        match credentials {
            Ok(Ok(credentials)) => Some(HeldOpen {
                provider: record.provider.clone(),
                access: self.access(&record.id, credentials),
                resources,
            }),
            failed => {
                let error = match failed {
                    Ok(Err(err)) => err.to_string(),
                    _ => "timed out".to_owned(),
                };
                tracing::info!(connector_id = %record.id, error, "the credentials to let go of what the connector held open at its source were not read; it expires there on its own");
                None
            }
        }
    }

    /// Lets go of what was held open, in the background (bounded in time; a failure is logged,
    /// and the source lets it expire).
    fn let_go(&self, held: Option<HeldOpen>) {
        let Some(held) = held else { return };
        let app = self.clone();
        tokio::spawn(async move {
            let Some(provider) = app.catalog().get(&held.provider) else {
                return;
            };
            for (resource, cursor) in &held.resources {
                let released = tokio::time::timeout(
                    RELEASE_TIMEOUT,
                    provider.release(&held.access, resource, cursor),
                )
                .await;
                match released {
                    Ok(Ok(())) => tracing::info!(
                        connector_id = %held.access.owner,
                        resource_id = %resource.id,
                        "what the resource held open at its source was let go of"
                    ),
                    Ok(Err(err)) => tracing::info!(
                        connector_id = %held.access.owner,
                        resource_id = %resource.id,
                        error = %err,
                        "what the resource held open at its source was not let go of; it expires there on its own"
                    ),
                    Err(_) => tracing::info!(
                        connector_id = %held.access.owner,
                        resource_id = %resource.id,
                        "letting go of what the resource held open at its source timed out; it expires there on its own"
                    ),
                }
            }
        });
    }

    pub async fn pause_connector(
        &self,
        who: &Principal,
        id: &str,
        paused: bool,
    ) -> AppResult<ConnectorView> {
        who.require(Scope::Admin)?;
        self.own_connector(who, id).await?;
        let record = self
            .store()
            .set_paused(&who.org, id, paused, self.now())
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(id.to_owned()))?;
        self.inner.connectors.wake.notify_one();
        Ok(self.view(record))
    }

    /// Resources the account offers, from a connector's stored credentials.
    pub async fn discover(
        &self,
        who: &Principal,
        id: &str,
    ) -> AppResult<(String, Vec<engram_connectors::DiscoveredResource>)> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        let provider = self.catalog().get(&record.provider).ok_or_else(|| {
            AppError::Forbidden(format!("provider `{}` is not offered", record.provider))
        })?;
        let credentials = self.provider_credentials(&record).await?;
        let found = provider
            .discover(&self.access(&record.id, credentials))
            .await
            .map_err(provider_failure)?;
        Ok((record.provider, found))
    }

    /// Resources an account offers, from credentials given now (before creating a connector).
    pub async fn discover_preview(
        &self,
        who: &Principal,
        provider: &str,
        credentials: Option<Value>,
    ) -> AppResult<Vec<engram_connectors::DiscoveredResource>> {
        who.require(Scope::Admin)?;
        let source = self
            .catalog()
            .get(provider)
            .ok_or_else(|| AppError::InvalidParameters(format!("unknown provider `{provider}`")))?;
        let credentials = credentials_object(credentials)?;
        engram_connectors::check_credentials(source.info(), &Value::Object(credentials.clone()))
            .map_err(AppError::Validation)?;
        let credentials = engram_connectors::oauth::OAuthCredentials::provider_view(&credentials);
        source
            .discover(&self.access("", credentials))
            .await
            .map_err(provider_failure)
    }

    /// Creates or replaces resources; the connector syncs at once.
    pub async fn configure_resources(
        &self,
        who: &Principal,
        id: &str,
        mappings: Vec<ResourceMapping>,
    ) -> AppResult<u32> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        if mappings.is_empty() {
            return Err(AppError::InvalidParameters(
                "`resources` must name at least one resource".into(),
            ));
        }
        if mappings.len() > RESOURCES_MAX {
            return Err(AppError::InvalidParameters(format!(
                "at most {RESOURCES_MAX} resources per connector"
            )));
        }
        let mut resources = Vec::with_capacity(mappings.len());
        for (i, mapping) in mappings.into_iter().enumerate() {
            resources.push(self.check_mapping(who, &record, i, mapping).await?);
        }
        let configured = self
            .store()
            .configure_resources(&who.org, id, &resources, self.now())
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(id.to_owned()))?;
        self.inner.connectors.wake.notify_one();
        Ok(configured)
    }

    /// A resource mapping checked: its labels, instructions, target database (one the key may
    /// use) and collection, and metadata against that database's schema.
    async fn check_mapping(
        &self,
        who: &Principal,
        record: &ConnectorRecord,
        index: usize,
        m: ResourceMapping,
    ) -> AppResult<NewResource> {
        who.require(Scope::Admin)?;
        let whose = format!("resources[{index}]");
        if m.resource_id.trim().is_empty() {
            return Err(AppError::InvalidParameters(format!(
                "{whose}.resource_id is required"
            )));
        }
        check_label(&format!("{whose}.resource_id"), &m.resource_id)?;
        check_label(&format!("{whose}.name"), &m.display_name)?;
        check_instructions(
            &format!("{whose}.custom_instructions"),
            &m.custom_instructions,
        )?;
        let acl = m
            .acl
            .map(|acl| crate::filters::access_rule(&format!("{whose}.acl"), acl))
            .transpose()?;
        let db_name = if m.database.is_empty() {
            record.database_name.clone()
        } else {
            m.database.clone()
        };
        let name = DatabaseName::parse(&db_name).map_err(|reason| AppError::InvalidName {
            field: "resources[].database",
            reason,
        })?;
        let db = self.authorize_database(who, &name, Scope::Admin).await?;
        if !m.collection.is_empty() {
            crate::ingest::parse_collection(&db, Some(&m.collection), "resources[].collection")?;
        }
        crate::ingest::check_metadata(&db, &m.metadata, &format!("{whose}.metadata"))?;
        let sync_mode = SyncMode::parse(&m.sync_mode).ok_or_else(|| {
            AppError::InvalidParameters(format!(
                "{whose}.sync_mode `{}` is not rescan or new_only",
                m.sync_mode
            ))
        })?;
        Ok(NewResource {
            resource_type: m.resource_type,
            display_name: if m.display_name.is_empty() {
                m.resource_id.clone()
            } else {
                m.display_name
            },
            database_override: if m.database.is_empty() || m.database == record.database_name {
                String::new()
            } else {
                m.database
            },
            collection_override: m.collection,
            custom_instructions: m.custom_instructions,
            metadata: Value::Object(m.metadata),
            additional_metadata: Value::Object(m.additional_metadata),
            filters: if m.filters.is_null() {
                json!({})
            } else {
                m.filters
            },
            acl,
            sync_mode,
            provider_metadata: if m.provider_metadata.is_null() {
                json!({})
            } else {
                m.provider_metadata
            },
            backfill_oldest: None,
            resource_id: m.resource_id,
        })
    }

    pub async fn list_resources(
        &self,
        who: &Principal,
        id: &str,
    ) -> AppResult<Vec<ResourceRecord>> {
        who.require(Scope::Admin)?;
        self.own_connector(who, id).await?;
        self.store()
            .list_resources(&who.org, id)
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(id.to_owned()))
    }

    pub async fn resource(
        &self,
        who: &Principal,
        id: &str,
        resource_id: &str,
    ) -> AppResult<ResourceRecord> {
        who.require(Scope::Admin)?;
        self.list_resources(who, id)
            .await?
            .into_iter()
            .find(|r| r.resource.resource_id == resource_id)
            .ok_or_else(|| AppError::ConnectorNotFound(format!("{id}/resources/{resource_id}")))
    }

    pub async fn update_resource(
        &self,
        who: &Principal,
        id: &str,
        resource_id: &str,
        update: ResourceUpdate,
    ) -> AppResult<ResourceRecord> {
        who.require(Scope::Admin)?;
        self.own_connector(who, id).await?;
        if update.custom_instructions.is_none() && update.acl.is_none() {
            return Err(AppError::InvalidParameters(
                "give `acl` or `custom_instructions`".into(),
            ));
        }
        if let Some(instructions) = &update.custom_instructions {
            check_instructions("custom_instructions", instructions)?;
        }
        let update = ResourceUpdate {
            acl: match update.acl {
                Some(Some(acl)) => Some(Some(crate::filters::access_rule("acl", acl)?)),
                other => other,
            },
            ..update
        };
        let updated = self
            .store()
            .update_resource(&who.org, id, resource_id, &update, self.now())
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(format!("{id}/resources/{resource_id}")))?;
        self.inner.connectors.wake.notify_one();
        Ok(updated)
    }

    pub async fn delete_resource(
        &self,
        who: &Principal,
        id: &str,
        resource_id: &str,
    ) -> AppResult<()> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        let resources = self
            .store()
            .list_resources(&who.org, id)
            .await?
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.resource.resource_id == resource_id)
            .collect();
        let held = self.held_open(&record, resources).await;
        if self
            .store()
            .delete_resource(&who.org, id, resource_id)
            .await?
        {
            self.let_go(held);
            Ok(())
        } else {
            Err(AppError::ConnectorNotFound(format!(
                "{id}/resources/{resource_id}"
            )))
        }
    }

    /// Asks for a sync now; the run id names it in the run history.
    pub async fn request_sync(&self, who: &Principal, id: &str) -> AppResult<String> {
        who.require(Scope::Admin)?;
        self.own_connector(who, id).await?;
        match self
            .store()
            .request_sync(&who.org, id, &new_id("run"), self.now())
            .await?
        {
            SyncRequest::Queued(run) => {
                self.inner.connectors.wake.notify_one();
                Ok(run)
            }
            SyncRequest::Paused => Err(AppError::ConnectorPaused(id.to_owned())),
            SyncRequest::NoResources => Err(AppError::InvalidParameters(format!(
                "connector `{id}` has no resources; configure some first"
            ))),
            SyncRequest::NotFound => Err(AppError::ConnectorNotFound(id.to_owned())),
        }
    }

    pub async fn connector_status(&self, who: &Principal, id: &str) -> AppResult<ConnectorStatus> {
        who.require(Scope::Admin)?;
        let snapshot = self.store().connector_snapshot(&who.org, id, 20).await?;
        let Some(ConnectorSnapshot {
            connector: record,
            resources,
            runs,
        }) = snapshot
            .filter(|s| who.may_use(&DatabaseName::from_trusted(&s.connector.database_name)))
        else {
            return Err(AppError::ConnectorNotFound(id.to_owned()));
        };
        let mut view = self.view(record);
        view.health = with_resources(view.health, &resources);
        Ok(ConnectorStatus {
            view,
            resources,
            runs,
        })
    }

    /// The organization's stored credentials: which connector, which fields; never values.
    pub async fn vault(&self, who: &Principal) -> AppResult<(Vec<VaultEntry>, usize)> {
        who.require(Scope::Admin)?;
        let mut entries = Vec::new();
        let mut unavailable = 0;
        for record in self.list_connectors(who).await? {
            let record = record.record;
            if record.credentials.is_none() {
                continue;
            }
            match self.open_credentials(&record).await {
                Ok(fields) => entries.push(VaultEntry {
                    fields: fields.keys().cloned().collect(),
                    connector: record,
                }),
                Err(_) => unavailable += 1,
            }
        }
        Ok((entries, unavailable))
    }

    /// One credential field's value, to the organization that stored it.
    pub async fn reveal_credential(
        &self,
        who: &Principal,
        id: &str,
        field: &str,
    ) -> AppResult<(String, Value)> {
        who.require(Scope::Admin)?;
        let record = self.own_connector(who, id).await?;
        let credentials = self.open_credentials(&record).await?;
        let value = credentials.get(field).cloned().ok_or_else(|| {
            AppError::ConnectorNotFound(format!("{id}: no credential field `{field}`"))
        })?;
        tracing::info!(connector = %id, field, key = %who.key, "a credential was revealed");
        Ok((record.provider, value))
    }
}

/// A provider's failure as the caller sees it: 502 with the provider's words, 422 for settings.
fn provider_failure(err: ProviderError) -> AppError {
    match err {
        ProviderError::Invalid(message) => AppError::Validation(message),
        other => AppError::Provider(other.to_string()),
    }
}

/// Who the console's sealed session cookies are bound to (the associated data of the seal), so
/// no connector's sealed credentials open as a session, nor a session as credentials.
const CONSOLE_SESSION: &str = "engram-console-session";

impl App {
    /// Seals a console session (the sign-in's key and its times) with the credentials key, so
    /// every instance sharing that key opens it.
    pub async fn seal_console_session(&self, plain: &[u8]) -> AppResult<Vec<u8>> {
        self.sealer()
            .await?
            .seal(CONSOLE_SESSION, plain)
            .map_err(|e| AppError::Unavailable(e.to_string()))
    }

    /// Opens what [`App::seal_console_session`] sealed; `None` when it does not open (another
    /// key, tampered with, or not a session).
    pub async fn open_console_session(&self, sealed: &[u8]) -> AppResult<Option<Vec<u8>>> {
        Ok(self.sealer().await?.open(CONSOLE_SESSION, sealed).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ConnectorRecord {
        ConnectorRecord {
            id: "con_1".into(),
            org: engram_types::OrgId::from_trusted("org"),
            provider: "rss".into(),
            name: String::new(),
            auth_type: String::new(),
            database_id: engram_types::DatabaseId::from_trusted("db"),
            database_name: "db".into(),
            collection: "db".into(),
            account_scope: String::new(),
            custom_instructions: String::new(),
            sync_interval_s: 3600,
            credentials: None,
            credentials_updated_at: None,
            documents_dispatched: 0,
            first_data_dispatched_at: None,
            first_sync_at: None,
            last_attempted_sync_at: None,
            last_successful_sync_at: None,
            next_sync_at: None,
            last_error: String::new(),
            error_action: String::new(),
            failures: 0,
            paused_at: None,
            needs_reauth_at: None,
            needs_reauth_reason: String::new(),
            sync_blocked_at: None,
            sync_blocked_reason: String::new(),
            capped_at: None,
            plan_cap: None,
            run_id: None,
            lease_until: None,
            requested_run_id: None,
            created_at: UnixMs::from_millis(0),
            updated_at: UnixMs::from_millis(0),
            active_resources: 0,
            resources_pending_first_sync: 0,
            resources_checking: 0,
        }
    }

    #[test]
    fn health_follows_the_spec_state_section() {
        let now = UnixMs::from_millis(10_000);
        let mut r = record();
        let h = health(&r, now);
        assert_eq!(
            (h.lifecycle, h.status, h.sync_status),
            (
                Lifecycle::PendingSetup,
                HealthStatus::Degraded,
                SyncStatus::Idle
            )
        );
        r.active_resources = 1;
        r.resources_checking = 1;
        let h = health(&r, now);
        assert_eq!(
            (h.lifecycle, h.status),
            (Lifecycle::Ingesting, HealthStatus::Checking)
        );
        r.run_id = Some("run".into());
        r.lease_until = Some(UnixMs::from_millis(20_000));
        assert_eq!(health(&r, now).sync_status, SyncStatus::Syncing);
        r.first_sync_at = Some(now);
        r.resources_checking = 0;
        assert_eq!(
            (health(&r, now).lifecycle, health(&r, now).status),
            (Lifecycle::Syncing, HealthStatus::Healthy)
        );
        r.run_id = None;
        r.failures = 2;
        r.last_error = "timed out".into();
        let h = health(&r, now);
        assert_eq!(
            (h.lifecycle, h.status),
            (Lifecycle::Active, HealthStatus::Degraded)
        );
        assert!(h.error.unwrap().0.contains("timed out"));
        r.plan_cap = Some(PlanCap::self_hosted(
            engram_store::CapMeter::DocumentsPerConnector,
            10,
        ));
        assert_eq!(health(&r, now).status, HealthStatus::Capped);
        r.needs_reauth_at = Some(now);
        let h = health(&r, now);
        assert_eq!(
            (h.lifecycle, h.status),
            (Lifecycle::Reconnect, HealthStatus::Failed)
        );
        assert!(h.error.is_some());
        r.paused_at = Some(now);
        assert_eq!(
            (health(&r, now).lifecycle, health(&r, now).status),
            (Lifecycle::Paused, HealthStatus::Paused)
        );
    }
}
