//! The hosted service's official clients, unchanged, against the real binary: each suite is a
//! Python script in `tests/clients` driving the client's every method and checking what comes
//! back. `make setup-test` installs the clients under `.cache/python`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{cache_dir, Server};

/// Webhook deliveries fail fast and retry quickly, so that a failed delivery can be retried by
/// hand within the suite; loopback receivers are allowed.
const ENV: &[(&str, &str)] = &[
    ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ("ENGRAM_WEBHOOKS__RETRY_BASE_MS", "100"),
    ("ENGRAM_WEBHOOKS__RETRY_MAX_MS", "200"),
    ("ENGRAM_WEBHOOKS__RETRY_JITTER", "0"),
    ("ENGRAM_WEBHOOKS__MAX_ATTEMPTS", "2"),
    ("ENGRAM_WEBHOOKS__TIMEOUT_MS", "2000"),
    ("ENGRAM_WEBHOOKS__SWEEP_MS", "50"),
];

/// Runs `tests/clients/<script>` with the client installed under `.cache/python/<package>` on
/// its path, against `server`; panics with the script's output when it fails.
fn run_suite(server: &Server, package: &str, script: &str, envs: &[(&str, String)]) {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pylib = cache_dir().join("python").join(package);
    assert!(
        pylib.is_dir(),
        "{} is missing: run `make setup-test`",
        pylib.display()
    );
    let mut cmd = Command::new("python3");
    cmd.arg(manifest.join("tests/clients").join(script))
        .env("PYTHONPATH", &pylib)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("ENGRAM_URL", &server.base)
        .envs(server.storage_env());
    for (name, value) in envs {
        cmd.env(name, value);
    }
    let output = cmd.output().expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    eprintln!("{stdout}");
}

#[tokio::test]
async fn official_python_client_works_unchanged() {
    let server = Server::start_with(ENV);
    let key = server.key("org-clients", &[]);
    let other = server.key("org-clients-other", &[]);
    let docx =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/markitdown/test.docx");
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "hydradb-sdk",
            "hydra_suite.py",
            &[
                ("ENGRAM_KEY", key),
                ("ENGRAM_OTHER_KEY", other),
                ("ENGRAM_DOCX", docx.display().to_string()),
            ],
        );
    });
    suite.await.expect("the suite");
}

#[tokio::test]
async fn official_python_client_drives_connectors() {
    let root = tempfile::tempdir().expect("root");
    let folder = root.path().join("runbooks");
    std::fs::create_dir_all(&folder).expect("folder");
    std::fs::write(
        folder.join("restart.md"),
        "# Restarting the API\nDrain the node, then restart.",
    )
    .expect("write");
    std::fs::write(
        folder.join("certs.txt"),
        "Certificates renew on the first of each month.",
    )
    .expect("write");
    let roots = format!("[\"{}\"]", root.path().display());
    let mut env = ENV.to_vec();
    env.push(("ENGRAM_CONNECTORS__FOLDER_ROOTS", &roots));
    let server = Server::start_with(&env);
    let key = server.key("org-connector-clients", &[]);
    let other = server.key("org-connector-clients-other", &[]);
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "hydradb-sdk",
            "hydra_connectors_suite.py",
            &[
                ("ENGRAM_KEY", key),
                ("ENGRAM_OTHER_KEY", other),
                ("ENGRAM_FOLDER", folder.display().to_string()),
            ],
        );
        drop(root);
    });
    suite.await.expect("the suite");
}

/// One hosted provider's case of `hydra_hosted_suite.py`.
fn case(
    provider: &str,
    credentials: Value,
    resources: &[String],
    added: u64,
    secrets: &[&str],
) -> Value {
    json!({"provider": provider, "database": provider.replace('_', "-"),
           "credentials": credentials, "resources": resources, "added": added, "secrets": secrets})
}

#[tokio::test]
async fn official_python_client_drives_every_hosted_provider() {
    let slack_token = "xoxb-client-SecretValue-5678";
    let slack = engram_fakes::slack::SlackFake::start(slack_token, 2).await;
    let ana = slack.add_user("Ana", "ana@example.com");
    let bo = slack.add_user("Bo", "bo@example.com");
    let general = slack.add_channel("general", false, true, &[&ana, &bo]);
    let leads = slack.add_channel("leads", true, true, &[&ana]);
    slack.add_channel("random", false, false, &[&bo]);
    let root = slack.post(&general, &ana, "How do we roll back a bad deploy?", None);
    slack.post(
        &general,
        &bo,
        "Run kubectl rollout undo on the api deployment.",
        Some(&root),
    );
    slack.post(
        &general,
        &bo,
        "The staging database restarts on Sundays.",
        None,
    );
    slack.post(&leads, &ana, "Salaries are reviewed every June.", None);

    let github_token = "ghp_clientSecretValue0001";
    let github = engram_fakes::github::GitHubFake::start(github_token).await;
    github.add_repo("octo-org/handbook", false);
    github.put_file(
        "octo-org/handbook",
        "README.md",
        b"# Handbook\nHow the team works.\n",
    );
    github.put_file(
        "octo-org/handbook",
        "docs/deploy.md",
        b"# Deploys\nDeploys go out on Tuesdays.\n",
    );

    let (linear_key, linear_token) = ("lin_api_clientSecret0001", "lin_oauth_clientSecret0001");
    let linear = engram_fakes::linear::LinearFake::start(linear_key, linear_token).await;
    let team = linear.add_team("ENG", "Engineering");
    linear.open_issue(
        "ENG",
        "Rotate the VPN keys",
        "Rotate them before Friday.",
        "Ana Lima",
    );
    linear.open_issue(
        "ENG",
        "Upgrade the runners",
        "The runners need more memory.",
        "Bo Chen",
    );

    let notion_token = "ntn_clientSecretValue1234";
    let notion = engram_fakes::notion::NotionFake::start(notion_token, 2).await;
    let (handbook, _, _) = crate::common::connectors::notion_handbook(&notion);

    let (email, atlassian_token) = ("bot@example.com", "atl_clientSecretToken0001");
    let atlassian = engram_fakes::atlassian::AtlassianFake::start(email, atlassian_token, 2).await;
    let space = atlassian.add_space("ENG", "Engineering");
    let home = atlassian.add_page(&space, None, "Runbooks", "<p>Start here.</p>");
    atlassian.add_page(
        &space,
        Some(&home),
        "Deploys",
        "<p>Deploys go out on Tuesdays.</p>",
    );
    atlassian.add_project("OPS", "Operations");
    atlassian.add_issue(
        "OPS",
        "Badge readers reject cards",
        "The badge readers on floor nine reject every card.",
        "To Do",
        "High",
        "Bug",
        "Ana Lima",
        &["facilities"],
    );

    let google_token = "ya29.client-SecretValue-1234";
    let google = engram_fakes::google::GoogleFake::start(google_token, "ana@example.com", 2).await;
    google.add_file(
        None,
        "runbook.txt",
        "text/plain",
        b"The pager rotation changes on Mondays.",
        &[],
    );
    google.add_file(
        None,
        "lunch.txt",
        "text/plain",
        b"Lunch is at noon on Fridays.",
        &[],
    );
    let label = google.add_label("Projects");
    google.deliver(
        &["INBOX", &label],
        "Bo <bo@example.com>",
        "Launch plan",
        "The launch moves to March.",
        &[],
    );

    let site =
        json!({"site_url": atlassian.site_url(), "email": email, "api_token": atlassian_token});
    let cases = json!([
        case(
            "slack",
            json!({"token": slack_token, "api_url": slack.api_url()}),
            &[format!("channel:{general}"), format!("channel:{leads}")],
            3,
            &[slack_token]
        ),
        case(
            "github",
            json!({"token": github_token, "api_url": github.api_url()}),
            &["octo-org/handbook".to_owned()],
            2,
            &[github_token]
        ),
        case(
            "linear",
            json!({"api_key": linear_key, "api_url": linear.api_url()}),
            &[team],
            2,
            &[linear_key]
        ),
        case(
            "notion",
            json!({"token": notion_token, "api_url": notion.api_url()}),
            &[format!("page:{handbook}")],
            2,
            &[notion_token]
        ),
        case(
            "confluence",
            site.clone(),
            &[format!("space:{space}")],
            2,
            &[atlassian_token]
        ),
        case(
            "jira",
            site,
            &["project:OPS".to_owned()],
            1,
            &[atlassian_token]
        ),
        case(
            "google_drive",
            json!({"access_token": google_token, "api_url": google.api_url()}),
            &["drive:root".to_owned()],
            2,
            &[google_token]
        ),
        case(
            "gmail",
            json!({"access_token": google_token, "api_url": google.api_url()}),
            &[format!("label:{label}")],
            1,
            &[google_token]
        ),
    ]);
    let mut env = ENV.to_vec();
    env.push(("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"));
    let server = Server::start_with(&env);
    let key = server.key("org-hosted-clients", &[]);
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "hydradb-sdk",
            "hydra_hosted_suite.py",
            &[("ENGRAM_KEY", key), ("CASES", cases.to_string())],
        );
    });
    suite.await.expect("the suite");
    drop((slack, github, linear, notion, atlassian, google));
}

#[tokio::test]
async fn legacy_python_client_works_unchanged() {
    // `recall.qna` answers with the real local model where `make setup-test` could set it up
    // (the rules read the graphs); without one the suite checks the refusal naming `[llm]`.
    let model = crate::common::LocalModel::start();
    let url = model.as_ref().map(|m| format!("{}/v1", m.base));
    let mut env = ENV.to_vec();
    if let Some(url) = &url {
        env.extend([
            ("ENGRAM_LLM__BASE_URL", url.as_str()),
            ("ENGRAM_LLM__MODEL", "smollm2-135m-instruct"),
            ("ENGRAM_LLM__GRAPH", "false"),
            ("ENGRAM_LLM__ANSWER_MAX_TOKENS", "64"),
            ("ENGRAM_LLM__ANSWER_CONTEXT_CHARS", "2000"),
        ]);
    }
    let server = Server::start_with(&env);
    let key = server.key("org-legacy-clients", &[]);
    let other = server.key("org-legacy-other", &[]);
    let qna = if model.is_some() { "model" } else { "none" };
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "usecortex-ai",
            "cortex_suite.py",
            &[
                ("ENGRAM_KEY", key),
                ("ENGRAM_OTHER_KEY", other),
                ("ENGRAM_QNA", qna.to_owned()),
            ],
        );
        drop(model);
    });
    suite.await.expect("the suite");
}

#[tokio::test]
async fn mcp_clients_use_every_tool() {
    // A data directory of its own for `engram mcp` to open (no server may run on it).
    let mut local = Server::start();
    let local_key = local.key("org-mcp-local", &[]);
    local.ready_database(&local_key, "local").await;
    local.terminate();
    let local_dir = local.data_dir.clone();
    let local_storage = local.storage_url.clone().unwrap_or_default();

    // Uploads of 1 MiB: an MCP body may then take the JSON limit (16 MiB), no more.
    let server = Server::start_with(&[("ENGRAM_INGEST__MAX_UPLOAD_BYTES", "1048576")]);
    let key = server.key("org-mcp", &[]);
    let restricted = server.key("org-mcp", &["agents"]);
    let read_only = server.scoped_key("org-mcp", &[], &["read"]);
    for name in ["agents", "agents-relay"] {
        server.ready_database(&key, name).await;
    }
    // A body past the limit is refused on its declared length, before any of it is read (a
    // client still writing it would see the connection close, so only the headers are sent).
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = server.base.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            17 * 1024 * 1024
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut answer = vec![0u8; 64];
        let read = stream.read(&mut answer).await.expect("read");
        let status_line = String::from_utf8_lossy(&answer[..read]).to_string();
        assert!(status_line.starts_with("HTTP/1.1 413"), "{status_line}");
    }
    // Served under any name it is reached by (a proxy's, a DNS name), not only localhost.
    let initialize = server
        .client
        .post(server.url("/mcp"))
        .bearer_auth(&key)
        .header("Host", "engram.example.com")
        .header("Accept", "application/json, text/event-stream")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}}),
        )
        .send()
        .await
        .expect("initialize");
    assert_eq!(
        initialize.status().as_u16(),
        200,
        "{:?}",
        initialize.text().await
    );
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "mcp",
            "mcp_suite.py",
            &[
                ("ENGRAM_KEY", key),
                ("ENGRAM_RESTRICTED_KEY", restricted),
                ("ENGRAM_READ_KEY", read_only),
                ("ENGRAM_BIN", crate::common::BIN.to_owned()),
                ("ENGRAM_LOCAL_DIR", local_dir.display().to_string()),
                ("ENGRAM_LOCAL_KEY", local_key),
                // `engram mcp` on its own opens the local server's store.
                ("ENGRAM_STORAGE__URL", local_storage),
                (
                    "ENGRAM_EMBEDDING__CACHE_DIR",
                    cache_dir().display().to_string(),
                ),
            ],
        );
        drop(local);
    });
    suite.await.expect("the suite");
}

#[tokio::test]
async fn metrics_parse_with_the_prometheus_parser() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let server = Server::start_with(&[
        ("ENGRAM_METRICS__TOKEN", "metrics-token-0123456789"),
        ("ENGRAM_METRICS__LISTEN", &listen),
    ]);
    let key = server.key("org-metrics", &[]);
    server.ready_database(&key, "metered").await;
    let items = [
        crate::common::app("metrics-a", "A", "The pump is replaced every spring."),
        crate::common::app("metrics-b", "B", "The valve is checked every winter."),
    ];
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "metered")
        .text(
            "app_knowledge",
            serde_json::Value::from(items.to_vec()).to_string(),
        );
    let sent = crate::common::send_form(&server, "/context/ingest", &key, form).await;
    assert_eq!(sent.status.as_u16(), 202, "{sent:#?}");
    crate::common::wait_completed(&server, &key, "metered", None, &["metrics-a", "metrics-b"])
        .await;
    let reply = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "metered", "query": "pump"}),
        )
        .await;
    assert_eq!(reply.status.as_u16(), 200, "{reply:#?}");
    let suite = tokio::task::spawn_blocking(move || {
        run_suite(
            &server,
            "prometheus-client",
            "metrics_check.py",
            &[
                ("METRICS_TOKEN", "metrics-token-0123456789".to_owned()),
                ("ENGRAM_KEY", key),
                ("METRICS_URL", format!("http://{listen}")),
            ],
        );
    });
    suite.await.expect("the check");
}
