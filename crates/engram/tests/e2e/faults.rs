//! Faults of the system around the process, injected while two instances share one
//! PostgreSQL database: an instance frozen for longer than its leases, and every connection to
//! the database dropped. PostgreSQL pass only (SQLite serves one process per data directory).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::receiver::{Answer, Receiver};
use crate::common::{app, eventually, wait_completed, Server};
use crate::scale_out::{short_leases, sql};
use crate::webhooks::{deliveries, ingest, received_events, register, WAIT};

fn items(prefix: &str, count: usize) -> (Vec<Value>, Vec<String>) {
    let items = (0..count)
        .map(|i| {
            app(
                &format!("{prefix}-{i}"),
                "Fault",
                &format!("Item {i} of {prefix} mentions the word quokka{i}."),
            )
        })
        .collect();
    let ids = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    (items, ids)
}

/// Every item of `ids` indexed once (one chunk each), and one delivered event per item.
async fn each_once(server: &Server, key: &str, ids: &[String]) {
    let listed = ids
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        sql(
            server,
            &format!(
                "SELECT count(*), count(DISTINCT c.item_key) FROM chunks c JOIN items i \
                 ON i.item_key = c.item_key WHERE i.id IN ({listed})"
            )
        ),
        format!("{}|{}", ids.len(), ids.len()),
        "each item indexed once"
    );
    let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let history = eventually(WAIT, "every event delivered", || async {
        let page = deliveries(server, key, "?limit=100").await;
        let events: Vec<Value> = page["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| wanted.contains(d["doc_id"].as_str().unwrap_or_default()))
            .cloned()
            .collect();
        (events.len() == ids.len() && events.iter().all(|d| d["status"] == "delivered"))
            .then_some(events)
    })
    .await;
    let mut per_item: BTreeMap<String, usize> = BTreeMap::new();
    for delivery in &history {
        *per_item
            .entry(delivery["doc_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(per_item.values().all(|n| *n == 1), "{per_item:?}");
}

/// An instance frozen (SIGSTOP) with items and deliveries in hand for longer than its leases:
/// the other takes its work over; woken (SIGCONT), it writes nothing for work it no longer
/// holds (its claims are fenced by owner and version, deliveries by a per-claim lease), and
/// serves again. Nothing is lost, nothing done twice, and `engram check` finds nothing.
#[tokio::test]
async fn a_frozen_instance_wakes_to_find_its_work_done_and_writes_none_of_it() {
    let envs = short_leases();
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        return;
    }
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-frozen", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Stall(Duration::from_millis(500)));
    let (batch, ids) = items("frozen", 30);
    ingest(&a, &key, "shared", &batch).await;
    received_events(&receiver, 2).await;
    a.signal("STOP");
    receiver.answer_by_default(Answer::Status(200));
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    wait_completed(&b, &key, "shared", None, &refs).await;
    each_once(&b, &key, &ids).await;

    a.signal("CONT");
    // Awake: it answers again, and whatever it was doing when frozen changes nothing.
    eventually(WAIT, "the woken instance answers", || async {
        let reply = a.get("/databases", &key).await;
        (reply.status == 200).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    each_once(&b, &key, &ids).await;
    b.assert_consistent();
}

/// Every connection of both instances to PostgreSQL dropped (as a restart or a network blip
/// does) while they index: requests meanwhile are answered (503 with `Retry-After` at worst,
/// never another 5xx), both reconnect without a restart, and every item completes once.
#[tokio::test]
async fn dropped_database_connections_are_survived_without_a_restart() {
    let envs = short_leases();
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        return;
    }
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-dropped", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Status(200));
    let (batch, ids) = items("dropped", 30);
    ingest(&a, &key, "shared", &batch).await;
    let url = a.storage_url.clone().unwrap();
    let database = url.rsplit('/').next().unwrap().to_owned();
    let mut statuses = BTreeSet::new();
    for _ in 0..5 {
        sql(
            &a,
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            ),
        );
        for server in [&a, &b] {
            let reply = server.get("/databases/status?database=shared", &key).await;
            statuses.insert(reply.status.as_u16());
            if reply.status.is_server_error() {
                assert_eq!(reply.status, 503, "{reply:#?}");
                assert!(reply.header("retry-after").is_some(), "{reply:#?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    wait_completed(&b, &key, "shared", None, &refs).await;
    each_once(&a, &key, &ids).await;
    for server in [&a, &b] {
        server
            .get("/databases/status?database=shared", &key)
            .await
            .current_ok(200);
    }
    eprintln!("statuses while connections were dropped: {statuses:?}");
    a.assert_consistent();
}

/// A TCP proxy between one instance and PostgreSQL that the test can cut: every connection
/// through it is closed and new ones are refused until it is healed.
struct Proxy {
    addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    links: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let links = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (cut_flag, open_links) = (cut.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if cut_flag.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is refused
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                open_links.lock().unwrap().push(link.abort_handle());
            }
        });
        Self { addr, cut, links }
    }

    /// Closes every connection and refuses new ones.
    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One instance cut off from PostgreSQL for longer than its leases while the other indexes:
/// the other takes over its work; the cut instance answers 503 with `Retry-After` (never stale
/// results, never another 5xx, never a hang); healed, it reconnects and serves again without a
/// restart; nothing is lost or done twice. (Multi-threaded: the proxy runs while the harness
/// waits on the instance's start.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_instance_answers_503_and_its_work_is_taken_over() {
    let envs = short_leases();
    let a = Server::start_with(&envs);
    let Some(url) = a.storage_url.clone() else {
        return;
    };
    // postgres://user@host:port/database: the same database, through the proxy.
    let (head, database) = url.rsplit_once('/').unwrap();
    let (scheme_user, upstream) = head.rsplit_once('@').unwrap();
    let proxy = Proxy::start(upstream.to_owned()).await;
    let b = Server::start_beside_via(
        &a,
        &envs,
        format!("{scheme_user}@{}/{database}", proxy.addr),
    );
    let key = a.key("org-partition", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Status(200));
    let (batch, ids) = items("cut", 30);
    ingest(&b, &key, "shared", &batch).await;

    proxy.cut();
    let cut_at = std::time::Instant::now();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut answers = BTreeSet::new();
    while cut_at.elapsed() < Duration::from_secs(4) {
        let asked = std::time::Instant::now();
        let reply = b.get("/databases/status?database=shared", &key).await;
        assert!(
            asked.elapsed() < Duration::from_secs(15),
            "a hang: {:?}",
            asked.elapsed()
        );
        answers.insert(reply.status.as_u16());
        if reply.status != 200 {
            assert_eq!(reply.status, 503, "{reply:#?}");
            assert!(reply.header("retry-after").is_some(), "{reply:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        answers.contains(&503),
        "the cut instance never noticed: {answers:?}"
    );
    wait_completed(&a, &key, "shared", None, &refs).await;

    proxy.heal();
    eventually(WAIT, "the healed instance answers", || async {
        let reply = b.get("/databases/status?database=shared", &key).await;
        (reply.status == 200).then_some(())
    })
    .await;
    each_once(&a, &key, &ids).await;
    a.assert_consistent();
}

/// PostgreSQL itself restarted under two instances that index, once with a fast shutdown and
/// once with an immediate one (a crash, recovered at start), on a cluster of the test's own:
/// requests meanwhile answer 503 with `Retry-After` at worst (never another 5xx), both
/// instances reconnect without a restart, and every item completes once with its event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_restarts_are_survived_fast_or_immediate() {
    if std::env::var_os("E2E_POSTGRES_URL").is_none() {
        return; // the PostgreSQL pass runs it
    }
    let pg = engram_testkit::TempPostgres::start_durable();
    let envs = short_leases();
    let a = Server::start_on(pg.url(), &envs);
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-restart", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Status(200));
    let mut all = Vec::new();
    for mode in ["fast", "immediate"] {
        let (batch, ids) = items(mode, 20);
        ingest(&a, &key, "shared", &batch).await;
        // Asked all along while the server restarts (the restart blocks this worker thread
        // only; the prober runs on the other).
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let prober = {
            let (client, url, key, stop) = (
                b.client.clone(),
                b.url("/databases/status?database=shared"),
                key.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    if let Ok(reply) = client
                        .get(&url)
                        .header("API-Version", "2")
                        .bearer_auth(&key)
                        .send()
                        .await
                    {
                        let retry = reply.headers().contains_key("retry-after");
                        seen.push((reply.status().as_u16(), retry));
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                seen
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        pg.restart(mode);
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let seen = prober.await.unwrap();
        let statuses: BTreeSet<u16> = seen.iter().map(|(s, _)| *s).collect();
        eprintln!(
            "while PostgreSQL restarted ({mode}): {statuses:?} over {} requests",
            seen.len()
        );
        for (status, retry) in &seen {
            assert!(*status < 500 || (*status == 503 && *retry), "{seen:?}");
        }
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        wait_completed(&b, &key, "shared", None, &refs).await;
        all.extend(ids);
    }
    each_once(&a, &key, &all).await;
    a.assert_consistent();
}

/// One fault of the chaos run.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL one instance, then start it again.
    Crash(usize),
    /// Freeze one instance past its leases, then wake it.
    Freeze(usize),
    /// Drop every connection to the database.
    DropConnections,
    /// Restart PostgreSQL (`fast` or `immediate`).
    Restart(&'static str),
}

/// The chaos run: two instances on a PostgreSQL of the test's own under a mixed load
/// (ingestion, queries, deletes, deliveries to a receiver that sometimes fails) while a fault
/// from the list above strikes every few seconds. At the end every accepted item that was not
/// deleted is indexed exactly once, every event is delivered at least once with one delivery
/// per event, nothing answered a 5xx but 503, and `engram check` finds nothing. `CHAOS_SECS`
/// sets its length (120 s in `make test`; the long run is by hand, e.g. `CHAOS_SECS=1200`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_loses_nothing_and_does_nothing_twice() {
    if std::env::var_os("E2E_POSTGRES_URL").is_none() {
        return; // the PostgreSQL pass runs it
    }
    let secs: u64 = std::env::var("CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let pg = engram_testkit::TempPostgres::start_durable();
    let envs = short_leases();
    let a = Server::start_on(pg.url(), &envs);
    let b = Server::start_beside(&a, &envs);
    let mut servers = [a, b];
    let key = servers[0].key("org-chaos", &[]);
    servers[0].ready_database(&key, "chaos").await;
    servers[1].wait_ready(&key, "chaos").await;
    let receiver = Receiver::start().await;
    register(&servers[0], &key, json!({"url": receiver.url})).await;

    let faults = [
        Fault::Crash(0),
        Fault::Freeze(1),
        Fault::DropConnections,
        Fault::Restart("fast"),
        Fault::Crash(1),
        Fault::Freeze(0),
        Fault::Restart("immediate"),
    ];
    let started = std::time::Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let (mut accepted, mut deleted) = (Vec::<String>::new(), BTreeSet::<String>::new());
    let mut unsure = BTreeSet::<String>::new();
    let (mut requests, mut unavailable, mut injected) = (0usize, 0usize, Vec::new());
    let mut next_fault = started + Duration::from_secs(5);
    let mut frozen: Option<(usize, std::time::Instant)> = None;
    let mut n = 0usize;
    let answered = |reply: &crate::common::Reply, requests: &mut usize, unavailable: &mut usize| {
        *requests += 1;
        if reply.status == 503 {
            *unavailable += 1;
            assert!(reply.header("retry-after").is_some(), "{reply:#?}");
        } else {
            assert!(!reply.status.is_server_error(), "{reply:#?}");
        }
    };
    while std::time::Instant::now() < deadline {
        // The load, on an instance that is up.
        let up = match frozen {
            Some((i, _)) => 1 - i,
            None => n % 2,
        };
        let server = &servers[up];
        let ids: Vec<String> = (0..3).map(|i| format!("chaos-{n}-{i}")).collect();
        let batch: Vec<Value> = ids
            .iter()
            .map(|id| app(id, "Chaos", &format!("Chaos item {id} mentions wombat{n}.")))
            .collect();
        // As a client does: a 503 is tried again (the same ids, so nothing twice). A batch
        // answered 503 may have been stored before the answer was lost.
        for _ in 0..20 {
            let form = reqwest::multipart::Form::new()
                .text("type", "knowledge")
                .text("database", "chaos")
                .text("app_knowledge", Value::from(batch.clone()).to_string());
            let reply = crate::common::send_form(server, "/context/ingest", &key, form).await;
            answered(&reply, &mut requests, &mut unavailable);
            if reply.status == 202 {
                accepted.extend(ids.iter().cloned());
                break;
            }
            unsure.extend(ids.iter().cloned());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let reply = server
            .post(
                "/query",
                &key,
                json!({"database": "chaos", "query": format!("wombat{n}")}),
            )
            .await;
        answered(&reply, &mut requests, &mut unavailable);
        if n % 7 == 3 && accepted.len() > 10 {
            let gone = accepted[accepted.len() - 7].clone();
            for _ in 0..20 {
                let reply = server
                    .call(
                        reqwest::Method::DELETE,
                        "/context",
                        Some(&key),
                        Some(json!({"database": "chaos", "ids": [gone]})),
                    )
                    .await;
                answered(&reply, &mut requests, &mut unavailable);
                if reply.status == 200 {
                    deleted.insert(gone.clone());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        receiver.answer_by_default(if n.is_multiple_of(5) {
            Answer::Status(500)
        } else {
            Answer::Status(200)
        });
        n += 1;
        // A frozen instance wakes past its leases.
        if let Some((i, since)) = frozen {
            if since.elapsed() > Duration::from_secs(3) {
                servers[i].signal("CONT");
                frozen = None;
            }
        }
        if frozen.is_none() && std::time::Instant::now() >= next_fault {
            let fault = faults[injected.len() % faults.len()];
            match fault {
                Fault::Crash(i) => {
                    servers[i].kill();
                    servers[i].restart();
                }
                Fault::Freeze(i) => {
                    servers[i].signal("STOP");
                    frozen = Some((i, std::time::Instant::now()));
                }
                Fault::DropConnections => {
                    pg.psql(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE pid <> pg_backend_pid() AND datname = 'postgres'",
                    );
                }
                Fault::Restart(mode) => pg.restart(mode),
            }
            injected.push(fault);
            next_fault = std::time::Instant::now() + Duration::from_secs(5 + (n as u64 % 4) * 5);
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    if let Some((i, _)) = frozen {
        servers[i].signal("CONT");
    }
    receiver.answer_by_default(Answer::Status(200));

    // Every accepted item not deleted is indexed, once; every event delivered, once each.
    let kept: Vec<&str> = accepted
        .iter()
        .filter(|id| !deleted.contains(*id))
        .map(String::as_str)
        .collect();
    for part in kept.chunks(100) {
        wait_completed(&servers[0], &key, "chaos", None, part).await;
    }
    let sql = |query: &str| pg.psql(query);
    assert_eq!(
        sql("SELECT count(*) FROM (SELECT item_key FROM chunks GROUP BY item_key HAVING count(*) > 1) d"),
        "0",
        "an item indexed twice"
    );
    let indexed: BTreeSet<String> =
        sql("SELECT i.id FROM chunks c JOIN items i ON i.item_key = c.item_key")
            .lines()
            .map(str::to_owned)
            .collect();
    let missing: Vec<&&str> = kept.iter().filter(|id| !indexed.contains(**id)).collect();
    assert!(
        missing.is_empty(),
        "accepted and not deleted, but not indexed: {missing:?}"
    );
    // (A deletion answered 200 and then undone was how the run first failed: the cluster
    // committed asynchronously, and an immediate restart lost its last commits.)
    let resurrected: Vec<&String> = indexed.intersection(&deleted).collect();
    assert!(
        resurrected.is_empty(),
        "deleted, yet indexed: {resurrected:?}"
    );
    let stray: Vec<&String> = indexed
        .iter()
        .filter(|id| !kept.contains(&id.as_str()) && !unsure.contains(*id))
        .collect();
    assert!(stray.is_empty(), "indexed, never accepted: {stray:?}");
    eventually(
        Duration::from_secs(120),
        "every delivery delivered",
        || async {
            (sql("SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'") == "0")
                .then_some(())
        },
    )
    .await;
    // One delivery per event: an item sent once reached one terminal state, so it has one
    // delivery (one sent again after a 503 may have been indexed twice, with an event each).
    let twice: Vec<String> =
        sql("SELECT item_id FROM webhook_deliveries GROUP BY item_id HAVING count(*) > 1")
            .lines()
            .filter(|id| !unsure.contains(*id))
            .map(str::to_owned)
            .collect();
    assert!(
        twice.is_empty(),
        "more than one delivery for one event: {twice:?}"
    );
    let recorded: BTreeSet<String> = sql("SELECT delivery_id FROM webhook_deliveries")
        .lines()
        .map(str::to_owned)
        .collect();
    let received: BTreeSet<String> = receiver
        .received()
        .iter()
        .map(crate::common::receiver::Received::delivery_id)
        .collect();
    assert!(recorded.is_subset(&received), "a delivery never arrived");
    servers[0].assert_consistent();
    eprintln!(
        "chaos run: {secs} s, {requests} requests ({unavailable} answered 503), {} faults \
         ({injected:?}), {} items accepted, {} deleted, {} deliveries, nothing lost",
        injected.len(),
        accepted.len(),
        deleted.len(),
        recorded.len()
    );
}

/// libfaketime, which moves the clock of the process it is preloaded into (Debian's
/// `faketime` package; `make setup-test` installs it).
const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Clock skew: an instance whose machine clock runs two minutes ahead (libfaketime) takes its
/// times from PostgreSQL's like the other. Its writes carry PostgreSQL's time, a memory that
/// lives 40 s is found through it, and it takes over none of the other's claims before their
/// leases run out (each item claimed once).
#[tokio::test]
async fn an_instance_whose_clock_is_ahead_keeps_the_shared_time() {
    let envs: Vec<(&str, &str)> = vec![("ENGRAM_PIPELINE__BATCH_ITEMS", "2")];
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        return;
    }
    assert!(
        std::path::Path::new(FAKETIME).exists(),
        "{FAKETIME} is missing: run `make setup-test` (Debian's faketime package)"
    );
    let mut skewed = envs.clone();
    skewed.extend([("LD_PRELOAD", FAKETIME), ("FAKETIME", "+120s")]);
    let b = Server::start_beside(&a, &skewed);
    let key = a.key("org-skew", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;

    // The skew is real: b's answers are dated two minutes ahead of a's.
    let (at_a, at_b) = (
        a.get("/databases", &key).await,
        b.get("/databases", &key).await,
    );
    let date = |reply: &crate::common::Reply| {
        httpdate::parse_http_date(reply.header("date").unwrap()).unwrap()
    };
    let ahead = date(&at_b).duration_since(date(&at_a)).unwrap_or_default();
    assert!(ahead >= Duration::from_secs(100), "{ahead:?}");

    // Written through b, stamped with PostgreSQL's time.
    ingest(
        &b,
        &key,
        "shared",
        &[app("via-b", "Skew", "Written through b.")],
    )
    .await;
    wait_completed(&a, &key, "shared", None, &["via-b"]).await;
    let off_ms: i64 = sql(
        &a,
        "SELECT abs(created_at - (extract(epoch FROM clock_timestamp()) * 1000)::bigint) \
         FROM items WHERE id = 'via-b'",
    )
    .parse()
    .unwrap();
    assert!(
        off_ms < 30_000,
        "created {off_ms} ms off PostgreSQL's clock"
    );

    // A memory living 40 s, stored through a, is alive for b too.
    let stored = crate::common::ingest_memories(
        &a,
        &key,
        "shared",
        "u1",
        json!([{"id": "short", "text": "The visitor badge code is 4411.", "expiry_time": 40}]),
    )
    .await;
    stored.current_ok(202);
    wait_completed(&a, &key, "shared", Some("u1"), &["short"]).await;
    let reply = b
        .post(
            "/query",
            &key,
            json!({"database": "shared", "collection": "u1", "type": "memory",
                   "query": "visitor badge code", "query_by": "text"}),
        )
        .await;
    let found = reply.current_ok(200)["chunks"].to_string();
    assert!(found.contains("4411"), "expired early on b: {reply:#?}");

    // Both work the queue; neither takes the other's claims (15 s leases) over.
    let (batch, ids) = items("skew", 24);
    ingest(&a, &key, "shared", &batch).await;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    wait_completed(&a, &key, "shared", None, &ids).await;
    assert_eq!(
        sql(&a, "SELECT max(attempts) FROM items WHERE id LIKE 'skew-%'"),
        "1",
        "an item was claimed twice"
    );
    a.assert_consistent();
}

/// A tmpfs of a few MiB mounted for the test (as root, or through `sudo -n`), unmounted when
/// dropped.
struct SmallDisk {
    at: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("disk");
        std::fs::create_dir(&at).unwrap();
        let out = privileged("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&at)
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "the full-disk test mounts a small tmpfs (as root or with passwordless sudo): {out:?}"
        );
        Self { at, _dir: dir }
    }

    /// Fills the disk with `filler` until a write fails for want of space.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let filler = self.at.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0_u8; 64 * 1024];
        loop {
            if let Err(err) = file.write_all(&block).and_then(|()| file.sync_all()) {
                assert_eq!(err.raw_os_error(), Some(28), "{err}");
                return filler;
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = privileged("umount").args(["-l"]).arg(&self.at).status();
    }
}

/// `program` as root: itself when the test runs as root, else through `sudo -n`.
fn privileged(program: &str) -> std::process::Command {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        std::process::Command::new(program)
    } else {
        let mut sudo = std::process::Command::new("sudo");
        sudo.args(["-n", program]);
        sudo
    }
}

/// A full disk under the data directory (SQLite, the indexes): ingestion answers 503
/// `SERVICE_UNAVAILABLE` naming the full disk (never 500) and stores nothing it refused; once
/// space is freed everything accepted completes, what was refused is accepted again, and the
/// store and the indexes are intact (`engram check`, queries).
#[tokio::test]
async fn a_full_disk_refuses_cleanly_and_everything_resumes_when_space_returns() {
    let disk = SmallDisk::mount(48);
    let server = Server::start_at(disk.at.join("data"), &[]);
    let key = server.key("org-disk", &[]);
    server.ready_database(&key, "kb").await;
    ingest(
        &server,
        &key,
        "kb",
        &[app("a", "Pumps", "The pumps are replaced yearly.")],
    )
    .await;
    wait_completed(&server, &key, "kb", None, &["a"]).await;

    let filler = disk.fill();
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for i in 0..8 {
        let id = format!("s{i}");
        let form = reqwest::multipart::Form::new()
            .text("type", "knowledge")
            .text("database", "kb")
            .text(
                "app_knowledge",
                json!([app(
                    &id,
                    "Valves",
                    &format!("Note {i}: the valves are checked.")
                )])
                .to_string(),
            );
        let reply = crate::common::send_form(&server, "/context/ingest", &key, form).await;
        match reply.status.as_u16() {
            202 => accepted.push(id),
            503 => {
                reply.assert_current_error(503, "SERVICE_UNAVAILABLE");
                let message = reply.body["error"]["message"].as_str().unwrap();
                assert!(message.contains("disk is full"), "{message}");
                assert!(reply.header("retry-after").is_some(), "{reply:#?}");
                refused.push(id);
            }
            _ => panic!("neither accepted nor refused for the disk: {reply:#?}"),
        }
        let query = server
            .post("/query", &key, json!({"database": "kb", "query": "valves"}))
            .await;
        assert!(
            [200, 503].contains(&query.status.as_u16()),
            "a query on a full disk: {query:#?}"
        );
    }
    assert!(!refused.is_empty(), "the full disk refused nothing");

    // Space returns: what was accepted completes, what was refused was never stored and is
    // accepted now.
    std::fs::remove_file(filler).unwrap();
    let status = server
        .get(
            &format!("/context/status?database=kb&ids={}", refused.join(",")),
            &key,
        )
        .await;
    // Not one of them is known: a 404, or each `not_found`.
    if status.status != 404 {
        let statuses = status.current_ok(200)["statuses"]
            .as_array()
            .unwrap()
            .clone();
        assert!(
            statuses.iter().all(|s| s["indexing_status"] == "not_found"),
            "{statuses:?}"
        );
    }
    let again: Vec<Value> = refused
        .iter()
        .map(|id| app(id, "Valves", "Sent again: the valves are checked."))
        .collect();
    ingest(&server, &key, "kb", &again).await;
    let every: Vec<&str> = accepted
        .iter()
        .chain(&refused)
        .map(String::as_str)
        .chain(["a"])
        .collect();
    wait_completed(&server, &key, "kb", None, &every).await;
    let found = server
        .post(
            "/query",
            &key,
            json!({"database": "kb", "query": "valves checked pumps", "max_results": 20}),
        )
        .await;
    let ids: BTreeSet<String> = found.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    let wanted: BTreeSet<String> = every.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(ids, wanted);
    server.assert_consistent();
}
