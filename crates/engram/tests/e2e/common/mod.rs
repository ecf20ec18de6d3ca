//! End-to-end harness: starts the real `engram` binary on an ephemeral port with a temporary
//! data directory, creates keys with the real `engram keys` command, and talks HTTP to it.
//! When `E2E_POSTGRES_URL` names a PostgreSQL server (`make test` runs the suite a second
//! time beside one, `scripts/with-postgres.sh`), every server keeps its state in a new database
//! there instead of SQLite: the same tests, on both backends.
#![allow(dead_code)]

pub(crate) mod connectors;
pub(crate) mod feeds;
pub(crate) mod receiver;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_engram");

/// A running server. Killed (SIGKILL) when dropped unless stopped first.
pub(crate) struct Server {
    child: Option<Child>,
    pub base: String,
    pub data_dir: PathBuf,
    /// The PostgreSQL database this server keeps its state in; `None`: SQLite in `data_dir`.
    pub storage_url: Option<String>,
    _tmp: Option<tempfile::TempDir>,
    envs: Vec<(String, String)>,
    /// Where the server's stderr (its log) goes; inherited when `None`.
    log: Option<PathBuf>,
    /// The address it listens on (`127.0.0.1:0`: a free port).
    listen: String,
    pub client: reqwest::Client,
}

/// A response, read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a current-generation error: status, envelope shape, code.
    pub(crate) fn assert_current_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{self:#?}");
        assert_eq!(self.body["success"], false, "{self:#?}");
        assert!(self.body["data"].is_null(), "{self:#?}");
        assert_eq!(self.body["error"]["code"], code, "{self:#?}");
        assert!(
            self.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{self:#?}"
        );
        let request_id = self.body["meta"]["request_id"]
            .as_str()
            .expect("meta.request_id");
        assert_eq!(self.header("x-request-id"), Some(request_id));
        assert!(self.body["meta"]["latency_ms"].is_number());
    }

    /// Asserts a legacy error: status, `{detail:{success:false, message, error_code}}`.
    pub(crate) fn assert_legacy_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{self:#?}");
        let detail = &self.body["detail"];
        assert_eq!(detail["success"], false, "{self:#?}");
        assert_eq!(detail["error_code"], code, "{self:#?}");
        assert!(
            detail["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{self:#?}"
        );
        assert!(self.header("x-request-id").is_some());
    }

    /// Asserts that a current-generation success reports exactly these `(deprecated, preferred)`
    /// aliases in `meta.deprecation` and the `Deprecation` header; none when `expected` is empty.
    pub(crate) fn assert_deprecations(&self, expected: &[(&str, &str)]) {
        if expected.is_empty() {
            let none = self.body["meta"].get("deprecation").is_none()
                || self.body["meta"]["deprecation"] == serde_json::json!([]);
            assert!(none, "{self:#?}");
            assert_eq!(self.header("deprecation"), None, "{self:#?}");
            return;
        }
        assert_eq!(self.header("deprecation"), Some("true"), "{self:#?}");
        let entries = self.body["meta"]["deprecation"]
            .as_array()
            .unwrap_or_else(|| panic!("meta.deprecation missing: {self:#?}"));
        assert_eq!(entries.len(), expected.len(), "{self:#?}");
        for (deprecated, preferred) in expected {
            let entry = entries
                .iter()
                .find(|e| e["deprecated_field"] == *deprecated)
                .unwrap_or_else(|| panic!("no deprecation entry for {deprecated}: {self:#?}"));
            assert_eq!(entry["deprecated"], true, "{self:#?}");
            assert_eq!(entry["preferred_field"], *preferred, "{self:#?}");
            assert!(
                entry["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{self:#?}"
            );
        }
    }

    /// Asserts a current-generation success and returns `data`.
    pub(crate) fn current_ok(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "{self:#?}");
        assert_eq!(self.body["success"], true, "{self:#?}");
        assert_eq!(self.body["error"]["code"], "", "{self:#?}");
        assert_eq!(self.body["error"]["message"], "", "{self:#?}");
        let request_id = self.body["meta"]["request_id"]
            .as_str()
            .expect("meta.request_id");
        assert_eq!(self.header("x-request-id"), Some(request_id));
        &self.body["data"]
    }
}

impl Server {
    /// Starts a server on a new temporary data directory.
    pub(crate) fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra environment variables (for example a low rate limit).
    pub(crate) fn start_with(envs: &[(&str, &str)]) -> Self {
        let mut server = Self::unstarted(envs);
        server.spawn();
        server
    }

    /// Starts a server that knows its own public address (`connectors.public_url`, on a port
    /// chosen before it starts), as one behind a public host name does: providers whose push
    /// channels engram registers are given its events URL.
    pub(crate) fn start_public(envs: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let public = format!("http://127.0.0.1:{port}");
        let mut all = envs.to_vec();
        all.push(("ENGRAM_CONNECTORS__PUBLIC_URL", &public));
        let mut server = Self::unstarted(&all);
        server.listen = format!("127.0.0.1:{port}");
        server.spawn();
        server
    }

    /// Starts a server whose log (stderr) is written to `log`.
    pub(crate) fn start_logged(envs: &[(&str, &str)], log: &Path) -> Self {
        let mut server = Self::unstarted(envs);
        server.log = Some(log.to_owned());
        server.spawn();
        server
    }

    /// Starts a server on the embedded store with its data directory at `data_dir` (for
    /// example on a file system the test made small).
    pub(crate) fn start_at(data_dir: PathBuf, envs: &[(&str, &str)]) -> Self {
        let mut server = Self::unstarted(envs);
        server.data_dir = data_dir;
        server.storage_url = None;
        server.spawn();
        server
    }

    /// Starts another instance on `other`'s PostgreSQL database, with a data directory of its
    /// own: several instances, one store.
    pub(crate) fn start_beside(other: &Server, envs: &[(&str, &str)]) -> Self {
        let mut server = Self::unstarted(envs);
        server.storage_url.clone_from(&other.storage_url);
        server.spawn();
        server
    }

    /// Starts an instance on the PostgreSQL database at `url`.
    pub(crate) fn start_on(url: String, envs: &[(&str, &str)]) -> Self {
        let mut server = Self::unstarted(envs);
        server.storage_url = Some(url);
        server.spawn();
        server
    }

    /// [`Server::start_beside`], reaching the database through `url` (a proxy the test
    /// controls) instead of `other`'s own.
    pub(crate) fn start_beside_via(other: &Server, envs: &[(&str, &str)], url: String) -> Self {
        assert!(other.storage_url.is_some(), "a PostgreSQL run");
        let mut server = Self::unstarted(envs);
        server.storage_url = Some(url);
        server.spawn();
        server
    }

    fn unstarted(envs: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().join("data");
        let envs = envs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self {
            child: None,
            base: String::new(),
            data_dir,
            storage_url: new_postgres_database(),
            _tmp: Some(tmp),
            envs,
            log: None,
            listen: "127.0.0.1:0".to_owned(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
        }
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listen", &self.listen, "--data-dir"])
            .arg(&self.data_dir)
            .env_remove("ENGRAM_LISTEN")
            .env_remove("ENGRAM_DATA_DIR")
            .envs(self.storage_env())
            .env("RUST_LOG", "warn")
            .env("ENGRAM_EMBEDDING__CACHE_DIR", cache_dir())
            .stdout(Stdio::piped())
            .stderr(match &self.log {
                Some(path) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .expect("the log file"),
                ),
                None => Stdio::inherit(),
            });
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start engram");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = line
            .trim()
            .strip_prefix("engram listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        self.base = addr.to_owned();
        self.child = Some(child);
    }

    /// Stops the server with SIGTERM and waits for it; returns its exit status.
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        self.send_sigterm();
        self.wait_exit()
    }

    /// Sends SIGTERM without waiting.
    pub(crate) fn send_sigterm(&self) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
    }

    /// Whether the server process is still running.
    pub(crate) fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().expect("try_wait").is_none())
    }

    /// Waits (bounded) for the server to exit; returns its exit status.
    pub(crate) fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        wait_with_deadline(&mut child, Duration::from_secs(20))
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to the server process: `STOP` freezes it as a
    /// stalled VM would, `CONT` wakes it.
    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill -{signal} {pid}");
    }

    /// Kills the server with SIGKILL (a crash).
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data directory.
    pub(crate) fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        self.spawn();
    }

    /// Starts the server again on the same data directory with `envs` instead of its own.
    pub(crate) fn restart_with(&mut self, envs: &[(&str, &str)]) {
        self.envs = envs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.restart();
    }

    /// Runs `engram <args> --data-dir <dir>` on this server's store and returns (success,
    /// stdout, stderr).
    pub(crate) fn cli(&self, args: &[&str]) -> (bool, String, String) {
        cli_with(&self.data_dir, &self.storage_env(), args)
    }

    /// Runs `engram check` on this server's store (beside the running server) and asserts it
    /// finds everything consistent.
    pub(crate) fn assert_consistent(&self) {
        let (ok, stdout, stderr) = self.cli(&["check"]);
        assert!(
            ok && stdout.trim_end().ends_with("consistent") && !stdout.contains("FAILED"),
            "engram check: {stdout} {stderr}"
        );
    }

    /// The environment that points an `engram` command at this server's store.
    pub(crate) fn storage_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("ENGRAM_STORAGE__URL".to_owned(), String::new())];
        if let Some(url) = &self.storage_url {
            env[0].1.clone_from(url);
        }
        env
    }

    /// Everything the server's store holds as bytes: the files under its data directory, and
    /// on PostgreSQL a dump of its database.
    pub(crate) fn stored_bytes(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        every_file(&self.data_dir, &mut files);
        if let Some(url) = &self.storage_url {
            let dump = Command::new("pg_dump")
                .args(["--data-only", "--no-owner", url])
                .output()
                .expect("pg_dump");
            assert!(dump.status.success(), "pg_dump: {dump:?}");
            files.push(("pg_dump".to_owned(), dump.stdout));
        }
        files
    }

    /// Creates a key with `engram keys create` and returns its `prefix.secret`.
    pub(crate) fn key(&self, org: &str, databases: &[&str]) -> String {
        self.scoped_key(org, databases, &[])
    }

    /// A key with only these scopes (`read`, `write`, `admin`; none for all).
    pub(crate) fn scoped_key(&self, org: &str, databases: &[&str], scopes: &[&str]) -> String {
        let mut args = vec!["keys", "create", "--org", org];
        for db in databases {
            args.extend(["--database", db]);
        }
        for scope in scopes {
            args.extend(["--scope", scope]);
        }
        let (ok, stdout, stderr) = self.cli(&args);
        assert!(ok, "keys create failed: {stderr}");
        stdout
            .lines()
            .last()
            .expect("a last line")
            .trim()
            .to_owned()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends a request; `key` None sends no Authorization header; `body` None sends no body.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self
            .client
            .request(method, self.url(path))
            .header("API-Version", "2");
        if let Some(key) = key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("request")).await
    }

    pub(crate) async fn get(&self, path: &str, key: &str) -> Reply {
        self.call(Method::GET, path, Some(key), None).await
    }

    pub(crate) async fn post(&self, path: &str, key: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(key), Some(body)).await
    }

    pub(crate) async fn delete(&self, path: &str, key: &str) -> Reply {
        self.call(Method::DELETE, path, Some(key), None).await
    }

    /// Creates a database and waits until it is ready.
    pub(crate) async fn ready_database(&self, key: &str, name: &str) {
        let created = self
            .post("/databases", key, serde_json::json!({"database": name}))
            .await;
        created.current_ok(202);
        self.wait_ready(key, name).await;
    }

    /// Polls `GET /databases/status` until every readiness flag is true.
    /// Creates a database with a metadata schema and waits until it is ready.
    pub(crate) async fn ready_database_with_schema(&self, key: &str, name: &str, schema: Value) {
        let created = self
            .post(
                "/databases",
                key,
                serde_json::json!({"database": name, "database_metadata_schema": schema}),
            )
            .await;
        created.current_ok(202);
        self.wait_ready(key, name).await;
    }

    pub(crate) async fn wait_ready(&self, key: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let status = self
                .get(&format!("/databases/status?database={name}"), key)
                .await;
            if status.status == StatusCode::OK
                && status.body["data"]["infra"]["ready_for_ingestion"] == true
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "database {name} never became ready: {status:#?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends a multipart request (current generation header included; legacy routes ignore it).
pub(crate) async fn send_form(
    server: &Server,
    path: &str,
    key: &str,
    form: reqwest::multipart::Form,
) -> Reply {
    let request = server
        .client
        .post(server.url(path))
        .header("API-Version", "2")
        .header("Authorization", format!("Bearer {key}"))
        .multipart(form);
    read(request.send().await.expect("request")).await
}

/// One `app_knowledge` entry.
pub(crate) fn app(id: &str, title: &str, text: &str) -> Value {
    serde_json::json!({"id": id, "title": title, "type": "page", "content": {"text": text}})
}

pub(crate) async fn read(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("non-JSON body: {}", String::from_utf8_lossy(&bytes)))
    };
    Reply {
        status,
        headers,
        body,
    }
}

/// The model cache `make setup` fills, at the workspace root.
pub(crate) fn cache_dir() -> PathBuf {
    std::env::var_os("ENGRAM_EMBEDDING__CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache"))
}

/// Runs the binary with `--data-dir` (on SQLite there).
pub(crate) fn cli(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    cli_with(data_dir, &[], args)
}

/// Runs the binary with `--data-dir` and extra environment variables.
fn cli_with(data_dir: &Path, envs: &[(String, String)], args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .env("RUST_LOG", "warn")
        .env("ENGRAM_EMBEDDING__CACHE_DIR", cache_dir())
        .output()
        .expect("run engram");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "server did not stop within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `check` until it returns Some, or panics after `limit`.
pub(crate) async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// How long a test waits for an item to be indexed (the real model, on a loaded 2-core machine).
pub(crate) const INDEXING_WAIT: Duration = Duration::from_secs(180);

pub(crate) fn non_empty_str(value: &Value) -> bool {
    value.as_str().is_some_and(|s| !s.is_empty())
}

/// Checks `check` on every poll for `span`: a property that must keep holding.
pub(crate) async fn holds_for<F, Fut>(span: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let until = Instant::now() + span;
    while Instant::now() < until {
        check().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `POST /context/ingest` of memories into one collection.
pub(crate) async fn ingest_memories(
    server: &Server,
    key: &str,
    database: &str,
    collection: &str,
    memories: Value,
) -> Reply {
    let form = reqwest::multipart::Form::new()
        .text("type", "memory")
        .text("database", database.to_owned())
        .text("collection", collection.to_owned())
        .text("memories", memories.to_string());
    send_form(server, "/context/ingest", key, form).await
}

/// Polls `GET /context/status` until every id is `completed`; fails at once on `errored` or
/// `not_found`.
pub(crate) async fn wait_completed(
    server: &Server,
    key: &str,
    database: &str,
    collection: Option<&str>,
    ids: &[&str],
) {
    let mut path = format!("/context/status?database={database}&ids={}", ids.join(","));
    if let Some(collection) = collection {
        path.push_str(&format!("&collection={collection}"));
    }
    let path = &path;
    eventually(
        INDEXING_WAIT,
        &format!("{ids:?} in {database} completed"),
        || async move {
            let reply = server.get(path, key).await;
            let statuses = reply.current_ok(200)["statuses"]
                .as_array()
                .expect("statuses")
                .clone();
            assert_eq!(statuses.len(), ids.len(), "{reply:#?}");
            for (status, id) in statuses.iter().zip(ids) {
                assert_eq!(status["id"], *id, "{reply:#?}");
                assert_ne!(status["indexing_status"], "errored", "{reply:#?}");
                assert_ne!(status["indexing_status"], "not_found", "{reply:#?}");
            }
            statuses
                .iter()
                .all(|s| s["indexing_status"] == "completed")
                .then_some(())
        },
    )
    .await;
}

/// A new, empty database on the PostgreSQL server of this run (`E2E_POSTGRES_URL`), or
/// `None` when the run is on SQLite.
pub(crate) fn new_postgres_database() -> Option<String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DATABASES: AtomicU64 = AtomicU64::new(0);
    let server = std::env::var("E2E_POSTGRES_URL").ok()?;
    let server = server.trim_end_matches('/');
    let name = format!(
        "e2e_{}_{}",
        std::process::id(),
        DATABASES.fetch_add(1, Ordering::Relaxed)
    );
    let made = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c"])
        .arg(format!("CREATE DATABASE {name}"))
        .arg(format!("{server}/postgres"))
        .output()
        .expect("psql");
    assert!(made.status.success(), "CREATE DATABASE {name}: {made:?}");
    Some(format!("{server}/{name}"))
}

/// Every file under `dir` with its bytes.
pub(crate) fn every_file(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            every_file(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

/// A real model behind an OpenAI-compatible API: `scripts/llm-server` (llama.cpp through
/// node-llama-cpp) serving SmolLM2-135M-Instruct, both put under `.cache` by `make setup-test`.
/// Killed when dropped.
pub(crate) struct LocalModel {
    child: std::process::Child,
    pub(crate) base: String,
}

impl LocalModel {
    /// `None` (with a note) where `make setup-test` could not set it up (no Node.js 20).
    pub(crate) fn start() -> Option<Self> {
        use std::io::BufRead;
        let cache = cache_dir();
        let script = cache.join("llm-server/server.mjs");
        let model = cache.join("models/smollm2-135m-instruct/model.gguf");
        if !cache.join("llm-server/node_modules").is_dir() || !script.is_file() || !model.is_file()
        {
            eprintln!(
                "no local model server under {} (make setup-test installs it where Node.js 20 \
                 or later is): skipped",
                cache.display()
            );
            return None;
        }
        let mut child = std::process::Command::new("node")
            .arg(&script)
            .arg(&model)
            .args(["0", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("node runs the model server");
        let stderr = child.stderr.take().expect("the model server's stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(base) = line.strip_prefix("listening on ") {
                    let _ = tx.send(base.to_owned());
                } else {
                    eprintln!("model server: {line}");
                }
            }
        });
        let base = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the model server listens");
        Some(Self { child, base })
    }
}

impl LocalModel {
    /// [`LocalModel::start`] on SQLite runs only (what a model answers does not depend on the
    /// store, and the PostgreSQL run need not wait on it twice).
    pub(crate) fn start_on_sqlite() -> Option<Self> {
        if std::env::var_os("E2E_POSTGRES_URL").is_some() {
            return None;
        }
        Self::start()
    }

    /// An engram whose `[llm]` is this model (`smollm2-135m-instruct`), with `envs` besides.
    pub(crate) fn engram(&self, envs: &[(&str, &str)]) -> Server {
        let url = format!("{}/v1", self.base);
        let mut all = vec![
            ("ENGRAM_LLM__BASE_URL", url.as_str()),
            ("ENGRAM_LLM__MODEL", "smollm2-135m-instruct"),
            ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ];
        all.extend_from_slice(envs);
        Server::start_with(&all)
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `app` on a free port of 127.0.0.1 for the rest of the test: its `http://addr`.
pub(crate) async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}
