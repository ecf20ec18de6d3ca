//! `engram bench query`: query latency at scale (default 100k chunks), `fast` hybrid top 10 with
//! the query embedding included, without and with `graph_context`, side by side with a plain BM25
//! query (`query_by=text`) on the
//! same data, through `App::query` (the path both HTTP generations call).
//!
//! Chunk texts are real: overlapping 70-word windows of SciFact abstracts, so posting lists have
//! the lengths of a real corpus of that size. Embedding 100k chunks would take half an hour on
//! two cores, and the cost of a vector scan does not depend on the values scanned, so indexing
//! uses the real model on a sample of windows and gives every other window the vector of a
//! sampled window (with small noise); queries are embedded by the real model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engram_app::{
    App, AppSource, KeySpec, KnowledgeRequest, Method, Models, QueryKind, QueryRequest,
    RequestedMode,
};
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
}

/// Gives each known text its precomputed vector; anything else goes to the real model.
struct Precomputed {
    vectors: HashMap<String, Vec<f32>>,
    model: Arc<dyn Embedder>,
}

impl Embedder for Precomputed {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !self.vectors.contains_key(*t))
            .collect();
        let mut computed = self.model.embed(&missing)?.into_iter();
        Ok(texts
            .iter()
            .map(|t| match self.vectors.get(*t) {
                Some(v) => v.clone(),
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

/// Overlapping windows of `words` words (stride `stride`) over the corpus' abstracts.
fn windows(corpus: &[Value], count: usize, words: usize, stride: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(count);
    for doc in corpus.iter().cycle().take(corpus.len() * 64) {
        let body: Vec<&str> = doc["text"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let mut start = 0;
        while start + words <= body.len() {
            out.push(body[start..start + words].join(" "));
            if out.len() == count {
                return out;
            }
            start += stride;
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
    let corpus = crate::eval::read_jsonl(&args.scifact.join("corpus.jsonl"))?;
    let queries: Vec<String> = crate::eval::read_jsonl(&args.scifact.join("queries.jsonl"))?
        .iter()
        .filter_map(|q| q["text"].as_str().map(str::to_owned))
        .collect();
    if queries.is_empty() {
        bail!("no queries in {}", args.scifact.display());
    }
    let texts = windows(&corpus, args.chunks, 70, 10);
    if texts.len() < args.chunks {
        bail!("the corpus gives only {} windows", texts.len());
    }

    let tmp = std::env::temp_dir().join(format!("engram-bench-query-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    config.data_dir = tmp.clone();
    config.rate_limit.enabled = false;
    let real = Models::load(&config.embedding).await?;

    eprintln!("embedding {} sample windows with the model…", args.sample);
    let sample: Vec<String> = texts
        .iter()
        .step_by((texts.len() / args.sample.max(1)).max(1))
        .cloned()
        .collect();
    let model = real.embedder.clone();
    let sample_vectors = {
        let sample = sample.clone();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = sample.iter().map(String::as_str).collect();
            model.embed(&refs)
        })
        .await??
    };
    // Window i reuses sampled vector i % period.
    let period = sample_vectors.len().max(1);
    let vectors: HashMap<String, Vec<f32>> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let base = &sample_vectors[i % sample_vectors.len()];
            (t.clone(), jitter(base, i as u64))
        })
        .collect();
    let models = Models {
        embedder: Arc::new(Precomputed {
            vectors,
            model: real.embedder.clone(),
        }),
        query_embedder: real.query_embedder.clone(),
        tokens: real.tokens.clone(),
    };
    // SQLite in a new directory, or the (empty) PostgreSQL database `--storage-url` names.
    let store = engram_app::open_store(&config).await?;
    let app = App::with_store(
        config.clone(),
        store,
        Arc::new(engram_app::SystemClock),
        Some(models),
    )?;
    let key = app
        .create_key(KeySpec {
            org: "bench".into(),
            ..KeySpec::default()
        })
        .await?;
    let who = app.authenticate(&key.token).await?;
    let token = CancellationToken::new();
    let workers = app.start_workers(token.child_token());
    let (db, _) = crate::eval::ready_database(&app, &who, "bench").await?;

    for (n, batch) in texts.chunks(500).enumerate() {
        let sources = batch
            .iter()
            .enumerate()
            .map(|(i, text)| AppSource {
                id: Some(format!("w{n}_{i}")),
                text: text.clone(),
                // Half the items, for the filtered variant: windows sharing a sampled vector
                // (every `period`-th) alternate, so the filter is independent of similarity.
                additional_metadata: serde_json::Map::from_iter([(
                    "shard".to_owned(),
                    json!(if (n * 500 + i) / period % 2 == 0 {
                        "even"
                    } else {
                        "odd"
                    }),
                )]),
                attachments: json!([]),
                relations: json!({}),
                ..AppSource::default()
            })
            .collect();
        app.ingest_knowledge(
            &who,
            &db,
            KnowledgeRequest {
                upsert: true,
                file_metadata_field: "document_metadata",
                app_knowledge: sources,
                ..KnowledgeRequest::default()
            },
        )
        .await?;
    }
    let mut progress = crate::progress::Progress::new("indexed chunks", texts.len() as u64);
    loop {
        let stats = app.database_stats(&who, &db).await?;
        let indexed = stats.counts.knowledge_chunks as usize;
        progress.set(indexed as u64);
        if indexed >= texts.len()
            && app.indexes().vector_count(&stats.database.id).await? >= texts.len()
            && app.indexes().vectors_settled(&stats.database.id).await?
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    progress.finish();

    let run = |method: Method, filtered: bool, graph: bool| {
        let (app, who, db) = (app.clone(), who.clone(), db.clone());
        let queries = queries.clone();
        let count = args.queries;
        async move {
            let mut latencies = Vec::with_capacity(count);
            // Warm-up: page the store and the index in.
            for q in queries.iter().take(20) {
                app.query(&who, &db, request(q, method, filtered, graph))
                    .await?;
            }
            for q in queries.iter().cycle().take(count) {
                let started = Instant::now();
                let outcome = app
                    .query(&who, &db, request(q, method, filtered, graph))
                    .await?;
                latencies.push(started.elapsed().as_secs_f64() * 1000.0);
                anyhow::ensure!(!outcome.chunks.is_empty(), "no results for {q}");
            }
            latencies.sort_by(f64::total_cmp);
            Ok::<_, anyhow::Error>(latencies)
        }
    };
    let hybrid = run(Method::Hybrid, false, false).await?;
    let graph = run(Method::Hybrid, false, true).await?;
    let bm25 = run(Method::Text, false, false).await?;
    let filtered = run(Method::Hybrid, true, false).await?;
    println!(
        "engram bench query: {} chunks (SciFact windows of 70 words), {} queries each, top 10",
        texts.len(),
        args.queries
    );
    for (name, l) in [
        ("fast hybrid (query embedding included)", &hybrid),
        ("fast hybrid with graph_context", &graph),
        ("BM25 alone (query_by=text)", &bm25),
        ("fast hybrid, filter matching half", &filtered),
    ] {
        println!(
            "  {name:<40} p50 {:7.2} ms  p99 {:7.2} ms  max {:7.2} ms",
            percentile(l, 50.0),
            percentile(l, 99.0),
            l.last().copied().unwrap_or(0.0)
        );
    }
    token.cancel();
    workers.shutdown(Duration::from_secs(10)).await;
    app.close().await;
    std::fs::remove_dir_all(&tmp).context("removing the bench data")?;
    Ok(())
}

/// A `fast` top-10 query; `filtered`: restricted to half the items by an
/// `additional_metadata` filter (applied before ranking); `graph_context`: with the graph
/// context of its results.
fn request(query: &str, method: Method, filtered: bool, graph_context: bool) -> QueryRequest {
    let metadata_filters = if filtered {
        serde_json::Map::from_iter([("additional_metadata".to_owned(), json!({"shard": "even"}))])
    } else {
        serde_json::Map::new()
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
