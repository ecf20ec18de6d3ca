//! Events a provider pushes (`POST /connectors/{id}/events`), end to end: a GitHub webhook
//! delivery signed with the connector's `webhook_secret` queues a sync that reads the change from
//! the GitHub fake at once; forged, unsigned, replayed and misdirected deliveries change nothing.
#![allow(clippy::unwrap_used)] // test code

use engram_connectors::push::hmac_sha256_hex;
use serde_json::{json, Value};

use crate::common::connectors::{after_run, create, listed, plain};
use crate::common::Server;
use crate::github_fake::GitHubFake;

const SECRET: &str = "push-secret-never-logged-0077";

/// Sends a GitHub-style delivery; `signature` is the `X-Hub-Signature-256` header, if any.
async fn deliver(
    server: &Server,
    id: &str,
    event: &str,
    delivery: &str,
    body: &[u8],
    signature: Option<String>,
) -> (u16, Value) {
    let mut request = server
        .client
        .post(server.url(&format!("/connectors/{id}/events")))
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery)
        .body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
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
