//! engram's derived indexes and their one owner. The store holds the truth (items, chunks and
//! their vectors) and logs every change to a chunk in a change feed ([`ChunkFeed`]); the
//! [`Indexes`] follow that feed into a [`KeywordIndex`] (BM25: tantivy in memory today) and a
//! [`VectorIndex`] (an exact int8 scan in memory today), built from the store at start and
//! caught up before every search. Nothing else writes to an index: the app and the pipeline only
//! write the store, so no write path can forget an index, and after a crash the indexes are
//! rebuilt from the truth. Every key an index returns is checked against the store
//! (`passing_chunk_keys`, `fetch_chunks`) within the request's organization and database, so a
//! stale index can never leak or resurrect a chunk.
//!
//! Text analysis is defined once ([`analyzer`]) for indexed chunks and for queries.

pub mod analyzer;
mod ann;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod facets;
mod keyword;
mod slots;
mod vector;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use engram_store::{ChunkChanges, ChunkFilter, ChunkScan, DatabaseScope, Store, StoreError};
use engram_types::{DatabaseId, ItemKind, UnixMs};
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;

pub use analyzer::{LexicalQuery, TermOperator};
pub use ann::AnnOptions;
pub use engram_store::{ChunkFeed, ChunkKey};
pub use facets::{Facets, Keys};
pub use keyword::{KeywordIndex, SavedKeywordIndex, TantivyKeywordIndex};
pub use vector::{Int8VectorIndex, VectorEntry, VectorIndex, Vectors};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyword index failed (it is rebuilt from the store when engram restarts).
    #[error("keyword index: {0}")]
    Keyword(String),
    /// The disk under an index is full (`ENOSPC`): what was being written is not, the index
    /// stands as it was, and the write is done again once space is freed.
    #[error("index: no space left on the device: {0}")]
    DiskFull(String),
    #[error("index task failed: {0}")]
    Task(String),
}

pub type IndexResult<T> = Result<T, IndexError>;

/// Runs index work (CPU-bound, milliseconds) on the blocking pool, off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> IndexResult<T> + Send + 'static,
) -> IndexResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| IndexError::Task(e.to_string()))?
}

/// Which chunks of a database an index may return: the conditions an index holds itself
/// (kinds and collections; item conditions are the store's). Empty lists mean any.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexFilter {
    pub kinds: Vec<ItemKind>,
    pub collections: Vec<String>,
    /// The item conditions as terms (see `facets::lookup`), for an index that holds them; empty
    /// when there are none or they are not all plain values.
    pub item_terms: Vec<Vec<u64>>,
}

impl IndexFilter {
    pub fn accepts(&self, collection: &str, kind: ItemKind) -> bool {
        self.accepts_kind(kind)
            && (self.collections.is_empty() || self.collections.iter().any(|c| c == collection))
    }

    pub fn accepts_kind(&self, kind: ItemKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }
}

impl From<&ChunkFilter> for IndexFilter {
    fn from(filter: &ChunkFilter) -> Self {
        Self {
            kinds: filter.kinds.clone(),
            collections: filter
                .collections
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            item_terms: facets::lookup(filter).unwrap_or_default(),
        }
    }
}

/// What a filter's item conditions (metadata, origin, app sources) pass, as the indexes hold
/// them.
#[derive(Debug, Clone)]
pub enum Passing {
    /// The filter has no item conditions.
    Any,
    /// These chunks: a superset of what the store passes (see [`Facets`]), so what a search
    /// keeps is read through the store with the filter.
    Only(Arc<Keys>),
    /// The filter names item ids or titles, which only the store evaluates.
    Store,
}

/// What `work` gave, and how long it took.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = std::time::Instant::now();
    (work.await, started.elapsed())
}

/// What a rebuild builds from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    /// The keyword and vector indexes.
    Both,
    /// The vector index alone (the keyword index was opened from disk).
    Vectors,
}

/// A step of following the feed whose time is recorded (`engram_index_stage_seconds{stage}`):
/// what ingestion costs the indexes shows beside the pipeline's own steps.
#[derive(Debug, Clone, Copy)]
enum Follow {
    /// Reading a page of changes and the chunks they name.
    Feed,
    /// Applying the page to the keyword index (its commit included).
    Keyword,
    /// Applying the page to the vectors.
    Vectors,
    /// Saving the keyword index's position and trimming the feed.
    Position,
}

impl Follow {
    fn took(self, took: Duration) {
        let stage = match self {
            Self::Feed => "feed",
            Self::Keyword => "keyword",
            Self::Vectors => "vectors",
            Self::Position => "position",
        };
        metrics::histogram!("engram_index_stage_seconds", "stage" => stage).record(took);
    }
}

/// Changes (or chunks, when rebuilding) read from the store at once.
const PAGE: u32 = 5_000;
/// The least time between two background catch-ups started by wakes. Each is a keyword index
/// commit, whose cost is mostly fixed: at 250 ms the commits took 5.7 s of 15 s of ingestion
/// (`engram bench ingest`, 2,000 chunks), at 1 s 1.8 s (0.78 of the model alone instead of
/// 0.71 in two runs each; whole SciFact documents: the commits' 19.7 s fell to 12.6 s and the
/// wall time stayed 132 s). A query catches up by itself first, so it never answers from the
/// lag, and it pays one commit either way while ingestion runs.
const COALESCE: Duration = Duration::from_secs(1);

/// The derived indexes of every database, following the store's chunk change feed.
pub struct Indexes {
    store: Arc<dyn Store>,
    keyword: Arc<dyn KeywordIndex>,
    vectors: Arc<dyn VectorIndex>,
    /// The item conditions of filters, by chunk (in memory, built with the vectors).
    facets: Arc<Facets>,
    /// The last change applied; `None` until the indexes are built. One catch-up at a time:
    /// searches that arrive meanwhile wait for it, then see everything written before.
    cursor: Mutex<Option<i64>>,
    /// This owner's name among the feed's readers (several instances share one PostgreSQL).
    reader: String,
    /// The store's feed name (what a saved keyword index is recorded against), read once.
    feed: tokio::sync::OnceCell<String>,
    /// Whether the last start opened the saved keyword index (instead of building it).
    restored: std::sync::atomic::AtomicBool,
    /// When this owner last told the store how far it has applied the feed.
    noted: std::sync::Mutex<Option<std::time::Instant>>,
}

/// An owner that has not noted its position for this long notes it before following the feed
/// (the store takes a reader silent for much longer for gone), and learns so if it was.
const NOTE_EVERY: Duration = Duration::from_secs(60);

/// A name no other reader of the feed has: process, start time and a counter.
fn reader_name() -> String {
    static OWNERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = OWNERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{started:x}-{n}", std::process::id())
}

impl Indexes {
    pub fn new(
        store: Arc<dyn Store>,
        keyword: Arc<dyn KeywordIndex>,
        vectors: Arc<dyn VectorIndex>,
    ) -> Self {
        Self {
            store,
            keyword,
            vectors,
            facets: Arc::default(),
            cursor: Mutex::new(None),
            reader: reader_name(),
            feed: tokio::sync::OnceCell::new(),
            restored: std::sync::atomic::AtomicBool::new(false),
            noted: std::sync::Mutex::new(None),
        }
    }

    /// tantivy and the int8 scan, in memory (built from the store at every start).
    pub fn in_memory(store: Arc<dyn Store>, dimension: usize) -> Self {
        Self::new(
            store,
            Arc::new(TantivyKeywordIndex::new()),
            Arc::new(Int8VectorIndex::with_options(
                dimension,
                AnnOptions::default(),
            )),
        )
    }

    /// The service's choice: tantivy saved under `keyword` (a restart follows the feed from
    /// where it stopped), the int8 scan in memory with a graph over the vectors of databases
    /// of `graph.min_vectors` chunks or more (saved under `graph.directory`).
    pub fn saved(
        store: Arc<dyn Store>,
        dimension: usize,
        keyword: std::path::PathBuf,
        graph: AnnOptions,
    ) -> Self {
        Self::new(
            store,
            Arc::new(TantivyKeywordIndex::on_disk(keyword)),
            Arc::new(Int8VectorIndex::with_options(dimension, graph)),
        )
    }

    /// Brings the indexes up to date with the store: builds them on first use, then applies
    /// every change logged since the last catch-up and trims it from the feed. Returns how many
    /// changes (or chunks, when building) it applied.
    pub async fn catch_up(&self) -> IndexResult<usize> {
        let mut cursor = self.cursor.lock().await;
        let (mut at, mut applied) = match *cursor {
            Some(at) if self.noted_lately() => (at, 0),
            Some(at) => match self.note(at).await {
                Ok(_) => (at, 0),
                Err(IndexError::Store(StoreError::FeedBehind(why))) => {
                    tracing::warn!(%why, "the indexes fell behind the chunk feed; rebuilding");
                    self.rebuild(Build::Both).await?
                }
                Err(err) => return Err(err),
            },
            None => self.start().await?,
        };
        *cursor = Some(at);
        loop {
            let reading = std::time::Instant::now();
            let changes = self.store.chunk_changes(at, PAGE).await?;
            if changes.through == at {
                return Ok(applied);
            }
            Follow::Feed.took(reading.elapsed());
            applied += changes.removed.len();
            let through = changes.through;
            let (keyword, vectors) = self.apply(changes).await?;
            Follow::Keyword.took(keyword);
            Follow::Vectors.took(vectors);
            at = through;
            *cursor = Some(at);
            let noting = std::time::Instant::now();
            self.keyword.covers(self.feed().await?, at).await?;
            // Trimmed through what every reader of the feed has applied: this process alone
            // on SQLite, the slowest live instance on PostgreSQL.
            let every_reader = self.note(at).await?;
            self.store.trim_chunk_changes(every_reader).await?;
            Follow::Position.took(noting.elapsed());
        }
    }

    fn noted_lately(&self) -> bool {
        self.noted
            .lock()
            .ok()
            .and_then(|noted| *noted)
            .is_some_and(|at| at.elapsed() < NOTE_EVERY)
    }

    /// Tells the store this owner has applied the feed through `at`; returns how far every
    /// reader has.
    async fn note(&self, at: i64) -> IndexResult<i64> {
        let every_reader = self.store.feed_reader_at(&self.reader, at).await?;
        if let Ok(mut noted) = self.noted.lock() {
            *noted = Some(std::time::Instant::now());
        }
        Ok(every_reader)
    }

    /// Whether these indexes started from the keyword index saved on disk, following the feed
    /// from its position, instead of building it from the store.
    pub fn restored(&self) -> bool {
        self.restored.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn feed(&self) -> IndexResult<&str> {
        let feed = self
            .feed
            .get_or_try_init(|| self.store.chunk_feed_id())
            .await?;
        Ok(feed)
    }

    /// Builds the indexes when this owner starts: the keyword index opens what it saved and
    /// follows the feed from there when the feed still holds every change since (the vectors
    /// alone are read from the store); otherwise both are built from the store. Returns the
    /// feed position the indexes cover and the chunks read.
    async fn start(&self) -> IndexResult<(i64, usize)> {
        let feed = self.feed().await?.to_owned();
        let Some(saved) = self.keyword.restore(&feed).await? else {
            return self.rebuild(Build::Both).await;
        };
        // The newest committed change, not the feed's sequence: a PostgreSQL sequence is not
        // transactional, so a dump taken while a write was in flight restores a sequence value
        // past the changes the dump holds, and an index that applied that write would pass as
        // caught up while it holds chunks the restored store lacks.
        let head = self.store.committed_feed_head().await?;
        if saved > head {
            // The store went back (a backup restored): the index holds changes it lacks.
            tracing::warn!(
                saved,
                head,
                "the saved keyword index is ahead of the store; rebuilding"
            );
            return self.rebuild(Build::Both).await;
        }
        match self.note(saved).await {
            Ok(_) => {
                let (_, read) = self.rebuild(Build::Vectors).await?;
                self.restored
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                Ok((saved, read))
            }
            Err(IndexError::Store(StoreError::FeedBehind(why))) => {
                tracing::info!(%why, "the saved keyword index is behind the chunk feed; rebuilding");
                self.rebuild(Build::Both).await
            }
            Err(err) => Err(err),
        }
    }

    /// Applies a page to both indexes at once (the item conditions' terms beside the vectors,
    /// timed with them); returns how long each took.
    async fn apply(&self, changes: ChunkChanges) -> IndexResult<(Duration, Duration)> {
        let changes = Arc::new(changes);
        let ((keyword, k_took), (vectors, v_took)) = tokio::join!(
            timed(self.keyword.apply(changes.clone())),
            timed(self.apply_vectors(changes))
        );
        keyword.and(vectors).map(|()| (k_took, v_took))
    }

    /// Applies a page to the vectors and the item conditions' terms.
    async fn apply_vectors(&self, changes: Arc<ChunkChanges>) -> IndexResult<()> {
        let facets = self.facets.clone();
        let page = changes.clone();
        let (vectors, terms) = tokio::join!(
            self.vectors.apply(changes),
            blocking(move || {
                facets.apply(&page);
                Ok(())
            })
        );
        vectors.and(terms)
    }

    /// Builds `what` from every chunk of a live database; returns the feed position the build
    /// covers (changes after it are applied next) and the chunks read. Changes logged during
    /// the scan are applied again afterwards, which changes nothing. Building the vectors
    /// alone leaves the keyword index (opened from disk) where it is: the caller follows the
    /// feed from the keyword index's position.
    async fn rebuild(&self, what: Build) -> IndexResult<(i64, usize)> {
        let started = std::time::Instant::now();
        let head = self.store.chunk_feed_head().await?;
        let scan = match what {
            Build::Both => {
                self.restored
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                self.keyword.clear().await?;
                ChunkScan::Full
            }
            Build::Vectors => ChunkScan::Vectors,
        };
        self.vectors.clear().await?;
        self.facets.clear();
        let (mut after, mut total) = (ChunkKey(i64::MIN), 0);
        // Where the time goes (logged): the store's scan of the next page runs beside the
        // indexing of the current one.
        let (mut reading, mut keyword, mut vectors) =
            (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut next = self.store.scan_chunks(after, PAGE, scan).await?;
        while let Some(last) = next.last() {
            after = last.chunk_key;
            total += next.len();
            let changes = ChunkChanges {
                current: std::mem::take(&mut next),
                ..ChunkChanges::default()
            };
            let indexed = async {
                match what {
                    Build::Both => self.apply(changes).await,
                    Build::Vectors => {
                        let (applied, took) = timed(self.apply_vectors(Arc::new(changes))).await;
                        applied.map(|()| (Duration::ZERO, took))
                    }
                }
            };
            let (applied, (page, read)) =
                tokio::join!(indexed, timed(self.store.scan_chunks(after, PAGE, scan)),);
            let (k_took, v_took) = applied?;
            next = page?;
            reading += read;
            keyword += k_took;
            vectors += v_took;
        }
        // What the keyword index held back during the rebuild is committed now.
        let ((k, k_took), (v, v_took)) =
            tokio::join!(timed(self.keyword.rebuilt()), timed(self.vectors.rebuilt()));
        k.and(v)?;
        keyword += k_took;
        vectors += v_took;
        if what == Build::Both {
            self.keyword.covers(self.feed().await?, head).await?;
            let every_reader = self.note(head).await?;
            self.store.trim_chunk_changes(every_reader).await?;
        }
        tracing::info!(
            chunks = total,
            keyword = what == Build::Both,
            ms = started.elapsed().as_millis() as u64,
            reading_ms = reading.as_millis() as u64,
            keyword_ms = keyword.as_millis() as u64,
            vectors_ms = vectors.as_millis() as u64,
            "indexes built"
        );
        Ok((head, total))
    }

    /// Follows the feed in the background: after `wake` (the pipeline finished an item)
    /// and every `every`, so searches rarely wait for a catch-up. Stops when `token` is
    /// cancelled.
    pub async fn follow(&self, wake: Arc<Notify>, every: Duration, token: CancellationToken) {
        loop {
            if let Err(err) = self.catch_up().await {
                tracing::error!(error = %err, "catching the indexes up failed");
            }
            tokio::select! {
                () = token.cancelled() => break,
                () = wake.notified() => {}
                () = tokio::time::sleep(every) => {}
            }
            // Workers wake this after every item: a burst of wakes makes one catch-up (each
            // is a keyword index commit). Queries catch up by themselves, so none waits for it.
            tokio::select! {
                () = token.cancelled() => break,
                () = tokio::time::sleep(COALESCE) => {}
            }
        }
    }

    /// The best `limit` chunks by BM25 among the live chunks of the scope passing `filter`, as
    /// the indexes stand (call [`Indexes::catch_up`] first to see every write). The index ranks;
    /// the store says which of the ranked keys are live and pass the item conditions, and the
    /// page grows until `limit` pass or every match was read.
    pub async fn keyword_search(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        query: &LexicalQuery,
        limit: usize,
        now: UnixMs,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        if limit == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        let index_filter = IndexFilter::from(filter);
        let only = match self.passing(scope, filter) {
            Passing::Only(keys) if keys.is_empty() => return Ok(Vec::new()),
            Passing::Only(keys) => Some(keys),
            Passing::Any | Passing::Store => None,
        };
        // Liveness alone drops few; item conditions the index does not apply may drop most.
        let first = if filter.has_item_conditions() && only.is_none() {
            4
        } else {
            2
        };
        let pages = std::iter::successors(Some(limit.saturating_mul(first).max(64)), |page| {
            Some(page.saturating_mul(8))
        });
        let found = self
            .widen_until_passing(scope, filter, limit, now, pages, |page| {
                self.keyword
                    .search(&scope.id, query, &index_filter, page, only.clone())
            })
            .await?;
        // The pages never run out: a page past the index's size is answered short.
        Ok(found.unwrap_or_default())
    }

    /// Filters after an index, widening until enough pass (the one routine for both indexes):
    /// `rank` ranks a page of each size of `pages` in turn (each larger than the one before),
    /// and the store says which of its keys pass `filter` (item conditions and liveness). Answers
    /// the first `limit` passing keys, best first, once that many pass or a page came back
    /// short (the index holds no more); `None` when `pages` ran out first, so the caller reads
    /// every passing key instead.
    pub async fn widen_until_passing<F, Fut>(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: usize,
        now: UnixMs,
        pages: impl IntoIterator<Item = usize>,
        mut rank: F,
    ) -> IndexResult<Option<Vec<(ChunkKey, f32)>>>
    where
        F: FnMut(usize) -> Fut,
        Fut: std::future::Future<Output = IndexResult<Vec<(ChunkKey, f32)>>>,
    {
        for page in pages {
            let ranked = rank(page).await?;
            let exhausted = ranked.len() < page;
            let keys: Vec<ChunkKey> = ranked.iter().map(|r| r.0).collect();
            let passing: HashSet<ChunkKey> = self
                .store
                .passing_chunk_keys(scope, filter, &keys, now)
                .await?
                .into_iter()
                .collect();
            let found: Vec<(ChunkKey, f32)> = ranked
                .into_iter()
                .filter(|(key, _)| passing.contains(key))
                .take(limit)
                .collect();
            if found.len() == limit || exhausted {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The best `limit` chunk keys by BM25 with their scores, best first, for a caller that
    /// reads the rows it keeps through the store with the filter (which checks liveness and
    /// the item conditions as it reads): the index's ranking as it stands, restricted inside
    /// the index to what the filter passes, which may hold a chunk that expired since (until
    /// the sweeper purges it); with conditions only the store evaluates (item ids, titles),
    /// [`Self::keyword_search`].
    pub async fn keyword_ranked(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        query: &LexicalQuery,
        limit: usize,
        now: UnixMs,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        let only = match self.passing(scope, filter) {
            Passing::Store => return self.keyword_search(scope, filter, query, limit, now).await,
            Passing::Only(keys) if keys.is_empty() => return Ok(Vec::new()),
            Passing::Only(keys) => Some(keys),
            Passing::Any => None,
        };
        if limit == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        self.keyword
            .search(&scope.id, query, &IndexFilter::from(filter), limit, only)
            .await
    }

    /// What `filter`'s item conditions pass in the scope's database, as the indexes stand (call
    /// [`Indexes::catch_up`] first to see every write).
    pub fn passing(&self, scope: &DatabaseScope, filter: &ChunkFilter) -> Passing {
        if !filter.has_item_conditions() {
            return Passing::Any;
        }
        match self.facets.passing(&scope.id, filter) {
            Some(keys) => Passing::Only(Arc::new(keys)),
            None => Passing::Store,
        }
    }

    /// The cosine of `query` with the vector of each of `keys` the index holds, as it holds
    /// them (int8 codes): keys without a vector are left out.
    pub async fn similarities(
        &self,
        scope: &DatabaseScope,
        query: &[f32],
        keys: &[ChunkKey],
    ) -> IndexResult<HashMap<ChunkKey, f32>> {
        Ok(self
            .vectors
            .similarities(&scope.id, query, keys)
            .await?
            .into_iter()
            .collect())
    }

    /// The `k` nearest chunk keys of the scope's database passing `filter` (and in `only`, when
    /// given), best first, as the index stands. Item conditions and liveness are the caller's
    /// to check in the store.
    pub async fn nearest(
        &self,
        scope: &DatabaseScope,
        vector: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        self.vectors
            .nearest(&scope.id, vector, k, filter, only)
            .await
    }

    /// [`Self::nearest`] by the exact scan (see [`VectorIndex::nearest_exact`]).
    pub async fn nearest_exact(
        &self,
        database: &DatabaseId,
        vector: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        self.vectors
            .nearest_exact(database, vector, k, filter, only)
            .await
    }

    /// Vectors indexed for a database, after a catch-up.
    pub async fn vector_count(&self, database: &DatabaseId) -> IndexResult<usize> {
        self.catch_up().await?;
        self.vectors.count(database).await
    }

    /// Whether a database's vector searches run at full speed (its graph, if it needs one,
    /// is built and current), after a catch-up.
    pub async fn vectors_settled(&self, database: &DatabaseId) -> IndexResult<bool> {
        self.catch_up().await?;
        self.vectors.settled(database).await
    }
}
