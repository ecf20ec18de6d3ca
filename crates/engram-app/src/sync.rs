//! The sync engine: the scheduler that claims due connectors and runs each sync, resource by
//! resource and page by page (see `crate::connectors` for what a sync guarantees).

use std::sync::Arc;
use std::time::{Duration, Instant};

use engram_connectors::{
    Access, Content, Entry, Page, Position, Provider, ProviderError, ResourceRef,
};
use engram_store::{
    CapMeter, ClaimedSync, ConnectorRecord, PlanCap, ResourceRecord, ResourceState, ResourceStatus,
    StoreError, SyncLease, SyncMode, SyncOutcome, SyncPage, SyncedObject,
};
use engram_types::{CollectionName, DatabaseName, UnixMs};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::connectors::{clip, new_id};
use crate::ingest::SyncedItem;
use crate::oauth::RefreshFailure;
use crate::{App, AppError, AppResult};
use engram_connectors::oauth::OAuthCredentials;

/// Longest `sync_blocked_reason`.
const BLOCKED_REASON_MAX: usize = 1000;
/// Objects deleted per write when a pass sweeps.
const SWEEP_PAGE: u32 = 200;

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

impl App {
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
        let refreshable =
            OAuthCredentials::read(&credentials).is_some_and(|oauth| oauth.refresh_token.is_some());
        let credentials = match self
            .refresh_under_lease(connector, lease, credentials, false)
            .await
        {
            Ok(credentials) => credentials,
            Err(failure) => return self.refresh_failed(failure, connector, interval_next),
        };
        let mut access = self.access(&connector.id, OAuthCredentials::provider_view(&credentials));
        // An OAuth token the provider rejects before its expiry (revoked, or its lifetime
        // shorter than said) is refreshed once and the resource read again.
        let mut refreshed_on_rejection = !refreshable;
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
        // The latest time a source said its rate limit resets.
        let mut rate_limited_until: Option<UnixMs> = None;
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
            let mut run = self
                .sync_resource(provider, &access, connector, resource, lease, stop)
                .await?;
            if matches!(run, ResourceRun::Failed(ProviderError::Unauthorized { .. }))
                && !refreshed_on_rejection
            {
                refreshed_on_rejection = true;
                let current = match self.open_credentials(connector).await {
                    Ok(current) => current,
                    Err(err) => return Ok(Some(blocked(err.to_string()))),
                };
                let credentials = match self
                    .refresh_under_lease(connector, lease, current, true)
                    .await
                {
                    Ok(credentials) => credentials,
                    Err(failure) => return self.refresh_failed(failure, connector, interval_next),
                };
                access = self.access(&connector.id, OAuthCredentials::provider_view(&credentials));
                run = self
                    .sync_resource(provider, &access, connector, resource, lease, stop)
                    .await?;
            }
            match run {
                ResourceRun::Lost => return Ok(None),
                ResourceRun::Done {
                    listed,
                    changed,
                    acl,
                } => {
                    state.status = if changed == 0 {
                        ResourceStatus::Empty
                    } else {
                        ResourceStatus::Ok
                    };
                    state.last_row_count = listed;
                    (state.acl_warning, state.page_acl_warning) = (acl.resource, acl.objects);
                }
                ResourceRun::Capped { cap, listed, acl } => {
                    state.status = ResourceStatus::Ok;
                    state.last_row_count = listed;
                    (state.acl_warning, state.page_acl_warning) = (acl.resource, acl.objects);
                    outcome.resources.push(state);
                    outcome.capped = Some(cap);
                    break;
                }
                ResourceRun::Failed(err) => {
                    // What the last pass found of permissions holds until one reads them.
                    state.acl_warning = resource.state.acl_warning.clone();
                    state.page_acl_warning = resource.state.page_acl_warning.clone();
                    state.status = ResourceStatus::Failed;
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
                        ProviderError::RateLimited { until_unix, .. } => {
                            state.action =
                                "None needed: engram waits until the limit resets.".into();
                            transient.push(err.to_string());
                            let until = UnixMs::from_millis(until_unix.saturating_mul(1000));
                            rate_limited_until = rate_limited_until.max(Some(until));
                        }
                    }
                }
            }
            outcome.resources.push(state);
        }
        if !transient.is_empty() && outcome.needs_reauth.is_none() {
            outcome.succeeded = false;
            outcome.error = clip(&transient.join("; "), BLOCKED_REASON_MAX);
            outcome.next_sync_at = self.retry_at(connector).max(
                rate_limited_until
                    .unwrap_or(UnixMs::EPOCH)
                    .min(interval_next.max(self.now())),
            );
        }
        Ok(Some(outcome))
    }

    /// How a sync ends when its OAuth token could not be refreshed: `needs_reauth` for a grant
    /// the server refused, a retry later for an outage, blocked for the app's settings; `None`
    /// when the lease was lost meanwhile.
    fn refresh_failed(
        &self,
        failure: RefreshFailure,
        connector: &ConnectorRecord,
        interval_next: UnixMs,
    ) -> AppResult<Option<SyncOutcome>> {
        let reason = match failure {
            RefreshFailure::Lost => return Ok(None),
            RefreshFailure::App(err) => return Err(err),
            RefreshFailure::Reauthorize(reason) => {
                return Ok(Some(SyncOutcome {
                    error: clip(&reason, BLOCKED_REASON_MAX),
                    action: format!(
                        "Authorize the connector again (POST /connectors/{}/oauth/start) or give new credentials.",
                        connector.id
                    ),
                    needs_reauth: Some(clip(&reason, BLOCKED_REASON_MAX)),
                    next_sync_at: interval_next,
                    ..SyncOutcome::default()
                }))
            }
            RefreshFailure::Transient(reason) => {
                return Ok(Some(SyncOutcome {
                    error: clip(&reason, BLOCKED_REASON_MAX),
                    action: "None needed: engram retries.".into(),
                    next_sync_at: self.retry_at(connector),
                    ..SyncOutcome::default()
                }))
            }
            RefreshFailure::Blocked(reason) => reason,
        };
        Ok(Some(SyncOutcome {
            error: reason.clone(),
            action: "Fix the connector's OAuth settings, then update it.".into(),
            blocked: Some(clip(&reason, BLOCKED_REASON_MAX)),
            next_sync_at: interval_next,
            ..SyncOutcome::default()
        }))
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
        let rref = resource_ref(resource);
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
        let mut pass = ResourcePass {
            app: self,
            provider,
            access,
            connector,
            resource,
            rref,
            target,
            pass_id,
            lease,
            renewed: Instant::now(),
        };
        let (mut listed, mut changed) = (0_i64, 0_u64);
        // What the pass could not read of who may read (a pass resumed keeps its earlier pages').
        let mut acl = if position.within.is_empty() {
            AclWarnings::default()
        } else {
            AclWarnings {
                resource: resource.state.acl_warning.clone(),
                objects: resource.state.page_acl_warning.clone(),
            }
        };
        loop {
            if stop.is_cancelled() {
                return Ok(ResourceRun::Lost);
            }
            let known = StoredObjects {
                store: self.store(),
                connector_id: &connector.id,
                resource_id: &resource.resource.resource_id,
            };
            let page = match provider.list(access, &pass.rref, &position, &known).await {
                Ok(page) => page,
                Err(err) => return Ok(ResourceRun::Failed(err)),
            };
            listed += i64::try_from(page.entries.len()).unwrap_or(0);
            acl.note(&page);
            let (record, cap) = match pass.dispatch_page(&page).await? {
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
                        pass.pass_id.clone()
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
            pass.renewed = Instant::now();
            if let Some(cap) = cap {
                return Ok(ResourceRun::Capped { cap, listed, acl });
            }
            match page.next {
                Some(next) => position.within = next,
                None => {
                    if page.complete_listing {
                        match self
                            .sweep(connector, resource, &pass.pass_id, lease)
                            .await?
                        {
                            Some(removed) => changed += removed,
                            None => return Ok(ResourceRun::Lost),
                        }
                    }
                    return Ok(ResourceRun::Done {
                        listed,
                        changed,
                        acl,
                    });
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
        // A rule set on the resource wins over who the source says may read the object.
        match &r.acl {
            Some(acl) => {
                extra.insert(crate::filters::ACL_FIELD.into(), Value::from(acl.clone()));
            }
            None => {
                if let Some(readers) = extra.remove(crate::filters::ACL_FIELD) {
                    if let Some(rule) = crate::filters::source_rule(&readers) {
                        extra.insert(crate::filters::ACL_FIELD.into(), Value::from(rule));
                    }
                }
            }
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

/// One resource's pass under way: what each of its pages is dispatched with.
struct ResourcePass<'a> {
    app: &'a App,
    provider: &'a dyn Provider,
    access: &'a Access,
    connector: &'a ConnectorRecord,
    resource: &'a ResourceRecord,
    rref: ResourceRef,
    target: Target,
    pass_id: String,
    lease: &'a SyncLease,
    /// When the lease was last renewed.
    renewed: Instant,
}

/// A changed object read from its source, ready to queue.
struct Fetched<'e> {
    entry: &'e Entry,
    item_id: String,
    is_new: bool,
}

impl<'a> ResourcePass<'a> {
    /// Dispatches what changed on a page: `None` when the lease was lost. Returns the page's
    /// record and, when a document limit stopped it, the limit.
    async fn dispatch_page(
        &mut self,
        page: &Page,
    ) -> AppResult<Option<(SyncPage, Option<PlanCap>)>> {
        let rid = &self.resource.resource.resource_id;
        let ids: Vec<String> = page.entries.iter().map(|e| e.native_id.clone()).collect();
        let known = self
            .app
            .store()
            .object_versions(&self.connector.id, rid, &ids)
            .await?;
        let mut record = SyncPage {
            resource_id: rid.clone(),
            pass_id: self.pass_id.clone(),
            ..SyncPage::default()
        };
        // What changed since the last pass (everything unknown, in `new_only` mode).
        let new_only = self.resource.resource.sync_mode == SyncMode::NewOnly;
        let mut fresh: Vec<&Entry> = Vec::new();
        for entry in &page.entries {
            match known.get(&entry.native_id) {
                Some(stored) if stored.version == entry.version || new_only => {
                    record.unchanged.push(entry.native_id.clone());
                }
                _ => fresh.push(entry),
            }
        }
        let new_count = fresh
            .iter()
            .filter(|e| !known.contains_key(&e.native_id))
            .count() as u64;
        let (mut room, cap) = self.room_for_new(new_count).await?;
        let mut items = Vec::new();
        let mut fetched = Vec::new();
        for entry in fresh {
            let is_new = !known.contains_key(&entry.native_id);
            if is_new {
                if room == 0 {
                    continue;
                }
                room -= 1;
            }
            if !self.keep_lease().await? {
                return Ok(None);
            }
            let Some(content) = self.read(entry).await else {
                record.failed += 1;
                // Still at the source: its item stays (the next pass tries again).
                if !is_new {
                    record.unchanged.push(entry.native_id.clone());
                }
                continue;
            };
            let item_id = self.item_id(&entry.native_id);
            let item = self.app.synced_item(
                self.connector,
                self.resource,
                &self.target,
                entry,
                item_id.clone(),
                content,
            );
            items.push(item);
            fetched.push(Fetched {
                entry,
                item_id,
                is_new,
            });
        }
        self.enqueue(items, fetched, &mut record).await?;
        self.remove_deleted(page, &mut record).await?;
        Ok(Some((record, cap)))
    }

    /// How many new objects the document limits leave room for, and the limit that stops the
    /// page when `new_count` is more.
    async fn room_for_new(&self, new_count: u64) -> AppResult<(u64, Option<PlanCap>)> {
        if new_count == 0 {
            return Ok((u64::MAX, None));
        }
        let limits = &self.app.config().connectors;
        let (mine, org) = self
            .app
            .store()
            .object_counts(&self.connector.org, &self.connector.id)
            .await?;
        let (one, all) = (
            limits.max_documents_per_connector,
            limits.max_documents_per_org,
        );
        let room = one.saturating_sub(mine).min(all.saturating_sub(org));
        if new_count <= room {
            return Ok((room, None));
        }
        let cap = if one.saturating_sub(mine) <= all.saturating_sub(org) {
            PlanCap::self_hosted(CapMeter::DocumentsPerConnector, one)
        } else {
            PlanCap::self_hosted(CapMeter::DocumentsPerOrganization, all)
        };
        Ok((room, Some(cap)))
    }

    /// Renews the lease once a third of it has passed; false when it was lost.
    async fn keep_lease(&mut self) -> AppResult<bool> {
        let lease = self.app.config().connectors.lease;
        if self.renewed.elapsed() > lease / 3 {
            let until = self.app.now().after(lease);
            if !self.app.store().renew_sync(self.lease, until).await? {
                return Ok(false);
            }
            self.renewed = Instant::now();
        }
        Ok(true)
    }

    /// An object's content, as listed or fetched from its source; `None` (logged) when it
    /// cannot be read now.
    async fn read(&self, entry: &Entry) -> Option<Content> {
        if let Some(content) = &entry.content {
            return Some(content.clone());
        }
        let most = self.app.config().ingest.max_upload_bytes;
        match self
            .provider
            .fetch(self.access, &self.rref, entry, most)
            .await
        {
            Ok(content) => Some(content),
            Err(ProviderError::Object(reason)) => {
                tracing::warn!(connector = %self.connector.id, object = %entry.native_id, %reason, "object skipped");
                None
            }
            Err(err) => {
                tracing::warn!(connector = %self.connector.id, object = %entry.native_id, error = %err, "object not read");
                None
            }
        }
    }

    /// The item an object of this connector becomes.
    fn item_id(&self, native_id: &str) -> String {
        engram_connectors::item_id(
            &self.connector.provider,
            &self.connector.account_scope,
            native_id,
        )
    }

    /// Queues the read objects as items and records each: added, updated, or failed when
    /// ingestion refused it.
    async fn enqueue(
        &self,
        items: Vec<SyncedItem>,
        fetched: Vec<Fetched<'_>>,
        record: &mut SyncPage,
    ) -> AppResult<()> {
        if items.is_empty() {
            return Ok(());
        }
        let results = self.app.enqueue_synced(&self.target.db, items).await?;
        for (object, result) in fetched.into_iter().zip(results) {
            let entry = object.entry;
            if result.status.is_none() {
                tracing::warn!(connector = %self.connector.id, object = %entry.native_id, error = %result.error, "object refused");
                record.failed += 1;
                if !object.is_new {
                    record.unchanged.push(entry.native_id.clone());
                }
                continue;
            }
            if object.is_new {
                record.added += 1;
            } else {
                record.updated += 1;
            }
            record.dispatched.push(SyncedObject {
                native_id: entry.native_id.clone(),
                item_id: object.item_id,
                database_id: self.target.db.id.clone(),
                collection: self.target.collection.to_string(),
                version: entry.version.clone(),
                state: entry.state.clone(),
            });
        }
        Ok(())
    }

    /// Deletes the items of the objects a change feed reported deleted.
    async fn remove_deleted(&self, page: &Page, record: &mut SyncPage) -> AppResult<()> {
        if page.deleted.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = page.deleted.iter().map(|n| self.item_id(n)).collect();
        self.app
            .store()
            .delete_items(
                &self.target.db.scope(),
                &self.target.collection,
                None,
                &ids,
                self.app.now(),
            )
            .await?;
        record.removed.extend(page.deleted.iter().cloned());
        Ok(())
    }
}

/// How a resource's pass ended.
/// What a pass could not read of who may read a resource and its objects
/// (`acl_warning`, `page_acl_warning` in the status).
#[derive(Debug, Default)]
struct AclWarnings {
    resource: String,
    objects: String,
}

impl AclWarnings {
    /// The latest page's word on the resource; the first page's on its objects.
    fn note(&mut self, page: &Page) {
        if !page.acl_warning.is_empty() {
            self.resource = clip(&page.acl_warning, BLOCKED_REASON_MAX);
        }
        if !page.page_acl_warning.is_empty() && self.objects.is_empty() {
            self.objects = clip(&page.page_acl_warning, BLOCKED_REASON_MAX);
        }
    }
}

enum ResourceRun {
    Done {
        listed: i64,
        changed: u64,
        acl: AclWarnings,
    },
    Capped {
        cap: PlanCap,
        listed: i64,
        acl: AclWarnings,
    },
    Failed(ProviderError),
    Lost,
}

/// What a provider is told of a resource.
pub(crate) fn resource_ref(resource: &ResourceRecord) -> ResourceRef {
    ResourceRef {
        id: resource.resource.resource_id.clone(),
        resource_type: resource.resource.resource_type.clone(),
        filters: resource.resource.filters.clone(),
        provider_metadata: resource.resource.provider_metadata.clone(),
    }
}
