//! The vector index: every chunk's embedding, int8-quantised (one scale per vector), grouped by
//! database and scanned exactly with an integer dot product (SimSIMD). Fed by the store's chunk
//! change feed like the keyword index; the scan runs on the blocking pool, never on the async
//! runtime (milliseconds of CPU at 100k chunks).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use engram_store::{ChunkChanges, ChunkKey};
use engram_types::{DatabaseId, ItemKind};

use crate::{blocking, IndexFilter, IndexResult};

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
        only: Option<Arc<HashSet<ChunkKey>>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>>;
    /// Vectors held for a database.
    async fn count(&self, database: &DatabaseId) -> IndexResult<usize>;
}

/// One vector to index.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorEntry {
    pub chunk_key: ChunkKey,
    pub collection: String,
    pub kind: ItemKind,
    pub vector: Vec<f32>,
}

/// Every database's vectors, in memory, scanned exactly.
#[derive(Clone)]
pub struct Int8VectorIndex {
    inner: Arc<Vectors>,
}

/// The index proper (synchronous; [`Int8VectorIndex`] runs it on the blocking pool).
pub struct Vectors {
    dimension: usize,
    segments: RwLock<HashMap<DatabaseId, Segment>>,
}

#[derive(Default)]
struct Segment {
    keys: Vec<ChunkKey>,
    slots: HashMap<ChunkKey, usize>,
    /// Per slot: interned collection and kind.
    meta: Vec<(u32, ItemKind)>,
    collections: Vec<String>,
    codes: Vec<i8>,
    scales: Vec<f32>,
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

impl Segment {
    fn intern(&mut self, collection: &str) -> u32 {
        match self.collections.iter().position(|c| c == collection) {
            Some(i) => i as u32,
            None => {
                self.collections.push(collection.to_owned());
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
        let scale = quantize(vector, &mut self.codes);
        self.scales.push(scale);
    }

    fn remove(&mut self, key: ChunkKey, dimension: usize) {
        let Some(slot) = self.slots.remove(&key) else {
            return;
        };
        let last = self.keys.len() - 1;
        if slot != last {
            let moved = self.keys[last];
            self.keys.swap(slot, last);
            self.meta.swap(slot, last);
            self.scales.swap(slot, last);
            let (head, tail) = self.codes.split_at_mut(last * dimension);
            head[slot * dimension..(slot + 1) * dimension].copy_from_slice(&tail[..dimension]);
            self.slots.insert(moved, slot);
        }
        self.keys.pop();
        self.meta.pop();
        self.scales.pop();
        self.codes.truncate(last * dimension);
    }
}

impl Int8VectorIndex {
    pub fn new(dimension: usize) -> Self {
        Self {
            inner: Arc::new(Vectors::new(dimension)),
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
        self.inner
            .segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        Ok(())
    }

    async fn nearest(
        &self,
        database: &DatabaseId,
        query: Arc<[f32]>,
        k: usize,
        filter: &IndexFilter,
        only: Option<Arc<HashSet<ChunkKey>>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        let inner = self.inner.clone();
        let (database, filter) = (database.clone(), filter.clone());
        blocking(move || {
            let accept = |collection: &str, kind: ItemKind| filter.accepts(collection, kind);
            Ok(inner.search(&database, &query, k, &accept, only.as_deref()))
        })
        .await
    }

    async fn count(&self, database: &DatabaseId) -> IndexResult<usize> {
        Ok(self.inner.len(database))
    }
}

impl Vectors {
    pub fn new(dimension: usize) -> Self {
        Self {
            dimension,
            segments: RwLock::new(HashMap::new()),
        }
    }

    /// Applies a page of the feed: removals, then the current rows, then gone databases.
    fn apply(&self, changes: &ChunkChanges) {
        let mut segments = self
            .segments
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for (database, key) in &changes.removed {
            if let Some(segment) = segments.get_mut(database) {
                segment.remove(*key, self.dimension);
            }
        }
        for chunk in &changes.current {
            if chunk.embedding.len() != self.dimension {
                continue;
            }
            let segment = segments.entry(chunk.database_id.clone()).or_default();
            segment.put(
                chunk.chunk_key,
                chunk.collection.as_str(),
                chunk.kind,
                &chunk.embedding,
                self.dimension,
            );
        }
        for gone in &changes.gone {
            segments.remove(gone);
        }
    }

    /// Adds (or replaces) vectors of a database. Vectors of another dimension are skipped.
    pub fn insert(&self, database: &DatabaseId, entries: impl IntoIterator<Item = VectorEntry>) {
        let mut segments = self
            .segments
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let segment = segments.entry(database.clone()).or_default();
        for entry in entries {
            if entry.vector.len() == self.dimension {
                segment.put(
                    entry.chunk_key,
                    &entry.collection,
                    entry.kind,
                    &entry.vector,
                    self.dimension,
                );
            }
        }
    }

    /// Vectors held for a database.
    pub fn len(&self, database: &DatabaseId) -> usize {
        self.segments
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(database)
            .map_or(0, |s| s.keys.len())
    }

    pub fn is_empty(&self, database: &DatabaseId) -> bool {
        self.len(database) == 0
    }

    /// The `k` nearest chunk keys of a database by approximate cosine (vectors are unit
    /// length), among those whose collection and kind pass `accept` and, when `only` is given,
    /// whose key it holds. Best first.
    pub fn search(
        &self,
        database: &DatabaseId,
        query: &[f32],
        k: usize,
        accept: &dyn Fn(&str, ItemKind) -> bool,
        only: Option<&HashSet<ChunkKey>>,
    ) -> Vec<(ChunkKey, f32)> {
        if query.len() != self.dimension || k == 0 {
            return Vec::new();
        }
        let segments = self.segments.read().unwrap_or_else(PoisonError::into_inner);
        let Some(segment) = segments.get(database) else {
            return Vec::new();
        };
        let allowed: Vec<bool> = segment
            .collections
            .iter()
            .flat_map(|c| [ItemKind::Knowledge, ItemKind::Memory].map(|kind| accept(c, kind)))
            .collect();
        let mut code = Vec::with_capacity(self.dimension);
        let query_scale = quantize(query, &mut code);
        let mut scored: Vec<(ChunkKey, f32)> = segment
            .keys
            .iter()
            .enumerate()
            .filter(|(slot, key)| {
                let (collection, kind) = segment.meta[*slot];
                allowed[collection as usize * 2 + usize::from(kind == ItemKind::Memory)]
                    && only.is_none_or(|keys| keys.contains(key))
            })
            .map(|(slot, key)| {
                let codes = &segment.codes[slot * self.dimension..(slot + 1) * self.dimension];
                let score = dot_i8(&code, codes) * query_scale * segment.scales[slot];
                (*key, score)
            })
            .collect();
        let k = k.min(scored.len());
        if k == 0 {
            return Vec::new();
        }
        // Ties broken by key, so the same state always gives the same pool.
        let order =
            |a: &(ChunkKey, f32), b: &(ChunkKey, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        scored.select_nth_unstable_by(k - 1, order);
        scored.truncate(k);
        scored.sort_by(order);
        scored
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
        let only_three: HashSet<ChunkKey> = [ChunkKey(3)].into();
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
