//! Events a provider pushes (`POST /connectors/{id}/events`), end to end: a GitHub webhook
//! delivery signed with the connector's `webhook_secret` queues a sync that reads the change from
//! the GitHub fake at once; forged, unsigned, replayed and misdirected deliveries change nothing.
//! Likewise a Jira Cloud webhook (`X-Hub-Signature`, `X-Atlassian-Webhook-Identifier`, the body's
//! `timestamp` and `webhookEvent`) on the Atlassian fake: a signed event's edit is found by
//! `/query` within seconds; forged, replayed, stale and uninteresting events change nothing.
#![allow(clippy::unwrap_used)] // test code

use std::time::{Duration, Instant};

use engram_connectors::push::hmac_sha256_hex;
use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, configure, create, indexed, listed, plain, server_for_fakes,
};
use crate::common::{eventually, Server};
use engram_fakes::atlassian::AtlassianFake;
use engram_fakes::github::GitHubFake;

const SECRET: &str = "push-secret-never-logged-0077";

/// POSTs `body` with `headers` (and `content-type: application/json`) to the connector's events
/// route; the answer's status and JSON.
async fn post_event(
    server: &Server,
    id: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.url(&format!("/connectors/{id}/events")))
        .header("content-type", "application/json")
        .body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// Sends a GitHub-style delivery; `signature` is the `X-Hub-Signature-256` header, if any.
async fn deliver(
    server: &Server,
    id: &str,
    event: &str,
    delivery: &str,
    body: &[u8],
    signature: Option<String>,
) -> (u16, Value) {
    let mut headers = vec![
        ("x-github-event", event.to_owned()),
        ("x-github-delivery", delivery.to_owned()),
    ];
    if let Some(signature) = signature {
        headers.push(("x-hub-signature-256", signature));
    }
    post_event(server, id, &headers, body).await
}

fn signed(body: &[u8]) -> Option<String> {
    Some(format!("sha256={}", hmac_sha256_hex(SECRET, body)))
}

#[tokio::test]
async fn a_signed_github_push_syncs_at_once_and_forged_or_replayed_deliveries_change_nothing() {
    let token = "ghp_pushTokenValue0001";
    let fake = GitHubFake::start(token).await;
    let repo = "octo-org/pushed";
    fake.add_repo(repo, false);
    fake.put_file(repo, "README.md", b"# Pushed\nThe first note.\n");
    let server = Server::start_with(&[
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"),
    ]);
    let key = server.key("conn-push", &[]);
    server.ready_database(&key, "pushed").await;
    // A secret shorter than 16 characters is refused.
    let weak = server
        .post(
            "/connectors",
            &key,
            json!({"provider": "github", "database": "pushed",
                   "credentials": {"token": token, "api_url": fake.api_url(), "webhook_secret": "short"}}),
        )
        .await;
    weak.assert_current_error(422, "VALIDATION_ERROR");
    let id = create(
        &server,
        &key,
        json!({"provider": "github", "database": "pushed",
               "credentials": {"token": token, "api_url": fake.api_url(), "webhook_secret": SECRET}}),
    )
    .await;
    let catalog = server.get("/connector-catalog", &key).await;
    let github = plain(&catalog, 200)["connectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["provider"] == "github")
        .cloned()
        .unwrap();
    assert_eq!(github["webhook_support"], true, "{github:#?}");
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": repo}]}),
        )
        .await;
    after_run(&server, &key, &id, 0).await;
    assert_eq!(listed(&server, &key, "pushed").await.len(), 1);

    // The hook's first delivery: a ping, verified, nothing synced.
    let ping = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#;
    let (status, answer) = deliver(&server, &id, "ping", "p-1", ping, signed(ping)).await;
    assert_eq!(
        (status, answer["run_id"].clone()),
        (200, Value::Null),
        "{answer:#?}"
    );

    // A push, signed: a sync starts at once and reads the new file.
    fake.put_file(
        repo,
        "docs/new.md",
        b"# New\nThe lighthouse opens at dawn.\n",
    );
    let push = json!({"ref": "refs/heads/main", "repository": {"full_name": repo}}).to_string();
    let push = push.as_bytes();
    // Forged, unsigned, or for a connector that does not exist: refused, nothing queued.
    let forged = Some(format!(
        "sha256={}",
        hmac_sha256_hex("not-the-secret-000000", push)
    ));
    let (status, answer) = deliver(&server, &id, "push", "d-0", push, forged).await;
    assert_eq!(status, 401, "{answer:#?}");
    assert_eq!(answer["error"]["code"], "UNAUTHORIZED", "{answer:#?}");
    assert_eq!(
        deliver(&server, &id, "push", "d-0", push, None).await.0,
        401
    );
    assert_eq!(
        deliver(&server, "con_nope", "push", "d-0", push, signed(push))
            .await
            .0,
        404
    );
    // A body altered after signing.
    let altered = br#"{"ref":"refs/heads/other"}"#;
    assert_eq!(
        deliver(&server, &id, "push", "d-0", altered, signed(push))
            .await
            .0,
        401
    );
    let status = server.get(&format!("/connectors/{id}/status"), &key).await;
    assert_eq!(
        plain(&status, 200)["runs"].as_array().unwrap().len(),
        1,
        "nothing refused queued a sync"
    );

    let (status, answer) = deliver(&server, &id, "push", "d-1", push, signed(push)).await;
    assert_eq!(status, 202, "{answer:#?}");
    assert!(answer["run_id"].is_string(), "{answer:#?}");
    after_run(&server, &key, &id, 1).await;
    assert_eq!(listed(&server, &key, "pushed").await.len(), 2);

    // The same delivery again (a replay): verified but refused, no sync.
    let (status, answer) = deliver(&server, &id, "push", "d-1", push, signed(push)).await;
    assert_eq!(status, 200, "{answer:#?}");
    assert!(
        answer["message"].as_str().unwrap().contains("replay"),
        "{answer:#?}"
    );
    assert_eq!(answer["run_id"], Value::Null);

    // A provider that pushes nothing has no events route.
    let feed = create(
        &server,
        &key,
        json!({"provider": "rss", "database": "pushed",
               "credentials": {"feeds": ["http://127.0.0.1:9/feed.xml"]}}),
    )
    .await;
    assert_eq!(
        deliver(&server, &feed, "push", "d-2", push, signed(push))
            .await
            .0,
        404
    );
}

const JIRA_EMAIL: &str = "bot@example.com";
const JIRA_TOKEN: &str = "atl_pushSecretToken0001";
const JIRA_SECRET: &str = "jira-push-secret-never-logged-0042";

/// Now, in epoch milliseconds (the `timestamp` Jira puts in a webhook's body).
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A Jira Cloud webhook body for `event` on issue `key` (`id`), sent at `timestamp` (epoch ms).
fn jira_event(event: &str, timestamp: i64, id: &str, key: &str) -> Vec<u8> {
    json!({
        "timestamp": timestamp,
        "webhookEvent": event,
        "issue_event_type_name": "issue_commented",
        "matchedWebhookIds": [1],
        "user": {"accountId": "5b10a2844c20165700ede21g", "displayName": "Cy Park"},
        "issue": {"id": id, "key": key, "fields": {"summary": "Badge readers reject cards"}},
        "comment": {"id": "20001", "body": "Reboot the badge controller.",
                    "author": {"displayName": "Cy Park"}},
    })
    .to_string()
    .into_bytes()
}

/// Sends a Jira Cloud delivery: `X-Atlassian-Webhook-Identifier: identifier`, and
/// `X-Hub-Signature: sha256=<hmac of the body under secret>` when `secret` is given.
async fn deliver_jira(
    server: &Server,
    id: &str,
    identifier: &str,
    body: &[u8],
    secret: Option<&str>,
) -> (u16, Value) {
    let mut headers = vec![
        ("x-atlassian-webhook-identifier", identifier.to_owned()),
        ("user-agent", "Atlassian Webhook HTTP Client".to_owned()),
    ];
    if let Some(secret) = secret {
        headers.push((
            "x-hub-signature",
            format!("sha256={}", hmac_sha256_hex(secret, body)),
        ));
    }
    post_event(server, id, &headers, body).await
}

/// The runs the connector's status lists.
async fn runs(server: &Server, key: &str, id: &str) -> usize {
    let status = server.get(&format!("/connectors/{id}/status"), key).await;
    plain(&status, 200)["runs"].as_array().unwrap().len()
}

/// Whether `/query` for `query` in `database` answers a chunk holding `text`.
async fn found(server: &Server, key: &str, database: &str, query: &str, text: &str) -> bool {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": database, "query": query, "max_results": 5}),
        )
        .await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| {
            c["chunk_content"]
                .as_str()
                .unwrap_or_default()
                .contains(text)
        })
}

#[tokio::test]
async fn a_signed_jira_webhook_is_applied_within_seconds_and_forged_replayed_or_stale_ones_change_nothing(
) {
    let fake = AtlassianFake::start(JIRA_EMAIL, JIRA_TOKEN, 2).await;
    fake.add_project("SEC", "Security");
    let badge = fake.add_issue(
        "SEC",
        "Badge readers reject cards",
        "The badge readers on floor nine reject every card since Monday.",
        "To Do",
        "High",
        "Bug",
        "Ana Lima",
        &["facilities"],
    );
    let server = server_for_fakes();
    let key = server.key("conn-push-jira", &[]);
    server.ready_database(&key, "tickets").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "jira", "database": "tickets",
               "credentials": {"site_url": fake.site_url(), "email": JIRA_EMAIL,
                               "api_token": JIRA_TOKEN, "webhook_secret": JIRA_SECRET}}),
    )
    .await;
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": "project:SEC", "resource_type": "project"}]),
    )
    .await;
    after_run(&server, &key, &id, 0).await;
    indexed(&server, &key, "tickets").await;
    let question = "what fixes the badge readers on floor nine";
    let fix = "power-cycling the badge controller";
    assert!(!found(&server, &key, "tickets", question, fix).await);

    // The issue is edited (a comment moves its `updated`); Jira sends `jira:issue_updated`.
    fake.comment(
        &badge,
        "Cy Park",
        "Fixed by power-cycling the badge controller in the floor nine closet.",
    );
    let body = jira_event("jira:issue_updated", now_ms(), &badge, "SEC-1");

    // Forged (another secret), unsigned, or the body altered after signing: 401, nothing queued.
    for (secret, sent) in [
        (Some("not-the-jira-secret-0000000"), body.clone()),
        (None, body.clone()),
        (
            Some(JIRA_SECRET),
            jira_event("jira:issue_updated", now_ms(), &badge, "SEC-2"),
        ),
    ] {
        let signature = secret.map(|s| format!("sha256={}", hmac_sha256_hex(s, &body)));
        let mut headers = vec![("x-atlassian-webhook-identifier", "wh-forged".to_owned())];
        headers.extend(signature.map(|s| ("x-hub-signature", s)));
        let (status, answer) = post_event(&server, &id, &headers, &sent).await;
        assert_eq!(status, 401, "{answer:#?}");
        assert_eq!(answer["error"]["code"], "UNAUTHORIZED", "{answer:#?}");
    }
    assert_eq!(
        runs(&server, &key, &id).await,
        1,
        "nothing refused queued a sync"
    );
    assert!(!found(&server, &key, "tickets", question, fix).await);

    // Signed: a sync is queued at once and the edit is found, with no scheduled sync. The issue
    // wants it within 2 s; the bound here is generous (20 s), the time taken is printed.
    let posted = Instant::now();
    let (status, answer) = deliver_jira(&server, &id, "wh-0001", &body, Some(JIRA_SECRET)).await;
    assert_eq!(status, 202, "{answer:#?}");
    assert!(answer["run_id"].is_string(), "{answer:#?}");
    eventually(
        Duration::from_secs(20),
        "the pushed edit in /query",
        || async {
            found(&server, &key, "tickets", question, fix)
                .await
                .then_some(())
        },
    )
    .await;
    let latency = posted.elapsed();
    eprintln!(
        "jira push: the edit was found by /query {} ms after the POST (the issue wants 2 s)",
        latency.as_millis()
    );
    let status = after_run(&server, &key, &id, 1).await;
    assert_eq!(
        (
            status["runs"][0]["run_id"].clone(),
            status["runs"][0]["updated"].clone()
        ),
        (answer["run_id"].clone(), json!(1)),
        "{status:#?}"
    );

    // The same delivery again (Jira retries with the same identifier): verified, refused as a
    // replay, nothing queued.
    let (status, answer) = deliver_jira(&server, &id, "wh-0001", &body, Some(JIRA_SECRET)).await;
    assert_eq!(status, 200, "{answer:#?}");
    assert!(
        answer["message"].as_str().unwrap().contains("replay"),
        "{answer:#?}"
    );
    assert_eq!(answer["run_id"], Value::Null, "{answer:#?}");

    // Signed, but sent more than ten minutes ago: refused.
    let stale = jira_event(
        "jira:issue_updated",
        now_ms() - 11 * 60_000,
        &badge,
        "SEC-1",
    );
    let (status, answer) = deliver_jira(&server, &id, "wh-0002", &stale, Some(JIRA_SECRET)).await;
    assert_eq!(status, 401, "{answer:#?}");
    assert_eq!(answer["error"]["code"], "UNAUTHORIZED", "{answer:#?}");

    // An event of another kind: answered, nothing synced.
    let other = json!({"timestamp": now_ms(), "webhookEvent": "project_created",
                       "project": {"id": "10100", "key": "NEW", "name": "New"}})
    .to_string();
    let (status, answer) =
        deliver_jira(&server, &id, "wh-0003", other.as_bytes(), Some(JIRA_SECRET)).await;
    assert_eq!(status, 200, "{answer:#?}");
    assert_eq!(answer["run_id"], Value::Null, "{answer:#?}");
    assert_eq!(answer["connector_id"], json!(id), "{answer:#?}");

    assert_eq!(
        runs(&server, &key, &id).await,
        2,
        "only the signed, fresh, new issue event queued a sync"
    );
}
