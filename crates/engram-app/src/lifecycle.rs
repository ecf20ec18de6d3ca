//! The database lifecycle worker: finishes provisioning (builds each database's storage and
//! index directories, turning its readiness flags true one by one) and deletion (removes the
//! directories, then purges every row). The state lives in the store, so work interrupted by a
//! crash is picked up again at the next start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engram_graph::RuleExtractor;
use engram_pipeline::{Pipeline, PipelineOptions};
use engram_store::{DatabaseRecord, DatabaseState, InfraFlags};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::{App, AppResult};

/// A part of a database's storage: its directory name and the readiness flag it turns on.
type ProvisionStep = (&'static str, fn(&mut InfraFlags));

/// The running background workers; dropped or shut down together.
pub struct Workers {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Workers {
    /// Asks every worker to stop after its current step and waits up to `grace` for them.
    pub async fn shutdown(self, grace: Duration) {
        self.token.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("background workers did not stop within the grace period");
        }
    }
}

impl App {
    /// The graph extractor indexing uses: the model at `[llm]` when one is configured for
    /// graphs (the rules reading what it cannot), else the offline rules.
    fn graph_extractor(&self) -> Arc<dyn engram_graph::GraphExtractor> {
        let rules: Arc<dyn engram_graph::GraphExtractor> = Arc::new(RuleExtractor);
        if !self.graph_reads_instructions() {
            return rules;
        }
        Arc::new(engram_graph::LlmExtractor::new(
            self.inner.outbound.clone(),
            self.llm_settings(),
            rules,
        ))
    }

    /// Whether graph extraction reads an item's instructions: a model configured for graphs.
    pub fn graph_reads_instructions(&self) -> bool {
        let llm = &self.config().llm;
        !llm.base_url.trim().is_empty() && llm.graph
    }

    /// `[llm]` as the model client takes it.
    pub(crate) fn llm_settings(&self) -> engram_graph::LlmSettings {
        let llm = &self.config().llm;
        engram_graph::LlmSettings {
            base_url: llm.base_url.clone(),
            api_key: llm.api_key.clone(),
            model: llm.model.clone(),
            batch_chars: llm.batch_chars.max(1),
            max_batches: llm.max_batches.max(1),
            max_output_tokens: llm.max_output_tokens.max(1),
            timeout: std::time::Duration::from_millis(llm.timeout_ms.max(1)),
            attempts: llm.attempts.max(1),
            backoff: engram_types::Backoff {
                base: std::time::Duration::from_millis(500),
                max: std::time::Duration::from_secs(10),
                jitter: 0.2,
            },
        }
    }

    /// Starts the background workers; they stop when `token` is cancelled.
    pub fn start_workers(&self, token: CancellationToken) -> Workers {
        let tracker = TaskTracker::new();
        let app = self.clone();
        let worker_token = token.clone();
        tracker.spawn(async move { app.run_lifecycle(worker_token).await });
        tracker.spawn(
            self.webhook_dispatcher()
                .run(self.inner.webhook_wake.clone(), token.clone()),
        );
        let app = self.clone();
        let connector_token = token.clone();
        tracker.spawn(async move { app.run_connectors(connector_token).await });
        if let Some(clock) = &self.inner.synced_clock {
            tracker.spawn(crate::clock::keep_in_step(
                self.inner.store.clone(),
                clock.clone(),
                token.clone(),
            ));
        }
        if let Some(models) = &self.inner.models {
            let config = &self.config().pipeline;
            let options = PipelineOptions::new(config, &self.config().budgets);
            for _ in 0..config.workers {
                let pipeline = Pipeline::new(
                    self.inner.store.clone(),
                    models.embedder.clone(),
                    models.tokens.clone(),
                    self.inner.clock.clone(),
                    options.clone(),
                )
                .with_batch_wake(self.inner.webhook_wake.clone())
                .with_batch_wake(self.inner.index_wake.clone());
                let pipeline = match self.chat_model().filter(|_| self.config().llm.infer) {
                    Some(model) => {
                        pipeline.with_inference(Arc::new(engram_graph::LlmInference::new(model)))
                    }
                    None => pipeline,
                };
                let pipeline = if self.config().graph.extract {
                    pipeline.with_graph(self.graph_extractor())
                } else {
                    pipeline
                };
                tracker.spawn(pipeline.run(self.inner.pipeline_wake.clone(), token.clone()));
            }
            let app = self.clone();
            let sweep_token = token.clone();
            tracker.spawn(async move { app.run_expiry_sweeper(sweep_token).await });
            let (indexes, wake, follow_token) = (
                self.inner.indexes.clone(),
                self.inner.index_wake.clone(),
                token.clone(),
            );
            let every = config.poll;
            tracker.spawn(async move { indexes.follow(wake, every, follow_token).await });
        }
        Workers { token, tracker }
    }

    async fn run_lifecycle(&self, token: CancellationToken) {
        let poll = self.config().workers.lifecycle_poll;
        tracing::debug!("database lifecycle worker started");
        loop {
            if let Err(err) = self.lifecycle_pass(&token).await {
                tracing::error!(error = %err, source = ?std::error::Error::source(&err), "database lifecycle pass failed");
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = self.inner.lifecycle_wake.notified() => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
        tracing::debug!("database lifecycle worker stopped");
    }

    /// Purges expired memories in the background (they vanish from reads at once regardless).
    async fn run_expiry_sweeper(&self, token: CancellationToken) {
        let every = self.config().pipeline.expiry_sweep;
        loop {
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep(every) => {}
            }
            match self.purge_expired_memories().await {
                Ok(0) => {}
                Ok(chunks) => tracing::info!(chunks, "purged expired memories"),
                Err(err) => tracing::error!(error = %err, "purging expired memories failed"),
            }
        }
    }

    /// Deletes up to 1,000 expired memories with their chunks (the indexes follow); returns
    /// how many chunks went.
    pub(crate) async fn purge_expired_memories(&self) -> AppResult<u64> {
        Ok(self.store().purge_expired(self.now(), 1_000).await?)
    }

    /// One pass over every database that needs work. Public to the crate's tests.
    pub(crate) async fn lifecycle_pass(&self, token: &CancellationToken) -> AppResult<()> {
        for db in self.store().databases_needing_work().await? {
            if token.is_cancelled() {
                break;
            }
            match db.state {
                DatabaseState::Provisioning => self.provision(&db).await?,
                DatabaseState::Deleting => self.purge(&db).await?,
                DatabaseState::Ready => {}
            }
        }
        Ok(())
    }

    fn database_dir(&self, db: &DatabaseRecord) -> PathBuf {
        self.inner.data_dir.join("databases").join(db.id.as_str())
    }

    async fn provision(&self, db: &DatabaseRecord) -> AppResult<()> {
        let dir = self.database_dir(db);
        let mut infra = db.infra;
        // The job queue lives in the store, which exists; the other parts get their directory.
        let steps: [ProvisionStep; 4] = [
            ("queue", |f| f.scheduler = true),
            ("graph", |f| f.graph = true),
            ("knowledge", |f| f.knowledge_vectors = true),
            ("memories", |f| f.memory_vectors = true),
        ];
        for (part, mark) in steps {
            tokio::fs::create_dir_all(dir.join(part))
                .await
                .map_err(engram_store::StoreError::from)?;
            mark(&mut infra);
            self.store().set_infra(&db.id, infra, self.now()).await?;
        }
        tracing::info!(database = %db.name, id = %db.id, "database provisioned");
        Ok(())
    }

    async fn purge(&self, db: &DatabaseRecord) -> AppResult<()> {
        match tokio::fs::remove_dir_all(self.database_dir(db)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(engram_store::StoreError::from(e).into())
            }
            _ => {}
        }
        self.store().purge_database(&db.id).await?;
        tracing::info!(database = %db.name, id = %db.id, "database purged");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use engram_config::Config;
    use engram_store::sqlite::SqliteStore;
    use engram_types::UnixMs;

    use super::*;
    use crate::testing::{acme_docs, config_with_model};
    use crate::{Clock, SystemClock};

    async fn app(dir: &std::path::Path) -> App {
        let config = Config {
            data_dir: dir.to_path_buf(),
            ..Config::default()
        };
        let store = SqliteStore::open(dir).await.unwrap();
        App::with_store(config, Arc::new(store), Arc::new(SystemClock), None).unwrap()
    }

    /// A clock a test moves forward.
    struct Later(std::sync::atomic::AtomicI64);

    impl Clock for Later {
        fn now(&self) -> UnixMs {
            UnixMs::from_millis(
                SystemClock.now().as_millis() + self.0.load(std::sync::atomic::Ordering::Relaxed),
            )
        }
    }

    /// Purging expired memories takes their vectors out of the index too (nothing a query
    /// could return, but memory the index would otherwise hold until a restart).
    #[tokio::test]
    async fn purging_expired_memories_removes_their_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_with_model(dir.path());
        let models = crate::models::Models::load(&config.embedding)
            .await
            .expect("the model is set up (make setup)");
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let clock = Arc::new(Later(std::sync::atomic::AtomicI64::new(0)));
        let app = App::with_store(config, Arc::new(store), clock.clone(), Some(models)).unwrap();
        let (who, db) = acme_docs(&app).await;
        let memory = |id: &str, text: &str, expiry_time: Option<i64>| crate::MemoryInput {
            id: Some(id.into()),
            text: Some(text.into()),
            expiry_time,
            ..Default::default()
        };
        let request = crate::MemoryRequest {
            collection: None,
            upsert: true,
            memories: vec![
                memory("brief", "the parking code is 4411 this week", Some(60)),
                memory("kept", "Dana prefers window seats", None),
            ],
        };
        app.ingest_memories(&who, &db.name, request).await.unwrap();
        let token = CancellationToken::new();
        let workers = app.start_workers(token.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while app.indexes().vector_count(&db.id).await.unwrap() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "indexing did not finish"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        workers.shutdown(Duration::from_secs(10)).await;
        assert_eq!(
            app.purge_expired_memories().await.unwrap(),
            0,
            "not expired yet"
        );
        assert_eq!(app.indexes().vector_count(&db.id).await.unwrap(), 2);

        clock.0.store(120_000, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(app.purge_expired_memories().await.unwrap(), 1);
        assert_eq!(
            app.indexes().vector_count(&db.id).await.unwrap(),
            1,
            "the expired memory's vector is gone"
        );
        app.close().await;
    }

    /// The vector index follows what the store holds: loaded at open, kept current by the
    /// pipeline and by deletions. Needs the model from `make setup`.
    #[tokio::test]
    async fn the_vector_index_follows_the_store_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_with_model(dir.path());
        let app = App::open(config.clone())
            .await
            .expect("the model is set up (make setup)");
        let (who, db) = acme_docs(&app).await;
        let texts = [
            "zebras graze on the savanna",
            "the printer on floor three is jammed",
            "green tea is calming",
        ];
        let request = crate::KnowledgeRequest {
            upsert: true,
            app_knowledge: texts
                .iter()
                .enumerate()
                .map(|(i, t)| crate::AppSource {
                    id: Some(format!("a{i}")),
                    text: (*t).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        app.ingest_knowledge(&who, &db.name, request).await.unwrap();
        let token = CancellationToken::new();
        let workers = app.start_workers(token.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while app.indexes().vector_count(&db.id).await.unwrap() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "indexing did not finish"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let query = app
            .inner
            .models
            .as_ref()
            .unwrap()
            .embedder
            .embed(&["a jammed printer"])
            .unwrap()
            .remove(0);
        let (indexes, scope) = (app.indexes(), db.scope());
        let nearest = |query: Vec<f32>| {
            let scope = scope.clone();
            async move {
                let filter = engram_index::IndexFilter::default();
                indexes
                    .nearest(&scope, query.into(), 1, &filter, None)
                    .await
                    .unwrap()
            }
        };
        let best = nearest(query.clone()).await[0].0;
        let (_, deleted) = app
            .delete_items(&who, &db.name, None, None, &["a1".into()])
            .await
            .unwrap();
        assert!(deleted[0].deleted);
        app.indexes().catch_up().await.unwrap();
        assert_ne!(
            nearest(query).await[0].0,
            best,
            "the deleted printer chunk is no longer the nearest"
        );
        assert_eq!(
            app.indexes().vector_count(&db.id).await.unwrap(),
            2,
            "deletion removes its vectors"
        );
        workers.shutdown(Duration::from_secs(10)).await;
        app.close().await;

        let reopened = App::open(config).await.unwrap();
        assert_eq!(
            reopened.indexes().vector_count(&db.id).await.unwrap(),
            2,
            "rebuilt from the store"
        );
        reopened.close().await;
    }

    #[tokio::test]
    async fn provisioning_builds_storage_and_deletion_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path()).await;
        let (who, db) = acme_docs(&app).await;
        assert_eq!(db.state, DatabaseState::Provisioning);
        let token = CancellationToken::new();
        app.lifecycle_pass(&token).await.unwrap();
        let ready = app.database(&who, &db.name).await.unwrap();
        assert_eq!(
            (ready.state, ready.infra),
            (DatabaseState::Ready, InfraFlags::READY)
        );
        let db_dir = app.database_dir(&ready);
        assert!(db_dir.join("knowledge").is_dir() && db_dir.join("memories").is_dir());

        app.delete_database(&who, &db.name).await.unwrap();
        app.lifecycle_pass(&token).await.unwrap();
        assert!(!db_dir.exists());
        assert!(app.list_databases(&who).await.unwrap().is_empty());
    }
}
