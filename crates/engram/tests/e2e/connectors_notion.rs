//! The notion connector from outside: a workspace on the stateful Notion fake (pages nested
//! three deep, a database with rows), synced into a database through the connector routes, then
//! followed through an edit, an archived page, an unchanged re-sync and rate limiting; every
//! exchange held to the types of Notion's official client.

use serde_json::json;

use crate::common::connectors::{
    after_run, assert_best_holds, assert_nothing_changed, assert_rate_limited,
    assert_secrets_hidden, configure, counts, create, discover, indexed, listed,
    rejected_credentials_are_a_reconnect, server_for_fakes, source_titles, sync,
};
use engram_fakes::notion::{assert_conforms, body, rich, NotionFake, Parent};

const DB: &str = "wiki";

/// Exchanges with the fake from the `from`th on that took `route`.
fn calls(fake: &NotionFake, from: usize, route: &str) -> Vec<engram_fakes::notion::Exchange> {
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

    let server = server_for_fakes();
    let key = server.key("conn-notion", &[]);
    server.ready_database(&key, DB).await;
    let id = create(
        &server,
        &key,
        json!({"provider": "notion", "database": DB,
               "credentials": {"token": token, "api_url": fake.api_url()}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    let mut offered: Vec<(String, String, String)> = resources
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

    configure(
        &server,
        &key,
        &id,
        json!([
            {"resource_id": format!("page:{handbook}"), "resource_type": "page"},
            {"resource_id": format!("database:{tasks}"), "resource_type": "database"}
        ]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    crate::common::connectors::assert_readers_unknown(&status, "does not say who may read");
    assert_eq!(
        counts(&status),
        (json!(7), json!(0), json!(0)),
        "four pages and three rows: {status:#?}"
    );
    assert_eq!(
        source_titles(&server, &key, DB).await,
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
    let sources = listed(&server, &key, DB).await;
    let row = sources
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
    indexed(&server, &key, DB).await;

    // A sentence three blocks deep in a child page is found, and the row by its property.
    assert_best_holds(
        &server,
        &key,
        DB,
        "when does the pager rotation hand over",
        json!({"notion_kind": "page"}),
        "every Monday at nine",
    )
    .await;
    assert_best_holds(
        &server,
        &key,
        DB,
        "why do Safari users bounce",
        json!({"status": "In progress", "notion_database": "Tasks"}),
        "sign-in page",
    )
    .await;

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
    indexed(&server, &key, DB).await;
    assert_best_holds(
        &server,
        &key,
        DB,
        "who do we escalate to",
        json!({"notion_kind": "page"}),
        "incident commander",
    )
    .await;

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
    let titles_now = source_titles(&server, &key, DB).await;
    assert!(
        !titles_now.contains(&"Legacy VPN".to_owned()),
        "{titles_now:?}"
    );
    let row = listed(&server, &key, DB)
        .await
        .into_iter()
        .find(|s| s["title"] == "Fix the login loop")
        .expect("the row");
    assert_eq!(row["additional_metadata"]["status"], "Done", "{row:#?}");

    // Nothing changed: nothing is read again or re-indexed; the database is asked for rows
    // edited since the last seen.
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 3).await;
    assert_nothing_changed(&status);
    assert!(calls(&fake, before, CHILDREN).is_empty(), "no blocks read");
    // Between full passes the page tree is not walked: the search lists what was edited.
    let searched = calls(&fake, before, "/v1/search");
    assert!(
        searched.iter().any(|e| e
            .request
            .as_ref()
            .is_some_and(|r| r.pointer("/sort/direction") == Some(&json!("descending")))),
        "{searched:#?}"
    );
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
    assert_rate_limited(&status, &["rate limiting"]);
    let asked = fake.exchanges().len() - before;
    assert!(asked <= 6, "no hammering: {asked} requests");
    fake.rate_limit(0, 0);

    // A revoked secret is a reconnect; the secret appears in nothing engram answers.
    let revoked = "ntn_revokedValue999";
    let status = rejected_credentials_are_a_reconnect(
        &server,
        &key,
        &id,
        json!({"token": revoked, "api_url": fake.api_url()}),
        6,
    )
    .await;
    assert_secrets_hidden(&server, &key, &id, &status, &[revoked, token]).await;

    // Everything the connector asked and the fake answered, held to Notion's published types.
    assert_conforms(&fake.exchanges());
}
