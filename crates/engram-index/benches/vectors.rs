//! Cost of one exact scan of the in-memory vector index: 100k chunks of 384 dimensions (the
//! default model), top 100 (the fast pool), no filter. Not a timed test: it prints ms per scan.
//!
//!     cargo bench -p engram-index --bench vectors
//!
//! `VECTOR_BENCH_CHUNKS` (default 100000) and `VECTOR_BENCH_SCANS` (default 200) change the size.

use std::time::Instant;

use engram_index::{ChunkKey, VectorEntry, Vectors};
use engram_types::{DatabaseId, ItemKind};

const DIMENSION: usize = 384;

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
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
        (2_000, 5)
    };
    let database = DatabaseId::from_trusted("bench");
    let index = Vectors::new(DIMENSION);
    index.insert(
        &database,
        (0..chunks).map(|i| VectorEntry {
            chunk_key: ChunkKey(i as i64),
            collection: "default".into(),
            kind: ItemKind::Knowledge,
            vector: unit(i as u64),
        }),
    );
    let queries: Vec<Vec<f32>> = (0..scans).map(|i| unit(1_000_000 + i as u64)).collect();
    let accept = |_: &str, _: ItemKind| true;
    index.search(&database, &queries[0], 100, &accept, None);
    let mut times: Vec<f64> = queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            let hits = index.search(&database, q, 100, &accept, None);
            assert_eq!(hits.len(), 100.min(chunks));
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "vector scan: {chunks} chunks x {DIMENSION} dimensions, top 100, {scans} scans: \
         p50 {:.2} ms, p99 {:.2} ms ({:.1} M vectors/s)",
        times[times.len() / 2],
        times[(times.len() * 99 / 100).min(times.len() - 1)],
        chunks as f64 / times[times.len() / 2] / 1000.0
    );
}
