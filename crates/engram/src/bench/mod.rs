//! `engram bench`: throughput and latency of the real service, each beside a baseline run side
//! by side (ingestion, queries at scale, webhook deliveries, parsing).

pub(crate) mod connectors;
pub(crate) mod console;
pub(crate) mod fairness;
pub(crate) mod ingest;
pub(crate) mod parse;
pub(crate) mod query;
pub(crate) mod webhooks;

/// The `p`-th percentile of sorted samples (nearest rank).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The process' resident memory and its peak, in MiB.
pub(crate) fn memory() -> (u64, u64) {
    (status_mib("VmRSS:"), status_mib("VmHWM:"))
}

/// The process's anonymous resident memory (MiB): its heaps and stacks, without the pages of
/// files it maps (the indexes' segments), which the kernel can drop.
pub(crate) fn anonymous_memory() -> u64 {
    status_mib("RssAnon:")
}

/// A field of `/proc/self/status` in MiB (0 where it cannot be read).
fn status_mib(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// The real service for a benchmark: the app over a temporary data directory, its workers and
/// its HTTP server on a loopback port, reached with `reqwest`.
pub(crate) struct Service {
    pub base: String,
    pub client: reqwest::Client,
    app: engram_app::App,
    token: tokio_util::sync::CancellationToken,
    workers: engram_app::Workers,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    data_dir: std::path::PathBuf,
}

impl Service {
    /// Starts the service on `config` with a fresh data directory and no rate limit.
    pub(crate) async fn start(mut config: engram_config::Config) -> anyhow::Result<Self> {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let data_dir =
            std::env::temp_dir().join(format!("engram-bench-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&data_dir)?;
        config.data_dir = data_dir.clone();
        config.listen = "127.0.0.1:0".parse()?;
        config.rate_limit.enabled = false;
        let app = engram_app::App::open(config.clone()).await?;
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let base = format!("http://{}", listener.local_addr()?);
        let token = tokio_util::sync::CancellationToken::new();
        let workers = app.start_workers(token.child_token());
        let server = tokio::spawn(engram_http::serve(
            listener,
            app.clone(),
            token.clone().cancelled_owned(),
        ));
        Ok(Self {
            base,
            client: reqwest::Client::new(),
            app,
            token,
            workers,
            server,
            data_dir,
        })
    }

    /// A new key of `org`, as its `Authorization` header value.
    pub(crate) async fn key(&self, org: &str) -> anyhow::Result<String> {
        let key = self
            .app
            .create_key(engram_app::KeySpec {
                org: org.into(),
                ..engram_app::KeySpec::default()
            })
            .await?;
        Ok(format!("Bearer {}", key.token))
    }

    /// Creates database `name` and waits until it is ready.
    pub(crate) async fn database(&self, auth: &str, name: &str) -> anyhow::Result<()> {
        let created = self
            .client
            .post(format!("{}/databases", self.base))
            .header("Authorization", auth)
            .json(&serde_json::json!({"database": name}))
            .send()
            .await?;
        anyhow::ensure!(
            created.status() == 202,
            "creating the database: {}",
            created.status()
        );
        for _ in 0..500 {
            let status: serde_json::Value = self
                .client
                .get(format!("{}/databases/status?database={name}", self.base))
                .header("Authorization", auth)
                .send()
                .await?
                .json()
                .await?;
            if status["data"]["infra"]["ready_for_ingestion"] == true {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        anyhow::bail!("database {name} never became ready")
    }

    /// Stops the server and the workers and removes the data directory.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        self.token.cancel();
        self.server.await??;
        self.workers
            .shutdown(std::time::Duration::from_secs(10))
            .await;
        self.app.close().await;
        let _ = std::fs::remove_dir_all(&self.data_dir);
        Ok(())
    }
}
