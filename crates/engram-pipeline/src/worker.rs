//! The worker loop: claim one item in turn, prepare it, embed it in bounded batches, write it;
//! a heartbeat keeps the lease and notices when the item was deleted or replaced, which cancels
//! the work in hand.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chunk::{Chunk, Chunker, ChunkerOptions, TokenCounter};
use engram_config::{BudgetsConfig, PipelineConfig};
use engram_embed::Embedder;
use engram_graph::{
    ExtractRequest, Fact, GraphExtractor, GraphPayload, InferRequest, Inference, ItemGraph, Origin,
    Passage, RuleInference,
};
use engram_parse::{Interrupt, Limits};
use engram_store::{
    AfterChunks, ClaimRequest, ClaimedItem, Completion, ItemFailure, NewChunk, Stage, Store,
    StoreResult,
};
use engram_types::{Backoff, Clock, ItemErrorCode, ItemKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::{prepare, Prepared};

/// How the pipeline works: the `[pipeline]` configuration (its one source of defaults), with
/// the chunker's and the parsers' own settings.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Most workers one organization may occupy at once.
    pub org_share: u32,
    /// Most light items claimed together (see `LIGHT_BYTES`).
    pub batch_items: u32,
    /// How long a claim lasts without a heartbeat; after a crash, items wait at most this long
    /// to be claimed again.
    pub lease: Duration,
    /// How often a worker renews its lease and checks that its item is still wanted.
    pub heartbeat: Duration,
    /// How often an idle worker looks for work it was not woken for.
    pub poll: Duration,
    /// Most chunks embedded in one call (the item's chunks go in batches of this size).
    pub embed_batch: usize,
    /// Attempts before a transient failure becomes terminal.
    pub max_attempts: u32,
    /// Delays between attempts after a transient failure.
    pub retry: Backoff,
    /// Most chunks one item may make.
    pub max_chunks: usize,
    /// Longest one item may take from claim to result.
    pub time_budget: Duration,
    /// Most working memory reading and chunking one item may hold (bytes).
    pub memory_budget: usize,
    pub chunker: ChunkerOptions,
    /// The parsers' limits (text and rows from the budgets); each item gets its own interrupt.
    pub parse_limits: Limits,
}

/// The longest delay between two attempts of one item.
const RETRY_MAX: Duration = Duration::from_secs(300);

impl PipelineOptions {
    /// The options of `[pipeline]` with the item budgets of `[budgets]`.
    pub fn new(config: &PipelineConfig, budgets: &BudgetsConfig) -> Self {
        Self {
            org_share: config.org_share(),
            batch_items: config.batch_items,
            lease: config.lease,
            heartbeat: config.heartbeat,
            poll: config.poll,
            embed_batch: config.embed_batch.max(1),
            max_attempts: config.max_attempts,
            retry: Backoff {
                base: config.retry_base,
                max: RETRY_MAX,
                jitter: 0.0,
            },
            max_chunks: budgets.chunks,
            memory_budget: budgets.memory_bytes,
            time_budget: budgets.time,
            chunker: ChunkerOptions::default(),
            parse_limits: Limits {
                max_text_bytes: budgets.text_bytes,
                max_rows: budgets.table_rows,
                max_ocr_pages: budgets.ocr_pages,
                ..Limits::default()
            },
        }
    }
}

/// A step of indexing whose time is recorded (`engram_indexing_stage_seconds{stage}`), so where
/// ingestion's time goes shows in every run (`engram bench ingest` prints the split).
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Claiming items from the queue.
    Claim,
    /// Inference's text, parsing and chunking, a memory's context.
    Prepare,
    /// The model.
    Embed,
    /// Storing the chunks (`complete_item`).
    Write,
    /// Extracting the graph (or reading the client's), inference's facts.
    Graph,
    /// Storing the graph (`complete_graph`).
    GraphWrite,
}

impl Step {
    fn as_str(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Prepare => "prepare",
            Self::Embed => "embed",
            Self::Write => "write",
            Self::Graph => "graph",
            Self::GraphWrite => "graph_write",
        }
    }

    /// Records the time since `started` as this step's.
    fn took(self, started: Instant) {
        metrics::histogram!("engram_indexing_stage_seconds", "stage" => self.as_str())
            .record(started.elapsed());
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
    /// Told after each item: its terminal state may carry webhook events, and its chunks are
    /// for the indexes to follow.
    batch_wakes: Vec<Arc<Notify>>,
    /// Builds each item's graph after its chunks are stored; none: items complete without one.
    graph: Option<Arc<dyn GraphExtractor>>,
    /// Reads memories given with `infer: true` for their user's facts.
    inference: Arc<dyn Inference>,
}

/// Most characters of the title line a chunk is embedded with.
const TITLE_LINE_CHARS: usize = 200;

/// One chunk to embed: its item's title (or file name), its context (a conversation's
/// previous memory; empty when none) and the chunk.
struct ToEmbed<'a> {
    title: &'a str,
    context: &'a str,
    chunk: &'a Chunk,
}

/// The text a chunk is embedded as: a line naming its item's title and the chunk's heading
/// path (what the chunk is about, which its own words often leave unsaid), then its context,
/// then the chunk. A title or heading the chunk opens with anyway is not repeated (a document
/// whose text starts with its title: the line cost its first chunk 15% more model time for
/// nothing). The title line is cut at [`TITLE_LINE_CHARS`].
fn text_to_embed(piece: &ToEmbed<'_>) -> String {
    let opening = piece.chunk.text.trim_start();
    let said = |part: &str| {
        opening
            .get(..part.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(part))
    };
    let title = piece.title.trim();
    let mut path: Vec<&str> = Vec::new();
    if !title.is_empty() && !said(title) {
        path.push(title);
    }
    if let Some(headings) = piece
        .chunk
        .layout
        .get("headings")
        .and_then(|h| h.as_array())
    {
        for heading in headings.iter().filter_map(|h| h.as_str()).map(str::trim) {
            if !heading.is_empty()
                && !said(heading)
                && !path.iter().any(|p| p.eq_ignore_ascii_case(heading))
            {
                path.push(heading);
            }
        }
    }
    let line = path.join(" > ");
    let line = match line.char_indices().nth(TITLE_LINE_CHARS) {
        Some((cut, _)) => &line[..cut],
        None => &line,
    };
    [line, piece.context, &piece.chunk.text]
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text the pipeline embeds for `chunk` of an item titled `title` that has no context
/// (what `engram bench ingest` gives the model alone, to compare with).
pub fn embedding_text(title: &str, chunk: &Chunk) -> String {
    text_to_embed(&ToEmbed {
        title,
        context: "",
        chunk,
    })
}

/// Items whose given text is at most this long (app content and memories, never files) are
/// claimed together, up to `batch_items`: they take a moment each, and embedding them together
/// keeps every model session busy.
const LIGHT_BYTES: u64 = 32 * 1024;

/// A panic while preparing `item`: it fails alone.
fn unreadable(item: &ClaimedItem) -> Prepared {
    Prepared::Failed {
        code: ItemErrorCode::NoText,
        message: if item.filename.is_empty() {
            "the item could not be read".into()
        } else {
            format!("{}: the file could not be read", item.filename)
        },
    }
}

/// Why an item's work stopped before its result was written.
enum Stopped {
    /// The item was deleted, replaced or taken over: nothing of it is written.
    Cancelled,
    /// The item's time budget ran out.
    TimedOut,
    /// Embedding failed (transient).
    Embedding(String),
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
            graph: None,
            inference: Arc::new(RuleInference),
        }
    }

    /// Builds each item's graph with `extractor`: an item's chunks are stored with it in
    /// `graph_creation` (searchable), then its graph is extracted and stored and it completes.
    pub fn with_graph(mut self, extractor: Arc<dyn GraphExtractor>) -> Self {
        self.graph = Some(extractor);
        self
    }

    /// Memory inference by `inference` (a model) instead of the rules alone.
    pub fn with_inference(mut self, inference: Arc<dyn Inference>) -> Self {
        self.inference = inference;
        self
    }

    /// Notifies `wake` after each item (the webhook dispatcher, the index follower).
    pub fn with_batch_wake(mut self, wake: Arc<Notify>) -> Self {
        self.batch_wakes.push(wake);
        self
    }

    /// Works until `token` is cancelled, finishing the item in hand first.
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

    /// Claims the next item in turn, with more light items after it when it is light, and
    /// processes them; returns how many items it claimed.
    pub async fn run_once(&self) -> StoreResult<usize> {
        let started = Instant::now();
        let claim = ClaimRequest {
            org_share: self.options.org_share,
            light_bytes: Some(LIGHT_BYTES),
            ..ClaimRequest::new(
                &self.owner,
                self.clock.now(),
                self.options.lease,
                self.options.batch_items,
            )
        };
        let items = self.store.claim_items(&claim).await?;
        Step::Claim.took(started);
        if items.is_empty() {
            return Ok(0);
        }
        // Every line logged for this work names the requests that queued it.
        let mut requests: Vec<&str> = items
            .iter()
            .map(|i| i.request_id.as_str())
            .filter(|r| !r.is_empty())
            .collect();
        requests.sort_unstable();
        requests.dedup();
        let span = tracing::info_span!("indexing", request_id = %requests.join(","));
        self.work(items, started).instrument(span).await
    }

    /// Indexes claimed items (graphs first), renewing their claims meanwhile.
    async fn work(&self, items: Vec<ClaimedItem>, started: Instant) -> StoreResult<usize> {
        // Set by the heartbeat when the items are no longer this worker's; the parsers and the
        // chunker check it between blocks, rows and pages and while a tool runs.
        let stop = Arc::new(AtomicBool::new(false));
        let _heartbeat = self.heartbeat(&items, stop.clone());
        let (graphs, items): (Vec<ClaimedItem>, Vec<ClaimedItem>) =
            items.into_iter().partition(|i| i.stage == Stage::Graph);
        for item in &graphs {
            let passages = self.store.item_passages(item).await?;
            self.build_graph(item, passages, None, &stop).await;
        }
        if items.is_empty() {
            return Ok(graphs.len());
        }
        // The items to index get their whole time budget, whatever the graphs before took.
        let started = if graphs.is_empty() {
            started
        } else {
            Instant::now()
        };
        let chunks = self.process(&items, stop, started).await?;
        tracing::info!(
            items = items.len(),
            first = %items[0].id,
            chunks,
            ms = started.elapsed().as_millis() as u64,
            "indexed"
        );
        Ok(items.len() + graphs.len())
    }

    /// Builds and stores the graph of an item in `graph_creation` from its passages (the
    /// client's own graph when it brought one, else extracted), completing it. A failed extraction completes the item without a
    /// graph (its chunks are never lost), as does one claimed for its graph more times than
    /// attempts allow; a store failure leaves it to be claimed again once its lease runs out.
    async fn build_graph(
        &self,
        item: &ClaimedItem,
        passages: Vec<(u32, String)>,
        facts: Option<Vec<Fact>>,
        stop: &AtomicBool,
    ) {
        let extracting = Instant::now();
        // Facts read when the item was chunked; for an item taken up again, read now.
        let facts = match facts {
            Some(facts) => facts,
            None => self.facts_of(item).await,
        };
        // Matching a payload's relations to the passages, or the rules, is CPU work.
        let passages = Arc::new(passages);
        let (extractor, max_attempts, claimed, owned, known) = (
            self.graph.clone(),
            self.options.max_attempts,
            item.clone(),
            passages.clone(),
            facts.clone(),
        );
        let quick = tokio::task::spawn_blocking(move || {
            graph_at_once(
                extractor.as_ref(),
                max_attempts,
                &claimed,
                &Passage::all(&owned),
                known,
            )
        })
        .await
        .unwrap_or_else(|_| Ok(ItemGraph::empty(Origin::Extracted)));
        let graph = match quick {
            Ok(graph) => graph,
            Err(extractor) => {
                let passages = Passage::all(&passages);
                let request = ExtractRequest {
                    org: item.org.as_str(),
                    database: item.database_id.as_str(),
                    title: &item.title,
                    instructions: &item.instructions,
                    passages: &passages,
                };
                // An extractor may wait on a model for minutes: a deleted or replaced item
                // stops it.
                let extracted = tokio::select! {
                    result = extractor.extract(&request) => Some(result),
                    () = stopped(stop) => None,
                };
                let Some(extracted) = extracted else {
                    self.dropped(std::slice::from_ref(item));
                    return;
                };
                with_facts(
                    item,
                    facts,
                    extracted.unwrap_or_else(|err| {
                        tracing::warn!(id = %item.id, error = %err, "graph extraction failed; completing without a graph");
                        ItemGraph::empty(Origin::Extracted)
                    }),
                )
            }
        };
        Step::Graph.took(extracting);
        let writing = Instant::now();
        let stored = self
            .store
            .complete_graph(item, &graph, self.clock.now())
            .await;
        Step::GraphWrite.took(writing);
        match stored {
            Ok(true) => {
                metrics::counter!("engram_graph_relations_total")
                    .increment(graph.relations.len() as u64);
            }
            Ok(false) => {
                self.dropped(std::slice::from_ref(item));
            }
            Err(err) => {
                tracing::error!(id = %item.id, error = %err, "storing the graph failed; the item is taken up again after its lease");
            }
        }
    }

    /// Prepares, embeds and writes the claimed items (or their failures); returns how many
    /// chunks were written.
    async fn process(
        &self,
        items: &[ClaimedItem],
        stop: Arc<AtomicBool>,
        started: Instant,
    ) -> StoreResult<usize> {
        let budget = self.options.time_budget.saturating_sub(started.elapsed());
        let interrupt = Interrupt::new(Some(budget), Some(stop.clone()));
        let preparing = Instant::now();
        // Memories read by a model wait on it: a deleted or replaced item stops the wait.
        let read = tokio::select! {
            read = self.inferred(items) => Some(read?),
            () = stopped(&stop) => None,
        };
        let Some((inferred, mut facts)) = read else {
            return Ok(self.dropped(items));
        };
        let prepared = self.prepare_all(items.to_vec(), inferred, interrupt).await;
        if stop.load(Ordering::Relaxed) {
            return Ok(self.dropped(items));
        }
        let mut ready = Vec::with_capacity(items.len());
        let mut ready_facts = Vec::with_capacity(items.len());
        for ((item, prepared), facts) in items.iter().zip(prepared).zip(facts.drain(..)) {
            match prepared {
                Prepared::Failed { code, message } => self.fail(item, code, &message).await?,
                Prepared::Chunks {
                    extracted_text,
                    chunks,
                } => {
                    let context = self.context(item).await?;
                    ready.push((item, extracted_text, chunks, context));
                    ready_facts.push(facts);
                }
            }
        }
        Step::Prepare.took(preparing);
        // Texts are made batch by batch as they are embedded: never copied whole.
        let pieces: Vec<ToEmbed<'_>> = ready
            .iter()
            .flat_map(|(item, _, chunks, context)| {
                chunks.iter().map(move |chunk| ToEmbed {
                    title: item.heading(),
                    context,
                    chunk,
                })
            })
            .collect();
        let deadline = started + self.options.time_budget;
        let texts = pieces.iter().map(text_to_embed);
        let embedding = Instant::now();
        let embedded = self.embed(texts, pieces.len(), &stop, deadline).await;
        Step::Embed.took(embedding);
        let vectors = match embedded {
            Ok(vectors) => vectors,
            Err(stopped) => {
                for (item, ..) in &ready {
                    match &stopped {
                        Stopped::Cancelled => {}
                        Stopped::TimedOut => {
                            let message = format!(
                                "indexing took longer than the item's time budget of {:?} (budgets.time_ms)",
                                self.options.time_budget
                            );
                            self.fail(item, ItemErrorCode::TimedOut, &message).await?;
                        }
                        Stopped::Embedding(message) => self.retry_or_fail(item, message).await?,
                    }
                }
                return Ok(0);
            }
        };
        let mut vectors = vectors.into_iter();
        let mut batch: Vec<(ClaimedItem, Vec<NewChunk>)> = Vec::with_capacity(ready.len());
        for (item, extracted_text, chunks, context) in ready {
            let chunks: Vec<NewChunk> = chunks
                .into_iter()
                .zip(vectors.by_ref())
                .enumerate()
                .map(|(position, (chunk, embedding))| NewChunk {
                    chunk_id: uuid::Uuid::now_v7().to_string(),
                    position: u32::try_from(position).unwrap_or(u32::MAX),
                    content: chunk.text,
                    context: context.clone(),
                    layout: chunk.layout,
                    embedding,
                })
                .collect();
            let mut item = item.clone();
            if extracted_text.is_some() {
                item.text = extracted_text;
            }
            batch.push((item, chunks));
        }
        let extracting = Instant::now();
        let (batch, graphs, facts) = self.graphs_at_once(batch, ready_facts).await;
        Step::Graph.took(extracting);
        let completions: Vec<Completion<'_>> = batch
            .iter()
            .zip(&graphs)
            .map(|((item, chunks), graph)| Completion {
                item,
                chunks,
                then: match graph {
                    Then::Completed => AfterChunks::Completed,
                    Then::Later => AfterChunks::Graph,
                    Then::With(graph) => AfterChunks::WithGraph(graph),
                },
            })
            .collect();
        let writing = Instant::now();
        let stored = self
            .store
            .complete_items(&completions, self.clock.now())
            .await;
        Step::Write.took(writing);
        let stored = match stored {
            Ok(stored) => stored,
            Err(err) => {
                let message = format!("storing chunks failed: {err}");
                for (item, _) in &batch {
                    self.retry_or_fail(item, &message).await?;
                }
                return Ok(0);
            }
        };
        let mut written = 0;
        for ((((item, chunks), graph), stored), facts) in
            batch.iter().zip(&graphs).zip(stored).zip(facts)
        {
            if !stored {
                self.dropped(std::slice::from_ref(item));
                continue;
            }
            written += chunks.len();
            match graph {
                Then::With(graph) => {
                    metrics::counter!("engram_graph_relations_total")
                        .increment(graph.relations.len() as u64);
                }
                Then::Later => {
                    let passages = chunks
                        .iter()
                        .map(|c| (c.position, c.content.clone()))
                        .collect();
                    self.build_graph(item, passages, Some(facts), &stop).await;
                }
                Then::Completed => {}
            }
            metrics::counter!("engram_items_indexed_total", "outcome" => "completed").increment(1);
            metrics::counter!("engram_chunks_indexed_total").increment(chunks.len() as u64);
        }
        Ok(written)
    }

    /// What becomes of each embedded item's graph: none to build, one made at once (stored
    /// with the chunks), or one to wait for (a model) after the chunks are stored. The graphs
    /// made at once are made together on the blocking pool; a panic there leaves its item to
    /// complete without a graph.
    async fn graphs_at_once(
        &self,
        batch: Vec<(ClaimedItem, Vec<NewChunk>)>,
        facts: Vec<Vec<Fact>>,
    ) -> (Vec<(ClaimedItem, Vec<NewChunk>)>, Vec<Then>, Vec<Vec<Fact>>) {
        let wanted = |item: &ClaimedItem| {
            // An item with its own graph, or a memory to infer from, gets one even with
            // extraction off.
            self.graph.is_some() || item.graph_payload.is_some() || infers(item)
        };
        if !batch.iter().any(|(item, _)| wanted(item)) {
            let none = batch.iter().map(|_| Then::Completed).collect();
            return (batch, none, facts);
        }
        let wants: Vec<bool> = batch.iter().map(|(item, _)| wanted(item)).collect();
        let (extractor, max_attempts) = (self.graph.clone(), self.options.max_attempts);
        let joined = tokio::task::spawn_blocking(move || {
            let graphs = batch
                .iter()
                .zip(wants)
                .zip(&facts)
                .map(|(((item, chunks), wanted), facts)| {
                    if !wanted {
                        return Then::Completed;
                    }
                    let passages: Vec<Passage<'_>> = chunks
                        .iter()
                        .map(|c| Passage {
                            position: c.position,
                            text: &c.content,
                        })
                        .collect();
                    catch_unwind(AssertUnwindSafe(|| {
                        graph_at_once(
                            extractor.as_ref(),
                            max_attempts,
                            item,
                            &passages,
                            facts.clone(),
                        )
                    }))
                    .unwrap_or_else(|_| {
                        tracing::warn!(id = %item.id, "graph extraction failed; completing without a graph");
                        Ok(ItemGraph::empty(Origin::Extracted))
                    })
                    .map_or(Then::Later, Then::With)
                })
                .collect();
            (batch, graphs, facts)
        })
        .await;
        match joined {
            Ok(done) => done,
            // The task owned the batch: nothing to write with. Unreachable short of an abort.
            Err(err) => {
                tracing::error!(error = %err, "making graphs failed");
                (Vec::new(), Vec::new(), Vec::new())
            }
        }
    }

    fn dropped(&self, items: &[ClaimedItem]) -> usize {
        for item in items {
            tracing::debug!(id = %item.id, "item deleted or changed while indexing; its work is dropped");
        }
        0
    }

    /// What the item's chunks are indexed with besides their own text: for a memory that
    /// continues a conversation, the memory before it (see `WorkQueue::preceding_memory`).
    async fn context(&self, item: &ClaimedItem) -> StoreResult<String> {
        if item.kind != ItemKind::Memory {
            return Ok(String::new());
        }
        Ok(self
            .store
            .preceding_memory(item, self.clock.now())
            .await?
            .unwrap_or_default())
    }

    /// Renews the items' leases every heartbeat until the returned guard is dropped, so work
    /// that outlasts one lease (OCR of a long scan) is not claimed twice; sets `stop` as
    /// soon as no lease is this worker's any more (the items were deleted, replaced or, after a
    /// stall, taken over). A lost item of a batch is simply not written (`complete_item`).
    fn heartbeat(&self, items: &[ClaimedItem], stop: Arc<AtomicBool>) -> AbortOnDrop {
        let (store, clock) = (self.store.clone(), self.clock.clone());
        let lease = self.options.lease;
        let mut held = items.to_vec();
        let every = self.options.heartbeat.max(Duration::from_millis(1));
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let until = clock.now().after(lease);
                let mut still = Vec::with_capacity(held.len());
                for item in held {
                    match store.extend_lease(&item, until).await {
                        Ok(false) => {
                            tracing::info!(id = %item.id, "item deleted or changed while indexing");
                        }
                        Ok(true) => still.push(item),
                        Err(err) => {
                            tracing::warn!(error = %err, "extending an indexing lease failed");
                            still.push(item);
                        }
                    }
                }
                held = still;
                if held.is_empty() {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }))
    }

    /// What inference reads in a memory given with `infer: true` (the model's facts with the
    /// rules', or the rules' alone); nothing for other items.
    async fn facts_of(&self, item: &ClaimedItem) -> Vec<Fact> {
        if !infers(item) {
            return Vec::new();
        }
        let request = InferRequest {
            text: item.text.as_deref().unwrap_or_default(),
            user: &item.user_name,
            instructions: &item.instructions,
        };
        self.inference.infer(&request).await
    }

    /// For each item (same order), what inference makes of it: the text to index with it (a
    /// memory's new facts about its user, `infer: true`, the ones the user's current facts
    /// already hold left out) and the facts themselves, written with the item's graph.
    async fn inferred(
        &self,
        items: &[ClaimedItem],
    ) -> StoreResult<(Vec<Option<String>>, Vec<Vec<Fact>>)> {
        let mut texts = Vec::with_capacity(items.len());
        let mut all = Vec::with_capacity(items.len());
        // The batch's memories are read at once (a model answers them side by side).
        let read =
            futures_util::future::join_all(items.iter().map(|item| self.facts_of(item))).await;
        for (item, facts) in items.iter().zip(read) {
            if facts.is_empty() {
                texts.push(None);
                all.push(facts);
                continue;
            }
            let scope = engram_store::DatabaseScope {
                org: item.org.clone(),
                id: item.database_id.clone(),
            };
            let held = self
                .store
                .user_facts(
                    &scope,
                    &item.collection,
                    &item.user_name,
                    true,
                    None,
                    self.clock.now(),
                )
                .await?;
            let statements: Vec<&str> = facts
                .iter()
                .filter(|f| {
                    !held.iter().any(|h| {
                        h.item_key != item.item_key && h.slot == f.slot && h.value == f.value
                    })
                })
                .map(|f| f.statement.as_str())
                .collect();
            texts.push((!statements.is_empty()).then(|| statements.join(" ")));
            all.push(facts);
        }
        Ok((texts, all))
    }

    /// Parses (files) and chunks the items on the blocking pool, each with its inferred text;
    /// a panic fails its item alone.
    async fn prepare_all(
        &self,
        items: Vec<ClaimedItem>,
        inferred: Vec<Option<String>>,
        interrupt: Interrupt,
    ) -> Vec<Prepared> {
        let tokens = self.tokens.clone();
        let chunker_options = self.options.chunker;
        let limits = Limits {
            interrupt: interrupt.with_memory(self.options.memory_budget),
            ..self.options.parse_limits.clone()
        };
        let max_chunks = self.options.max_chunks;
        let count = items.len();
        let joined = tokio::task::spawn_blocking(move || {
            let chunker =
                Chunker::new(tokens.as_ref(), chunker_options).with_interrupt(&limits.interrupt);
            items
                .iter()
                .zip(&inferred)
                .map(|(item, inferred)| {
                    // Each item's reading is metered from zero: its working memory budget is
                    // its own, whatever the items before it in the batch held.
                    catch_unwind(AssertUnwindSafe(|| {
                        engram_alloc::meter(|| {
                            let mut prepared = prepare(item, &chunker, &limits, max_chunks);
                            if let (Prepared::Chunks { chunks, .. }, Some(text)) =
                                (&mut prepared, inferred)
                            {
                                chunks.extend(chunker.chunk_text(text).into_iter().map(|mut c| {
                                    c.layout = serde_json::json!({"inferred": true});
                                    c
                                }));
                            }
                            prepared
                        })
                    }))
                    .unwrap_or_else(|_| unreadable(item))
                })
                .collect::<Vec<_>>()
        })
        .await;
        joined.unwrap_or_else(|err| {
            tracing::error!(error = %err, "preparing items failed");
            (0..count)
                .map(|_| Prepared::Failed {
                    code: ItemErrorCode::NoText,
                    message: "the item could not be read".into(),
                })
                .collect()
        })
    }

    /// Embeds `texts` (`total` of them) in batches of `embed_batch`, taking each batch from the
    /// iterator as it goes, and stopping between batches when cancelled or past `deadline`.
    async fn embed(
        &self,
        texts: impl Iterator<Item = String> + Send,
        total: usize,
        stop: &AtomicBool,
        deadline: Instant,
    ) -> Result<Vec<Vec<f32>>, Stopped> {
        let mut vectors = Vec::with_capacity(total);
        let mut texts = texts.peekable();
        while texts.peek().is_some() {
            if stop.load(Ordering::Relaxed) {
                return Err(Stopped::Cancelled);
            }
            if Instant::now() >= deadline {
                return Err(Stopped::TimedOut);
            }
            let batch: Vec<String> = texts.by_ref().take(self.options.embed_batch).collect();
            let embedder = self.embedder.clone();
            let started = Instant::now();
            let embedded = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .map_err(|e| Stopped::Embedding(format!("embedding failed: {e}")))?
            .map_err(|e| Stopped::Embedding(format!("embedding failed: {e}")))?;
            metrics::histogram!("engram_embed_batch_seconds").record(started.elapsed());
            metrics::counter!("engram_embedded_texts_total").increment(embedded.len() as u64);
            vectors.extend(embedded);
        }
        Ok(vectors)
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
        metrics::counter!("engram_items_indexed_total", "outcome" => "errored").increment(1);
        self.store
            .fail_item(item, &failure, self.clock.now())
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
        let delay = self.options.retry.delay(item.attempts, 0.0);
        let now = self.clock.now();
        tracing::warn!(id = %item.id, attempt = item.attempts, delay_ms = delay.as_millis(), message, "transient failure; will retry");
        let failure = ItemFailure {
            code,
            message: message.to_owned(),
            retry_at: Some(now.after(delay)),
        };
        self.store.fail_item(item, &failure, now).await.map(|_| ())
    }
}

/// Resolves once `stop` is set (the heartbeat found the item deleted or replaced).
async fn stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What becomes of an embedded item's graph (see `Pipeline::graphs_at_once`).
enum Then {
    /// None to build: the item completes with its chunks.
    Completed,
    /// Made at once: stored with the chunks.
    With(ItemGraph),
    /// Made by an extractor that waits (a model), after the chunks are stored.
    Later,
}

/// An item's graph when it can be made at once, inference's facts included: the client's own
/// (matched to the passages), the extractor's when it waits on nothing, or an empty one (no
/// extractor, or claimed for its graph more times than attempts allow); else the extractor,
/// which must be awaited.
fn graph_at_once(
    extractor: Option<&Arc<dyn GraphExtractor>>,
    max_attempts: u32,
    item: &ClaimedItem,
    passages: &[Passage<'_>],
    facts: Vec<Fact>,
) -> Result<ItemGraph, Arc<dyn GraphExtractor>> {
    let graph = if item.attempts > max_attempts {
        tracing::warn!(id = %item.id, "graph abandoned after repeated attempts; completing without it");
        ItemGraph::empty(Origin::Extracted)
    } else if let Some(payload) = &item.graph_payload {
        // Checked at ingestion; a payload that no longer reads is a bug, not the client's.
        match serde_json::from_str::<GraphPayload>(payload) {
            Ok(payload) => payload.to_graph(passages),
            Err(err) => {
                tracing::error!(id = %item.id, error = %err, "a stored graph payload does not read; completing without a graph");
                ItemGraph::empty(Origin::Byog)
            }
        }
    } else if let Some(extractor) = extractor {
        let request = ExtractRequest {
            org: item.org.as_str(),
            database: item.database_id.as_str(),
            title: &item.title,
            instructions: &item.instructions,
            passages,
        };
        extractor
            .extract_now(&request)
            .ok_or_else(|| extractor.clone())?
    } else {
        ItemGraph::empty(Origin::Extracted)
    };
    Ok(with_facts(item, facts, graph))
}

/// `graph` with inference's `facts` when the item is a memory inferred from.
fn with_facts(item: &ClaimedItem, facts: Vec<Fact>, mut graph: ItemGraph) -> ItemGraph {
    if infers(item) {
        graph.facts = facts;
    }
    graph
}

/// Whether memory inference reads this item: a memory given with `infer: true`.
fn infers(item: &ClaimedItem) -> bool {
    item.infer && item.kind == ItemKind::Memory
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use engram_embed::{EmbedError, TokenCounter};
    use engram_store::conformance::{collection, item, setup};
    use engram_store::{DatabaseScope, DatabaseStore, GraphStore, ItemStore, WorkQueue};
    use engram_testkit::{HashEmbedder, ManualClock, TempStore};
    use engram_types::{IndexingStatus, UnixMs};

    use super::*;

    const LEASE_MS: i64 = 60_000;

    fn options(max_attempts: u32) -> PipelineOptions {
        PipelineOptions::new(
            &PipelineConfig {
                max_attempts,
                lease: Duration::from_millis(LEASE_MS as u64),
                ..PipelineConfig::default()
            },
            &BudgetsConfig::default(),
        )
    }

    #[test]
    fn a_chunk_is_embedded_under_its_title_and_heading_path() {
        let chunk = Chunk {
            text: "Pour the concrete in layers.".into(),
            layout: serde_json::json!({"headings": ["Site guide", "Foundations", " "]}),
        };
        let piece = |title, context| ToEmbed {
            title,
            context,
            chunk: &chunk,
        };
        assert_eq!(
            text_to_embed(&piece("Site guide", "")),
            "Site guide > Foundations\nPour the concrete in layers.",
            "a heading repeating the title is named once"
        );
        assert_eq!(
            text_to_embed(&piece("", "the turn before")),
            "Site guide > Foundations\nthe turn before\nPour the concrete in layers."
        );
        let untitled = Chunk {
            text: "plain".into(),
            layout: serde_json::json!({}),
        };
        assert_eq!(
            text_to_embed(&ToEmbed {
                title: "",
                context: "",
                chunk: &untitled
            }),
            "plain"
        );
        let long = "é".repeat(500);
        let line = text_to_embed(&ToEmbed {
            title: &long,
            context: "",
            chunk: &untitled,
        });
        assert_eq!(line.chars().count(), TITLE_LINE_CHARS + "\nplain".len());
        let opens_with_title = Chunk {
            text: "Site Guide: how to pour concrete.".into(),
            layout: serde_json::json!({"headings": ["Foundations"]}),
        };
        assert_eq!(
            text_to_embed(&ToEmbed {
                title: "site guide",
                context: "",
                chunk: &opens_with_title
            }),
            "Foundations\nSite Guide: how to pour concrete.",
            "a title the chunk opens with is not repeated"
        );
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
            .enqueue_items(&scope, &items, true, UnixMs::from_millis(0))
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
            .item_statuses(
                scope,
                &collection("c"),
                &[id.to_owned()],
                UnixMs::from_millis(0),
            )
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
        assert_eq!(
            pipeline.run_once().await.unwrap(),
            2,
            "two light items together"
        );
        assert_eq!(
            status(&kit, &scope, "fine").await.0,
            IndexingStatus::Completed
        );
        let (state, code, _) = status(&kit, &scope, "buggy").await;
        assert_eq!(state, IndexingStatus::Errored);
        assert_eq!(code, ItemErrorCode::NoText.as_str());
        let counts = kit
            .store
            .counts(&scope, UnixMs::from_millis(1_000))
            .await
            .unwrap();
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
            let now = thief_clock.now();
            let stolen = tokio::runtime::Handle::current()
                .block_on(store.claim_items(&ClaimRequest::new(
                    "thief",
                    now,
                    Duration::from_millis(LEASE_MS as u64),
                    10,
                )))
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
        let counts = kit.store.counts(&scope, clock.now()).await.unwrap();
        assert_eq!(counts.knowledge_chunks, 0, "the late result wrote nothing");
    }

    #[tokio::test]
    async fn deleting_an_item_stops_its_embedding_and_writes_nothing() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let kit = TempStore::new().await;
        let long = "Sentences about volcanoes and their ash clouds. ".repeat(400);
        let scope = queued(&kit, &[("big", long.as_str())]).await;
        let calls = Arc::new(AtomicUsize::new(0));
        // The first embedding call deletes the item, then takes a while: the heartbeat notices.
        let (store, hook_scope, hook_calls) = (kit.store.clone(), scope.clone(), calls.clone());
        let delete_then_wait = move || {
            if hook_calls.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::runtime::Handle::current()
                    .block_on(store.delete_items(
                        &hook_scope,
                        &collection("c"),
                        None,
                        &["big".to_owned()],
                        UnixMs::from_millis(1_000),
                    ))
                    .unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut options = options(3);
        options.embed_batch = 1;
        options.heartbeat = Duration::from_millis(5);
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(Hooked(Some(Box::new(delete_then_wait)))),
            Arc::new(HashEmbedder),
            ManualClock::at(1_000),
            options,
        );
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        let calls = calls.load(Ordering::SeqCst);
        let chunks = Chunker::new(&HashEmbedder, ChunkerOptions::default())
            .chunk_text(&long)
            .len();
        assert!(chunks > 10, "{chunks} chunks");
        assert!(
            calls <= 3,
            "embedding went on after the delete: {calls} of {chunks} calls"
        );
        let counts = kit
            .store
            .counts(&scope, UnixMs::from_millis(1_000))
            .await
            .unwrap();
        assert_eq!(counts.knowledge_chunks, 0, "nothing of it was written");
    }

    /// An extractor that never answers (a model endpoint that hangs).
    struct Hanging;

    #[async_trait::async_trait]
    impl GraphExtractor for Hanging {
        async fn extract(
            &self,
            _: &ExtractRequest<'_>,
        ) -> Result<ItemGraph, engram_graph::GraphError> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn deleting_an_item_stops_its_graph_extraction() {
        let kit = TempStore::new().await;
        let scope = queued(&kit, &[("slow", "Ana Ruiz works for Acme Corp.")]).await;
        let mut options = options(3);
        options.heartbeat = Duration::from_millis(5);
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(HashEmbedder),
            Arc::new(HashEmbedder),
            ManualClock::at(1_000),
            options,
        )
        .with_graph(Arc::new(Hanging));
        let (store, hook_scope) = (kit.store.clone(), scope.clone());
        let deleter = tokio::spawn(async move {
            // Once the item waits on its graph, delete it.
            loop {
                let statuses = store
                    .item_statuses(
                        &hook_scope,
                        &collection("c"),
                        &["slow".to_owned()],
                        UnixMs::from_millis(1_000),
                    )
                    .await
                    .unwrap();
                if statuses
                    .first()
                    .is_some_and(|s| s.status == IndexingStatus::GraphCreation)
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            store
                .delete_items(
                    &hook_scope,
                    &collection("c"),
                    None,
                    &["slow".to_owned()],
                    UnixMs::from_millis(1_000),
                )
                .await
                .unwrap();
        });
        let ran = tokio::time::timeout(Duration::from_secs(10), pipeline.run_once()).await;
        assert_eq!(ran.expect("the hanging extraction was stopped").unwrap(), 1);
        deleter.await.unwrap();
        let counts = kit
            .store
            .counts(&scope, UnixMs::from_millis(1_000))
            .await
            .unwrap();
        assert_eq!(counts.knowledge_chunks, 0);
    }

    async fn relations(kit: &TempStore, scope: &DatabaseScope, id: &str) -> Vec<String> {
        let coll = collection("c");
        let query = engram_store::RelationQuery {
            collection: &coll,
            kind: engram_types::ItemKind::Knowledge,
            id,
            after: None,
            limit: 100,
        };
        kit.store
            .item_relations(scope, &query, UnixMs::from_millis(0))
            .await
            .unwrap()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.source.name, r.canonical_predicate, r.target.name
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn an_item_whose_graph_is_made_at_once_completes_with_it_in_one_write() {
        let kit = TempStore::new().await;
        let scope = queued(&kit, &[("doc", "Ana Ruiz works for Acme Corp in Lisbon.")]).await;
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(HashEmbedder),
            Arc::new(HashEmbedder),
            ManualClock::at(1_000),
            options(3),
        )
        .with_graph(Arc::new(engram_graph::RuleExtractor));
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        assert_eq!(
            status(&kit, &scope, "doc").await.0,
            IndexingStatus::Completed
        );
        assert_eq!(
            relations(&kit, &scope, "doc").await,
            [
                "ana ruiz WORKS_FOR acme corp",
                "acme corp RELATED_TO lisbon"
            ]
        );
    }

    #[tokio::test]
    async fn a_graph_left_by_a_dead_worker_is_built_by_the_next() {
        let kit = TempStore::new().await;
        let scope = queued(&kit, &[("doc", "Ana Ruiz works for Acme Corp.")]).await;
        let clock = ManualClock::at(1_000);
        // The first worker stores the chunks and dies before the graph.
        let claimed = kit
            .store
            .claim_items(&ClaimRequest::new(
                "dead",
                UnixMs::from_millis(1_000),
                Duration::from_millis(LEASE_MS as u64),
                1,
            ))
            .await
            .unwrap();
        let chunk = NewChunk {
            chunk_id: "c0".into(),
            position: 0,
            content: "Ana Ruiz works for Acme Corp.".into(),
            context: String::new(),
            layout: serde_json::json!({}),
            embedding: HashEmbedder.embed(&["x"]).unwrap().remove(0),
        };
        assert!(kit
            .store
            .complete_item(
                &claimed[0],
                &[chunk],
                AfterChunks::Graph,
                UnixMs::from_millis(1_001)
            )
            .await
            .unwrap());
        assert_eq!(
            status(&kit, &scope, "doc").await.0,
            IndexingStatus::GraphCreation
        );
        let pipeline = Pipeline::new(
            kit.store.clone(),
            Arc::new(HashEmbedder),
            Arc::new(HashEmbedder),
            clock.clone(),
            options(3),
        )
        .with_graph(Arc::new(engram_graph::RuleExtractor));
        assert_eq!(
            pipeline.run_once().await.unwrap(),
            0,
            "the lease still holds"
        );
        clock.advance(LEASE_MS + 1);
        assert_eq!(pipeline.run_once().await.unwrap(), 1);
        assert_eq!(
            status(&kit, &scope, "doc").await.0,
            IndexingStatus::Completed
        );
        assert_eq!(
            relations(&kit, &scope, "doc").await,
            ["ana ruiz WORKS_FOR acme corp"]
        );
    }
}
