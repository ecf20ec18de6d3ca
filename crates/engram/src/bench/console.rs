//! `engram bench console`: the console's pages at size. A database of `--items` items (default
//! 100,000, queued: the workers are stopped once the database is provisioned, so nothing but the
//! listing is timed), then each page fetched `--requests` times through the real HTTP server
//! with a signed-in session, beside the API's own listing of the same page (`POST /context/list`,
//! the baseline): server time per page (loopback, so the request's own transfer is negligible),
//! p50 and p99, and the ratio to the baseline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use engram_app::{App, AppSource};
use engram_config::Config;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bench::percentile;

#[derive(clap::Args)]
pub(crate) struct ConsoleBench {
    /// Items in the database.
    #[arg(long, default_value_t = 100_000)]
    items: usize,
    /// Requests timed per page.
    #[arg(long, default_value_t = 50)]
    requests: usize,
}

pub(crate) async fn console(args: ConsoleBench, mut config: Config) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("engram-bench-console-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    config.data_dir = dir.clone();
    config.rate_limit.enabled = false;
    let store = engram_app::open_store(&config).await?;
    let app = App::with_store(
        config.clone(),
        store,
        Arc::new(engram_app::SystemClock),
        None,
    )?;
    let (who, bearer) = crate::eval::principal(&app, "bench").await?;
    // The workers provision the database, then stop: the items stay queued.
    let token = CancellationToken::new();
    let workers = app.start_workers(token.child_token());
    let (db, _) = crate::eval::ready_database(&app, &who, "bench").await?;
    token.cancel();
    workers.shutdown(Duration::from_secs(10)).await;

    let started = Instant::now();
    let mut progress = crate::progress::Progress::new("items", args.items as u64);
    for (n, batch) in (0..args.items).collect::<Vec<_>>().chunks(100).enumerate() {
        let sources = batch
            .iter()
            .map(|i| AppSource {
                id: Some(format!("item-{i:06}")),
                title: format!("Document {i}"),
                text: format!("The text of document {i}."),
                attachments: json!([]),
                relations: json!({}),
                ..AppSource::default()
            })
            .collect();
        crate::eval::ingest_app(&app, &who, &db, sources).await?;
        progress.set(((n + 1) * 100).min(args.items) as u64);
    }
    progress.finish();
    report!(
        "console: {} items written in {:.1} s",
        args.items,
        started.elapsed().as_secs_f64()
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let stop = CancellationToken::new();
    let server = tokio::spawn(engram_http::serve(
        listener,
        app.clone(),
        stop.clone().cancelled_owned(),
    ));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let signed_in = client
        .post(format!("{base}/console/sign-in"))
        .form(&[("key", bearer.as_str())])
        .send()
        .await?;
    let cookie = signed_in
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("signing in set no cookie")?
        .to_owned();
    let last = args.items.div_ceil(25);
    let pages = [
        ("databases", "/console/databases".to_owned(), None),
        (
            "database, first page of items",
            "/console/databases/bench".to_owned(),
            Some(json!({"database": "bench", "page": 1, "page_size": 25})),
        ),
        (
            "database, last page of items",
            format!("/console/databases/bench?page={last}"),
            Some(json!({"database": "bench", "page": last, "page_size": 25})),
        ),
        (
            "an item",
            "/console/databases/bench/items/item-000001?collection=bench".to_owned(),
            None,
        ),
    ];
    report!(
        "console pages, {} items, {} requests each (p50 / p99 ms; baseline: POST /context/list of the same page):",
        args.items,
        args.requests
    );
    for (name, path, baseline) in pages {
        let page = time(args.requests, || {
            client
                .get(format!("{base}{path}"))
                .header(reqwest::header::COOKIE, &cookie)
                .send()
        })
        .await?;
        match baseline {
            Some(body) => {
                let api = time(args.requests, || {
                    client
                        .post(format!("{base}/context/list"))
                        .header("Authorization", format!("Bearer {bearer}"))
                        .json(&body)
                        .send()
                })
                .await?;
                report!(
                    "  {name}: {:.1} / {:.1} ms; API {:.1} / {:.1} ms; ratio {:.2}",
                    page.0,
                    page.1,
                    api.0,
                    api.1,
                    page.0 / api.0.max(0.001)
                );
            }
            None => report!("  {name}: {:.1} / {:.1} ms", page.0, page.1),
        }
    }
    stop.cancel();
    server.await??;
    app.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// p50 and p99 of `count` requests (after 3 to warm up), in ms; each must answer 200.
async fn time<F, Fut>(count: usize, mut send: F) -> anyhow::Result<(f64, f64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = reqwest::Result<reqwest::Response>>,
{
    let mut samples = Vec::with_capacity(count);
    for n in 0..count + 3 {
        let at = Instant::now();
        let response = send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        anyhow::ensure!(
            status == 200,
            "answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
        if n >= 3 {
            samples.push(at.elapsed().as_secs_f64() * 1000.0);
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok((percentile(&samples, 50.0), percentile(&samples, 99.0)))
}
