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

/// Relays stdin's JSON-RPC lines to `<url>/mcp` and writes every answer to stdout, one line
/// each; the session id the server gives is sent back with every later message.
async fn relay(url: &str, key: &str) -> anyhow::Result<()> {
    let endpoint = format!("{}/mcp", url.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let mut session: Option<String> = None;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let id = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(serde_json::Value::Null);
        let mut request = client
            .post(&endpoint)
            .bearer_auth(key)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(line);
        if let Some(session) = &session {
            request = request.header("Mcp-Session-Id", session);
        }
        let answers = match request.send().await {
            Err(err) => rpc_error(&id, &format!("engram at {endpoint} is unreachable: {err}"))
                .into_iter()
                .collect(),
            Ok(response) => {
                if let Some(given) = response
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                {
                    session = Some(given.to_owned());
                }
                let status = response.status();
                let content_type = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let body = response.text().await.context("reading engram's answer")?;
                if status.is_success() {
                    messages(&content_type, &body)
                } else {
                    rpc_error(&id, &format!("engram answered {status}: {}", body.trim()))
                        .into_iter()
                        .collect()
                }
            }
        };
        for answer in answers {
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
