//! End to end: webhook registration rules, signed deliveries to a real receiver on loopback
//! (signatures checked by the README's Python example, independently of engram's code),
//! retries with one delivery id, permanent failure and manual retry, the history, and delivery
//! after SIGKILL.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use common::receiver::{Answer, Received, Receiver};
use common::{app, eventually, send_form, Server};
use reqwest::Method;
use serde_json::{json, Value};

pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A fast schedule so retries happen within a test: 100 ms doubling to 400 ms, 4 attempts,
/// half a second for the receiver, leases of 2 s.
pub(crate) const FAST: &[(&str, &str)] = &[
    ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ("ENGRAM_WEBHOOKS__RETRY_BASE_MS", "100"),
    ("ENGRAM_WEBHOOKS__RETRY_MAX_MS", "400"),
    ("ENGRAM_WEBHOOKS__RETRY_JITTER", "0"),
    ("ENGRAM_WEBHOOKS__MAX_ATTEMPTS", "4"),
    ("ENGRAM_WEBHOOKS__TIMEOUT_MS", "500"),
    ("ENGRAM_WEBHOOKS__LEASE_MS", "2000"),
    ("ENGRAM_WEBHOOKS__SWEEP_MS", "50"),
];

pub(crate) async fn ingest(server: &Server, key: &str, database: &str, items: &[Value]) {
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", database.to_owned())
        .text("app_knowledge", Value::from(items.to_vec()).to_string());
    send_form(server, "/context/ingest", key, form)
        .await
        .current_ok(202);
}

/// A webhook management answer: the spec's plain object at the top level, and the same object
/// as the envelope's `data` (what the hosted service's clients read). Returns the object.
fn plain(reply: &common::Reply) -> Value {
    let data = reply.body["data"].clone();
    assert_eq!(reply.body["success"], true, "{reply:#?}");
    for (field, value) in data.as_object().expect("data is an object") {
        assert_eq!(&reply.body[field], value, "{reply:#?}");
    }
    data
}

pub(crate) async fn register(server: &Server, key: &str, body: Value) -> Value {
    let reply = server.post("/webhooks/indexing", key, body).await;
    assert_eq!(reply.status.as_u16(), 201, "{reply:#?}");
    plain(&reply)
}

pub(crate) async fn deliveries(server: &Server, key: &str, query: &str) -> Value {
    let reply = server
        .get(&format!("/webhooks/indexing/deliveries{query}"), key)
        .await;
    assert_eq!(reply.status.as_u16(), 200, "{reply:#?}");
    plain(&reply)
}

/// Waits until the receiver has a request for each of `count` distinct delivery ids.
pub(crate) async fn received_events(receiver: &Receiver, count: usize) -> Vec<Received> {
    eventually(WAIT, "webhook events", || async {
        let got = receiver.received();
        let ids: HashSet<String> = got
            .iter()
            .filter(|r| r.json().get("test").is_none())
            .map(Received::delivery_id)
            .collect();
        (ids.len() >= count).then_some(got)
    })
    .await
}

/// Ingests one item into `docs` and returns its event, the `nth` the receiver has seen.
async fn event_for(
    server: &Server,
    key: &str,
    receiver: &Receiver,
    id: &str,
    nth: usize,
) -> Received {
    ingest(
        server,
        key,
        "docs",
        &[app(id, "Printer", "The printer needs attention.")],
    )
    .await;
    let got = received_events(receiver, nth).await;
    got.into_iter().find(|r| r.json()["id"] == id).unwrap()
}

/// The README's verification example, run by Python on the raw body: true when it accepts.
fn readme_verifies(secret: &str, received: &Received) -> bool {
    let readme = include_str!("../../../../README.md");
    let marker = "<!-- verify-signature";
    let after = &readme[readme.find(marker).expect("the README example")..];
    let start = after.find("```python\n").expect("a python block") + "```python\n".len();
    let code = &after[start..start + after[start..].find("```").expect("block end")];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("body"), &received.body).unwrap();
    let script = format!(
        "{code}\nimport os, sys\nbody = open(sys.argv[1], 'rb').read()\n\
         sys.exit(0 if verify(os.environ['SECRET'], body, os.environ.get('SIGNATURE')) else 1)\n"
    );
    std::fs::write(dir.path().join("verify.py"), script).unwrap();
    let mut command = std::process::Command::new("python3");
    command
        .arg(dir.path().join("verify.py"))
        .arg(dir.path().join("body"))
        .env("SECRET", secret);
    match received.header("x-service-signature") {
        Some(signature) => command.env("SIGNATURE", signature),
        None => command.env_remove("SIGNATURE"),
    };
    let status = command.status().expect("python3 runs");
    status.success()
}

#[tokio::test]
async fn registration_is_validated_and_secrets_are_shown_once() {
    let server = Server::start();
    let key = server.key("org-hooks", &[]);
    let restricted = server.key("org-hooks", &["docs"]);
    let stranger = server.key("org-other", &[]);

    let none = server.get("/webhooks/indexing", &key).await;
    assert_eq!(none.status.as_u16(), 200);
    assert_eq!(
        plain(&none),
        json!({"registered": false, "url": null, "event_types": [], "signing_secret_configured": false})
    );

    server
        .post("/webhooks/indexing", &key, json!({}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    server
        .post("/webhooks/indexing", &key, json!({"url": 5}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    server
        .post(
            "/webhooks/indexing",
            &key,
            json!({"url": "https://93.184.215.14/hook", "event_types": "indexing.status_changed"}),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    for refused in [
        "http://93.184.215.14/hook",
        "https://127.0.0.1/hook",
        "https://localhost:8443/hook",
        "https://10.1.2.3/hook",
        "https://192.168.0.10/hook",
        "https://169.254.169.254/latest",
        "https://[::1]/hook",
        "https://[fd00::1]/hook",
        "https://[fe80::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "ftp://93.184.215.14/hook",
        "not a url",
    ] {
        server
            .post("/webhooks/indexing", &key, json!({"url": refused}))
            .await
            .assert_current_error(422, "VALIDATION_ERROR");
    }
    let public = "https://93.184.215.14/hook";
    for bad in [
        json!({"url": public, "signing_secret": "0123456789abcde"}),
        json!({"url": public, "signing_secret": "0123456789abcdef", "generate_signing_secret": true}),
        json!({"url": public, "event_types": ["indexing.started"]}),
        json!({"url": public, "event_types": []}),
    ] {
        server
            .post("/webhooks/indexing", &key, bad.clone())
            .await
            .assert_current_error(422, "VALIDATION_ERROR");
    }
    server
        .post("/webhooks/indexing", &restricted, json!({"url": public}))
        .await
        .assert_current_error(403, "FORBIDDEN");
    server
        .call(Method::GET, "/webhooks/indexing", None, None)
        .await
        .assert_current_error(401, "UNAUTHORIZED");

    // Generated: shown in this answer only.
    let created = register(
        &server,
        &key,
        json!({"url": public, "generate_signing_secret": true}),
    )
    .await;
    let secret = created["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 16);
    assert_eq!(created["registered"], true);
    assert_eq!(created["url"], public);
    assert_eq!(created["event_types"], json!(["indexing.status_changed"]));
    assert_eq!(created["signing_secret_configured"], true);
    let read = server.get("/webhooks/indexing", &key).await;
    assert_eq!(read.body["signing_secret_configured"], true);
    assert!(!read.body.to_string().contains(&secret), "{read:#?}");
    assert!(read.body.get("signing_secret").is_none());

    // Re-registering without a secret keeps it; the other organization sees nothing.
    let moved = register(
        &server,
        &key,
        json!({"url": "https://93.184.215.15/other", "event_types": ["indexing.status_changed"]}),
    )
    .await;
    assert_eq!(moved["signing_secret_configured"], true);
    assert!(moved.get("signing_secret").is_none());
    let theirs = server.get("/webhooks/indexing", &stranger).await;
    assert_eq!(theirs.body["registered"], false);

    // Own secret, generated secret, signing off.
    server
        .post(
            "/webhooks/indexing/signing-secret",
            &key,
            json!({"signing_secret": "short"}),
        )
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    let own = server
        .post(
            "/webhooks/indexing/signing-secret",
            &key,
            json!({"signing_secret": "my-own-secret-0123456789"}),
        )
        .await;
    assert_eq!(own.status.as_u16(), 200, "{own:#?}");
    assert_eq!(own.body["generated"], false);
    assert!(!own.body.to_string().contains("my-own-secret"));
    let generated = server
        .call(
            Method::POST,
            "/webhooks/indexing/signing-secret",
            Some(&key),
            None,
        )
        .await;
    assert_eq!(generated.body["generated"], true, "{generated:#?}");
    assert!(generated.body["signing_secret"].as_str().unwrap().len() >= 16);
    let off = server
        .delete("/webhooks/indexing/signing-secret", &key)
        .await;
    assert_eq!(off.status.as_u16(), 200, "{off:#?}");
    assert_eq!(
        server.get("/webhooks/indexing", &key).await.body["signing_secret_configured"],
        false
    );

    // The history's parameters.
    for query in [
        "?limit=0",
        "?limit=101",
        "?limit=x",
        "?status=done",
        "?cursor=abc",
        "?cursor=dc_-4",
    ] {
        server
            .get(&format!("/webhooks/indexing/deliveries{query}"), &key)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
    }
    let empty = deliveries(&server, &key, "?limit=100&status=failed").await;
    assert_eq!(
        empty,
        json!({"deliveries": [], "count": 0, "next_cursor": null})
    );
    server
        .get("/webhooks/indexing/deliveries/dlv_unknown", &key)
        .await
        .assert_current_error(404, "DELIVERY_NOT_FOUND");
    server
        .post(
            "/webhooks/indexing/deliveries/dlv_unknown/retry",
            &key,
            json!({}),
        )
        .await
        .assert_current_error(404, "DELIVERY_NOT_FOUND");

    // Deleted: the secret goes with it.
    let deleted = server.delete("/webhooks/indexing", &key).await;
    assert_eq!(deleted.body["deleted"], true, "{deleted:#?}");
    assert_eq!(
        server.delete("/webhooks/indexing", &key).await.body["deleted"],
        false
    );
    server
        .post("/webhooks/indexing/test", &key, json!({}))
        .await
        .assert_current_error(404, "WEBHOOK_NOT_FOUND");
    server
        .call(
            Method::POST,
            "/webhooks/indexing/signing-secret",
            Some(&key),
            None,
        )
        .await
        .assert_current_error(404, "WEBHOOK_NOT_FOUND");
    server
        .delete("/webhooks/indexing/signing-secret", &key)
        .await
        .assert_current_error(404, "WEBHOOK_NOT_FOUND");
}

#[tokio::test]
async fn events_are_signed_delivered_and_recorded() {
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("org-events", &[]);
    let receiver = Receiver::start().await;
    server.ready_database(&key, "docs").await;
    let created = register(
        &server,
        &key,
        json!({"url": receiver.url, "generate_signing_secret": true}),
    )
    .await;
    let secret = created["signing_secret"].as_str().unwrap().to_owned();

    // One app item completes; one blank file errors.
    ingest(
        &server,
        &key,
        "docs",
        &[app("ok-1", "Printer", "The printer is jammed.")],
    )
    .await;
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "docs")
        .text("collection", "team")
        .part(
            "documents",
            reqwest::multipart::Part::bytes(b"  \n\t \n".to_vec())
                .file_name("blank.txt")
                .mime_str("text/plain")
                .unwrap(),
        )
        .text("document_metadata", json!([{"id": "blank-1"}]).to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);

    let got = received_events(&receiver, 2).await;
    assert_eq!(got.len(), 2, "one request per event: {got:#?}");
    let by_item = |id: &str| got.iter().find(|r| r.json()["id"] == id).unwrap().clone();
    let (ok, blank) = (by_item("ok-1"), by_item("blank-1"));
    for event in [&ok, &blank] {
        let body = event.json();
        assert_eq!(event.header("content-type"), Some("application/json"));
        assert_eq!(
            event.header("x-service-event"),
            Some("indexing.status_changed")
        );
        assert_eq!(body["delivery_id"], event.delivery_id());
        assert_eq!(body["event"], "indexing.status_changed");
        assert_eq!(body["doc_id"], body["id"], "older forms call the id doc_id");
        assert_eq!(body["database"], "docs");
        assert_ne!(
            body["tenant_id"], "docs",
            "tenant_id identifies, it is not the name"
        );
        assert!(body["tenant_id"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(body["sub_tenant_id"], body["collection"]);
        assert!(body["timestamp"].as_str().unwrap().contains('T'));
        assert!(body.get("test").is_none());
        assert!(readme_verifies(&secret, event), "signature of {body}");
        assert!(!readme_verifies("another-secret-of-16", event));
    }
    assert_eq!(ok.json()["status"], "completed");
    assert_eq!(ok.json()["collection"], "docs");
    assert!(ok.json().get("error_code").is_none());
    assert_eq!(blank.json()["status"], "errored");
    assert_eq!(blank.json()["collection"], "team");
    assert_eq!(blank.json()["error_code"], "E2002");
    // A tampered body fails the README check.
    let mut tampered = ok.clone();
    tampered.body = String::from_utf8(ok.body.clone())
        .unwrap()
        .replacen("ok-1", "ok-2", 1)
        .into_bytes();
    assert!(!readme_verifies(&secret, &tampered));

    // The history: both delivered on the first attempt.
    let history = eventually(WAIT, "both recorded as delivered", || async {
        let history = deliveries(&server, &key, "?status=delivered").await;
        (history["count"] == 2).then_some(history)
    })
    .await;
    let first = &history["deliveries"][0];
    assert_eq!(first["attempts"], 1);
    assert_eq!(first["event_type"], "indexing.status_changed");
    assert_eq!(first["error_code"], Value::Null);
    assert!(first["created_at"].as_str().unwrap().contains('T'));
    let one = server
        .get(
            &format!("/webhooks/indexing/deliveries/{}", ok.delivery_id()),
            &key,
        )
        .await;
    assert_eq!(one.body["doc_id"], "ok-1", "{one:#?}");
    assert_eq!(one.body["status"], "delivered");
    assert_eq!(one.body["indexing_status"], "completed");
    assert_eq!(one.body["webhook_url"], receiver.url);
    server
        .post(
            &format!("/webhooks/indexing/deliveries/{}/retry", ok.delivery_id()),
            &key,
            json!({}),
        )
        .await
        .assert_current_error(409, "DELIVERY_NOT_RETRYABLE");
    let stranger = server.key("org-stranger", &[]);
    server
        .get(
            &format!("/webhooks/indexing/deliveries/{}", ok.delivery_id()),
            &stranger,
        )
        .await
        .assert_current_error(404, "DELIVERY_NOT_FOUND");
    assert_eq!(deliveries(&server, &stranger, "").await["count"], 0);

    // Pages of one walk the history newest first without repeats.
    let page1 = deliveries(&server, &key, "?limit=1").await;
    let cursor = page1["next_cursor"].as_str().unwrap().to_owned();
    let page2 = deliveries(&server, &key, &format!("?limit=1&cursor={cursor}")).await;
    assert_eq!(page2["count"], 1);
    assert_eq!(page2["next_cursor"], Value::Null);
    assert_ne!(
        page1["deliveries"][0]["delivery_id"],
        page2["deliveries"][0]["delivery_id"]
    );

    // The test delivery: synthetic, signed, absent from the history.
    let tested = server
        .post("/webhooks/indexing/test", &key, json!({}))
        .await;
    assert_eq!(tested.status.as_u16(), 200, "{tested:#?}");
    assert_eq!(tested.body["delivered"], true);
    assert_eq!(tested.body["status_code"], 200);
    let test_event = receiver
        .received()
        .into_iter()
        .find(|r| r.json().get("test").is_some())
        .expect("the test event");
    let body = test_event.json();
    assert!(body["delivery_id"].as_str().unwrap().starts_with("test_"));
    assert_eq!(body["id"], "test_document");
    assert_eq!(body["doc_id"], "test_document");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["test"], true);
    assert_eq!(body["database"], body["tenant_id"]);
    assert_eq!(body["collection"], body["sub_tenant_id"]);
    assert!(readme_verifies(&secret, &test_event));
    assert_eq!(deliveries(&server, &key, "").await["count"], 2);

    // Rotation takes effect at once; with signing off the header is absent.
    let rotated = server
        .call(
            Method::POST,
            "/webhooks/indexing/signing-secret",
            Some(&key),
            None,
        )
        .await;
    let new_secret = rotated.body["signing_secret"].as_str().unwrap().to_owned();
    let second = event_for(&server, &key, &receiver, "ok-2", 3).await;
    assert!(readme_verifies(&new_secret, &second));
    assert!(!readme_verifies(&secret, &second));
    server
        .delete("/webhooks/indexing/signing-secret", &key)
        .await;
    let third = event_for(&server, &key, &receiver, "ok-3", 4).await;
    assert_eq!(third.header("x-service-signature"), None);
    assert!(!readme_verifies(&new_secret, &third), "no header, no trust");
}

#[tokio::test]
async fn failures_retry_with_one_delivery_id_then_fail_permanently() {
    let server = Server::start_with(FAST);
    let key = server.key("org-retry", &[]);
    let receiver = Receiver::start().await;
    server.ready_database(&key, "docs").await;
    let created = register(
        &server,
        &key,
        json!({"url": receiver.url, "signing_secret": "first-secret-0123456789"}),
    )
    .await;
    assert_eq!(created["signing_secret_configured"], true);

    // A 500, then a stall past the time-out, then success: three attempts, one id.
    receiver.script(&[
        Answer::Status(500),
        Answer::Stall(Duration::from_millis(1500)),
    ]);
    ingest(
        &server,
        &key,
        "docs",
        &[app("flaky", "Flaky", "Retried until it works.")],
    )
    .await;
    let id = received_events(&receiver, 1).await[0].delivery_id();
    let attempts = eventually(WAIT, "three attempts", || async {
        let got = receiver.for_delivery(&id);
        (got.len() >= 3).then_some(got)
    })
    .await;
    assert!(attempts.iter().all(|r| r.json()["delivery_id"] == id));
    assert!(
        attempts.windows(2).all(|w| w[0].body == w[1].body),
        "every attempt sends the same bytes"
    );
    let record = eventually(WAIT, "delivered after retries", || async {
        let reply = server
            .get(&format!("/webhooks/indexing/deliveries/{id}"), &key)
            .await;
        (reply.body["status"] == "delivered").then_some(reply.body)
    })
    .await;
    assert_eq!(record["attempts"], 3, "{record}");
    assert_eq!(receiver.for_delivery(&id).len(), 3);
    // Backoff: the retry after the 500 waited at least the base delay.
    assert!(attempts[1].at.duration_since(attempts[0].at) >= Duration::from_millis(90));

    // Always 503: four attempts, then permanently_failed with the last error.
    receiver.answer_by_default(Answer::Status(503));
    ingest(
        &server,
        &key,
        "docs",
        &[app("doomed", "Doomed", "Never accepted.")],
    )
    .await;
    let failed = eventually(WAIT, "permanently failed", || async {
        let page = deliveries(&server, &key, "?status=permanently_failed").await;
        (page["count"] == 1).then(|| page["deliveries"][0].clone())
    })
    .await;
    assert_eq!(failed["doc_id"], "doomed");
    assert_eq!(failed["attempts"], 4);
    assert_eq!(failed["error_code"], "RECEIVER_ERROR");
    assert_eq!(failed["status_code"], 503);
    let doomed = failed["delivery_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        receiver.for_delivery(&doomed).len(),
        4,
        "no automatic retry after the last"
    );

    // A manual retry is signed with the secret in force now.
    server
        .post(
            "/webhooks/indexing/signing-secret",
            &key,
            json!({"signing_secret": "second-secret-0123456789"}),
        )
        .await;
    receiver.answer_by_default(Answer::Status(204));
    let queued = server
        .post(
            &format!("/webhooks/indexing/deliveries/{doomed}/retry"),
            &key,
            json!({}),
        )
        .await;
    assert_eq!(queued.status.as_u16(), 200, "{queued:#?}");
    assert_eq!(queued.body["queued"], true);
    assert_eq!(queued.body["delivery_id"], doomed);
    let fifth = eventually(WAIT, "the manual attempt", || async {
        let got = receiver.for_delivery(&doomed);
        (got.len() == 5).then(|| got[4].clone())
    })
    .await;
    assert!(readme_verifies("second-secret-0123456789", &fifth));
    assert!(!readme_verifies("first-secret-0123456789", &fifth));
    eventually(WAIT, "delivered by hand", || async {
        let reply = server
            .get(&format!("/webhooks/indexing/deliveries/{doomed}"), &key)
            .await;
        (reply.body["status"] == "delivered" && reply.body["attempts"] == 5).then_some(())
    })
    .await;
}

/// SIGKILL the server while deliveries are under way (the receiver is slow), restart it: every
/// event is delivered at least once and recorded as delivered; none is lost.
#[tokio::test]
async fn every_event_is_delivered_after_sigkill() {
    // Indexing leases short too, so items the crash interrupted are indexed again soon.
    let mut envs: Vec<_> = FAST
        .iter()
        .copied()
        .filter(|(name, _)| *name != "ENGRAM_WEBHOOKS__MAX_ATTEMPTS")
        .collect();
    envs.push(("ENGRAM_PIPELINE__LEASE_MS", "1500"));
    let mut server = Server::start_with(&envs);
    let key = server.key("org-crash", &[]);
    let receiver = Receiver::start().await;
    server.ready_database(&key, "docs").await;
    register(&server, &key, json!({"url": receiver.url})).await;
    // Slow answers keep deliveries in flight (past the time-out, so they are retried too).
    receiver.answer_by_default(Answer::Stall(Duration::from_millis(700)));
    let items: Vec<Value> = (0..30)
        .map(|i| {
            app(
                &format!("item-{i}"),
                "Crash",
                &format!("Item number {i} of the crash test."),
            )
        })
        .collect();
    ingest(&server, &key, "docs", &items).await;
    received_events(&receiver, 3).await;
    server.kill();
    receiver.answer_by_default(Answer::Status(200));
    server.restart();

    let history = eventually(WAIT, "all 30 delivered", || async {
        let page = deliveries(&server, &key, "?limit=100").await;
        let all_delivered = page["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["status"] == "delivered");
        (page["count"] == 30 && all_delivered).then_some(page)
    })
    .await;
    let recorded: BTreeSet<String> = history["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap().to_owned())
        .collect();
    let items_recorded: BTreeSet<String> = history["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["doc_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(items_recorded.len(), 30, "one event per item");
    let received: BTreeSet<String> = receiver
        .received()
        .iter()
        .map(Received::delivery_id)
        .collect();
    assert_eq!(received, recorded, "every event reached the receiver");
    server.assert_consistent();
}
