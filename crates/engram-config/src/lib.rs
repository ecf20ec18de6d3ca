//! engram's one typed configuration. Layers, each overriding the one before: built-in defaults,
//! the TOML file (`--config FILE`), environment variables `ENGRAM_*` (nested keys joined by
//! `__`, for example `ENGRAM_RATE_LIMIT__BURST`), then command-line flags. Validated once at
//! start-up; `engram.example.toml` at the repository root documents every key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    #[error("configuration: {0}")]
    Invalid(String),
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    /// Directory holding the embedded store and the indexes.
    pub data_dir: PathBuf,
    /// Let outbound requests (webhooks, connectors) reach loopback and private addresses.
    pub outbound_allow_private: bool,
    pub http: HttpConfig,
    pub rate_limit: RateLimitConfig,
    pub workers: WorkersConfig,
    pub embedding: EmbeddingConfig,
    pub pipeline: PipelineConfig,
    pub budgets: BudgetsConfig,
    pub search: SearchConfig,
    pub ingest: IngestConfig,
    pub webhooks: WebhooksConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub storage: StorageConfig,
    pub graph: GraphConfig,
    pub llm: LlmConfig,
    pub connectors: ConnectorsConfig,
    pub console: ConsoleConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            outbound_allow_private: false,
            http: HttpConfig::default(),
            rate_limit: RateLimitConfig::default(),
            workers: WorkersConfig::default(),
            embedding: EmbeddingConfig::default(),
            pipeline: PipelineConfig::default(),
            budgets: BudgetsConfig::default(),
            search: SearchConfig::default(),
            ingest: IngestConfig::default(),
            webhooks: WebhooksConfig::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            graph: GraphConfig::default(),
            llm: LlmConfig::default(),
            storage: StorageConfig::default(),
            connectors: ConnectorsConfig::default(),
            console: ConsoleConfig::default(),
        }
    }
}

/// Per-API-key request rate limit (token bucket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    pub enabled: bool,
    /// Sustained requests per second per key.
    pub requests_per_second: u32,
    /// Requests a key may make at once above the sustained rate.
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            requests_per_second: 100,
            burst: 500,
        }
    }
}

/// How long a client may take to send a request. A connection is closed when its request
/// headers (or, between requests, the next request's headers) do not arrive in time; a request
/// whose whole body does not arrive in time fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Time for a request's headers to arrive, and how long an idle keep-alive connection is
    /// kept open (ms).
    #[serde(rename = "header_timeout_ms", with = "millis")]
    pub header_timeout: Duration,
    /// Time for a request's whole body to arrive, counted from its headers (ms). A 64 MiB
    /// upload within the default needs about 9 Mbit/s.
    #[serde(rename = "body_timeout_ms", with = "millis")]
    pub body_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// Background workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// How often the database lifecycle worker looks for work it was not told about (ms).
    #[serde(rename = "lifecycle_poll_ms", with = "millis")]
    pub lifecycle_poll: Duration,
    /// How long shutdown waits for background workers to finish (ms).
    #[serde(rename = "shutdown_grace_ms", with = "millis")]
    pub shutdown_grace: Duration,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            lifecycle_poll: Duration::from_millis(2_000),
            shutdown_grace: Duration::from_millis(10_000),
        }
    }
}

/// The local embedding model (all-MiniLM-L6-v2, int8, ONNX Runtime), fetched by `make setup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// Where `make setup` put the model and the runtime (`models/…`, `onnxruntime/…`).
    pub cache_dir: PathBuf,
    /// Threads each model session runs on.
    pub threads: usize,
    /// Model sessions for indexing: the batches of a call run on all of them at once. One
    /// single-threaded session per core is the fastest for this small model. Queries have a
    /// session of their own besides.
    pub sessions: usize,
    /// Most texts per model run: 1 (the fastest on CPU); above it a text's vector depends
    /// slightly on the texts run with it, since activations are quantized per run.
    pub max_batch: usize,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self {
            cache_dir: PathBuf::from(".cache"),
            threads: 1,
            sessions: 2,
            max_batch: 1,
        }
    }
}

/// The indexing pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Indexing workers, each working one item at a time (they share the
    /// `embedding.sessions`).
    pub workers: u32,
    /// Most workers one organization may occupy at once; 0 is `workers - 1` (at least 1), so one
    /// organization's load always leaves a worker for the others.
    pub org_share: u32,
    /// Most items claimed together; only light ones (app content and memories of at most
    /// 32 KiB) join the first, so a slow file never holds a small item back.
    pub batch_items: u32,
    /// Most chunks embedded in one call: an item's chunks go in batches of this size, so a
    /// large item shares the model with the others and stops between batches when deleted.
    pub embed_batch: usize,
    /// How long a claim lasts without a heartbeat; after a crash, items wait at most this long
    /// (ms).
    #[serde(rename = "lease_ms", with = "millis")]
    pub lease: Duration,
    /// How often a worker renews its lease and checks that its item was not deleted or
    /// replaced meanwhile, which stops the work (ms).
    #[serde(rename = "heartbeat_ms", with = "millis")]
    pub heartbeat: Duration,
    /// How often an idle worker looks for work it was not woken for (ms).
    #[serde(rename = "poll_ms", with = "millis")]
    pub poll: Duration,
    /// Attempts before a transient failure (E6001) becomes terminal.
    pub max_attempts: u32,
    /// First retry delay (ms); doubles per attempt up to five minutes.
    #[serde(rename = "retry_base_ms", with = "millis")]
    pub retry_base: Duration,
    /// How often expired memories are purged (ms).
    #[serde(rename = "expiry_sweep_ms", with = "millis")]
    pub expiry_sweep: Duration,
}

impl PipelineConfig {
    /// The effective `org_share`.
    pub fn org_share(&self) -> u32 {
        match self.org_share {
            0 => self.workers.saturating_sub(1).max(1),
            share => share,
        }
    }
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            workers: 3,
            org_share: 0,
            batch_items: 16,
            embed_batch: 32,
            lease: Duration::from_millis(15_000),
            heartbeat: Duration::from_millis(1_000),
            poll: Duration::from_millis(1_000),
            max_attempts: 8,
            retry_base: Duration::from_millis(1_000),
            expiry_sweep: Duration::from_millis(30_000),
        }
    }
}

/// What one item may cost to index. An item over a size budget ends `errored` with `E2003`
/// (app content and memories over `text_bytes` are refused at upload with that code), one past
/// its time budget with `E2004`; the message names the limit, and the items next to it go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetsConfig {
    /// Most text one item may have (given, or extracted from its file), in bytes.
    pub text_bytes: usize,
    /// Most chunks one item may be cut into.
    pub chunks: usize,
    /// Most table rows one file may have (CSV, TSV, every sheet of a spreadsheet together).
    pub table_rows: usize,
    /// Most PDF pages without a text layer one file may have (each is read by OCR).
    pub ocr_pages: usize,
    /// Most working memory reading and chunking one item may hold (bytes, counted by the
    /// binary's allocator on the thread that does it).
    pub memory_bytes: usize,
    /// Longest one item may take from claim to result: parsing, OCR and embedding (ms).
    #[serde(rename = "time_ms", with = "millis")]
    pub time: Duration,
}

impl Default for BudgetsConfig {
    fn default() -> Self {
        Self {
            text_bytes: 8 * 1024 * 1024,
            chunks: 20_000,
            table_rows: 200_000,
            ocr_pages: 200,
            memory_bytes: 256 * 1024 * 1024,
            time: Duration::from_secs(1_800),
        }
    }
}

/// Retrieval tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// How keyword and semantic scores combine under `alpha`: `convex` (scaled scores) or
    /// `rrf` (reciprocal ranks).
    pub fusion: Fusion,
    /// Candidates drawn from each side in `fast` mode.
    pub fast_pool: u32,
    /// Candidates drawn from each side in `thinking` mode.
    pub thinking_pool: u32,
    /// Best first-stage chunks used for query expansion (`thinking`).
    pub feedback_chunks: u32,
    /// Expansion terms taken from them.
    pub expansion_terms: u32,
    /// Weight of their centroid added to the query vector.
    pub feedback_vector_weight: f32,
    /// Weight of the expansion terms' BM25 relative to the query's own.
    pub expansion_keyword_weight: f32,
    /// Candidates the reranker scores.
    pub rerank_depth: u32,
    /// Share of the final score that comes from the reranker.
    pub rerank_weight: f32,
    /// Half-life of `recency_bias`, in days.
    pub recency_half_life_days: f32,
    /// A database with at least this many chunks is searched through an HNSW graph of its
    /// vectors (approximate; its candidates are rescored exactly), built in the background;
    /// smaller ones, and selective filters, are scanned exactly. 0 turns the graph off.
    pub vector_graph_min_chunks: u32,
    /// Candidates the graph search keeps at a million chunks (HNSW's efSearch, 16 to 4096):
    /// more finds more of the exact nearest at more cost. A smaller database keeps
    /// proportionally fewer, never below 128 or the breadth asked if lower (100k chunks: 128).
    pub vector_graph_breadth: u32,
    /// Threads that add vectors to a graph at once (0 to 256); 0: every core but one.
    pub vector_graph_build_threads: u32,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            fusion: Fusion::Convex,
            fast_pool: 100,
            thinking_pool: 200,
            feedback_chunks: 3,
            expansion_terms: 8,
            feedback_vector_weight: 0.1,
            expansion_keyword_weight: 0.05,
            rerank_depth: 50,
            rerank_weight: 0.05,
            recency_half_life_days: 30.0,
            vector_graph_min_chunks: 50_000,
            vector_graph_breadth: 1024,
            vector_graph_build_threads: 0,
        }
    }
}

/// How keyword and semantic evidence combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// `alpha * semantic + (1 - alpha) * keyword`, each scaled over the candidates.
    Convex,
    /// Reciprocal rank fusion, each side weighted by `alpha`.
    Rrf,
}

/// Ingestion limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// Largest ingest request body (bytes), all files together.
    pub max_upload_bytes: usize,
    /// Ingest request bodies read at once; more wait for a slot (up to `upload_wait`, then
    /// 503). With `max_upload_bytes` this bounds the memory uploads take.
    pub concurrent_uploads: usize,
    /// How long a request waits for an upload slot (ms).
    #[serde(rename = "upload_wait_ms", with = "millis")]
    pub upload_wait: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: 64 * 1024 * 1024,
            concurrent_uploads: 4,
            upload_wait: Duration::from_secs(10),
        }
    }
}

/// Delivery of `indexing.status_changed` events to the registered webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Attempts before a delivery is `permanently_failed`.
    pub max_attempts: u32,
    /// Delay before the second attempt (ms); doubles per attempt up to `retry_max_ms`.
    #[serde(rename = "retry_base_ms", with = "millis")]
    pub retry_base: Duration,
    #[serde(rename = "retry_max_ms", with = "millis")]
    pub retry_max: Duration,
    /// Fraction of each retry delay that is randomised (0 = none, 1 = all of it).
    pub retry_jitter: f64,
    /// How long the receiver has to answer (ms); slower counts as a failed attempt.
    #[serde(rename = "timeout_ms", with = "millis")]
    pub timeout: Duration,
    /// How long a claimed delivery stays claimed (ms); after a crash it is swept up again once
    /// this has passed. Must exceed `timeout_ms`.
    #[serde(rename = "lease_ms", with = "millis")]
    pub lease: Duration,
    /// Deliveries sent at once.
    pub concurrency: u32,
    /// How often the sweeper looks for due retries and interrupted deliveries (ms).
    #[serde(rename = "sweep_ms", with = "millis")]
    pub sweep: Duration,
    /// Days `delivered` and `permanently_failed` deliveries stay in the history; 0 keeps them.
    pub retention_days: u32,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            max_attempts: 16,
            retry_base: Duration::from_millis(10_000),
            retry_max: Duration::from_millis(3_600_000),
            retry_jitter: 0.2,
            timeout: Duration::from_millis(10_000),
            lease: Duration::from_millis(60_000),
            concurrency: 16,
            sweep: Duration::from_millis(1_000),
            retention_days: 30,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter, for example `info` or `engram=debug,info`. `RUST_LOG` wins when set.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

/// The knowledge graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphConfig {
    /// Extract each item's entities and relations while indexing (the item passes through
    /// `graph_creation`, already searchable, to `completed`); false: items complete without a
    /// graph.
    pub extract: bool,
    /// Which searches' questions the graph lane (bridges from the first hop, and a
    /// personalized PageRank from the entities a question names) ranks: knowledge alone by
    /// default, where it measured a gain (README, "Knowledge graph"); `true` every kind,
    /// `false` none. A search over several kinds is ranked when every one of them is named.
    pub rank: GraphRank,
}

impl Default for GraphConfig {
    fn default() -> Self {
        Self {
            extract: true,
            rank: GraphRank::Kinds(vec![RankedKind::Knowledge]),
        }
    }
}

/// `[graph] rank`: `true`, `false`, or the kinds whose searches the graph lane ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GraphRank {
    Every(bool),
    Kinds(Vec<RankedKind>),
}

/// A kind of content the graph lane may rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RankedKind {
    Knowledge,
    Memory,
}

impl GraphRank {
    /// Whether a search over `knowledge` and/or `memory` content is ranked with the lane
    /// (every kind named must be ranked).
    pub fn ranks(&self, knowledge: bool, memory: bool) -> bool {
        match self {
            Self::Every(every) => *every,
            Self::Kinds(kinds) => {
                (knowledge || memory)
                    && (!knowledge || kinds.contains(&RankedKind::Knowledge))
                    && (!memory || kinds.contains(&RankedKind::Memory))
            }
        }
    }
}

/// An OpenAI-compatible chat-completions endpoint that extracts the knowledge graph instead of
/// the offline rules (which still read an item when the endpoint stays unusable). Off while
/// `base_url` is empty. It is reached through the outbound client: a local server needs
/// `outbound_allow_private`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// The API's base, such as `https://api.openai.com/v1` or `http://127.0.0.1:8081/v1`.
    pub base_url: String,
    /// Sent as a bearer token; never logged (`ENGRAM_LLM__API_KEY`).
    pub api_key: String,
    pub model: String,
    /// Most characters of passages one call reads.
    pub batch_chars: usize,
    /// Most batches of one item the model reads (two calls each: entities, then relations);
    /// the rules read the rest.
    pub max_batches: usize,
    /// Most tokens one answer may have (`max_completion_tokens`): a model that loops stops
    /// there rather than at the timeout.
    pub max_output_tokens: u32,
    /// Time allowed for one call.
    pub timeout_ms: u64,
    /// Tries per call on 429, 5xx or an unreachable endpoint, with backoff in between.
    pub attempts: u32,
    /// Whether the model reads items for their graph (else the rules do, and the model only
    /// answers questions).
    pub graph: bool,
    /// Whether the model reads memories given with `infer: true` (with the rules beside it);
    /// else the rules alone do.
    pub infer: bool,
    /// Most characters of retrieved passages an answer (`/recall/qna`) reads.
    pub answer_context_chars: usize,
    /// Most tokens of an answer unless the request asks for fewer.
    pub answer_max_tokens: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            api_key: String::new(),
            model: String::new(),
            batch_chars: 6_000,
            max_batches: 8,
            max_output_tokens: 4_096,
            timeout_ms: 60_000,
            attempts: 3,
            graph: true,
            infer: true,
            answer_context_chars: 12_000,
            answer_max_tokens: 1_024,
        }
    }
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &if self.api_key.is_empty() { "" } else { "***" })
            .field("model", &self.model)
            .field("batch_chars", &self.batch_chars)
            .field("max_batches", &self.max_batches)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("timeout_ms", &self.timeout_ms)
            .field("attempts", &self.attempts)
            .finish()
    }
}

/// The web console served under `/console`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console; `false`: `/console` answers 404.
    pub enabled: bool,
    /// A console session ends after this long without a request (ms); it also ends when the
    /// browser closes (its cookie has no expiry).
    #[serde(rename = "idle_timeout_ms", with = "millis")]
    pub idle_timeout: Duration,
    /// A console session ends this long after its sign-in however busy it is (ms).
    #[serde(rename = "max_session_ms", with = "millis")]
    pub max_session: Duration,
    /// The origin browsers reach the console at (`https://engram.example.com`) when a proxy in
    /// front of engram rewrites `Host`: a state change's `Origin` must then be exactly this, and
    /// the session cookie is `Secure` when it is `https`. Empty: the request's `Host` (or
    /// `X-Forwarded-Host`).
    pub public_origin: String,
    /// Show every signed-in organization the instance's indexing rate and query latency (all
    /// organizations together) on the operations page. Off by default: where organizations
    /// share an instance, one should not see the others' load.
    pub instance_figures: bool,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            idle_timeout: Duration::from_secs(30 * 60),
            max_session: Duration::from_secs(12 * 60 * 60),
            public_origin: String::new(),
            instance_figures: false,
        }
    }
}

/// Connectors: syncing knowledge from external providers on a schedule.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectorsConfig {
    /// Directories the `folder` provider may sync from (and below); empty: it is not offered.
    pub folder_roots: Vec<PathBuf>,
    /// The key sealing stored credentials: 64 hexadecimal characters. Empty: one is generated
    /// into `data_dir` (owner-only) on first use. Instances sharing PostgreSQL must all be given
    /// the same key.
    pub credentials_key: String,
    /// Connectors one organization may have (more is 402).
    pub max_per_org: u32,
    /// Objects one connector may sync; a sync that reaches it stops, `capped`.
    pub max_documents_per_connector: u64,
    /// Objects all connectors of one organization may sync together.
    pub max_documents_per_org: u64,
    /// Syncs one instance runs at once.
    pub concurrency: u32,
    /// How often the scheduler looks for due syncs (ms).
    #[serde(rename = "poll_ms", with = "millis")]
    pub poll: Duration,
    /// How long a claimed sync stays claimed without renewal (ms): after a crash another
    /// instance (or this one, restarted) takes it over once this has passed.
    #[serde(rename = "lease_ms", with = "millis")]
    pub lease: Duration,
    /// Delay before a failed sync is tried again (ms); doubles per failure up to the interval.
    #[serde(rename = "retry_base_ms", with = "millis")]
    pub retry_base: Duration,
    /// The address users reach this instance at (`https://engram.example.com`), for the OAuth
    /// callback every provider's app registers: `<public_url>/connectors/oauth/callback`.
    /// Empty: taken from the `Host` header of the request starting the authorization (http).
    pub public_url: String,
    /// How long before an OAuth access token expires it is refreshed (ms).
    #[serde(rename = "oauth_refresh_margin_ms", with = "millis")]
    pub oauth_refresh_margin: Duration,
}

impl std::fmt::Debug for ConnectorsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorsConfig")
            .field("folder_roots", &self.folder_roots)
            .field(
                "credentials_key",
                &if self.credentials_key.is_empty() {
                    ""
                } else {
                    "<set>"
                },
            )
            .field("max_per_org", &self.max_per_org)
            .field(
                "max_documents_per_connector",
                &self.max_documents_per_connector,
            )
            .field("max_documents_per_org", &self.max_documents_per_org)
            .field("concurrency", &self.concurrency)
            .field("poll", &self.poll)
            .field("lease", &self.lease)
            .field("retry_base", &self.retry_base)
            .field("public_url", &self.public_url)
            .field("oauth_refresh_margin", &self.oauth_refresh_margin)
            .finish()
    }
}

impl Default for ConnectorsConfig {
    fn default() -> Self {
        Self {
            folder_roots: Vec::new(),
            credentials_key: String::new(),
            max_per_org: 50,
            max_documents_per_connector: 1_000_000,
            max_documents_per_org: 5_000_000,
            concurrency: 2,
            poll: Duration::from_millis(1_000),
            lease: Duration::from_millis(60_000),
            retry_base: Duration::from_millis(30_000),
            public_url: String::new(),
            oauth_refresh_margin: Duration::from_millis(300_000),
        }
    }
}

/// Prometheus metrics (`GET /metrics`, text format).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// A separate listener serving `/metrics` without authentication (for example
    /// `127.0.0.1:9090`, reachable by the scraper only); empty: none.
    pub listen: Option<SocketAddr>,
    /// A bearer token that opens `/metrics` on the main listener; empty: `/metrics` is not
    /// served there. Never an API key.
    pub token: String,
}

/// Where engram keeps its state: the embedded SQLite store under `data_dir` (the default), or a
/// PostgreSQL server shared by several engram instances.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `postgres://user:password@host:5432/database` selects PostgreSQL (15 or newer, with
    /// pgvector 0.8 or newer); empty: SQLite under `data_dir`.
    pub url: String,
    /// Connections one instance keeps open at most (PostgreSQL).
    pub max_connections: u32,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            max_connections: 16,
        }
    }
}

impl StorageConfig {
    pub fn is_postgres(&self) -> bool {
        !self.url.is_empty()
    }

    /// The URL without its password, for logs and errors.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }
}

/// A connection URL with any password replaced by `***` (unparseable: the scheme alone).
pub fn redact_url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => format!("{}://…", text.split("://").next().unwrap_or_default()),
    }
}

impl std::fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageConfig")
            .field("url", &self.redacted_url())
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

/// Values given on the command line; `None` leaves the lower layers' value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageOverrides>,
}

/// `--storage-url`.
#[derive(Clone, Serialize)]
pub struct StorageOverrides {
    pub url: String,
}

impl std::fmt::Debug for StorageOverrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageOverrides")
            .field("url", &redact_url(&self.url))
            .finish()
    }
}

/// Durations written as whole milliseconds (the `*_ms` keys).
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(value: &Duration, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Duration, D::Error> {
        u64::deserialize(from).map(Duration::from_millis)
    }
}

/// `ENGRAM_*` variables that are not configuration.
const NOT_SETTINGS: [&str; 5] = ["API_KEY", "PDFTOTEXT", "PDFTOPPM", "MUTOOL", "TESSERACT"];

impl Config {
    /// Loads the layers in order and validates the result.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Self, ConfigError> {
        Self::from_figment(Self::figment(file).merge(Serialized::defaults(overrides)))
    }

    fn figment(file: Option<&Path>) -> Figment {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        // `ENGRAM_API_KEY` is the key `engram mcp` acts as, and `ENGRAM_<TOOL>` where the
        // parsers find a command-line tool (engram-parse's `tools`): not settings.
        figment.merge(Env::prefixed("ENGRAM_").ignore(&NOT_SETTINGS).split("__"))
    }

    fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        let config: Config = figment.extract().map_err(Box::new)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let c = &self.connectors;
        if c.concurrency == 0 || c.poll.is_zero() || c.lease < Duration::from_secs(2) {
            return Err(ConfigError::Invalid(
                "connectors.concurrency and poll_ms must be positive and lease_ms at least 2000"
                    .into(),
            ));
        }
        if !c.credentials_key.is_empty()
            && (c.credentials_key.len() != 64
                || !c.credentials_key.chars().all(|ch| ch.is_ascii_hexdigit()))
        {
            return Err(ConfigError::Invalid(
                "connectors.credentials_key must be 64 hexadecimal characters".into(),
            ));
        }
        if self.budgets.memory_bytes < 16 * 1024 * 1024 {
            return Err(ConfigError::Invalid(
                "budgets.memory_bytes must be at least 16777216 (16 MiB)".into(),
            ));
        }
        if self.console.idle_timeout < Duration::from_secs(1) {
            return Err(ConfigError::Invalid(
                "console.idle_timeout_ms must be at least 1000".into(),
            ));
        }
        if self.console.max_session < self.console.idle_timeout {
            return Err(ConfigError::Invalid(
                "console.max_session_ms must be at least console.idle_timeout_ms".into(),
            ));
        }
        let origin = self.console.public_origin.as_str();
        let authority = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"));
        if !origin.is_empty() && authority.is_none_or(|a| a.is_empty() || a.contains('/')) {
            return Err(ConfigError::Invalid(
                "console.public_origin must be a scheme and host, like https://engram.example.com"
                    .into(),
            ));
        }
        if self.rate_limit.enabled
            && (self.rate_limit.requests_per_second == 0 || self.rate_limit.burst == 0)
        {
            return Err(ConfigError::Invalid(
                "rate_limit.requests_per_second and rate_limit.burst must be positive when rate_limit.enabled".into(),
            ));
        }
        let p = &self.pipeline;
        if p.workers == 0
            || p.batch_items == 0
            || p.embed_batch == 0
            || p.lease.is_zero()
            || p.poll.is_zero()
            || p.max_attempts == 0
        {
            return Err(ConfigError::Invalid(
                "pipeline.workers, batch_items, embed_batch, lease_ms, poll_ms and max_attempts must be positive".into(),
            ));
        }
        if p.heartbeat.is_zero() || p.heartbeat >= p.lease {
            return Err(ConfigError::Invalid(
                "pipeline.heartbeat_ms must be positive and shorter than pipeline.lease_ms".into(),
            ));
        }
        if self.embedding.threads == 0
            || self.embedding.sessions == 0
            || self.embedding.max_batch == 0
            || self.pipeline.expiry_sweep.is_zero()
        {
            return Err(ConfigError::Invalid(
                "embedding.threads, sessions, max_batch and pipeline.expiry_sweep must be positive"
                    .into(),
            ));
        }
        let q = &self.search;
        if q.fast_pool == 0 || q.thinking_pool == 0 || q.rerank_depth == 0 {
            return Err(ConfigError::Invalid(
                "search.fast_pool, thinking_pool and rerank_depth must be positive".into(),
            ));
        }
        if !(16..=4096).contains(&q.vector_graph_breadth) {
            return Err(ConfigError::Invalid(
                "search.vector_graph_breadth must be within 16..4096".into(),
            ));
        }
        if q.vector_graph_build_threads > 256 {
            return Err(ConfigError::Invalid(
                "search.vector_graph_build_threads must be within 0..256".into(),
            ));
        }
        let unit = 0.0..=1.0;
        if !unit.contains(&q.rerank_weight)
            || !(0.0..=10.0).contains(&q.feedback_vector_weight)
            || !(0.0..=10.0).contains(&q.expansion_keyword_weight)
            || q.recency_half_life_days.is_nan()
            || q.recency_half_life_days <= 0.0
        {
            return Err(ConfigError::Invalid(
                "search.rerank_weight must be within 0..1, the feedback weights within 0..10 and recency_half_life_days positive".into(),
            ));
        }
        let w = &self.webhooks;
        if w.max_attempts == 0
            || w.timeout.is_zero()
            || w.concurrency == 0
            || w.sweep.is_zero()
            || w.retry_max < w.retry_base
            || !(0.0..=1.0).contains(&w.retry_jitter)
        {
            return Err(ConfigError::Invalid(
                "webhooks.max_attempts, timeout_ms, concurrency and sweep_ms must be positive, retry_max_ms at least retry_base_ms and retry_jitter within 0..1".into(),
            ));
        }
        if w.lease <= w.timeout {
            return Err(ConfigError::Invalid(
                "webhooks.lease must exceed webhooks.timeout".into(),
            ));
        }
        let b = &self.budgets;
        if b.text_bytes == 0 || b.chunks == 0 || b.table_rows == 0 || b.time.is_zero() {
            return Err(ConfigError::Invalid(
                "budgets.text_bytes, chunks, table_rows and time_ms must be positive".into(),
            ));
        }
        if self.ingest.concurrent_uploads == 0 {
            return Err(ConfigError::Invalid(
                "ingest.concurrent_uploads must be positive".into(),
            ));
        }
        if self.http.header_timeout.is_zero() || self.http.body_timeout.is_zero() {
            return Err(ConfigError::Invalid(
                "http.header_timeout_ms and http.body_timeout_ms must be positive".into(),
            ));
        }
        if self.workers.lifecycle_poll.is_zero() {
            return Err(ConfigError::Invalid(
                "workers.lifecycle_poll must be positive".into(),
            ));
        }
        let url = &self.storage.url;
        if !url.is_empty() && !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            return Err(ConfigError::Invalid(format!(
                "storage.url must be empty (SQLite under data_dir) or a postgres:// URL, not {}",
                redact_url(url)
            )));
        }
        if self.storage.max_connections < 2 {
            return Err(ConfigError::Invalid(
                "storage.max_connections must be at least 2".into(),
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::Invalid("data_dir must not be empty".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closures return figment::Error
mod tests {
    use super::*;

    #[test]
    fn layers_override_in_order() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "engram.toml",
                "listen = \"0.0.0.0:9000\"\n[rate_limit]\nburst = 7\n",
            )?;
            jail.set_env("ENGRAM_DATA_DIR", "/tmp/from-env");
            jail.set_env("ENGRAM_RATE_LIMIT__REQUESTS_PER_SECOND", "3");
            jail.set_env("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true");
            // Where the parsers find their tools: not settings, never refused.
            jail.set_env("ENGRAM_MUTOOL", "/opt/mupdf/bin/mutool");
            jail.set_env("ENGRAM_TESSERACT", "/opt/bin/tesseract");
            let overrides = Overrides {
                listen: Some("127.0.0.1:1234".parse().unwrap()),
                ..Overrides::default()
            };
            let config = Config::load(Some(Path::new("engram.toml")), &overrides).unwrap();
            assert_eq!(config.listen, "127.0.0.1:1234".parse().unwrap());
            assert_eq!(config.data_dir, PathBuf::from("/tmp/from-env"));
            assert_eq!(config.rate_limit.burst, 7);
            assert_eq!(config.rate_limit.requests_per_second, 3);
            assert!(config.outbound_allow_private);
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("bad.toml", "lisen = \"0.0.0.0:9000\"\n")?;
            assert!(Config::load(Some(Path::new("bad.toml")), &Overrides::default()).is_err());
            jail.create_file("zero.toml", "[rate_limit]\nburst = 0\n")?;
            assert!(Config::load(Some(Path::new("zero.toml")), &Overrides::default()).is_err());
            for bad in [
                "vector_graph_breadth = 8",
                "vector_graph_breadth = 5000",
                "vector_graph_build_threads = 1000",
            ] {
                jail.create_file("graph.toml", &format!("[search]\n{bad}\n"))?;
                let loaded = Config::load(Some(Path::new("graph.toml")), &Overrides::default());
                assert!(loaded.is_err(), "{bad} was accepted");
            }
            jail.create_file("graph.toml", "[search]\nvector_graph_build_threads = 4\n")?;
            let loaded = Config::load(Some(Path::new("graph.toml")), &Overrides::default());
            assert_eq!(loaded.unwrap().search.vector_graph_build_threads, 4);
            Ok(())
        });
    }

    #[test]
    fn a_storage_url_comes_from_the_environment_and_its_password_is_never_shown() {
        figment::Jail::expect_with(|jail| {
            jail.set_env(
                "ENGRAM_STORAGE__URL",
                "postgres://engram:s3cret@db:5432/engram",
            );
            let config = Config::load(None, &Overrides::default()).unwrap();
            assert!(config.storage.is_postgres());
            let shown = format!("{config:?}");
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(
                shown.contains("postgres://engram:***@db:5432/engram"),
                "{shown}"
            );
            let flag = Overrides {
                storage: Some(StorageOverrides {
                    url: "postgresql://other@db2/e".into(),
                }),
                ..Overrides::default()
            };
            let config = Config::load(None, &flag).unwrap();
            assert_eq!(config.storage.url, "postgresql://other@db2/e");
            jail.set_env("ENGRAM_STORAGE__URL", "mysql://x:pw@h/d");
            let err = Config::load(None, &Overrides::default()).unwrap_err();
            assert!(!err.to_string().contains("pw@"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_graph_lane_ranks_the_kinds_named_or_every_kind_or_none() {
        figment::Jail::expect_with(|jail| {
            let ranks = |config: &Config| {
                [(true, false), (false, true), (true, true)]
                    .map(|(knowledge, memory)| config.graph.rank.ranks(knowledge, memory))
            };
            let default = Config::load(None, &Overrides::default()).unwrap();
            assert_eq!(ranks(&default), [true, false, false]);
            jail.create_file("memory.toml", "[graph]\nrank = [\"memory\"]\n")?;
            let memory = Config::load(Some(Path::new("memory.toml")), &Overrides::default());
            assert_eq!(ranks(&memory.unwrap()), [false, true, false]);
            jail.create_file("both.toml", "[graph]\nrank = [\"knowledge\", \"memory\"]\n")?;
            let both = Config::load(Some(Path::new("both.toml")), &Overrides::default());
            assert_eq!(ranks(&both.unwrap()), [true, true, true]);
            jail.create_file("none.toml", "[graph]\nrank = []\n")?;
            let none = Config::load(Some(Path::new("none.toml")), &Overrides::default());
            assert_eq!(ranks(&none.unwrap()), [false, false, false]);
            jail.create_file("bad.toml", "[graph]\nrank = [\"files\"]\n")?;
            assert!(Config::load(Some(Path::new("bad.toml")), &Overrides::default()).is_err());
            jail.set_env("ENGRAM_GRAPH__RANK", "true");
            let every = Config::load(None, &Overrides::default()).unwrap();
            assert_eq!(ranks(&every), [true, true, true]);
            jail.set_env("ENGRAM_GRAPH__RANK", "false");
            let off = Config::load(None, &Overrides::default()).unwrap();
            assert_eq!(ranks(&off), [false, false, false]);
            Ok(())
        });
    }

    #[test]
    fn the_documented_example_file_parses() {
        figment::Jail::expect_with(|_jail| {
            let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../engram.example.toml");
            let config = Config::load(Some(Path::new(example)), &Overrides::default()).unwrap();
            assert_eq!(
                config,
                Config::default(),
                "the example file documents the defaults"
            );
            Ok(())
        });
    }
}
