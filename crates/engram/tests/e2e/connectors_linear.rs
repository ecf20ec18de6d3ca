//! The linear connector end to end: the real server syncs a team's issues and comments from a
//! stateful fake of Linear's GraphQL API (`linear_fake`), follows edits, comments, archiving and
//! deletion, waits out rate limits, and every query it sends and every answer the fake gives are
//! held to Linear's schema.

use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, assert_best_holds, assert_nothing_changed, assert_rate_limited,
    assert_secrets_hidden, configure, counts, create, discover, filtered_query, indexed, listed,
    previewed, rejected_credentials_are_a_reconnect, server_for_fakes, sync,
};
use engram_fakes::linear::{assert_conforms, Exchange, LinearFake};

const DB: &str = "lin";

/// The identifiers of the synced issues, sorted.
fn identifiers(sources: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = sources
        .iter()
        .filter_map(|s| s["additional_metadata"]["identifier"].as_str())
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids
}

/// The issues read whole (`EngramIssue`) from the `from`th exchange on.
fn issues_read(exchanges: &[Exchange], from: usize) -> usize {
    exchanges[from..]
        .iter()
        .filter(|e| e.operation == "EngramIssue")
        .count()
}

#[tokio::test]
async fn a_linear_team_syncs_issues_with_comments_follows_edits_and_deletions() {
    let key = "lin_api_e2eKeyValue1234";
    let token = "lin_oauth_e2eToken5678";
    let fake = LinearFake::start(key, token).await;
    // 52 teams: discovery reads two pages.
    for n in 0..50 {
        fake.add_team(&format!("F{n:02}"), &format!("Filler {n}"));
    }
    let eng = fake.add_team("ENG", "Engineering");
    fake.add_team("OPS", "Operations");
    let reliability = fake.add_project(
        "Reliability",
        "Fewer pages for the on-call engineers.",
        "## Goals\nHalve the incidents caused by deploys before the summer freeze.",
        "Ana Lima",
    );
    let stall = fake.open_issue(
        "ENG",
        "Deploys stall at 90 percent",
        "Every deploy since Monday **hangs** at 90 percent for ten minutes.",
        "Ana Lima",
    );
    fake.edit(&stall, |e| {
        e.state = ("In Progress".into(), "started".into());
        e.priority = 2;
        e.labels = vec!["bug".into(), "ops".into()];
        e.assignee = Some("Bo Berg".into());
        e.project = Some("Reliability".into());
        e.cycle = Some(7);
    });
    fake.comment(
        &stall,
        "Bo Berg",
        "The build cache was cold; warming it before the deploy removed the stall.",
    );
    let retries = fake.open_issue(
        "ENG",
        "Raise the retry budget to five",
        "Flaky uploads need more retries.",
        "Bo Berg",
    );
    fake.comment(
        &retries,
        "Ana Lima",
        "Approved once the canary deployment passes.",
    );
    // More comments than a page holds: the last is on the second page.
    let keys = fake.open_issue(
        "ENG",
        "Rotate the signing keys",
        "Quarterly rotation.",
        "Cy Dahl",
    );
    for n in 1..=50 {
        fake.comment(
            &keys,
            "Cy Dahl",
            &format!("Status check {n}: still rotating."),
        );
    }
    fake.comment(
        &keys,
        "Cy Dahl",
        "The last rotation finished on Friday with the hardware token vault.",
    );
    fake.open_issue(
        "OPS",
        "Order more racks",
        "Not synced: another team.",
        "Ana Lima",
    );

    // No automatic retry during the test: each run is one the test starts.
    let server = server_for_fakes();
    let admin = server.key("conn-linear", &[]);
    server.ready_database(&admin, DB).await;
    let id = create(
        &server,
        &admin,
        json!({"provider": "linear", "database": DB,
               "credentials": {"api_key": key, "api_url": fake.api_url()}}),
    )
    .await;
    let (found, resources) = discover(&server, &admin, &id).await;
    assert_eq!(
        resources.len(),
        53,
        "every team and the project: {found:#?}"
    );
    let team = resources
        .iter()
        .find(|r| r["id"] == eng.as_str())
        .expect("the team");
    assert_eq!(
        (
            team["resource_type"].clone(),
            team["name"].clone(),
            team["metadata"]["key"].clone()
        ),
        (json!("team"), json!("ENG: Engineering"), json!("ENG")),
        "{team:#?}"
    );
    let project_id = format!("project:{reliability}");
    let project = resources
        .iter()
        .find(|r| r["id"] == project_id.as_str())
        .expect("the project");
    assert_eq!(project["resource_type"], "project", "{project:#?}");
    assert!(!found.body.to_string().contains(key));
    // An OAuth access token reads the same.
    let credentials = json!({"access_token": token, "api_url": fake.api_url()});
    assert_eq!(previewed(&server, &admin, "linear", credentials).await, 53);

    configure(
        &server,
        &admin,
        &id,
        json!([{"resource_id": eng}, {"resource_id": project_id}]),
    )
    .await;
    let status = after_run(&server, &admin, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    crate::common::connectors::assert_readers_unknown(&status, "is not read from Linear");
    assert_eq!(
        counts(&status),
        (json!(5), json!(0), json!(0)),
        "the team's 3 issues; the project's overview and its issue: {status:#?}"
    );
    let sources = listed(&server, &admin, DB).await;
    assert_eq!(identifiers(&sources), ["ENG-1", "ENG-1", "ENG-2", "ENG-3"]);
    let overview = sources
        .iter()
        .find(|s| s["additional_metadata"]["kind"] == "project")
        .expect("the project's overview");
    assert_eq!(
        (
            overview["title"].clone(),
            overview["additional_metadata"]["project"].clone()
        ),
        (json!("Project: Reliability"), json!("Reliability")),
        "{overview:#?}"
    );
    let issue = sources
        .iter()
        .find(|s| s["additional_metadata"]["identifier"] == stall.as_str())
        .expect("the issue");
    let fields = &issue["additional_metadata"];
    assert_eq!(
        (
            fields["state"].clone(),
            fields["priority"].clone(),
            fields["labels"].clone(),
            fields["assignee"].clone(),
            fields["team"].clone(),
            fields["project"].clone(),
            fields["cycle"].clone(),
        ),
        (
            json!("In Progress"),
            json!("High"),
            json!(["bug", "ops"]),
            json!("Bo Berg"),
            json!("ENG"),
            json!("Reliability"),
            json!(7),
        ),
        "{issue:#?}"
    );
    assert_eq!(
        issue["title"], "ENG-1: Deploys stall at 90 percent",
        "{issue:#?}"
    );
    indexed(&server, &admin, DB).await;
    assert_best_holds(
        &server,
        &admin,
        DB,
        "why did the deploys stall and what fixed it",
        json!({"state": "In Progress"}),
        "build cache was cold",
    )
    .await;
    assert_best_holds(
        &server,
        &admin,
        DB,
        "what are the goals of the reliability project",
        json!({"kind": "project"}),
        "summer freeze",
    )
    .await;
    let chunks = filtered_query(
        &server,
        &admin,
        DB,
        "when did the last key rotation finish",
        json!({"identifier": keys, "team": "ENG"}),
    )
    .await;
    assert!(
        chunks.iter().any(|c| c["chunk_content"]
            .to_string()
            .contains("hardware token vault")),
        "the second page of comments is read: {chunks:#?}"
    );

    // One issue is edited, another (in the project too) commented on, and the project's
    // overview rewritten: only those are read again.
    fake.edit(&retries, |e| {
        e.description =
            "Flaky uploads need more retries; the budget goes to five on Thursday.".into();
        e.state = ("Done".into(), "completed".into());
    });
    fake.comment(
        &stall,
        "Cy Dahl",
        "Root cause: the runner image lacked the cache mount.",
    );
    fake.edit_project(
        &reliability,
        "## Goals\nHalve the incidents caused by deploys before the autumn release.",
    );
    let before = fake.exchanges().len();
    let status = sync(&server, &admin, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(4), json!(0)),
        "two issues of the team, the commented one of the project and the overview: {status:#?}"
    );
    assert_eq!(
        issues_read(&fake.exchanges(), before),
        3,
        "only the changed issues are read"
    );
    let sources = listed(&server, &admin, DB).await;
    let done = sources
        .iter()
        .find(|s| s["additional_metadata"]["identifier"] == retries.as_str())
        .expect("the edited issue");
    assert_eq!(done["additional_metadata"]["state"], "Done", "{done:#?}");
    indexed(&server, &admin, DB).await;
    let chunks = filtered_query(
        &server,
        &admin,
        DB,
        "what was the root cause of the stall",
        json!({"identifier": stall}),
    )
    .await;
    assert!(
        chunks
            .iter()
            .any(|c| c["chunk_content"].to_string().contains("runner image")),
        "{chunks:#?}"
    );

    // An archived issue and a deleted (trashed) one leave engram.
    fake.archive(&retries, false);
    fake.archive(&keys, true);
    let before = fake.exchanges().len();
    let status = sync(&server, &admin, &id, 2).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(0), json!(2)),
        "{status:#?}"
    );
    assert_eq!(issues_read(&fake.exchanges(), before), 0);
    assert_eq!(
        identifiers(&listed(&server, &admin, DB).await),
        ["ENG-1", "ENG-1"]
    );

    // Nothing changed: nothing is read or dispatched.
    let before = fake.exchanges().len();
    let status = sync(&server, &admin, &id, 3).await;
    assert_nothing_changed(&status);
    assert_eq!(issues_read(&fake.exchanges(), before), 0);

    // Rate limited: the sync stops at the first refusal, the connector is degraded and the
    // resource retryable.
    fake.set_rate_limited(true);
    let before = fake.exchanges().len();
    let status = sync(&server, &admin, &id, 4).await;
    assert_rate_limited(&status, &["rate limit"]);
    let asked = fake.exchanges().len() - before;
    assert!(asked <= 2, "no hammering: {asked} requests");
    fake.set_rate_limited(false);
    let status = sync(&server, &admin, &id, 5).await;
    assert_nothing_changed(&status);

    // A revoked key is a reconnect; no key appears in what engram answers.
    let revoked = "lin_api_revokedValue999";
    let status = rejected_credentials_are_a_reconnect(
        &server,
        &admin,
        &id,
        json!({"api_key": revoked, "api_url": fake.api_url()}),
        6,
    )
    .await;
    assert_secrets_hidden(&server, &admin, &id, &status, &[revoked, key]).await;

    // Every query the connector sent and every answer the fake gave, held to Linear's schema.
    let exchanges = fake.exchanges();
    for operation in [
        "EngramTeams",
        "EngramIssues",
        "EngramComments",
        "EngramIssue",
        "EngramIssueComments",
        "EngramNewestComment",
        "EngramProjects",
        "EngramProject",
    ] {
        assert!(
            exchanges
                .iter()
                .any(|e| e.operation == operation && e.status == 200),
            "{operation} was not sent"
        );
    }
    assert_conforms(&exchanges);
}
