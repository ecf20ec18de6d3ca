//! `engram bench connectors`: documents synced and indexed end to end by a connector, beside the
//! bare pipeline on the same documents uploaded through `/context/ingest`; then a re-sync with
//! nothing changed; and the process' resident memory in each phase. The source is a folder of
//! files (`folder`), or a hosted provider's fake holding the same texts (`--provider github`:
//! files of a repository; `drive`: files of My Drive; `notion`: pages of a workspace; `slack`:
//! messages of a channel), served on loopback by `engram-fakes` with its exchange log off. A
//! Notion sync is paced to Notion's three requests a second (two requests a page), so its rate
//! is that bound's, whatever engram does.
//!
//! Documents are real text: SciFact abstracts cut into pieces of `--words` words (70 by
//! default, about 110 tokens; one chunk each).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};

use super::{memory, Service};
use engram_config::Config;
use engram_fakes::{github::GitHubFake, google::GoogleFake, notion::NotionFake, slack::SlackFake};

/// Where the connector syncs from.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Provider {
    /// A folder on disk (`folder`).
    Folder,
    /// A GitHub repository's files (`github`).
    Github,
    /// Files of a Google Drive (`google_drive`).
    Drive,
    /// Pages of a Notion workspace (`notion`).
    Notion,
    /// Messages of a Slack channel (`slack`).
    Slack,
}

impl Provider {
    /// The token its fake accepts, in the form the provider's credentials take.
    fn token(self) -> &'static str {
        match self {
            Self::Folder => "",
            Self::Github => "ghp_bench000000000000000000000000000001",
            Self::Drive => "ya29.bench-0001",
            Self::Notion => "ntn_bench0000000000000000000000000001",
            Self::Slack => "xoxb-bench-0001",
        }
    }
}

/// A source filled with the benchmark's texts, and what it holds alive (a fake serves until
/// dropped; a folder is removed when the benchmark ends).
enum Source {
    Folder(PathBuf),
    Github(GitHubFake),
    Drive(GoogleFake),
    Notion(NotionFake),
    Slack(SlackFake),
}

impl Source {
    async fn fill(
        provider: Provider,
        texts: &[String],
        config: &mut Config,
    ) -> anyhow::Result<Self> {
        Ok(match provider {
            Provider::Folder => {
                let root = std::env::temp_dir()
                    .join(format!("engram-bench-folder-{}", std::process::id()));
                let folder = root.join("docs");
                for (i, text) in texts.iter().enumerate() {
                    // A hundred files per directory, as real trees hold them.
                    let dir = folder.join(format!("d{:03}", i / 100));
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    std::fs::write(dir.join(format!("f{i:06}.txt")), text)?;
                }
                config.connectors.folder_roots = vec![root.clone()];
                Self::Folder(root)
            }
            Provider::Github => {
                let fake = GitHubFake::start(Provider::Github.token()).await;
                fake.add_repo("bench/docs", false);
                for (i, text) in texts.iter().enumerate() {
                    fake.put_file(
                        "bench/docs",
                        &format!("d{:03}/f{i:06}.md", i / 100),
                        text.as_bytes(),
                    );
                }
                fake.set_logging(false);
                Self::Github(fake)
            }
            Provider::Drive => {
                let fake =
                    GoogleFake::start(Provider::Drive.token(), "bench@example.com", 1000).await;
                for (i, text) in texts.iter().enumerate() {
                    fake.add_file(
                        None,
                        &format!("f{i:06}.txt"),
                        "text/plain",
                        text.as_bytes(),
                        &[],
                    );
                }
                fake.set_logging(false);
                Self::Drive(fake)
            }
            Provider::Notion => {
                use engram_fakes::notion::Parent;
                let fake = NotionFake::start(Provider::Notion.token(), 100).await;
                // One page shared with the integration, the documents its subpages.
                let root = fake.add_page(Parent::Workspace, "Bench");
                for (i, text) in texts.iter().enumerate() {
                    let page = fake.add_page(Parent::Page(root.clone()), &format!("Page {i:06}"));
                    fake.append(
                        &page,
                        "paragraph",
                        engram_fakes::notion::body("paragraph", text),
                    );
                }
                fake.set_logging(false);
                Self::Notion(fake)
            }
            Provider::Slack => {
                let fake = SlackFake::start(Provider::Slack.token(), 1000).await;
                let user = fake.add_user("Ana", "ana@example.com");
                let channel = fake.add_channel("bench", false, true, &[&user]);
                for text in texts {
                    fake.post(&channel, &user, text, None);
                }
                fake.set_logging(false);
                Self::Slack(fake)
            }
        })
    }

    /// The body of `POST /connectors` for `database`.
    fn create(&self, database: &str) -> Value {
        let hosted = |provider: &str, kind: Provider, field: &str, api_url: String| {
            json!({"provider": provider, "database": database,
                   "credentials": {field: kind.token(), "api_url": api_url}})
        };
        match self {
            Self::Folder(_) => json!({"provider": "folder", "database": database}),
            Self::Github(fake) => hosted("github", Provider::Github, "token", fake.api_url()),
            Self::Drive(fake) => hosted(
                "google_drive",
                Provider::Drive,
                "access_token",
                fake.api_url(),
            ),
            Self::Notion(fake) => hosted("notion", Provider::Notion, "token", fake.api_url()),
            Self::Slack(fake) => hosted("slack", Provider::Slack, "token", fake.api_url()),
        }
    }

    /// The resources to sync, from those discovery offers.
    fn resources(&self, discovered: &[Value]) -> Vec<Value> {
        match self {
            Self::Folder(root) => {
                vec![json!({"resource_id": root.join("docs").display().to_string()})]
            }
            // The repository's files, not its issues.
            Self::Github(_) => discovered
                .iter()
                .filter(|r| r["id"] == "bench/docs")
                .map(|r| json!({"resource_id": r["id"]}))
                .collect(),
            Self::Drive(_) | Self::Notion(_) | Self::Slack(_) => discovered
                .iter()
                .map(|r| json!({"resource_id": r["id"]}))
                .collect(),
        }
    }

    fn needs_discovery(&self) -> bool {
        !matches!(self, Self::Folder(_))
    }

    fn remove(self) {
        if let Self::Folder(root) = self {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

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
    /// Where the connector syncs from.
    #[arg(long, value_enum, default_value_t = Provider::Folder)]
    provider: Provider,
}

/// Peak resident memory and peak anonymous resident memory (MiB), sampled every 100 ms until
/// `stop` is cancelled.
fn sample_memory(stop: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<(u64, u64)> {
    tokio::spawn(async move {
        let (mut peak, mut anonymous) = (0, 0);
        while !stop.is_cancelled() {
            peak = peak.max(memory().0);
            anonymous = anonymous.max(super::anonymous_memory());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (peak, anonymous)
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
    config.outbound_allow_private = true;
    let source = Source::fill(args.provider, &texts, &mut config).await?;
    let service = Service::start(config).await?;
    let auth = service.key("bench").await?;
    service.database(&auth, "bare").await?;
    service.database(&auth, "synced").await?;
    let (client, base) = (service.client.clone(), service.base.clone());
    let idle = (memory().0, super::anonymous_memory());

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
    // What the uploaded database holds from here on (its indexes stay in memory): the sync's
    // growth is measured from it.
    let uploaded = (memory().0, super::anonymous_memory());

    // The connector: create, configure, and wait until every file is an indexed item.
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = sample_memory(stop.clone());
    let started = Instant::now();
    let created: Value = client
        .post(format!("{base}/connectors"))
        .header("Authorization", &auth)
        .json(&source.create("synced"))
        .send()
        .await?
        .json()
        .await?;
    let id = created["connector_id"]
        .as_str()
        .with_context(|| format!("connector_id: {created}"))?
        .to_owned();
    let discovered = if source.needs_discovery() {
        let found: Value = client
            .get(format!("{base}/connectors/{id}/discover"))
            .header("Authorization", &auth)
            .send()
            .await?
            .json()
            .await?;
        found["resources"].as_array().cloned().unwrap_or_default()
    } else {
        Vec::new()
    };
    let resources = source.resources(&discovered);
    anyhow::ensure!(
        !resources.is_empty(),
        "nothing to sync among {discovered:?}"
    );
    let configured = client
        .post(format!("{base}/connectors/{id}/configure"))
        .header("Authorization", &auth)
        .json(&json!({ "resources": resources }))
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
    // A Notion workspace's root page is a document of its own.
    let holders = u64::from(matches!(source, Source::Notion(_)));
    anyhow::ensure!(
        first["added"].as_u64() == Some(texts.len() as u64 + holders),
        "the first sync added {} of {} documents",
        first["added"],
        texts.len() as u64 + holders
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
    source.remove();

    let n = texts.len() as f64;
    let (bare_rate, sync_rate) = (n / bare.as_secs_f64(), n / synced.as_secs_f64());
    // SciFact's words are about 11 tokens in 7 (70 words, 110 tokens).
    report!(
        "engram bench connectors --provider {:?}: {} documents of {} words of SciFact (about {} tokens), one chunk each",
        args.provider,
        texts.len(),
        args.words,
        args.words * 11 / 7
    );
    report!(
        "  baseline (the same files uploaded, {} per request): {bare_rate:8.1} files/s  ({:.1} s)",
        args.per_request,
        bare.as_secs_f64()
    );
    report!(
        "  the connector, synced and indexed:               {sync_rate:8.1} files/s  ({:.1} s; the sync itself dispatched them in {:.1} s)  {:.2} of baseline",
        synced.as_secs_f64(),
        dispatched.as_secs_f64(),
        sync_rate / bare_rate
    );
    report!(
        "  re-sync with nothing changed: {:.2} s, {changed} objects dispatched again",
        resync.as_secs_f64()
    );
    let grew = |peak: u64, from: u64| peak.saturating_sub(from);
    report!(
        "  resident memory: idle {} MiB, peak while uploading {} MiB (+{} over idle), peak while syncing {} MiB (+{} over the {} MiB held after the upload)",
        idle.0,
        bare_peak.0,
        grew(bare_peak.0, idle.0),
        sync_peak.0,
        grew(sync_peak.0, uploaded.0),
        uploaded.0
    );
    report!(
        "  of it anonymous (heaps, without mapped index files): idle {} MiB, uploading {} MiB (+{}), syncing {} MiB (+{} over {} MiB)",
        idle.1,
        bare_peak.1,
        grew(bare_peak.1, idle.1),
        sync_peak.1,
        grew(sync_peak.1, uploaded.1),
        uploaded.1
    );
    Ok(())
}
