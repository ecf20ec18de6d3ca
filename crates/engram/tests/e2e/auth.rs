//! Authentication, authorization, API keys, the rate limit and request ids, end to end: the real
//! binary, keys made with the real `engram keys` command, both API generations.

use crate::common;

use std::time::Duration;

use common::{eventually, Reply, Server};
use reqwest::header::AUTHORIZATION;
use reqwest::Method;
use serde_json::{json, Value};

/// `(prefix, secret)` of a `prefix.secret` token.
fn split(token: &str) -> (&str, &str) {
    token
        .split_once('.')
        .unwrap_or_else(|| panic!("token {token:?} is not prefix.secret"))
}

/// A request with full control over its `Authorization` headers (each value sent as its own
/// header line, in order). Current routes also get `API-Version: 2`, as the harness sends.
async fn raw(
    server: &Server,
    method: Method,
    path: &str,
    authorization: &[&str],
    body: Option<&Value>,
) -> Reply {
    let mut request = server.client.request(method, server.url(path));
    if is_current(path) {
        request = request.header("API-Version", "2");
    }
    for value in authorization {
        request = request.header(AUTHORIZATION, *value);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    common::read(request.send().await.expect("request")).await
}

/// A legacy error is the `{detail:{…}}` object and nothing of the envelope.
fn assert_legacy(reply: &Reply, status: u16, code: &str) {
    reply.assert_legacy_error(status, code);
    let object = reply
        .body
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {reply:#?}"));
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["detail"],
        "legacy errors carry only `detail`: {reply:#?}"
    );
    assert!(
        !reply.header("x-request-id").unwrap_or_default().is_empty(),
        "{reply:#?}"
    );
}

/// Which generation a path belongs to (the spec's route lists), for the error shape to assert.
fn is_current(path: &str) -> bool {
    let first = path.trim_start_matches('/').split(['/', '?']).next();
    first.is_some_and(|f| {
        [
            "databases",
            "context",
            "query",
            "webhooks",
            "feedback",
            "connectors",
            "connector-catalog",
            "connector-discovery",
            "credential-vault",
            "keys",
        ]
        .contains(&f)
    })
}

fn assert_error(reply: &Reply, path: &str, status: u16, code: &str) {
    if is_current(path) {
        reply.assert_current_error(status, code);
    } else {
        assert_legacy(reply, status, code);
    }
}

/// A 403 that gives nothing away: the right shape and code, and none of the database's data.
fn assert_forbidden(reply: &Reply, path: &str, owner_org: &str) {
    assert_error(reply, path, 403, "FORBIDDEN");
    assert_nothing_leaked(reply, owner_org);
}

/// Another organization's database, answered exactly as a missing one: 404
/// `DATABASE_NOT_FOUND`, and none of its data.
fn assert_hidden(reply: &Reply, path: &str, owner_org: &str) {
    assert_error(reply, path, 404, "DATABASE_NOT_FOUND");
    assert_nothing_leaked(reply, owner_org);
}

fn assert_nothing_leaked(reply: &Reply, owner_org: &str) {
    let text = reply.body.to_string();
    for leak in [
        owner_org,
        "\"infra\"",
        "row_count",
        "sub_tenant_ids",
        "\"collections\"",
        "org_id",
        "deletion_scheduled",
    ] {
        assert!(!text.contains(leak), "an error leaked {leak:?}: {reply:#?}");
    }
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v.as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// The databases a key sees, on the current route and on the legacy one (which must agree).
async fn visible_databases(server: &Server, key: &str) -> Vec<String> {
    let current = server.get("/databases", key).await;
    let data = current.current_ok(200);
    let databases = names(&data["databases"]);
    assert_eq!(names(&data["tenant_ids"]), databases, "{current:#?}");
    let legacy = server.get("/tenants/tenant_ids", key).await;
    assert_eq!(legacy.status, 200, "{legacy:#?}");
    assert_eq!(names(&legacy.body["tenant_ids"]), databases, "{legacy:#?}");
    databases
}

fn create_key(server: &Server, args: &[&str]) -> String {
    let mut all = vec!["keys", "create"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = server.cli(&all);
    assert!(ok, "keys create {args:?} failed: {stderr}");
    stdout
        .lines()
        .last()
        .expect("a last line")
        .trim()
        .to_owned()
}

/// Every documented route of both generations that takes a key, from the server's own
/// OpenAPI document: a route added later is covered without touching this test. Path
/// parameters name `db1`, which exists.
async fn route_matrix(server: &Server) -> Vec<(Method, String)> {
    let mut routes = Vec::new();
    for (method, path, operation) in documented_operations(server).await {
        let open = operation["security"].as_array().is_some_and(|s| {
            s.iter()
                .any(|r| r.as_object().is_some_and(|o| o.is_empty()))
        });
        if open || path == "/openapi.json" {
            continue;
        }
        let concrete: String = path
            .split('/')
            .map(|part| if part.starts_with('{') { "db1" } else { part })
            .collect::<Vec<_>>()
            .join("/");
        routes.push((method, concrete));
    }
    assert!(
        routes.len() >= 35,
        "the document lists every route: {routes:?}"
    );
    routes
}

/// `(method, path template, operation)` of every operation in the server's OpenAPI document.
pub(crate) async fn documented_operations(server: &Server) -> Vec<(Method, String, Value)> {
    let doc = server
        .client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .expect("openapi.json")
        .json::<Value>()
        .await
        .expect("a JSON document");
    let mut found = Vec::new();
    for (path, operations) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in operations.as_object().expect("operations") {
            if let Ok(method) = method.to_uppercase().parse::<Method>() {
                found.push((method, path.clone(), operation.clone()));
            }
        }
    }
    found
}

#[tokio::test]
async fn malformed_missing_and_wrong_credentials_get_401_on_both_generations() {
    let server = Server::start();
    let key = server.key("org-auth", &[]);
    server.ready_database(&key, "db1").await;
    let (prefix, secret) = split(&key);
    let good = format!("Bearer {key}");

    let mut wrong_secret = secret.to_owned();
    let last = wrong_secret.pop().expect("a secret");
    wrong_secret.push(if last == '0' { '1' } else { '0' });
    let bad_headers: Vec<(&str, Vec<String>)> = vec![
        ("no Authorization header", vec![]),
        (
            "two identical Authorization headers",
            vec![good.clone(), good.clone()],
        ),
        (
            "two Authorization headers, one bad",
            vec![good.clone(), "Bearer nope.nope".into()],
        ),
        ("two spaces after Bearer", vec![format!("Bearer  {key}")]),
        ("a tab after Bearer", vec![format!("Bearer\t{key}")]),
        ("Basic scheme", vec!["Basic dXNlcjpwYXNzd29yZA==".into()]),
        ("Basic scheme with the key", vec![format!("Basic {key}")]),
        ("Bearer with no token", vec!["Bearer".into()]),
        ("Bearer and a space with no token", vec!["Bearer ".into()]),
        ("the key with no scheme", vec![key.clone()]),
        (
            "token without a dot",
            vec![format!("Bearer {prefix}{secret}")],
        ),
        ("token with two dots", vec![format!("Bearer {key}.x")]),
        (
            "token followed by more",
            vec![format!("Bearer {key} extra")],
        ),
        (
            "unknown prefix",
            vec![format!("Bearer egk_00000000deadbeef.{secret}")],
        ),
        (
            "right prefix, wrong secret",
            vec![format!("Bearer {prefix}.{wrong_secret}")],
        ),
        (
            "right prefix, empty secret",
            vec![format!("Bearer {prefix}.")],
        ),
        ("right prefix, no secret", vec![format!("Bearer {prefix}")]),
    ];

    for (method, path) in route_matrix(&server).await {
        let path = path.as_str();
        for (what, headers) in &bad_headers {
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let reply = raw(&server, method.clone(), path, &headers, None).await;
            assert_eq!(reply.status, 401, "{what} on {method} {path}: {reply:#?}");
            assert_error(&reply, path, 401, "UNAUTHORIZED");
        }
    }

    // The harness's own no-key call agrees.
    let none = server.call(Method::GET, "/databases", None, None).await;
    none.assert_current_error(401, "UNAUTHORIZED");
    let none = server
        .call(Method::GET, "/tenants/tenant_ids", None, None)
        .await;
    assert_legacy(&none, 401, "UNAUTHORIZED");

    // The well-formed header works, and none of the refused calls changed anything.
    let ok = raw(&server, Method::GET, "/databases", &[&good], None).await;
    assert_eq!(names(&ok.current_ok(200)["databases"]), ["db1"]);
    assert_eq!(
        visible_databases(&server, &key).await,
        ["db1"],
        "refused creates and deletes did nothing"
    );
    let status = server.get("/databases/status?database=db1", &key).await;
    assert_eq!(status.current_ok(200)["database"], "db1");
    let schema = status.body["data"]["database_metadata_schema"].to_string();
    assert!(
        !schema.contains("\"f1\""),
        "a refused PATCH added a field: {status:#?}"
    );
}

#[tokio::test]
async fn a_key_revoked_while_the_server_runs_stops_working_at_once() {
    let server = Server::start();
    let key = server.key("org-rev", &[]);
    let other = server.key("org-rev", &[]);
    server.ready_database(&key, "db1").await;
    let paths = [
        "/databases",
        "/databases/status?database=db1",
        "/tenants/tenant_ids",
        "/tenants/infra/status?tenant_id=db1",
    ];
    for path in paths {
        let reply = server.get(path, &key).await;
        assert_eq!(reply.status, 200, "before revocation {path}: {reply:#?}");
    }

    let (prefix, _) = split(&key);
    let (ok, stdout, stderr) = server.cli(&["keys", "revoke", prefix]);
    assert!(ok, "keys revoke failed: {stdout} {stderr}");

    // No restart, no waiting: the very next request is refused.
    for path in paths {
        let reply = server.get(path, &key).await;
        assert_error(&reply, path, 401, "UNAUTHORIZED");
    }
    let created = server
        .post("/databases", &key, json!({"database": "after-revoke"}))
        .await;
    created.assert_current_error(401, "UNAUTHORIZED");

    // Only that key: another key of the organization still works and sees db1 unchanged.
    assert_eq!(visible_databases(&server, &other).await, ["db1"]);

    // The listing says so, and revoking again is harmless; the key stays refused.
    let (ok, listing, stderr) = server.cli(&["keys", "list"]);
    assert!(ok, "{stderr}");
    let line = listing
        .lines()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("{prefix} not listed: {listing}"));
    assert!(line.contains("revoked"), "{line}");
    let reply = server.get("/databases", &key).await;
    reply.assert_current_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn an_expired_key_gets_401_on_both_generations() {
    let server = Server::start();
    let long_lived = create_key(&server, &["--org", "org-exp", "--expires-in", "3600"]);
    let short_lived = create_key(&server, &["--org", "org-exp", "--expires-in", "1"]);
    server.ready_database(&long_lived, "db1").await;

    let key = short_lived.as_str();
    let s = &server;
    let expired = eventually(
        Duration::from_secs(20),
        "the 1-second key to expire",
        || async move {
            let reply = s.get("/databases", key).await;
            (reply.status != 200).then_some(reply)
        },
    )
    .await;
    expired.assert_current_error(401, "UNAUTHORIZED");
    for path in [
        "/databases/status?database=db1",
        "/tenants/tenant_ids",
        "/tenants/infra/status?tenant_id=db1",
    ] {
        let reply = server.get(path, key).await;
        assert_error(&reply, path, 401, "UNAUTHORIZED");
    }
    let created = server
        .post("/tenants/create", key, json!({"tenant_id": "late"}))
        .await;
    assert_legacy(&created, 401, "UNAUTHORIZED");

    // A key with a future expiry is unaffected.
    assert_eq!(visible_databases(&server, &long_lived).await, ["db1"]);
}

#[tokio::test]
async fn a_key_restricted_to_one_database_gets_403_on_any_other() {
    let server = Server::start();
    let org = "org-restrict-4711";
    let admin = server.key(org, &[]);
    let only_a = server.key(org, &["a"]);
    server.ready_database(&admin, "a").await;
    server.ready_database(&admin, "b").await;

    // Its own database works on both generations.
    server
        .get("/databases/status?database=a", &only_a)
        .await
        .current_ok(200);
    server
        .get("/databases/stats?database=a", &only_a)
        .await
        .current_ok(200);
    server
        .get("/databases/collections?database=a", &only_a)
        .await
        .current_ok(200);
    let legacy = server
        .get("/tenants/infra/status?tenant_id=a", &only_a)
        .await;
    assert_eq!(legacy.status, 200, "{legacy:#?}");

    // Every route on `b` (which exists) and on `c` (which does not) is 403, never 404/409.
    for db in ["b", "c"] {
        let reads = [
            format!("/databases/status?database={db}"),
            format!("/databases/stats?database={db}"),
            format!("/databases/collections?database={db}"),
            format!("/tenants/infra/status?tenant_id={db}"),
            format!("/tenants/monitor?tenant_id={db}"),
            format!("/tenants/sub_tenant_ids?tenant_id={db}"),
        ];
        for path in &reads {
            let reply = server.get(path, &only_a).await;
            assert_forbidden(&reply, path, org);
        }
        for path in [
            format!("/databases?database={db}"),
            format!("/tenants/delete?tenant_id={db}"),
        ] {
            let reply = server.delete(&path, &only_a).await;
            assert_forbidden(&reply, &path, org);
        }
        let reply = server
            .post("/databases", &only_a, json!({"database": db}))
            .await;
        assert_forbidden(&reply, "/databases", org);
        let reply = server
            .post("/tenants/create", &only_a, json!({"tenant_id": db}))
            .await;
        assert_forbidden(&reply, "/tenants/create", org);
        let path = format!("/databases/{db}/metadata-schema");
        let reply = server
            .call(
                Method::PATCH,
                &path,
                Some(&only_a),
                Some(json!({"add_fields": [{"name": "f1"}]})),
            )
            .await;
        assert_forbidden(&reply, &path, org);
    }

    // Nothing happened: `b` is still there and unchanged, `c` was never created.
    assert_eq!(visible_databases(&server, &admin).await, ["a", "b"]);
    let b = server.get("/databases/status?database=b", &admin).await;
    assert!(
        !b.current_ok(200)["database_metadata_schema"]
            .to_string()
            .contains("\"f1\""),
        "{b:#?}"
    );

    // And it lists only its own databases.
    assert_eq!(visible_databases(&server, &only_a).await, ["a"]);
}

#[tokio::test]
async fn another_organization_gets_the_404_of_a_missing_database_and_never_sees_it() {
    let server = Server::start();
    let org_a = "org-alpha-9137";
    let key_a = server.key(org_a, &[]);
    let key_b = server.key("org-beta", &[]);
    server.ready_database(&key_a, "alpha-db").await;

    // Org B sees none of org A's databases.
    assert_eq!(
        visible_databases(&server, &key_b).await,
        Vec::<String>::new()
    );

    let reads = [
        "/databases/status?database=alpha-db",
        "/databases/stats?database=alpha-db",
        "/databases/collections?database=alpha-db",
        "/tenants/infra/status?tenant_id=alpha-db",
        "/tenants/monitor?tenant_id=alpha-db",
        "/tenants/sub_tenant_ids?tenant_id=alpha-db",
    ];
    for path in reads {
        let reply = server.get(path, &key_b).await;
        assert_hidden(&reply, path, org_a);
    }
    // Even a key of org B restricted to that very name gets nothing.
    let key_b_named = server.key("org-beta", &["alpha-db"]);
    for path in reads {
        let reply = server.get(path, &key_b_named).await;
        assert_hidden(&reply, path, org_a);
    }
    for path in [
        "/databases?database=alpha-db",
        "/tenants/delete?tenant_id=alpha-db",
    ] {
        let reply = server.delete(path, &key_b).await;
        assert_hidden(&reply, path, org_a);
    }
    let path = "/databases/alpha-db/metadata-schema";
    let reply = server
        .call(
            Method::PATCH,
            path,
            Some(&key_b),
            Some(json!({"add_fields": [{"name": "f1"}]})),
        )
        .await;
    assert_hidden(&reply, path, org_a);

    // Org A's database is untouched and still org A's.
    let status = server
        .get("/databases/status?database=alpha-db", &key_a)
        .await;
    let data = status.current_ok(200);
    assert_eq!(data["org_id"], org_a);
    assert!(
        !data["database_metadata_schema"]
            .to_string()
            .contains("\"f1\""),
        "{status:#?}"
    );
    assert_eq!(visible_databases(&server, &key_a).await, ["alpha-db"]);
    assert_eq!(
        visible_databases(&server, &key_b).await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn keys_list_shows_prefixes_never_secrets() {
    let server = Server::start();
    let key = create_key(
        &server,
        &["--org", "org-list", "--name", "ci-key", "--database", "db1"],
    );
    let other = server.key("org-other", &[]);
    let (prefix, secret) = split(&key);
    let (other_prefix, other_secret) = split(&other);

    let (ok, listing, stderr) = server.cli(&["keys", "list"]);
    assert!(ok, "keys list failed: {stderr}");
    assert!(
        listing.contains(prefix) && listing.contains(other_prefix),
        "{listing}"
    );
    for hidden in [secret, other_secret] {
        assert!(
            !listing.contains(hidden),
            "keys list printed a secret: {listing}"
        );
        assert!(
            !stderr.contains(hidden),
            "keys list printed a secret on stderr: {stderr}"
        );
    }
    let line = listing
        .lines()
        .find(|l| l.contains(prefix))
        .expect("the key's line");
    assert!(
        line.contains("org-list")
            && line.contains("ci-key")
            && line.contains("db1")
            && line.contains("active"),
        "{line}"
    );

    let (ok, listing, stderr) = server.cli(&["keys", "list", "--org", "org-list"]);
    assert!(ok, "keys list --org failed: {stderr}");
    assert!(listing.contains(prefix), "{listing}");
    assert!(
        !listing.contains(other_prefix),
        "--org listed another organization's key: {listing}"
    );
    assert!(
        !listing.contains(secret) && !listing.contains(other_secret),
        "{listing}"
    );
}

fn hex_decode(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| {
            u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .unwrap_or_else(|_| panic!("{hex:?} is not hex"))
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn the_store_never_holds_a_secret() {
    let server = Server::start();
    let key = server.key("org-store", &[]);
    let restricted = server.key("org-store", &["db1"]);
    // Use the keys through the server too, so nothing on the request path writes them down.
    server.ready_database(&key, "db1").await;
    server
        .get("/databases/status?database=db1", &restricted)
        .await
        .current_ok(200);

    let files = server.stored_bytes();
    let names: Vec<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
    let store = if server.storage_url.is_some() {
        "pg_dump"
    } else {
        "engram.sqlite3"
    };
    assert!(
        names.iter().any(|n| n.ends_with(store)),
        "no {store} in {names:?}"
    );
    let all: Vec<u8> = files
        .iter()
        .flat_map(|(_, bytes)| bytes.iter().copied())
        .collect();
    for token in [&key, &restricted] {
        let (prefix, secret) = split(token);
        // We are reading the right files: the public prefix is stored.
        assert!(
            contains(&all, prefix.as_bytes()),
            "prefix {prefix} not found in {names:?}"
        );
        for (name, bytes) in &files {
            assert!(
                !contains(bytes, secret.as_bytes()),
                "{name} holds the secret of {prefix}"
            );
            assert!(
                !contains(bytes, token.as_bytes()),
                "{name} holds the token of {prefix}"
            );
            assert!(
                !contains(bytes, &hex_decode(secret)),
                "{name} holds the raw secret bytes of {prefix}"
            );
        }
    }
}

#[tokio::test]
async fn revoking_an_unknown_prefix_fails() {
    let server = Server::start();
    let key = server.key("org-unknown", &[]);
    let (ok, stdout, _) = server.cli(&["keys", "revoke", "egk_0000000000000000"]);
    assert!(!ok, "revoking an unknown prefix succeeded: {stdout}");
    let (ok, stdout, _) = server.cli(&["keys", "revoke", "no-such-prefix"]);
    assert!(!ok, "revoking an unknown prefix succeeded: {stdout}");
    // It revoked nothing else.
    server.get("/databases", &key).await.current_ok(200);
}

#[tokio::test]
async fn keys_and_their_limits_survive_a_restart() {
    let mut server = Server::start();
    let key = server.key("org-restart", &[]);
    let restricted = server.key("org-restart", &["db1"]);
    let revoked = server.key("org-restart", &[]);
    server.ready_database(&key, "db1").await;
    server.ready_database(&key, "db2").await;
    let (ok, _, stderr) = server.cli(&["keys", "revoke", split(&revoked).0]);
    assert!(ok, "{stderr}");

    server.restart();

    assert_eq!(visible_databases(&server, &key).await, ["db1", "db2"]);
    assert_eq!(visible_databases(&server, &restricted).await, ["db1"]);
    let path = "/databases/status?database=db2";
    assert_forbidden(&server.get(path, &restricted).await, path, "org-restart");
    server
        .get("/databases", &revoked)
        .await
        .assert_current_error(401, "UNAUTHORIZED");
    assert_legacy(
        &server.get("/tenants/tenant_ids", &revoked).await,
        401,
        "UNAUTHORIZED",
    );
}

fn assert_retry_after(reply: &Reply) {
    let value = reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("429 without Retry-After: {reply:#?}"));
    let secs: u64 = value
        .parse()
        .unwrap_or_else(|_| panic!("Retry-After {value:?} is not integer seconds"));
    assert!((1..=60).contains(&secs), "Retry-After {secs}");
}

/// `GET path` with the key and a client-supplied `X-Request-ID`.
async fn with_request_id(server: &Server, path: &str, key: &str, request_id: &str) -> Reply {
    let request = server
        .client
        .get(server.url(path))
        .header("API-Version", "2")
        .header(AUTHORIZATION, format!("Bearer {key}"))
        .header("X-Request-ID", request_id);
    common::read(request.send().await.expect("request")).await
}

#[tokio::test]
async fn past_the_burst_a_key_gets_429_with_retry_after() {
    let server = Server::start_with(&[
        ("ENGRAM_RATE_LIMIT__ENABLED", "true"),
        ("ENGRAM_RATE_LIMIT__REQUESTS_PER_SECOND", "1"),
        ("ENGRAM_RATE_LIMIT__BURST", "3"),
    ]);
    let current_key = server.key("org-rate", &[]);
    let legacy_key = server.key("org-rate", &[]);
    let fresh_key = server.key("org-rate", &[]);

    for path in ["/databases", "/tenants/tenant_ids"] {
        let key = if is_current(path) {
            &current_key
        } else {
            &legacy_key
        };
        let mut statuses = Vec::new();
        let mut replies = Vec::new();
        for i in 0..4 {
            // Each with its own client-supplied request id, which the 429 echoes too.
            let request_id = format!("burst-{i}");
            let reply = with_request_id(&server, path, key, &request_id).await;
            assert_eq!(
                reply.header("x-request-id"),
                Some(request_id.as_str()),
                "{reply:#?}"
            );
            statuses.push(reply.status.as_u16());
            replies.push(reply);
        }
        assert_eq!(statuses, [200, 200, 200, 429], "{path}: {replies:#?}");
        let limited = replies.last().expect("four replies");
        assert_error(limited, path, 429, "RATE_LIMITED");
        assert_retry_after(limited);
        if is_current(path) {
            assert_eq!(
                limited.body["meta"]["request_id"], "burst-3",
                "{limited:#?}"
            );
        }
    }

    // Another key has its own bucket.
    let other = server.get("/databases", &fresh_key).await;
    other.current_ok(200);
    let other = server.get("/tenants/tenant_ids", &fresh_key).await;
    assert_eq!(other.status, 200, "{other:#?}");

    // A bad credential is still 401, not 429, and does not need a token of the bucket.
    let (prefix, _) = split(&current_key);
    let bad = raw(
        &server,
        Method::GET,
        "/databases",
        &[&format!("Bearer {prefix}.wrong")],
        None,
    )
    .await;
    bad.assert_current_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn the_default_rate_limit_allows_200_quick_requests() {
    let server = Server::start();
    let key = server.key("org-default-rate", &[]);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let client = server.client.clone();
        let path = if i % 2 == 0 {
            "/databases"
        } else {
            "/tenants/tenant_ids"
        };
        let url = server.url(path);
        let auth = format!("Bearer {key}");
        tasks.spawn(async move {
            let reply = client
                .get(url)
                .header("API-Version", "2")
                .header(AUTHORIZATION, auth)
                .send()
                .await
                .expect("request");
            (path, reply.status().as_u16())
        });
    }
    let mut refused = Vec::new();
    let mut done = 0;
    while let Some(result) = tasks.join_next().await {
        let (path, status) = result.expect("task");
        done += 1;
        if status != 200 {
            refused.push((path, status));
        }
    }
    assert_eq!(done, 200);
    assert!(
        refused.is_empty(),
        "refused under the default limit: {refused:?}"
    );
}

fn request_id(reply: &Reply) -> &str {
    let id = reply
        .header("x-request-id")
        .unwrap_or_else(|| panic!("no x-request-id: {reply:#?}"));
    assert!(!id.is_empty(), "{reply:#?}");
    id
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let server = Server::start();
    let key = server.key("org-rid", &[]);
    let only_a = server.key("org-rid", &["a"]);
    server.ready_database(&key, "a").await;

    // Successes.
    let health = server.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, 200);
    request_id(&health);
    let listed = server.get("/databases", &key).await;
    listed.current_ok(200); // checks header == meta.request_id
    let legacy = server.get("/tenants/tenant_ids", &key).await;
    assert_eq!(legacy.status, 200);
    request_id(&legacy);
    let second = server.get("/databases", &key).await;
    second.current_ok(200);
    assert_ne!(
        request_id(&listed),
        request_id(&second),
        "each request gets its own id"
    );

    // Errors of every kind, both generations (the helpers check the header; on the current
    // generation they also check it equals meta.request_id).
    server
        .call(Method::GET, "/databases", None, None)
        .await
        .assert_current_error(401, "UNAUTHORIZED");
    assert_legacy(
        &server
            .call(Method::GET, "/tenants/tenant_ids", None, None)
            .await,
        401,
        "UNAUTHORIZED",
    );
    server
        .get("/databases/status?database=b", &only_a)
        .await
        .assert_current_error(403, "FORBIDDEN");
    assert_legacy(
        &server
            .get("/tenants/infra/status?tenant_id=b", &only_a)
            .await,
        403,
        "FORBIDDEN",
    );
    server
        .get("/databases/status?database=nope", &key)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    assert_legacy(
        &server
            .get("/tenants/infra/status?tenant_id=nope", &key)
            .await,
        404,
        "DATABASE_NOT_FOUND",
    );
    server
        .post("/databases", &key, json!({"database": "a"}))
        .await
        .assert_current_error(409, "DATABASE_ALREADY_EXISTS");
    assert_legacy(
        &server
            .post("/tenants/create", &key, json!({"tenant_id": "a"}))
            .await,
        409,
        "INVALID_INPUT",
    );
    server
        .get("/databases/status?database=bad%20name", &key)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    assert_legacy(
        &server
            .get("/tenants/infra/status?tenant_id=bad%20name", &key)
            .await,
        400,
        "INVALID_TENANT_ID",
    );
    server
        .post("/databases", &key, json!({"database": 5}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");

    // Errors axum itself produces: unknown route, wrong method.
    let unknown = server.get("/databases/no-such/route", &key).await;
    assert_eq!(unknown.status, 404, "{unknown:#?}");
    request_id(&unknown);
    let wrong_method = server
        .call(Method::PUT, "/databases", Some(&key), None)
        .await;
    assert_eq!(wrong_method.status, 405, "{wrong_method:#?}");
    request_id(&wrong_method);
    let legacy_unknown = server.get("/tenants/no-such-route", &key).await;
    assert_eq!(legacy_unknown.status, 404, "{legacy_unknown:#?}");
    request_id(&legacy_unknown);

    // A malformed JSON body.
    let malformed = server
        .client
        .post(server.url("/databases"))
        .header("API-Version", "2")
        .header(AUTHORIZATION, format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("request");
    common::read(malformed)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
}

#[tokio::test]
async fn a_client_request_id_is_echoed() {
    let server = Server::start();
    let key = server.key("org-echo", &[]);
    server.ready_database(&key, "a").await;

    let send = |path: &str, method: Method, id: &str, auth: Option<&str>| {
        let mut request = server
            .client
            .request(method, server.url(path))
            .header("x-request-id", id);
        if is_current(path) {
            request = request.header("API-Version", "2");
        }
        if let Some(key) = auth {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        async move { common::read(request.send().await.expect("request")).await }
    };

    // Success, current: header and meta.request_id both carry the client's id.
    let reply = send("/databases", Method::GET, "trace-0001-abc", Some(&key)).await;
    reply.current_ok(200);
    assert_eq!(reply.header("x-request-id"), Some("trace-0001-abc"));
    assert_eq!(reply.body["meta"]["request_id"], "trace-0001-abc");

    let reply = send(
        "/databases/status?database=a",
        Method::GET,
        "7d1f6c2e-9b1a-4f7e-8a33-0c2b5e9d1f00",
        Some(&key),
    )
    .await;
    reply.current_ok(200);
    assert_eq!(
        reply.body["meta"]["request_id"],
        "7d1f6c2e-9b1a-4f7e-8a33-0c2b5e9d1f00"
    );
    assert_eq!(
        reply.header("x-request-id"),
        Some("7d1f6c2e-9b1a-4f7e-8a33-0c2b5e9d1f00")
    );

    // Errors, current: 401, 404.
    let reply = send("/databases", Method::GET, "trace-401", None).await;
    reply.assert_current_error(401, "UNAUTHORIZED");
    assert_eq!(reply.body["meta"]["request_id"], "trace-401");
    let reply = send(
        "/databases/status?database=nope",
        Method::GET,
        "trace-404",
        Some(&key),
    )
    .await;
    reply.assert_current_error(404, "DATABASE_NOT_FOUND");
    assert_eq!(reply.body["meta"]["request_id"], "trace-404");

    // Legacy: the header is echoed on success and error.
    let reply = send(
        "/tenants/tenant_ids",
        Method::GET,
        "legacy-trace-1",
        Some(&key),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    assert_eq!(reply.header("x-request-id"), Some("legacy-trace-1"));
    let reply = send("/tenants/tenant_ids", Method::GET, "legacy-trace-2", None).await;
    assert_legacy(&reply, 401, "UNAUTHORIZED");
    assert_eq!(reply.header("x-request-id"), Some("legacy-trace-2"));
}

/// What a scope matrix request carries: nothing, a JSON body, or a multipart form.
enum Sample {
    Nothing,
    Body(Value),
    Form(fn() -> reqwest::multipart::Form),
}

/// A request to a route needing `write` or `admin` that gets past the route's own parsing, so
/// the answer is the operation's: a key lacking the scope must be refused by the operation
/// itself, not by a malformed request. `None` for a route this table does not know, which
/// fails the matrix: a route added later gets a sample here. Read routes need none (every key
/// holds `read`).
fn sample(method: &Method, template: &str) -> Option<(&'static str, Sample)> {
    use Sample::{Body, Form, Nothing};
    let ingest_form = || {
        reqwest::multipart::Form::new()
            .text("type", "knowledge")
            .text("database", "db1")
            .text(
                "app_knowledge",
                json!([common::app("by-scope", "t", "Scoped.")]).to_string(),
            )
    };
    let upload_form = || {
        reqwest::multipart::Form::new()
            .text("tenant_id", "db1")
            .part(
                "files",
                reqwest::multipart::Part::bytes(b"Scoped upload.".to_vec())
                    .file_name("scoped.txt")
                    .mime_str("text/plain")
                    .expect("media type"),
            )
    };
    let m = method.as_str();
    Some(match (m, template) {
        ("POST", "/connector-discovery") => {
            ("", Body(json!({"provider": "rss", "credentials": {}})))
        }
        ("POST", "/connectors") => ("", Body(json!({"provider": "folder", "database": "db1"}))),
        ("PATCH", "/connectors/{id}") => ("", Body(json!({"name": "renamed"}))),
        ("POST", "/connectors/{id}/configure" | "/connectors/{id}/resources") => {
            ("", Body(json!({"resources": [{"resource_id": "r1"}]})))
        }
        ("PATCH", "/connectors/{id}/resources/{resource_id}") => {
            ("", Body(json!({"enabled": false})))
        }
        ("PATCH", "/credential-vault/{id}") => ("", Body(json!({"credentials": {"token": "t"}}))),
        ("POST", "/credential-vault/{id}/reveal") => ("", Body(json!({"field": "token"}))),
        ("POST", "/databases") => ("", Body(json!({"database": "by-scope"}))),
        ("DELETE", "/databases") => ("?database=db1", Nothing),
        ("PATCH", "/databases/{database}") => ("", Body(json!({"new_database": "renamed"}))),
        ("PATCH", "/databases/{database}/instructions") => {
            ("", Body(json!({"instructions": "Prefer recent sources."})))
        }
        ("PATCH", "/databases/{database}/metadata-schema") => {
            ("", Body(json!({"add_fields": [{"name": "f1"}]})))
        }
        ("DELETE", "/databases/collections") => ("?database=db1&collection=c1", Nothing),
        ("POST", "/keys") => ("", Body(json!({"name": "by-scope"}))),
        ("POST", "/tenants/create") => ("", Body(json!({"tenant_id": "by-scope"}))),
        ("DELETE", "/tenants/delete") => ("?tenant_id=db1", Nothing),
        ("POST", "/webhooks/indexing") => {
            ("", Body(json!({"url": "https://hooks.example.com/engram"})))
        }
        ("POST", "/webhooks/indexing/signing-secret") => ("", Body(json!({}))),
        ("DELETE", "/context") => ("", Body(json!({"database": "db1", "ids": ["x"]}))),
        ("POST", "/context/ingest") => ("", Form(ingest_form)),
        ("PATCH", "/context/{id}/metadata") => (
            "",
            Body(json!({"database": "db1", "metadata": {"team": "a"}})),
        ),
        ("DELETE", "/embeddings/delete_raw_embeddings") => ("?tenant_id=db1&source_id=s", Nothing),
        ("POST", "/embeddings/insert_raw_embeddings") => (
            "",
            Body(json!({"tenant_id": "db1", "embeddings": [
                {"source_id": "s", "embeddings": [{"chunk_id": "c", "embedding": [0.1, 0.2]}]}]})),
        ),
        ("POST", "/feedback") => ("", Body(json!({"request_id": "req-1", "feedback": "good"}))),
        ("POST", "/ingestion/upload_knowledge") => ("", Form(upload_form)),
        ("POST", "/knowledge/delete_knowledge") => {
            ("", Body(json!({"tenant_id": "db1", "ids": ["x"]})))
        }
        ("POST", "/memories/add_memory") => (
            "",
            Body(json!({"tenant_id": "db1", "sub_tenant_id": "u1",
                        "memories": [{"text": "Prefers tea."}]})),
        ),
        ("DELETE", "/memories/delete_memory") => ("?tenant_id=db1&memory_id=m1", Nothing),
        // Routes whose path names everything they need.
        (
            "GET" | "DELETE" | "POST",
            "/connectors"
            | "/connectors/{id}"
            | "/connectors/{id}/discover"
            | "/connectors/{id}/pause"
            | "/connectors/{id}/resume"
            | "/connectors/{id}/resources"
            | "/connectors/{id}/resources/{resource_id}"
            | "/connectors/{id}/status"
            | "/connectors/{id}/sync"
            | "/connectors/{id}/oauth/start"
            | "/connectors/{id}/credentials"
            | "/credential-vault"
            | "/keys"
            | "/keys/{prefix}"
            | "/webhooks/indexing"
            | "/webhooks/indexing/deliveries"
            | "/webhooks/indexing/deliveries/{delivery_id}"
            | "/webhooks/indexing/deliveries/{delivery_id}/retry"
            | "/webhooks/indexing/signing-secret"
            | "/webhooks/indexing/test",
        )
        | ("PATCH", "/connectors/{id}/credentials") => ("", Nothing),
        _ => return None,
    })
}

/// Every documented route with the scope its document says it needs (`security`).
async fn scoped_routes(server: &Server) -> Vec<(Method, String, String)> {
    let mut routes = Vec::new();
    for (method, path, operation) in documented_operations(server).await {
        let Some(scopes) = operation["security"][0]["bearer"].as_array() else {
            continue; // open: /healthz, /openapi.json, signed downloads
        };
        assert_eq!(scopes.len(), 1, "{method} {path} names one scope");
        let scope = scopes[0].as_str().expect("a scope name").to_owned();
        assert!(
            ["read", "write", "admin"].contains(&scope.as_str()),
            "{method} {path}: {scope}"
        );
        routes.push((method, path, scope));
    }
    routes
}

async fn send_sample(
    server: &Server,
    key: &str,
    method: &Method,
    path: &str,
    sample: &Sample,
) -> Reply {
    let mut request = server
        .client
        .request(method.clone(), server.url(path))
        .header(AUTHORIZATION, format!("Bearer {key}"));
    if is_current(path) {
        request = request.header("API-Version", "2");
    }
    request = match sample {
        Sample::Nothing => request,
        Sample::Body(body) => request.json(body),
        Sample::Form(form) => request.multipart(form()),
    };
    common::read(request.send().await.expect("request")).await
}

#[tokio::test]
async fn every_route_refuses_a_key_without_its_scope_and_serves_one_with_it() {
    let server = Server::start();
    let org = "org-scopes-5150";
    let admin = server.key(org, &[]);
    server.ready_database(&admin, "db1").await;
    let read = create_key(&server, &["--org", org, "--scope", "read"]);
    let write = create_key(&server, &["--org", org, "--scope", "write"]);
    let explicit_admin = create_key(&server, &["--org", org, "--scope", "admin"]);
    let keys = [
        ("read", &read),
        ("write", &write),
        ("admin", &explicit_admin),
    ];
    let rank = |scope: &str| ["read", "write", "admin"].iter().position(|s| *s == scope);

    let routes = scoped_routes(&server).await;
    assert!(routes.len() >= 70, "{routes:?}");
    for scope in ["read", "write", "admin"] {
        assert!(
            routes.iter().any(|(_, _, s)| s == scope),
            "no route needs {scope}"
        );
    }
    let mut wrong = Vec::new();
    // First every refusal, so nothing is changed by them; then every allowed call.
    for pass in ["refused", "allowed"] {
        for (method, template, needs) in &routes {
            let (query, body) = if needs == "read" {
                ("", Sample::Nothing)
            } else {
                sample(method, template)
                    .unwrap_or_else(|| panic!("no sample request for {method} {template}"))
            };
            let concrete: String = template
                .split('/')
                .map(|part| if part.starts_with('{') { "db1" } else { part })
                .collect::<Vec<_>>()
                .join("/");
            let path = format!("{concrete}{query}");
            for (held, key) in keys {
                let enough = rank(held) >= rank(needs);
                if enough != (pass == "allowed") {
                    continue;
                }
                let reply = send_sample(&server, key, method, &path, &body).await;
                let status = reply.status.as_u16();
                if !enough {
                    let text = reply.body.to_string();
                    // Refreshing a token is refused to every key, whatever it holds.
                    let always = template == "/connectors/{id}/credentials";
                    let refused = status == 403
                        && text.contains("FORBIDDEN")
                        && (always || text.contains(&format!("needs `{needs}`")));
                    if !refused {
                        wrong.push(format!(
                            "{held} key on {method} {path} (needs {needs}): {status} {text}"
                        ));
                    } else {
                        assert_error(&reply, &path, 403, "FORBIDDEN");
                    }
                } else if status == 401
                    || (status == 403 && template != "/connectors/{id}/credentials")
                    || status >= 500
                {
                    wrong.push(format!(
                        "{held} key on {method} {path} (needs {needs}): {status} {}",
                        reply.body
                    ));
                }
            }
        }
        if pass == "refused" {
            // None of the refused calls changed anything.
            assert_eq!(visible_databases(&server, &admin).await, ["db1"]);
            let items = server
                .post("/context/list", &admin, json!({"database": "db1"}))
                .await;
            assert_eq!(
                items.current_ok(200)["sources"].as_array().map(Vec::len),
                Some(0),
                "{items:#?}"
            );
            let hook = server.get("/webhooks/indexing", &admin).await;
            assert!(
                !hook.body.to_string().contains("hooks.example.com"),
                "{hook:#?}"
            );
            let listed = server.get("/keys", &admin).await;
            assert_eq!(listed.current_ok(200)["count"], 4, "{listed:#?}");
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[tokio::test]
async fn an_admin_key_makes_lists_and_revokes_keys_over_http_within_its_own_reach() {
    let server = Server::start();
    let org = "org-keyroutes";
    let admin = server.key(org, &[]);
    server.ready_database(&admin, "a").await;
    server.ready_database(&admin, "b").await;
    let other_org = server.key("org-keyroutes-other", &[]);

    // Made over HTTP: the token is in the answer once, with what the key may do.
    let made = server
        .post(
            "/keys",
            &admin,
            json!({"name": "ingest-bot", "scopes": ["write"], "databases": ["a"], "expires_in": 3600}),
        )
        .await;
    let data = made.current_ok(201).clone();
    let token = data["token"].as_str().expect("a token").to_owned();
    let prefix = data["prefix"].as_str().expect("a prefix").to_owned();
    assert!(token.starts_with(&format!("{prefix}.")), "{data}");
    assert_eq!(data["scopes"], json!(["read", "write"]));
    assert_eq!(data["databases"], json!(["a"]));
    assert_eq!(data["status"], "active");
    assert!(data["expires_at"].is_string(), "{data}");

    // It does what it was given and nothing more.
    server
        .get("/databases/status?database=a", &token)
        .await
        .current_ok(200);
    let ingested = common::send_form(
        &server,
        "/context/ingest",
        &token,
        reqwest::multipart::Form::new()
            .text("type", "knowledge")
            .text("database", "a")
            .text(
                "app_knowledge",
                json!([common::app("k1", "t", "Made by a scoped key.")]).to_string(),
            ),
    )
    .await;
    ingested.current_ok(202);
    for (reply, path) in [
        (
            server.get("/databases/status?database=b", &token).await,
            "/databases/status",
        ),
        (
            server
                .post("/databases", &token, json!({"database": "c"}))
                .await,
            "/databases",
        ),
        (server.get("/keys", &token).await, "/keys"),
    ] {
        assert_forbidden(&reply, path, org);
    }

    // Listed by prefix, never with its secret; the CLI sees the same store, both ways.
    let secret = split(&token).1.to_owned();
    let listed = server.get("/keys", &admin).await;
    let keys = listed.current_ok(200)["keys"].clone();
    assert!(!listed.body.to_string().contains(&secret), "{listed:#?}");
    let line = keys
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["prefix"] == prefix.as_str())
        .unwrap_or_else(|| panic!("{prefix} not listed: {keys}"));
    assert_eq!(line["name"], "ingest-bot");
    assert_eq!(line["scopes"], json!(["read", "write"]));
    assert!(line.get("token").is_none(), "{line}");
    let (ok, cli_listing, stderr) = server.cli(&["keys", "list", "--org", org]);
    assert!(ok, "{stderr}");
    let cli_line = cli_listing
        .lines()
        .find(|l| l.contains(&prefix))
        .unwrap_or_else(|| panic!("{prefix} not in the CLI listing: {cli_listing}"));
    assert!(
        cli_line.contains("read,write") && cli_line.contains("ingest-bot"),
        "{cli_line}"
    );
    let from_cli = create_key(
        &server,
        &["--org", org, "--scope", "read", "--name", "cli-made"],
    );
    let listed = server.get("/keys", &admin).await;
    assert!(
        listed.body.to_string().contains(split(&from_cli).0),
        "{listed:#?}"
    );
    let other_listing = server.get("/keys", &other_org).await;
    assert!(
        !other_listing.body.to_string().contains(&prefix),
        "another organization sees the key: {other_listing:#?}"
    );

    // Bad requests say what is wrong and make nothing.
    for body in [
        json!({"scopes": ["owner"]}),
        json!({"scopes": "read"}),
        json!({"expires_in": 0}),
        json!({"name": "x".repeat(201)}),
        json!({"databases": ["bad name"]}),
    ] {
        server
            .post("/keys", &admin, body.clone())
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
    }

    // A key that expires makes only keys that expire no later.
    let expiring = create_key(&server, &["--org", org, "--expires-in", "3600"]);
    for body in [json!({}), json!({"expires_in": 7200})] {
        let reply = server.post("/keys", &expiring, body).await;
        assert_forbidden(&reply, "/keys", org);
    }
    server
        .post("/keys", &expiring, json!({"expires_in": 60}))
        .await
        .current_ok(201);

    // A key restricted to `a` makes keys restricted to `a`, and sees and revokes only those.
    let admin_a = create_key(
        &server,
        &["--org", org, "--database", "a", "--scope", "admin"],
    );
    for body in [
        json!({}),
        json!({"databases": ["b"]}),
        json!({"databases": ["a", "b"]}),
    ] {
        let reply = server.post("/keys", &admin_a, body).await;
        assert_forbidden(&reply, "/keys", org);
    }
    let narrow = server
        .post(
            "/keys",
            &admin_a,
            json!({"databases": ["a"], "scopes": ["read"]}),
        )
        .await;
    assert_eq!(narrow.current_ok(201)["databases"], json!(["a"]));
    let seen = server.get("/keys", &admin_a).await;
    let seen = seen.current_ok(200)["keys"].to_string();
    assert!(seen.contains(&prefix), "{seen}");
    assert!(!seen.contains(split(&admin).0), "{seen}");
    server
        .delete(&format!("/keys/{}", split(&admin).0), &admin_a)
        .await
        .assert_current_error(404, "NOT_FOUND");

    // Revoked over HTTP: refused from the next request on; again is harmless; another
    // organization's or an unknown prefix is 404.
    server
        .delete(&format!("/keys/{prefix}"), &other_org)
        .await
        .assert_current_error(404, "NOT_FOUND");
    server
        .get("/databases/status?database=a", &token)
        .await
        .current_ok(200);
    let revoked = server.delete(&format!("/keys/{prefix}"), &admin).await;
    assert_eq!(revoked.current_ok(200)["status"], "revoked");
    server
        .get("/databases/status?database=a", &token)
        .await
        .assert_current_error(401, "UNAUTHORIZED");
    server
        .delete(&format!("/keys/{prefix}"), &admin)
        .await
        .current_ok(200);
    server
        .delete("/keys/egk_0000000000000000", &admin)
        .await
        .assert_current_error(404, "NOT_FOUND");
    let (ok, cli_listing, _) = server.cli(&["keys", "list", "--org", org]);
    assert!(ok);
    let cli_line = cli_listing
        .lines()
        .find(|l| l.contains(&prefix))
        .expect("listed");
    assert!(cli_line.contains("revoked"), "{cli_line}");
}
