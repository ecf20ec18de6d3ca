//! `engram mcp`: the MCP server over stdio, for desktop hosts (Claude Desktop, Cursor, ...).
//! With `--url` it relays to a running engram's `/mcp` (Streamable HTTP); without, it opens the
//! data directory itself (only while no server runs on it) and indexes what it is given.

use std::time::Duration;

use anyhow::Context as _;
use engram_app::App;
use engram_config::Config;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

#[derive(clap::Args)]
pub(crate) struct McpArgs {
    /// The API key the tools act as.
    #[arg(long, env = "ENGRAM_API_KEY", hide_env_values = true)]
    key: String,
    /// A running engram to relay to (its base URL, e.g. http://127.0.0.1:8080); without it the
    /// data directory is opened here.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

pub(crate) async fn run(args: McpArgs, config: Config) -> anyhow::Result<()> {
    // stdout carries the protocol: logs go to stderr, quietly.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match args.url {
        Some(url) => relay(&url, &args.key).await,
        None => local(&args.key, config).await,
    }
}

async fn local(key: &str, config: Config) -> anyhow::Result<()> {
    let grace = config.workers.shutdown_grace;
    let app = App::open(config).await?;
    let who = app
        .authenticate(key)
        .await
        .map_err(|e| anyhow::anyhow!("the API key was refused: {e}"))?;
    let token = CancellationToken::new();
    let workers = app.start_workers(token.child_token());
    let served = engram_mcp::serve_stdio(app.clone(), who).await;
    token.cancel();
    workers.shutdown(grace).await;
    app.close().await;
    Ok(served?)
}

/// A JSON-RPC error for the request `id` (when the message was a request).
fn rpc_error(id: &serde_json::Value, message: &str) -> Option<String> {
    (!id.is_null()).then(|| {
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32001, "message": message},
        })
        .to_string()
    })
}

/// The JSON-RPC messages of a response body: one JSON document, or the `data:` of each
/// server-sent event.
fn messages(content_type: &str, body: &str) -> Vec<String> {
    if !content_type.starts_with("text/event-stream") {
        return (!body.trim().is_empty())
            .then(|| body.trim().to_owned())
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    let mut data = String::new();
    for line in body.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            out.push(std::mem::take(&mut data));
        }
    }
    out.into_iter().filter(|m| m.starts_with('{')).collect()
}

/// What one relayed message got back.
enum Relayed {
    /// The messages to write to stdout.
    Answers(Vec<String>),
    /// The server no longer knows the session (it expired or the server restarted).
    SessionLost,
}

/// The relay's connection to `<url>/mcp`: the session the server gave, and the handshake
/// (the `initialize` request and the `initialized` notification) to replay when it is lost.
struct Relay {
    client: reqwest::Client,
    endpoint: String,
    key: String,
    session: Option<String>,
    handshake: Vec<String>,
}

impl Relay {
    async fn send(&mut self, line: &str) -> anyhow::Result<Relayed> {
        let id = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(serde_json::Value::Null);
        let mut request = self
            .client
            .post(&self.endpoint)
            .bearer_auth(&self.key)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(line.to_owned());
        if let Some(session) = &self.session {
            request = request.header("Mcp-Session-Id", session);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                let message = format!("engram at {} is unreachable: {err}", self.endpoint);
                return Ok(Relayed::Answers(
                    rpc_error(&id, &message).into_iter().collect(),
                ));
            }
        };
        if let Some(given) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session = Some(given.to_owned());
        }
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && self.session.is_some() {
            return Ok(Relayed::SessionLost);
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.text().await.context("reading engram's answer")?;
        Ok(Relayed::Answers(if status.is_success() {
            messages(&content_type, &body)
        } else {
            rpc_error(&id, &format!("engram answered {status}: {}", body.trim()))
                .into_iter()
                .collect()
        }))
    }

    /// Relays one line; a lost session is opened again by replaying the handshake, once.
    async fn relay(&mut self, line: String) -> anyhow::Result<Vec<String>> {
        let method = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("method").and_then(|m| m.as_str()).map(str::to_owned));
        if matches!(
            method.as_deref(),
            Some("initialize" | "notifications/initialized")
        ) {
            if method.as_deref() == Some("initialize") {
                self.handshake.clear();
            }
            self.handshake.push(line.clone());
        }
        if let Relayed::Answers(answers) = self.send(&line).await? {
            return Ok(answers);
        }
        self.session = None;
        for step in self.handshake.clone() {
            // The replayed handshake's answers were given to the host long ago.
            let _ = self.send(&step).await?;
        }
        match self.send(&line).await? {
            Relayed::Answers(answers) => Ok(answers),
            Relayed::SessionLost => anyhow::bail!("engram refused a new MCP session"),
        }
    }
}

/// Relays stdin's JSON-RPC lines to `<url>/mcp` and writes every answer to stdout, one line
/// each; the session id the server gives is sent back with every later message.
async fn relay(url: &str, key: &str) -> anyhow::Result<()> {
    let mut relay = Relay {
        client: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?,
        endpoint: format!("{}/mcp", url.trim_end_matches('/')),
        key: key.to_owned(),
        session: None,
        handshake: Vec::new(),
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        for answer in relay.relay(line).await? {
            stdout.write_all(answer.as_bytes()).await?;
            stdout.write_all(b"\n").await?;
        }
        stdout.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_json_and_from_server_sent_events() {
        assert_eq!(messages("application/json", "{\"id\":1}\n"), ["{\"id\":1}"]);
        let sse =
            "id: 0\nretry: 3000\ndata: {\"id\":1,\n data: \"result\":{}}\n\ndata: {\"id\":2}\n";
        assert_eq!(messages("text/event-stream", sse).len(), 1 + 1);
        assert_eq!(
            messages("text/event-stream", "data:\n\n"),
            Vec::<String>::new()
        );
        assert!(rpc_error(&serde_json::Value::Null, "x").is_none());
    }
}
