//! OAuth 2.0 for connectors, end to end: engram's authorization-code flow against a real
//! authorization server (npm's oidc-provider, OpenID certified, run by engram-testkit) whose
//! access tokens live 3 seconds and whose refresh tokens rotate on every use, and a GitHub
//! connector reading the GitHub fake, which accepts those access tokens by asking the server
//! (token introspection) as a resource server does.

#![allow(clippy::unwrap_used)] // test code

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::connectors::{after_run, configure, create, discover, listed, plain, sync};
use crate::common::Server;
use engram_fakes::github::GitHubFake;
use engram_fakes::serve::json_of;
use engram_testkit::{OAuthServer, OAuthServerOptions};

const CLIENT_ID: &str = "engram-github-app";
const CLIENT_SECRET: &str = "github-app-secret-never-logged-0451";
/// Access tokens' lifetime at the authorization server, seconds.
const ACCESS_TTL: u64 = 3;

/// The authorization server's endpoints, from its discovery document.
async fn endpoints(client: &reqwest::Client, issuer: &str) -> Value {
    json_of(client.get(format!("{issuer}/.well-known/openid-configuration"))).await
}

/// The user's browser: opens `url` at the authorization server, logs in and consents, and
/// answers where the server sends it back (engram's callback, with the code and state).
async fn authorize(client: &reqwest::Client, issuer: &str, url: &str) -> String {
    let answer = json_of(
        client
            .post(format!("{issuer}/test/authorize"))
            .json(&json!({ "url": url })),
    )
    .await;
    answer["location"]
        .as_str()
        .unwrap_or_else(|| panic!("the authorization ended on a page: {answer}"))
        .to_owned()
}

/// The browser following the redirect to engram: no API key.
async fn follow(client: &reqwest::Client, location: &str) -> (u16, Value) {
    let answer = client.get(location).send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// The stored `oauth` credentials, through the vault's reveal.
async fn revealed(server: &Server, key: &str, id: &str) -> Value {
    let reply = server
        .post(
            &format!("/credential-vault/{id}/reveal"),
            key,
            json!({"field": "oauth"}),
        )
        .await;
    assert_eq!(reply.status.as_u16(), 200, "{reply:#?}");
    reply.body["value"].clone()
}

/// Starts an authorization and plays the user through it: where engram is sent back to.
async fn start_and_consent(
    server: &Server,
    key: &str,
    id: &str,
    client: &reqwest::Client,
    issuer: &str,
) -> String {
    let started = server
        .post(&format!("/connectors/{id}/oauth/start"), key, json!({}))
        .await;
    let url = plain(&started, 200)["authorization_url"]
        .as_str()
        .expect("authorization_url")
        .to_owned();
    authorize(client, issuer, &url).await
}

#[tokio::test]
async fn a_connector_authorized_with_oauth_refreshes_its_rotating_token_and_asks_again_when_the_grant_is_revoked(
) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("engram.log");
    let mut server = Server::start_logged(
        &[
            // Everything logged, to check no secret is.
            ("RUST_LOG", "debug"),
            ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
            ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"),
            // Tokens live 3 s and are refreshed 10 s before they expire: every use refreshes.
            ("ENGRAM_CONNECTORS__OAUTH_REFRESH_MARGIN_MS", "10000"),
        ],
        &log,
    );
    let redirect = server.url("/connectors/oauth/callback");
    let auth = OAuthServer::start(&OAuthServerOptions {
        client_id: CLIENT_ID.to_owned(),
        client_secret: CLIENT_SECRET.to_owned(),
        redirect_uri: redirect.clone(),
        // As GitHub's token endpoint takes the client's credentials.
        auth_method: "client_secret_post".to_owned(),
        access_ttl: ACCESS_TTL,
    });
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let found = endpoints(&browser, &auth.issuer).await;
    let fake = GitHubFake::start("ghp_not_the_one_used").await;
    fake.accept_introspected(
        found["introspection_endpoint"].as_str().unwrap(),
        CLIENT_ID,
        CLIENT_SECRET,
    );
    let repo = "octo-org/oauth-notes";
    fake.add_repo(repo, true);
    fake.put_file(
        repo,
        "README.md",
        b"# Notes\nThe quarterly review happens in the lighthouse room.\n",
    );

    let key = server.key("conn-oauth", &[]);
    server.ready_database(&key, "authorized").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "github", "database": "authorized", "auth_type": "oauth2",
               "credentials": {"api_url": fake.api_url(), "oauth": {
                   "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                   "authorization_url": found["authorization_endpoint"],
                   "token_url": found["token_endpoint"],
                   "issuer": auth.issuer, "scope": "openid read"}}}),
    )
    .await;

    // Not authorized yet: discovery says what to do; starting needs a key.
    let early = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    early.assert_current_error(422, "VALIDATION_ERROR");
    assert!(early.body.to_string().contains("oauth/start"), "{early:#?}");
    let anonymous = server
        .call(
            Method::POST,
            &format!("/connectors/{id}/oauth/start"),
            None,
            None,
        )
        .await;
    assert_eq!(anonymous.status.as_u16(), 401, "{anonymous:#?}");
    // Another organization's key does not see the connector.
    let stranger = server.key("conn-oauth-other", &[]);
    let foreign = server
        .post(
            &format!("/connectors/{id}/oauth/start"),
            &stranger,
            json!({}),
        )
        .await;
    assert_eq!(foreign.status.as_u16(), 404, "{foreign:#?}");

    // A provider without OAuth, and a connector of an OAuth provider given a token instead.
    let feed = create(
        &server,
        &key,
        json!({"provider": "rss", "database": "authorized",
               "credentials": {"feeds": ["http://127.0.0.1:9/feed.xml"]}}),
    )
    .await;
    server
        .post(&format!("/connectors/{feed}/oauth/start"), &key, json!({}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    let by_token = create(
        &server,
        &key,
        json!({"provider": "github", "database": "authorized", "provider_account_scope": "pat",
               "credentials": {"token": "ghp_plain", "api_url": fake.api_url()}}),
    )
    .await;
    server
        .post(
            &format!("/connectors/{by_token}/oauth/start"),
            &key,
            json!({}),
        )
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    // The user declines: the provider sends an error back with the state; nothing is stored.
    let declined = server
        .post(&format!("/connectors/{id}/oauth/start"), &key, json!({}))
        .await;
    let declined =
        reqwest::Url::parse(plain(&declined, 200)["authorization_url"].as_str().unwrap()).unwrap();
    let declined_state = declined
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let refusal = format!(
        "{redirect}?error=access_denied&state={}",
        crate::connectors::urlencode(&declined_state)
    );
    let (status, answer) = follow(&browser, &refusal).await;
    assert_eq!(status, 400, "{answer:#?}");
    assert!(answer.to_string().contains("access_denied"), "{answer:#?}");
    assert!(revealed(&server, &key, &id)
        .await
        .get("access_token")
        .is_none());

    // The flow: the URL carries a PKCE challenge and engram's sealed state.
    let started = server
        .post(&format!("/connectors/{id}/oauth/start"), &key, json!({}))
        .await;
    let started = plain(&started, 200).clone();
    assert_eq!(started["redirect_uri"], redirect.as_str());
    let url = reqwest::Url::parse(started["authorization_url"].as_str().unwrap()).unwrap();
    let query: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["client_id"], CLIENT_ID);
    assert!(!url.as_str().contains(CLIENT_SECRET));
    let location = authorize(&browser, &auth.issuer, url.as_str()).await;
    assert!(location.starts_with(&redirect), "{location}");
    let back: std::collections::HashMap<String, String> = reqwest::Url::parse(&location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let (code, state) = (back["code"].clone(), back["state"].clone());

    // A forged or tampered state is refused and stores nothing.
    let forged = format!("{redirect}?code={code}&state=bm90LWEtc3RhdGU");
    assert_eq!(follow(&browser, &forged).await.0, 400);
    let mut tampered = state.clone().into_bytes();
    tampered[10] = if tampered[10] == b'A' { b'B' } else { b'A' };
    let tampered = format!(
        "{redirect}?code={code}&state={}",
        String::from_utf8(tampered).unwrap()
    );
    assert_eq!(follow(&browser, &tampered).await.0, 400);

    let (status, done) = follow(&browser, &location).await;
    assert_eq!(status, 200, "{done:#?}");
    assert_eq!(
        (done["authorized"].clone(), done["connector_id"].clone()),
        (json!(true), json!(id))
    );
    // The same redirect a second time: the state was used.
    let (status, again) = follow(&browser, &location).await;
    assert_eq!(status, 400, "{again:#?}");
    let first = revealed(&server, &key, &id).await;
    let (first_access, first_refresh) = (
        first["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned(),
        first["refresh_token"]
            .as_str()
            .expect("a refresh token")
            .to_owned(),
    );
    assert!(first["expires_at"].is_string(), "{first:#?}");

    // Discovery and a sync read GitHub with the token; it expires within the margin, so the
    // sync refreshes it first and the server rotates the refresh token.
    let (discovered, resources) = discover(&server, &key, &id).await;
    assert!(resources.iter().any(|r| r["id"] == repo), "{discovered:#?}");
    configure(&server, &key, &id, json!([{ "resource_id": repo }])).await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(listed(&server, &key, "authorized").await.len(), 1);
    let second = revealed(&server, &key, &id).await;
    assert_ne!(second["refresh_token"], first_refresh.as_str(), "rotated");
    assert_ne!(second["access_token"], first_access.as_str(), "refreshed");

    // Later, with the token long expired: refreshed again, the change synced.
    tokio::time::sleep(Duration::from_secs(ACCESS_TTL + 1)).await;
    fake.put_file(
        repo,
        "docs/agenda.md",
        b"# Agenda\nBring the lighthouse keeper's logbook.\n",
    );
    let synced = server
        .post(&format!("/connectors/{id}/sync"), &key, json!({}))
        .await;
    assert_eq!(synced.status.as_u16(), 202, "{synced:#?}");
    let status = after_run(&server, &key, &id, 1).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(listed(&server, &key, "authorized").await.len(), 2);
    let third = revealed(&server, &key, &id).await;
    assert_ne!(third["refresh_token"], second["refresh_token"]);

    // The user revokes the app: the next refresh is `invalid_grant`, the connector needs to be
    // authorized again, and nothing syncs on schedule until it is.
    let revoked = json_of(
        browser
            .post(format!("{}/test/revoke", auth.issuer))
            .json(&json!({})),
    )
    .await;
    assert!(revoked["revoked"].as_u64().unwrap() >= 1, "{revoked}");
    tokio::time::sleep(Duration::from_secs(ACCESS_TTL + 1)).await;
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(status["runs"][0]["state"], "failed", "{status:#?}");
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    let connector = plain(&connector, 200).clone();
    assert_eq!(connector["needs_reauth"], true, "{connector:#?}");
    assert!(
        connector["needs_reauth_reason"]
            .as_str()
            .unwrap()
            .contains("invalid_grant"),
        "{connector:#?}"
    );
    assert!(connector["needs_reauth_at"].is_string(), "{connector:#?}");
    // What was synced stays.
    assert_eq!(listed(&server, &key, "authorized").await.len(), 2);

    // A new authorization clears it and syncs at once.
    let location = start_and_consent(&server, &key, &id, &browser, &auth.issuer).await;
    let (status, done) = follow(&browser, &location).await;
    assert_eq!(status, 200, "{done:#?}");
    assert!(done["run_id"].is_string(), "a sync started: {done:#?}");
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(plain(&connector, 200)["needs_reauth"], false);
    let status = after_run(&server, &key, &id, 3).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    let fourth = revealed(&server, &key, &id).await;

    // No token, secret, code or state reached the log.
    server.terminate();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("OAuth authorization was completed"), "{text}");
    let mut secrets = vec![
        CLIENT_SECRET.to_owned(),
        code,
        state,
        first_access,
        first_refresh,
    ];
    for tokens in [&second, &third, &fourth] {
        for field in ["access_token", "refresh_token"] {
            secrets.push(tokens[field].as_str().unwrap().to_owned());
        }
    }
    for secret in secrets {
        assert!(
            !text.contains(&secret),
            "a secret reached the log: {secret}"
        );
    }
}

/// The console's connector page offers the provider's sign-in, which runs the same flow (the
/// API's `oauth/start` with the session's key) and comes back to the page; another
/// organization's session is not given the connector, a read-only one may not start it.
#[tokio::test]
async fn a_connector_is_authorized_from_the_console_and_comes_back_to_its_page() {
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let redirect = server.url("/connectors/oauth/callback");
    let auth = OAuthServer::start(&OAuthServerOptions {
        client_id: CLIENT_ID.to_owned(),
        client_secret: CLIENT_SECRET.to_owned(),
        redirect_uri: redirect.clone(),
        auth_method: "client_secret_post".to_owned(),
        access_ttl: 60,
    });
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let found = endpoints(&browser, &auth.issuer).await;
    let fake = GitHubFake::start("ghp_not_the_one_used").await;
    let key = server.key("console-oauth", &[]);
    server.ready_database(&key, "signed").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "github", "database": "signed", "auth_type": "oauth2",
               "credentials": {"api_url": fake.api_url(), "oauth": {
                   "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                   "authorization_url": found["authorization_endpoint"],
                   "token_url": found["token_endpoint"],
                   "issuer": auth.issuer, "scope": "openid read"}}}),
    )
    .await;
    let page = format!("/console/connectors/{id}");
    let mut owner = crate::console::Browser::signed_in(&server, &key).await;
    let shown = owner.get(&page).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(shown.body.contains("Sign in with github"), "{}", shown.body);
    let form = owner.get("/console/connectors/new?provider=github").await;
    assert!(form.body.contains("client_secret"), "{}", form.body);
    let rss = owner.get("/console/connectors/new?provider=rss").await;
    assert!(
        !rss.body.contains("OAuth"),
        "rss has no OAuth: {}",
        rss.body
    );

    // Another organization's session finds no such connector; a read-only one may not start.
    let mut stranger =
        crate::console::Browser::signed_in(&server, &server.key("console-other", &[])).await;
    assert_eq!(
        stranger.post(&format!("{page}/oauth"), &[]).await.status,
        404
    );
    let reader = server.scoped_key("console-oauth", &[], &["read"]);
    let mut reading = crate::console::Browser::signed_in(&server, &reader).await;
    assert_eq!(
        reading.post(&format!("{page}/oauth"), &[]).await.status,
        403
    );

    // Sign in: the browser goes to the authorization server, consents, and the callback
    // sends it back to the connector's page with the tokens stored.
    let started = owner.post(&format!("{page}/oauth"), &[]).await;
    assert_eq!(started.status, 200, "{}", started.body);
    let url = started.headers["hx-redirect"].to_str().unwrap().to_owned();
    assert!(
        url.starts_with(found["authorization_endpoint"].as_str().unwrap()),
        "{url}"
    );
    let location = authorize(&browser, &auth.issuer, &url).await;
    assert!(location.starts_with(&redirect), "{location}");
    let back = browser.get(&location).send().await.unwrap();
    assert_eq!(back.status().as_u16(), 303);
    assert_eq!(back.headers()["location"], page.as_str());
    let stored = revealed(&server, &key, &id).await;
    assert!(stored["access_token"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));
    let after = owner.get(&page).await;
    assert!(!after.body.contains(CLIENT_SECRET), "secrets never shown");
}

/// A hosted provider authorized with OAuth: its fake's address in the credentials (less
/// `oauth`), the resource to sync, how many documents its first sync lists, what changes at the
/// source (an object edited or added, one deleted), and how many documents are listed after.
struct OAuthCase<'a> {
    provider: &'static str,
    credentials: Value,
    resource: String,
    filters: Value,
    first: usize,
    change: Box<dyn FnOnce() + 'a>,
    after: usize,
}

/// Every hosted provider besides GitHub (above), each authorized through the real authorization
/// server with engram's code flow and reading its fake with the access token that server issued
/// (each fake asks the server, by token introspection, as a provider's API checks its own
/// tokens): its first sync, then an edit or a new object and a deletion at the source synced.
/// Notion's integrations authenticate to the token endpoint with HTTP Basic, the others in the
/// form, so there are two authorization servers.
#[tokio::test]
async fn every_hosted_provider_syncs_updates_and_deletes_with_oauth_credentials() {
    let server = Server::start_with(&[
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"),
    ]);
    let redirect = server.url("/connectors/oauth/callback");
    let authorization_server = |auth_method: &str| {
        OAuthServer::start(&OAuthServerOptions {
            client_id: CLIENT_ID.to_owned(),
            client_secret: CLIENT_SECRET.to_owned(),
            redirect_uri: redirect.clone(),
            auth_method: auth_method.to_owned(),
            access_ttl: 600,
        })
    };
    let (post, basic) = (
        authorization_server("client_secret_post"),
        authorization_server("client_secret_basic"),
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let (post_found, basic_found) = (
        endpoints(&browser, &post.issuer).await,
        endpoints(&browser, &basic.issuer).await,
    );
    let introspection =
        |found: &Value| found["introspection_endpoint"].as_str().unwrap().to_owned();
    let (post_check, basic_check) = (introspection(&post_found), introspection(&basic_found));

    // No token of the fakes' own is ever given to engram: only the server's.
    let slack = engram_fakes::slack::SlackFake::start("xoxb-unused-0001", 10).await;
    slack.accept_introspected(&post_check, CLIENT_ID, CLIENT_SECRET);
    let ana = slack.add_user("Ana", "ana@example.com");
    let general = slack.add_channel("general", false, true, &[&ana]);
    let rollback = slack.post(&general, &ana, "Roll back with kubectl rollout undo.", None);
    let staging = slack.post(&general, &ana, "Staging restarts on Sundays.", None);

    let linear =
        engram_fakes::linear::LinearFake::start("lin_api_unused", "lin_oauth_unused").await;
    linear.accept_introspected(&post_check, CLIENT_ID, CLIENT_SECRET);
    let team = linear.add_team("ENG", "Engineering");
    let vpn = linear.open_issue("ENG", "Rotate the VPN keys", "Before Friday.", "Ana Lima");
    let runners = linear.open_issue("ENG", "Upgrade the runners", "More memory.", "Bo Chen");

    let notion = engram_fakes::notion::NotionFake::start("ntn_unused_0001", 10).await;
    notion.accept_introspected(&basic_check, CLIENT_ID, CLIENT_SECRET);
    let (handbook, window, oncall) = crate::common::connectors::notion_handbook(&notion);

    let atlassian =
        engram_fakes::atlassian::AtlassianFake::start("bot@example.com", "atl_unused", 10).await;
    atlassian.accept_introspected(&post_check, CLIENT_ID, CLIENT_SECRET);
    let space = atlassian.add_space("ENG", "Engineering");
    let runbooks = atlassian.add_page(&space, None, "Runbooks", "<p>Start here.</p>");
    let deploys = atlassian.add_page(
        &space,
        Some(&runbooks),
        "Deploys",
        "<p>Deploys go out on Tuesdays.</p>",
    );
    atlassian.add_project("OPS", "Operations");
    let badge = atlassian.add_issue(
        "OPS",
        "Badge readers reject cards",
        "Floor nine.",
        "To Do",
        "High",
        "Bug",
        "Ana Lima",
        &[],
    );
    let coffee = atlassian.add_issue(
        "OPS",
        "Coffee machine leaks",
        "Kitchen two.",
        "To Do",
        "Low",
        "Bug",
        "Bo Chen",
        &[],
    );

    let google =
        engram_fakes::google::GoogleFake::start("ya29.unused", "ana@example.com", 10).await;
    google.accept_introspected(&post_check, CLIENT_ID, CLIENT_SECRET);
    let runbook = google.add_file(
        None,
        "runbook.txt",
        "text/plain",
        b"The pager rotates.",
        &[],
    );
    let lunch = google.add_file(None, "lunch.txt", "text/plain", b"Lunch at noon.", &[]);
    let label = google.add_label("Projects");
    let plan = google.deliver(
        &[&label],
        "Bo <bo@example.com>",
        "Launch plan",
        "The launch moves to March.",
        &[],
    );

    let site = atlassian.site_url();
    let cases = vec![
        OAuthCase {
            provider: "slack",
            credentials: json!({"api_url": slack.api_url()}),
            resource: format!("channel:{general}"),
            filters: json!({}),
            first: 2,
            change: Box::new(|| {
                slack.edit(
                    &general,
                    &rollback,
                    "Roll back with the deploy tool instead.",
                );
                slack.delete(&general, &staging);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "linear",
            credentials: json!({"api_url": linear.api_url()}),
            resource: team,
            filters: json!({}),
            first: 2,
            change: Box::new(|| {
                linear.edit(&vpn, |e| e.description = "Before Thursday now.".to_owned());
                linear.archive(&runners, true);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "notion",
            credentials: json!({"api_url": notion.api_url()}),
            resource: format!("page:{handbook}"),
            filters: json!({}),
            first: 2,
            change: Box::new(|| {
                notion.edit_block(&window, "The deploy window moved to Wednesday.");
                notion.archive_page(&oncall);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "confluence",
            credentials: json!({"site_url": site}),
            resource: format!("space:{space}"),
            filters: json!({}),
            first: 2,
            change: Box::new(|| {
                atlassian.edit_page(&runbooks, "<p>Start at the index.</p>");
                atlassian.trash_page(&deploys);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "jira",
            credentials: json!({"site_url": site}),
            // Deleted issues leave at a full pass: every pass is one here.
            resource: "project:OPS".to_owned(),
            filters: json!({"full_pass_every_hours": 0}),
            first: 2,
            change: Box::new(|| {
                atlassian.comment(&badge, "Bo Chen", "The firmware update fixed it.");
                atlassian.delete_issue(&coffee);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "google_drive",
            credentials: json!({"api_url": google.api_url()}),
            resource: "drive:root".to_owned(),
            filters: json!({}),
            first: 2,
            change: Box::new(|| {
                google.edit(&runbook, b"The pager rotates on Mondays now.");
                google.trash(&lunch);
            }),
            after: 1,
        },
        OAuthCase {
            provider: "gmail",
            credentials: json!({"api_url": google.api_url()}),
            resource: format!("label:{label}"),
            filters: json!({}),
            first: 1,
            change: Box::new(|| {
                google.deliver(
                    &[&label],
                    "Ana <ana@example.com>",
                    "Launch venue",
                    "The launch is in the atrium.",
                    &[],
                );
                google.delete_message(&plan);
            }),
            after: 1,
        },
    ];

    let key = server.key("conn-oauth-hosted", &[]);
    for case in cases {
        let provider = case.provider;
        let (issuer, found) = if provider == "notion" {
            (&basic.issuer, &basic_found)
        } else {
            (&post.issuer, &post_found)
        };
        let database = format!("oauth-{}", provider.replace('_', "-"));
        server.ready_database(&key, &database).await;
        let mut credentials = case.credentials.clone();
        credentials["oauth"] = json!({
            "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "authorization_url": found["authorization_endpoint"],
            "token_url": found["token_endpoint"],
            "issuer": issuer, "scope": "openid read"});
        let id = create(
            &server,
            &key,
            json!({"provider": provider, "database": database, "auth_type": "oauth2",
                   "credentials": credentials}),
        )
        .await;
        let location = start_and_consent(&server, &key, &id, &browser, issuer).await;
        let (status, done) = follow(&browser, &location).await;
        assert_eq!(status, 200, "{provider}: {done:#?}");
        assert!(
            revealed(&server, &key, &id).await["access_token"].is_string(),
            "{provider}"
        );

        configure(
            &server,
            &key,
            &id,
            json!([{ "resource_id": case.resource, "filters": case.filters }]),
        )
        .await;
        let status = after_run(&server, &key, &id, 0).await;
        assert_eq!(status["status"], "healthy", "{provider}: {status:#?}");
        assert_eq!(
            listed(&server, &key, &database).await.len(),
            case.first,
            "{provider}: the first sync"
        );

        // The change at the source, synced (a source that sees a deletion a pass late, as
        // Notion's search does, gets a second pass).
        (case.change)();
        let (mut changed, mut deleted, mut runs) = (0, 0, 1);
        while runs < 4 && (changed == 0 || deleted == 0) {
            let status = sync(&server, &key, &id, runs).await;
            assert_eq!(status["status"], "healthy", "{provider}: {status:#?}");
            let run = &status["runs"][0];
            changed += run["added"].as_u64().unwrap() + run["updated"].as_u64().unwrap();
            deleted += run["deleted"].as_u64().unwrap();
            runs += 1;
        }
        assert!(
            changed >= 1 && deleted >= 1,
            "{provider}: {changed} added or updated, {deleted} deleted in {runs} runs"
        );
        assert_eq!(
            listed(&server, &key, &database).await.len(),
            case.after,
            "{provider}: after the change"
        );
    }
    drop((slack, linear, notion, atlassian, google));
}
