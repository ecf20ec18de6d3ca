//! engram's use cases behind one facade ([`App`]), independent of HTTP: API keys and
//! authentication, authorization and tenancy, rate limits, databases and their background
//! lifecycle. Both API generations call the same functions here.

// Adapters pass other layers' errors and JSON values through (`other => other.into()`): a
// wildcard over someone else's enum is the point there. Domain enums are matched exhaustively.
#![allow(clippy::wildcard_enum_match_arm)]

mod answer;
mod auth;
mod clock;
mod connectors;
mod databases;
mod error;
mod feedback;
mod filters;
mod graph;
mod ingest;
mod items;
mod keys;
mod lifecycle;
mod links;
mod models;
mod oauth;
mod push;
mod query;
mod ratelimit;
mod raw;
mod sources;
mod sync;
#[cfg(test)]
mod testing;
mod webhooks;

use std::path::PathBuf;
use std::sync::Arc;

use engram_config::Config;
use engram_index::Indexes;
use engram_store::postgres::{PgOptions, PgStore};
use engram_store::sqlite::SqliteStore;
use engram_store::Store;
use tokio::sync::Notify;

pub use answer::{citations, QnaAnswer, QnaRequest, QnaStream, NO_ANSWER};
pub use auth::Principal;
pub use clock::{format_ms, Clock, OffsetClock, SystemClock, UnixMs};

/// The time now on `store`'s time base: its own clock where instances share it (PostgreSQL),
/// the machine's otherwise (for commands that act beside the service, such as `engram check`).
pub async fn store_now(store: &dyn Store) -> AppResult<UnixMs> {
    let (clock, _) = clock::for_store(store).await?;
    Ok(clock.now())
}
pub use connectors::{
    ConnectorStatus, ConnectorView, CreateConnector, Health, HealthStatus, Lifecycle,
    ResourceMapping, SyncStatus, UpdateConnector, VaultEntry,
};
pub use databases::{
    default_collection, parse_database_name, CreateDatabase, DatabaseStats, SchemaFieldSpec,
};
pub use engram_connectors::{DiscoveredResource, IntervalBounds, ProviderInfo};
pub use engram_index::{IndexFilter, Keys, Passing, TermOperator};
pub use engram_search::{
    GraphContext, LinkedChunk, Method, Mode, RankedChunk, ScoredPath, SearchTuning, Stage,
    StageScores, StageTime, TemporalOutcome,
};
pub use engram_store::ChunkHit;
pub use engram_store::{ApiKeyRecord, DeliveryRecord};
pub use engram_store::{ConnectorRecord, ResourceRecord, ResourceUpdate, RunRecord};
pub use engram_store::{
    DatabaseCounts, DatabaseRecord, DatabaseState, DeletedItem, InfraFlags, ItemPage, ItemRecord,
    ItemStatus,
};
pub use engram_store::{EntityRecord, RelationRecord};
pub use engram_store::{FeedbackRecord, Instructions, InstructionsUpdate, ItemOrigin, RawVector};
pub use engram_types::DeliveryStatus;
pub use error::{AppError, AppResult};
pub use feedback::{FeedbackInput, GroundTruth};
pub use graph::{
    NeighbourRelation, Neighbourhood, RelationsPage, RelationsRequest, UserFact,
    NEIGHBOURHOOD_RELATIONS_MAX, RELATIONS_LIMIT_MAX, USER_FACTS_SHOWN,
};
pub use ingest::{
    AppSource, FileMetadata, IngestOutcome, ItemResult, KnowledgeRequest, MemoryInput,
    MemoryRequest, UploadedFile,
};
pub use items::{
    ChunkRead, ChunksRequest, ListRequest, Listing, CHUNKS_DEFAULT, CHUNKS_MAX, IDS_MAX,
    PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX,
};
pub use keys::{CreatedKey, KeySpec};
pub use lifecycle::Workers;
pub use links::{Subgraph, SubgraphMember, SubgraphRequest};
pub use models::Models;
pub use oauth::{OAuthFinished, OAuthStart, CALLBACK_PATH as OAUTH_CALLBACK_PATH};
pub use push::{PushReceived, PUSH_MAX_BYTES};
pub use query::{
    Alpha, Collections, QueryKind, QueryOutcome, QueryRequest, RequestedMode, TemporalRequest,
    COLLECTIONS_MAX, MAX_RESULTS_DEFAULT, MAX_RESULTS_MAX,
};
pub use raw::{RawDocument, RawFilter, RawHit};
pub use sources::{Download, DownloadLink, MetadataEditRequest, MetadataEdited, SourceView};
pub use webhooks::{
    DeliveryPage, RegisterWebhook, Registered, TestDelivery, WebhookView, DELIVERIES_LIMIT_DEFAULT,
    DELIVERIES_LIMIT_MAX,
};

/// The store the configuration names.
pub async fn open_store(config: &Config) -> AppResult<Arc<dyn Store>> {
    if config.storage.is_postgres() {
        let options = PgOptions {
            max_connections: config.storage.max_connections,
            ..PgOptions::new(config.storage.url.clone())
        };
        let store = PgStore::open(&options).await.map_err(|e| {
            AppError::Startup(format!(
                "PostgreSQL at {}: {e}",
                config.storage.redacted_url()
            ))
        })?;
        Ok(Arc::new(store))
    } else {
        Ok(Arc::new(SqliteStore::open(&config.data_dir).await?))
    }
}

/// The application: every use case, over one store.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    models: Option<Models>,
    /// The keyword and vector indexes, derived from the store: built at start, following its
    /// chunk change feed.
    indexes: Arc<Indexes>,
    /// Wakes the index follower after each indexed batch.
    index_wake: Arc<Notify>,
    /// The second ranking stage of `thinking` queries.
    reranker: Box<dyn engram_search::Reranker>,
    tuning: engram_search::SearchTuning,
    data_dir: PathBuf,
    limiter: ratelimit::RateLimiter,
    /// Wakes the lifecycle worker when a database is created or deleted.
    lifecycle_wake: Notify,
    /// Wakes the indexing pipeline when items are queued.
    pipeline_wake: Arc<Notify>,
    /// The only outbound HTTP client (webhooks; connectors later).
    outbound: engram_outbound::Outbound,
    /// Wakes the webhook dispatcher when events are stored or retries queued.
    webhook_wake: Arc<Notify>,
    /// Ingest request bodies read at once (`ingest.concurrent_uploads`): the bound on the memory
    /// uploads take, whatever the number of clients.
    upload_slots: Arc<tokio::sync::Semaphore>,
    /// The connector catalog, the credentials sealer and the scheduler's wake-up.
    connectors: connectors::Connectors,
    /// On a store with a clock of its own (PostgreSQL), `clock` is this, kept in step with it.
    synced_clock: Option<Arc<OffsetClock>>,
    config: Config,
}

impl App {
    /// Opens the configured store: PostgreSQL when `storage.url` is set, else the embedded
    /// store in the data directory.
    pub async fn open(config: Config) -> AppResult<Self> {
        let store = open_store(&config).await?;
        let models = Models::load(&config.embedding).await?;
        let released = store.release_dead_claims().await?;
        if released > 0 {
            tracing::info!(
                released,
                "resuming work interrupted when engram last stopped"
            );
        }
        let (clock, synced) = clock::for_store(store.as_ref()).await?;
        let app = Self::assemble(config, store, clock, synced, Some(models))?;
        app.inner
            .indexes
            .catch_up()
            .await
            .map_err(|e| AppError::Startup(format!("building the indexes: {e}")))?;
        Ok(app)
    }

    /// The store alone, without the models: for administrative commands (`engram keys`) that
    /// index nothing.
    pub async fn open_admin(config: Config) -> AppResult<Self> {
        let store = open_store(&config).await?;
        let (clock, _) = clock::for_store(store.as_ref()).await?;
        Self::with_store(config, store, clock, None)
    }

    /// An application over a given store. Without `models` nothing is indexed (for tests of the
    /// parts that do not index).
    pub fn with_store(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        models: Option<Models>,
    ) -> AppResult<Self> {
        Self::assemble(config, store, clock, None, models)
    }

    /// [`Self::with_store`], with the offset clock `clock` is when it follows the store's.
    fn assemble(
        config: Config,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        synced_clock: Option<Arc<OffsetClock>>,
        models: Option<Models>,
    ) -> AppResult<Self> {
        let outbound = engram_outbound::Outbound::new(engram_outbound::AddressPolicy {
            allow_private: config.outbound_allow_private,
        })
        .map_err(|e| AppError::Startup(format!("outbound HTTP client: {e}")))?;
        let graph_min = config.search.vector_graph_min_chunks;
        let indexes = Arc::new(Indexes::saved(
            store.clone(),
            engram_embed::MINILM_DIMENSION,
            // This instance's own copies, like the graph's: followed from the feed position
            // they cover, or built again when the store's feed no longer holds it.
            config.data_dir.join("keyword"),
            engram_index::AnnOptions {
                min_vectors: if graph_min == 0 {
                    usize::MAX
                } else {
                    graph_min as usize
                },
                // This instance's own copy (see ARCHITECTURE.md, the vector graph): checked
                // against the store's vectors when loaded.
                directory: Some(config.data_dir.join("vectors")),
                expansion_search: config.search.vector_graph_breadth as usize,
                build_threads: match config.search.vector_graph_build_threads {
                    0 => engram_index::AnnOptions::default().build_threads,
                    n => n as usize,
                },
                ..engram_index::AnnOptions::default()
            },
        ));
        // Instances sharing a PostgreSQL store share each key's budget.
        let limiter = if config.storage.is_postgres() {
            ratelimit::RateLimiter::shared(&config.rate_limit, store.clone())
        } else {
            ratelimit::RateLimiter::local(&config.rate_limit)
        };
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                clock,
                models,
                indexes,
                index_wake: Arc::new(Notify::new()),
                reranker: Box::new(engram_search::EmbeddingReranker),
                tuning: engram_search::SearchTuning::from(&config.search),
                data_dir: config.data_dir.clone(),
                limiter,
                lifecycle_wake: Notify::new(),
                pipeline_wake: Arc::new(Notify::new()),
                outbound,
                webhook_wake: Arc::new(Notify::new()),
                upload_slots: Arc::new(tokio::sync::Semaphore::new(
                    config.ingest.concurrent_uploads,
                )),
                connectors: connectors::Connectors::new(&config.connectors, &config.data_dir),
                synced_clock,
                config,
            }),
        })
    }

    /// A slot to read one ingest request body in, held until the request is done; `None` when
    /// none frees up within `ingest.upload_wait` (the service is at its upload limit: answer
    /// 503).
    pub async fn upload_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slots = self.inner.upload_slots.clone();
        tokio::time::timeout(self.config().ingest.upload_wait, slots.acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// The derived indexes (the store is the truth).
    pub fn indexes(&self) -> &Indexes {
        &self.inner.indexes
    }

    /// Closes the store; call after the server and the workers have stopped.
    pub async fn close(&self) {
        self.inner.store.close().await;
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Counts across the service for metrics: items by state, chunks by database, webhook
    /// deliveries by state.
    pub async fn service_counts(&self) -> AppResult<engram_store::ServiceCounts> {
        Ok(self.store().service_counts().await?)
    }

    fn store(&self) -> &dyn Store {
        self.inner.store.as_ref()
    }

    /// The application clock's time.
    pub fn now(&self) -> UnixMs {
        self.inner.clock.now()
    }
}
