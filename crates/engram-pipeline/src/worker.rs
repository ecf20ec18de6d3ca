//! The worker loop: claim, prepare, embed, write.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engram_config::PipelineConfig;
use engram_embed::Embedder;
use engram_parse::Limits;
use engram_search::{Chunker, ChunkerOptions, TokenCounter};
use engram_store::{ClaimedItem, ItemFailure, NewChunk, Store, StoreResult};
use engram_types::{millis, Backoff, Clock, ItemErrorCode, ItemKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{prepare, Prepared};

/// How the pipeline works: the `[pipeline]` configuration (its one source of defaults), with
/// the chunker's and the parsers' own settings.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Items claimed at once (their chunks are embedded together).
    pub batch_items: u32,
    /// How long a claim lasts; after a crash, items wait at most this long to be claimed again.
    pub lease: Duration,
    /// How often an idle worker looks for work it was not woken for.
    pub poll: Duration,
    /// Attempts before a transient failure becomes terminal.
    pub max_attempts: u32,
    /// Delays between attempts after a transient failure.
    pub retry: Backoff,
    pub chunker: ChunkerOptions,
    pub parse_limits: Limits,
}

/// The longest delay between two attempts of one item.
const RETRY_MAX: Duration = Duration::from_secs(300);

impl From<&PipelineConfig> for PipelineOptions {
    fn from(config: &PipelineConfig) -> Self {
        Self {
            batch_items: config.batch_items,
            lease: config.lease,
            poll: config.poll,
            max_attempts: config.max_attempts,
            retry: Backoff {
                base_ms: millis(config.retry_base),
                max_ms: millis(RETRY_MAX),
                jitter: 0.0,
            },
            chunker: ChunkerOptions::default(),
            parse_limits: Limits::default(),
        }
    }
}

/// Aborts a background task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One indexing worker.
pub struct Pipeline {
    store: Arc<dyn Store>,
    embedder: Arc<dyn Embedder>,
    tokens: Arc<dyn TokenCounter>,
    clock: Arc<dyn Clock>,
    options: PipelineOptions,
    owner: String,
    /// Told after each batch: its terminal states may carry webhook events, and its chunks are
    /// for the indexes to follow.
    batch_wakes: Vec<Arc<Notify>>,
}

impl Pipeline {
    pub fn new(
        store: Arc<dyn Store>,
        embedder: Arc<dyn Embedder>,
        tokens: Arc<dyn TokenCounter>,
        clock: Arc<dyn Clock>,
        options: PipelineOptions,
    ) -> Self {
        let owner = format!("worker_{}", uuid::Uuid::new_v4().simple());
        Self {
            store,
            embedder,
            tokens,
            clock,
            options,
            owner,
            batch_wakes: Vec::new(),
        }
    }

    /// Notifies `wake` after each batch (the webhook dispatcher, the index follower).
    pub fn with_batch_wake(mut self, wake: Arc<Notify>) -> Self {
        self.batch_wakes.push(wake);
        self
    }

    /// Works until `token` is cancelled, finishing the batch in hand first.
    pub async fn run(self, wake: Arc<Notify>, token: CancellationToken) {
        tracing::debug!(owner = %self.owner, "indexing worker started");
        loop {
            if token.is_cancelled() {
                break;
            }
            match self.run_once().await {
                Ok(0) => {}
                Ok(_) => {
                    self.batch_wakes.iter().for_each(|wake| wake.notify_one());
                    continue;
                }
                Err(err) => tracing::error!(error = %err, "indexing pass failed"),
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = wake.notified() => {}
                () = tokio::time::sleep(self.options.poll) => {}
            }
        }
        tracing::debug!(owner = %self.owner, "indexing worker stopped");
    }

    /// Claims and processes one batch; returns how many items it claimed.
    pub async fn run_once(&self) -> StoreResult<usize> {
        let started = Instant::now();
        let now = self.clock.now_ms();
        let claimed = self
            .store
            .claim_items(
                &self.owner,
                now,
                millis(self.options.lease),
                self.options.batch_items,
            )
            .await?;
        if claimed.is_empty() {
            return Ok(0);
        }
        let _heartbeat = self.heartbeat(&claimed);
        let count = claimed.len();
        let (claimed, prepared) = self.prepare_all(claimed).await;
        let contexts = self.contexts(&claimed, &prepared).await?;

        // A chunk is embedded with its context before it (a conversation's previous memory).
        let texts: Vec<String> = prepared
            .iter()
            .zip(&contexts)
            .flat_map(|(p, context)| match p {
                Prepared::Chunks { chunks, .. } => chunks
                    .iter()
                    .map(|c| {
                        if context.is_empty() {
                            c.text.clone()
                        } else {
                            format!("{context}\n{}", c.text)
                        }
                    })
                    .collect(),
                Prepared::Failed { .. } => Vec::new(),
            })
            .collect();
        let embedded = self.embed(texts).await;
        let mut vectors = match embedded {
            Ok(vectors) => vectors.into_iter(),
            Err(message) => {
                for (item, prepared) in claimed.iter().zip(&prepared) {
                    match prepared {
                        Prepared::Chunks { .. } => self.retry_or_fail(item, &message).await?,
                        Prepared::Failed { code, message } => {
                            self.fail(item, code, message).await?
                        }
                    }
                }
                return Ok(count);
            }
        };
        let mut chunk_total = 0;
        for ((mut item, prepared), context) in claimed.into_iter().zip(prepared).zip(contexts) {
            match prepared {
                Prepared::Failed { code, message } => self.fail(&item, code, &message).await?,
                Prepared::Chunks {
                    extracted_text,
                    chunks,
                } => {
                    let chunks: Vec<NewChunk> = chunks
                        .into_iter()
                        .enumerate()
                        .zip(vectors.by_ref())
                        .map(|((position, chunk), embedding)| NewChunk {
                            chunk_id: uuid::Uuid::now_v7().to_string(),
                            position: u32::try_from(position).unwrap_or(u32::MAX),
                            content: chunk.text,
                            context: context.clone(),
                            layout: chunk.layout,
                            embedding,
                        })
                        .collect();
                    if extracted_text.is_some() {
                        item.text = extracted_text;
                    }
                    chunk_total += chunks.len();
                    match self
                        .store
                        .complete_item(&item, &chunks, self.clock.now_ms())
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::debug!(id = %item.id, "item changed while indexing; result dropped")
                        }
                        Err(err) => {
                            self.retry_or_fail(&item, &format!("storing chunks failed: {err}"))
                                .await?
                        }
                    }
                }
            }
        }
        tracing::info!(
            items = count,
            chunks = chunk_total,
            ms = started.elapsed().as_millis() as u64,
            "indexed batch"
        );
        Ok(count)
    }

    /// Per item, what its chunks are indexed with besides their own text: for a memory that
    /// continues a conversation, the memory before it (see `WorkQueue::preceding_memory`).
    async fn contexts(
        &self,
        claimed: &[ClaimedItem],
        prepared: &[Prepared],
    ) -> StoreResult<Vec<String>> {
        let mut contexts = Vec::with_capacity(claimed.len());
        for (item, prepared) in claimed.iter().zip(prepared) {
            let wanted =
                item.kind == ItemKind::Memory && matches!(prepared, Prepared::Chunks { .. });
            contexts.push(if wanted {
                self.store
                    .preceding_memory(item, self.clock.now_ms())
                    .await?
                    .unwrap_or_default()
            } else {
                String::new()
            });
        }
        Ok(contexts)
    }

    /// Extends the batch's leases every third of a lease until the returned guard is dropped,
    /// so a batch that outlasts one lease (OCR of a long scan) is not claimed twice.
    fn heartbeat(&self, claimed: &[ClaimedItem]) -> AbortOnDrop {
        let (store, clock) = (self.store.clone(), self.clock.clone());
        let lease_ms = millis(self.options.lease);
        let items = claimed.to_vec();
        let every = (self.options.lease / 3).max(Duration::from_millis(1));
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let until = clock.now_ms().saturating_add(lease_ms);
                if let Err(err) = store.extend_leases(&items, until).await {
                    tracing::warn!(error = %err, "extending indexing leases failed");
                }
            }
        }))
    }

    async fn prepare_all(&self, claimed: Vec<ClaimedItem>) -> (Vec<ClaimedItem>, Vec<Prepared>) {
        let tokens = self.tokens.clone();
        let chunker_options = self.options.chunker;
        let limits = self.options.parse_limits.clone();
        let fallback = claimed.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let chunker = Chunker::new(tokens.as_ref(), chunker_options);
            let prepared = claimed
                .iter()
                .map(|item| {
                    catch_unwind(AssertUnwindSafe(|| prepare(item, &chunker, &limits)))
                        .unwrap_or_else(|_| Prepared::Failed {
                            code: ItemErrorCode::NoText.as_str(),
                            message: format!("{}: the file could not be read", item.filename),
                        })
                })
                .collect();
            (claimed, prepared)
        })
        .await;
        joined.unwrap_or_else(|err| {
            tracing::error!(error = %err, "preparing a batch failed");
            let failed = fallback
                .iter()
                .map(|_| Prepared::Failed {
                    code: ItemErrorCode::NoText.as_str(),
                    message: "the item could not be read".into(),
                })
                .collect();
            (fallback, failed)
        })
    }

    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, String> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let embedder = self.embedder.clone();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder
                .embed(&refs)
                .map_err(|e| format!("embedding failed: {e}"))
        })
        .await
        .map_err(|e| format!("embedding failed: {e}"))?
    }

    async fn fail(&self, item: &ClaimedItem, code: &str, message: &str) -> StoreResult<()> {
        let failure = ItemFailure {
            code: code.to_owned(),
            message: message.to_owned(),
            retry_at: None,
        };
        tracing::info!(id = %item.id, code, message, "item errored");
        self.store
            .fail_item(item, &failure, self.clock.now_ms())
            .await
            .map(|_| ())
    }

    /// A transient failure: back to the queue with backoff, or `errored` after the last attempt.
    async fn retry_or_fail(&self, item: &ClaimedItem, message: &str) -> StoreResult<()> {
        let code = ItemErrorCode::Transient.as_str();
        if item.attempts >= self.options.max_attempts {
            return self
                .fail(
                    item,
                    code,
                    &format!("{message} (after {} attempts)", item.attempts),
                )
                .await;
        }
        let delay = self.options.retry.delay_ms(item.attempts, 0.0);
        let now = self.clock.now_ms();
        tracing::warn!(id = %item.id, attempt = item.attempts, delay_ms = delay, message, "transient failure; will retry");
        let failure = ItemFailure {
            code: code.to_owned(),
            message: message.to_owned(),
            retry_at: Some(now + delay),
        };
        self.store.fail_item(item, &failure, now).await.map(|_| ())
    }
}
