//! Answers (`POST /recall/qna`): retrieve, then have the configured model (`[llm]`) answer from
//! the retrieved passages alone, citing them by number. The passages are bounded
//! (`llm.answer_context_chars`), so are the answer's tokens (`llm.answer_max_tokens`); with no
//! passage retrieved the model is not asked and the answer says so. Without a model the route
//! is refused, naming the setting.

use std::sync::OnceLock;
use std::time::Instant;

use engram_graph::{ChatError, ChatModel, ChatStream};
use engram_types::limits::EXTRA_CONTEXT_MAX_CHARS;
use engram_types::{DatabaseName, Scope};
use regex::Regex;
use serde_json::json;

use crate::{App, AppError, AppResult, Principal, QueryOutcome, QueryRequest};

/// What the answer says when the passages do not hold one (and when there are none).
pub const NO_ANSWER: &str = "I cannot answer that from the provided context.";

const SYSTEM: &str = "You answer questions using only the numbered passages you are given. \
Cite every passage you use by its number in square brackets, like [1] or [2]. Never use \
knowledge from outside the passages. If the passages do not contain the answer, reply exactly: \
I cannot answer that from the provided context.";

/// A question to answer from what a query retrieves.
#[derive(Debug, Clone, Default)]
pub struct QnaRequest {
    /// The retrieval; its `query` is the question.
    pub query: QueryRequest,
    /// More for the model to know about the question (not retrieved with).
    pub extra_context: Option<String>,
    /// Most tokens of the answer; at most `llm.answer_max_tokens`.
    pub max_tokens: Option<i64>,
    /// 0 to 2; 0 unless asked.
    pub temperature: Option<f64>,
}

/// An answer being written: the model's text as it comes.
pub struct QnaStream {
    /// How many of the retrieved chunks the model was given (the first ones).
    pub passages: usize,
    pub model: String,
    /// The tokens the answer was allowed.
    pub max_tokens: u32,
    pub retrieval_ms: f64,
    started: Instant,
    /// `None`: nothing was retrieved, and the answer is [`NO_ANSWER`].
    chat: Option<ChatStream>,
    refusal_sent: bool,
}

impl QnaStream {
    /// The next piece of the answer; `None` at its end.
    pub async fn next_delta(&mut self) -> AppResult<Option<String>> {
        match &mut self.chat {
            Some(chat) => chat.next_delta().await.map_err(model_failure),
            None if !self.refusal_sent => {
                self.refusal_sent = true;
                Ok(Some(NO_ANSWER.to_owned()))
            }
            None => Ok(None),
        }
    }

    /// Milliseconds since the model was asked.
    pub fn answer_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }
}

/// A whole answer.
pub struct QnaAnswer {
    /// What was retrieved.
    pub outcome: QueryOutcome,
    pub stream: QnaStream,
    pub text: String,
    /// Indices (into `outcome.chunks`) of the passages the answer cites, in the order
    /// first cited.
    pub cited: Vec<usize>,
    pub answer_ms: f64,
}

/// The passages an answer's text cites (`[2]`, `[1, 3]`), as indices into the passages given:
/// numbers outside them are not citations.
pub fn citations(text: &str, passages: usize) -> Vec<usize> {
    static MARK: OnceLock<Regex> = OnceLock::new();
    let mark = MARK.get_or_init(|| {
        Regex::new(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]").expect("the citation pattern compiles")
    });
    let mut cited = Vec::new();
    for found in mark.captures_iter(text) {
        for number in found[1].split(',') {
            let Ok(n) = number.trim().parse::<usize>() else {
                continue;
            };
            if (1..=passages).contains(&n) && !cited.contains(&(n - 1)) {
                cited.push(n - 1);
            }
        }
    }
    cited
}

fn model_failure(err: ChatError) -> AppError {
    match err {
        ChatError::Transient(why) => {
            AppError::Unavailable(format!("the answer model is unavailable: {why}"))
        }
        ChatError::Failed(why) => AppError::Provider(format!("the answer model failed: {why}")),
    }
}

impl App {
    /// The configured model, when `[llm]` names one.
    pub(crate) fn chat_model(&self) -> Option<ChatModel> {
        let llm = &self.config().llm;
        (!llm.base_url.trim().is_empty())
            .then(|| ChatModel::new(self.inner.outbound.clone(), self.llm_settings()))
    }

    /// Retrieves, then starts the model's answer from what was retrieved (given first, best
    /// first). Needs `read`.
    pub async fn qna_streamed(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: QnaRequest,
    ) -> AppResult<(QueryOutcome, QnaStream)> {
        who.require(Scope::Read)?;
        let llm = &self.config().llm;
        let Some(model) = self.chat_model() else {
            return Err(AppError::Forbidden(
                "no answer model is configured on this server: set [llm] base_url and model \
                 (ENGRAM_LLM__BASE_URL, ENGRAM_LLM__MODEL)"
                    .into(),
            ));
        };
        let most = llm.answer_max_tokens.max(1);
        let max_tokens = match request.max_tokens {
            None => most,
            Some(asked) if asked < 1 => {
                return Err(AppError::InvalidParameters(
                    "`max_tokens` must be at least 1".into(),
                ))
            }
            Some(asked) => u32::try_from(asked).unwrap_or(u32::MAX).min(most),
        };
        let temperature = request.temperature.unwrap_or(0.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(AppError::InvalidParameters(
                "`temperature` must be between 0 and 2".into(),
            ));
        }
        let extra = request.extra_context.unwrap_or_default();
        if extra.chars().count() > EXTRA_CONTEXT_MAX_CHARS {
            return Err(AppError::InvalidParameters(format!(
                "`extra_context` is longer than {EXTRA_CONTEXT_MAX_CHARS} characters"
            )));
        }
        let question = request.query.query.clone();
        let started = Instant::now();
        let outcome = self.query(who, database, request.query).await?;
        let retrieval_ms = started.elapsed().as_secs_f64() * 1000.0;

        // The passages, best first, until the context bound (the first always, cut to it).
        let budget = llm.answer_context_chars.max(1);
        let mut written = 0;
        let mut passages = String::new();
        let mut given = 0;
        for (n, chunk) in outcome.chunks.iter().enumerate() {
            let title = chunk.hit.item.fields.title.trim();
            let head = if title.is_empty() {
                format!("[{}]", n + 1)
            } else {
                format!("[{}] ({title})", n + 1)
            };
            let piece = format!("{head} {}\n\n", chunk.hit.content.trim());
            let length = piece.chars().count();
            if written + length > budget {
                if given == 0 {
                    // The best passage is given even when it alone is over the bound: cut.
                    passages = piece.chars().take(budget).collect();
                    passages.push_str("\n\n");
                    given = 1;
                }
                break;
            }
            written += length;
            passages.push_str(&piece);
            given += 1;
        }
        let settings_model = model.settings().model.clone();
        let chat = if given == 0 {
            None
        } else {
            let mut user = format!("Passages:\n\n{passages}Question: {question}");
            if !extra.trim().is_empty() {
                user.push_str(&format!("\n\nWhat the asker adds: {}", extra.trim()));
            }
            let body = json!({
                "temperature": temperature,
                "max_completion_tokens": max_tokens,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": user}
                ]
            });
            Some(model.stream(body).await.map_err(model_failure)?)
        };
        let stream = QnaStream {
            passages: given,
            model: settings_model,
            max_tokens,
            retrieval_ms,
            started: Instant::now(),
            chat,
            refusal_sent: false,
        };
        Ok((outcome, stream))
    }

    /// [`App::qna_streamed`], read whole, with the passages it cites.
    pub async fn qna(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: QnaRequest,
    ) -> AppResult<QnaAnswer> {
        let (outcome, mut stream) = self.qna_streamed(who, database, request).await?;
        let mut text = String::new();
        while let Some(delta) = stream.next_delta().await? {
            text.push_str(&delta);
        }
        let text = text.trim().to_owned();
        let cited = citations(&text, stream.passages);
        let answer_ms = stream.answer_ms();
        Ok(QnaAnswer {
            outcome,
            stream,
            text,
            cited,
            answer_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_the_passages_named_in_brackets_once_each() {
        assert_eq!(citations("Helium [2]. Also [1, 2] and [3].", 3), [1, 0, 2]);
        assert_eq!(citations("No marks here.", 3), Vec::<usize>::new());
        assert_eq!(
            citations("Out of range [0] [4] [12345] and [2]", 3),
            [1],
            "only numbers of passages given"
        );
    }
}
