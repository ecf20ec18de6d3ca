//! The notion connector from outside: a workspace on the stateful Notion fake (pages nested
//! three deep, a database with rows), synced into a database through the connector routes, then
//! followed through an edit, an archived page, an unchanged re-sync and rate limiting; every
//! exchange held to the types of Notion's official client.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{eventually, Server};
use crate::notion_fake::{assert_conforms, body, rich, NotionFake, Parent};

const SYNC_WAIT: Duration = Duration::from_secs(60);
const DB: &str = "wiki";

/// A plain-object success: the status and the body.
fn plain(reply: &crate::common::Reply, status: u16) -> &Value {
    assert_eq!(reply.status.as_u16(), status, "{reply:#?}");
    &reply.body
}

/// Waits until the connector has finished a run after `runs_before` runs, and returns its status.
async fn after_run(server: &Server, key: &str, id: &str, runs_before: usize) -> Value {
    let path = format!("/connectors/{id}/status");
    eventually(SYNC_WAIT, "a sync to finish", || {
        let path = path.clone();
        async move {
            let status = server.get(&path, key).await;
            let body = plain(&status, 200).clone();
            let runs = body["runs"].as_array().expect("runs");
            let finished = runs
                .iter()
                .filter(|r| r["state"] == "succeeded" || r["state"] == "failed")
                .count();
            (finished > runs_before && body["sync_status"] == "idle").then_some(body)
        }
    })
    .await
}

async fn sync(server: &Server, key: &str, id: &str, runs_before: usize) -> Value {
    server
        .post(&format!("/connectors/{id}/sync"), key, json!({}))
        .await;
    after_run(server, key, id, runs_before).await
}

/// The last run's (added, updated, deleted).
fn counts(status: &Value) -> (Value, Value, Value) {
    let run = &status["runs"][0];
    (
        run["added"].clone(),
        run["updated"].clone(),
        run["deleted"].clone(),
    )
}

async fn sources(server: &Server, key: &str) -> Vec<Value> {
    let reply = server
        .post(
            "/context/list",
            key,
            json!({"database": DB, "page_size": 100}),
        )
        .await;
    reply.current_ok(200)["sources"]
        .as_array()
        .expect("sources")
        .clone()
}

async fn titles(server: &Server, key: &str) -> Vec<String> {
    let mut titles: Vec<String> = sources(server, key)
        .await
        .iter()
        .filter_map(|s| s["title"].as_str().map(str::to_owned))
        .collect();
    titles.sort();
    titles
}

async fn indexed(server: &Server, key: &str) {
    let sources = sources(server, key).await;
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(server, key, DB, None, &ids).await;
}

/// The best chunk's text of a query under `filter` (`additional_metadata`).
async fn best(server: &Server, key: &str, query: &str, filter: Value) -> String {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": DB, "query": query, "max_results": 3,
                   "metadata_filters": {"additional_metadata": filter}}),
        )
        .await;
    let chunks = reply.current_ok(200)["chunks"]
        .as_array()
        .expect("chunks")
        .clone();
    assert!(!chunks.is_empty(), "{query}: {reply:#?}");
    chunks[0]["chunk_content"].to_string()
}

/// Exchanges with the fake from the `from`th on that took `route`.
fn calls(fake: &NotionFake, from: usize, route: &str) -> Vec<crate::notion_fake::Exchange> {
    fake.exchanges()[from..]
        .iter()
        .filter(|e| e.route == route)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_notion_workspace_syncs_pages_and_database_rows_follows_edits_and_archives() {
    const CHILDREN: &str = "/v1/blocks/{block_id}/children";
    let token = "ntn_e2eSecretValue1234";
    // Two objects a page: every listing goes on with cursors.
    let fake = NotionFake::start(token, 2).await;
    let handbook = fake.add_page(Parent::Workspace, "Handbook");
    fake.append(&handbook, "heading_1", body("heading_1", "Welcome"));
    fake.append(
        &handbook,
        "paragraph",
        body("paragraph", "The deploy window is Tuesday at 10:00."),
    );
    let oncall = fake.add_page(Parent::Page(handbook.clone()), "On call");
    let steps = fake.append(&oncall, "toggle", body("toggle", "Escalation"));
    let nested = fake.append(
        &steps,
        "bulleted_list_item",
        body("bulleted_list_item", "Escalate to the secondary"),
    );
    fake.append(
        &nested,
        "paragraph",
        body(
            "paragraph",
            "The pager rotation hands over every Monday at nine in the morning.",
        ),
    );
    fake.append(
        &oncall,
        "code",
        body("code", "kubectl rollout undo deploy/api"),
    );
    let table = fake.append(&oncall, "table", body("table", "2"));
    fake.append(&table, "table_row", body("table_row", "Service | Owner"));
    fake.append(&table, "table_row", body("table_row", "billing | Ana"));
    let runbooks = fake.add_page(Parent::Page(oncall.clone()), "Runbooks");
    fake.append(
        &runbooks,
        "paragraph",
        body(
            "paragraph",
            "Restart the queue workers when the backlog passes ten thousand.",
        ),
    );
    let legacy = fake.add_page(Parent::Page(handbook.clone()), "Legacy VPN");
    fake.append(
        &legacy,
        "paragraph",
        body(
            "paragraph",
            "The old VPN concentrator lives in the basement rack.",
        ),
    );
    let tasks = fake.add_database(
        Parent::Page(handbook.clone()),
        "Tasks",
        &[
            ("Name", "title"),
            ("Status", "status"),
            ("Tags", "multi_select"),
            ("Points", "number"),
        ],
    );
    let option = |name: &str| json!({"id": format!("s-{name}"), "name": name, "color": "blue"});
    let login = fake.add_row(
        &tasks,
        &[
            ("Name", rich("Fix the login loop")),
            ("Status", option("In progress")),
            (
                "Tags",
                json!([{"id": "t1", "name": "auth", "color": "red"}]),
            ),
            ("Points", json!(3)),
        ],
    );
    fake.append(
        &login,
        "paragraph",
        body(
            "paragraph",
            "Safari users bounce between the sign-in page and the dashboard.",
        ),
    );
    fake.add_row(
        &tasks,
        &[
            ("Name", rich("Write the onboarding guide")),
            ("Status", option("Done")),
        ],
    );
    fake.add_row(
        &tasks,
        &[
            ("Name", rich("Rotate the API keys")),
            ("Status", option("Done")),
        ],
    );

    let server = Server::start_with(&[
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"),
    ]);
    let key = server.key("conn-notion", &[]);
    server.ready_database(&key, DB).await;
    let created = server
        .post(
            "/connectors",
            &key,
            json!({"provider": "notion", "database": DB,
                   "credentials": {"token": token, "api_url": fake.api_url()}}),
        )
        .await;
    let id = plain(&created, 201)["connector_id"]
        .as_str()
        .expect("connector_id")
        .to_owned();
    let found = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    let mut offered: Vec<(String, String, String)> = plain(&found, 200)["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_owned(),
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["resource_type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        [
            (
                format!("database:{tasks}"),
                "Tasks".into(),
                "database".into()
            ),
            (format!("page:{handbook}"), "Handbook".into(), "page".into()),
        ],
        "the top-level page and the database; not the child pages nor the rows: {found:#?}"
    );
    assert!(!found.body.to_string().contains(token));

    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [
                {"resource_id": format!("page:{handbook}"), "resource_type": "page"},
                {"resource_id": format!("database:{tasks}"), "resource_type": "database"}
            ]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(
        counts(&status),
        (json!(7), json!(0), json!(0)),
        "four pages and three rows: {status:#?}"
    );
    assert_eq!(
        titles(&server, &key).await,
        [
            "Fix the login loop",
            "Handbook",
            "Legacy VPN",
            "On call",
            "Rotate the API keys",
            "Runbooks",
            "Write the onboarding guide"
        ]
    );
    let listed = sources(&server, &key).await;
    let row = listed
        .iter()
        .find(|s| s["title"] == "Fix the login loop")
        .expect("the row");
    let meta = &row["additional_metadata"];
    assert_eq!(
        (
            meta["notion_kind"].clone(),
            meta["notion_database"].clone(),
            meta["status"].clone(),
            meta["tags"].clone(),
            meta["points"].clone(),
        ),
        (
            json!("database_row"),
            json!("Tasks"),
            json!("In progress"),
            json!(["auth"]),
            json!(3)
        ),
        "{row:#?}"
    );
    indexed(&server, &key).await;

    // A sentence three blocks deep in a child page is found, and the row by its property.
    let text = best(
        &server,
        &key,
        "when does the pager rotation hand over",
        json!({"notion_kind": "page"}),
    )
    .await;
    assert!(text.contains("every Monday at nine"), "{text}");
    let text = best(
        &server,
        &key,
        "why do Safari users bounce",
        json!({"status": "In progress", "notion_database": "Tasks"}),
    )
    .await;
    assert!(text.contains("sign-in page"), "{text}");

    // One page edited: only it is read again and re-indexed.
    fake.edit_block(
        &nested,
        "Escalate to the incident commander after twenty minutes",
    );
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(0)),
        "{status:#?}"
    );
    let read: Vec<String> = calls(&fake, before, CHILDREN)
        .iter()
        .map(|e| e.params[0].1.clone())
        .collect();
    assert!(
        !read.contains(&handbook) && !read.contains(&runbooks) && read.contains(&oncall),
        "only the edited page's blocks are read: {read:?}"
    );
    indexed(&server, &key).await;
    let text = best(
        &server,
        &key,
        "who do we escalate to",
        json!({"notion_kind": "page"}),
    )
    .await;
    assert!(text.contains("incident commander"), "{text}");

    // A page archived and a row edited: the page leaves engram, the row is updated.
    fake.archive_page(&legacy);
    fake.edit_row(&login, "Status", option("Done"));
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(2), json!(1)),
        "the row and the archived page's parent (its child page block went) updated, the \
         archived page deleted: {status:#?}"
    );
    let titles_now = titles(&server, &key).await;
    assert!(
        !titles_now.contains(&"Legacy VPN".to_owned()),
        "{titles_now:?}"
    );
    let row = sources(&server, &key)
        .await
        .into_iter()
        .find(|s| s["title"] == "Fix the login loop")
        .expect("the row");
    assert_eq!(row["additional_metadata"]["status"], "Done", "{row:#?}");

    // Nothing changed: nothing is read again or re-indexed; the database is asked for rows
    // edited since the last seen.
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 3).await;
    assert_eq!(
        (status["status"].clone(), counts(&status)),
        (json!("healthy"), (json!(0), json!(0), json!(0))),
        "{status:#?}"
    );
    assert!(calls(&fake, before, CHILDREN).is_empty(), "no blocks read");
    let queries = calls(&fake, before, "/v1/databases/{database_id}/query");
    assert!(
        queries.iter().all(|q| q
            .request
            .as_ref()
            .is_some_and(|r| r.pointer("/filter/last_edited_time/on_or_after").is_some())),
        "{queries:#?}"
    );

    // A short rate limit is waited out inside the pass.
    fake.rate_limit(1, 1);
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 4).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    let limited = fake.exchanges()[before..]
        .iter()
        .filter(|e| e.status == 429)
        .count();
    assert_eq!(limited, 1);

    // A long one ends the sync as retryable, saying so.
    fake.rate_limit(1000, 60);
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 5).await;
    assert_eq!(
        (status["status"].clone(), status["lifecycle"].clone()),
        (json!("degraded"), json!("active")),
        "{status:#?}"
    );
    let message = status["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("rate limiting"), "{status:#?}");
    assert!(
        status["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .all(|r| r["retryable"] == true),
        "{status:#?}"
    );
    let asked = fake.exchanges().len() - before;
    assert!(asked <= 6, "no hammering: {asked} requests");
    fake.rate_limit(0, 0);

    // A revoked secret is a reconnect; the secret appears in nothing engram answers.
    let revoked = "ntn_revokedValue999";
    let patched = server
        .call(
            Method::PATCH,
            &format!("/connectors/{id}"),
            Some(&key),
            Some(json!({"credentials": {"token": revoked, "api_url": fake.api_url()}})),
        )
        .await;
    assert!(patched.status.is_success(), "{patched:#?}");
    let status = sync(&server, &key, &id, 6).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("reconnect"), json!("failed")),
        "{status:#?}"
    );
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    for answer in [status.to_string(), connector.body.to_string()] {
        assert!(
            !answer.contains(revoked) && !answer.contains(token),
            "{answer}"
        );
    }

    // Everything the connector asked and the fake answered, held to Notion's published types.
    assert_conforms(&fake.exchanges());
}
