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

/// The texts the batch embeds, chunk by chunk in item order: a chunk with a context (a
/// conversation's previous memory) is embedded after it.
fn texts_to_embed(prepared: &[Prepared], contexts: &[String]) -> Vec<String> {
    prepared
        .iter()
        .zip(contexts)
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
        .collect()
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
        let claimed = self
            .store
            .claim_items(
                &self.owner,
                self.clock.now_ms(),
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
        let chunks = match self.embed(texts_to_embed(&prepared, &contexts)).await {
            Ok(vectors) => self.write_all(claimed, prepared, contexts, vectors).await?,
            Err(message) => {
                self.fail_all(&claimed, &prepared, &message).await?;
                0
            }
        };
        tracing::info!(
            items = count,
            chunks,
            ms = started.elapsed().as_millis() as u64,
            "indexed batch"
        );
        Ok(count)
    }

    /// Writes each item's result: its chunks (with their vectors, in order) and `completed`,
    /// or its failure. Returns how many chunks were written.
    async fn write_all(
        &self,
        claimed: Vec<ClaimedItem>,
        prepared: Vec<Prepared>,
        contexts: Vec<String>,
        vectors: Vec<Vec<f32>>,
    ) -> StoreResult<usize> {
        let mut vectors = vectors.into_iter();
        let mut written = 0;
        for ((mut item, prepared), context) in claimed.into_iter().zip(prepared).zip(contexts) {
            let (extracted_text, chunks) = match prepared {
                Prepared::Failed { code, message } => {
                    self.fail(&item, code, &message).await?;
                    continue;
                }
                Prepared::Chunks {
                    extracted_text,
                    chunks,
                } => (extracted_text, chunks),
            };
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
            match self
                .store
                .complete_item(&item, &chunks, self.clock.now_ms())
                .await
            {
                Ok(true) => written += chunks.len(),
                Ok(false) => {
                    tracing::debug!(id = %item.id, "item changed while indexing; result dropped")
                }
                Err(err) => {
                    self.retry_or_fail(&item, &format!("storing chunks failed: {err}"))
                        .await?
                }
            }
        }
        Ok(written)
    }

    /// The batch could not be embedded: items with chunks go back to the queue (or end
    /// errored after their last attempt); items that failed to prepare fail as they were.
    async fn fail_all(
        &self,
        claimed: &[ClaimedItem],
        prepared: &[Prepared],
        message: &str,
    ) -> StoreResult<()> {
        for (item, prepared) in claimed.iter().zip(prepared) {
            match prepared {
                Prepared::Chunks { .. } => self.retry_or_fail(item, message).await?,
                Prepared::Failed { code, message } => self.fail(item, *code, message).await?,
            }
        }
        Ok(())
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
                            code: ItemErrorCode::NoText,
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
                    code: ItemErrorCode::NoText,
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

    async fn fail(
        &self,
        item: &ClaimedItem,
        code: ItemErrorCode,
        message: &str,
    ) -> StoreResult<()> {
        let failure = ItemFailure {
            code,
            message: message.to_owned(),
            retry_at: None,
        };
        tracing::info!(id = %item.id, code = code.as_str(), message, "item errored");
        self.store
            .fail_item(item, &failure, self.clock.now_ms())
            .await
            .map(|_| ())
    }

    /// A transient failure: back to the queue with backoff, or `errored` after the last attempt.
    async fn retry_or_fail(&self, item: &ClaimedItem, message: &str) -> StoreResult<()> {
        let code = ItemErrorCode::Transient;
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
            code,
            message: message.to_owned(),
            retry_at: Some(now + delay),
        };
        self.store.fail_item(item, &failure, now).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use engram_embed::{EmbedError, TokenCounter};
    use engram_store::conformance::{collection, item, setup};
    use engram_store::{DatabaseScope, DatabaseStore, ItemStore, WorkQueue};
    use engram_testkit::{HashEmbedder, ManualClock, TempStore};
    use engram_types::IndexingStatus;

    use super::*;

    const LEASE_MS: i64 = 60_000;

    fn options(max_attempts: u32) -> PipelineOptions {
        PipelineOptions::from(&PipelineConfig {
            max_attempts,
            lease: Duration::from_millis(LEASE_MS as u64),
            ..PipelineConfig::default()
        })
    }

    /// Counts tokens like the testkit, but panics on one marker (a parser bug stand-in).
    struct PanicsOnMarker;

    impl TokenCounter for PanicsOnMarker {
        fn count_tokens(&self, text: &str) -> usize {
            assert!(!text.contains("marker-of-a-bug"), "a bug in chunking");
            HashEmbedder.count_tokens(text)
        }
    }

    /// An embedder that runs `hook` before embedding, or fails when it has none.
    struct Hooked(Option<Box<dyn Fn() + Send + Sync>>);

    impl Embedder for Hooked {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            match &self.0 {
                Some(hook) => {
                    hook();
                    HashEmbedder.embed(texts)
                }
                None => Err(EmbedError::InvalidOptions("the model is gone")),
            }
        }

        fn dimension(&self) -> usize {
            HashEmbedder.dimension()
        }

        fn model_id(&self) -> &str {
            "hooked"
        }
    }

    async fn queued(kit: &TempStore, ids: &[(&str, &str)]) -> DatabaseScope {
        let scope = setup(kit.store.as_ref(), "db_pipeline", "org-pipeline").await;
        let items: Vec<_> = ids.iter().map(|(id, text)| item("c", id, text)).collect();
        kit.store
            .enqueue_items(&scope, &items, true, 0)
            .await
            .unwrap();
        scope
    }

    async fn status(
        kit: &TempStore,
        scope: &DatabaseScope,
        id: &str,
    ) -> (IndexingStatus, String, String) {
        let found = kit
            .store
            .item_statuses(scope, &collection("c"), &[id.to_owned()], 0)
            .await
            .unwrap();
        let s = &found[0];
        (s.status, s.error_code.clone(), s.error_message.clone())
    }

    #[tokio::test]
    async fn a_panic_while_preparing_errors_that_item_alone() {
        let kit = TempStore::new().await;
        let scope = queued(
            &kit,
            &[
                ("fine", "zebras graze on grass"),
                ("buggy", "marker-of-a-bug here"),
            ],
        )
        .await;
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(HashEmbedder),
            Arc::new(PanicsOnMarker),
            ManualClock::at(1_000),
            options(3),
        );
        assert_eq!(pipeline.run_once().await.unwrap(), 2);
        assert_eq!(
            status(&kit, &scope, "fine").await.0,
            IndexingStatus::Completed
        );
        let (state, code, _) = status(&kit, &scope, "buggy").await;
        assert_eq!(state, IndexingStatus::Errored);
        assert_eq!(code, ItemErrorCode::NoText.as_str());
        let counts = kit.store.counts(&scope, 1_000).await.unwrap();
        assert_eq!(
            counts.knowledge_chunks, 1,
            "the good item's chunk is written"
        );
    }

    #[tokio::test]
    async fn transient_failures_retry_with_backoff_then_end_errored() {
        let kit = TempStore::new().await;
        let scope = queued(&kit, &[("a", "some text")]).await;
        let clock = ManualClock::at(1_000);
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(Hooked(None)),
            Arc::new(HashEmbedder),
            clock.clone(),
            options(2),
        );
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        let (state, code, _) = status(&kit, &scope, "a").await;
        assert_eq!(
            (state, code.as_str()),
            (IndexingStatus::Queued, ItemErrorCode::Transient.as_str())
        );
        assert_eq!(
            pipeline.run_once().await.unwrap(),
            0,
            "not claimed again before its backoff ends"
        );
        clock.advance(1_000);
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        let (state, code, message) = status(&kit, &scope, "a").await;
        assert_eq!(state, IndexingStatus::Errored, "{message}");
        assert_eq!(code, ItemErrorCode::Transient.as_str());
        assert!(message.contains("after 2 attempts"), "{message}");
    }

    #[tokio::test]
    async fn a_result_whose_lease_was_lost_is_dropped() {
        let kit = TempStore::new().await;
        let scope = queued(&kit, &[("slow", "a batch that outlives its lease")]).await;
        let clock = ManualClock::at(1_000);
        // While the batch embeds, its lease runs out and another worker claims the item.
        let (store, thief_clock) = (kit.store.clone(), clock.clone());
        let steal = move || {
            thief_clock.advance(LEASE_MS + 1);
            let now = thief_clock.now_ms();
            let stolen = tokio::runtime::Handle::current()
                .block_on(store.claim_items("thief", now, LEASE_MS, 10))
                .unwrap();
            assert_eq!(stolen.len(), 1);
        };
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(Hooked(Some(Box::new(steal)))),
            Arc::new(HashEmbedder),
            clock.clone(),
            options(3),
        );
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        assert_eq!(
            status(&kit, &scope, "slow").await.0,
            IndexingStatus::Processing,
            "still the other worker's"
        );
        let counts = kit.store.counts(&scope, clock.now_ms()).await.unwrap();
        assert_eq!(counts.knowledge_chunks, 0, "the late result wrote nothing");
    }
}
