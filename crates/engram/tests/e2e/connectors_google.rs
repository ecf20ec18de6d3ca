//! The google_drive and gmail connectors from outside, on the stateful Google fake with small
//! pages: a Drive (My Drive and a shared drive: a Google Doc exported, a PDF downloaded, a folder
//! skipped, a file shared with a group, one whose sharing cannot be read) synced, then followed
//! through the changes feed (an edit, a trash, a sharing change), a Drive notification (signed
//! with the channel token, forged), a rate limit and a bad token; a Gmail label synced (a message
//! with an attachment), followed through its history (a message added, one deleted, one
//! unlabelled) and an expired history (a full pass). With engram's public address configured,
//! the Drive pass opens its own push channel: a change in Drive is notified by the fake and
//! found at once, and a changes token Drive refuses makes a full listing. Every call the
//! connectors made and the fake answered is held to Google's published clients.
#![allow(clippy::unwrap_used)] // test code

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, assert_rate_limited, assert_secrets_hidden, configure, counts, create, discover,
    indexed, listed, plain, rejected_credentials_are_a_reconnect, server_for_fakes, sync,
    FAKES_ENV,
};
use crate::common::{eventually, Server};
use engram_fakes::google::{assert_conforms, GoogleFake};

const CHANNEL: &str = "drive-channel-token-never-logged-01";

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/markitdown")
            .join(name),
    )
    .unwrap()
}

/// The titles `/query` answers for `query` as a caller holding `acl`.
async fn readable(server: &Server, key: &str, db: &str, query: &str, acl: Value) -> Vec<String> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": db, "query": query, "max_results": 10, "acl": acl}),
        )
        .await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["source_title"].as_str().map(str::to_owned))
        .collect()
}

async fn titles(server: &Server, key: &str, db: &str) -> Vec<String> {
    let mut titles: Vec<String> = listed(server, key, db)
        .await
        .iter()
        .filter_map(|s| s["title"].as_str().map(str::to_owned))
        .collect();
    titles.sort();
    titles
}

/// Delivers a Drive notification with `token` as its channel token.
async fn notify(server: &Server, id: &str, token: &str, number: u64, state: &str) -> u16 {
    server
        .client
        .post(server.url(&format!("/connectors/{id}/events")))
        .header("x-goog-channel-id", "engram-channel-1")
        .header("x-goog-channel-token", token)
        .header("x-goog-resource-state", state)
        .header("x-goog-message-number", number.to_string())
        .header("x-goog-resource-id", "resource-1")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_google_drive_syncs_exports_and_sharing_follows_changes_and_pushes() {
    const DB: &str = "drive";
    let token = "ya29.drive-SecretValue-1234";
    let fake = GoogleFake::start(token, "ana@example.com", 2).await;
    let shared = fake.add_drive("Engineering");
    let group = json!({"kind": "drive#permission", "id": "p1", "type": "group",
        "emailAddress": "oncall@example.com", "role": "reader"});
    let doc = fake.add_file(
        None,
        "AutoGen paper",
        "application/vnd.google-apps.document",
        &sample("test.docx"),
        &[],
    );
    fake.add_file(
        None,
        "Archive",
        "application/vnd.google-apps.folder",
        b"",
        &[],
    );
    let runbook = fake.add_file(
        None,
        "runbook.txt",
        "text/plain",
        b"The pager rotation changes hands every Monday at nine.",
        std::slice::from_ref(&group),
    );
    let vpn = fake.add_file(
        None,
        "vpn.txt",
        "text/plain",
        b"The old VPN concentrator lives in the basement.",
        &[],
    );
    let pdf = fake.add_file(
        Some(&shared),
        "repair.pdf",
        "application/pdf",
        &sample("REPAIR-2022-INV-001_multipage.pdf"),
        &[],
    );
    fake.hide_sharing(&pdf);

    let server = server_for_fakes();
    let key = server.key("conn-gdrive", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "google_drive", "database": DB,
               "credentials": {"access_token": token, "api_url": fake.api_url(), "channel_token": CHANNEL}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    let mut offered: Vec<String> = resources
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        [format!("drive:{shared}"), "drive:root".to_owned()],
        "{found:#?}"
    );
    configure(
        &server,
        &key,
        &id,
        json!([
            {"resource_id": "drive:root", "resource_type": "drive"},
            {"resource_id": format!("drive:{shared}"), "resource_type": "drive"}
        ]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(
        counts(&status),
        (json!(4), json!(0), json!(0)),
        "a Doc, two text files and a PDF; the folder skipped: {status:#?}"
    );
    assert!(
        status.to_string().contains("sharing of 1 file"),
        "the PDF's sharing could not be read: {status:#?}"
    );
    let sources = listed(&server, &key, DB).await;
    let paper = sources
        .iter()
        .find(|s| s["title"] == "AutoGen paper")
        .expect("the Doc");
    let meta = &paper["additional_metadata"];
    assert_eq!(
        (
            meta["mime_type"].clone(),
            meta["owner"].clone(),
            meta["drive_id"].clone(),
            meta["acl"].clone()
        ),
        (
            json!("application/vnd.google-apps.document"),
            json!("ana@example.com"),
            json!("root"),
            json!(["ana@example.com"])
        ),
        "{paper:#?}"
    );
    let repair = sources
        .iter()
        .find(|s| s["title"] == "repair.pdf")
        .expect("the PDF");
    assert_eq!(
        repair["additional_metadata"]["drive"], "Engineering",
        "{repair:#?}"
    );
    assert!(
        repair["additional_metadata"].get("acl").is_none()
            || repair["additional_metadata"]["acl"].is_null(),
        "{repair:#?}"
    );
    indexed(&server, &key, DB).await;
    assert!(readable(
        &server,
        &key,
        DB,
        "multi-agent conversation AutoGen",
        json!(["ana@example.com"])
    )
    .await
    .contains(&"AutoGen paper".to_owned()));
    // The group the runbook is shared with reads it; another principal does not.
    let pager = "when does the pager rotation change hands";
    assert!(readable(
        &server,
        &key,
        DB,
        pager,
        json!(["group:oncall@example.com"])
    )
    .await
    .contains(&"runbook.txt".to_owned()));
    assert!(
        !readable(&server, &key, DB, pager, json!(["bo@example.com"]))
            .await
            .contains(&"runbook.txt".to_owned())
    );

    // An edit, a trash and a sharing change, read from the changes feed.
    fake.edit(
        &runbook,
        b"The pager rotation now changes hands every Tuesday at ten.",
    );
    fake.trash(&vpn);
    fake.share(
        &doc,
        json!({"kind": "drive#permission", "id": "p2", "type": "domain", "domain": "example.com", "role": "reader"}),
    );
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(2), json!(1)),
        "{status:#?}"
    );
    assert!(!titles(&server, &key, DB)
        .await
        .contains(&"vpn.txt".to_owned()));
    let changes: Vec<_> = fake
        .exchanges()
        .into_iter()
        .filter(|e| e.method == "Changes$List")
        .collect();
    assert!(
        !changes.is_empty(),
        "the second pass reads the changes feed"
    );

    // A notification signed with the channel token syncs at once; a forged one is refused.
    let added = fake.add_file(
        None,
        "lunch.txt",
        "text/plain",
        b"Lunch is at noon on Fridays.",
        &[],
    );
    assert_eq!(
        notify(&server, &id, "not-the-channel-token-000000", 2, "change").await,
        401
    );
    assert_eq!(notify(&server, &id, CHANNEL, 1, "sync").await, 200);
    assert_eq!(notify(&server, &id, CHANNEL, 2, "change").await, 202);
    let status = after_run(&server, &key, &id, 2).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(0), json!(0)),
        "{status:#?} {added}"
    );
    assert_eq!(
        notify(&server, &id, CHANNEL, 2, "change").await,
        200,
        "a replayed message number syncs nothing"
    );

    // Google's rate limit (403 userRateLimitExceeded, a minute): the sync ends retryable.
    fake.rate_limit(1000, 60, true);
    let status = sync(&server, &key, &id, 3).await;
    assert_rate_limited(&status, &["rate limiting", "userRateLimitExceeded"]);
    fake.rate_limit(0, 0, false);

    // A token Google refuses is a reconnect; no token appears in what engram answers.
    let status = rejected_credentials_are_a_reconnect(
        &server,
        &key,
        &id,
        json!({"access_token": "ya29.wrong-Value-999", "api_url": fake.api_url()}),
        4,
    )
    .await;
    assert_secrets_hidden(
        &server,
        &key,
        &id,
        &status,
        &[token, "ya29.wrong-Value-999", CHANNEL],
    )
    .await;
    assert_conforms(&fake.exchanges());
}

#[tokio::test]
async fn a_gmail_label_syncs_messages_and_attachments_and_follows_its_history() {
    const DB: &str = "mail";
    let token = "ya29.gmail-SecretValue-5678";
    let fake = GoogleFake::start(token, "ana@example.com", 2).await;
    let projects = fake.add_label("Projects");
    let first = fake.deliver(
        &["INBOX", &projects],
        "Bo <bo@example.com>",
        "Deploy window",
        "The deploy window opens every Thursday at six.",
        &[(
            "runbook.md",
            "text/markdown",
            b"# Runbook\n\nRoll back with kubectl rollout undo.\n",
        )],
    );
    let second = fake.deliver(
        &[&projects],
        "Cy <cy@example.com>",
        "Basement",
        "The old VPN concentrator lives in the basement.",
        &[],
    );
    fake.deliver(
        &["INBOX"],
        "Dee <dee@example.com>",
        "Elsewhere",
        "Not in the label.",
        &[],
    );

    let server = server_for_fakes();
    let key = server.key("conn-gmail", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "gmail", "database": DB,
               "credentials": {"access_token": token, "api_url": fake.api_url()}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    let offered: Vec<&str> = resources.iter().filter_map(|r| r["id"].as_str()).collect();
    assert!(
        offered.contains(&"label:INBOX")
            && offered.contains(&format!("label:{projects}").as_str())
            && !offered.contains(&"label:SPAM"),
        "{found:#?}"
    );
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": format!("label:{projects}"), "resource_type": "label"}]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(
        counts(&status),
        (json!(3), json!(0), json!(0)),
        "two messages and an attachment: {status:#?}"
    );
    let sources = listed(&server, &key, DB).await;
    let deploy = sources
        .iter()
        .find(|s| s["title"] == "Deploy window")
        .expect("the message");
    let meta = &deploy["additional_metadata"];
    assert_eq!(
        (
            meta["from"].clone(),
            meta["has_attachments"].clone(),
            meta["thread_id"].clone(),
            meta["acl"].clone()
        ),
        (
            json!("Bo <bo@example.com>"),
            json!(true),
            json!(first),
            json!(["ana@example.com"])
        ),
        "{deploy:#?}"
    );
    indexed(&server, &key, DB).await;
    assert!(readable(
        &server,
        &key,
        DB,
        "how do we roll back",
        json!(["ana@example.com"])
    )
    .await
    .iter()
    .any(|t| t.contains("runbook.md")));

    // History: one added, one deleted (with nothing else read again).
    fake.deliver(
        &[&projects],
        "Bo <bo@example.com>",
        "Lunch",
        "Lunch is at noon on Fridays.",
        &[],
    );
    fake.delete_message(&second);
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(0), json!(1)),
        "{status:#?}"
    );
    // Unlabelled: it leaves the label's documents with its attachment.
    fake.unlabel(&first, &projects);
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(0), json!(2)),
        "{status:#?}"
    );
    assert_eq!(titles(&server, &key, DB).await, ["Lunch"]);

    // Expired history (404): a full pass lists the label again.
    fake.deliver(
        &[&projects],
        "Cy <cy@example.com>",
        "Offsite",
        "The offsite is in May.",
        &[],
    );
    fake.expire_history();
    let status = sync(&server, &key, &id, 3).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(0), json!(0)),
        "{status:#?}"
    );
    assert_eq!(titles(&server, &key, DB).await, ["Lunch", "Offsite"]);

    // 429 with a long Retry-After: shown in the status.
    fake.rate_limit(1000, 120, false);
    let status = sync(&server, &key, &id, 4).await;
    assert_rate_limited(&status, &["Gmail is rate limiting"]);
    fake.rate_limit(0, 0, false);
    assert_secrets_hidden(&server, &key, &id, &status, &[token]).await;
    assert_conforms(&fake.exchanges());
}

#[tokio::test]
async fn a_drive_channel_engram_registers_pushes_changes_and_a_refused_token_lists_again() {
    const DB: &str = "pushed";
    let token = "ya29.drive-PushValue-5678";
    let fake = GoogleFake::start(token, "ana@example.com", 2).await;
    let runbook = fake.add_file(
        None,
        "runbook.txt",
        "text/plain",
        b"The pager rotation changes hands every Monday at nine.",
        &[],
    );
    let server = Server::start_public(FAKES_ENV);
    let key = server.key("conn-gdrive-push", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "google_drive", "database": DB,
               "credentials": {"access_token": token, "api_url": fake.api_url(), "channel_token": CHANNEL}}),
    )
    .await;
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": "drive:root", "resource_type": "drive"}]),
    )
    .await;
    after_run(&server, &key, &id, 0).await;
    indexed(&server, &key, DB).await;

    // The pass opened a channel on the drive's changes to the connector's events URL (Drive
    // then sends it `sync`, which engram answers without syncing).
    let channels = fake.channels();
    assert_eq!(channels.len(), 1, "{channels:?}");
    assert_eq!(
        channels[0].1,
        server.url(&format!("/connectors/{id}/events"))
    );

    // A file added in Drive: Drive notifies the channel, engram syncs at once.
    let posted = Instant::now();
    fake.add_file(
        None,
        "lunch.txt",
        "text/plain",
        b"Lunch is served at noon on Fridays in the atrium.",
        &[],
    );
    eventually(
        Duration::from_secs(20),
        "the pushed Drive file in /query",
        || async {
            readable(
                &server,
                &key,
                DB,
                "where is lunch served on Fridays",
                json!(["ana@example.com"]),
            )
            .await
            .contains(&"lunch.txt".to_owned())
            .then_some(())
        },
    )
    .await;
    eprintln!(
        "drive push: the new file was found by /query {} ms after it was added (the issue wants 2 s)",
        posted.elapsed().as_millis()
    );

    // Drive refuses the stored changes token (too old): the pass, pushed by the next change,
    // lists every file instead of failing, so the trashed file leaves.
    fake.expire_changes();
    fake.trash(&runbook);
    eventually(
        Duration::from_secs(20),
        "the trashed file gone after a full listing",
        || async {
            (!titles(&server, &key, DB)
                .await
                .contains(&"runbook.txt".to_owned()))
            .then_some(())
        },
    )
    .await;
    let status = server.get(&format!("/connectors/{id}/status"), &key).await;
    let runs = plain(&status, 200)["runs"].as_array().unwrap().clone();
    assert!(
        runs.iter().all(|r| r["status"] != "failed"),
        "no pass failed on the refused token: {runs:#?}"
    );
    assert_eq!(
        fake.channels().len(),
        1,
        "the channel is kept, not registered again"
    );

    // The connector deleted: engram stops its channel, so Drive posts nothing more to it.
    let deleted = server.delete(&format!("/connectors/{id}"), &key).await;
    assert_eq!(plain(&deleted, 200)["deleted"], true);
    eventually(
        Duration::from_secs(20),
        "the channel stopped once its connector is deleted",
        || async { fake.channels().is_empty().then_some(()) },
    )
    .await;
    assert_conforms(&fake.exchanges());
}
