//! The approximate nearest-neighbour graph of a large database's vectors: HNSW over the int8
//! codes (usearch, chosen over hnsw_rs by measurement: at 100k clustered 384-dimension vectors
//! on two cores it built in 14 s against 144 s and answered a top 100 in 0.35 ms against
//! 2.1 ms, recall@100 0.98 for both).
//!
//! The graph is derived from the exact segment ([`crate::vector`]) and never the truth: a
//! builder thread follows the segment, adding the vectors it does not hold yet and removing the
//! ones gone or replaced, while a search reads the graph only for the keys it holds in their
//! current version and scans the rest exactly. Candidates the graph finds are rescored with
//! the segment's own codes, so scores are the exact scan's. A graph is built when a database
//! reaches [`AnnOptions::min_vectors`] (at start, from the segment the feed rebuilt: searches
//! scan exactly until it is built) and rebuilt from scratch when deletions have hollowed it.
//!
//! With [`AnnOptions::directory`], a current graph is saved there (one file per database, at
//! most every [`SAVE_EVERY`]) and a restart loads it instead of building again (1M vectors:
//! seconds instead of minutes). A loaded graph is trusted for nothing: every vector of the
//! segment is compared with the graph's copy, and the graph serves only the keys whose copy is
//! the segment's code; the others are added again, and keys it holds that the segment lacks
//! are never returned (searches keep only keys of the segment).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use crate::vector::Segments;

/// The least time between two saves of a database's graph while it keeps changing (saving 1M
/// vectors writes 1 GB).
pub(crate) const SAVE_EVERY: Duration = Duration::from_secs(600);
/// A graph unchanged for this long since its last change is saved whatever [`SAVE_EVERY`]
/// says: the end of a burst of writes is on disk soon after.
pub(crate) const SAVE_QUIET: Duration = Duration::from_secs(20);

/// Searches through one graph at once; more wait for one to end. usearch gives each search
/// and each addition a context of its own, reserved ahead (by default one per core, so that
/// a search beside the builder's additions failed on two cores and fell back to the exact
/// scan, and an addition beside searches failed and left its vector to the scan for good).
const SEARCH_CONTEXTS: usize = 32;

/// When a database's vectors are searched through a graph, and how it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnOptions {
    /// A database with at least this many vectors gets a graph; below it, the exact scan is
    /// fast enough (about 3 ms at 100k on two cores) and exact.
    pub min_vectors: usize,
    /// Neighbours per node (HNSW's M).
    pub connectivity: usize,
    /// Candidates kept while inserting (efConstruction).
    pub expansion_add: usize,
    /// Threads that add vectors to a graph at once (usearch takes concurrent additions).
    pub build_threads: usize,
    /// Candidates kept while searching a graph of a million vectors or more (efSearch; at
    /// least the `k` asked). A smaller graph keeps proportionally fewer, never below
    /// [`MIN_BREADTH`] (see [`breadth_for`]).
    pub expansion_search: usize,
    /// Where graphs are saved between runs (one file per database); `None`: built again at
    /// every start.
    pub directory: Option<PathBuf>,
}

impl Default for AnnOptions {
    fn default() -> Self {
        Self {
            min_vectors: 50_000,
            // Measured on 1M chunks of `engram bench query`'s vectors (clustered, with real
            // questions as queries; see ARCHITECTURE.md): recall@10 at breadth 1024 was 0.934
            // with M 16 / efConstruction 128, 0.968 with 20/160, 0.979 with 24/192, 0.981
            // with 32/192 (a third more memory), 0.989 with 24/256, which builds 2.5 times
            // as long as 16/128.
            connectivity: 24,
            expansion_add: 256,
            expansion_search: 1024,
            build_threads: default_build_threads(),
            directory: None,
        }
    }
}

/// Every core but one (which is left to queries and ingestion), at least one.
fn default_build_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

impl AnnOptions {
    /// The file a database's graph is saved in, when graphs are saved and the id is a plain
    /// name (ids are generated; anything else is not written to disk).
    pub(crate) fn file(&self, database: &str) -> Option<PathBuf> {
        let plain = !database.is_empty()
            && database
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let directory = self.directory.as_ref().filter(|_| plain)?;
        Some(directory.join(format!("{database}.{GRAPH_EXTENSION}")))
    }
}

/// The extension of saved graph files.
pub(crate) const GRAPH_EXTENSION: &str = "usearch";

/// The least breadth a graph search keeps.
pub(crate) const MIN_BREADTH: usize = 128;

/// The breadth a search of a graph of `vectors` keeps, given the `breadth` asked at a million:
/// proportional to the graph's size between [`MIN_BREADTH`] and `breadth`. A larger graph
/// needs more candidates for the same recall: measured on `engram bench query` (see
/// ARCHITECTURE.md), 100k chunks reach recall@10 0.990 at 128 (0.994 at 1024, 9 ms slower per
/// query), 1M chunks 0.979 at 1024.
pub(crate) fn breadth_for(breadth: usize, vectors: usize) -> usize {
    let scaled = breadth.saturating_mul(vectors) / 1_000_000;
    scaled.clamp(MIN_BREADTH.min(breadth), breadth)
}

/// One database's graph. Searches and additions share the lock (usearch allows them at once);
/// removals and growth take it alone.
pub(crate) struct Graph {
    pub(crate) index: RwLock<usearch::Index>,
    /// The breadth asked at a million vectors (or for every size, once `fixed`). The index's
    /// own breadth is changed only under the write lock (usearch reads it unguarded while
    /// searching): when the graph is made or loaded, before each addition, and when fixed.
    breadth: AtomicUsize,
    fixed: AtomicBool,
    pub(crate) built_from: usize,
    pub(crate) started: Instant,
    /// Changed since it was loaded or last saved.
    changed: AtomicBool,
    /// When it last changed.
    touched: Mutex<Instant>,
    /// When it was last saved.
    saved: Mutex<Option<Instant>>,
    /// usearch contexts reserved: the builder's threads and [`SEARCH_CONTEXTS`].
    contexts: usize,
    /// Searches running, at most [`SEARCH_CONTEXTS`].
    searching: Mutex<usize>,
    search_ended: Condvar,
}

impl Graph {
    pub(crate) fn new(dimension: usize, options: &AnnOptions, expected: usize) -> Option<Self> {
        let index = Self::empty(dimension, options)?;
        let contexts = contexts(options);
        index
            .reserve_capacity_and_threads(expected.max(1024), contexts)
            .map_err(|e| tracing::warn!(error = %e, "the vector graph could not reserve memory"))
            .ok()?;
        Some(Self::around(index, options, expected, true, contexts))
    }

    /// The graph saved in `path`, if it loads and has the options' shape.
    pub(crate) fn load(dimension: usize, options: &AnnOptions, path: &Path) -> Option<Self> {
        let index = Self::empty(dimension, options)?;
        let loaded = path
            .to_str()
            .ok_or_else(|| "not a UTF-8 path".to_owned())
            .and_then(|p| index.load(p).map_err(|e| e.to_string()));
        if let Err(error) = loaded {
            tracing::warn!(%error, path = %path.display(), "a saved vector graph could not be loaded");
            return None;
        }
        // A graph of another shape (saved before the defaults changed) is built again.
        if index.dimensions() != dimension || index.connectivity() != options.connectivity {
            tracing::info!(path = %path.display(), "a saved vector graph of another shape is built again");
            return None;
        }
        index.change_expansion_search(options.expansion_search);
        index.change_expansion_add(options.expansion_add);
        let contexts = contexts(options);
        if let Err(e) = index.reserve_capacity_and_threads(index.capacity(), contexts) {
            tracing::warn!(error = %e, path = %path.display(), "a saved vector graph could not be loaded");
            return None;
        }
        let size = index.size();
        Some(Self::around(index, options, size, false, contexts))
    }

    fn around(
        index: usearch::Index,
        options: &AnnOptions,
        built_from: usize,
        changed: bool,
        contexts: usize,
    ) -> Self {
        index.change_expansion_search(breadth_for(options.expansion_search, index.size()));
        Self {
            index: RwLock::new(index),
            breadth: AtomicUsize::new(options.expansion_search),
            fixed: AtomicBool::new(false),
            built_from,
            started: Instant::now(),
            changed: AtomicBool::new(changed),
            touched: Mutex::new(Instant::now()),
            saved: Mutex::new(None),
            contexts,
            searching: Mutex::new(0),
            search_ended: Condvar::new(),
        }
    }

    fn empty(dimension: usize, options: &AnnOptions) -> Option<usearch::Index> {
        usearch::Index::new(&usearch::IndexOptions {
            dimensions: dimension,
            metric: usearch::MetricKind::Cos,
            quantization: usearch::ScalarKind::I8,
            connectivity: options.connectivity,
            expansion_add: options.expansion_add,
            expansion_search: options.expansion_search,
            multi: false,
        })
        .map_err(|e| tracing::warn!(error = %e, "the vector graph could not be created"))
        .ok()
    }

    /// Vectors the graph holds (removed ones included until usearch reuses their slots).
    pub(crate) fn size(&self) -> usize {
        self.index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .size()
    }

    /// The graph's copy of a key's code, into `buffer`; false when it holds none.
    pub(crate) fn code(&self, key: u64, buffer: &mut [i8]) -> bool {
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        index.contains(key) && index.get::<i8>(key, buffer).is_ok_and(|n| n > 0)
    }

    /// Saves the graph to `path` (through a temporary file renamed over it) when it changed
    /// since it was loaded or saved, and it was never saved, or the last save is
    /// [`SAVE_EVERY`] old, or it has not changed for [`SAVE_QUIET`].
    pub(crate) fn save_if_due(&self, path: &Path) {
        let mut saved = self.saved.lock().unwrap_or_else(PoisonError::into_inner);
        let quiet = self
            .touched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
            >= SAVE_QUIET;
        let due = saved.is_none_or(|at| at.elapsed() >= SAVE_EVERY || quiet);
        if !self.changed.load(Ordering::Acquire) || !due {
            return;
        }
        let started = Instant::now();
        let temporary = path.with_extension("saving");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                temporary
                    .to_str()
                    .ok_or_else(|| "not a UTF-8 path".to_owned())
            })
            .and_then(|t| {
                // Changes made while it writes are saved next time.
                self.changed.store(false, Ordering::Release);
                let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
                index.save(t).map_err(|e| e.to_string())
            })
            .and_then(|()| std::fs::rename(&temporary, path).map_err(|e| e.to_string()));
        *saved = Some(Instant::now());
        match written {
            Ok(()) => tracing::info!(
                path = %path.display(),
                seconds = started.elapsed().as_secs_f64(),
                "vector graph saved"
            ),
            Err(error) => {
                self.changed.store(true, Ordering::Release);
                let _ = std::fs::remove_file(&temporary);
                tracing::warn!(%error, path = %path.display(), "the vector graph could not be saved");
            }
        }
    }

    /// The nearest `k` keys the graph holds that `keep` accepts (best first, by its own
    /// approximate distance).
    pub(crate) fn search(&self, query: &[i8], k: usize, keep: impl Fn(u64) -> bool) -> Vec<u64> {
        let _slot = self.search_slot();
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        match index.filtered_search::<i8, _>(query, k, keep) {
            Ok(found) => found.keys,
            Err(e) => {
                tracing::warn!(error = %e, "vector graph search failed: scanning instead");
                Vec::new()
            }
        }
    }

    /// The breadth (efSearch) a search keeps now: a search asked for more answers keeps that
    /// many instead.
    pub(crate) fn search_breadth(&self) -> usize {
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        index.expansion_search()
    }

    /// Waits until fewer than [`SEARCH_CONTEXTS`] searches run; the slot is given back when
    /// the guard is dropped.
    fn search_slot(&self) -> SearchSlot<'_> {
        let running = self
            .searching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut running = self
            .search_ended
            .wait_while(running, |n| *n >= SEARCH_CONTEXTS)
            .unwrap_or_else(PoisonError::into_inner);
        *running += 1;
        SearchSlot(self)
    }

    /// Adds vectors (codes of `dimension` each, keyed) on `threads` threads (the builder's
    /// and more, at most the contexts reserved for them); returns the keys that could not be
    /// added.
    pub(crate) fn add(
        &self,
        keys: &[u64],
        codes: &[i8],
        dimension: usize,
        threads: usize,
    ) -> Vec<u64> {
        {
            // Growing is not safe beside searches: it takes the lock alone.
            let index = self.index.write().unwrap_or_else(PoisonError::into_inner);
            let needed = index.size() + keys.len();
            self.set_search_breadth(&index, needed);
            if needed > index.capacity() {
                let grown = needed.max(index.capacity() * 3 / 2);
                if let Err(e) = index.reserve_capacity_and_threads(grown, self.contexts) {
                    tracing::warn!(error = %e, "the vector graph could not grow");
                    return keys.to_vec();
                }
            }
        }
        self.touch();
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        let index = &*index;
        let add_part = |keys: &[u64], codes: &[i8]| -> Vec<u64> {
            keys.iter()
                .zip(codes.chunks_exact(dimension))
                .filter(|(key, code)| {
                    // A loaded graph may hold a key the segment lacked when it was loaded,
                    // which the store gave to a new chunk since: its old copy goes first.
                    if index.contains(**key) {
                        let _ = index.remove(**key);
                    }
                    index.add::<i8>(**key, code).is_err()
                })
                .map(|(key, _)| *key)
                .collect()
        };
        let threads = threads.clamp(1, self.contexts - SEARCH_CONTEXTS);
        let per = keys.len().div_ceil(threads).max(1);
        if per == keys.len() {
            return add_part(keys, codes);
        }
        std::thread::scope(|scope| {
            let parts: Vec<_> = keys
                .chunks(per)
                .zip(codes.chunks(per * dimension))
                .map(|(keys, codes)| scope.spawn(move || add_part(keys, codes)))
                .collect();
            parts
                .into_iter()
                .zip(keys.chunks(per))
                .flat_map(|(part, keys)| part.join().unwrap_or_else(|_| keys.to_vec()))
                .collect()
        })
    }

    fn touch(&self) {
        self.changed.store(true, Ordering::Release);
        *self.touched.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Fixes how many candidates a search keeps (efSearch), whatever the graph's size: for
    /// measurements.
    pub(crate) fn set_breadth(&self, breadth: usize) {
        let index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        self.breadth.store(breadth, Ordering::Relaxed);
        self.fixed.store(true, Ordering::Relaxed);
        self.set_search_breadth(&index, index.size());
    }

    /// Gives the index the breadth for a graph of `vectors` (the caller holds the write lock,
    /// or the graph is not shared yet).
    fn set_search_breadth(&self, index: &usearch::Index, vectors: usize) {
        let breadth = self.breadth.load(Ordering::Relaxed);
        index.change_expansion_search(match self.fixed.load(Ordering::Relaxed) {
            true => breadth,
            false => breadth_for(breadth, vectors),
        });
    }

    /// Removes keys (gone from the segment, or about to be added again in a new version).
    pub(crate) fn remove(&self, keys: impl IntoIterator<Item = u64>) {
        self.touch();
        let index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        for key in keys {
            let _ = index.remove(key);
        }
    }
}

/// A running search's hold on one of a graph's search contexts.
struct SearchSlot<'a>(&'a Graph);

impl Drop for SearchSlot<'_> {
    fn drop(&mut self) {
        *self
            .0
            .searching
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.search_ended.notify_one();
    }
}

/// The usearch contexts a graph reserves: one per builder thread, and the searches'.
fn contexts(options: &AnnOptions) -> usize {
    options.build_threads.max(1) + SEARCH_CONTEXTS
}

/// Wakes the builder when the segments change.
#[derive(Default)]
pub(crate) struct Wake {
    pending: Mutex<bool>,
    signal: Condvar,
}

impl Wake {
    pub(crate) fn notify(&self) {
        *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.signal.notify_one();
    }

    /// Waits for a notification or `timeout`.
    fn wait(&self, timeout: Duration) {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut pending, _) = self
            .signal
            .wait_timeout_while(pending, timeout, |p| !*p)
            .unwrap_or_else(PoisonError::into_inner);
        *pending = false;
    }
}

/// Starts the thread that keeps every graph of `segments` current; it ends when they are
/// dropped.
pub(crate) fn spawn_builder(segments: Weak<Segments>, wake: Arc<Wake>) {
    let started = std::thread::Builder::new()
        .name("engram-vector-graph".into())
        .spawn(move || loop {
            let Some(segments) = segments.upgrade() else {
                return;
            };
            let busy = segments.build_round();
            drop(segments);
            if !busy {
                wake.wait(Duration::from_millis(500));
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "the vector graph builder could not start: exact scans only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_graph_searches_proportionally_fewer_candidates() {
        assert_eq!(breadth_for(1024, 2_000_000), 1024);
        assert_eq!(breadth_for(1024, 1_000_000), 1024);
        assert_eq!(breadth_for(1024, 500_000), 512);
        assert_eq!(breadth_for(1024, 100_000), MIN_BREADTH);
        assert_eq!(breadth_for(1024, 0), MIN_BREADTH);
        // Asked below the floor: what was asked.
        assert_eq!(breadth_for(64, 2_000_000), 64);
        assert_eq!(breadth_for(64, 1_000), 64);
    }

    fn code(seed: u64, dimension: usize) -> Vec<i8> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..dimension)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 56) as u8).wrapping_sub(128) as i8
            })
            .collect()
    }

    #[test]
    fn searches_beside_additions_on_every_builder_thread_never_fail() {
        const DIM: usize = 16;
        let options = AnnOptions {
            build_threads: 3,
            ..AnnOptions::default()
        };
        let graph = Graph::new(DIM, &options, 1_000).unwrap();
        let batch = |from: u64, to: u64| -> (Vec<u64>, Vec<i8>) {
            (
                (from..to).collect(),
                (from..to).flat_map(|k| code(k, DIM)).collect(),
            )
        };
        let (keys, codes) = batch(0, 500);
        assert!(graph.add(&keys, &codes, DIM, 3).is_empty());
        let adding = AtomicBool::new(true);
        std::thread::scope(|scope| {
            // More searches at once than contexts reserved for them: some wait for a slot.
            let searchers: Vec<_> = (0..SEARCH_CONTEXTS as u64 + 8)
                .map(|s| {
                    let (graph, adding) = (&graph, &adding);
                    scope.spawn(move || {
                        let mut searched = 0;
                        while adding.load(Ordering::Acquire) || searched < 5 {
                            let found = graph.search(&code(10_000 + s, DIM), 10, |_| true);
                            // (A search may find fewer while the nodes it walks are being
                            // linked: the segment then scans exactly.)
                            assert!(!found.is_empty(), "a search failed beside additions");
                            searched += 1;
                        }
                    })
                })
                .collect();
            // Past the capacity reserved: the graph grows on the way.
            for from in (500..3_000).step_by(250) {
                let (keys, codes) = batch(from, from + 250);
                assert!(
                    graph.add(&keys, &codes, DIM, 3).is_empty(),
                    "an addition failed beside searches"
                );
            }
            adding.store(false, Ordering::Release);
            for searcher in searchers {
                searcher.join().unwrap();
            }
        });
        assert_eq!(graph.size(), 3_000);
        assert_eq!(*graph.searching.lock().unwrap(), 0);
    }
}
