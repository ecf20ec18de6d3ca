//! An OpenAI-compatible chat-completions endpoint (`[llm]`), reached through
//! `engram-outbound`: one client for everything engram asks a model (graph extraction, memory
//! inference, answers). 429 and 5xx answers and unreachable endpoints are retried with backoff
//! before anything of the answer is used; answers are read within a bound; a streamed answer
//! (`stream: true`) is read as server-sent events, delta by delta.

use std::time::Duration;

use engram_outbound::{Outbound, Streamed};
use engram_types::Backoff;
use futures_util::StreamExt as _;
use serde_json::Value;

/// Largest answer read from the endpoint.
const ANSWER_MAX_BYTES: usize = 1 << 20;

/// How to reach the model and how much of it one item may use.
#[derive(Clone)]
pub struct LlmSettings {
    /// The endpoint's base (`https://host/v1`); `/chat/completions` is appended.
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    /// Most characters of passages one call reads.
    pub batch_chars: usize,
    /// Most batches of one item read by the model (two calls each); later passages are read by
    /// the rules.
    pub max_batches: usize,
    /// Most tokens one answer may have.
    pub max_output_tokens: u32,
    pub timeout: Duration,
    /// Tries per call (429, 5xx, unreachable).
    pub attempts: u32,
    pub backoff: Backoff,
}

impl std::fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &"***")
            .finish_non_exhaustive()
    }
}

/// Why a call gave no answer. Neither ever holds the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// Busy or unreachable after every try: trying later may work.
    #[error("{0}")]
    Transient(String),
    /// The endpoint refused the request or answered something unusable.
    #[error("{0}")]
    Failed(String),
}

/// The chat-completions client.
#[derive(Clone)]
pub struct ChatModel {
    client: Outbound,
    settings: LlmSettings,
}

impl ChatModel {
    pub fn new(client: Outbound, settings: LlmSettings) -> Self {
        Self { client, settings }
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.settings
    }

    /// One completion of `body` (a chat-completions request without `model`, which is the
    /// configured one): the first choice's content.
    pub async fn complete(&self, mut body: Value) -> Result<String, ChatError> {
        body["model"] = Value::from(self.settings.model.as_str());
        let Exchange::Whole(answer) = self.send(&body, true).await? else {
            return Err(ChatError::Failed("no whole answer".into()));
        };
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| ChatError::Failed(format!("the model's answer is not JSON: {e}")))?;
        answer["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ChatError::Failed("the model's answer has no content".into()))
    }

    /// One completion of `body`, streamed: the content as it is written, delta by delta.
    pub async fn stream(&self, mut body: Value) -> Result<ChatStream, ChatError> {
        body["model"] = Value::from(self.settings.model.as_str());
        body["stream"] = Value::Bool(true);
        let Exchange::Streamed(answer) = self.send(&body, false).await? else {
            return Err(ChatError::Failed("no streamed answer".into()));
        };
        let bytes = futures_util::stream::unfold(answer, |mut answer| async move {
            match answer.next().await {
                Ok(Some(piece)) => Some((Ok(bytes::Bytes::from(piece)), answer)),
                Ok(None) => None,
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), answer)),
            }
        });
        Ok(ChatStream {
            events: Box::pin(sse_stream::SseStream::from_bytes_stream(bytes)),
            done: false,
        })
    }

    /// Sends `body`, retrying what may pass later (429, 5xx, unreachable, and with `whole` an
    /// answer cut off while read): a 2xx answer, read whole or still to read.
    async fn send(&self, body: &Value, whole: bool) -> Result<Exchange, ChatError> {
        let body = serde_json::to_vec(body).map_err(|e| ChatError::Failed(e.to_string()))?;
        let url = format!(
            "{}/chat/completions",
            self.settings.base_url.trim_end_matches('/')
        );
        let url = url::Url::parse(&url)
            .map_err(|_| ChatError::Failed(format!("`{url}` is not a URL ([llm] base_url)")))?;
        let mut headers = Vec::new();
        if !self.settings.api_key.is_empty() {
            headers.push(("authorization", format!("Bearer {}", self.settings.api_key)));
        }
        let mut last = String::new();
        for attempt in 1..=self.settings.attempts.max(1) {
            if attempt > 1 {
                tokio::time::sleep(self.settings.backoff.delay(attempt - 1, 0.5)).await;
            }
            let answer = self
                .client
                .post_json_streamed(
                    &url,
                    &headers,
                    body.clone(),
                    self.settings.timeout,
                    ANSWER_MAX_BYTES,
                )
                .await;
            let answer = match answer {
                Ok(answer) => answer,
                Err(err) => {
                    last = err.to_string();
                    continue;
                }
            };
            let status = answer.status;
            if status == 429 || status >= 500 {
                last = format!("the model endpoint answered {status}");
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(ChatError::Failed(format!(
                    "the model endpoint answered {status}"
                )));
            }
            if !whole {
                return Ok(Exchange::Streamed(Box::new(answer)));
            }
            match answer.rest().await {
                Ok(bytes) => return Ok(Exchange::Whole(bytes)),
                Err(err) => last = format!("the model's answer was cut off: {err}"),
            }
        }
        Err(ChatError::Transient(last))
    }
}

/// A 2xx answer of the endpoint.
enum Exchange {
    Whole(Vec<u8>),
    Streamed(Box<Streamed>),
}

type Events = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>,
>;

/// A streamed answer.
pub struct ChatStream {
    events: Events,
    done: bool,
}

impl ChatStream {
    /// The next piece of content; `None` once the answer is complete (`[DONE]`, or the end of
    /// the stream).
    pub async fn next_delta(&mut self) -> Result<Option<String>, ChatError> {
        while !self.done {
            let Some(event) = self.events.next().await else {
                self.done = true;
                break;
            };
            let event = event
                .map_err(|e| ChatError::Transient(format!("the model's stream broke: {e}")))?;
            let Some(data) = event.data else { continue };
            if data.trim() == "[DONE]" {
                self.done = true;
                break;
            }
            let chunk: Value = serde_json::from_str(&data).map_err(|e| {
                ChatError::Failed(format!(
                    "the model's stream holds an event that is not JSON: {e}"
                ))
            })?;
            if let Some(message) = chunk["error"]["message"].as_str() {
                return Err(ChatError::Failed(format!("the model failed: {message}")));
            }
            if let Some(delta) = chunk["choices"][0]["delta"]["content"].as_str() {
                if !delta.is_empty() {
                    return Ok(Some(delta.to_owned()));
                }
            }
        }
        Ok(None)
    }
}
