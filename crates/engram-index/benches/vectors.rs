//! The vector index at scale: 100k chunks of 384 dimensions (the default model), top 100 (the
//! fast pool), no filter, by the exact scan and through the HNSW graph, with the graph's
//! recall@100 against the exact scan, its build time and its memory; then filters passing 1 in
//! 2, 10 and 100 (the exact scan of what each passes, and the search as planned with its
//! recall@10 against it). Not a timed test: it prints ms per search. `VECTOR_BENCH_GRAPH=0`
//! builds no graph (the planned search then scans, through the sign codes).
//!
//!     cargo bench -p engram-index --bench vectors
//!     VECTOR_BENCH_CHUNKS=1000000 cargo bench -p engram-index --bench vectors
//!
//! `VECTOR_BENCH_CHUNKS` (default 100000) and `VECTOR_BENCH_SCANS` (default 200) change the size,
//! `VECTOR_BENCH_EF` the graph's search breadth, `VECTOR_BENCH_M` and `VECTOR_BENCH_EFC` its
//! connectivity and construction breadth (defaults: the index's), so two shapes can be timed
//! side by side.
//! Vectors are clustered like real embeddings, in two levels (50 fields of 40 topics each; a
//! point is its topic's centre plus noise, a topic its field's centre plus noise): uniform
//! noise would make every neighbour about equally far, which no model gives.

use std::collections::HashSet;
use std::time::Instant;

use engram_index::{AnnOptions, ChunkKey, Keys, VectorEntry, Vectors};
use engram_types::{DatabaseId, ItemKind};

const DIMENSION: usize = 384;
const FIELDS: u64 = 50;
const TOPICS: u64 = 2_000;

/// Deterministic unit vectors (xorshift), all different.
fn unit(seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..DIMENSION)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    normalize(&mut v);
    v
}

fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
}

/// `centre` plus `weight` times the unit noise of `seed`, unit length.
fn around(centre: &[f32], seed: u64, weight: f32) -> Vec<f32> {
    let noise = unit(seed);
    let mut v: Vec<f32> = centre
        .iter()
        .zip(&noise)
        .map(|(c, n)| c + weight * n)
        .collect();
    normalize(&mut v);
    v
}

/// A point of a topic of a field.
fn clustered(seed: u64) -> Vec<f32> {
    let topic = seed.wrapping_mul(7_919) % TOPICS;
    let field = unit(20_000_000 + topic % FIELDS);
    let centre = around(&field, 10_000_000 + topic, 0.8);
    around(&centre, seed, 0.8)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentiles(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (
        times[times.len() / 2],
        times[(times.len() * 99 / 100).min(times.len() - 1)],
    )
}

/// Filters passing 1 in 2, 10 and 100 of the chunks, chosen by a hash of the key (independent
/// of where a vector lies, as a metadata value is).
fn filters(chunks: usize) -> Vec<(u64, Keys)> {
    [2, 10, 100]
        .into_iter()
        .map(|share| {
            let keys = (0..chunks as u64)
                .filter(|k| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % share == 0)
                .map(|k| ChunkKey(k as i64))
                .collect();
            (share, keys)
        })
        .collect()
}

/// Times the planned search (`Vectors::search`) of each filter, with its recall@10 against
/// the exact scan of what the filter passes.
fn filtered_searches(
    index: &Vectors,
    database: &DatabaseId,
    queries: &[Vec<f32>],
    filters: &[(u64, Keys)],
    plan: &str,
) {
    let accept = |_: &str, _: ItemKind| true;
    for (share, only) in filters {
        let (mut found_10, mut times) = (0, Vec::new());
        for q in queries {
            let truth = index.search_exact(database, q, 10, &accept, Some(only));
            let started = Instant::now();
            let hits = index.search(database, q, 100, &accept, Some(only));
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            let ten: HashSet<ChunkKey> = truth.iter().map(|t| t.0).collect();
            found_10 += hits.iter().take(10).filter(|h| ten.contains(&h.0)).count();
        }
        let (p50, p99) = percentiles(times);
        println!(
            "search ({plan}) of a filter passing 1 in {share}: p50 {p50:.2} ms, p99 {p99:.2} ms, \
             recall@10 against its exact scan {:.4}",
            found_10 as f64 / (queries.len() * 10.min(only.len())) as f64,
        );
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    // `cargo test --all-targets` runs this binary without `--bench`: a small smoke run.
    let (chunks, scans) = if bench {
        (
            env("VECTOR_BENCH_CHUNKS", 100_000),
            env("VECTOR_BENCH_SCANS", 200),
        )
    } else {
        (3_000, 5)
    };
    let database = DatabaseId::from_trusted("bench");
    let index = Vectors::with_options(
        DIMENSION,
        AnnOptions {
            min_vectors: if env("VECTOR_BENCH_GRAPH", 1) == 0 {
                usize::MAX
            } else {
                chunks.min(AnnOptions::default().min_vectors)
            },
            expansion_search: env("VECTOR_BENCH_EF", AnnOptions::default().expansion_search),
            connectivity: env("VECTOR_BENCH_M", AnnOptions::default().connectivity),
            expansion_add: env("VECTOR_BENCH_EFC", AnnOptions::default().expansion_add),
            ..AnnOptions::default()
        },
    );
    let before = rss_mib();
    let started = Instant::now();
    for part in 0..chunks.div_ceil(10_000) {
        let range = part * 10_000..((part + 1) * 10_000).min(chunks);
        index.insert(
            &database,
            range.map(|i| VectorEntry {
                chunk_key: ChunkKey(i as i64),
                collection: "default".into(),
                kind: ItemKind::Knowledge,
                vector: clustered(i as u64),
            }),
        );
    }
    let loaded = started.elapsed().as_secs_f64();
    let loaded_rss = rss_mib() - before;
    let queries: Vec<Vec<f32>> = (0..scans)
        .map(|i| clustered(1_000_000_000 + i as u64))
        .collect();
    let accept = |_: &str, _: ItemKind| true;
    let exact: Vec<(Vec<(ChunkKey, f32)>, f64)> = queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            let hits = index.search_exact(&database, q, 100, &accept, None);
            (hits, started.elapsed().as_secs_f64() * 1000.0)
        })
        .collect();
    let (p50, p99) = percentiles(exact.iter().map(|e| e.1).collect());
    println!(
        "exact scan: {chunks} chunks x {DIMENSION} dimensions, top 100, {scans} searches: \
         p50 {p50:.2} ms, p99 {p99:.2} ms ({:.1} M vectors/s); loaded in {loaded:.1} s, \
         {loaded_rss:.0} MiB",
        chunks as f64 / p50 / 1000.0,
    );
    let filters = filters(chunks);
    if env("VECTOR_BENCH_GRAPH", 1) == 0 {
        // No graph: the planned search scans, through the sign codes where it passes many.
        filtered_searches(&index, &database, &queries, &filters, "scan");
    }
    for (share, only) in &filters {
        let times: Vec<f64> = queries
            .iter()
            .map(|q| {
                let started = Instant::now();
                let hits = index.search_exact(&database, q, 100, &accept, Some(only));
                assert!(hits.len() == 100.min(only.len()), "a full answer");
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        let (p50, p99) = percentiles(times);
        println!(
            "exact scan of a filter passing 1 in {share} ({} keys): p50 {p50:.2} ms, p99 {p99:.2} ms \
             ({:.0} ns a key)",
            only.len(),
            p50 * 1e6 / only.len() as f64,
        );
    }
    if env("VECTOR_BENCH_GRAPH", 1) == 0 {
        return;
    }
    let building = Instant::now();
    while !index.graph_ready(&database) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let built = building.elapsed().as_secs_f64() + loaded;
    let total_rss = rss_mib() - before;
    let default_breadth = env("VECTOR_BENCH_EF", AnnOptions::default().expansion_search);
    for breadth in [128, 256, 384, 512] {
        index.set_graph_breadth(breadth);
        let (mut found, mut found_10) = (0, 0);
        let times: Vec<f64> = queries
            .iter()
            .zip(&exact)
            .map(|(q, (truth, _))| {
                let started = Instant::now();
                let hits = index.search(&database, q, 100, &accept, None);
                let took = started.elapsed().as_secs_f64() * 1000.0;
                let all: HashSet<ChunkKey> = truth.iter().map(|t| t.0).collect();
                found += hits.iter().filter(|h| all.contains(&h.0)).count();
                let ten: HashSet<ChunkKey> = truth.iter().take(10).map(|t| t.0).collect();
                found_10 += hits.iter().take(10).filter(|h| ten.contains(&h.0)).count();
                took
            })
            .collect();
        let (p50, p99) = percentiles(times);
        println!(
            "graph (HNSW, int8), breadth {breadth}{}: p50 {p50:.2} ms, p99 {p99:.2} ms, recall \
             against the exact scan @10 {:.4}, @100 {:.4}",
            if breadth == default_breadth {
                " (default)"
            } else {
                ""
            },
            found_10 as f64 / (scans * 10.min(chunks)) as f64,
            found as f64 / (scans * 100.min(chunks)) as f64,
        );
    }
    index.set_graph_breadth(default_breadth);
    filtered_searches(
        &index,
        &database,
        &queries,
        &filters,
        "graph or scan as planned",
    );
    assert!(index.graph_searches() >= scans as u64, "the graph answered");
    println!(
        "graph built {built:.1} s after the first insert ({} threads), {total_rss:.0} MiB in all",
        AnnOptions::default().build_threads
    );
}
