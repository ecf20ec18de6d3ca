//! `engram bench ingest`: end-to-end ingestion throughput through the real HTTP server, the
//! pipeline and the default model, beside a baseline of the model alone on the same texts; and
//! the latency of `GET /context/status` while ingestion runs.
//!
//! Texts are real: SciFact abstracts cut into pieces of about 110 tokens (one chunk each), or
//! with `--documents`, whole SciFact documents with their titles, as `../shared/bench/peers`
//! sends them (the title field, and "title text" as the content). The baseline embeds exactly
//! the texts the pipeline embeds: each chunk with its title line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::{percentile, Service};
use engram_config::Config;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(clap::Args)]
pub(crate) struct IngestBench {
    /// SciFact corpus (corpus.jsonl).
    #[arg(long, default_value = "../shared/eval/scifact/corpus.jsonl")]
    corpus: PathBuf,
    /// Pieces (chunks) to ingest.
    #[arg(long, default_value_t = 2000)]
    chunks: usize,
    /// Words per piece (70 words of SciFact are about 110 tokens).
    #[arg(long, default_value_t = 70)]
    words: usize,
    /// Items per ingest request.
    #[arg(long, default_value_t = 100)]
    per_request: usize,
    /// Whole titled documents instead of pieces: this many (0: pieces).
    #[arg(long, default_value_t = 0)]
    documents: usize,
    /// Milliseconds between the calls that time `GET /context/status` during ingestion (the
    /// client runs in this process, on the same cores: every call is work taken from indexing).
    #[arg(long, default_value_t = 50)]
    poll_ms: u64,
    /// With `--documents`, leave the title field empty (the text still starts with the title):
    /// what embedding each chunk with its title line costs.
    #[arg(long)]
    untitled: bool,
}

/// One item to ingest: its title and its text.
struct Doc {
    title: String,
    text: String,
}

/// The first `count` documents of the corpus, titled, their text "title text".
fn documents(corpus: &Path, count: usize) -> anyhow::Result<Vec<Doc>> {
    let text =
        std::fs::read_to_string(corpus).with_context(|| format!("reading {}", corpus.display()))?;
    let mut out = Vec::with_capacity(count);
    for line in text.lines().take(count) {
        let doc: Value = serde_json::from_str(line)?;
        let title = doc["title"].as_str().unwrap_or_default().trim().to_owned();
        let body = doc["text"].as_str().unwrap_or_default();
        out.push(Doc {
            text: format!("{title} {body}").trim().to_owned(),
            title,
        });
    }
    anyhow::ensure!(
        out.len() == count,
        "the corpus holds fewer than {count} documents"
    );
    Ok(out)
}

/// Pieces of about `words` words from the corpus' abstracts.
pub(crate) fn pieces(corpus: &Path, count: usize, words: usize) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(corpus).with_context(|| format!("reading {}", corpus.display()))?;
    let mut out = Vec::with_capacity(count);
    for line in text.lines() {
        let doc: Value = serde_json::from_str(line)?;
        let body = doc["text"].as_str().unwrap_or_default();
        let tokens: Vec<&str> = body.split_whitespace().collect();
        for piece in tokens.chunks(words).filter(|p| p.len() == words) {
            out.push(piece.join(" "));
            if out.len() == count {
                return Ok(out);
            }
        }
    }
    bail!("the corpus holds fewer than {count} pieces of {words} words")
}

pub(crate) async fn ingest(args: IngestBench, config: Config) -> anyhow::Result<()> {
    let docs: Vec<Doc> = if args.documents > 0 {
        let mut docs = documents(&args.corpus, args.documents)?;
        if args.untitled {
            docs.iter_mut().for_each(|doc| doc.title.clear());
        }
        docs
    } else {
        pieces(&args.corpus, args.chunks, args.words)?
            .into_iter()
            .map(|text| Doc {
                title: String::new(),
                text,
            })
            .collect()
    };

    // Baseline: the model alone on the texts the pipeline embeds (each chunk with its title
    // line), in the pipeline's batch shape.
    let models = engram_app::Models::load(&config.embedding).await?;
    let chunker = engram_pipeline::Chunker::new(
        models.tokens.as_ref(),
        engram_pipeline::ChunkerOptions::default(),
    );
    let baseline_texts: Vec<String> = docs
        .iter()
        .flat_map(|doc| {
            chunker
                .chunk_text(&doc.text)
                .iter()
                .map(|chunk| engram_pipeline::embedding_text(&doc.title, chunk))
                .collect::<Vec<_>>()
        })
        .collect();
    let tokens: Vec<usize> = baseline_texts
        .iter()
        .map(|t| models.tokens.count_tokens(t))
        .collect();
    let mean_tokens = tokens.iter().sum::<usize>() as f64 / tokens.len() as f64;
    let embedder = models.embedder.clone();
    let embedded = baseline_texts.len();
    let baseline = tokio::task::spawn_blocking(move || -> anyhow::Result<Duration> {
        let started = Instant::now();
        for batch in baseline_texts.chunks(64) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            embedder.embed(&refs)?;
        }
        Ok(started.elapsed())
    })
    .await??;
    let baseline_rate = embedded as f64 / baseline.as_secs_f64();

    // The service, end to end, with the recorder that times each step of indexing.
    engram_http::install_metrics();
    let before = engram_http::render_metrics().unwrap_or_default();
    let service = Service::start(config).await?;
    let auth = service.key("bench").await?;
    service.database(&auth, "bench").await?;
    let (client, base) = (service.client.clone(), service.base.clone());

    // Poll status of already-sent ids while ingesting.
    let polling = CancellationToken::new();
    let sent_ids = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let poll_every = Duration::from_millis(args.poll_ms.max(1));
    let poller = {
        let (client, base, auth, polling, sent_ids) = (
            client.clone(),
            base.clone(),
            auth.clone(),
            polling.clone(),
            sent_ids.clone(),
        );
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !polling.is_cancelled() {
                let ids: Vec<String> = sent_ids
                    .lock()
                    .map(|v| v.iter().rev().take(10).cloned().collect())
                    .unwrap_or_default();
                if !ids.is_empty() {
                    let started = Instant::now();
                    let url = format!("{base}/context/status?database=bench&ids={}", ids.join(","));
                    if let Ok(r) = client.get(url).header("Authorization", &auth).send().await {
                        let ok = r.status().is_success();
                        let _ = r.bytes().await;
                        if ok {
                            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                }
                tokio::time::sleep(poll_every).await;
            }
            latencies
        })
    };

    let started = Instant::now();
    for (n, batch) in docs.chunks(args.per_request).enumerate() {
        let items: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(i, doc)| json!({"id": format!("p{n}_{i}"), "title": doc.title, "content": {"text": doc.text}}))
            .collect();
        let form = reqwest::multipart::Form::new()
            .text("type", "knowledge")
            .text("database", "bench")
            .text("app_knowledge", serde_json::to_string(&items)?);
        let response = client
            .post(format!("{base}/context/ingest"))
            .header("Authorization", &auth)
            .multipart(form)
            .send()
            .await?;
        anyhow::ensure!(response.status() == 202, "ingest: {}", response.status());
        if let Ok(mut ids) = sent_ids.lock() {
            ids.extend(
                items
                    .iter()
                    .filter_map(|i| i["id"].as_str().map(str::to_owned)),
            );
        }
    }
    let accepted = started.elapsed();
    // Done when every item is terminal; the batches of ids are checked in order.
    let ids: Vec<String> = sent_ids.lock().map(|v| v.clone()).unwrap_or_default();
    let mut progress = crate::progress::Progress::new("indexed items", ids.len() as u64);
    for batch in ids.chunks(100) {
        loop {
            let url = format!(
                "{base}/context/status?database=bench&ids={}",
                batch.join(",")
            );
            let status: Value = client
                .get(url)
                .header("Authorization", &auth)
                .send()
                .await?
                .json()
                .await?;
            let statuses = status["data"]["statuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let done = statuses.len() == batch.len()
                && statuses.iter().all(|s| {
                    matches!(s["indexing_status"].as_str(), Some("completed" | "errored"))
                });
            if done {
                anyhow::ensure!(
                    statuses.iter().all(|s| s["indexing_status"] == "completed"),
                    "some items errored: {statuses:?}"
                );
                progress.inc(batch.len() as u64);
                break;
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(3600),
                "ingestion did not finish"
            );
            // Finer than the run's length needs, coarse enough to cost the service nothing.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    progress.finish();
    let elapsed = started.elapsed();
    polling.cancel();
    let stats: Value = client
        .get(format!("{base}/databases/stats?database=bench"))
        .header("Authorization", &auth)
        .send()
        .await?
        .json()
        .await?;
    let chunks = stats["data"]["knowledge_collection"]["row_count"]
        .as_u64()
        .unwrap_or(0);
    let after = engram_http::render_metrics().unwrap_or_default();
    let mut latencies = poller.await?;
    latencies.sort_by(f64::total_cmp);
    service.stop().await?;

    let total = chunks;
    let rate = total as f64 / elapsed.as_secs_f64();
    let what = match (args.documents > 0, args.untitled) {
        (false, _) => "pieces",
        (true, false) => "whole titled documents",
        (true, true) => "whole documents, title field empty",
    };
    report!("engram bench ingest: {} items ({what}, SciFact) in {total} chunks, {embedded} embedded texts of {mean_tokens:.0} tokens on average, {} per request", docs.len(), args.per_request);
    report!(
        "  baseline (model alone on the texts the pipeline embeds, batches of 64): {baseline_rate:8.1} texts/s"
    );
    report!(
        "  end to end (HTTP, queue, chunk, embed, index): {rate:8.1} chunks/s  ({:.2} of baseline)",
        rate / baseline_rate
    );
    report!(
        "  all {} requests accepted in {:.2} s; indexed in {:.2} s",
        docs.len().div_ceil(args.per_request),
        accepted.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    for (what, metric) in [
        ("pipeline", "engram_indexing_stage_seconds"),
        ("indexes", "engram_index_stage_seconds"),
    ] {
        let spent: Vec<String> = stage_seconds(&after, metric)
            .into_iter()
            .map(|(stage, seconds)| {
                let earlier = stage_seconds(&before, metric)
                    .into_iter()
                    .find(|(s, _)| *s == stage)
                    .map_or(0.0, |(_, s)| s);
                format!("{stage} {:.2}", seconds - earlier)
            })
            .collect();
        report!(
            "  {what} steps, seconds summed over workers: {}",
            spent.join(", ")
        );
    }
    report!(
        "  GET /context/status during ingestion (one call every {} ms): {} calls, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.poll_ms,
        latencies.len(),
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        latencies.last().copied().unwrap_or(0.0)
    );
    Ok(())
}

/// The seconds a `*_seconds` histogram recorded per `stage`, from Prometheus' text format.
fn stage_seconds(rendered: &str, metric: &str) -> Vec<(String, f64)> {
    let prefix = format!("{metric}_sum{{stage=\"");
    rendered
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (stage, value) = rest.split_once("\"}")?;
            Some((stage.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::stage_seconds;

    #[test]
    fn stage_sums_are_read_from_the_text_format() {
        let text = "x_seconds_bucket{stage=\"embed\",le=\"1\"} 3\n\
                    x_seconds_sum{stage=\"embed\"} 12.5\n\
                    x_seconds_sum{stage=\"write\"} 0.25\n\
                    y_seconds_sum{stage=\"embed\"} 9\n";
        assert_eq!(
            stage_seconds(text, "x_seconds"),
            vec![("embed".to_owned(), 12.5), ("write".to_owned(), 0.25)]
        );
    }
}
