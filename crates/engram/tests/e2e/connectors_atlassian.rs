//! The confluence and jira connectors from outside: a site on the stateful Atlassian fake (a
//! space with nested, restricted pages and an attachment; a project with issues and comments),
//! synced through the connector routes, followed through an edit, a trashed page and a deleted
//! issue, a rate limit and a revoked token; every exchange held to Atlassian's published types.

use serde_json::json;

use crate::common::connectors::{
    after_run, assert_best_holds, assert_rate_limited, configure, counts, create, discover,
    indexed, rejected_credentials_are_a_reconnect, server_for_fakes, source_titles, sync,
};
use engram_fakes::atlassian::{assert_conforms, AtlassianFake};

const EMAIL: &str = "bot@example.com";
const TOKEN: &str = "atl_e2eSecretToken0001";

#[tokio::test]
async fn a_jira_project_syncs_issues_with_comments_follows_edits_and_deletions() {
    let fake = AtlassianFake::start(EMAIL, TOKEN, 2).await;
    fake.add_project("OPS", "Operations");
    let disk = fake.add_issue(
        "OPS",
        "Disk full on the build host",
        "The build host ran out of disk during the nightly run.",
        "To Do",
        "High",
        "Bug",
        "Ana Lima",
        &["infra"],
    );
    fake.comment(
        &disk,
        "Cy Park",
        "Rotating the build cache every Sunday fixed it.",
    );
    let vpn = fake.add_issue(
        "OPS",
        "Retire the old VPN",
        "The VPN concentrator in the basement goes away.",
        "In Progress",
        "Low",
        "Task",
        "",
        &[],
    );
    fake.add_issue(
        "OPS",
        "Renew the TLS certificate",
        "The wildcard certificate expires in April.",
        "To Do",
        "Medium",
        "Task",
        "Bo Reyes",
        &["security"],
    );
    let server = server_for_fakes();
    let key = server.key("conn-jira", &[]);
    server.ready_database(&key, "ops").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "jira", "database": "ops",
        "credentials": {"site_url": fake.site_url(), "email": EMAIL, "api_token": TOKEN}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    assert_eq!(resources.len(), 1, "{found:#?}");
    assert_eq!(resources[0]["id"], "project:OPS");
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": "project:OPS", "resource_type": "project",
        "filters": {"full_pass_every_hours": 0}}]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(
        counts(&status),
        (json!(3), json!(0), json!(0)),
        "{status:#?}"
    );
    indexed(&server, &key, "ops").await;
    assert_best_holds(
        &server,
        &key,
        "ops",
        "what fixed the build host disk",
        json!({"priority": "High", "issue_type": "Bug"}),
        "build cache",
    )
    .await;

    fake.set_status(&disk, "Done");
    fake.delete_issue(&vpn);
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(1)),
        "{status:#?}"
    );
    let titles = source_titles(&server, &key, "ops").await;
    assert!(!titles.iter().any(|t| t.contains("VPN")), "{titles:?}");

    fake.rate_limit(1000, 60);
    let status = sync(&server, &key, &id, 2).await;
    assert_rate_limited(&status, &["rate limiting"]);
    fake.rate_limit(0, 0);
    rejected_credentials_are_a_reconnect(
        &server,
        &key,
        &id,
        json!({"site_url": fake.site_url(), "email": EMAIL, "api_token": "atl_revoked0000"}),
        3,
    )
    .await;
    assert_conforms(&fake.exchanges());
}

#[tokio::test]
async fn a_confluence_space_syncs_nested_pages_attachments_and_restricted_readers() {
    let fake = AtlassianFake::start(EMAIL, TOKEN, 2).await;
    let space = fake.add_space("ENG", "Engineering");
    let home = fake.add_page(
        &space,
        None,
        "Runbooks",
        "<h1>Runbooks</h1><p>Start here.</p>",
    );
    let deploy = fake.add_page(&space, Some(&home), "Deploys", "<h2>Rollback</h2><ol><li>Pause the pipeline</li><li>Run the rollback job</li></ol><ac:structured-macro ac:name=\"code\"><ac:plain-text-body><![CDATA[kubectl rollout undo deploy/api]]></ac:plain-text-body></ac:structured-macro>");
    let salaries = fake.add_page(
        &space,
        Some(&home),
        "Salary bands",
        "<p>The salary bands are reviewed every March by the pay committee.</p>",
    );
    fake.restrict(&salaries, &[Some("hr-lead@example.com")], &["hr"]);
    let legacy = fake.add_page(
        &space,
        Some(&deploy),
        "Legacy hosts",
        "<p>The legacy hosts sit in rack nine.</p>",
    );
    fake.attach(
        &deploy,
        "oncall.txt",
        "text/plain",
        b"The on-call phone is handed over every Monday at nine.\n",
    );
    let server = server_for_fakes();
    let key = server.key("conn-confluence", &[]);
    server.ready_database(&key, "wiki").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "confluence", "database": "wiki",
        "credentials": {"site_url": fake.site_url(), "email": EMAIL, "api_token": TOKEN}}),
    )
    .await;
    let (_, resources) = discover(&server, &key, &id).await;
    assert_eq!(resources[0]["id"], format!("space:{space}"));
    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": format!("space:{space}"), "resource_type": "space"}]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(
        counts(&status),
        (json!(5), json!(0), json!(0)),
        "four pages and an attachment: {status:#?}"
    );
    indexed(&server, &key, "wiki").await;
    assert_best_holds(
        &server,
        &key,
        "wiki",
        "how do I roll back a deploy",
        json!({"kind": "page"}),
        "rollback",
    )
    .await;
    assert_best_holds(
        &server,
        &key,
        "wiki",
        "when is the on-call phone handed over",
        json!({"kind": "attachment"}),
        "Monday",
    )
    .await;
    let asked = |acl: serde_json::Value| json!({"database": "wiki", "query": "salary bands review", "max_results": 5, "acl": acl});
    let found = |reply: crate::common::Reply| {
        reply.current_ok(200)["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["chunk_content"].to_string().contains("pay committee"))
    };
    assert!(!found(
        server
            .post("/query", &key, asked(json!(["bob@example.com"])))
            .await
    ));
    assert!(found(
        server
            .post("/query", &key, asked(json!(["group:hr"])))
            .await
    ));

    fake.edit_page(
        &deploy,
        "<p>Rollbacks now go through the release train.</p>",
    );
    fake.trash_page(&legacy);
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(1)),
        "{status:#?}"
    );
    assert_conforms(&fake.exchanges());
}
