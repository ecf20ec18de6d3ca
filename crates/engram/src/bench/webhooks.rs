//! `engram bench webhooks`: delivery throughput and delay with the real store, outbox and
//! dispatcher, to a receiver on loopback, beside a baseline of plain POSTs to the same receiver.
//!
//! 1. Baseline: `--events` POSTs of an event-sized body by a plain HTTP client, `--concurrency`
//!    at a time: what the receiver and loopback allow.
//! 2. Backlog: `--events` terminal states are stored first (each writes its outbox row), then the
//!    dispatcher starts; deliveries per second until the receiver has every event.
//! 3. Delay: with the dispatcher running, items reach a terminal state one by one (`--rate` per
//!    second, waking the dispatcher as the pipeline does); the delay from the committed terminal
//!    state to the event's arrival at the receiver, p50 and p99.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::body::Bytes;
use axum::extract::State;
use engram_store::sqlite::SqliteStore;
use engram_store::{
    ClaimRequest, ClaimedItem, DatabaseStore, ItemFields, ItemOrigin, ItemStore, NewDatabase,
    NewItem, SecretChange, Store, WebhookStore, WorkQueue,
};
use engram_types::{Clock, CollectionName, DatabaseId, DatabaseName, ItemKind, OrgId, SystemClock};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::bench::percentile;

#[derive(clap::Args)]
pub(crate) struct WebhookBench {
    /// Events per phase.
    #[arg(long, default_value_t = 2000)]
    events: usize,
    /// Deliveries in flight at once (the dispatcher's `webhooks.concurrency`).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Terminal states per second in the delay phase.
    #[arg(long, default_value_t = 200)]
    rate: u32,
}

/// Arrival instants by item id.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

async fn receive(State(arrivals): State<Arrivals>, body: Bytes) -> axum::http::StatusCode {
    let at = Instant::now();
    let id = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    if let Ok(mut arrivals) = arrivals.lock() {
        arrivals.entry(id).or_insert(at);
    }
    axum::http::StatusCode::NO_CONTENT
}

async fn start_receiver(arrivals: Arrivals) -> anyhow::Result<String> {
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(arrivals);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(format!("http://{addr}/hook"))
}

fn arrived(arrivals: &Arrivals) -> usize {
    arrivals.lock().map(|a| a.len()).unwrap_or(0)
}

async fn wait_for(arrivals: &Arrivals, count: usize, label: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let first = arrived(arrivals);
    let mut progress = crate::progress::Progress::new(label, count.saturating_sub(first) as u64);
    loop {
        let now = arrived(arrivals);
        progress.set(now.saturating_sub(first) as u64);
        if now >= count {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {now} of {count} events arrived");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    progress.finish();
    Ok(())
}

/// Stores `ids` as items and claims them, ready to be completed.
async fn claimed_items(
    store: &SqliteStore,
    scope: &engram_store::DatabaseScope,
    ids: &[String],
) -> anyhow::Result<Vec<ClaimedItem>> {
    let now = SystemClock.now();
    let items: Vec<NewItem> = ids
        .iter()
        .map(|id| NewItem {
            collection: CollectionName::from_trusted("bench"),
            id: id.clone(),
            kind: ItemKind::Knowledge,
            origin: ItemOrigin::App,
            fields: ItemFields {
                text: Some("bench".into()),
                metadata: serde_json::json!({}),
                additional_metadata: serde_json::json!({}),
                attachments: serde_json::json!([]),
                relations: serde_json::json!({}),
                ..ItemFields::default()
            },
            payload: None,
            graph_payload: None,
        })
        .collect();
    for part in items.chunks(500) {
        store.enqueue_items(scope, part, true, now).await?;
    }
    let mut claimed = Vec::new();
    while claimed.len() < ids.len() {
        let batch = store
            .claim_items(&ClaimRequest::new(
                "bench",
                SystemClock.now(),
                Duration::from_millis(600_000),
                1_000,
            ))
            .await?;
        if batch.is_empty() {
            bail!("claimed {} of {} items", claimed.len(), ids.len());
        }
        claimed.extend(batch);
    }
    Ok(claimed)
}

fn dispatcher(
    store: Arc<dyn Store>,
    concurrency: usize,
) -> anyhow::Result<engram_webhooks::Dispatcher> {
    let outbound = engram_outbound::Outbound::new(engram_outbound::AddressPolicy {
        allow_private: true,
    })?;
    Ok(engram_webhooks::Dispatcher::new(
        store,
        outbound,
        Arc::new(SystemClock),
        engram_webhooks::DispatchOptions {
            concurrency,
            retention: None,
            ..engram_webhooks::DispatchOptions::from(&engram_config::WebhooksConfig::default())
        },
    ))
}

pub(crate) async fn webhooks(args: WebhookBench) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path()).await?;
    let org = OrgId::from_trusted("bench");
    let database = store
        .create_database(&NewDatabase {
            id: DatabaseId::from_trusted("db_bench"),
            org: org.clone(),
            name: DatabaseName::from_trusted("bench"),
            default_collection: CollectionName::from_trusted("bench"),
            schema: Default::default(),
            embeddings_dimension: 384,
            is_embeddings_tenant: false,
            created_at: SystemClock.now(),
        })
        .await?;
    let scope = database.scope();
    let arrivals: Arrivals = Arc::default();
    let url = start_receiver(arrivals.clone()).await?;
    store
        .put_webhook(
            &org,
            &url,
            &[engram_store::INDEXING_STATUS_CHANGED.to_owned()],
            SecretChange::Set("bench-signing-secret-0123456789".into()),
            SystemClock.now(),
        )
        .await?;
    let n = args.events;

    // 1. Baseline: plain POSTs of an event-sized, signed body.
    let client = reqwest::Client::new();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(args.concurrency));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let permit = semaphore.clone().acquire_owned().await?;
        let (client, url) = (client.clone(), url.clone());
        tasks.spawn(async move {
            let body = format!(
                r#"{{"event":"indexing.status_changed","delivery_id":"dlv_{i:032}","id":"base-{i}","database":"bench","collection":"bench","tenant_id":"db_bench","sub_tenant_id":"bench","status":"completed","timestamp":"2026-11-22T00:00:00Z"}}"#
            );
            let signature = engram_outbound::sign_sha256(b"bench-signing-secret-0123456789", body.as_bytes());
            let sent = client
                .post(url)
                .header("content-type", "application/json")
                .header("x-service-signature", signature)
                .body(body)
                .send()
                .await;
            drop(permit);
            sent.map(|r| r.status().is_success()).unwrap_or(false)
        });
    }
    let mut ok = 0;
    while let Some(done) = tasks.join_next().await {
        ok += usize::from(done.unwrap_or(false));
    }
    let baseline = n as f64 / started.elapsed().as_secs_f64();
    if ok != n {
        bail!("baseline: {ok} of {n} POSTs succeeded");
    }

    // 2. Backlog: every terminal state stored first, then the dispatcher drains the outbox.
    let store: Arc<SqliteStore> = Arc::new(store);
    let ids: Vec<String> = (0..n).map(|i| format!("backlog-{i}")).collect();
    let claimed = claimed_items(&store, &scope, &ids).await?;
    for item in &claimed {
        store
            .complete_item(
                item,
                &[],
                engram_store::AfterChunks::Completed,
                SystemClock.now(),
            )
            .await?
            .then_some(())
            .context("complete")?;
    }
    let before = arrived(&arrivals);
    let token = CancellationToken::new();
    let wake = Arc::new(Notify::new());
    let worker = Arc::new(dispatcher(store.clone(), args.concurrency)?);
    let started = Instant::now();
    let running = tokio::spawn(worker.run(wake.clone(), token.clone()));
    wait_for(&arrivals, before + n, "backlog delivered").await?;
    let drained = n as f64 / started.elapsed().as_secs_f64();

    // 3. Delay: terminal states one by one, the dispatcher woken as the pipeline wakes it.
    let ids: Vec<String> = (0..n).map(|i| format!("live-{i}")).collect();
    let claimed = claimed_items(&store, &scope, &ids).await?;
    let before = arrived(&arrivals);
    let gap = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let mut committed = HashMap::with_capacity(n);
    let mut next = Instant::now();
    for item in &claimed {
        tokio::time::sleep_until(next.into()).await;
        next += gap;
        store
            .complete_item(
                item,
                &[],
                engram_store::AfterChunks::Completed,
                SystemClock.now(),
            )
            .await?
            .then_some(())
            .context("complete")?;
        committed.insert(item.id.clone(), Instant::now());
        wake.notify_one();
    }
    wait_for(&arrivals, before + n, "live events delivered").await?;
    token.cancel();
    let _ = running.await;
    let arrivals = arrivals.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let mut delays: Vec<f64> = committed
        .iter()
        .filter_map(|(id, at)| {
            arrivals
                .get(id)
                .map(|arrived| arrived.saturating_duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    delays.sort_by(f64::total_cmp);

    report!(
        "webhook delivery to a receiver on loopback, {n} events per phase, concurrency {}",
        args.concurrency
    );
    report!("  baseline (plain POSTs):       {baseline:8.0} requests/s");
    report!(
        "  dispatcher, outbox backlog:   {drained:8.0} deliveries/s  ({:.2} of baseline)",
        drained / baseline
    );
    report!(
        "  delay terminal state -> receiver at {} events/s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.rate,
        percentile(&delays, 50.0),
        percentile(&delays, 99.0),
        delays.last().copied().unwrap_or(0.0)
    );
    Ok(())
}
