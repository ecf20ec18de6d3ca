//! Every input has a limit checked before any work is spent: over it, a clear 4xx naming the
//! limit, never a 500, and nothing stored.

use std::time::Duration;

use reqwest::multipart::Form;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{app, eventually, send_form, Server, INDEXING_WAIT};

const ORG: &str = "org-limits";

fn assert_message(reply: &crate::common::Reply, status: u16, code: &str, needle: &str) {
    reply.assert_current_error(status, code);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {reply:#?}");
}

fn many_keys(count: usize) -> Map<String, Value> {
    (0..count).map(|i| (format!("k{i}"), json!("v"))).collect()
}

#[tokio::test]
async fn every_input_over_its_limit_answers_4xx_naming_it_and_stores_nothing() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "lim").await;

    // Filters: 989 keys once exceeded SQLite's expression depth (500); now 400 past 256.
    let filters = json!({"additional_metadata": many_keys(989)});
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": filters}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "256 filter keys");
    let reply = server
        .post(
            "/context/list",
            &key,
            json!({"database": "lim", "filters": {"additional_metadata": many_keys(991)}}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "256 filter keys");
    let values = vec![json!("v"); 5000];
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": {"additional_metadata": {"k": values}}}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "1024 values");
    // Within the limits, the same request is answered.
    let filters = json!({"additional_metadata": many_keys(256)});
    server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": filters}),
        )
        .await
        .current_ok(200);

    // Ingest: ids with `,` (they could never be polled), titles, metadata, item counts.
    let ingest = |items: Vec<Value>| {
        Form::new()
            .text("type", "knowledge")
            .text("database", "lim")
            .text("app_knowledge", Value::from(items).to_string())
    };
    let reply = send_form(
        &server,
        "/context/ingest",
        &key,
        ingest(vec![app("x,y", "t", "text")]),
    )
    .await;
    assert_message(&reply, 422, "VALIDATION_ERROR", "`,`");
    let reply = send_form(
        &server,
        "/context/ingest",
        &key,
        ingest(vec![app("long-title", &"t".repeat(1025), "text")]),
    )
    .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "1024 characters");
    let mut heavy = app("heavy", "t", "text");
    heavy["additional_metadata"] = Value::Object(many_keys(257));
    let reply = send_form(&server, "/context/ingest", &key, ingest(vec![heavy])).await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "at most 256");
    let items: Vec<Value> = (0..1001).map(|i| app(&format!("i{i}"), "t", "x")).collect();
    let reply = send_form(&server, "/context/ingest", &key, ingest(items)).await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "at most 1000");

    // Repeated single-value fields are refused; repeated app_knowledge parts are all ingested.
    let form = ingest(vec![app("a", "t", "alpha")]).text("database", "lim");
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    assert_message(
        &reply,
        400,
        "INVALID_PARAMETERS",
        "`database` was sent 2 times",
    );
    let form = ingest(vec![app("first", "t", "alpha")]).text(
        "app_knowledge",
        Value::from(vec![app("second", "t", "beta")]).to_string(),
    );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(data["success_count"], 2, "{reply:#?}");
    let ids: Vec<&str> = data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source_id"].as_str().or(r["id"].as_str()).unwrap())
        .collect();
    assert_eq!(ids, ["first", "second"], "{reply:#?}");

    // Webhook URLs.
    let url = format!("https://example.com/{}", "a".repeat(2100));
    let reply = server
        .post("/webhooks/indexing", &key, json!({"url": url}))
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "2048 characters");

    // Only the two items of the merged request were stored.
    let listed = server
        .post("/context/list", &key, json!({"database": "lim"}))
        .await;
    assert_eq!(listed.current_ok(200)["total"], 2, "{listed:#?}");
}

/// Reads from `stream` until the server closes it; panics when it is still open after `within`.
/// Returns what was read.
async fn closed_within(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    within: Duration,
) -> String {
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => panic!(
                "the connection is still open after {within:?}; read so far: {:?}",
                String::from_utf8_lossy(&read)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => return String::from_utf8_lossy(&read).into_owned(),
            Ok(Ok(n)) => read.extend_from_slice(&buf[..n]),
        }
    }
}

/// Slow clients cannot hold connections: partial headers, a body that stops coming and an idle
/// keep-alive connection are all closed once the configured times pass.
#[tokio::test]
async fn slow_and_idle_connections_are_closed_after_the_configured_times() {
    let server = Server::start_with(&[
        ("ENGRAM_HTTP__HEADER_TIMEOUT_MS", "1000"),
        ("ENGRAM_HTTP__BODY_TIMEOUT_MS", "1000"),
    ]);
    let key = server.key(ORG, &[]);
    let addr = server.base.trim_start_matches("http://").to_owned();
    let connect = || tokio::net::TcpStream::connect(addr.clone());
    let within = Duration::from_secs(10);

    // Headers that never end.
    let mut stream = connect().await.unwrap();
    stream
        .write_all(b"POST /query HTTP/1.1\r\nHost: engram\r\nAPI-Version: 2\r\n")
        .await
        .unwrap();
    closed_within(&mut stream, within).await;

    // A valid key and half a body: the request fails, and the connection is closed.
    let mut stream = connect().await.unwrap();
    let head = format!(
        "POST /query HTTP/1.1\r\nHost: engram\r\nAPI-Version: 2\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"database\": "
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = closed_within(&mut stream, within).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "a client error or nothing: {answer}"
    );

    // An idle keep-alive connection after a complete exchange.
    let mut stream = connect().await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: engram\r\n\r\n")
        .await
        .unwrap();
    let answer = closed_within(&mut stream, within).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // The server is still fine.
    let reply = server.get("/healthz", &key).await;
    assert_eq!(reply.status.as_u16(), 200, "{reply:#?}");
}

/// The terminal status entry of `id` (polls until `completed` or `errored`).
async fn terminal(server: &Server, key: &str, database: &str, id: &str) -> Value {
    let path = format!("/context/status?database={database}&ids={id}");
    eventually(INDEXING_WAIT, &format!("{id} terminal"), || {
        let path = path.clone();
        async move {
            let reply = server.get(&path, key).await;
            let status = reply.current_ok(200)["statuses"][0].clone();
            matches!(
                status["indexing_status"].as_str(),
                Some("completed" | "errored")
            )
            .then_some(status)
        }
    })
    .await
}

/// Every item has budgets (set small here): over one, that item alone ends `errored` with
/// `E2003` and a message naming the setting (text given at upload is refused at once), past its
/// time budget with `E2004`; the items beside it are indexed.
#[tokio::test]
async fn an_item_over_a_budget_errors_alone_naming_the_limit() {
    let server = Server::start_with(&[
        ("ENGRAM_BUDGETS__TEXT_BYTES", "6000"),
        ("ENGRAM_BUDGETS__CHUNKS", "2"),
        ("ENGRAM_BUDGETS__TABLE_ROWS", "50"),
    ]);
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "budgets").await;
    let words: String = (0..600).map(|i| format!("word{i} ")).collect();
    let csv: String = std::iter::once("name,value\n".to_owned())
        .chain((0..100).map(|i| format!("row{i},{i}\n")))
        .collect();
    let items = vec![
        app("too-long", "t", &"x".repeat(7000)),
        app("many-chunks", "t", &words),
        app("small", "t", "A short note about the harbour."),
    ];
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "budgets")
        .text("app_knowledge", Value::from(items).to_string())
        .part(
            "documents",
            reqwest::multipart::Part::bytes(csv.into_bytes())
                .file_name("rows.csv")
                .mime_str("text/csv")
                .unwrap(),
        );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    let results = data["results"].as_array().unwrap();
    let refused = results
        .iter()
        .find(|r| r["source_id"] == "too-long" || r["id"] == "too-long")
        .unwrap_or_else(|| panic!("{reply:#?}"));
    assert_eq!(refused["error_code"], "E2003", "{reply:#?}");
    assert!(
        refused["error"].to_string().contains("budgets.text_bytes"),
        "{reply:#?}"
    );
    assert_eq!(data["success_count"], 3, "{reply:#?}");
    let csv_id = results
        .iter()
        .find(|r| r["filename"] == "rows.csv")
        .and_then(|r| r["source_id"].as_str().or(r["id"].as_str()))
        .unwrap_or_else(|| panic!("{reply:#?}"))
        .to_owned();

    let chunks = terminal(&server, &key, "budgets", "many-chunks").await;
    assert_eq!(chunks["indexing_status"], "errored", "{chunks}");
    assert_eq!(chunks["error_code"], "E2003", "{chunks}");
    assert!(
        chunks["error_message"]
            .to_string()
            .contains("budgets.chunks"),
        "{chunks}"
    );
    let rows = terminal(&server, &key, "budgets", &csv_id).await;
    assert_eq!(rows["indexing_status"], "errored", "{rows}");
    assert_eq!(rows["error_code"], "E2003", "{rows}");
    assert!(
        rows["error_message"].to_string().contains("table rows"),
        "{rows}"
    );
    let small = terminal(&server, &key, "budgets", "small").await;
    assert_eq!(small["indexing_status"], "completed", "{small}");
}

/// Reading a file whose working memory passes `budgets.memory_bytes` (counted by the binary's
/// allocator on the thread reading it) ends that item `errored` with `E2003` naming the setting,
/// before it is embedded; the item beside it is indexed.
#[tokio::test]
async fn an_item_past_its_memory_budget_errors_alone_naming_the_limit() {
    let server = Server::start_with(&[
        ("ENGRAM_BUDGETS__MEMORY_BYTES", "16777216"),
        ("ENGRAM_BUDGETS__TEXT_BYTES", "33554432"),
    ]);
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "memory").await;
    // 20 MiB of paragraphs (under the text budget, raised here): its text and its chunks hold
    // over 20 MiB while it is read.
    let paragraph = "The harbour master logs every ship that enters the bay. ".repeat(20);
    let text = format!("{paragraph}\n\n").repeat(20 * 1024 * 1024 / (paragraph.len() + 2));
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "memory")
        .text(
            "app_knowledge",
            Value::from(vec![app("small", "t", "A short note about the harbour.")]).to_string(),
        )
        .part(
            "documents",
            reqwest::multipart::Part::bytes(text.into_bytes())
                .file_name("big.txt")
                .mime_str("text/plain")
                .unwrap(),
        );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    let big_id = data["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["filename"] == "big.txt")
        .and_then(|r| r["source_id"].as_str().or(r["id"].as_str()))
        .unwrap_or_else(|| panic!("{reply:#?}"))
        .to_owned();
    let big = terminal(&server, &key, "memory", &big_id).await;
    assert_eq!(big["indexing_status"], "errored", "{big}");
    assert_eq!(big["error_code"], "E2003", "{big}");
    assert!(
        big["error_message"]
            .to_string()
            .contains("budgets.memory_bytes"),
        "{big}"
    );
    let small = terminal(&server, &key, "memory", "small").await;
    assert_eq!(small["indexing_status"], "completed", "{small}");
}

/// An item that takes longer than its time budget ends `errored` with `E2004`.
#[tokio::test]
async fn an_item_past_its_time_budget_errors_with_e2004() {
    let server = Server::start_with(&[("ENGRAM_BUDGETS__TIME_MS", "1")]);
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "slow").await;
    let words: String = (0..3000).map(|i| format!("word{i} ")).collect();
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "slow")
        .text(
            "app_knowledge",
            Value::from(vec![app("slow-1", "t", &words)]).to_string(),
        );
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    let status = terminal(&server, &key, "slow", "slow-1").await;
    assert_eq!(status["indexing_status"], "errored", "{status}");
    assert_eq!(status["error_code"], "E2004", "{status}");
    assert!(
        status["error_message"]
            .to_string()
            .contains("budgets.time_ms"),
        "{status}"
    );
}

/// A request to `path` with a 17 MiB body of `content_type` that starts with `opening` (the
/// rest is filler), written beside reading the answer (a refused body is not read to its end,
/// so the writer may find the connection closed): the raw answer.
async fn too_large(
    server: &Server,
    path: &str,
    key: &str,
    content_type: &str,
    opening: &str,
) -> String {
    body_of_size(server, path, key, content_type, opening, 17 * 1024 * 1024).await
}

/// Sends `opening` and filler up to `size` bytes as the body (declared), and reads what comes
/// back until the connection closes.
pub(crate) async fn body_of_size(
    server: &Server,
    path: &str,
    key: &str,
    content_type: &str,
    opening: &str,
    size: usize,
) -> String {
    let addr = server.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nAPI-Version: 2\r\n\
         Content-Type: {content_type}\r\nContent-Length: {size}\r\n\r\n{opening}"
    );
    let filler = size - opening.len();
    let writing = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = vec![b'a'; 64 * 1024];
        let mut left = filler;
        while left > 0 {
            let n = left.min(chunk.len());
            if writer.write_all(&chunk[..n]).await.is_err() {
                return;
            }
            left -= n;
        }
    });
    // A refused body is answered, then the connection closed.
    let answer = closed_within(&mut reader, Duration::from_secs(30)).await;
    writing.abort();
    answer
}

/// A body over the size limit is refused with a status of the spec's table, 400, and the spec's
/// size-limit code, `FILE_TOO_LARGE`, on both generations (uploads and JSON bodies alike), naming
/// the setting; nothing is stored. The limit is `ingest.max_upload_bytes`; JSON bodies get at
/// least 16 MiB (a multipart body between the two is refused too: see `errors.rs`).
#[tokio::test]
async fn a_body_over_the_size_limit_is_400_file_too_large_on_both_generations() {
    let server = Server::start_with(&[("ENGRAM_INGEST__MAX_UPLOAD_BYTES", "1048576")]);
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "big").await;
    let multipart = "multipart/form-data; boundary=engram-boundary";
    let file = |field: &str| {
        format!(
            "--engram-boundary\r\nContent-Disposition: form-data; name=\"{field}\"; \
             filename=\"big.txt\"\r\nContent-Type: text/plain\r\n\r\n"
        )
    };
    for (path, content_type, opening) in [
        ("/context/ingest", multipart, file("documents")),
        ("/ingestion/upload_knowledge", multipart, file("files")),
        (
            "/query",
            "application/json",
            r#"{"database": "big", "query": ""#.to_owned(),
        ),
        (
            "/recall/full_recall",
            "application/json",
            r#"{"tenant_id": "big", "query": ""#.to_owned(),
        ),
    ] {
        let answer = too_large(&server, path, &key, content_type, &opening).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("\"FILE_TOO_LARGE\""), "{path}: {answer}");
        assert!(
            answer.contains("ingest.max_upload_bytes"),
            "{path}: {answer}"
        );
    }
    let listed = server
        .post("/context/list", &key, json!({"database": "big"}))
        .await;
    assert_eq!(
        listed.current_ok(200)["total"],
        0,
        "nothing of the refused uploads was stored: {listed:#?}"
    );
}
