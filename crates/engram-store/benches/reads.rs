//! The store's part of a query, on both backends: reading the ranked chunks with their items
//! (`fetch_chunks`, 40 keys), the same through a metadata filter, checking 1,000 index hits
//! against a filter (`passing_chunk_keys`), and, for the write side, storing an item's chunks
//! (`complete_item`, 5 chunks of 384 dimensions). 10,000 chunks in one database. Not a timed
//! test: it prints µs per call, the median of its runs.
//!
//!     cargo bench -p engram-store --features conformance --bench reads
//!
//! PostgreSQL runs when its server binaries are installed (`make test` installs them);
//! `STORE_BENCH_BACKENDS=sqlite` leaves it out. `cargo test --all-targets` runs this binary
//! without `--bench`: a small smoke run on SQLite.

// A benchmark's setup failing is a panic with its reason, as in a test.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use engram_store::conformance::{chunk, item, setup};
use engram_store::{AfterChunks, ChunkFilter, ChunkKey, ClaimRequest, FilterValue, Store};
use engram_types::UnixMs;
use serde_json::json;

const CHUNKS_PER_ITEM: u32 = 5;

/// Items stored and calls timed: the benchmark's, or the smoke run's.
struct Size {
    items: usize,
    runs: usize,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bench = std::env::args().any(|a| a == "--bench");
    let (size, default_backends) = if bench {
        (
            Size {
                items: 2_000,
                runs: 300,
            },
            "sqlite,postgres",
        )
    } else {
        (
            Size {
                items: 200,
                runs: 5,
            },
            "sqlite",
        )
    };
    let backends =
        std::env::var("STORE_BENCH_BACKENDS").unwrap_or_else(|_| default_backends.into());
    if backends.contains("sqlite") {
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(async {
            let store = engram_store::sqlite::SqliteStore::open(dir.path())
                .await
                .unwrap();
            run("sqlite", &store, &size).await;
        });
    }
    if backends.contains("postgres") {
        let pg = engram_testkit::TempPostgres::start();
        runtime.block_on(async {
            let options = engram_store::postgres::PgOptions::new(pg.url());
            let store = engram_store::postgres::PgStore::open(&options)
                .await
                .unwrap();
            run("postgres", &store, &size).await;
        });
    }
}

fn embedding(seed: usize) -> Vec<f32> {
    (0..384)
        .map(|d| ((seed * 31 + d * 7) % 97) as f32 / 97.0)
        .collect()
}

async fn run<S: Store>(backend: &str, store: &S, size: &Size) {
    let scope = setup(store, "db_bench", "org_bench").await;
    let now = UnixMs::from_millis(10_000);
    let lease = Duration::from_secs(600);
    let mut keys = Vec::new();
    let mut write_times = Vec::new();
    for batch in 0..size.items / 100 {
        let items: Vec<_> = (0..100)
            .map(|n| {
                let id = format!("item-{}", batch * 100 + n);
                let mut new = item("bench", &id, "text");
                new.fields.metadata = json!({ "half": (batch * 100 + n) % 2 == 0 });
                new
            })
            .collect();
        store
            .enqueue_items(&scope, &items, true, now)
            .await
            .unwrap();
        let claimed = store
            .claim_items(&ClaimRequest::new("bench", now, lease, 100))
            .await
            .unwrap();
        for claim in &claimed {
            let chunks: Vec<_> = (0..CHUNKS_PER_ITEM)
                .map(|p| {
                    let mut c = chunk(
                        &format!("{}-{p}", claim.id),
                        p,
                        "some chunk text to read back",
                    );
                    c.embedding = embedding(keys.len() + p as usize);
                    c
                })
                .collect();
            let started = Instant::now();
            assert!(store
                .complete_item(claim, &chunks, AfterChunks::Completed, now)
                .await
                .unwrap());
            write_times.push(started.elapsed());
        }
        keys.extend(
            store
                .filtered_chunk_keys(&scope, &ChunkFilter::default(), u32::MAX, now)
                .await
                .unwrap()
                .into_iter()
                .skip(keys.len()),
        );
    }
    assert_eq!(keys.len(), size.items * CHUNKS_PER_ITEM as usize);
    let pick = |n: usize, count: usize| -> Vec<ChunkKey> {
        (0..count)
            .map(|i| keys[(n * 7919 + i * 104_729) % keys.len()])
            .collect()
    };
    let open = ChunkFilter::default();
    let half = ChunkFilter {
        metadata: vec![("half".into(), FilterValue::Eq(json!(true)))],
        ..ChunkFilter::default()
    };
    let mut fetch = Vec::new();
    let mut fetch_filtered = Vec::new();
    let mut passing = Vec::new();
    for n in 0..size.runs {
        let started = Instant::now();
        let hits = store
            .fetch_chunks(&scope, &open, &pick(n, 40), now)
            .await
            .unwrap();
        fetch.push(started.elapsed());
        assert_eq!(hits.len(), 40);
        let started = Instant::now();
        store
            .fetch_chunks(&scope, &half, &pick(n, 40), now)
            .await
            .unwrap();
        fetch_filtered.push(started.elapsed());
        let started = Instant::now();
        store
            .passing_chunk_keys(&scope, &half, &pick(n, 1_000), now)
            .await
            .unwrap();
        passing.push(started.elapsed());
    }
    for (what, times) in [
        ("fetch_chunks 40", &mut fetch),
        ("fetch_chunks 40, filtered", &mut fetch_filtered),
        ("passing_chunk_keys 1000, filtered", &mut passing),
        ("complete_item 5 chunks", &mut write_times),
    ] {
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "{backend:8} {what:36} {:>8.1} µs",
            median.as_secs_f64() * 1e6
        );
    }
}
