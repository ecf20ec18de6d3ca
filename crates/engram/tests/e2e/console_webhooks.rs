//! The console's webhooks and operations pages from outside: over HTTP (each organization sees
//! only its own endpoint, deliveries and queue; a read key sees no form and its forged posts
//! are refused; secrets are never shown) and in a real browser (`console_webhooks.py`: an
//! endpoint registered on a receiver on loopback, a test event, deliveries succeeding, failing
//! and retried, the operations plot).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use axum::routing::post;
use serde_json::{json, Value};

use crate::common::receiver::{Answer, Receiver};
use crate::common::{app, eventually, Server, INDEXING_WAIT};
use crate::console::Browser;
use crate::webhooks::{deliveries, ingest, FAST};

/// Fast webhook retries, and the instance's figures on the operations page.
fn with_figures() -> Vec<(&'static str, &'static str)> {
    FAST.iter()
        .copied()
        .chain([("ENGRAM_CONSOLE__INSTANCE_FIGURES", "true")])
        .collect()
}

/// The organization's deliveries as the API lists them.
async fn listed(server: &Server, key: &str) -> Vec<Value> {
    deliveries(server, key, "?limit=100").await["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn the_webhooks_and_operations_pages_show_each_organization_only_its_own() {
    let server = Server::start_with(&with_figures());
    let receiver = Receiver::start().await;
    let key = server.key("acme", &[]);
    server.ready_database(&key, "acme-ledger").await;
    let mut owner = Browser::signed_in(&server, &key).await;

    let empty = owner.get("/console/webhooks").await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(empty.body.contains("No endpoint is registered"));
    assert!(empty.body.contains("Register endpoint"));

    // Refused as the API refuses it, with its status and code.
    let refused = owner
        .post(
            "/console/webhooks",
            &[
                ("url", "ftp://example.com/hook"),
                ("event_types", "indexing.status_changed"),
                ("signing", "off"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("VALIDATION_ERROR"),
        "{}",
        refused.body
    );
    let short = owner
        .post(
            "/console/webhooks",
            &[
                ("url", receiver.url.as_str()),
                ("event_types", "indexing.status_changed"),
                ("signing", "own"),
                ("signing_secret", "short"),
            ],
        )
        .await;
    assert_eq!(short.status, 422, "{}", short.body);
    let unchosen = owner
        .post(
            "/console/webhooks",
            &[
                ("url", receiver.url.as_str()),
                ("event_types", "indexing.status_changed"),
                ("signing", "off"),
                ("signing_secret", "typed-but-not-chosen-0123"),
            ],
        )
        .await;
    assert_eq!(unchosen.status, 400, "{}", unchosen.body);
    let none = owner
        .post(
            "/console/webhooks",
            &[("url", receiver.url.as_str()), ("signing", "off")],
        )
        .await;
    assert_eq!(none.status, 422, "no event: {}", none.body);
    assert_eq!(
        server.get("/webhooks/indexing", &key).await.body["registered"],
        false
    );

    // Registered with a secret of the user's: the API reads the same; no page shows the secret.
    let secret = "console-secret-0123456789";
    let registered = owner
        .post(
            "/console/webhooks",
            &[
                ("url", receiver.url.as_str()),
                ("event_types", "indexing.status_changed"),
                ("signing", "own"),
                ("signing_secret", secret),
            ],
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    assert_eq!(registered.headers["hx-redirect"], "/console/webhooks");
    let api = server.get("/webhooks/indexing", &key).await;
    assert_eq!(api.body["url"], receiver.url.as_str(), "{api:#?}");
    assert_eq!(api.body["signing_secret_configured"], true);
    let shown = owner.get("/console/webhooks").await;
    assert!(shown.body.contains(&receiver.url), "{}", shown.body);
    assert!(shown.body.contains("a signing secret is set"));
    assert!(shown.body.contains("Send test event"));
    assert!(!shown.body.contains(secret), "the secret is never shown");

    // The test event reaches the receiver, signed.
    let tested = owner.post("/console/webhooks/test", &[]).await;
    assert_eq!(tested.status, 200, "{}", tested.body);
    assert!(
        tested.body.contains(r#"data-delivered="true""#) && tested.body.contains("HTTP 200"),
        "{}",
        tested.body
    );
    let test = receiver.received().pop().expect("the test event");
    assert_eq!(test.json()["test"], true, "{:?}", test.json());
    assert!(test.header("x-service-signature").is_some());

    // An item's event: delivered, in the list and on its own page.
    ingest(
        &server,
        &key,
        "acme-ledger",
        &[app("inv-1", "Invoice", "The invoice is paid.")],
    )
    .await;
    let delivered = eventually(INDEXING_WAIT, "the item's delivery", || async {
        let all = listed(&server, &key).await;
        let first = all.first().cloned()?;
        (first["status"] == "delivered").then_some(first)
    })
    .await;
    let id = delivered["delivery_id"].as_str().unwrap().to_owned();
    let list = owner.get("/console/webhooks/deliveries").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(
        list.body
            .contains(&format!(r#"data-delivery="{id}" data-status="delivered""#)),
        "{}",
        list.body
    );
    assert!(list.body.contains("inv-1"));
    let detail = owner
        .get(&format!("/console/webhooks/deliveries/{id}"))
        .await;
    assert_eq!(detail.status, 200, "{}", detail.body);
    assert!(detail.body.contains("HTTP 200") && detail.body.contains("inv-1"));
    assert!(
        !detail.body.contains(r#"value="detail""#),
        "no retry for a delivered one"
    );
    let not_retryable = owner
        .post(&format!("/console/webhooks/deliveries/{id}/retry"), &[])
        .await;
    assert_eq!(not_retryable.status, 409, "{}", not_retryable.body);
    assert!(not_retryable.body.contains("DELIVERY_NOT_RETRYABLE"));
    let filtered = owner
        .get("/console/webhooks/deliveries?status=failed")
        .await;
    assert!(!filtered.body.contains(&id), "{}", filtered.body);
    let bad_filter = owner.get("/console/webhooks?status=done").await;
    assert_eq!(bad_filter.status, 400, "{}", bad_filter.body);

    // A failed delivery: a retry button, and retried from the console once the receiver is back.
    receiver.answer_by_default(Answer::Status(500));
    ingest(
        &server,
        &key,
        "acme-ledger",
        &[app("inv-2", "Invoice", "The second invoice is due.")],
    )
    .await;
    let failed = eventually(INDEXING_WAIT, "a permanent failure", || async {
        let all = listed(&server, &key).await;
        all.into_iter()
            .find(|d| d["doc_id"] == "inv-2" && d["status"] == "permanently_failed")
    })
    .await;
    let failed_id = failed["delivery_id"].as_str().unwrap().to_owned();
    let list = owner.get("/console/webhooks/deliveries").await;
    assert!(list.body.contains("HTTP 500"), "{}", list.body);
    assert!(
        list.body
            .contains(&format!("/console/webhooks/deliveries/{failed_id}/retry")),
        "{}",
        list.body
    );
    receiver.answer_by_default(Answer::Status(200));
    let retried = owner
        .post(
            &format!("/console/webhooks/deliveries/{failed_id}/retry"),
            &[("from", "list")],
        )
        .await;
    assert_eq!(retried.status, 200, "{}", retried.body);
    assert!(retried.body.contains("queued"));
    eventually(Duration::from_secs(30), "the retried delivery", || async {
        let all = listed(&server, &key).await;
        all.into_iter()
            .find(|d| d["delivery_id"] == failed_id.as_str() && d["status"] == "delivered")
    })
    .await;

    // A query, so the latency figures have something to show.
    server
        .post(
            "/query",
            &key,
            json!({"database": "acme-ledger", "query": "invoice"}),
        )
        .await
        .current_ok(200);
    let operations = owner.get("/console/operations").await;
    assert_eq!(operations.status, 200, "{}", operations.body);
    for part in [
        "acme-ledger",
        r#"id="ops-plot""#,
        "/console/assets/operations.js",
        "Since start",
        "items completed",
    ] {
        assert!(
            operations.body.contains(part),
            "{part}: {}",
            operations.body
        );
    }
    assert!(!operations.body.contains("<script>"), "no inline script");
    let figures = owner.get("/console/operations/figures").await;
    assert_eq!(figures.status, 200);
    assert!(
        figures.body.starts_with(r#"<div id="ops-figures""#),
        "{}",
        figures.body
    );
    assert!(figures.body.contains(r#"data-queue=""#));
    let script = owner.get("/console/assets/operations.js").await;
    assert_eq!(script.status, 200);
    assert!(script.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));

    // Another organization: neither the endpoint, nor the deliveries, nor the queue.
    let stranger = server.key("globex", &[]);
    server.ready_database(&stranger, "globex-notes").await;
    let mut other = Browser::signed_in(&server, &stranger).await;
    let theirs = other.get("/console/webhooks").await;
    assert_eq!(theirs.status, 200, "{}", theirs.body);
    assert!(theirs.body.contains("No endpoint is registered"));
    for hidden in [
        receiver.url.as_str(),
        id.as_str(),
        failed_id.as_str(),
        "inv-1",
    ] {
        assert!(!theirs.body.contains(hidden), "{hidden}: {}", theirs.body);
    }
    let detail = other
        .get(&format!("/console/webhooks/deliveries/{id}"))
        .await;
    assert_eq!(detail.status, 404, "{}", detail.body);
    assert!(detail.body.contains("DELIVERY_NOT_FOUND"));
    assert!(!detail.body.contains("inv-1"));
    let retry = other
        .post(
            &format!("/console/webhooks/deliveries/{failed_id}/retry"),
            &[],
        )
        .await;
    assert_eq!(retry.status, 404, "{}", retry.body);
    let test = other.post("/console/webhooks/test", &[]).await;
    assert_eq!(test.status, 404, "{}", test.body);
    assert!(test.body.contains("WEBHOOK_NOT_FOUND"));
    let deleted = other.post("/console/webhooks/delete", &[]).await;
    assert_eq!(
        deleted.status, 200,
        "deleting none of its own: {}",
        deleted.body
    );
    assert_eq!(
        server.get("/webhooks/indexing", &key).await.body["registered"],
        true,
        "acme's endpoint stays"
    );
    let operations = other.get("/console/operations").await;
    assert_eq!(operations.status, 200);
    assert!(operations.body.contains("globex-notes"));
    assert!(
        !operations.body.contains("acme-ledger"),
        "{}",
        operations.body
    );
    assert!(operations.body.contains("organization <code>globex</code>"));

    // A read key of the same organization: no form, no deliveries, and its posts are refused.
    let reader = server.scoped_key("acme", &[], &["read"]);
    let mut read_only = Browser::signed_in(&server, &reader).await;
    let page = read_only.get("/console/webhooks").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("FORBIDDEN"), "{}", page.body);
    assert!(
        !page.body.contains(r#"hx-post="/console/webhooks"#),
        "no form"
    );
    for hidden in [receiver.url.as_str(), id.as_str()] {
        assert!(!page.body.contains(hidden), "{hidden}");
    }
    for (path, form) in [
        (
            "/console/webhooks",
            vec![
                ("url", "https://93.184.215.14/forged"),
                ("event_types", "indexing.status_changed"),
                ("signing", "off"),
            ],
        ),
        ("/console/webhooks/delete", vec![]),
        ("/console/webhooks/test", vec![]),
    ] {
        let forged = read_only.post(path, &form).await;
        assert_eq!(forged.status, 403, "{path}: {}", forged.body);
    }
    let forged = read_only
        .post(
            &format!("/console/webhooks/deliveries/{failed_id}/retry"),
            &[],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(
        read_only
            .get(&format!("/console/webhooks/deliveries/{id}"))
            .await
            .status,
        403
    );
    let api = server.get("/webhooks/indexing", &key).await;
    assert_eq!(api.body["url"], receiver.url.as_str(), "unchanged");
    let operations = read_only.get("/console/operations").await;
    assert_eq!(operations.status, 200);
    assert!(operations.body.contains("acme-ledger"));
    assert!(!operations.body.contains("globex-notes"));

    // Signing turned off, then the endpoint deleted, from the console.
    let off = owner
        .post(
            "/console/webhooks",
            &[
                ("url", receiver.url.as_str()),
                ("event_types", "indexing.status_changed"),
                ("signing", "off"),
            ],
        )
        .await;
    assert_eq!(off.status, 200, "{}", off.body);
    assert_eq!(
        server.get("/webhooks/indexing", &key).await.body["signing_secret_configured"],
        false
    );
    let gone = owner.post("/console/webhooks/delete", &[]).await;
    assert_eq!(gone.headers["hx-redirect"], "/console/webhooks");
    assert_eq!(
        server.get("/webhooks/indexing", &key).await.body["registered"],
        false
    );
    let after = owner.get("/console/webhooks").await;
    assert!(after.body.contains("No endpoint is registered"));
    assert!(after.body.contains(&id), "the history stays");
}

/// The browser suite (`console_webhooks.py`). The receiver on loopback fails or answers as the
/// suite asks through a control address the test serves (`POST /fail`, `POST /ok`).
#[tokio::test]
async fn the_webhooks_and_operations_pages_work_in_a_real_browser() {
    let server = Server::start_with(&with_figures());
    let receiver = Receiver::start().await;
    let key = server.key("acme", &[]);
    server.ready_database(&key, "hooks").await;
    for _ in 0..3 {
        server
            .post(
                "/query",
                &key,
                json!({"database": "hooks", "query": "anything"}),
            )
            .await
            .current_ok(200);
    }
    let (failing, healthy) = (receiver.clone(), receiver.clone());
    let control = crate::common::serve(
        axum::Router::new()
            .route(
                "/fail",
                post(move || async move { failing.answer_by_default(Answer::Status(500)) }),
            )
            .route(
                "/ok",
                post(move || async move { healthy.answer_by_default(Answer::Status(200)) }),
            ),
    )
    .await;
    crate::console::browser_suite(
        &server,
        "console_webhooks.py",
        &[
            ("ENGRAM_KEY", key.clone()),
            ("RECEIVER_URL", receiver.url.clone()),
            ("CONTROL_URL", control),
        ],
    )
    .await;
    // What the browser did went through the API's functions: the API sees it.
    let registered = server.get("/webhooks/indexing", &key).await;
    assert_eq!(registered.body["url"], receiver.url.as_str());
    let all = listed(&server, &key).await;
    assert!(
        all.iter().filter(|d| d["status"] == "delivered").count() >= 2,
        "{all:#?}"
    );
}
