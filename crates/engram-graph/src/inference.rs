//! Memory inference as indexing asks for it (`infer: true`): [`RuleInference`], the offline
//! rules over the user's own first-person English, or [`LlmInference`], a configured model
//! reading what the user said for what it tells about them: preferences implied by behaviour,
//! facts in the third person or in other languages. The model's facts are held to the text
//! (what a fact is about, or its value, must be words the user wrote) and made exactly as the
//! rules make theirs (slots, values, statements), so dedupe and supersession treat both alike;
//! the rules' facts stand beside them, and alone when the model cannot answer.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::chat::{ChatError, ChatModel};
use crate::infer::{fact_of, infer, said_by_user, user_label, Fact, Focus, FACTS_PER_MEMORY_MAX};

/// A memory to infer from.
#[derive(Debug, Clone, Copy)]
pub struct InferRequest<'a> {
    pub text: &'a str,
    /// The name statements give the user.
    pub user: &'a str,
    /// The ingestion instructions: which kinds of fact to keep ([`Focus`]).
    pub instructions: &'a str,
}

/// Reads a memory for the facts it states about its user.
#[async_trait]
pub trait Inference: Send + Sync {
    async fn infer(&self, request: &InferRequest<'_>) -> Vec<Fact>;
}

/// The offline rules.
pub struct RuleInference;

#[async_trait]
impl Inference for RuleInference {
    async fn infer(&self, request: &InferRequest<'_>) -> Vec<Fact> {
        infer(request.text, request.user, request.instructions)
    }
}

/// A model, with the rules beside it.
pub struct LlmInference {
    model: ChatModel,
}

const PROMPT: &str = "You read what a user said and list the facts it tells about the user \
themself: preferences (also those shown by behaviour: someone who keeps switching to dark mode \
prefers dark mode), where they live, who they work for, their occupation, traits, allergies, \
habits and other attributes (a favorite color, a birthday). The user may speak in the first \
person or be named, in any language. Each fact has a kind: preference (value likes or \
dislikes), lives_in, works_for, occupation, trait, allergy, habit or attribute; `about` is what \
it is about and `value` its value, both in the words of the text. Leave out facts about other \
people, questions, and anything the text does not say or clearly show.";

const EXAMPLE_TEXT: &str = "User: I turned the theme to dark again, the light one hurts my eyes. \
Ich wohne jetzt in Hamburg.\nAssistant: Noted!";

fn example_answer() -> Value {
    json!({"facts": [
        {"kind": "preference", "about": "dark", "value": "likes"},
        {"kind": "lives_in", "about": "home", "value": "Hamburg"}
    ]})
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["facts"],
        "properties": {"facts": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": false,
            "required": ["kind", "about", "value"],
            "properties": {
                "kind": {"type": "string", "enum": [
                    "preference", "lives_in", "works_for", "occupation", "trait", "allergy",
                    "habit", "attribute"
                ]},
                "about": {"type": "string"},
                "value": {"type": "string"}
            }
        }}}
    })
}

/// The model's facts that the user's words hold, made as the rules make them, the kinds the
/// instructions leave out dropped; then the rules' facts in slots the model did not fill.
fn held_to_text(answer: &Value, said: &str, request: &InferRequest<'_>) -> Vec<Fact> {
    let written = said.to_lowercase();
    let in_text = |words: &str| {
        let words = words.trim().to_lowercase();
        !words.is_empty() && written.contains(&words)
    };
    let focus = Focus::of(request.instructions);
    let mut facts: Vec<Fact> = Vec::new();
    for given in answer["facts"].as_array().into_iter().flatten() {
        let field = |name: &str| given[name].as_str().unwrap_or_default();
        let (kind, about, value) = (field("kind"), field("about"), field("value"));
        // What the fact rests on must be written: its subject, or for places, employers,
        // occupations and attributes its value.
        let grounded = match kind {
            "lives_in" | "works_for" | "occupation" => in_text(value),
            "attribute" => in_text(value) && !about.trim().is_empty(),
            _ => in_text(about),
        };
        if !grounded {
            continue;
        }
        let Some(fact) = fact_of(kind, about, value, request.user) else {
            continue;
        };
        if focus.keeps(&fact.slot) {
            facts.retain(|f| f.slot != fact.slot);
            facts.push(fact);
        }
    }
    for fact in infer(request.text, request.user, request.instructions) {
        if !facts.iter().any(|f| f.slot == fact.slot) {
            facts.push(fact);
        }
    }
    facts.truncate(FACTS_PER_MEMORY_MAX);
    facts
}

impl LlmInference {
    pub fn new(model: ChatModel) -> Self {
        Self { model }
    }

    async fn ask(&self, said: &str, user: &str) -> Result<Value, ChatError> {
        let settings = self.model.settings();
        let said: String = said.chars().take(settings.batch_chars.max(1)).collect();
        let body = json!({
            "temperature": 0,
            "max_completion_tokens": settings.max_output_tokens,
            "messages": [
                {"role": "system", "content": PROMPT},
                {"role": "user", "content": format!("The user is called Lena.\n\n{EXAMPLE_TEXT}")},
                {"role": "assistant", "content": example_answer().to_string()},
                {"role": "user", "content": format!("The user is called {user}.\n\n{said}")}
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "facts", "strict": true, "schema": schema()}
            }
        });
        let content = self.model.complete(body).await?;
        let answer: Value = serde_json::from_str(&content)
            .map_err(|e| ChatError::Failed(format!("the model's facts are not JSON: {e}")))?;
        Ok(answer)
    }
}

#[async_trait]
impl Inference for LlmInference {
    async fn infer(&self, request: &InferRequest<'_>) -> Vec<Fact> {
        let said = said_by_user(request.text);
        if said.trim().is_empty() {
            return Vec::new();
        }
        match self.ask(&said, user_label(request.user)).await {
            Ok(answer) => held_to_text(&answer, &said, request),
            Err(err) => {
                let reason = match err {
                    ChatError::Transient(_) => "transient",
                    ChatError::Failed(_) => "failed",
                };
                tracing::warn!(error = %err, "the model gave no usable facts; the rules read the memory");
                metrics::counter!("engram_llm_fallbacks_total", "reason" => reason).increment(1);
                infer(request.text, request.user, request.instructions)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(text: &'a str, instructions: &'a str) -> InferRequest<'a> {
        InferRequest {
            text,
            user: "Ana",
            instructions,
        }
    }

    #[test]
    fn model_facts_are_held_to_the_users_words_and_made_like_the_rules() {
        let text = "User: I switched the editor to dark mode again.\nAna wohnt in Porto.\n\
                    Assistant: You live in Lisbon, right?\nUser: I love green tea.";
        let said = said_by_user(text);
        let answer = json!({"facts": [
            {"kind": "preference", "about": "dark mode", "value": "likes"},
            {"kind": "lives_in", "about": "", "value": "Porto"},
            // Only the assistant said Lisbon; nobody said Paris.
            {"kind": "lives_in", "about": "", "value": "Lisbon"},
            {"kind": "works_for", "about": "", "value": "Acme"},
            {"kind": "telepathy", "about": "dark mode", "value": "x"}
        ]});
        let facts = held_to_text(&answer, &said, &request(text, ""));
        let statements: Vec<&str> = facts.iter().map(|f| f.statement.as_str()).collect();
        assert_eq!(
            statements,
            [
                "Ana prefers dark mode.",
                "Ana lives in Porto.",
                "Ana likes green tea."
            ]
        );
        assert_eq!(facts[1].slot, "lives_in");
        assert_eq!(facts[1].value, "porto");
        // Instructions leave kinds out of the model's facts too.
        let facts = held_to_text(&answer, &said, &request(text, "Never store where I live."));
        assert!(facts.iter().all(|f| f.slot != "lives_in"), "{facts:?}");
    }
}
