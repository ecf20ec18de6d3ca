//! `engram bench connectors`: a folder of files synced and indexed end to end by the `folder`
//! connector, beside the bare pipeline on the same files uploaded through `/context/ingest`; then
//! a re-sync with nothing changed; and the process' resident memory in each phase.
//!
//! Files are real text: SciFact abstracts cut into pieces of about 110 tokens (one chunk each).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};

use super::{memory, Service};
use engram_config::Config;

#[derive(clap::Args)]
pub(crate) struct ConnectorBench {
    /// SciFact corpus (corpus.jsonl).
    #[arg(long, default_value = "../shared/eval/scifact/corpus.jsonl")]
    corpus: PathBuf,
    /// Files in the folder.
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Words per file (70 words of SciFact are about 110 tokens).
    #[arg(long, default_value_t = 70)]
    words: usize,
    /// Files per upload request of the baseline.
    #[arg(long, default_value_t = 100)]
    per_request: usize,
}

/// Peak resident memory (MiB) sampled every 100 ms until `stop` is cancelled.
fn sample_memory(stop: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while !stop.is_cancelled() {
            peak = peak.max(memory().0);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peak
    })
}

/// Waits until every item of `database` (`expected` of them) is `completed`.
async fn indexed(
    service: &Service,
    auth: &str,
    database: &str,
    expected: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(7200);
    loop {
        let stats: Value = service
            .client
            .get(format!(
                "{}/databases/stats?database={database}",
                service.base
            ))
            .header("Authorization", auth)
            .send()
            .await?
            .json()
            .await?;
        let listed: Value = service
            .client
            .post(format!("{}/context/list", service.base))
            .header("Authorization", auth)
            .json(&json!({"database": database, "page_size": 1}))
            .send()
            .await?
            .json()
            .await?;
        let total = listed["data"]["total"].as_u64().unwrap_or(0) as usize;
        let chunks = stats["data"]["knowledge_collection"]["row_count"]
            .as_u64()
            .unwrap_or(0) as usize;
        // One chunk per file: every file indexed once the chunks are all there.
        if total >= expected && chunks >= expected {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "indexing {database} did not finish"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs of a connector that ended, newest first.
async fn runs(service: &Service, auth: &str, id: &str) -> anyhow::Result<Vec<Value>> {
    let status: Value = service
        .client
        .get(format!("{}/connectors/{id}/status", service.base))
        .header("Authorization", auth)
        .send()
        .await?
        .json()
        .await?;
    Ok(status["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| matches!(r["state"].as_str(), Some("succeeded" | "failed")))
        .collect())
}

async fn wait_run(service: &Service, auth: &str, id: &str, before: usize) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let done = runs(service, auth, id).await?;
        if done.len() > before {
            return Ok(done[0].clone());
        }
        anyhow::ensure!(Instant::now() < deadline, "the sync did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn connectors(args: ConnectorBench, mut config: Config) -> anyhow::Result<()> {
    let texts = super::ingest::pieces(&args.corpus, args.files, args.words)?;
    let root = std::env::temp_dir().join(format!("engram-bench-folder-{}", std::process::id()));
    let folder = root.join("docs");
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    for (i, text) in texts.iter().enumerate() {
        // A hundred files per directory, as real trees hold them.
        let dir = folder.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("f{i:06}.txt")), text)?;
    }
    config.connectors.folder_roots = vec![root.clone()];
    let service = Service::start(config).await?;
    let auth = service.key("bench").await?;
    service.database(&auth, "bare").await?;
    service.database(&auth, "synced").await?;
    let (client, base) = (service.client.clone(), service.base.clone());
    let idle = memory().0;

    // Baseline: the same files uploaded through the bare ingestion path.
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = sample_memory(stop.clone());
    let started = Instant::now();
    for (n, batch) in texts.chunks(args.per_request).enumerate() {
        let mut form = reqwest::multipart::Form::new()
            .text("type", "knowledge")
            .text("database", "bare");
        for (i, text) in batch.iter().enumerate() {
            let part = reqwest::multipart::Part::bytes(text.clone().into_bytes())
                .file_name(format!("f{:06}.txt", n * args.per_request + i));
            form = form.part("documents", part);
        }
        let response = client
            .post(format!("{base}/context/ingest"))
            .header("Authorization", &auth)
            .multipart(form)
            .send()
            .await?;
        anyhow::ensure!(response.status() == 202, "upload: {}", response.status());
    }
    indexed(&service, &auth, "bare", texts.len()).await?;
    let bare = started.elapsed();
    stop.cancel();
    let bare_peak = sampler.await?;

    // The connector: create, configure, and wait until every file is an indexed item.
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = sample_memory(stop.clone());
    let started = Instant::now();
    let created: Value = client
        .post(format!("{base}/connectors"))
        .header("Authorization", &auth)
        .json(&json!({"provider": "folder", "database": "synced"}))
        .send()
        .await?
        .json()
        .await?;
    let id = created["connector_id"]
        .as_str()
        .context("connector_id")?
        .to_owned();
    let configured = client
        .post(format!("{base}/connectors/{id}/configure"))
        .header("Authorization", &auth)
        .json(&json!({"resources": [{"resource_id": folder.display().to_string()}]}))
        .send()
        .await?;
    anyhow::ensure!(
        configured.status() == 200,
        "configure: {}",
        configured.status()
    );
    let first = wait_run(&service, &auth, &id, 0).await?;
    let dispatched = started.elapsed();
    indexed(&service, &auth, "synced", texts.len()).await?;
    let synced = started.elapsed();
    stop.cancel();
    let sync_peak = sampler.await?;
    anyhow::ensure!(
        first["added"].as_u64() == Some(texts.len() as u64),
        "the first sync added {} of {} files",
        first["added"],
        texts.len()
    );

    // A re-sync with nothing changed.
    let started = Instant::now();
    let asked = client
        .post(format!("{base}/connectors/{id}/sync"))
        .header("Authorization", &auth)
        .send()
        .await?;
    anyhow::ensure!(asked.status() == 202, "sync: {}", asked.status());
    let again = wait_run(&service, &auth, &id, 1).await?;
    let resync = started.elapsed();
    let changed = again["added"].as_u64().unwrap_or(0) + again["updated"].as_u64().unwrap_or(0);
    service.stop().await?;
    let _ = std::fs::remove_dir_all(&root);

    let n = texts.len() as f64;
    let (bare_rate, sync_rate) = (n / bare.as_secs_f64(), n / synced.as_secs_f64());
    report!("engram bench connectors: a folder of {} text files of about 110 tokens (SciFact), one chunk each", texts.len());
    report!(
        "  baseline (the same files uploaded, {} per request): {bare_rate:8.1} files/s  ({:.1} s)",
        args.per_request,
        bare.as_secs_f64()
    );
    report!(
        "  folder connector, synced and indexed:            {sync_rate:8.1} files/s  ({:.1} s; the sync itself dispatched them in {:.1} s)  {:.2} of baseline",
        synced.as_secs_f64(),
        dispatched.as_secs_f64(),
        sync_rate / bare_rate
    );
    report!(
        "  re-sync with nothing changed: {:.2} s, {changed} objects dispatched again",
        resync.as_secs_f64()
    );
    report!("  resident memory: idle {idle} MiB, peak while uploading {bare_peak} MiB, peak while syncing {sync_peak} MiB");
    Ok(())
}
