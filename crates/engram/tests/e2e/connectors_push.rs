//! Events a provider pushes (`POST /connectors/{id}/events`), end to end: a GitHub webhook
//! delivery signed with the connector's `webhook_secret` queues a sync that reads the change from
//! the GitHub fake at once; forged, unsigned, replayed and misdirected deliveries change nothing.
//! Likewise a Jira Cloud webhook (`X-Hub-Signature`, `X-Atlassian-Webhook-Identifier`, the body's
//! `timestamp` and `webhookEvent`) on the Atlassian fake: a signed event's edit is found by
//! `/query` within seconds; forged, replayed, stale and uninteresting events change nothing. And
//! a Confluence page webhook, which names its event in the registration rather than the body;
//! and a Notion subscription, whose unsigned verification token becomes the connector's secret
//! (read back through the vault) and signs the events after it.
#![allow(clippy::unwrap_used)] // test code

use std::time::{Duration, Instant};

use engram_connectors::push::hmac_sha256_hex;
use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, assert_secrets_hidden, configure, create, indexed, listed, plain, server_for_fakes,
};
use crate::common::{eventually, Server};
use engram_fakes::atlassian::AtlassianFake;
use engram_fakes::github::GitHubFake;
use engram_fakes::notion::{body, NotionFake, Parent};

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
    assert_pushes(&server, &key, "github").await;
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

/// A server with a connector of `provider` on a ready `database` (`credentials`), its
/// `resources` configured, synced once and indexed: the server, the key and the connector's id.
async fn synced(
    org: &str,
    provider: &str,
    database: &str,
    credentials: Value,
    resources: Value,
) -> (Server, String, String) {
    let server = server_for_fakes();
    let key = server.key(org, &[]);
    server.ready_database(&key, database).await;
    let id = create(
        &server,
        &key,
        json!({"provider": provider, "database": database, "credentials": credentials}),
    )
    .await;
    configure(&server, &key, &id, resources).await;
    after_run(&server, &key, &id, 0).await;
    indexed(&server, &key, database).await;
    (server, key, id)
}

/// Asserts the catalog says `provider` takes pushed events.
async fn assert_pushes(server: &Server, key: &str, provider: &str) {
    let catalog = server.get("/connector-catalog", key).await;
    let entry = plain(&catalog, 200)["connectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["provider"] == provider)
        .cloned()
        .unwrap();
    assert_eq!(entry["webhook_support"], true, "{entry:#?}");
}

/// Asserts a delivery was refused as unsigned or forged: 401 `UNAUTHORIZED`.
fn assert_refused((status, answer): &(u16, Value)) {
    assert_eq!(*status, 401, "{answer:#?}");
    assert_eq!(answer["error"]["code"], "UNAUTHORIZED", "{answer:#?}");
}

/// Asserts a verified delivery of an event engram does not sync on was answered, nothing queued.
fn assert_ignored((status, answer): &(u16, Value)) {
    assert_eq!(
        (*status, &answer["run_id"]),
        (200, &Value::Null),
        "{answer:#?}"
    );
}

/// Asserts a verified delivery was recognised as a replay: answered, nothing queued.
fn assert_replay((status, answer): &(u16, Value)) {
    assert_eq!(*status, 200, "{answer:#?}");
    assert!(
        answer["message"].as_str().unwrap().contains("replay"),
        "{answer:#?}"
    );
    assert_eq!(answer["run_id"], Value::Null, "{answer:#?}");
}

/// Asserts a signed delivery queued a sync (202) whose run finds `text` for `question` in
/// `database` without a scheduled sync, printing how long after `posted` it was found (the issue
/// wants 2 s; the bound here is a generous 20 s); the connector's status once that run ended.
async fn assert_applied(
    provider: &str,
    (server, key, id): (&Server, &str, &str),
    (status, answer): &(u16, Value),
    posted: Instant,
    (database, question, text): (&str, &str, &str),
) -> Value {
    assert_eq!(*status, 202, "{answer:#?}");
    assert!(answer["run_id"].is_string(), "{answer:#?}");
    eventually(
        Duration::from_secs(20),
        "the pushed change in /query",
        || async {
            found(server, key, database, question, text)
                .await
                .then_some(())
        },
    )
    .await;
    eprintln!(
        "{provider} push: the change was found by /query {} ms after the POST (the issue wants 2 s)",
        posted.elapsed().as_millis()
    );
    let status = after_run(server, key, id, 1).await;
    assert_eq!(status["runs"][0]["run_id"], answer["run_id"], "{status:#?}");
    status
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
    let (server, key, id) = synced(
        "conn-push-jira",
        "jira",
        "tickets",
        json!({"site_url": fake.site_url(), "email": JIRA_EMAIL, "api_token": JIRA_TOKEN,
               "webhook_secret": JIRA_SECRET}),
        json!([{"resource_id": "project:SEC", "resource_type": "project"}]),
    )
    .await;
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
        assert_refused(&post_event(&server, &id, &headers, &sent).await);
    }
    assert_eq!(
        runs(&server, &key, &id).await,
        1,
        "nothing refused queued a sync"
    );
    assert!(!found(&server, &key, "tickets", question, fix).await);

    // Signed: a sync is queued at once and the edit is found, with no scheduled sync.
    let posted = Instant::now();
    let answer = deliver_jira(&server, &id, "wh-0001", &body, Some(JIRA_SECRET)).await;
    let target = ("tickets", question, fix);
    let status = assert_applied("jira", (&server, &key, &id), &answer, posted, target).await;
    assert_eq!(status["runs"][0]["updated"], 1, "{status:#?}");

    // The same delivery again (Jira retries with the same identifier): verified, refused as a
    // replay, nothing queued.
    assert_replay(&deliver_jira(&server, &id, "wh-0001", &body, Some(JIRA_SECRET)).await);

    // Signed, but sent more than ten minutes ago: refused.
    let stale = jira_event(
        "jira:issue_updated",
        now_ms() - 11 * 60_000,
        &badge,
        "SEC-1",
    );
    assert_refused(&deliver_jira(&server, &id, "wh-0002", &stale, Some(JIRA_SECRET)).await);

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

const CONFLUENCE_SECRET: &str = "confluence-push-secret-never-logged-7";

/// A Confluence Cloud webhook body for page `id` of space `space`, sent at `timestamp` (epoch
/// ms); Confluence names the event in the webhook's registration, not here, unless `event` is
/// given (as Data Center does, `event`).
fn confluence_event(timestamp: i64, id: &str, space: &str, event: Option<&str>) -> Vec<u8> {
    let mut body = json!({
        "timestamp": timestamp,
        "userAccountId": "5b10ac8d82e05b22cc7d4ef5",
        "accountType": "customer",
        "page": {"id": id, "spaceKey": space, "title": "Deploys", "version": 2,
                 "creatorAccountId": "5b10ac8d82e05b22cc7d4ef5",
                 "self": format!("https://acme.atlassian.net/wiki/spaces/{space}/pages/{id}")},
    });
    if let Some(event) = event {
        body["event"] = json!(event);
    }
    body.to_string().into_bytes()
}

#[tokio::test]
async fn a_signed_confluence_webhook_is_applied_within_seconds_and_forged_replayed_or_stale_ones_change_nothing(
) {
    let fake = AtlassianFake::start(JIRA_EMAIL, JIRA_TOKEN, 2).await;
    let space = fake.add_space("OPS", "Operations");
    let deploys = fake.add_page(
        &space,
        None,
        "Deploys",
        "<h2>Rollback</h2><p>Pause the pipeline, then run the rollback job.</p>",
    );
    let (server, key, id) = synced(
        "conn-push-confluence",
        "confluence",
        "wiki",
        json!({"site_url": fake.site_url(), "email": JIRA_EMAIL, "api_token": JIRA_TOKEN,
               "webhook_secret": CONFLUENCE_SECRET}),
        json!([{"resource_id": format!("space:{space}"), "resource_type": "space"}]),
    )
    .await;
    let question = "how are deploys rolled back now";
    let change = "the release train";
    assert!(!found(&server, &key, "wiki", question, change).await);

    fake.edit_page(
        &deploys,
        "<h2>Rollback</h2><p>Rollbacks now go through the release train on Tuesdays.</p>",
    );
    let body = confluence_event(now_ms(), &deploys, "OPS", None);

    // Forged, unsigned, or altered after signing: 401, nothing queued.
    for (secret, sent) in [
        (Some("not-the-confluence-secret-000"), body.clone()),
        (None, body.clone()),
        (
            Some(CONFLUENCE_SECRET),
            confluence_event(now_ms(), &deploys, "ENG", None),
        ),
    ] {
        let mut headers = vec![("x-atlassian-webhook-identifier", "cf-forged".to_owned())];
        headers.extend(secret.map(|s| {
            (
                "x-hub-signature",
                format!("sha256={}", hmac_sha256_hex(s, &body)),
            )
        }));
        assert_refused(&post_event(&server, &id, &headers, &sent).await);
    }
    assert_eq!(
        runs(&server, &key, &id).await,
        1,
        "nothing refused queued a sync"
    );

    // Signed: a sync is queued at once and the edit is found without a scheduled sync.
    let posted = Instant::now();
    let answer = deliver_jira(&server, &id, "cf-0001", &body, Some(CONFLUENCE_SECRET)).await;
    let target = ("wiki", question, change);
    assert_applied("confluence", (&server, &key, &id), &answer, posted, target).await;

    // Retried with the same identifier: a replay; sent eleven minutes ago: stale.
    assert_replay(&deliver_jira(&server, &id, "cf-0001", &body, Some(CONFLUENCE_SECRET)).await);
    let stale = confluence_event(now_ms() - 11 * 60_000, &deploys, "OPS", None);
    assert_refused(&deliver_jira(&server, &id, "cf-0002", &stale, Some(CONFLUENCE_SECRET)).await);

    // An event that changes nothing engram reads (named, as Data Center names them): answered,
    // nothing synced.
    let other = confluence_event(now_ms(), &deploys, "OPS", Some("space_created"));
    assert_ignored(&deliver_jira(&server, &id, "cf-0003", &other, Some(CONFLUENCE_SECRET)).await);
    assert_eq!(
        runs(&server, &key, &id).await,
        2,
        "only the signed, fresh, new page event queued a sync"
    );
}

const NOTION_TOKEN: &str = "ntn_pushSecretValue1234";

/// A Notion webhook event `kind` with id `id` on page `page`, in the shape Notion's reference
/// gives every event.
fn notion_event(id: &str, kind: &str, page: &str) -> Vec<u8> {
    json!({
        "id": id,
        "timestamp": "2026-11-29T12:00:00.000Z",
        "workspace_id": "13950b26-c203-4f3b-b97d-93ec06319565",
        "workspace_name": "Acme",
        "subscription_id": "29d75c0d-5546-4414-8459-7b7a92f1fc4b",
        "integration_id": "0ef2e755-4912-4f8a-a1e9-3d1a4fa2cfa8",
        "type": kind,
        "authors": [{"id": "c7c11cca-1d73-471d-9b6e-bdef51470190", "type": "person"}],
        "attempt_number": 1,
        "api_version": "2022-06-28",
        "entity": {"id": page, "type": "page"},
        "data": {"parent": {"id": "13950b26-c203-4f3b-b97d-93ec06319565", "type": "space"}},
    })
    .to_string()
    .into_bytes()
}

/// Sends a Notion delivery, signed (`X-Notion-Signature: sha256=…`) with `secret` when given.
async fn deliver_notion(
    server: &Server,
    id: &str,
    body: &[u8],
    secret: Option<&str>,
) -> (u16, Value) {
    let headers: Vec<(&str, String)> = secret
        .map(|s| {
            (
                "x-notion-signature",
                format!("sha256={}", hmac_sha256_hex(s, body)),
            )
        })
        .into_iter()
        .collect();
    post_event(server, id, &headers, body).await
}

#[tokio::test]
async fn a_notion_subscription_is_verified_through_the_vault_and_its_signed_events_are_applied_within_seconds(
) {
    let fake = NotionFake::start(NOTION_TOKEN, 2).await;
    let handbook = fake.add_page(Parent::Workspace, "Handbook");
    fake.append(
        &handbook,
        "paragraph",
        body("paragraph", "The deploy window is Tuesday at 10:00."),
    );
    let server = server_for_fakes();
    let key = server.key("conn-push-notion", &[]);
    server.ready_database(&key, "wiki").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "notion", "database": "wiki",
               "credentials": {"token": NOTION_TOKEN, "api_url": fake.api_url()}}),
    )
    .await;
    assert_pushes(&server, &key, "notion").await;

    // Before the subscription is verified the connector has no secret: events are refused.
    let early = notion_event("evt-0", "page.content_updated", &handbook);
    assert_refused(&deliver_notion(&server, &id, &early, Some("any-secret-at-all-00000")).await);

    // Notion's verification request: the token is kept as the connector's webhook_secret and
    // never answered; sent again ("Resend token"), the same.
    let token = "secret_notionVerificationToken0000000001";
    let verification = json!({"verification_token": token}).to_string();
    for _ in 0..2 {
        let (status, answer) = post_event(&server, &id, &[], verification.as_bytes()).await;
        assert_eq!(status, 200, "{answer:#?}");
        assert!(!answer.to_string().contains(token), "{answer:#?}");
        assert!(
            answer["message"].as_str().unwrap().contains("/reveal"),
            "{answer:#?}"
        );
    }
    // Another token (a stranger, or a second subscription): refused, the kept one stays.
    let other = json!({"verification_token": "secret_someoneElsesToken00000000000002"}).to_string();
    assert_refused(&post_event(&server, &id, &[], other.as_bytes()).await);
    let vault = server.get("/credential-vault", &key).await;
    assert!(!vault.body.to_string().contains(token), "{vault:#?}");
    let revealed = server
        .post(
            &format!("/credential-vault/{id}/reveal"),
            &key,
            json!({"field": "webhook_secret"}),
        )
        .await;
    assert_eq!(plain(&revealed, 200)["value"], token, "{revealed:#?}");

    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": format!("page:{handbook}"), "resource_type": "page"}]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_secrets_hidden(&server, &key, &id, &status, &[token, NOTION_TOKEN]).await;
    indexed(&server, &key, "wiki").await;
    let question = "when is the deploy window from December";
    let change = "moves to Thursday";
    assert!(!found(&server, &key, "wiki", question, change).await);

    fake.append(
        &handbook,
        "paragraph",
        body(
            "paragraph",
            "From December the deploy window moves to Thursday at 14:00.",
        ),
    );
    let event = notion_event("evt-1", "page.content_updated", &handbook);
    // Forged, unsigned, or altered after signing: 401, nothing queued.
    for (secret, sent) in [
        (Some("not-the-notion-token-000000"), event.clone()),
        (None, event.clone()),
        (
            Some(token),
            notion_event("evt-1", "page.deleted", &handbook),
        ),
    ] {
        let headers: Vec<(&str, String)> = secret
            .map(|s| {
                (
                    "x-notion-signature",
                    format!("sha256={}", hmac_sha256_hex(s, &event)),
                )
            })
            .into_iter()
            .collect();
        assert_refused(&post_event(&server, &id, &headers, &sent).await);
    }
    assert_eq!(
        runs(&server, &key, &id).await,
        1,
        "nothing refused queued a sync"
    );

    let posted = Instant::now();
    let answer = deliver_notion(&server, &id, &event, Some(token)).await;
    let target = ("wiki", question, change);
    assert_applied("notion", (&server, &key, &id), &answer, posted, target).await;

    // Notion's retry of the same event: a replay. A comment event: nothing engram reads.
    assert_replay(&deliver_notion(&server, &id, &event, Some(token)).await);
    let comment = notion_event("evt-2", "comment.created", &handbook);
    assert_ignored(&deliver_notion(&server, &id, &comment, Some(token)).await);
    assert_eq!(
        runs(&server, &key, &id).await,
        2,
        "only the signed, new page event queued a sync"
    );
}
