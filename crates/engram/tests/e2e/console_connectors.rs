//! The console's connectors pages from outside (HTTP and the browser): the catalog, a create
//! form generated from the provider's credential schema, discovery and selection, sync now,
//! pause and resume, all through the API's own calls; secrets never shown; another
//! organization's connectors out of reach; a read-only key offered no action and refused one.

use std::time::Duration;

use serde_json::json;

use crate::common::feeds::FeedServer;
use crate::common::{eventually, Server};
use crate::console::Browser;

fn feeds_env() -> [(&'static str, &'static str); 1] {
    [("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]
}

#[tokio::test]
async fn connector_pages_act_as_the_api_and_keep_each_key_to_what_it_may_do() {
    let feeds = FeedServer::start("feed-secret-1").await;
    feeds.set_feed("eng", &[("p1", "Release 4.2", "Batches stream now.")]);
    let server = Server::start_with(&feeds_env());
    let key = server.key("acme", &[]);
    server.ready_database(&key, "news").await;
    let mut owner = Browser::signed_in(&server, &key).await;

    // The catalog, and a create form generated from rss's credential schema.
    let catalog = owner.get("/console/connectors").await;
    assert_eq!(catalog.status, 200, "{}", catalog.body);
    assert!(catalog
        .body
        .contains("/console/connectors/new?provider=rss"));
    let form = owner.get("/console/connectors/new?provider=rss").await;
    assert_eq!(form.status, 200, "{}", form.body);
    for field in [
        r#"name="cred.token" type="password""#,
        r#"name="cred.password" type="password""#,
        r#"name="cred.username" type="text""#,
        r#"<textarea id="cred-0" name="cred.feeds""#,
        r#"<option value="news""#,
    ] {
        assert!(form.body.contains(field), "{field} in {}", form.body);
    }
    let unknown = owner.get("/console/connectors/new?provider=nope").await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // Credentials are checked against the schema as the API checks them.
    let refused = owner
        .post(
            "/console/connectors",
            &[
                ("provider", "rss"),
                ("database", "news"),
                ("cred.username", "only-a-user"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("VALIDATION_ERROR"),
        "{}",
        refused.body
    );

    // Created through the same call as the API's; the token never comes back.
    let hostile = "<img src=x onerror=alert(1)>";
    let created = owner
        .post(
            "/console/connectors",
            &[
                ("provider", "rss"),
                ("name", hostile),
                ("database", "news"),
                ("sync_interval_seconds", "600"),
                ("cred.token", "feed-secret-1"),
                ("cred.feeds", &feeds.url("eng")),
            ],
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let href = created.headers["hx-redirect"]
        .to_str()
        .expect("redirect")
        .to_owned();
    let id = href
        .strip_prefix("/console/connectors/")
        .expect("the connector's page")
        .to_owned();
    let api = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(api.status, 200, "{api:#?}");
    assert_eq!(api.body["sync_interval_seconds"], 600);
    assert_eq!(api.body["name"], hostile);
    let page = owner.get(&href).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("feed-secret-1"), "secrets never shown");
    assert!(page.body.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!page.body.contains(hostile));

    // Discovery with the stored credentials, then the chosen feed syncs.
    let found = owner.get(&format!("{href}/discover")).await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(found.body.contains("eng feed"), "{}", found.body);
    let picked =
        json!({"resource_id": feeds.url("eng"), "resource_type": "feed", "name": "eng feed"});
    let configured = owner
        .post(
            &format!("{href}/configure"),
            &[("resource", &picked.to_string())],
        )
        .await;
    assert_eq!(configured.status, 200, "{}", configured.body);
    assert_eq!(configured.headers["hx-redirect"], href.as_str());
    eventually(Duration::from_secs(60), "the first run", || async {
        let status = server.get(&format!("/connectors/{id}/status"), &key).await;
        (status.body["runs"][0]["state"] == "succeeded").then_some(())
    })
    .await;
    let live = owner.get(&format!("{href}/status")).await;
    assert!(live.body.contains("eng feed"), "{}", live.body);
    assert!(
        live.body.contains(r#"data-state="succeeded""#),
        "{}",
        live.body
    );

    // Another organization's key: not listed, not found, nothing done.
    let mut stranger = Browser::signed_in(&server, &server.key("globex", &[])).await;
    let listed = stranger.get("/console/connectors").await;
    assert_eq!(listed.status, 200);
    assert!(!listed.body.contains(&id), "{}", listed.body);
    for path in [
        href.clone(),
        format!("{href}/status"),
        format!("{href}/discover"),
    ] {
        let answer = stranger.get(&path).await;
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert!(answer.body.contains("CONNECTOR_NOT_FOUND"), "{path}");
        assert!(!answer.body.contains("eng feed"), "{path}");
    }
    for action in ["pause", "sync", "delete"] {
        let answer = stranger.post(&format!("{href}/{action}"), &[]).await;
        assert_eq!(answer.status, 404, "{action}: {}", answer.body);
    }

    // A read-only key of the organization: the catalog without actions; every action refused.
    let reader = server.scoped_key("acme", &[], &["read"]);
    let mut reading = Browser::signed_in(&server, &reader).await;
    let listed = reading.get("/console/connectors").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.contains("rss"), "the catalog");
    assert!(
        !listed.body.contains("/console/connectors/new"),
        "no create link"
    );
    assert!(!listed.body.contains(&id), "no connector");
    assert_eq!(
        reading
            .get("/console/connectors/new?provider=rss")
            .await
            .status,
        403
    );
    let page = reading.get(&href).await;
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(!page.body.contains("/pause") && !page.body.contains("Sync now"));
    for (path, form) in [
        (format!("{href}/pause"), vec![]),
        (format!("{href}/sync"), vec![]),
        (format!("{href}/delete"), vec![]),
        (
            "/console/connectors".to_owned(),
            vec![("provider", "rss"), ("database", "news")],
        ),
    ] {
        let answer = reading.post(&path, &form).await;
        assert_eq!(answer.status, 403, "{path}: {}", answer.body);
        assert!(answer.body.contains("FORBIDDEN"), "{path}");
    }
    let api = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(api.body["paused"], false, "nothing changed");

    // Without the session's token, no change either.
    let token = owner.csrf.take();
    let forged = owner.post(&format!("{href}/pause"), &[]).await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    owner.csrf = token;

    // The owner pauses and resumes; sync now is refused while paused, as by the API.
    let paused = owner.post(&format!("{href}/pause"), &[]).await;
    assert_eq!(paused.headers["hx-redirect"], href.as_str());
    assert_eq!(
        server.get(&format!("/connectors/{id}"), &key).await.body["paused"],
        true
    );
    let page = owner.get(&href).await;
    assert!(page.body.contains("Resume") && !page.body.contains("Sync now"));
    let refused = owner.post(&format!("{href}/sync"), &[]).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("CONNECTOR_PAUSED"));
    owner.post(&format!("{href}/resume"), &[]).await;
    assert_eq!(
        server.get(&format!("/connectors/{id}"), &key).await.body["paused"],
        false
    );

    // Settings and credentials update as PATCH does: blank fields keep their values.
    let updated = owner
        .post(
            &format!("{href}/update"),
            &[
                ("name", "Engineering"),
                ("sync_interval_seconds", "900"),
                ("custom_instructions", ""),
                ("cred.token", ""),
            ],
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    let api = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(api.body["name"], "Engineering");
    assert_eq!(api.body["sync_interval_seconds"], 900);
    let vault = server.get("/credential-vault", &key).await;
    assert_eq!(
        vault.body["credentials"][0]["fields"],
        json!(["feeds", "token"])
    );

    let deleted = owner.post(&format!("{href}/delete"), &[]).await;
    assert_eq!(deleted.headers["hx-redirect"], "/console/connectors");
    let gone = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(gone.status, 404);
}

/// The browser suite of the connectors pages (`console_connectors.py`).
#[tokio::test]
async fn the_connectors_pages_work_in_a_real_browser() {
    let feeds = FeedServer::start("feed-secret-2").await;
    feeds.set_feed(
        "eng",
        &[
            ("p1", "Release 4.2", "The indexer now streams batches."),
            (
                "p2",
                "Postmortem",
                "An expired certificate caused the outage.",
            ),
        ],
    );
    let server = Server::start_with(&feeds_env());
    let key = server.key("acme", &[]);
    server.ready_database(&key, "news").await;
    // Another organization's connector, which acme must never see.
    let other = server.key("globex", &[]);
    server.ready_database(&other, "globex-news").await;
    let theirs = server
        .post(
            "/connectors",
            &other,
            json!({"provider": "rss", "database": "globex-news", "name": "Globex wire",
                   "credentials": {"token": "feed-secret-2"}}),
        )
        .await;
    assert_eq!(theirs.status, 201, "{theirs:#?}");
    let their_id = theirs.body["connector_id"]
        .as_str()
        .expect("connector_id")
        .to_owned();
    crate::console::browser_suite(
        &server,
        "console_connectors.py",
        &[
            ("ENGRAM_KEY", key.clone()),
            ("ENGRAM_OTHER_KEY", other.clone()),
            ("OTHER_CONNECTOR", their_id),
            ("FEED_URL", feeds.url("eng")),
            ("FEED_TOKEN", "feed-secret-2".to_owned()),
        ],
    )
    .await;
    // What the browser did went through the API's functions: the API sees it.
    let listed = server.get("/connectors", &key).await;
    let connectors = listed.body["connectors"].as_array().expect("connectors");
    assert_eq!(connectors.len(), 1, "{listed:#?}");
    assert_eq!(connectors[0]["name"], "Engineering blog");
    assert_eq!(connectors[0]["paused"], false);
    assert!(connectors[0]["documents_dispatched"].as_i64() >= Some(2));
}
