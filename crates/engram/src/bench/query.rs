//! `engram bench query`: query latency at scale (default 100k chunks), `fast` hybrid top 10 with
//! the query embedding included, without and with `graph_context`, and asked as a question
//! without and with the graph lane (which ranks knowledge questions by default), side by side
//! with a plain BM25 query (`query_by=text`) on the same data, through `App::query` (the path both HTTP generations
//! call); the vector search's recall@10 against the exact scan, and the process' memory.
//!
//! Chunk texts are real: overlapping 70-word windows of SciFact abstracts, so posting lists have
//! the lengths of a real corpus of that size. Embedding 100k chunks would take half an hour on
//! two cores, and the cost of a vector scan does not depend on the values scanned, so indexing
//! uses the real model on a sample of windows and gives every window a blend of two sampled
//! vectors (with small noise): vectors cluster like real ones, not like uniform noise.
//! Queries are embedded by the real model.
//!
//! With `--data DIR` the bench keeps its data; run again on the same directory, it opens it as a
//! restarted server would and says how long after start the first query was answered and the
//! indexes settled, then times the same queries with the memory of a process that only serves.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engram_app::{App, AppSource, Method, Models, QueryKind, QueryRequest, RequestedMode};
use engram_config::Config;
use engram_embed::{EmbedError, Embedder};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::bench::percentile;

#[derive(clap::Args)]
pub(crate) struct QueryBench {
    /// SciFact directory (corpus.jsonl, queries.jsonl).
    #[arg(long, default_value = "../shared/eval/scifact")]
    scifact: PathBuf,
    /// Chunks to index.
    #[arg(long, default_value_t = 100_000)]
    chunks: usize,
    /// Windows embedded by the real model; the others reuse their vectors.
    #[arg(long, default_value_t = 2_000)]
    sample: usize,
    /// Queries to time (SciFact queries; repeated when fewer).
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Queries whose vector search is compared with the exact scan (recall@10).
    #[arg(long, default_value_t = 100)]
    recall_queries: usize,
    /// Keeps the data in this directory; when it already holds it, reopens it (a restart)
    /// instead of indexing.
    #[arg(long)]
    data: Option<PathBuf>,
}

/// Gives each window a vector made of real sampled vectors (see [`Precomputed::vector`]);
/// anything else goes to the real model.
struct Precomputed {
    windows: HashMap<String, usize>,
    sample: Vec<Vec<f32>>,
    model: Arc<dyn Embedder>,
}

impl Precomputed {
    /// Window i: sampled vector `i % n` (its topic) plus half of another sampled vector picked
    /// by a hash of i (what sets it apart within the topic), with a little noise. Vectors that
    /// only jittered one sample would make each topic a ball of near-duplicates, which no real
    /// corpus is and on which no nearest-neighbour index can tell the ten nearest apart.
    fn vector(&self, text: &str) -> Option<Vec<f32>> {
        let i = *self.windows.get(text)?;
        let n = self.sample.len();
        let other = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33;
        let (topic, aside) = (&self.sample[i % n], &self.sample[other as usize % n]);
        let blend: Vec<f32> = topic.iter().zip(aside).map(|(t, a)| t + 0.5 * a).collect();
        Some(jitter(&blend, i as u64))
    }
}

impl Embedder for Precomputed {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !self.windows.contains_key(*t))
            .collect();
        let mut computed = self.model.embed(&missing)?.into_iter();
        Ok(texts
            .iter()
            .map(|t| match self.vector(t) {
                Some(v) => v,
                None => computed.next().unwrap_or_default(),
            })
            .collect())
    }

    fn dimension(&self) -> usize {
        self.model.dimension()
    }

    fn model_id(&self) -> &str {
        self.model.model_id()
    }
}

/// Overlapping windows of `words` words (stride `stride`) over the corpus' abstracts. Each pass
/// over the corpus starts its windows one word later than the pass before (and after `stride`
/// passes makes them one word longer), so windows do not repeat: past the ~70k windows of one
/// pass, repeated texts would share a vector, and equal vectors make neither recall nor an
/// HNSW graph mean what they do on real data.
fn windows(corpus: &[Value], count: usize, words: usize, stride: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    for pass in 0..64 {
        let (offset, width) = (pass % stride, words + pass / stride);
        for doc in corpus {
            let body: Vec<&str> = doc["text"]
                .as_str()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            let mut start = offset;
            while start + width <= body.len() {
                out.push(body[start..start + width].join(" "));
                if out.len() == count {
                    return out;
                }
                start += stride;
            }
        }
    }
    out
}

/// A small deterministic perturbation, renormalised.
fn jitter(vector: &[f32], seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut v: Vec<f32> = vector
        .iter()
        .map(|x| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x + (((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5) * 0.02
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

pub(crate) async fn query(args: QueryBench, mut config: Config) -> anyhow::Result<()> {
    let started = Instant::now();
    let corpus = crate::eval::read_jsonl(&args.scifact.join("corpus.jsonl"))?;
    let queries: Vec<String> = crate::eval::read_jsonl(&args.scifact.join("queries.jsonl"))?
        .iter()
        .filter_map(|q| q["text"].as_str().map(str::to_owned))
        .collect();
    if queries.is_empty() {
        bail!("no queries in {}", args.scifact.display());
    }
    let dir = args.data.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("engram-bench-query-{}", std::process::id()))
    });
    let restart = dir.read_dir().is_ok_and(|mut d| d.next().is_some());
    std::fs::create_dir_all(&dir)?;
    config.data_dir = dir.clone();
    config.rate_limit.enabled = false;
    let real = Models::load(&config.embedding).await?;
    let models = if restart {
        real.clone()
    } else {
        let texts = windows(&corpus, args.chunks, 70, 10);
        if texts.len() < args.chunks {
            bail!("the corpus gives only {} windows", texts.len());
        }
        sampled(&real, texts, args.sample).await?
    };
    // SQLite in the directory, or the PostgreSQL database `--storage-url` names.
    let store = engram_app::open_store(&config).await?;
    let app = App::with_store(
        config.clone(),
        store.clone(),
        Arc::new(engram_app::SystemClock),
        Some(models),
    )?;
    let (who, _) = crate::eval::principal(&app, "bench").await?;
    let token = CancellationToken::new();
    let workers = app.start_workers(token.child_token());
    let (db, existed) = crate::eval::ready_database(&app, &who, "bench").await?;
    if restart && !existed {
        bail!(
            "{} holds no bench data: name an empty or new directory",
            dir.display()
        );
    }
    let chunks = if restart {
        let first = app
            .query(&who, &db, request(&queries[0], Method::Hybrid, None, false))
            .await?;
        anyhow::ensure!(!first.chunks.is_empty(), "no results after the restart");
        report!(
            "restart: first query answered {:.1} s after start (keyword index {})",
            started.elapsed().as_secs_f64(),
            if app.indexes().restored() {
                "opened from disk"
            } else {
                "built from the store"
            }
        );
        app.database_stats(&who, &db).await?.counts.knowledge_chunks as usize
    } else {
        let texts = windows(&corpus, args.chunks, 70, 10);
        ingest(&app, &who, &db, texts, args.sample).await?;
        args.chunks
    };
    let id = app.database_stats(&who, &db).await?.database.id;
    let mut progress = crate::progress::Progress::new("indexed chunks", chunks as u64);
    loop {
        let indexed = app.database_stats(&who, &db).await?.counts.knowledge_chunks as usize;
        progress.set(indexed as u64);
        if indexed >= chunks
            && app.indexes().vector_count(&id).await? >= chunks
            && app.indexes().vectors_settled(&id).await?
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    progress.finish();
    if restart {
        report!(
            "restart: indexes settled {:.1} s after start",
            started.elapsed().as_secs_f64()
        );
    }
    let recall_of = |filter: Option<engram_store::ChunkFilter>| {
        vector_recall(
            &app,
            store.as_ref(),
            &real,
            &who,
            &id,
            &queries,
            args.recall_queries,
            filter,
        )
    };
    let recall = recall_of(None).await?;
    let mut filtered_recall = Vec::new();
    for (name, key) in SELECTIVITIES {
        filtered_recall.push((name, recall_of(Some(selective(key))).await?));
    }

    let run = |method: Method, filtered: Option<&'static str>, graph: bool, lane: Option<bool>| {
        let (app, who, db) = (app.clone(), who.clone(), db.clone());
        let queries = queries.clone();
        let count = args.queries;
        async move {
            let mut latencies = Vec::with_capacity(count);
            let mut stages: HashMap<engram_app::Stage, Vec<f64>> = HashMap::new();
            // Warm-up: page the store and the index in.
            let ask = |q: &str| {
                let mut request = request(q, method, filtered, graph);
                if lane.is_some() {
                    request.query = question(q);
                    request.graph_rank = lane;
                }
                request
            };
            for q in queries.iter().take(20) {
                app.query(&who, &db, ask(q)).await?;
            }
            for q in queries.iter().cycle().take(count) {
                let started = Instant::now();
                let outcome = app.query(&who, &db, ask(q)).await?;
                latencies.push(started.elapsed().as_secs_f64() * 1000.0);
                anyhow::ensure!(!outcome.chunks.is_empty(), "no results for {q}");
                for timing in &outcome.timings {
                    stages
                        .entry(timing.stage)
                        .or_default()
                        .push(timing.elapsed.as_secs_f64() * 1000.0);
                }
            }
            latencies.sort_by(f64::total_cmp);
            Ok::<_, anyhow::Error>((latencies, stage_medians(stages)))
        }
    };
    let (hybrid, hybrid_stages) = run(Method::Hybrid, None, false, None).await?;
    let graph = run(Method::Hybrid, None, true, None).await?.0;
    let asked = run(Method::Hybrid, None, false, Some(false)).await?.0;
    let lane = run(Method::Hybrid, None, false, Some(true)).await?.0;
    let bm25 = run(Method::Text, None, false, None).await?.0;
    let mut filtered = Vec::new();
    for (name, key) in SELECTIVITIES {
        filtered.push((name, run(Method::Hybrid, Some(key), false, None).await?));
    }
    report!(
        "engram bench query: {chunks} chunks (SciFact windows of 70 words), {} queries each, top 10",
        args.queries
    );
    let line = |name: &str, l: &[f64]| {
        report!(
            "  {name:<40} p50 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms",
            percentile(l, 50.0),
            percentile(l, 99.0),
            l.last().copied().unwrap_or(0.0)
        );
    };
    for (name, l) in [
        ("fast hybrid (query embedding included)", &hybrid),
        ("fast hybrid with graph_context", &graph),
        ("fast hybrid, a question, lane off", &asked),
        ("fast hybrid, a question (graph lane)", &lane),
        ("BM25 alone (query_by=text)", &bm25),
    ] {
        line(name, l);
    }
    let unfiltered = percentile(&hybrid, 50.0);
    for (name, (l, _)) in &filtered {
        line(&format!("fast hybrid, filter passing {name}"), l);
    }
    report!("  stage p50s (ms), unfiltered: {hybrid_stages}");
    for (name, (_, stages)) in &filtered {
        report!("  stage p50s (ms), passing {name}: {stages}");
    }
    report!(
        "  filtered p50 against unfiltered: {}",
        filtered
            .iter()
            .map(|(name, (l, _))| format!("{name} {:.2}x", percentile(l, 50.0) / unfiltered))
            .collect::<Vec<_>>()
            .join(", ")
    );
    report!(
        "  vector recall@10 against the exact scan: {recall:.3} ({} queries); filtered, against \
         the exact scan of what the store passes: {}",
        args.recall_queries.min(queries.len()),
        filtered_recall
            .iter()
            .map(|(name, r)| format!("{name} {r:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (rss, peak) = super::memory();
    report!("  memory: RSS {rss} MiB, peak {peak} MiB");
    token.cancel();
    workers.shutdown(Duration::from_secs(10)).await;
    app.close().await;
    if args.data.is_none() {
        std::fs::remove_dir_all(&dir).context("removing the bench data")?;
    }
    Ok(())
}

/// Models whose chunk embedder gives every window of `texts` the real vector of a sampled
/// window (see [`Precomputed`]); queries go to the real model.
async fn sampled(real: &Models, texts: Vec<String>, sample: usize) -> anyhow::Result<Models> {
    eprintln!("embedding {sample} sample windows with the model…");
    let step = (texts.len() / sample.max(1)).max(1);
    let picked: Vec<String> = texts.iter().step_by(step).cloned().collect();
    let model = real.embedder.clone();
    let sample = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = picked.iter().map(String::as_str).collect();
        model.embed(&refs)
    })
    .await??;
    if sample.is_empty() {
        bail!("no windows to sample");
    }
    // Window i reuses sampled vector i % period.
    let windows = texts.into_iter().enumerate().map(|(i, t)| (t, i)).collect();
    Ok(Models {
        embedder: Arc::new(Precomputed {
            windows,
            sample,
            model: real.embedder.clone(),
        }),
        query_embedder: real.query_embedder.clone(),
        tokens: real.tokens.clone(),
    })
}

/// Each stage's median time, in the order stages run (`keyword 1.20, vector 0.80, …`).
fn stage_medians(mut stages: HashMap<engram_app::Stage, Vec<f64>>) -> String {
    let mut medians: Vec<(engram_app::Stage, f64)> = stages
        .iter_mut()
        .map(|(stage, times)| {
            times.sort_by(f64::total_cmp);
            (*stage, percentile(times, 50.0))
        })
        .collect();
    medians.sort_by_key(|m| m.0);
    medians
        .iter()
        .map(|(stage, ms)| format!("{} {ms:.2}", stage.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The filtered variants: what share of the chunks each passes, and the
/// `additional_metadata` key that is `"yes"` on those (`shard` is `"even"` on half).
const SELECTIVITIES: [(&str, &str); 4] = [
    ("50%", "shard"),
    ("10%", "s10"),
    ("1%", "s1"),
    ("0.1%", "s01"),
];

/// Window `i`'s value of a selectivity key: 1 in `every` windows, spread by a hash so the
/// filter is independent of similarity.
fn marked(i: usize, every: u64) -> bool {
    let mut x = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)).is_multiple_of(every)
}

/// The store's filter of a selectivity key (see [`SELECTIVITIES`]).
fn selective(key: &str) -> engram_store::ChunkFilter {
    let value = if key == "shard" { "even" } else { "yes" };
    engram_store::ChunkFilter {
        additional_metadata: vec![(key.to_owned(), engram_store::FilterValue::Eq(json!(value)))],
        ..engram_store::ChunkFilter::default()
    }
}

/// Ingests the windows, 500 per request, marked for the filtered variants: half of them
/// `shard: even`, and `s10`, `s1`, `s01` `"yes"` on 10%, 1% and 0.1%.
async fn ingest(
    app: &App,
    who: &engram_app::Principal,
    db: &engram_types::DatabaseName,
    texts: Vec<String>,
    sample: usize,
) -> anyhow::Result<()> {
    let period = (texts.len() / sample.max(1)).max(1);
    let period = texts.len().div_ceil(period).max(1);
    let yes = |marked: bool| json!(if marked { "yes" } else { "no" });
    for (n, batch) in texts.chunks(500).enumerate() {
        let sources = batch
            .iter()
            .enumerate()
            .map(|(i, text)| AppSource {
                id: Some(format!("w{n}_{i}")),
                text: text.clone(),
                // Windows sharing a sampled vector (every `period`-th) alternate, so the
                // filter is independent of similarity.
                additional_metadata: serde_json::Map::from_iter([
                    (
                        "shard".to_owned(),
                        json!(if ((n * 500 + i) / period).is_multiple_of(2) {
                            "even"
                        } else {
                            "odd"
                        }),
                    ),
                    ("s10".to_owned(), yes(marked(n * 500 + i, 10))),
                    ("s1".to_owned(), yes(marked(n * 500 + i, 100))),
                    ("s01".to_owned(), yes(marked(n * 500 + i, 1000))),
                ]),
                attachments: json!([]),
                relations: json!({}),
                ..AppSource::default()
            })
            .collect();
        crate::eval::ingest_app(app, who, db, sources).await?;
    }
    Ok(())
}

/// The mean share of the index's 10 nearest that are among the exact scan's 10 nearest (by
/// score, so equal vectors count alike), over the first `count` queries. With `filter`: the
/// index searching within what it holds the filter passes, against the exact scan of the
/// chunks the store passes.
#[allow(clippy::too_many_arguments)]
async fn vector_recall(
    app: &App,
    store: &dyn engram_store::Store,
    models: &Models,
    who: &engram_app::Principal,
    database: &engram_types::DatabaseId,
    queries: &[String],
    count: usize,
    filter: Option<engram_store::ChunkFilter>,
) -> anyhow::Result<f64> {
    let scope = engram_store::DatabaseScope {
        org: who.org.clone(),
        id: database.clone(),
    };
    let (exact_only, index_only) = match &filter {
        None => (None, None),
        Some(filter) => {
            let now = engram_types::Clock::now(&engram_app::SystemClock);
            let stored: engram_app::Keys = store
                .filtered_chunk_keys(&scope, filter, u32::MAX, now)
                .await?
                .into_iter()
                .collect();
            let held = match app.indexes().passing(&scope, filter) {
                engram_app::Passing::Only(keys) => keys,
                other @ (engram_app::Passing::Any | engram_app::Passing::Store) => {
                    bail!("the indexes do not hold the bench's filter: {other:?}")
                }
            };
            (Some(Arc::new(stored)), Some(held))
        }
    };
    let queries: Vec<String> = queries.iter().take(count).cloned().collect();
    let model = models.query_embedder.clone();
    let vectors = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
        model.embed(&refs)
    })
    .await??;
    let filter = engram_app::IndexFilter::default();
    let mut total = 0.0;
    for v in &vectors {
        let v: Arc<[f32]> = Arc::from(v.as_slice());
        let exact = app
            .indexes()
            .nearest_exact(database, v.clone(), 10, &filter, exact_only.clone())
            .await?;
        let found = app
            .indexes()
            .nearest(&scope, v, 10, &filter, index_only.clone())
            .await?;
        // A result scoring at least the exact 10th is one of the 10 nearest: equal vectors (of
        // equal texts, which the corpus may hold) count alike. Scores are the exact codes' in
        // both searches.
        let tenth = exact.last().map_or(f32::MIN, |e| e.1);
        let hit = found
            .iter()
            .filter(|(_, score)| *score >= tenth - 1e-6)
            .count();
        total += hit.min(exact.len()) as f64 / exact.len().max(1) as f64;
    }
    Ok(total / vectors.len().max(1) as f64)
}

/// A SciFact claim asked as a question ("Is it true that ...?"), which the graph lane ranks.
fn question(claim: &str) -> String {
    format!("Is it true that {}?", claim.trim_end_matches('.'))
}

/// A `fast` top-10 query; `filtered`: restricted by the `additional_metadata` filter of a
/// selectivity key (see [`SELECTIVITIES`]), applied before ranking; `graph_context`: with the
/// graph context of its results.
fn request(
    query: &str,
    method: Method,
    filtered: Option<&str>,
    graph_context: bool,
) -> QueryRequest {
    let metadata_filters = match filtered {
        Some("shard") => serde_json::Map::from_iter([(
            "additional_metadata".to_owned(),
            json!({"shard": "even"}),
        )]),
        Some(key) => {
            serde_json::Map::from_iter([("additional_metadata".to_owned(), json!({ key: "yes" }))])
        }
        None => serde_json::Map::new(),
    };
    QueryRequest {
        metadata_filters,
        query: query.to_owned(),
        kind: QueryKind::Knowledge,
        method: Some(method),
        mode: RequestedMode::Fast,
        max_results: Some(10),
        graph_context: Some(graph_context),
        ..QueryRequest::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn windows_do_not_repeat_past_one_pass_over_the_corpus() {
        let corpus: Vec<Value> = (0..3)
            .map(|d| {
                let words: Vec<String> = (0..40).map(|w| format!("d{d}w{w}")).collect();
                json!({ "text": words.join(" ") })
            })
            .collect();
        // One pass gives 21 windows of 10 words at stride 5; 60 take three more passes.
        let all = windows(&corpus, 60, 10, 5);
        assert_eq!(all.len(), 60);
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 60);
        assert!(all.iter().all(|w| w.split(' ').count() == 10));
    }
}
