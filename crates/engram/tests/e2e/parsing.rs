//! Uploaded files of every text format, end to end: detected by content, parsed, chunked with
//! their structure in `layout`, and found by queries (the real binary and model).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{eventually, send_form, Server};
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

fn sample(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/markitdown")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Uploads files (name, bytes) with ids; asserts each is queued and waits until each is
/// terminal; returns the statuses by id.
async fn upload(server: &Server, key: &str, files: &[(&str, &str, Vec<u8>)]) -> Vec<Value> {
    let mut form = Form::new()
        .text("type", "knowledge")
        .text("database", "files");
    for (_, name, bytes) in files {
        form = form.part(
            "documents",
            Part::bytes(bytes.clone()).file_name((*name).to_owned()),
        );
    }
    let metadata: Vec<Value> = files.iter().map(|(id, _, _)| json!({"id": id})).collect();
    form = form.text("document_metadata", Value::from(metadata).to_string());
    let reply = send_form(server, "/context/ingest", key, form).await;
    let data = reply.current_ok(202);
    for result in data["results"].as_array().unwrap() {
        assert_eq!(result["status"], "queued", "{reply:#?}");
    }
    let ids: Vec<&str> = files.iter().map(|(id, _, _)| *id).collect();
    eventually(WAIT, "every file indexed", || async {
        let reply = server
            .get(
                &format!("/context/status?database=files&ids={}", ids.join(",")),
                key,
            )
            .await;
        let statuses = reply.body["data"]["statuses"].as_array()?.clone();
        statuses
            .iter()
            .all(|s| s["indexing_status"] == "completed" || s["indexing_status"] == "errored")
            .then_some(statuses)
    })
    .await
}

/// The chunks a query returns for one source id.
async fn chunks_of(server: &Server, key: &str, query: &str, id: &str) -> Vec<Value> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": "files", "query": query, "max_results": 50, "query_by": "text"}),
        )
        .await;
    let data = reply.current_ok(200);
    data["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == id)
        .map(|c| {
            // `layout` comes as a JSON-encoded string, as the hosted service sends it.
            let mut c = c.clone();
            let layout = c["layout"].as_str().expect("layout is a JSON string");
            c["layout"] = serde_json::from_str(layout).expect("layout holds JSON");
            c
        })
        .collect()
}

#[tokio::test]
async fn text_formats_in_any_encoding_are_indexed_with_structure() {
    let server = Server::start();
    let key = server.key("org-files", &[]);
    server.ready_database(&key, "files").await;
    let statuses = upload(
        &server,
        &key,
        &[
            ("kanji", "test_mskanji.csv", sample("test_mskanji.csv")),
            ("feed", "test_rss.xml", sample("test_rss.xml")),
            (
                "notebook",
                "test_notebook.ipynb",
                sample("test_notebook.ipynb"),
            ),
            (
                "latin1",
                "menu.txt",
                b"Cr\xE8me br\xFBl\xE9e and caf\xE9 au lait are on the dessert menu.".to_vec(),
            ),
        ],
    )
    .await;
    for status in &statuses {
        assert_eq!(status["indexing_status"], "completed", "{status:#?}");
    }

    // Shift-JIS CSV: decoded, a Markdown table whose header row is repeated, rows in layout.
    let listed = server
        .post(
            "/context/list",
            &key,
            json!({"database": "files", "type": "knowledge", "source_ids": ["kanji"]}),
        )
        .await;
    assert_eq!(listed.current_ok(200)["total"], 1, "{listed:#?}");
    let kanji = chunks_of(&server, &key, "佐藤太郎", "kanji").await;
    let table = kanji[0]["chunk_content"].as_str().unwrap();
    assert!(table.contains("| 名前 | 年齢 | 住所 |"), "{kanji:#?}");
    assert!(table.contains("| 髙橋淳 | 35 | 名古屋 |"), "{kanji:#?}");
    assert!(kanji[0]["layout"]["row_range"].is_array(), "{kanji:#?}");
    let latin = chunks_of(&server, &key, "brûlée dessert", "latin1").await;
    assert!(
        latin[0]["chunk_content"]
            .as_str()
            .unwrap()
            .contains("Crème brûlée"),
        "{latin:#?}"
    );

    // RSS: items as sections under the feed title.
    let feed = chunks_of(&server, &key, "Fortune 500 Microsoft 365 Copilot", "feed").await;
    let first = &feed[0];
    let headings = first["layout"]["headings"].as_array().unwrap();
    assert_eq!(headings[0], "The Official Microsoft Blog", "{first:#?}");
    assert!(!first["chunk_content"].as_str().unwrap().contains("<item>"));

    // Notebook: cells as Markdown, code fenced.
    let notebook = chunks_of(&server, &key, "markitdown print", "notebook").await;
    assert!(
        notebook
            .iter()
            .any(|c| c["chunk_content"].as_str().unwrap().contains("```python")),
        "{notebook:#?}"
    );
}

#[tokio::test]
async fn documents_scans_and_images_are_indexed_with_pages_sheets_and_slides() {
    let server = Server::start();
    let key = server.key("org-docs", &[]);
    server.ready_database(&key, "files").await;
    // A blank image: real PNG bytes with no text in it.
    let blank: Vec<u8> = vec![
        0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
        0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0a, b'I', b'D',
        b'A', b'T', 0x78, 0x9c, 0x63, 0, 1, 0, 0, 5, 0, 1, 0x0d, 0x0a, 0x2d, 0xb4, 0, 0, 0, 0,
        b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82,
    ];
    let statuses = upload(
        &server,
        &key,
        &[
            (
                "invoice",
                "repair.pdf",
                sample("REPAIR-2022-INV-001_multipage.pdf"),
            ),
            (
                "scan",
                "scan.pdf",
                sample("MEDRPT-2024-PAT-3847_medical_report_scan.pdf"),
            ),
            ("shot", "shot.jpg", sample("test_llm.jpg")),
            ("paper", "paper.docx", sample("test.docx")),
            ("book", "book.xlsx", sample("test.xlsx")),
            ("deck", "deck.pptx", sample("test.pptx")),
            ("blank", "blank.png", blank),
        ],
    )
    .await;
    let by_id = |id: &str| statuses.iter().find(|s| s["id"] == id).unwrap().clone();
    for id in ["invoice", "scan", "shot", "paper", "book", "deck"] {
        assert_eq!(
            by_id(id)["indexing_status"],
            "completed",
            "{:#?}",
            by_id(id)
        );
    }
    let blank = by_id("blank");
    assert_eq!(blank["indexing_status"], "errored", "{blank:#?}");
    assert_eq!(blank["error_code"], "E2002", "{blank:#?}");

    let invoice = chunks_of(&server, &key, "Gabriel Diaz", "invoice").await;
    assert!(invoice[0]["layout"]["page"].is_u64(), "{invoice:#?}");
    let scan = chunks_of(&server, &key, "patient", "scan").await;
    assert!(!scan.is_empty(), "the scan was read by OCR");
    assert!(scan[0]["layout"]["page"].is_u64());
    let shot = chunks_of(&server, &key, "5bda1dd6", "shot").await;
    assert!(!shot.is_empty(), "the screenshot's text was read by OCR");
    let book = chunks_of(
        &server,
        &key,
        "6ff4173b-42a5-4784-9b19-f49caff4d93d",
        "book",
    )
    .await;
    assert!(book[0]["layout"]["sheet"].is_string(), "{book:#?}");
    assert!(book[0]["chunk_content"]
        .as_str()
        .unwrap()
        .contains("| --- |"));
    let deck = chunks_of(&server, &key, "Human-written caption", "deck").await;
    assert!(deck[0]["layout"]["slide"].is_u64(), "{deck:#?}");
    let paper = chunks_of(&server, &key, "AutoGen multi-agent conversation", "paper").await;
    assert!(
        !paper[0]["layout"]["headings"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{paper:#?}"
    );
}

/// A Numbers spreadsheet written by numbers-parser (which `make setup-test` installs under
/// `.cache/python`), uploaded without a telling name: detected by content, indexed by sheet
/// with its header row. Skipped with a message when numbers-parser is not set up.
#[tokio::test]
async fn numbers_spreadsheets_are_indexed_by_sheet() {
    let pylib =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/python/numbers-parser");
    if !pylib.join("numbers_parser").is_dir() {
        eprintln!("numbers-parser is not installed (make setup-test installs it): skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.numbers");
    let script = r#"
import sys
from numbers_parser import Document
doc = Document()
doc.sheets[0].name = "Budget"
table = doc.sheets[0].tables[0]
rows = [["Department", "Spend", "Approved"], ["Marketing", 12500, True], ["Research", 48000.5, False]]
for r, row in enumerate(rows):
    for c, value in enumerate(row):
        table.write(r, c, value)
doc.save(sys.argv[1])
"#;
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .env("PYTHONPATH", &pylib)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");

    let server = Server::start();
    let key = server.key("org-numbers", &[]);
    server.ready_database(&key, "files").await;
    let statuses = upload(
        &server,
        &key,
        &[("budget", "upload.bin", std::fs::read(&path).unwrap())],
    )
    .await;
    assert_eq!(statuses[0]["indexing_status"], "completed", "{statuses:#?}");
    let chunks = chunks_of(&server, &key, "Research", "budget").await;
    assert_eq!(chunks.len(), 1, "{chunks:#?}");
    assert_eq!(chunks[0]["layout"]["sheet"], "Budget", "{chunks:#?}");
    let content = chunks[0]["chunk_content"].as_str().unwrap();
    assert!(
        content.contains("| Department | Spend | Approved |")
            && content.contains("| Research | 48000.5 | FALSE |"),
        "{content}"
    );
}
