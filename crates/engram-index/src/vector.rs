//! The vector index: every chunk's embedding, int8-quantised (one scale per vector), grouped by
//! database and scanned exactly with an integer dot product (SimSIMD); a database of at least
//! [`AnnOptions::min_vectors`] is searched through an HNSW graph of the same codes as well
//! ([`crate::ann`]), its candidates rescored exactly. A large scan (a filter too selective for
//! the graph, or no graph yet) reads each vector's sign bits first (48 bytes, not 384) and
//! scores exactly only its best ([`Coarse`]). Fed by the store's chunk change feed like the
//! keyword index; searches run on the blocking pool, never on the async runtime.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use engram_store::{ChunkChanges, ChunkKey};
use engram_types::{DatabaseId, ItemKind};

use crate::ann::{spawn_builder, AnnOptions, Graph, Wake};
use crate::slots::SlotMap;
use crate::{blocking, IndexFilter, IndexResult, Keys};

/// Finds the chunks of one database nearest to a query vector.
#[async_trait]
pub trait VectorIndex: Send + Sync {
    /// Applies one page of the change feed (see [`ChunkChanges`]); idempotent.
    async fn apply(&self, changes: Arc<ChunkChanges>) -> IndexResult<()>;
    /// Forgets every database (before a rebuild).
    async fn clear(&self) -> IndexResult<()>;
    /// The `k` nearest chunk keys of a database by cosine (vectors are unit length), among
    /// chunks passing `filter` and, when `only` is given, whose key it holds. Best first.
    async fn nearest(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>>;
    /// [`Self::nearest`] by an exact scan of every vector passing `filter`, whatever
    /// approximate structure the index keeps: the reference its recall is measured against.
    async fn nearest_exact(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        self.nearest(database, query, k, filter, only).await
    }
    /// The cosine of `query` with the vector of each of `keys` the database holds (the others
    /// are left out), as the index keeps them: what ranking scores a candidate found by other
    /// means with, instead of reading its stored vector.
    async fn similarities(
        &self,
        database: &DatabaseId,
        query: &[f32],
        keys: &[ChunkKey],
    ) -> IndexResult<Vec<(ChunkKey, f32)>>;
    /// Told after the index was rebuilt from every live chunk of the store: what it keeps of
    /// databases it no longer holds (saved graphs) can go.
    async fn rebuilt(&self) -> IndexResult<()> {
        Ok(())
    }
    /// Vectors held for a database.
    async fn count(&self, database: &DatabaseId) -> IndexResult<usize>;
    /// Whether searches of a database run at full speed: no structure of it is still being
    /// built in the background (they are answered meanwhile, more slowly).
    async fn settled(&self, _database: &DatabaseId) -> IndexResult<bool> {
        Ok(true)
    }
}

/// One vector to index.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorEntry {
    pub chunk_key: ChunkKey,
    pub collection: String,
    pub kind: ItemKind,
    pub vector: Vec<f32>,
}

/// Every database's vectors, in memory.
#[derive(Clone)]
pub struct Int8VectorIndex {
    inner: Arc<Vectors>,
}

/// The index proper (synchronous; [`Int8VectorIndex`] runs it on the blocking pool).
pub struct Vectors {
    segments: Arc<Segments>,
}

/// Every database's segment, and what the graph builder needs.
pub(crate) struct Segments {
    dimension: usize,
    options: AnnOptions,
    map: RwLock<HashMap<DatabaseId, Segment>>,
    wake: Arc<Wake>,
    /// Searches answered through a graph.
    graph_searches: std::sync::atomic::AtomicU64,
    /// Vectors a loaded graph held in their current version (not added again).
    graph_loaded: std::sync::atomic::AtomicU64,
    /// Between a clear and the end of the rebuild that follows: a segment is not complete yet,
    /// so no saved graph is measured against it.
    rebuilding: std::sync::atomic::AtomicBool,
}

/// A key held in the segment but not in the graph in its current version.
#[derive(Debug, Clone, Copy)]
struct Pending {
    version: u64,
    /// The graph refused it: it stays with the exact scan.
    failed: bool,
}

#[derive(Default)]
struct Segment {
    keys: Vec<ChunkKey>,
    /// Each key's slot (a search looks up every key it considers).
    slots: SlotMap,
    /// Per slot: interned collection and kind.
    meta: Vec<(u32, ItemKind)>,
    collections: Vec<String>,
    /// Vectors per interned collection and kind (`collection * 2 + memory`).
    counts: Vec<usize>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Per slot: the signs of the vector less `center` (`dimension / 8` bytes), the coarse code
    /// a large scan reads first ([`Coarse`]).
    signs: Vec<u8>,
    /// The mean of the segment's first [`CENTER_SAMPLE`] vectors (zero before). Embeddings
    /// share a common direction, so their raw signs agree on many dimensions and tell little
    /// apart; around their mean, each bit splits them. Fixed once taken (every code is relative
    /// to it), and ranking by `q·(x − c)` is ranking by `q·x`, since `q·c` is the same for all.
    center: Option<Vec<f32>>,
    /// The graph over the codes, once the segment is large enough.
    graph: Option<Arc<Graph>>,
    /// With a graph: keys it does not hold in their current version (scanned exactly).
    unindexed: HashMap<ChunkKey, Pending>,
    /// With a graph: keys it holds that are gone or replaced (the builder removes them).
    stale: HashSet<ChunkKey>,
    version: u64,
    /// A saved graph was tried for this segment (loaded or refused): not tried again.
    load_tried: bool,
}

/// Quantises to int8 with one scale: `x ≈ code * scale`.
fn quantize(vector: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    out.extend(
        vector
            .iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// The integer dot product of two codes of equal length, on the best SIMD kernel the CPU has
/// (SimSIMD picks it at run time: AVX-512 VNNI, AVX2, NEON, or a portable loop).
fn dot_i8(a: &[i8], b: &[i8]) -> f32 {
    use simsimd::SpatialSimilarity;
    i8::dot(a, b).unwrap_or(0.0) as f32
}

/// Appends the signs of `vector` less `center` (none: zero), eight dimensions a byte (the last
/// byte padded with zeros).
fn sign_bits(vector: impl Iterator<Item = f32>, center: Option<&[f32]>, out: &mut Vec<u8>) {
    let mut byte = 0u8;
    let mut bit = 0;
    for (i, x) in vector.enumerate() {
        let c = center.and_then(|c| c.get(i)).copied().unwrap_or(0.0);
        byte |= u8::from(x > c) << bit;
        bit += 1;
        if bit == 8 {
            out.push(byte);
            (byte, bit) = (0, 0);
        }
    }
    if bit > 0 {
        out.push(byte);
    }
}

/// The vectors a segment's sign codes are centred on (see `Segment::center`).
const CENTER_SAMPLE: usize = 1_024;

/// A scan passing at least this many vectors reads their sign bits first and scores exactly
/// only the best of them; a smaller one scores every code exactly.
const COARSE_MIN: usize = 8_192;

/// The coarse pass keeps for exact scoring this many candidates per result asked, at least
/// [`COARSE_FLOOR`], and at least one in [`COARSE_SHARE`] of those it scans. Sign codes rank
/// vectors well where a query's neighbours stand out, as with a model's embeddings (recall@10
/// 1.0 against the exact scan keeping one in ten, `engram bench query --chunks 100000`, and one
/// in a hundred, `cargo bench -p engram-index --bench vectors`); where they barely do (vectors
/// of uniform noise about a shared direction, 30,000 of them), keeping 1,000 found 0.92 of the
/// exact ten, one in 16 0.968, one in 8 0.97. Each vector scored exactly costs about a read of
/// a page of memory (300 ns at a million vectors), so the share is not larger.
const COARSE_PER_RESULT: usize = 10;
const COARSE_FLOOR: usize = 1_000;
const COARSE_SHARE: usize = 16;

/// Vectors whose sign codes a coarse pass copies together before scoring them.
const GATHER: usize = 64;

/// A quantised query against sign codes: the sum of the query's components over the
/// dimensions whose sign bit is set, which orders vectors as their dot product with the
/// query's code over ±1 per dimension does (that is twice it less a constant). Read a byte
/// of sign bits at a time from a table of the 256 sums of that byte's eight components, so a
/// vector costs one cache line of memory and `dimension / 8` lookups instead of its whole
/// code: a scan of a large filter is bound by its reads of memory, not by arithmetic.
struct Coarse {
    /// 256 sums per byte of the sign code.
    table: Vec<i16>,
}

impl Coarse {
    fn new(query: &[i8]) -> Self {
        let mut table = Vec::with_capacity(query.len().div_ceil(8) * 256);
        for eight in query.chunks(8) {
            table.extend((0..256usize).map(|byte| {
                eight
                    .iter()
                    .enumerate()
                    .filter(|(bit, _)| byte >> bit & 1 == 1)
                    .map(|(_, q)| i16::from(*q))
                    .sum::<i16>()
            }));
        }
        Self { table }
    }

    fn score(&self, signs: &[u8]) -> i32 {
        self.table
            .chunks_exact(256)
            .zip(signs)
            .map(|(sums, byte)| i32::from(sums[usize::from(*byte)]))
            .sum()
    }
}

fn kind_bit(kind: ItemKind) -> usize {
    usize::from(kind == ItemKind::Memory)
}

/// Vectors the builder adds to a graph in one round, before it looks at the segments again.
const GRAPH_BATCH: usize = 4_096;

/// A search reads the graph only while it lacks at most this many of the segment's vectors
/// (they are scanned exactly beside it); while building it from scratch, the scan serves.
const UNINDEXED_MAX: usize = 20_000;

/// A filter must pass at least 1 in this many vectors for the graph to search within it; a
/// more selective one is scanned exactly among the vectors it passes. A graph search with a
/// predicate visits about as many more nodes as the filter is selective, a scan costs what it
/// passes: at a million vectors a filter passing 10% took 62 ms through the graph (the
/// unfiltered query 12.6 ms, `engram bench query --chunks 1000000`).
const GRAPH_SELECTIVITY: usize = 4;

/// A filter's keys passing at least 1 in this many vectors are first applied after a walk of
/// the graph without them (see `search_with`); asked for 1.5 times as many answers as the
/// filter drops, the walk at 1 in 16 is about twice an unfiltered one.
const WALK_FIRST: usize = 16;

impl Segment {
    fn intern(&mut self, collection: &str) -> u32 {
        match self.collections.iter().position(|c| c == collection) {
            Some(i) => i as u32,
            None => {
                self.collections.push(collection.to_owned());
                self.counts.extend([0, 0]);
                (self.collections.len() - 1) as u32
            }
        }
    }

    /// Adds a vector, replacing the key's previous one.
    fn put(
        &mut self,
        key: ChunkKey,
        collection: &str,
        kind: ItemKind,
        vector: &[f32],
        dimension: usize,
    ) {
        self.remove(key, dimension);
        let collection = self.intern(collection);
        self.slots.insert(key, self.keys.len());
        self.keys.push(key);
        self.meta.push((collection, kind));
        self.counts[collection as usize * 2 + kind_bit(kind)] += 1;
        let scale = quantize(vector, &mut self.codes);
        self.scales.push(scale);
        sign_bits(
            vector.iter().copied(),
            self.center.as_deref(),
            &mut self.signs,
        );
        if self.center.is_none() && self.keys.len() == CENTER_SAMPLE {
            self.center_signs(dimension);
        }
        if self.graph.is_some() {
            self.version += 1;
            self.unindexed.insert(
                key,
                Pending {
                    version: self.version,
                    failed: false,
                },
            );
        }
    }

    fn remove(&mut self, key: ChunkKey, dimension: usize) {
        let Some(slot) = self.slots.remove(key) else {
            return;
        };
        if self.graph.is_some() && self.unindexed.remove(&key).is_none() {
            self.stale.insert(key);
        }
        let (collection, kind) = self.meta[slot];
        self.counts[collection as usize * 2 + kind_bit(kind)] -= 1;
        let last = self.keys.len() - 1;
        if slot != last {
            let moved = self.keys[last];
            self.keys.swap(slot, last);
            self.meta.swap(slot, last);
            self.scales.swap(slot, last);
            let (head, tail) = self.codes.split_at_mut(last * dimension);
            head[slot * dimension..(slot + 1) * dimension].copy_from_slice(&tail[..dimension]);
            let bytes = dimension.div_ceil(8);
            let (head, tail) = self.signs.split_at_mut(last * bytes);
            head[slot * bytes..(slot + 1) * bytes].copy_from_slice(&tail[..bytes]);
            self.slots.insert(moved, slot);
        }
        self.keys.pop();
        self.meta.pop();
        self.scales.pop();
        self.codes.truncate(last * dimension);
        self.signs.truncate(last * dimension.div_ceil(8));
    }

    /// Takes the mean of the vectors held as the centre and codes every sign again around it.
    fn center_signs(&mut self, dimension: usize) {
        let mut center = vec![0.0f32; dimension];
        for (code, scale) in self.codes.chunks_exact(dimension).zip(&self.scales) {
            for (c, x) in center.iter_mut().zip(code) {
                *c += f32::from(*x) * scale;
            }
        }
        let n = self.scales.len().max(1) as f32;
        center.iter_mut().for_each(|c| *c /= n);
        let mut signs = Vec::with_capacity(self.signs.len());
        for (code, scale) in self.codes.chunks_exact(dimension).zip(&self.scales) {
            sign_bits(
                code.iter().map(|x| f32::from(*x) * scale),
                Some(&center),
                &mut signs,
            );
        }
        self.signs = signs;
        self.center = Some(center);
    }

    fn code(&self, slot: usize, dimension: usize) -> &[i8] {
        &self.codes[slot * dimension..(slot + 1) * dimension]
    }

    /// The exact score of the vector in `slot` for a quantised query.
    fn score(&self, slot: usize, query: &[i8], query_scale: f32) -> f32 {
        dot_i8(query, self.code(slot, query.len())) * query_scale * self.scales[slot]
    }

    /// The best `k` of `candidates` (slots with their keys, `count` of them) by their exact
    /// scores; with `coarse` and at least [`COARSE_MIN`] of them, through their sign codes
    /// first: the best `k` of the best [`COARSE_PER_RESULT`] per result by [`Coarse`].
    fn scan(
        &self,
        candidates: impl Iterator<Item = (usize, ChunkKey)>,
        count: usize,
        query: &[i8],
        query_scale: f32,
        k: usize,
        coarse: bool,
    ) -> Vec<(ChunkKey, f32)> {
        let exact =
            |slot: usize, code: &[i8]| dot_i8(query, code) * query_scale * self.scales[slot];
        let keep = k
            .saturating_mul(COARSE_PER_RESULT)
            .max(COARSE_FLOOR)
            .max(count / COARSE_SHARE);
        let by_key = |((slot, chunk), score): ((usize, ChunkKey), f32)| ((chunk, slot), score);
        let dimension = query.len();
        if !coarse || count < COARSE_MIN || count <= keep {
            return best(
                gathered(candidates, &self.codes, dimension, exact).map(|((_, c), s)| (c, s)),
                k,
            );
        }
        let shortlist = {
            let table = Coarse::new(query);
            let coarse = |_: usize, signs: &[u8]| table.score(signs) as f32;
            let signs = gathered(candidates, &self.signs, dimension.div_ceil(8), coarse);
            best(signs.map(by_key), keep)
        };
        // Scored exactly in slot order (the reads of memory in order too).
        let mut slots: Vec<(usize, ChunkKey)> = shortlist
            .into_iter()
            .map(|((chunk, slot), _)| (slot, chunk))
            .collect();
        slots.sort_unstable_by_key(|s| s.0);
        best(
            gathered(slots.into_iter(), &self.codes, dimension, exact).map(|((_, c), s)| (c, s)),
            k,
        )
    }
}

/// Scores candidates (slots with their keys) by their codes, `width` elements a slot of
/// `codes`, a batch at a time: a batch's codes are copied together first. A copy is a few
/// instructions, so the processor has many of the batch's reads from memory in flight at once,
/// where scoring each code as it is read (a hundred instructions and more) waits for one read
/// at a time: a scan of a filter's scattered vectors is bound by those reads, not by arithmetic.
fn gathered<'a, T: Copy + 'a>(
    candidates: impl Iterator<Item = (usize, ChunkKey)> + 'a,
    codes: &'a [T],
    width: usize,
    score: impl Fn(usize, &[T]) -> f32 + 'a,
) -> impl Iterator<Item = ((usize, ChunkKey), f32)> + 'a {
    let mut candidates = candidates;
    let batches = std::iter::from_fn(move || {
        let batch: Vec<(usize, ChunkKey)> = candidates.by_ref().take(GATHER).collect();
        (!batch.is_empty()).then_some(batch)
    });
    batches.flat_map(move |batch| {
        let mut copied = Vec::with_capacity(batch.len() * width);
        for (slot, _) in &batch {
            copied.extend_from_slice(&codes[slot * width..(slot + 1) * width]);
        }
        let scores: Vec<f32> = batch
            .iter()
            .zip(copied.chunks_exact(width))
            .map(|((slot, _), code)| score(*slot, code))
            .collect();
        batch.into_iter().zip(scores)
    })
}

/// The best `k` of `scored`, best first; ties broken by key, so the same state always gives
/// the same pool. Holds at most `2k` at once: a scan of a million vectors allocates no more
/// than its answer.
fn best<K: Ord + Copy>(scored: impl Iterator<Item = (K, f32)>, k: usize) -> Vec<(K, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let order = |a: &(K, f32), b: &(K, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut kept: Vec<(K, f32)> = Vec::with_capacity(2 * k);
    // Once `k` are known, a candidate ranking below the worst of them is not kept.
    let mut floor: Option<(K, f32)> = None;
    for candidate in scored {
        if floor.is_some_and(|f| order(&candidate, &f).is_gt()) {
            continue;
        }
        if kept.len() == 2 * k {
            kept.select_nth_unstable_by(k - 1, order);
            kept.truncate(k);
            floor = kept.last().copied();
            if floor.is_some_and(|f| order(&candidate, &f).is_gt()) {
                continue;
            }
        }
        kept.push(candidate);
    }
    if kept.len() > k {
        kept.select_nth_unstable_by(k - 1, order);
        kept.truncate(k);
    }
    kept.sort_by(order);
    kept
}

impl Int8VectorIndex {
    /// [`Vectors::search`] (or, without `graph_allowed`, [`Vectors::search_exact`]) on the
    /// blocking pool.
    async fn scan(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
        graph_allowed: bool,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        let inner = self.inner.clone();
        let (database, filter) = (database.clone(), filter.clone());
        blocking(move || {
            let accept = |collection: &str, kind: ItemKind| filter.accepts(collection, kind);
            Ok(inner.search_with(
                &database,
                &query,
                k,
                &accept,
                only.as_deref(),
                graph_allowed,
            ))
        })
        .await
    }

    pub fn new(dimension: usize) -> Self {
        Self {
            inner: Arc::new(Vectors::new(dimension)),
        }
    }

    pub fn with_options(dimension: usize, options: AnnOptions) -> Self {
        Self {
            inner: Arc::new(Vectors::with_options(dimension, options)),
        }
    }
}

#[async_trait]
impl VectorIndex for Int8VectorIndex {
    async fn apply(&self, changes: Arc<ChunkChanges>) -> IndexResult<()> {
        let inner = self.inner.clone();
        blocking(move || {
            inner.apply(&changes);
            Ok(())
        })
        .await
    }

    async fn clear(&self) -> IndexResult<()> {
        let segments = &self.inner.segments;
        segments
            .rebuilding
            .store(true, std::sync::atomic::Ordering::Release);
        segments.write().clear();
        Ok(())
    }

    async fn nearest(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        self.scan(database, query, k, filter, only, true).await
    }

    async fn nearest_exact(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        self.scan(database, query, k, filter, only, false).await
    }

    /// Inline: a few thousand dot products at most (a query's candidates).
    async fn similarities(
        &self,
        database: &DatabaseId,
        query: &[f32],
        keys: &[ChunkKey],
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        Ok(self.inner.similarities(database, query, keys))
    }

    async fn rebuilt(&self) -> IndexResult<()> {
        let inner = self.inner.clone();
        blocking(move || {
            inner.rebuilt();
            Ok(())
        })
        .await
    }

    async fn count(&self, database: &DatabaseId) -> IndexResult<usize> {
        Ok(self.inner.len(database))
    }

    async fn settled(&self, database: &DatabaseId) -> IndexResult<bool> {
        Ok(
            self.inner.len(database) < self.inner.segments.options.min_vectors
                || self.inner.graph_ready(database),
        )
    }
}

impl Segments {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<DatabaseId, Segment>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<DatabaseId, Segment>> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// One round of graph upkeep over every database; true when work is left.
    pub(crate) fn build_round(&self) -> bool {
        let databases: Vec<DatabaseId> = self.read().keys().cloned().collect();
        let mut busy = false;
        for database in databases {
            busy |= self.build_for(&database);
        }
        busy
    }

    /// Creates, drops or advances one database's graph; true when work is left.
    fn build_for(&self, database: &DatabaseId) -> bool {
        let dimension = self.dimension;
        // Create or drop it; take the removals due.
        let (graph, stale) = {
            let mut map = self.write();
            let Some(segment) = map.get_mut(database) else {
                return false;
            };
            let len = segment.keys.len();
            let hollow = segment
                .graph
                .as_ref()
                .is_some_and(|g| segment.stale.len() > g.built_from.max(len) / 4);
            if segment.graph.is_some() && (len < self.options.min_vectors / 2 || hollow) {
                segment.graph = None;
                segment.unindexed.clear();
                segment.stale.clear();
                self.forget_saved(database);
            }
            if segment.graph.is_none() {
                if len < self.options.min_vectors {
                    return false;
                }
                let saved = self
                    .options
                    .file(database.as_str())
                    .filter(|file| !segment.load_tried && file.exists());
                if let Some(file) = saved {
                    if self.rebuilding.load(std::sync::atomic::Ordering::Acquire) {
                        return false;
                    }
                    segment.load_tried = true;
                    drop(map);
                    self.load_graph(database, &file);
                    return true;
                }
                let Some(graph) = Graph::new(dimension, &self.options, len) else {
                    return false;
                };
                tracing::info!(database = %database, vectors = len, "building the vector graph");
                segment.version += 1;
                let version = segment.version;
                segment.unindexed = segment
                    .keys
                    .iter()
                    .map(|k| {
                        (
                            *k,
                            Pending {
                                version,
                                failed: false,
                            },
                        )
                    })
                    .collect();
                segment.graph = Some(Arc::new(graph));
            }
            let Some(graph) = segment.graph.clone() else {
                return false;
            };
            (graph, std::mem::take(&mut segment.stale))
        };
        if !stale.is_empty() {
            graph.remove(stale.iter().map(|k| k.0 as u64));
        }
        // Copy a batch of vectors the graph lacks, add them outside the lock.
        let (keys, versions, codes) = {
            let map = self.read();
            let Some(segment) = map.get(database) else {
                return false;
            };
            let mut keys = Vec::new();
            let mut versions = Vec::new();
            let mut codes = Vec::new();
            for (key, pending) in segment.unindexed.iter() {
                if keys.len() == GRAPH_BATCH {
                    break;
                }
                if pending.failed || segment.stale.contains(key) {
                    continue;
                }
                if let Some(slot) = segment.slots.get(*key) {
                    keys.push(key.0 as u64);
                    versions.push(pending.version);
                    codes.extend_from_slice(segment.code(slot, dimension));
                }
            }
            (keys, versions, codes)
        };
        if keys.is_empty() {
            // Current: saved now and then, so a restart need not build it again.
            if let Some(file) = self.options.file(database.as_str()) {
                graph.save_if_due(&file);
            }
            return false;
        }
        let failed: HashSet<u64> = graph
            .add(&keys, &codes, dimension, self.options.build_threads)
            .into_iter()
            .collect();
        let mut map = self.write();
        let Some(segment) = map.get_mut(database) else {
            return false;
        };
        if !segment
            .graph
            .as_ref()
            .is_some_and(|g| Arc::ptr_eq(g, &graph))
        {
            return true;
        }
        for (key, version) in keys.iter().zip(versions) {
            let chunk = ChunkKey(*key as i64);
            let current = segment.unindexed.get(&chunk).map(|p| p.version) == Some(version);
            match (current, failed.contains(key)) {
                (true, false) => {
                    segment.unindexed.remove(&chunk);
                }
                (true, true) => {
                    if let Some(p) = segment.unindexed.get_mut(&chunk) {
                        p.failed = true;
                    }
                }
                // Replaced or removed while it was added: the graph's copy goes.
                (false, false) => {
                    segment.stale.insert(chunk);
                }
                (false, true) => {}
            }
        }
        let left = segment.unindexed.values().filter(|p| !p.failed).count();
        if left == 0 {
            tracing::info!(
                database = %database,
                vectors = segment.keys.len(),
                seconds = graph.started.elapsed().as_secs_f64(),
                "vector graph current"
            );
        } else if left % (GRAPH_BATCH * 25) < GRAPH_BATCH {
            tracing::info!(database = %database, left, "building the vector graph");
        }
        left > 0 || !segment.stale.is_empty()
    }
}

impl Segments {
    /// Loads a database's saved graph and keeps it when it fits the segment: every vector the
    /// graph holds in the segment's current code is served by it, the others are added again
    /// (and the graph's copies of changed ones removed first). A graph holding more than a
    /// quarter of keys the segment lacks, or that does not load, is dropped (and its file).
    fn load_graph(&self, database: &DatabaseId, file: &std::path::Path) {
        let dimension = self.dimension;
        let Some(graph) = Graph::load(dimension, &self.options, file) else {
            self.forget_saved(database);
            return;
        };
        let mut map = self.write();
        let Some(segment) = map.get_mut(database) else {
            return;
        };
        if segment.graph.is_some() {
            return;
        }
        segment.version += 1;
        let version = segment.version;
        let (mut unindexed, mut stale) = (HashMap::new(), HashSet::new());
        let mut copy = vec![0i8; dimension];
        let mut held = 0usize;
        for (slot, key) in segment.keys.iter().enumerate() {
            if graph.code(key.0 as u64, &mut copy) {
                if copy == segment.code(slot, dimension) {
                    held += 1;
                    continue;
                }
                stale.insert(*key);
            }
            unindexed.insert(
                *key,
                Pending {
                    version,
                    failed: false,
                },
            );
        }
        let foreign = graph.size().saturating_sub(held + stale.len());
        if foreign > graph.size() / 4 {
            tracing::info!(database = %database, foreign, "a saved vector graph no longer fits: building again");
            drop(map);
            self.forget_saved(database);
            return;
        }
        tracing::info!(
            database = %database,
            held,
            lacking = unindexed.len(),
            "vector graph loaded"
        );
        self.graph_loaded
            .fetch_add(held as u64, std::sync::atomic::Ordering::Relaxed);
        segment.unindexed = unindexed;
        segment.stale = stale;
        segment.graph = Some(Arc::new(graph));
    }

    /// Deletes a database's saved graph, if any.
    fn forget_saved(&self, database: &DatabaseId) {
        if let Some(file) = self.options.file(database.as_str()) {
            match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(error = %e, path = %file.display(), "a saved vector graph could not be deleted");
                }
                _ => {}
            }
        }
    }

    /// Deletes the saved graphs of databases the segments do not hold (after a rebuild from
    /// the store, they are the live databases with vectors).
    fn sweep_saved(&self) {
        let Some(directory) = self.options.directory.as_ref() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(directory) else {
            return;
        };
        let live: HashSet<String> = self.read().keys().map(|d| d.as_str().to_owned()).collect();
        for entry in entries.flatten() {
            let path = entry.path();
            let ours = path
                .extension()
                .is_some_and(|e| e == crate::ann::GRAPH_EXTENSION || e == "saving");
            let owner = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
            if ours && owner.is_some_and(|o| !live.contains(&o)) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

impl Vectors {
    pub fn new(dimension: usize) -> Self {
        Self::with_options(dimension, AnnOptions::default())
    }

    pub fn with_options(dimension: usize, options: AnnOptions) -> Self {
        let wake = Arc::new(Wake::default());
        let segments = Arc::new(Segments {
            dimension,
            options,
            map: RwLock::new(HashMap::new()),
            wake: wake.clone(),
            graph_searches: std::sync::atomic::AtomicU64::new(0),
            graph_loaded: std::sync::atomic::AtomicU64::new(0),
            rebuilding: std::sync::atomic::AtomicBool::new(false),
        });
        spawn_builder(Arc::downgrade(&segments), wake);
        Self { segments }
    }

    /// Applies a page of the feed: removals, then the current rows, then gone databases.
    fn apply(&self, changes: &ChunkChanges) {
        let dimension = self.segments.dimension;
        {
            let mut segments = self.segments.write();
            for (database, key) in &changes.removed {
                if let Some(segment) = segments.get_mut(database) {
                    segment.remove(*key, dimension);
                }
            }
            for chunk in &changes.current {
                if chunk.embedding.len() != dimension {
                    continue;
                }
                let segment = segments.entry(chunk.database_id.clone()).or_default();
                segment.put(
                    chunk.chunk_key,
                    chunk.collection.as_str(),
                    chunk.kind,
                    &chunk.embedding,
                    dimension,
                );
            }
            for gone in &changes.gone {
                segments.remove(gone);
            }
        }
        for gone in &changes.gone {
            self.segments.forget_saved(gone);
        }
        self.segments.wake.notify();
    }

    /// Adds (or replaces) vectors of a database. Vectors of another dimension are skipped.
    pub fn insert(&self, database: &DatabaseId, entries: impl IntoIterator<Item = VectorEntry>) {
        let dimension = self.segments.dimension;
        {
            let mut segments = self.segments.write();
            let segment = segments.entry(database.clone()).or_default();
            for entry in entries {
                if entry.vector.len() == dimension {
                    segment.put(
                        entry.chunk_key,
                        &entry.collection,
                        entry.kind,
                        &entry.vector,
                        dimension,
                    );
                }
            }
        }
        self.segments.wake.notify();
    }

    /// Vectors that saved graphs held in their current version when loaded (not added again).
    pub fn graph_loaded(&self) -> u64 {
        self.segments
            .graph_loaded
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// After a rebuild from the store: deletes the saved graphs of databases this index does
    /// not hold, and lets the builder load the others (see [`VectorIndex::rebuilt`]).
    pub fn rebuilt(&self) {
        self.segments.sweep_saved();
        self.segments
            .rebuilding
            .store(false, std::sync::atomic::Ordering::Release);
        self.segments.wake.notify();
    }

    /// Vectors held for a database.
    pub fn len(&self, database: &DatabaseId) -> usize {
        self.segments
            .read()
            .get(database)
            .map_or(0, |s| s.keys.len())
    }

    pub fn is_empty(&self, database: &DatabaseId) -> bool {
        self.len(database) == 0
    }

    /// Fixes every current graph's search breadth (efSearch) whatever its size, for
    /// measurements; graphs built later take the configured one, scaled to their size.
    pub fn set_graph_breadth(&self, breadth: usize) {
        for segment in self.segments.read().values() {
            if let Some(graph) = &segment.graph {
                graph.set_breadth(breadth);
            }
        }
    }

    /// Searches answered through a graph so far.
    pub fn graph_searches(&self) -> u64 {
        self.segments
            .graph_searches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a database's graph holds every vector it can (searches then use it).
    pub fn graph_ready(&self, database: &DatabaseId) -> bool {
        self.segments.read().get(database).is_some_and(|s| {
            s.graph.is_some() && s.stale.is_empty() && s.unindexed.values().all(|p| p.failed)
        })
    }

    /// The `k` nearest chunk keys of a database by cosine (vectors are unit length), among
    /// those whose collection and kind pass `accept` and, when `only` is given, whose key it
    /// holds. Best first. Through the graph when the database has one that is nearly current
    /// and the filter passes enough vectors; by the exact scan otherwise.
    pub fn search(
        &self,
        database: &DatabaseId,
        query: &[f32],
        k: usize,
        accept: &dyn Fn(&str, ItemKind) -> bool,
        only: Option<&Keys>,
    ) -> Vec<(ChunkKey, f32)> {
        self.search_with(database, query, k, accept, only, true)
    }

    /// The cosine of `query` (not quantised) with each key's code; keys the database lacks are
    /// left out.
    pub fn similarities(
        &self,
        database: &DatabaseId,
        query: &[f32],
        keys: &[ChunkKey],
    ) -> Vec<(ChunkKey, f32)> {
        let dimension = self.segments.dimension;
        if query.len() != dimension {
            return Vec::new();
        }
        let segments = self.segments.read();
        let Some(segment) = segments.get(database) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|key| {
                let slot = segment.slots.get(*key)?;
                let dot: f32 = query
                    .iter()
                    .zip(segment.code(slot, dimension))
                    .map(|(q, c)| q * f32::from(*c))
                    .sum();
                Some((*key, dot * segment.scales[slot]))
            })
            .collect()
    }

    /// [`Self::search`] by the exact scan alone (the reference of recall measurements).
    pub fn search_exact(
        &self,
        database: &DatabaseId,
        query: &[f32],
        k: usize,
        accept: &dyn Fn(&str, ItemKind) -> bool,
        only: Option<&Keys>,
    ) -> Vec<(ChunkKey, f32)> {
        self.search_with(database, query, k, accept, only, false)
    }

    fn search_with(
        &self,
        database: &DatabaseId,
        query: &[f32],
        k: usize,
        accept: &dyn Fn(&str, ItemKind) -> bool,
        only: Option<&Keys>,
        graph_allowed: bool,
    ) -> Vec<(ChunkKey, f32)> {
        let dimension = self.segments.dimension;
        if query.len() != dimension || k == 0 {
            return Vec::new();
        }
        let segments = self.segments.read();
        let Some(segment) = segments.get(database) else {
            return Vec::new();
        };
        let allowed: Vec<bool> = segment
            .collections
            .iter()
            .flat_map(|c| [ItemKind::Knowledge, ItemKind::Memory].map(|kind| accept(c, kind)))
            .collect();
        // Where every collection and kind passes, no slot's are read (a read of memory each).
        let every = allowed.iter().all(|a| *a);
        let passes_meta = |slot: usize| {
            if every {
                return true;
            }
            let (collection, kind) = segment.meta[slot];
            allowed[collection as usize * 2 + kind_bit(kind)]
        };
        let mut code = Vec::with_capacity(dimension);
        let query_scale = quantize(query, &mut code);
        let passing = allowed
            .iter()
            .zip(&segment.counts)
            .filter(|(a, _)| **a)
            .map(|(_, n)| *n)
            .sum::<usize>()
            .min(only.map_or(usize::MAX, Keys::len));
        let graph = segment.graph.as_ref().filter(|_| {
            graph_allowed
                && segment.unindexed.len() <= UNINDEXED_MAX
                && passing >= self.segments.options.min_vectors / 2
                && passing * WALK_FIRST >= segment.keys.len()
        });
        let inside = passing * GRAPH_SELECTIVITY >= segment.keys.len();
        if let Some(graph) = graph {
            let keep = |key: u64, keys: Option<&Keys>| {
                let chunk = ChunkKey(key as i64);
                segment.slots.get(chunk).is_some_and(|slot| {
                    passes_meta(slot)
                        && keys.is_none_or(|keys| keys.contains(chunk))
                        && !segment.unindexed.contains_key(&chunk)
                })
            };
            let wanted = k.min(passing.saturating_sub(segment.unindexed.len()));
            // A filter's keys are applied after a walk without them first, asked for enough
            // answers that `k` pass at the filter's share and half again: the walk costs what an
            // unfiltered one does (with the keys inside, it visits about as many more nodes as
            // the filter drops: 10.5 ms against 5.7 at half of a million vectors), and the
            // passing answers are the filter's nearest, as every passing vector nearer than the
            // last answer is an answer. Where fewer pass (the filter's share near the query is
            // smaller than overall), the walk with the keys inside follows where the filter is
            // broad enough for it, the scan otherwise. A walk keeps at least its breadth of
            // candidates, so where `k` at the share is more than the breadth (a small graph's is
            // small) and the filter is broad, the walk with the keys inside costs less.
            let found = match only {
                Some(keys) => {
                    let at_share = k.saturating_mul(segment.keys.len()) / keys.len().max(1);
                    let ask = at_share.saturating_mul(3) / 2 + 16;
                    let first = !inside || k.saturating_mul(3) / 2 + 16 <= graph.search_breadth();
                    let mut found = Vec::new();
                    if first {
                        found = graph.search(&code, ask, |key| keep(key, None));
                        found.retain(|key| keys.contains(ChunkKey(*key as i64)));
                    }
                    if found.len() < wanted && inside {
                        found = graph.search(&code, k, |key| keep(key, Some(keys)));
                    }
                    found
                }
                None if inside => graph.search(&code, k, |key| keep(key, None)),
                None => Vec::new(),
            };
            if found.len() >= wanted {
                // Rescored exactly, beside an exact scan of what the graph lacks.
                let from_graph = found.into_iter().filter_map(|key| {
                    let chunk = ChunkKey(key as i64);
                    let slot = segment.slots.get(chunk)?;
                    Some((chunk, segment.score(slot, &code, query_scale)))
                });
                let lacking = segment.unindexed.keys().filter_map(|chunk| {
                    let slot = segment.slots.get(*chunk)?;
                    (passes_meta(slot) && only.is_none_or(|keys| keys.contains(*chunk)))
                        .then(|| (*chunk, segment.score(slot, &code, query_scale)))
                });
                self.segments
                    .graph_searches
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return best(from_graph.chain(lacking), k);
            }
        }
        // The scan: over the keys of `only` when they are fewer than the segment's; through
        // the sign codes first unless it is the exact reference.
        let coarse = graph_allowed;
        match only {
            Some(keys) if keys.len() < segment.keys.len() => {
                // In two passes of independent reads the processor overlaps: every key's slot,
                // then the codes in slot order (one key at a time waits for its lookup, then for
                // its code: 330 ns a key among a million vectors, 210 in passes).
                let mut slots: Vec<(usize, ChunkKey)> = keys
                    .iter()
                    .filter_map(|chunk| segment.slots.get(chunk).map(|slot| (slot, chunk)))
                    .filter(|(slot, _)| passes_meta(*slot))
                    .collect();
                // Nearly in order already (keys arrive in order): the sort finds the runs.
                slots.sort_unstable_by_key(|s| s.0);
                let count = slots.len();
                segment.scan(slots.into_iter(), count, &code, query_scale, k, coarse)
            }
            _ => segment.scan(
                segment
                    .keys
                    .iter()
                    .copied()
                    .enumerate()
                    .filter(|(slot, key)| {
                        passes_meta(*slot) && only.is_none_or(|keys| keys.contains(*key))
                    }),
                passing,
                &code,
                query_scale,
                k,
                coarse,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dimension: usize) -> Vec<f32> {
        // A small deterministic generator: no test dependency needed.
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut v: Vec<f32> = (0..dimension)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    fn entry(key: i64, collection: &str, kind: ItemKind, dimension: usize) -> VectorEntry {
        VectorEntry {
            chunk_key: ChunkKey(key),
            collection: collection.into(),
            kind,
            vector: unit(key as u64, dimension),
        }
    }

    fn db(name: &str) -> DatabaseId {
        DatabaseId::from_trusted(name)
    }

    /// Unit vectors as a model's embeddings lie: all sharing one direction (so raw signs agree
    /// on many dimensions and only signs around their mean tell them apart), in topics of about
    /// a hundred, each vector its topic's centre plus noise.
    fn embedding(seed: u64, dimension: usize) -> Vec<f32> {
        let common = unit(u64::MAX, dimension);
        let topic = unit(u64::MAX - 1 - seed % 300, dimension);
        let noise = unit(seed, dimension);
        let mut v: Vec<f32> = (0..dimension)
            .map(|i| 0.6 * common[i] + 0.6 * topic[i] + 0.5 * noise[i])
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    /// A scan past [`COARSE_MIN`] reads sign codes first and scores only its shortlist exactly:
    /// its best ten are the exact scan's (recall@10 at least 0.97, scores exact), filtered or
    /// not, and after half the vectors are removed (slots moved, their codes with them).
    #[test]
    fn a_large_scan_through_sign_codes_finds_what_the_exact_scan_finds() {
        let dimension = 384;
        let index = Vectors::with_options(
            dimension,
            AnnOptions {
                min_vectors: usize::MAX,
                ..AnnOptions::default()
            },
        );
        let n = 30_000i64;
        index.insert(
            &db("a"),
            (0..n).map(|k| VectorEntry {
                chunk_key: ChunkKey(k),
                collection: "c".into(),
                kind: ItemKind::Knowledge,
                vector: embedding(k as u64, dimension),
            }),
        );
        let recall = |only: Option<&Keys>, removed: &dyn Fn(i64) -> bool| {
            let mut found = 0;
            for probe in 0..40u64 {
                let query = embedding(1_000_000 + probe, dimension);
                let exact = index.search_exact(&db("a"), &query, 10, &|_, _| true, only);
                let hits = index.search(&db("a"), &query, 10, &|_, _| true, only);
                assert_eq!(hits.len(), 10);
                for (key, score) in &hits {
                    assert!(!removed(key.0), "{key:?} was removed");
                    assert!(only.is_none_or(|o| o.contains(*key)));
                    let truth = index.similarities(&db("a"), &query, &[*key]);
                    assert!((truth[0].1 - score).abs() < 0.02, "the code's score");
                }
                let same = hits.iter().filter(|h| exact.contains(h)).count();
                found += same;
                // What both found scores alike (both score codes exactly).
                assert_eq!(
                    same,
                    hits.iter()
                        .filter(|h| exact.iter().any(|e| e.0 == h.0))
                        .count()
                );
            }
            found as f64 / 400.0
        };
        let none = |_: i64| false;
        let all = recall(None, &none);
        let half: Keys = (0..n).filter(|k| k % 2 == 0).map(ChunkKey).collect();
        let filtered = recall(Some(&half), &none);
        assert!(all >= 0.97 && filtered >= 0.97, "recall {all} / {filtered}");
        let removed = |k: i64| k % 3 == 0;
        if let Some(segment) = index.segments.write().get_mut(&db("a")) {
            for k in (0..n).filter(|k| removed(*k)) {
                segment.remove(ChunkKey(k), dimension);
            }
        }
        let after = recall(None, &removed);
        assert!(after >= 0.97, "recall after removals {after}");
        // The centre was taken from the first vectors and the codes follow it.
        assert!(index.segments.read()[&db("a")].center.is_some());
    }

    #[test]
    fn the_exact_neighbour_ranks_first_and_scores_match_f32_closely() {
        let index = Vectors::new(64);
        index.insert(
            &db("a"),
            (0..500).map(|k| entry(k, "c", ItemKind::Knowledge, 64)),
        );
        for probe in [3, 77, 499] {
            let query = unit(probe as u64, 64);
            let hits = index.search(&db("a"), &query, 5, &|_, _| true, None);
            assert_eq!(hits[0].0, ChunkKey(probe));
            assert!((hits[0].1 - 1.0).abs() < 0.02, "{}", hits[0].1);
            assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        }
    }

    /// A candidate's cosine from its code is within quantisation error of the f32 cosine; keys
    /// of another database or without a vector are left out.
    #[test]
    fn similarities_match_f32_cosines_and_leave_out_unknown_keys() {
        let index = Vectors::new(64);
        index.insert(
            &db("a"),
            (0..100).map(|k| entry(k, "c", ItemKind::Knowledge, 64)),
        );
        index.insert(&db("b"), [entry(500, "c", ItemKind::Knowledge, 64)]);
        let query = unit(1_000, 64);
        let keys: Vec<ChunkKey> = [3, 50, 99, 500, 7_000].map(ChunkKey).to_vec();
        let found = index.similarities(&db("a"), &query, &keys);
        assert_eq!(
            found.iter().map(|f| f.0).collect::<Vec<_>>(),
            [3, 50, 99].map(ChunkKey)
        );
        for (key, cosine) in found {
            let exact: f32 = query
                .iter()
                .zip(unit(key.0 as u64, 64))
                .map(|(a, b)| a * b)
                .sum();
            assert!(
                (cosine - exact).abs() < 0.01,
                "{key:?}: {cosine} against {exact}"
            );
        }
        assert!(index.similarities(&db("a"), &query[..8], &keys).is_empty());
    }

    #[test]
    fn filters_scope_and_removal_hold() {
        let index = Vectors::new(16);
        index.insert(
            &db("a"),
            [
                entry(1, "x", ItemKind::Knowledge, 16),
                entry(2, "y", ItemKind::Knowledge, 16),
                entry(3, "x", ItemKind::Memory, 16),
            ],
        );
        index.insert(&db("b"), [entry(4, "x", ItemKind::Knowledge, 16)]);
        let query = unit(4, 16);
        let only_x_knowledge = |c: &str, k: ItemKind| c == "x" && k == ItemKind::Knowledge;
        let hits: Vec<i64> = index
            .search(&db("a"), &query, 10, &only_x_knowledge, None)
            .iter()
            .map(|h| h.0 .0)
            .collect();
        assert_eq!(
            hits,
            [1],
            "another database's vectors and other collections or kinds never appear"
        );
        index.apply(&ChunkChanges {
            removed: vec![
                (db("a"), ChunkKey(1)),
                (db("a"), ChunkKey(99)),
                (db("b"), ChunkKey(3)),
            ],
            ..ChunkChanges::default()
        });
        assert!(index
            .search(&db("a"), &query, 10, &only_x_knowledge, None)
            .is_empty());
        assert_eq!(index.len(&db("a")), 2);
        let only_three: Keys = [ChunkKey(3)].into_iter().collect();
        let restricted: Vec<i64> = index
            .search(&db("a"), &query, 10, &|_, _| true, Some(&only_three))
            .iter()
            .map(|h| h.0 .0)
            .collect();
        assert_eq!(restricted, [3], "a key set restricts the scan");
        // Removing from the middle keeps the others findable.
        let hits: Vec<i64> = index
            .search(&db("a"), &unit(3, 16), 1, &|_, _| true, None)
            .iter()
            .map(|h| h.0 .0)
            .collect();
        assert_eq!(hits, [3]);
        index.insert(&db("a"), [entry(3, "x", ItemKind::Memory, 16)]);
        assert_eq!(index.len(&db("a")), 2, "re-inserting a key replaces it");
        index.apply(&ChunkChanges {
            gone: vec![db("a")],
            ..ChunkChanges::default()
        });
        assert!(index.is_empty(&db("a")));
        assert_eq!(index.len(&db("b")), 1);
    }

    /// A point of one of 40 clusters: its centre plus noise, unit length (real embeddings
    /// cluster by topic; uniform noise would make every neighbour equally far).
    fn clustered(seed: u64, dimension: usize) -> Vec<f32> {
        let centre = unit(1_000_000 + seed % 40, dimension);
        let noise = unit(seed, dimension);
        let mut v: Vec<f32> = centre
            .iter()
            .zip(&noise)
            .map(|(c, n)| c + 0.6 * n)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    /// Built by three threads whatever the machine's cores: the graph tests check additions
    /// made at once.
    fn graph_index(dimension: usize, min_vectors: usize) -> Vectors {
        Vectors::with_options(
            dimension,
            AnnOptions {
                min_vectors,
                build_threads: 3,
                ..AnnOptions::default()
            },
        )
    }

    fn wait_for_graph(index: &Vectors, database: &DatabaseId) {
        let started = std::time::Instant::now();
        while !index.graph_ready(database) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the graph was not built"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// An index whose database `a` holds `n` clustered knowledge vectors, in the collection
    /// `collection_of` names for each key, with its graph built.
    fn graphed(
        dimension: usize,
        min_vectors: usize,
        n: i64,
        collection_of: impl Fn(i64) -> &'static str,
    ) -> (Vectors, DatabaseId) {
        let index = graph_index(dimension, min_vectors);
        let a = db("a");
        index.insert(
            &a,
            (0..n).map(|k| VectorEntry {
                chunk_key: ChunkKey(k),
                collection: collection_of(k).into(),
                kind: ItemKind::Knowledge,
                vector: clustered(k as u64, dimension),
            }),
        );
        wait_for_graph(&index, &a);
        (index, a)
    }

    fn keys(hits: &[(ChunkKey, f32)]) -> Vec<i64> {
        hits.iter().map(|h| h.0 .0).collect()
    }

    #[test]
    fn a_large_database_is_searched_through_its_graph_at_the_exact_scans_recall() {
        const DIM: usize = 48;
        let (index, a) = graphed(DIM, 1_000, 4_000, |k| ["even", "odd"][(k % 2) as usize]);
        let all = |_: &str, _: ItemKind| true;
        let even = |c: &str, _: ItemKind| c == "even";
        let (mut found, mut asked) = (0, 0);
        for q in 0..50u64 {
            let query = clustered(50_000 + q, DIM);
            for accept in [&all as &dyn Fn(&str, ItemKind) -> bool, &even] {
                let through_graph = index.search(&a, &query, 20, accept, None);
                let exact = index.search_exact(&a, &query, 20, accept, None);
                assert_eq!(through_graph.len(), 20);
                let exact_keys: HashSet<ChunkKey> = exact.iter().map(|h| h.0).collect();
                found += through_graph
                    .iter()
                    .filter(|h| exact_keys.contains(&h.0))
                    .count();
                asked += exact.len();
                // Scores are the exact scan's, and a broad filter holds.
                let exact_all = index.search_exact(&a, &query, 4_000, &all, None);
                for (key, score) in &through_graph {
                    let truth = exact_all.iter().find(|h| h.0 == *key).unwrap().1;
                    assert!((score - truth).abs() < 1e-6);
                    assert!(key.0 % 2 == 0 || accept("odd", ItemKind::Knowledge));
                }
            }
        }
        assert_eq!(
            index.graph_searches(),
            100,
            "every search went through the graph"
        );
        let recall = found as f64 / asked as f64;
        assert!(recall >= 0.97, "recall@20 against the exact scan: {recall}");
        // Keys passing a third: the walk without them, then the passing answers; and a third
        // the walk finds none of (the query's farthest), so the walk with the keys follows.
        // An eighth (below the share the walk with keys inside takes): the walk without them,
        // or where it finds too few, the scan.
        let third: Keys = (0..4_000).filter(|k| k % 3 == 0).map(ChunkKey).collect();
        let eighth: Keys = (0..4_000i64)
            .filter(|k| (k.wrapping_mul(0x9E37_79B9) >> 8) % 8 == 0)
            .map(ChunkKey)
            .collect();
        // Five of the forty clusters: most queries' walks find too few of them.
        let clusters: Keys = (0..4_000).filter(|k| k % 8 == 0).map(ChunkKey).collect();
        let (mut found, mut asked) = (0, 0);
        for q in 0..50u64 {
            let query = clustered(60_000 + q, DIM);
            let exact_all = index.search_exact(&a, &query, 4_000, &all, None);
            let farthest: Keys = exact_all[2_667..].iter().map(|h| h.0).collect();
            let farthest_eighth: Keys = exact_all[3_500..].iter().map(|h| h.0).collect();
            for only in [&third, &farthest, &eighth, &clusters, &farthest_eighth] {
                let through_graph = index.search(&a, &query, 20, &all, Some(only));
                let exact = index.search_exact(&a, &query, 20, &all, Some(only));
                assert_eq!(through_graph.len(), 20);
                assert!(through_graph.iter().all(|h| only.contains(h.0)));
                found += through_graph.iter().filter(|h| exact.contains(h)).count();
                asked += exact.len();
            }
        }
        assert!(index.graph_searches() >= 250, "through the graph");
        let recall = found as f64 / asked as f64;
        assert!(
            recall >= 0.97,
            "filtered recall@20 against the exact scan: {recall}"
        );
    }

    #[test]
    fn a_saved_graph_serves_the_restart_and_is_trusted_for_nothing() {
        const DIM: usize = 32;
        let dir = tempfile::tempdir().unwrap();
        let options = AnnOptions {
            min_vectors: 500,
            directory: Some(dir.path().to_path_buf()),
            ..AnnOptions::default()
        };
        let a = db("a");
        let entry = |k: i64, seed: u64| VectorEntry {
            chunk_key: ChunkKey(k),
            collection: "c".into(),
            kind: ItemKind::Knowledge,
            vector: clustered(seed, DIM),
        };
        let saved = dir.path().join("a.usearch");
        let wait_for = |what: &dyn Fn() -> bool| {
            let started = std::time::Instant::now();
            while !what() {
                assert!(started.elapsed() < std::time::Duration::from_secs(60));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        };
        {
            let first = Vectors::with_options(DIM, options.clone());
            first.insert(&a, (0..1_500).map(|k| entry(k, k as u64)));
            wait_for_graph(&first, &a);
            wait_for(&|| saved.exists());
            assert_eq!(first.graph_loaded(), 0);
        }
        // The restart finds 50 vectors gone, 100 changed and 20 new since the save.
        let changed = |k: i64| 90_000 + k as u64;
        let second = Vectors::with_options(DIM, options.clone());
        second.insert(
            &a,
            (50..1_500)
                .map(|k| entry(k, if k < 150 { changed(k) } else { k as u64 }))
                .chain((2_000..2_020).map(|k| entry(k, k as u64))),
        );
        wait_for_graph(&second, &a);
        assert_eq!(
            second.graph_loaded(),
            1_350,
            "the saved graph serves the vectors it holds as they are, and only those"
        );
        for (k, seed) in [
            (60, changed(60)),
            (149, changed(149)),
            (700, 700),
            (2_005, 2_005),
        ] {
            let hits = second.search(&a, &clustered(seed, DIM), 10, &|_, _| true, None);
            assert_eq!(hits[0].0, ChunkKey(k), "{k} is found by its current vector");
            assert!(
                hits.iter().all(|h| h.0 .0 >= 50),
                "a gone vector is never found"
            );
            let old = second.search(&a, &clustered(k as u64, DIM), 1, &|_, _| true, None);
            assert!(
                k >= 150 || old[0].0 != ChunkKey(k),
                "{k}'s old vector is gone"
            );
        }
        assert!(
            second.graph_searches() >= 8,
            "searches went through the graph"
        );
        // A graph saved in another shape (the defaults changed since) is built again. (In a
        // directory of its own: its builder deletes and saves files while `second` goes on.)
        wait_for(&|| saved.exists());
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::copy(&saved, elsewhere.path().join("a.usearch")).unwrap();
        let reshaped = Vectors::with_options(
            DIM,
            AnnOptions {
                connectivity: options.connectivity + 8,
                directory: Some(elsewhere.path().to_path_buf()),
                ..options.clone()
            },
        );
        reshaped.insert(&a, (0..1_500).map(|k| entry(k, k as u64)));
        wait_for_graph(&reshaped, &a);
        assert_eq!(reshaped.graph_loaded(), 0, "the old shape is not loaded");
        drop(reshaped);

        // A rebuild from the store keeps the saved graphs of live databases only, and a
        // database gone from the store takes its saved graph with it.
        let other = dir.path().join("zz.usearch");
        std::fs::copy(&saved, &other).unwrap();
        second.rebuilt();
        assert!(!other.exists() && saved.exists());
        second.apply(&ChunkChanges {
            gone: vec![a.clone()],
            ..ChunkChanges::default()
        });
        assert!(!saved.exists());
    }

    #[test]
    fn the_graph_never_answers_with_a_removed_or_replaced_vector() {
        const DIM: usize = 32;
        let (index, a) = graphed(DIM, 500, 1_500, |_| "c");
        let entry = |k: i64, seed: u64| VectorEntry {
            chunk_key: ChunkKey(k),
            collection: "c".into(),
            kind: ItemKind::Knowledge,
            vector: clustered(seed, DIM),
        };
        // Changed at once, before the builder has seen the change.
        index.apply(&ChunkChanges {
            removed: (0..100).map(|k| (a.clone(), ChunkKey(k))).collect(),
            ..ChunkChanges::default()
        });
        index.insert(&a, (100..200).map(|k| entry(k, 90_000 + k as u64)));
        let all = |_: &str, _: ItemKind| true;
        index.search(&a, &clustered(1, DIM), 10, &all, None);
        assert_eq!(index.graph_searches(), 1, "the graph serves while it lags");
        for _ in 0..2 {
            for k in 0..200i64 {
                let hits = index.search(&a, &clustered(k as u64, DIM), 10, &all, None);
                assert!(
                    hits.iter().all(|h| h.0 .0 >= 100),
                    "a removed vector was found: {:?}",
                    keys(&hits)
                );
                if k >= 100 {
                    let fresh = index.search(&a, &clustered(90_000 + k as u64, DIM), 1, &all, None);
                    assert_eq!(
                        keys(&fresh),
                        [k],
                        "a replaced vector is found by its new value"
                    );
                    assert!((fresh[0].1 - 1.0).abs() < 0.02);
                }
            }
            wait_for_graph(&index, &a);
        }
        assert_eq!(index.len(&a), 1_400);
    }

    #[test]
    fn a_selective_filter_is_scanned_exactly() {
        const DIM: usize = 32;
        let (index, a) = graphed(
            DIM,
            500,
            2_000,
            |k| if k % 50 == 0 { "rare" } else { "common" },
        );
        let rare = |c: &str, _: ItemKind| c == "rare";
        let few: Keys = (0..30).map(ChunkKey).collect();
        for q in 0..20u64 {
            let query = clustered(70_000 + q, DIM);
            assert_eq!(
                index.search(&a, &query, 10, &rare, None),
                index.search_exact(&a, &query, 10, &rare, None)
            );
            assert_eq!(
                index.search(&a, &query, 10, &|_, _| true, Some(&few)),
                index.search_exact(&a, &query, 10, &|_, _| true, Some(&few))
            );
        }
        assert_eq!(index.graph_searches(), 0);
        index.search(&a, &clustered(1, DIM), 10, &|_, _| true, None);
        assert_eq!(index.graph_searches(), 1, "a broad search uses the graph");
    }

    #[test]
    fn wrong_dimensions_are_ignored() {
        let index = Vectors::new(8);
        index.insert(
            &db("a"),
            [VectorEntry {
                chunk_key: ChunkKey(1),
                collection: "c".into(),
                kind: ItemKind::Knowledge,
                vector: vec![1.0; 3],
            }],
        );
        assert!(index.is_empty(&db("a")));
        assert!(index
            .search(&db("a"), &[1.0; 3], 3, &|_, _| true, None)
            .is_empty());
    }
}
