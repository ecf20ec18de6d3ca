//! The web console from outside: sessions, CSRF, headers, escaping and isolation over HTTP, and
//! every flow in a real browser (Debian's Chromium driven by Playwright, `console_browser.py`).

use std::path::Path;
use std::time::Duration;

use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::json;

use crate::common::{app, eventually, Server};

/// A browser-like client: no redirects followed, cookies kept by hand (every console test's).
pub(crate) struct Browser {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) cookie: Option<String>,
    pub(crate) csrf: Option<String>,
}

/// A console answer, read whole.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Browser {
    pub(crate) fn new(server: &Server) -> Self {
        Self {
            client: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("client"),
            base: server.base.clone(),
            cookie: None,
            csrf: None,
        }
    }

    pub(crate) async fn send(&mut self, request: reqwest::RequestBuilder) -> Answer {
        let request = match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        };
        let response = request.send().await.expect("console request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        for set in headers.get_all(SET_COOKIE) {
            let set = set.to_str().expect("ascii cookie");
            let pair = set.split(';').next().unwrap_or_default().to_owned();
            self.cookie = pair.strip_suffix('=').is_none().then_some(pair);
        }
        let body = response.text().await.expect("body");
        if let Some(token) = body
            .split("X-CSRF-Token&quot;:&quot;")
            .nth(1)
            .and_then(|rest| rest.split("&quot;").next())
        {
            self.csrf = Some(token.to_owned());
        }
        Answer {
            status,
            headers,
            body,
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Answer {
        let request = self.client.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// A form post as htmx sends it: the CSRF token in its header.
    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Answer {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("hx-request", "true")
            .form(form);
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        self.send(request).await
    }

    /// A browser signed in with `key`, holding the session's CSRF token.
    pub(crate) async fn signed_in(server: &Server, key: &str) -> Self {
        let mut browser = Self::new(server);
        let answer = browser.sign_in(key).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        assert!(browser.csrf.is_some());
        browser
    }

    pub(crate) async fn sign_in(&mut self, key: &str) -> Answer {
        let request = self
            .client
            .post(format!("{}/console/sign-in", self.base))
            .form(&[("key", key)]);
        let answer = self.send(request).await;
        // The page after sign-in carries the CSRF token.
        self.get("/console/databases").await;
        answer
    }
}

#[tokio::test]
async fn a_console_session_holds_the_key_on_the_server_and_every_change_needs_its_token() {
    let server = Server::start();
    let key = server.key("acme", &[]);
    let mut browser = Browser::new(&server);

    let page = browser.get("/console").await;
    assert_eq!(page.status, 200);
    let csp = page.headers["content-security-policy"]
        .to_str()
        .unwrap_or("");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert_eq!(page.headers["x-frame-options"], "DENY");
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    assert!(!page.body.contains("<script>"), "no inline script");

    let refused = browser.sign_in("egk_0000.nope").await;
    assert_eq!(refused.status, 401);
    assert!(refused.body.contains("not valid"), "{}", refused.body);
    assert!(browser.cookie.is_none());

    let signed_in = browser.sign_in(&key).await;
    assert_eq!(signed_in.status, 303);
    assert_eq!(signed_in.headers[LOCATION], "/console/databases");
    let set = signed_in.headers[SET_COOKIE].to_str().unwrap_or("");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    assert!(
        !set.contains("Expires") && !set.contains("Max-Age"),
        "{set}"
    );
    let secret = key.split('.').nth(1).expect("secret");
    assert!(!set.contains(secret), "the cookie is sealed");
    let databases = browser.get("/console/databases").await;
    assert_eq!(databases.status, 200);
    assert!(!databases.body.contains(secret), "no page shows the key");

    // A change without the token, or from another site, is refused and changes nothing.
    let token = browser.csrf.take();
    let forged = browser
        .post("/console/databases", &[("name", "forged")])
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    browser.csrf = token;
    let cross = browser
        .send(
            browser
                .client
                .post(format!("{}/console/databases", browser.base))
                .header("origin", "https://evil.example")
                .header("x-csrf-token", browser.csrf.clone().unwrap_or_default())
                .form(&[("name", "forged")]),
        )
        .await;
    assert_eq!(cross.status, 403, "{}", cross.body);
    let listed = server.get("/databases", &key).await;
    assert!(
        !listed.body.to_string().contains("forged"),
        "{}",
        listed.body
    );

    // With the token: created through the same call as the API's.
    let created = browser
        .post("/console/databases", &[("name", "docs")])
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert_eq!(created.headers["hx-redirect"], "/console/databases/docs");
    server.wait_ready(&key, "docs").await;

    // Signing out ends the session; the old cookie no longer opens a page.
    let old = browser.cookie.clone();
    let out = browser.post("/console/sign-out", &[]).await;
    assert_eq!(out.headers["hx-redirect"], "/console");
    assert!(browser.cookie.is_none());
    let after = browser.get("/console/databases").await;
    assert_eq!(after.status, 303);
    assert_eq!(after.headers[LOCATION], "/console");
    drop(old);

    // A revoked key ends its sessions at the next request.
    let mut other = Browser::new(&server);
    let revocable = server.key("acme", &[]);
    other.sign_in(&revocable).await;
    assert_eq!(other.get("/console/databases").await.status, 200);
    let prefix = revocable.split('.').next().expect("prefix");
    let revoked = server.delete(&format!("/keys/{prefix}"), &key).await;
    assert!(revoked.status.is_success(), "{:?}", revoked.body);
    assert_eq!(other.get("/console/databases").await.status, 303);
}

#[tokio::test]
async fn a_console_session_ends_when_idle_and_the_console_can_be_turned_off() {
    let server = Server::start_with(&[("ENGRAM_CONSOLE__IDLE_TIMEOUT_MS", "1500")]);
    let key = server.key("acme", &[]);
    let mut browser = Browser::new(&server);
    browser.sign_in(&key).await;
    assert_eq!(browser.get("/console/databases").await.status, 200);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let idle = browser.get("/console/databases").await;
    assert_eq!(idle.status, 303);
    assert_eq!(idle.headers[LOCATION], "/console");

    // Polls are not the user's activity: a page left polling still idles out.
    browser.sign_in(&key).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let poll = browser
            .client
            .get(format!("{}/console/operations/figures", browser.base))
            .header("hx-request", "true")
            .header("x-console-poll", "1");
        let polled = browser.send(poll).await;
        assert_eq!(polled.status, 200, "{}", polled.body);
    }
    let idle = browser.get("/console/databases").await;
    assert_eq!(idle.status, 303, "polls kept the session open");

    // However busy, a session ends `console.max_session_ms` after its sign-in.
    let busy = Server::start_with(&[
        ("ENGRAM_CONSOLE__IDLE_TIMEOUT_MS", "1500"),
        ("ENGRAM_CONSOLE__MAX_SESSION_MS", "3000"),
    ]);
    let key = busy.key("acme", &[]);
    let mut browser = Browser::new(&busy);
    browser.sign_in(&key).await;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(2_400) {
        assert_eq!(browser.get("/console/databases").await.status, 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    let ended = browser.get("/console/databases").await;
    assert_eq!(
        ended.status, 303,
        "the session outlived console.max_session_ms"
    );

    let off = Server::start_with(&[("ENGRAM_CONSOLE__ENABLED", "false")]);
    let answer = Browser::new(&off).get("/console").await;
    assert_eq!(answer.status, 404);
}

#[tokio::test]
async fn the_console_shows_each_key_only_its_own_and_user_content_as_text() {
    let server = Server::start();
    let key = server.key("acme", &[]);
    server.ready_database(&key, "docs").await;
    server.ready_database(&key, "private").await;
    let hostile = "<img src=x onerror=alert(1)>";
    let items = json!([app(
        "x1",
        hostile,
        "<script>alert('chunk')</script> plain words here"
    )]);
    let form = reqwest::multipart::Form::new()
        .text("database", "docs")
        .text("app_knowledge", items.to_string());
    let ingested = crate::common::send_form(&server, "/context/ingest", &key, form).await;
    ingested.current_ok(202);
    crate::common::wait_completed(&server, &key, "docs", None, &["x1"]).await;

    let mut owner = Browser::new(&server);
    owner.sign_in(&key).await;
    let items = owner.get("/console/databases/docs").await;
    assert!(
        items.body.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{}",
        items.body
    );
    assert!(!items.body.contains(hostile));
    let item = owner
        .get("/console/databases/docs/item?id=x1&collection=docs")
        .await;
    assert_eq!(item.status, 200, "{}", item.body);
    assert!(item
        .body
        .contains("&lt;script&gt;alert('chunk')&lt;/script&gt;"));
    assert!(!item.body.contains("<script>alert"));
    let search = owner
        .get("/console/databases/docs/search?query=plain+words&sent=1")
        .await;
    assert!(
        search.body.contains("<mark>plain</mark>"),
        "{}",
        search.body
    );
    assert!(!search.body.contains("<script>alert"));

    // The instance's figures (every organization's load) are the operator's to show.
    let operations = owner.get("/console/operations").await;
    assert!(
        operations.body.contains("ops-instance-off"),
        "{}",
        operations.body
    );
    assert!(!operations.body.contains("ops-latency"));

    // Another organization's key sees none of it.
    let stranger = server.key("globex", &[]);
    let mut other = Browser::new(&server);
    other.sign_in(&stranger).await;
    let listed = other.get("/console/databases").await;
    assert!(!listed.body.contains("docs") && !listed.body.contains("private"));
    for path in [
        "/console/databases/docs",
        "/console/databases/docs/item?id=x1&collection=docs",
        "/console/databases/docs/search?query=plain",
    ] {
        let answer = other.get(path).await;
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert!(!answer.body.contains("plain words"), "{path}");
    }
    let deleted = other
        .post(
            "/console/databases/docs/item/delete?id=x1&collection=docs",
            &[],
        )
        .await;
    assert_eq!(deleted.status, 404, "{}", deleted.body);

    // A key restricted to one database sees only that one, and reads only.
    let restricted = server.scoped_key("acme", &["private"], &["read"]);
    let mut limited = Browser::new(&server);
    limited.sign_in(&restricted).await;
    let listed = limited.get("/console/databases").await;
    assert!(listed.body.contains("/console/databases/private"));
    assert!(!listed.body.contains("/console/databases/docs"));
    assert!(
        !listed.body.contains("Create a database"),
        "no admin form for a read key"
    );
    assert_eq!(limited.get("/console/databases/docs").await.status, 403);
    let refused = limited
        .post(
            "/console/databases/private/delete",
            &[("confirm", "private")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let status = server.get("/databases/status?database=private", &key).await;
    status.current_ok(200);
}

#[tokio::test]
async fn a_session_survives_what_is_not_a_wrong_key_and_a_refused_poll_stops() {
    // Two requests a key at once, one more a second.
    let server = Server::start_with(&[
        ("ENGRAM_RATE_LIMIT__REQUESTS_PER_SECOND", "1"),
        ("ENGRAM_RATE_LIMIT__BURST", "2"),
    ]);
    let key = server.key("acme", &[]);
    let mut browser = Browser::new(&server);
    browser.sign_in(&key).await;
    let mut limited = None;
    for _ in 0..4 {
        let answer = browser.get("/console/databases").await;
        if answer.status == 429 {
            limited = Some(answer);
            break;
        }
    }
    let limited = limited.expect("the key's rate limit answers 429");
    assert!(
        limited.body.contains("RATE_LIMITED") || limited.body.contains("rate limit"),
        "{}",
        limited.body
    );
    assert!(
        browser.cookie.is_some(),
        "a rate limit does not sign the session out"
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        browser.get("/console/databases").await.status,
        200,
        "the session is still open"
    );

    // A poll the console refuses (its database is gone) answers 286: htmx stops polling.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let poll = browser
        .client
        .get(format!("{}/console/databases/gone/items", browser.base))
        .header("hx-request", "true")
        .header("x-console-poll", "1");
    let refused = browser.send(poll).await;
    assert_eq!(refused.status, 286, "{}", refused.body);
    assert_eq!(refused.headers["hx-reswap"], "outerHTML");
    assert!(refused.body.contains("not found"), "{}", refused.body);
}

#[tokio::test]
async fn behind_a_proxy_a_console_action_must_come_from_its_public_origin() {
    let server = Server::start_with(&[(
        "ENGRAM_CONSOLE__PUBLIC_ORIGIN",
        "https://engram.example.com",
    )]);
    let key = server.key("acme", &[]);
    let mut browser = Browser::signed_in(&server, &key).await;
    let post = |browser: &Browser, origin: &str, name: &str| {
        browser
            .client
            .post(format!("{}/console/databases", browser.base))
            .header("hx-request", "true")
            .header("origin", origin)
            .header("x-csrf-token", browser.csrf.clone().unwrap_or_default())
            .form(&[("name", name)])
    };
    // The request's own Host is not the console's origin behind this proxy; nor is plain http.
    for origin in [
        browser.base.clone(),
        "http://engram.example.com".to_owned(),
        "https://engram.example.com.evil.example".to_owned(),
    ] {
        let refused = browser.send(post(&browser, &origin, "refused")).await;
        assert_eq!(refused.status, 403, "{origin}: {}", refused.body);
    }
    let accepted = browser
        .send(post(&browser, "https://engram.example.com", "proxied"))
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    assert_eq!(
        accepted.headers["hx-redirect"],
        "/console/databases/proxied"
    );
    // Its cookie is Secure: the browser reaches it over https.
    let mut fresh = Browser::new(&server);
    let signed_in = fresh.sign_in(&key).await;
    let set = signed_in.headers[SET_COOKIE].to_str().unwrap_or("");
    assert!(set.contains("Secure"), "{set}");
    let listed = server.get("/databases", &key).await;
    let listed = listed.body.to_string();
    assert!(
        listed.contains("proxied") && !listed.contains("refused"),
        "{listed}"
    );
}

/// Runs a browser suite (a Python script beside this file) against `server`: Playwright from
/// the cache `make setup-test` fills, Debian's Chromium, axe-core; screenshots under the target
/// directory's `console-screenshots/<suite>`. Fails with the script's output.
pub(crate) async fn browser_suite(server: &Server, script: &str, envs: &[(&str, String)]) {
    let cache = crate::common::cache_dir();
    let playwright = cache.join("python/playwright");
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        playwright.is_dir() && chromium.exists(),
        "Playwright ({}) and Chromium ({}) are installed by `make setup-test`",
        playwright.display(),
        chromium.display()
    );
    let suite = script.trim_end_matches(".py");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("console-screenshots")
        .join(suite);
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut command = tokio::process::Command::new("python3");
    command
        .arg(here.join(script))
        .env(
            "PYTHONPATH",
            format!("{}:{}", playwright.display(), here.display()),
        )
        .env("ENGRAM_BASE", &server.base)
        .env("AXE_JS", cache.join("axe-core/axe.min.js"))
        .env("SCREENSHOTS", &shots)
        .kill_on_drop(true);
    for (name, value) in envs {
        command.env(name, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the browser suite finishes within 5 minutes")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "browser suite {script} failed:\n{stdout}\n{stderr}"
    );
    eprintln!("{stdout}\nscreenshots: {}", shots.display());
}

/// The browser suite of the core flows (`console_browser.py`): sign-in, databases, uploads,
/// items, search, isolation between keys.
#[tokio::test]
async fn the_console_works_in_a_real_browser() {
    let server = Server::start();
    let key = server.key("acme", &[]);
    // Memories whose inference the memories page shows: the second supersedes the first.
    server.ready_database(&key, "minds").await;
    for (id, text) in [
        ("m1", "I love green tea. I live in Lisbon."),
        ("m2", "I live in Porto now."),
    ] {
        let memories = json!([{"id": id, "user_name": "Ana", "infer": true, "text": text}]);
        crate::common::ingest_memories(&server, &key, "minds", "ana", memories)
            .await
            .current_ok(202);
        crate::common::wait_completed(&server, &key, "minds", Some("ana"), &[id]).await;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/markitdown");
    browser_suite(
        &server,
        "console_browser.py",
        &[
            ("ENGRAM_KEY", key.clone()),
            ("ENGRAM_OTHER_KEY", server.key("globex", &[])),
            (
                "ENGRAM_RESTRICTED_KEY",
                server.scoped_key("acme", &["reports"], &["read"]),
            ),
            ("FIXTURES", fixtures.display().to_string()),
        ],
    )
    .await;
    // What the browser did went through the API's functions: the API sees it.
    eventually(Duration::from_secs(5), "the console's database", || async {
        let status = server
            .get("/databases/status?database=console-demo", &key)
            .await;
        (status.status == 200).then_some(())
    })
    .await;
}
