//! The slack connector from outside: a workspace on the stateful Slack fake (a public channel
//! with a thread, a plain message, a shared file; a private channel; a channel the bot is not
//! in), synced through the connector routes with small pages, then followed through a reply
//! edited, a message deleted and one posted, an unchanged re-sync, addresses that cannot be
//! read, rate limiting and a revoked token; and Events API pushes (signed, forged, stale,
//! `url_verification`). Every call the connector made and the fake answered is held to the
//! types of Slack's official client.
#![allow(clippy::unwrap_used)] // test code

use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, assert_best_holds, assert_nothing_changed, assert_rate_limited,
    assert_secrets_hidden, configure, counts, create, discover, indexed, listed,
    rejected_credentials_are_a_reconnect, server_for_fakes, source_titles, sync,
};
use crate::common::Server;
use engram_fakes::slack::{assert_conforms, signed_headers, SlackFake, TEAM};

const DB: &str = "chat";
const SIGNING: &str = "slack-signing-secret-never-logged-01";

/// The ids `/query` answers for `query` as a caller holding `acl`.
async fn readable(server: &Server, key: &str, query: &str, acl: Value) -> Vec<Value> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": DB, "query": query, "max_results": 10, "acl": acl}),
        )
        .await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["additional_metadata"]["channel"].clone())
        .collect()
}

#[tokio::test]
async fn a_slack_workspace_syncs_threads_files_and_private_channels_follows_edits_and_deletions() {
    let token = "xoxb-e2e-SecretValue-1234";
    let fake = SlackFake::start(token, 2).await;
    let ana = fake.add_user("Ana", "ana@example.com");
    let bo = fake.add_user("Bo", "bo@example.com");
    let cy = fake.add_user("Cy", "cy@example.com");
    let general = fake.add_channel("general", false, true, &[&ana, &bo, &cy]);
    let leads = fake.add_channel("leads", true, true, &[&ana, &cy]);
    fake.add_channel("random", false, false, &[&bo]);
    let root = fake.post(&general, &ana, "How do we roll back a bad deploy?", None);
    fake.post(
        &general,
        &bo,
        "Run kubectl rollout undo on the api deployment.",
        Some(&root),
    );
    let reply = fake.post(&general, &cy, "Then tell the on-call channel.", Some(&root));
    fake.post(&general, &ana, "Thanks, that worked.", Some(&root));
    fake.post(
        &general,
        &bo,
        "The staging database restarts every Sunday at three.",
        None,
    );
    fake.share_file(
        &general,
        &ana,
        "The runbook",
        "runbook.md",
        "text/markdown",
        b"# Runbook\n\nThe pager rotation changes hands every Monday at nine.\n",
    );
    let vpn = fake.post(
        &general,
        &cy,
        "The old VPN concentrator lives in the basement.",
        None,
    );
    fake.post(
        &leads,
        &ana,
        "Salaries are reviewed every June by the leads.",
        None,
    );

    let server = server_for_fakes();
    let key = server.key("conn-slack", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "slack", "database": DB,
               "credentials": {"token": token, "api_url": fake.api_url()}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    let mut offered: Vec<(String, String)> = resources
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_owned(),
                r["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        [
            (format!("channel:{general}"), "#general".to_owned()),
            (format!("channel:{leads}"), "#leads".to_owned()),
        ],
        "the channels the bot is in, not #random: {found:#?}"
    );
    assert!(!found.body.to_string().contains(token));

    configure(
        &server,
        &key,
        &id,
        json!([
            {"resource_id": format!("channel:{general}"), "resource_type": "channel"},
            {"resource_id": format!("channel:{leads}"), "resource_type": "channel"}
        ]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(
        counts(&status),
        (json!(6), json!(0), json!(0)),
        "a thread, three messages, a file in #general and a message in #leads: {status:#?}"
    );
    let sources = listed(&server, &key, DB).await;
    let thread = sources
        .iter()
        .find(|s| s["additional_metadata"]["kind"] == "thread")
        .expect("the thread");
    let meta = &thread["additional_metadata"];
    assert_eq!(
        (
            meta["channel"].clone(),
            meta["author"].clone(),
            meta["reply_count"].clone(),
            meta["thread_ts"].clone(),
            meta["acl"].clone()
        ),
        (
            json!("general"),
            json!("ana"),
            json!(3),
            json!(root),
            json!([format!("group:slack:{TEAM}")])
        ),
        "{thread:#?}"
    );
    let private = sources
        .iter()
        .find(|s| s["additional_metadata"]["channel"] == "leads")
        .expect("the private message");
    assert_eq!(
        private["additional_metadata"]["acl"],
        json!(["ana@example.com", "cy@example.com"]),
        "{private:#?}"
    );
    let file = sources
        .iter()
        .find(|s| s["additional_metadata"]["kind"] == "file")
        .expect("the file");
    assert_eq!(
        file["additional_metadata"]["mimetype"], "text/markdown",
        "{file:#?}"
    );
    indexed(&server, &key, DB).await;

    // The answer is in a reply: the thread is one document.
    assert_best_holds(
        &server,
        &key,
        DB,
        "how do we roll back a bad deploy",
        json!({"channel": "general", "kind": "thread"}),
        "rollout undo",
    )
    .await;
    assert_best_holds(
        &server,
        &key,
        DB,
        "when does the pager rotation change hands",
        json!({"kind": "file"}),
        "every Monday at nine",
    )
    .await;
    // The private channel is read by its members only.
    let question = "when are salaries reviewed";
    assert!(readable(&server, &key, question, json!(["cy@example.com"]))
        .await
        .contains(&json!("leads")));
    assert!(
        !readable(&server, &key, question, json!(["bo@example.com"]))
            .await
            .contains(&json!("leads"))
    );
    assert!(!readable(
        &server,
        &key,
        question,
        json!([format!("group:slack:{TEAM}")])
    )
    .await
    .contains(&json!("leads")));

    // A reply edited, a message deleted, one posted: one updated, one deleted, one added.
    fake.edit(
        &general,
        &reply,
        "Then page the incident commander, not the on-call channel.",
    );
    fake.delete(&general, &vpn);
    fake.post(&general, &bo, "Lunch is at noon on Fridays.", None);
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(1), json!(1)),
        "{status:#?}"
    );
    let now = source_titles(&server, &key, DB).await;
    assert!(!now.iter().any(|t| t.contains("VPN")), "{now:?}");
    indexed(&server, &key, DB).await;
    assert_best_holds(
        &server,
        &key,
        DB,
        "who do we page after rolling back",
        json!({"kind": "thread"}),
        "incident commander",
    )
    .await;

    // Nothing changed: nothing re-indexed, and the history is read from the last message on
    // (less the recent window).
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 2).await;
    assert_nothing_changed(&status);
    let histories: Vec<_> = fake.exchanges()[before..]
        .iter()
        .filter(|e| e.method == "conversations.history")
        .cloned()
        .collect();
    assert!(
        !histories.is_empty()
            && histories
                .iter()
                .all(|e| e.params.iter().any(|(k, _)| k == "oldest")),
        "{histories:#?}"
    );

    // Addresses that cannot be read (no users:read.email): the private channel says so, and
    // its documents keep no reader the source did not name.
    fake.hide_emails(true);
    let status = sync(&server, &key, &id, 3).await;
    let warned = status["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource_id"] == format!("channel:{leads}"))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        warned.to_string().contains("users:read.email"),
        "{status:#?}"
    );
    fake.hide_emails(false);

    // Slack's rate limit, longer than is waited out: the sync ends retryable, saying so.
    fake.rate_limit(1000, 60);
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 4).await;
    assert_rate_limited(&status, &["rate limiting"]);
    assert!(fake.exchanges().len() - before <= 6, "no hammering");
    fake.rate_limit(0, 0);

    // A revoked token is a reconnect; no token appears in what engram answers.
    let revoked = "xoxb-revoked-Value-999";
    fake.revoke(revoked);
    let status = rejected_credentials_are_a_reconnect(
        &server,
        &key,
        &id,
        json!({"token": revoked, "api_url": fake.api_url()}),
        5,
    )
    .await;
    assert!(status.to_string().contains("token_revoked"), "{status:#?}");
    assert_secrets_hidden(&server, &key, &id, &status, &[revoked, token]).await;

    assert_conforms(&fake.exchanges());
}

/// Delivers an Events API body signed at `timestamp` (with `secret`).
async fn deliver(
    server: &Server,
    id: &str,
    secret: &str,
    timestamp: i64,
    body: &str,
) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.url(&format!("/connectors/{id}/events")))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in signed_headers(secret, timestamp, body) {
        request = request.header(name, value);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

#[tokio::test]
async fn slack_events_are_verified_answered_and_synced_at_once() {
    let token = "xoxb-push-Value-0001";
    let fake = SlackFake::start(token, 50).await;
    let ana = fake.add_user("Ana", "ana@example.com");
    let general = fake.add_channel("general", false, true, &[&ana]);
    let old = fake.post(&general, &ana, "The first note.", None);
    let server = server_for_fakes();
    let key = server.key("conn-slack-push", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "slack", "database": DB,
               "credentials": {"token": token, "api_url": fake.api_url(), "signing_secret": SIGNING}}),
    )
    .await;
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": format!("channel:{general}"), "resource_type": "channel"}]),
    )
    .await;
    after_run(&server, &key, &id, 0).await;
    assert_eq!(listed(&server, &key, DB).await.len(), 1);

    // Slack checks the Request URL: the challenge comes back as it was sent.
    let check = r#"{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let (status, answer) = deliver(&server, &id, SIGNING, now(), check).await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
        )
    );

    // A message deleted and one posted; Slack's events say so.
    fake.delete(&general, &old);
    let new = fake.post(&general, &ana, "The lighthouse opens at dawn.", None);
    let event = json!({
        "token": "legacy", "team_id": TEAM, "api_app_id": "A0APP", "type": "event_callback",
        "event_id": "Ev0PUSH1", "event_time": now(),
        "event": {"type": "message", "channel": general, "user": ana, "text": "The lighthouse opens at dawn.", "ts": new, "channel_type": "channel"}
    })
    .to_string();
    // Forged, or signed too long ago: refused, nothing queued.
    assert_eq!(
        deliver(&server, &id, "not-the-signing-secret-000", now(), &event)
            .await
            .0,
        401
    );
    assert_eq!(
        deliver(&server, &id, SIGNING, now() - 600, &event).await.0,
        401,
        "a replay of a delivery more than five minutes old"
    );
    let status = server.get(&format!("/connectors/{id}/status"), &key).await;
    assert_eq!(
        status.body["runs"].as_array().unwrap().len(),
        1,
        "nothing queued"
    );

    let (status, answer) = deliver(&server, &id, SIGNING, now(), &event).await;
    assert_eq!(status, 202, "{answer:#?}");
    assert!(answer["run_id"].is_string(), "{answer:#?}");
    let after = after_run(&server, &key, &id, 1).await;
    assert_eq!(counts(&after), (json!(1), json!(0), json!(1)), "{after:#?}");
    let titles = source_titles(&server, &key, DB).await;
    assert_eq!(
        titles,
        ["#general: The lighthouse opens at dawn."],
        "{titles:?}"
    );

    // Slack retrying the same event: a replay, nothing synced.
    let (status, answer) = deliver(&server, &id, SIGNING, now(), &event).await;
    assert_eq!(
        (status, answer["run_id"].clone()),
        (200, Value::Null),
        "{answer:#?}"
    );
    assert_conforms(&fake.exchanges());
}
