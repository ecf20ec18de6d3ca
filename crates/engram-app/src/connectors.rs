//! Connectors: the use cases behind the connector routes (create, configure, pause, sync, the
//! credential vault), the health the spec's state section defines, and the scheduler that
//! syncs due connectors.
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
use std::time::{Duration, Instant};

use engram_connectors::{
    Access, Catalog, CatalogOptions, Content, Entry, Page, Position, Provider, ProviderError,
    ProviderInfo, ResourceRef, Sealer,
};
use engram_store::{
    ClaimedSync, ConnectorRecord, ConnectorSnapshot, ConnectorUpdate, NewConnector, NewResource,
    ResourceRecord, ResourceState, ResourceUpdate, RunRecord, StoreError, SyncLease, SyncOutcome,
    SyncPage, SyncRequest, SyncedObject,
};
use engram_types::limits::INSTRUCTIONS_MAX_CHARS;
use engram_types::{CollectionName, DatabaseName, UnixMs};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::ingest::SyncedItem;
use crate::{App, AppError, AppResult, Principal};

/// Longest connector name, account scope, resource id and display name.
const LABEL_MAX: usize = 1024;
/// Most resources one connector may sync.
const RESOURCES_MAX: usize = 500;
/// Longest `sync_blocked_reason`.
const BLOCKED_REASON_MAX: usize = 1000;
/// Objects deleted per write when a pass sweeps.
const SWEEP_PAGE: u32 = 200;

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

/// How a connector is doing, as the spec's state section defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub lifecycle: &'static str,
    pub sync_status: &'static str,
    pub status: &'static str,
    /// `(message, action)` when the connector itself has a problem.
    pub error: Option<(String, String)>,
    pub plan_cap: Option<Value>,
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

/// What the store holds of one resource's objects, as providers ask for it.
struct StoredObjects<'a> {
    store: &'a dyn engram_store::Store,
    connector_id: &'a str,
    resource_id: &'a str,
}

#[async_trait::async_trait]
impl engram_connectors::Known for StoredObjects<'_> {
    async fn objects(
        &self,
        native_ids: &[String],
    ) -> Result<std::collections::HashMap<String, engram_connectors::KnownObject>, ProviderError>
    {
        let stored = self
            .store
            .object_versions(self.connector_id, self.resource_id, native_ids)
            .await
            .map_err(|e| ProviderError::Transient {
                message: format!("reading what was synced before failed: {e}"),
                http_status: 0,
            })?;
        Ok(stored
            .into_iter()
            .map(|(id, o)| {
                let known = engram_connectors::KnownObject {
                    version: o.version,
                    state: o.state,
                };
                (id, known)
            })
            .collect())
    }
}

fn health(record: &ConnectorRecord, now: UnixMs) -> Health {
    let running = record.run_id.is_some() && record.lease_until.is_some_and(|until| until > now);
    let lifecycle = if record.paused_at.is_some() {
        "paused"
    } else if record.needs_reauth_at.is_some() || record.sync_blocked_at.is_some() {
        "reconnect"
    } else if record.active_resources == 0 {
        "pending_setup"
    } else if record.first_sync_at.is_none() {
        "ingesting"
    } else if running {
        "syncing"
    } else {
        "active"
    };
    let plan_cap = (!record.plan_cap.is_empty())
        .then(|| serde_json::from_str(&record.plan_cap).ok())
        .flatten();
    let (status, error, message) = if record.paused_at.is_some() {
        (
            "paused",
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
            "failed",
            Some((message.clone(), action.to_owned())),
            message,
        )
    } else if record.sync_blocked_at.is_some() {
        let message = format!("Syncing is blocked: {}", record.sync_blocked_reason);
        let action = "Fix the connector's settings or resources; updating them clears the block.";
        (
            "failed",
            Some((message.clone(), action.to_owned())),
            message,
        )
    } else if plan_cap.is_some() {
        let message = "A limit on synced documents stopped the last sync.".to_owned();
        ("capped", None, message)
    } else if record.active_resources == 0 {
        (
            "degraded",
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
        ("degraded", Some((message.clone(), action)), message)
    } else if record.resources_checking > 0 {
        (
            "checking",
            None,
            "Resources were configured; access is being tested.".to_owned(),
        )
    } else {
        ("healthy", None, String::new())
    };
    Health {
        lifecycle,
        sync_status: if running { "syncing" } else { "idle" },
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
        .filter(|r| r.state.status == "failed" || !r.state.sync_blocked_reason.is_empty())
        .count();
    if failing > 0 && matches!(health.status, "healthy" | "checking") {
        health.status = "degraded";
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

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

impl App {
    fn catalog(&self) -> &Catalog {
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

    async fn sealer(&self) -> AppResult<Arc<Sealer>> {
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

    async fn seal(
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

    async fn open_credentials(&self, record: &ConnectorRecord) -> AppResult<Map<String, Value>> {
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

    fn access(&self, owner: &str, credentials: Map<String, Value>) -> Access {
        Access {
            credentials,
            outbound: self.inner.outbound.clone(),
            owner: owner.to_owned(),
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
    async fn own_connector(&self, who: &Principal, id: &str) -> AppResult<ConnectorRecord> {
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
        let db = self.authorize_database(who, &name).await?;
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
        let records = self.store().list_connectors(&who.org, None).await?;
        Ok(records
            .into_iter()
            .filter(|r| who.may_use(&DatabaseName::from_trusted(&r.database_name)))
            .map(|r| self.view(r))
            .collect())
    }

    pub async fn connector(&self, who: &Principal, id: &str) -> AppResult<ConnectorView> {
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

    /// Deletes a connector, its resources and credentials; what it synced stays.
    pub async fn delete_connector(&self, who: &Principal, id: &str) -> AppResult<()> {
        self.own_connector(who, id).await?;
        if self.store().delete_connector(&who.org, id).await? {
            Ok(())
        } else {
            Err(AppError::ConnectorNotFound(id.to_owned()))
        }
    }

    pub async fn pause_connector(
        &self,
        who: &Principal,
        id: &str,
        paused: bool,
    ) -> AppResult<ConnectorView> {
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
        let record = self.own_connector(who, id).await?;
        let provider = self.catalog().get(&record.provider).ok_or_else(|| {
            AppError::Forbidden(format!("provider `{}` is not offered", record.provider))
        })?;
        let credentials = self.open_credentials(&record).await?;
        let found = provider
            .discover(&self.access(&record.id, credentials))
            .await
            .map_err(provider_failure)?;
        Ok((record.provider, found))
    }

    /// Resources an account offers, from credentials given now (before creating a connector).
    pub async fn discover_preview(
        &self,
        provider: &str,
        credentials: Option<Value>,
    ) -> AppResult<Vec<engram_connectors::DiscoveredResource>> {
        let source = self
            .catalog()
            .get(provider)
            .ok_or_else(|| AppError::InvalidParameters(format!("unknown provider `{provider}`")))?;
        let credentials = credentials_object(credentials)?;
        engram_connectors::check_credentials(source.info(), &Value::Object(credentials.clone()))
            .map_err(AppError::Validation)?;
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
        let db = self.authorize_database(who, &name).await?;
        if !m.collection.is_empty() {
            crate::ingest::parse_collection(&db, Some(&m.collection), "resources[].collection")?;
        }
        crate::ingest::check_metadata(&db, &m.metadata, &format!("{whose}.metadata"))?;
        let sync_mode = match m.sync_mode.as_str() {
            "" | "rescan" => "rescan",
            "new_only" => "new_only",
            other => {
                return Err(AppError::InvalidParameters(format!(
                    "{whose}.sync_mode `{other}` is not rescan or new_only"
                )))
            }
        };
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
            sync_mode: sync_mode.to_owned(),
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
        self.own_connector(who, id).await?;
        if self
            .store()
            .delete_resource(&who.org, id, resource_id)
            .await?
        {
            Ok(())
        } else {
            Err(AppError::ConnectorNotFound(format!(
                "{id}/resources/{resource_id}"
            )))
        }
    }

    /// Asks for a sync now; the run id names it in the run history.
    pub async fn request_sync(&self, who: &Principal, id: &str) -> AppResult<String> {
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
        let record = self.own_connector(who, id).await?;
        let credentials = self.open_credentials(&record).await?;
        let value = credentials.get(field).cloned().ok_or_else(|| {
            AppError::ConnectorNotFound(format!("{id}: no credential field `{field}`"))
        })?;
        tracing::info!(connector = %id, field, key = %who.key, "a credential was revealed");
        Ok((record.provider, value))
    }

    /// The scheduler: claims due syncs (at most `connectors.concurrency` at once on this
    /// instance) until `token` is cancelled.
    pub(crate) async fn run_connectors(&self, token: CancellationToken) {
        let config = self.config().connectors.clone();
        let running = Arc::new(tokio::sync::Semaphore::new(config.concurrency as usize));
        let tasks = tokio_util::task::TaskTracker::new();
        tracing::debug!("connector scheduler started");
        loop {
            while let Ok(slot) = running.clone().try_acquire_owned() {
                let lease_until = self.now().after(config.lease);
                match self
                    .store()
                    .claim_sync(&new_id("run"), self.now(), lease_until)
                    .await
                {
                    Ok(Some(claimed)) => {
                        let (app, stop) = (self.clone(), token.clone());
                        tasks.spawn(async move {
                            app.sync(claimed, stop).await;
                            drop(slot);
                        });
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::error!(error = %err, "claiming a connector sync failed");
                        break;
                    }
                }
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = self.inner.connectors.wake.notified() => {}
                () = tokio::time::sleep(config.poll) => {}
            }
        }
        tasks.close();
        tasks.wait().await;
        tracing::debug!("connector scheduler stopped");
    }

    /// Runs one claimed sync to its end and records how it ended.
    async fn sync(&self, claimed: ClaimedSync, stop: CancellationToken) {
        let lease = SyncLease {
            connector_id: claimed.connector.id.clone(),
            run_id: claimed.run_id.clone(),
        };
        let connector = claimed.connector;
        tracing::info!(connector = %connector.id, run = %lease.run_id, provider = %connector.provider, "sync started");
        let outcome = match self.sync_resources(&connector, &lease, &stop).await {
            Ok(Some(outcome)) => outcome,
            // The lease was lost (paused, deleted, taken over) or the server is stopping: the
            // next holder goes on from the last saved page.
            Ok(None) => {
                tracing::info!(connector = %connector.id, run = %lease.run_id, "sync stopped before its end");
                return;
            }
            Err(err) => {
                tracing::error!(connector = %connector.id, error = %err, "sync failed");
                SyncOutcome {
                    error: format!("internal error: {err}"),
                    next_sync_at: self.retry_at(&connector),
                    ..SyncOutcome::default()
                }
            }
        };
        let (succeeded, error) = (outcome.succeeded, outcome.error.clone());
        match self.store().finish_sync(&lease, &outcome, self.now()).await {
            Ok(true) => {
                tracing::info!(connector = %connector.id, run = %lease.run_id, succeeded, error = %error, "sync ended")
            }
            Ok(false) => {
                tracing::info!(connector = %connector.id, "sync ended after losing its lease")
            }
            Err(err) => {
                tracing::error!(connector = %connector.id, error = %err, "recording the end of a sync failed")
            }
        }
    }

    /// When a failed connector is tried again: the retry base doubled per failure in a row, at
    /// most its interval.
    fn retry_at(&self, connector: &ConnectorRecord) -> UnixMs {
        let base = self.config().connectors.retry_base;
        let doubled = base.saturating_mul(1 << connector.failures.min(16));
        let interval = Duration::from_secs(u64::from(connector.sync_interval_s));
        self.now().after(doubled.min(interval))
    }

    /// Syncs every resource; `None` when the lease was lost or the server stops.
    async fn sync_resources(
        &self,
        connector: &ConnectorRecord,
        lease: &SyncLease,
        stop: &CancellationToken,
    ) -> AppResult<Option<SyncOutcome>> {
        let now = self.now();
        let interval_next = now.after(Duration::from_secs(u64::from(connector.sync_interval_s)));
        let blocked = |reason: String| SyncOutcome {
            error: reason.clone(),
            action: "Fix the connector's settings, then update it.".into(),
            blocked: Some(clip(&reason, BLOCKED_REASON_MAX)),
            next_sync_at: interval_next,
            ..SyncOutcome::default()
        };
        let Some(provider) = self.catalog().get(&connector.provider) else {
            return Ok(Some(blocked(format!(
                "provider `{}` is not offered by this server",
                connector.provider
            ))));
        };
        let credentials = match self.open_credentials(connector).await {
            Ok(credentials) => credentials,
            Err(err) => return Ok(Some(blocked(err.to_string()))),
        };
        let access = self.access(&connector.id, credentials);
        let resources = self
            .store()
            .list_resources(&connector.org, &connector.id)
            .await?
            .unwrap_or_default();
        let mut outcome = SyncOutcome {
            succeeded: true,
            next_sync_at: interval_next,
            ..SyncOutcome::default()
        };
        let mut transient = Vec::new();
        for resource in &resources {
            if !resource.state.sync_blocked_reason.is_empty() {
                continue;
            }
            let mut state = ResourceState {
                resource_id: resource.resource.resource_id.clone(),
                retryable: true,
                checked_at: Some(self.now()),
                ..ResourceState::default()
            };
            match self
                .sync_resource(provider, &access, connector, resource, lease, stop)
                .await?
            {
                ResourceRun::Lost => return Ok(None),
                ResourceRun::Done { listed, changed } => {
                    state.status = if changed == 0 { "empty" } else { "ok" }.into();
                    state.last_row_count = listed;
                }
                ResourceRun::Capped { cap, listed } => {
                    state.status = "ok".into();
                    state.last_row_count = listed;
                    outcome.resources.push(state);
                    outcome.capped = Some(cap.to_string());
                    break;
                }
                ResourceRun::Failed(err) => {
                    state.status = "failed".into();
                    state.message = clip(&err.to_string(), BLOCKED_REASON_MAX);
                    state.http_status = err.http_status();
                    match &err {
                        ProviderError::Unauthorized { .. } => {
                            outcome.succeeded = false;
                            outcome.error = err.to_string();
                            outcome.action = "Update the connector's credentials.".into();
                            outcome.needs_reauth = Some(clip(&err.to_string(), BLOCKED_REASON_MAX));
                            state.action = "Reconnect: update the credentials.".into();
                            outcome.resources.push(state);
                            break;
                        }
                        ProviderError::Resource { .. } => {
                            state.retryable = false;
                            state.action = "Check that the resource still exists and may be read, or delete it.".into();
                        }
                        ProviderError::Invalid(reason) => {
                            state.retryable = false;
                            state.sync_blocked_reason = clip(reason, BLOCKED_REASON_MAX);
                            state.action = "Fix or delete the resource.".into();
                        }
                        ProviderError::Transient { .. } | ProviderError::Object(_) => {
                            state.action = "None needed: engram retries.".into();
                            transient.push(err.to_string());
                        }
                    }
                }
            }
            outcome.resources.push(state);
        }
        if !transient.is_empty() && outcome.needs_reauth.is_none() {
            outcome.succeeded = false;
            outcome.error = clip(&transient.join("; "), BLOCKED_REASON_MAX);
            outcome.next_sync_at = self.retry_at(connector);
        }
        Ok(Some(outcome))
    }

    /// One resource's pass from where it stopped.
    async fn sync_resource(
        &self,
        provider: &dyn Provider,
        access: &Access,
        connector: &ConnectorRecord,
        resource: &ResourceRecord,
        lease: &SyncLease,
        stop: &CancellationToken,
    ) -> AppResult<ResourceRun> {
        let limits = &self.config().connectors;
        let target = match self.sync_target(connector, resource).await {
            Ok(target) => target,
            Err(err) => return Ok(ResourceRun::Failed(ProviderError::Invalid(err.to_string()))),
        };
        let rref = ResourceRef {
            id: resource.resource.resource_id.clone(),
            resource_type: resource.resource.resource_type.clone(),
            filters: resource.resource.filters.clone(),
            provider_metadata: resource.resource.provider_metadata.clone(),
        };
        // A pass interrupted mid-way goes on under its id; otherwise a new pass starts.
        let pass_id = if resource.pass_position.is_empty() {
            new_id("pass")
        } else {
            resource.pass_id.clone()
        };
        let mut position = Position {
            cursor: resource.provider_cursor.clone(),
            within: resource.pass_position.clone(),
        };
        let (mut listed, mut changed) = (0_i64, 0_u64);
        let mut renewed = Instant::now();
        loop {
            if stop.is_cancelled() {
                return Ok(ResourceRun::Lost);
            }
            let known = StoredObjects {
                store: self.store(),
                connector_id: &connector.id,
                resource_id: &resource.resource.resource_id,
            };
            let page = match provider.list(access, &rref, &position, &known).await {
                Ok(page) => page,
                Err(err) => return Ok(ResourceRun::Failed(err)),
            };
            listed += i64::try_from(page.entries.len()).unwrap_or(0);
            let (record, cap) = match self
                .dispatch_page(
                    provider,
                    access,
                    connector,
                    resource,
                    &rref,
                    &target,
                    &pass_id,
                    &page,
                    lease,
                    &mut renewed,
                )
                .await?
            {
                Some(done) => done,
                None => return Ok(ResourceRun::Lost),
            };
            changed += u64::from(record.added + record.updated) + record.removed.len() as u64;
            let ends = page.next.is_none() && cap.is_none();
            let write = SyncPage {
                position: if ends {
                    String::new()
                } else {
                    page.next.clone().unwrap_or_else(|| position.within.clone())
                },
                // A provider without a cursor of its own (a full listing) is at "this pass done".
                finished_cursor: ends.then(|| {
                    if page.cursor.is_empty() {
                        pass_id.clone()
                    } else {
                        page.cursor.clone()
                    }
                }),
                ..record
            };
            let lease_until = self.now().after(limits.lease);
            if !self
                .store()
                .record_page(lease, &write, self.now(), lease_until)
                .await?
            {
                return Ok(ResourceRun::Lost);
            }
            renewed = Instant::now();
            if let Some(cap) = cap {
                return Ok(ResourceRun::Capped { cap, listed });
            }
            match page.next {
                Some(next) => position.within = next,
                None => {
                    if page.complete_listing {
                        match self.sweep(connector, resource, &pass_id, lease).await? {
                            Some(removed) => changed += removed,
                            None => return Ok(ResourceRun::Lost),
                        }
                    }
                    return Ok(ResourceRun::Done { listed, changed });
                }
            }
        }
    }

    /// Where a resource's objects go: its database (the connector's, or the override) and
    /// collection, with the instructions and metadata they carry.
    async fn sync_target(
        &self,
        connector: &ConnectorRecord,
        resource: &ResourceRecord,
    ) -> AppResult<Target> {
        let r = &resource.resource;
        let name = if r.database_override.is_empty() {
            &connector.database_name
        } else {
            &r.database_override
        };
        let name = DatabaseName::parse(name).map_err(|reason| AppError::InvalidName {
            field: "database",
            reason,
        })?;
        let db = self
            .store()
            .find_database(&connector.org, &name)
            .await?
            .ok_or_else(|| AppError::DatabaseNotFound(name.to_string()))?;
        let collection = if r.collection_override.is_empty() {
            &connector.collection
        } else {
            &r.collection_override
        };
        let collection = crate::ingest::parse_collection(&db, Some(collection), "collection")?;
        let instructions = [
            connector.custom_instructions.as_str(),
            r.custom_instructions.as_str(),
        ]
        .iter()
        .filter(|i| !i.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
        Ok(Target {
            db,
            collection,
            instructions,
        })
    }

    /// Dispatches what changed on a page: `None` when the lease was lost. Returns the page's
    /// record and, when a document limit stopped it, the limit.
    #[allow(clippy::too_many_arguments)]
    async fn dispatch_page(
        &self,
        provider: &dyn Provider,
        access: &Access,
        connector: &ConnectorRecord,
        resource: &ResourceRecord,
        rref: &ResourceRef,
        target: &Target,
        pass_id: &str,
        page: &Page,
        lease: &SyncLease,
        renewed: &mut Instant,
    ) -> AppResult<Option<(SyncPage, Option<Value>)>> {
        let limits = &self.config().connectors;
        let rid = &resource.resource.resource_id;
        let ids: Vec<String> = page.entries.iter().map(|e| e.native_id.clone()).collect();
        let known = self
            .store()
            .object_versions(&connector.id, rid, &ids)
            .await?;
        let mut record = SyncPage {
            resource_id: rid.clone(),
            pass_id: pass_id.to_owned(),
            ..SyncPage::default()
        };
        let new_only = resource.resource.sync_mode == "new_only";
        let mut fresh: Vec<&Entry> = Vec::new();
        for entry in &page.entries {
            match known.get(&entry.native_id) {
                Some(stored) if stored.version == entry.version || new_only => {
                    record.unchanged.push(entry.native_id.clone());
                }
                _ => fresh.push(entry),
            }
        }
        // Document limits: new objects only up to what room is left.
        let new_count = fresh
            .iter()
            .filter(|e| !known.contains_key(&e.native_id))
            .count() as u64;
        let mut cap = None;
        let mut room = u64::MAX;
        if new_count > 0 {
            let (mine, org) = self
                .store()
                .object_counts(&connector.org, &connector.id)
                .await?;
            let (one, all) = (
                limits.max_documents_per_connector,
                limits.max_documents_per_org,
            );
            room = one.saturating_sub(mine).min(all.saturating_sub(org));
            if new_count > room {
                let (meter, limit) = if one.saturating_sub(mine) <= all.saturating_sub(org) {
                    ("documents_per_connector", one)
                } else {
                    ("documents_per_organization", all)
                };
                cap = Some(json!({
                    "meter": meter,
                    "limit": limit,
                    "plan": "self-hosted",
                    "message": format!("{meter} is limited to {limit} (connectors.max_{meter}); raise it or remove documents"),
                }));
            }
        }
        let mut items = Vec::new();
        let mut dispatched = Vec::new();
        for entry in fresh {
            let is_new = !known.contains_key(&entry.native_id);
            if is_new {
                if room == 0 {
                    continue;
                }
                room -= 1;
            }
            if renewed.elapsed() > limits.lease / 3 {
                let until = self.now().after(limits.lease);
                if !self.store().renew_sync(lease, until).await? {
                    return Ok(None);
                }
                *renewed = Instant::now();
            }
            let content = match &entry.content {
                Some(content) => content.clone(),
                None => match provider
                    .fetch(access, rref, entry, self.config().ingest.max_upload_bytes)
                    .await
                {
                    Ok(content) => content,
                    Err(ProviderError::Object(reason)) => {
                        tracing::warn!(connector = %connector.id, object = %entry.native_id, %reason, "object skipped");
                        record.failed += 1;
                        // Still at the source: its item stays (the next pass tries again).
                        if !is_new {
                            record.unchanged.push(entry.native_id.clone());
                        }
                        continue;
                    }
                    Err(err) => {
                        tracing::warn!(connector = %connector.id, object = %entry.native_id, error = %err, "object not read");
                        record.failed += 1;
                        if !is_new {
                            record.unchanged.push(entry.native_id.clone());
                        }
                        continue;
                    }
                },
            };
            let id = engram_connectors::item_id(
                &connector.provider,
                &connector.account_scope,
                &entry.native_id,
            );
            items.push(self.synced_item(connector, resource, target, entry, id.clone(), content));
            dispatched.push((entry, id, is_new));
        }
        if !items.is_empty() {
            let results = self.enqueue_synced(&target.db, items).await?;
            for ((entry, id, is_new), result) in dispatched.into_iter().zip(results) {
                if result.status.is_none() {
                    tracing::warn!(connector = %connector.id, object = %entry.native_id, error = %result.error, "object refused");
                    record.failed += 1;
                    if !is_new {
                        record.unchanged.push(entry.native_id.clone());
                    }
                    continue;
                }
                if is_new {
                    record.added += 1;
                } else {
                    record.updated += 1;
                }
                record.dispatched.push(SyncedObject {
                    native_id: entry.native_id.clone(),
                    item_id: id,
                    database_id: target.db.id.clone(),
                    collection: target.collection.to_string(),
                    version: entry.version.clone(),
                    state: entry.state.clone(),
                });
            }
        }
        // Deletions a change feed reported.
        if !page.deleted.is_empty() {
            let ids: Vec<String> = page
                .deleted
                .iter()
                .map(|n| {
                    engram_connectors::item_id(&connector.provider, &connector.account_scope, n)
                })
                .collect();
            self.store()
                .delete_items(
                    &target.db.scope(),
                    &target.collection,
                    None,
                    &ids,
                    self.now(),
                )
                .await?;
            record.removed.extend(page.deleted.iter().cloned());
        }
        Ok(Some((record, cap)))
    }

    fn synced_item(
        &self,
        connector: &ConnectorRecord,
        resource: &ResourceRecord,
        target: &Target,
        entry: &Entry,
        id: String,
        content: Content,
    ) -> SyncedItem {
        let r = &resource.resource;
        let mut metadata = r.metadata.as_object().cloned().unwrap_or_default();
        metadata.insert("provider".into(), Value::from(connector.provider.clone()));
        let mut extra = r
            .additional_metadata
            .as_object()
            .cloned()
            .unwrap_or_default();
        // The provider's keys win over the resource's.
        for (key, value) in &entry.fields {
            extra.insert(key.clone(), value.clone());
        }
        extra.insert("provider".into(), Value::from(connector.provider.clone()));
        extra.insert("connector_id".into(), Value::from(connector.id.clone()));
        extra.insert("resource_id".into(), Value::from(r.resource_id.clone()));
        extra.insert(
            "provider_account_scope".into(),
            Value::from(connector.account_scope.clone()),
        );
        extra.insert("native_id".into(), Value::from(entry.native_id.clone()));
        if let Some(acl) = &r.acl {
            extra.insert("acl".into(), Value::from(acl.clone()));
        }
        SyncedItem {
            id,
            collection: target.collection.clone(),
            title: entry.title.clone(),
            file_name: if entry.file_name.is_empty() {
                entry.title.clone()
            } else {
                entry.file_name.clone()
            },
            url: entry.url.clone(),
            timestamp: entry.modified_at.clone(),
            content,
            metadata,
            additional_metadata: extra,
            instructions: target.instructions.clone(),
        }
    }

    /// After a pass that listed every object: deletes the items of objects it did not see.
    /// `None` when the lease was lost; else how many left.
    async fn sweep(
        &self,
        connector: &ConnectorRecord,
        resource: &ResourceRecord,
        pass_id: &str,
        lease: &SyncLease,
    ) -> AppResult<Option<u64>> {
        let rid = &resource.resource.resource_id;
        let mut removed = 0;
        loop {
            let gone = self
                .store()
                .unseen_objects(&connector.id, rid, pass_id, SWEEP_PAGE)
                .await?;
            if gone.is_empty() {
                return Ok(Some(removed));
            }
            // Each object's item lives where it was synced to (the resource may have moved).
            let mut by_place: std::collections::BTreeMap<(String, String), Vec<String>> =
                Default::default();
            for object in &gone {
                by_place
                    .entry((object.database_id.to_string(), object.collection.clone()))
                    .or_default()
                    .push(object.item_id.clone());
            }
            for ((database_id, collection), ids) in by_place {
                let scope = engram_store::DatabaseScope {
                    org: connector.org.clone(),
                    id: engram_types::DatabaseId::from_trusted(database_id),
                };
                let collection = CollectionName::from_trusted(collection);
                match self
                    .store()
                    .delete_items(&scope, &collection, None, &ids, self.now())
                    .await
                {
                    // A database deleted since: its items went with it.
                    Ok(_) | Err(StoreError::NotFound(_)) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            // The pass is done: its position stays empty and its cursor as the pass left it.
            let page = SyncPage {
                resource_id: rid.clone(),
                pass_id: pass_id.to_owned(),
                removed: gone.iter().map(|o| o.native_id.clone()).collect(),
                ..SyncPage::default()
            };
            let lease_until = self.now().after(self.config().connectors.lease);
            if !self
                .store()
                .record_page(lease, &page, self.now(), lease_until)
                .await?
            {
                return Ok(None);
            }
            removed += gone.len() as u64;
        }
    }
}

/// Where a resource's objects are written.
struct Target {
    db: engram_store::DatabaseRecord,
    collection: CollectionName,
    instructions: String,
}

/// How a resource's pass ended.
enum ResourceRun {
    Done { listed: i64, changed: u64 },
    Capped { cap: Value, listed: i64 },
    Failed(ProviderError),
    Lost,
}

/// A provider's failure as the caller sees it: 502 with the provider's words, 422 for settings.
fn provider_failure(err: ProviderError) -> AppError {
    match err {
        ProviderError::Invalid(message) => AppError::Validation(message),
        other => AppError::Provider(other.to_string()),
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
            plan_cap: String::new(),
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
            ("pending_setup", "degraded", "idle")
        );
        r.active_resources = 1;
        r.resources_checking = 1;
        let h = health(&r, now);
        assert_eq!((h.lifecycle, h.status), ("ingesting", "checking"));
        r.run_id = Some("run".into());
        r.lease_until = Some(UnixMs::from_millis(20_000));
        assert_eq!(health(&r, now).sync_status, "syncing");
        r.first_sync_at = Some(now);
        r.resources_checking = 0;
        assert_eq!(
            (health(&r, now).lifecycle, health(&r, now).status),
            ("syncing", "healthy")
        );
        r.run_id = None;
        r.failures = 2;
        r.last_error = "timed out".into();
        let h = health(&r, now);
        assert_eq!((h.lifecycle, h.status), ("active", "degraded"));
        assert!(h.error.unwrap().0.contains("timed out"));
        r.plan_cap = json!({"meter": "documents_per_connector"}).to_string();
        assert_eq!(health(&r, now).status, "capped");
        r.needs_reauth_at = Some(now);
        let h = health(&r, now);
        assert_eq!((h.lifecycle, h.status), ("reconnect", "failed"));
        assert!(h.error.is_some());
        r.paused_at = Some(now);
        assert_eq!(
            (health(&r, now).lifecycle, health(&r, now).status),
            ("paused", "paused")
        );
    }
}
