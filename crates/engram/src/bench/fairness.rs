//! `engram bench fairness`: how long one organization's small items take to reach `completed`
//! while another organization floods the service with large files, beside the same small items
//! on an idle service. Fair indexing keeps the two close: work is taken in turns across
//! organizations, and one organization never occupies every worker.
//!
//! Texts are real: SciFact abstracts, as small items (one chunk each) and joined into large
//! text files. With `--scanned`, the flood is instead one scanned PDF (pages without a text
//! layer, each read by OCR) whose pages `qpdf` repeats to `--scanned-pages` (the page budget's
//! 200 by default); it is deleted once the small items are done, which stops its OCR.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use engram_config::Config;
use serde_json::{json, Value};

use super::{percentile, Service};

#[derive(clap::Args)]
pub(crate) struct FairnessBench {
    /// SciFact corpus (corpus.jsonl).
    #[arg(long, default_value = "../shared/eval/scifact/corpus.jsonl")]
    corpus: PathBuf,
    /// Large files the flooding organization sends at once.
    #[arg(long, default_value_t = 6)]
    flood_files: usize,
    /// Size of each large file, in KiB of text.
    #[arg(long, default_value_t = 512)]
    flood_kib: usize,
    /// Small items the other organization sends, one at a time.
    #[arg(long, default_value_t = 20)]
    small: usize,
    /// Pause between two small items (ms).
    #[arg(long, default_value_t = 500)]
    every_ms: u64,
    /// Flood with one scanned PDF instead of text files, e.g.
    /// `../shared/eval/parsing/markitdown/test_files/MEDRPT-2024-PAT-3847_medical_report_scan.pdf`.
    #[arg(long)]
    scanned: Option<PathBuf>,
    /// Pages of the scanned PDF (its own pages, repeated).
    #[arg(long, default_value_t = 200)]
    scanned_pages: usize,
}

/// `pages` pages of the PDF at `source`, its own repeated in order, made by `qpdf`.
fn repeated_pdf(source: &std::path::Path, pages: usize) -> anyhow::Result<Vec<u8>> {
    let counted = std::process::Command::new("qpdf")
        .arg("--show-npages")
        .arg(source)
        .output()
        .context("running qpdf (make setup-test installs it)")?;
    anyhow::ensure!(
        counted.status.success(),
        "qpdf could not read {}",
        source.display()
    );
    let own: usize = String::from_utf8_lossy(&counted.stdout).trim().parse()?;
    anyhow::ensure!(own > 0 && pages > 0, "no pages");
    let out = std::env::temp_dir().join(format!("engram-fairness-scan-{}.pdf", std::process::id()));
    let mut qpdf = std::process::Command::new("qpdf");
    qpdf.arg("--empty").arg("--pages");
    for start in (0..pages).step_by(own) {
        qpdf.arg(source)
            .arg(format!("1-{}", own.min(pages - start)));
    }
    let made = qpdf.arg("--").arg(&out).status()?;
    anyhow::ensure!(made.success(), "qpdf could not write {}", out.display());
    let bytes = std::fs::read(&out)?;
    std::fs::remove_file(&out)?;
    Ok(bytes)
}

/// The corpus' abstracts, in order.
fn abstracts(corpus: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(corpus).with_context(|| format!("reading {}", corpus.display()))?;
    text.lines()
        .map(|line| {
            let doc: Value = serde_json::from_str(line)?;
            Ok(doc["text"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// Sends one small item of `org` and returns the time from sending it to `completed`.
async fn small_item(
    service: &Service,
    auth: &str,
    database: &str,
    id: &str,
    text: &str,
) -> anyhow::Result<Duration> {
    let items = json!([{"id": id, "title": "", "content": {"text": text}}]);
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", database.to_owned())
        .text("app_knowledge", items.to_string());
    let started = Instant::now();
    let response = service
        .client
        .post(format!("{}/context/ingest", service.base))
        .header("Authorization", auth)
        .multipart(form)
        .send()
        .await?;
    anyhow::ensure!(response.status() == 202, "ingest: {}", response.status());
    let url = format!(
        "{}/context/status?database={database}&ids={id}",
        service.base
    );
    loop {
        let status: Value = service
            .client
            .get(&url)
            .header("Authorization", auth)
            .send()
            .await?
            .json()
            .await?;
        match status["data"]["statuses"][0]["indexing_status"].as_str() {
            Some("completed") => return Ok(started.elapsed()),
            Some("errored") => anyhow::bail!("small item {id} errored: {status}"),
            _ => {}
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "small item {id} never completed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends the small items one every `every`, each timed to `completed`, sorted (ms).
async fn small_items(
    service: &Service,
    auth: &str,
    database: &str,
    texts: &[String],
    every: Duration,
) -> anyhow::Result<Vec<f64>> {
    let mut latencies = Vec::with_capacity(texts.len());
    let mut progress =
        crate::progress::Progress::new(&format!("{database} items"), texts.len() as u64);
    for (i, text) in texts.iter().enumerate() {
        let sent = Instant::now();
        let took = small_item(service, auth, database, &format!("{database}-{i}"), text).await?;
        latencies.push(took.as_secs_f64() * 1000.0);
        progress.inc(1);
        tokio::time::sleep(every.saturating_sub(sent.elapsed())).await;
    }
    progress.finish();
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// The indexing state of one item.
async fn status_of(service: &Service, auth: &str, database: &str, id: &str) -> String {
    let url = format!(
        "{}/context/status?database={database}&ids={id}",
        service.base
    );
    let status: Value = match service
        .client
        .get(url)
        .header("Authorization", auth)
        .send()
        .await
    {
        Ok(response) => response.json().await.unwrap_or_default(),
        Err(_) => Value::Null,
    };
    status["data"]["statuses"][0]["indexing_status"]
        .as_str()
        .unwrap_or("unknown")
        .to_owned()
}

/// How many of `ids` are `completed`.
async fn completed(service: &Service, auth: &str, database: &str, ids: &[String]) -> usize {
    let url = format!(
        "{}/context/status?database={database}&ids={}",
        service.base,
        ids.join(",")
    );
    let Ok(response) = service
        .client
        .get(url)
        .header("Authorization", auth)
        .send()
        .await
    else {
        return 0;
    };
    let status: Value = response.json().await.unwrap_or_default();
    status["data"]["statuses"].as_array().map_or(0, |s| {
        s.iter()
            .filter(|s| s["indexing_status"] == "completed")
            .count()
    })
}

/// The report's lines on the small items: idle, and beside `beside`.
fn report_latencies(
    args: &FairnessBench,
    workers: u32,
    idle: &[f64],
    loaded: &[f64],
    beside: &str,
) {
    report!(
        "engram bench fairness: {} small items (one SciFact abstract each), one every {} ms, {workers} workers",
        args.small, args.every_ms
    );
    report!("  small items, idle service:             {}", summary(idle));
    report!("  small items, beside {beside}:");
    report!(
        "                                         {}",
        summary(loaded)
    );
}

fn summary(latencies: &[f64]) -> String {
    format!(
        "p50 {:8.0} ms   p99 {:8.0} ms   max {:8.0} ms",
        percentile(latencies, 50.0),
        percentile(latencies, 99.0),
        latencies.last().copied().unwrap_or(0.0)
    )
}

pub(crate) async fn fairness(args: FairnessBench, config: Config) -> anyhow::Result<()> {
    let texts = abstracts(&args.corpus)?;
    anyhow::ensure!(texts.len() > args.small, "the corpus is too small");
    let small_texts: Vec<String> = texts.iter().take(args.small).cloned().collect();
    let mut flood_text = String::new();
    for text in texts.iter().skip(args.small).cycle() {
        if flood_text.len() >= args.flood_kib * 1024 {
            break;
        }
        flood_text.push_str(text);
        flood_text.push_str("\n\n");
    }
    let every = Duration::from_millis(args.every_ms);
    let workers = config.pipeline.workers;

    let service = Service::start(config).await?;
    let flooder = service.key("org-flood").await?;
    let small = service.key("org-small").await?;
    service.database(&flooder, "flood").await?;
    service.database(&small, "idle").await?;
    service.database(&small, "small").await?;

    // Baseline: the small items on the idle service.
    let idle = small_items(&service, &small, "idle", &small_texts, every).await?;

    // The flood: every large file in one request, then the same small items beside it.
    let mut form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "flood");
    let mut metadata = Vec::new();
    let flood_files = if args.scanned.is_some() {
        1
    } else {
        args.flood_files
    };
    for i in 0..flood_files {
        let part = match &args.scanned {
            Some(scan) => reqwest::multipart::Part::bytes(repeated_pdf(scan, args.scanned_pages)?)
                .file_name("scan.pdf")
                .mime_str("application/pdf")?,
            None => reqwest::multipart::Part::bytes(flood_text.clone().into_bytes())
                .file_name(format!("large-{i}.txt"))
                .mime_str("text/plain")?,
        };
        form = form.part("documents", part);
        metadata.push(json!({"id": format!("large-{i}")}));
    }
    form = form.text("document_metadata", Value::from(metadata).to_string());
    let flood_started = Instant::now();
    let response = service
        .client
        .post(format!("{}/context/ingest", service.base))
        .header("Authorization", &flooder)
        .multipart(form)
        .send()
        .await?;
    anyhow::ensure!(response.status() == 202, "flood: {}", response.status());
    let flood_ids: Vec<String> = (0..flood_files).map(|i| format!("large-{i}")).collect();
    let loaded = small_items(&service, &small, "small", &small_texts, every).await?;
    let flood_done_then = completed(&service, &flooder, "flood", &flood_ids).await;
    if args.scanned.is_some() {
        // The scan's OCR outlasts the small items by far: it is deleted, which stops it.
        let state = status_of(&service, &flooder, "flood", "large-0").await;
        let deleted = service
            .client
            .delete(format!("{}/context", service.base))
            .header("Authorization", &flooder)
            .json(&json!({"database": "flood", "ids": ["large-0"], "type": "knowledge"}))
            .send()
            .await?;
        anyhow::ensure!(
            deleted.status().is_success(),
            "delete: {}",
            deleted.status()
        );
        let took = flood_started.elapsed();
        service.stop().await?;
        report_latencies(
            &args,
            workers,
            &idle,
            &loaded,
            &format!(
                "another organization's scanned PDF of {} pages being read by OCR",
                args.scanned_pages
            ),
        );
        report!(
            "  p50 ratio loaded/idle {:.2}; the scan was {state} when the small items were done ({:.1} s after it was sent), then deleted",
            percentile(&loaded, 50.0) / percentile(&idle, 50.0).max(f64::EPSILON),
            took.as_secs_f64()
        );
        return Ok(());
    }
    let mut progress = crate::progress::Progress::new("flood files", flood_ids.len() as u64);
    loop {
        let done = completed(&service, &flooder, "flood", &flood_ids).await;
        progress.set(done as u64);
        if done >= flood_ids.len() {
            break;
        }
        anyhow::ensure!(
            flood_started.elapsed() < Duration::from_secs(3600),
            "the flood never finished"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    progress.finish();
    let flood_took = flood_started.elapsed();
    service.stop().await?;

    report_latencies(
        &args,
        workers,
        &idle,
        &loaded,
        &format!(
            "a flood of {} x {} KiB files of another organization",
            args.flood_files, args.flood_kib
        ),
    );
    report!(
        "  p50 ratio loaded/idle {:.2}; the flood's files: {flood_done_then} of {} done when the small items were, all in {:.1} s",
        percentile(&loaded, 50.0) / percentile(&idle, 50.0).max(f64::EPSILON),
        args.flood_files,
        flood_took.as_secs_f64()
    );
    Ok(())
}
