//! The LLM graph extractor: any OpenAI-compatible chat-completions endpoint (`[llm]`) reads an
//! item's passages a batch at a time, first for its entities, then for the relations between
//! them, each answer held to a JSON schema and then checked like a client's `graph_payload`.
//! Answers are cached by content hash within the item's database (never shared across
//! organizations: a cached answer's speed would tell one organization what another indexed);
//! 429 and 5xx answers (and unreachable endpoints) are retried with backoff, and when the
//! endpoint stays unusable the rule extractor reads the item instead, so an item never waits on
//! a model.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::chat::{ChatError, ChatModel, LlmSettings};
use crate::{
    ExtractRequest, GraphError, GraphExtractor, GraphPayload, ItemGraph, Origin, Passage,
    PayloadEntity, PayloadRelation,
};
use async_trait::async_trait;
use engram_outbound::Outbound;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Answers kept in the cache (oldest dropped first).
const CACHE_ENTRIES: usize = 2_048;
/// Confidence of a relation the model gave (the rules' verb-phrase relations have 0.6).
const LLM_CONFIDENCE: f32 = 0.8;

/// `system` followed by the item's ingestion instructions, when it has any.
fn with_instructions(system: &str, instructions: &str) -> String {
    let instructions = instructions.trim();
    if instructions.is_empty() {
        system.to_owned()
    } else {
        format!(
            "{system}\n\nThe user who stored this content gave these instructions; follow them \
             where they apply to what you extract:\n{instructions}"
        )
    }
}

/// Answers by content hash, oldest dropped first.
#[derive(Default)]
struct Cache {
    answers: HashMap<[u8; 32], Value>,
    order: VecDeque<[u8; 32]>,
}

impl Cache {
    fn get(&self, key: &[u8; 32]) -> Option<Value> {
        self.answers.get(key).cloned()
    }

    fn put(&mut self, key: [u8; 32], answer: Value) {
        if self.answers.insert(key, answer).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > CACHE_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.answers.remove(&old);
            }
        }
    }
}

/// Extracts with the model, falling back to `fallback` (the rules).
pub struct LlmExtractor {
    model: ChatModel,
    settings: LlmSettings,
    fallback: Arc<dyn GraphExtractor>,
    cache: Mutex<Cache>,
}

const ENTITY_PROMPT: &str = "You extract a knowledge graph. List the named entities of the \
passages: people, organizations, places, products, projects, services, teams, events, error \
codes, tickets, and specific concepts. Give each its name as written, a type in UPPER_SNAKE \
case (PERSON, ORGANIZATION, LOCATION, PRODUCT, PROJECT, SERVICE, TEAM, EVENT, ERROR_CODE, \
CONCEPT, ...) and an identifier when the text gives one (an email address, a URL, an id), else \
null. Leave out pronouns and generic nouns.";

const RELATION_PROMPT: &str = "You extract a knowledge graph. Given the passages and their \
entities, list the relations the passages state between two of those entities: source and \
target exactly as named in the entity list, the predicate as a short verb phrase (\"works \
for\", \"is owned by\"), the sentence that states it as context, verbatim, and any date or \
period it holds for as temporal_details, else null. Only relations the text states.";

/// The passages of the worked example each call begins with, given as an earlier exchange:
/// small local models answer an empty list without one.
const EXAMPLE_PASSAGES: &str = "[0] Ada Lovelace worked with Charles Babbage in London on the \
Analytical Engine from 1842 to 1843.\n\n";
const EXAMPLE_SENTENCE: &str =
    "Ada Lovelace worked with Charles Babbage in London on the Analytical Engine from 1842 to 1843.";

/// The example's entities: as the entity call's example answer, and as the relation call's list.
const EXAMPLE_ENTITIES: [(&str, &str); 4] = [
    ("Ada Lovelace", "PERSON"),
    ("Charles Babbage", "PERSON"),
    ("London", "LOCATION"),
    ("Analytical Engine", "PRODUCT"),
];

/// An entity list as the relation call gives it.
fn entity_list<'a>(entities: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    entities
        .map(|(name, kind)| format!("- {name} ({kind})\n"))
        .collect()
}

fn relation_request(listed: &str, passages: &str) -> String {
    format!("Entities:\n{listed}\nPassages:\n{passages}")
}

/// The entity call's worked example: its request and answer.
fn entity_example() -> (String, Value) {
    let entities: Vec<Value> = EXAMPLE_ENTITIES
        .iter()
        .map(|(name, kind)| json!({"name": name, "type": kind, "identifier": null}))
        .collect();
    (EXAMPLE_PASSAGES.to_owned(), json!({ "entities": entities }))
}

/// The relation call's worked example: its request and answer.
fn relation_example() -> (String, Value) {
    let relation = |target: &str, predicate: &str| {
        json!({"source": "Ada Lovelace", "target": target, "predicate": predicate,
               "context": EXAMPLE_SENTENCE, "temporal_details": "from 1842 to 1843"})
    };
    (
        relation_request(
            &entity_list(EXAMPLE_ENTITIES.iter().copied()),
            EXAMPLE_PASSAGES,
        ),
        json!({"relations": [
            relation("Charles Babbage", "worked with"),
            relation("Analytical Engine", "worked on"),
        ]}),
    )
}

/// Lowercased, with every run of whitespace one space: how the model's words are looked for in
/// the passages.
fn folded(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Keeps of the model's answers what a batch's passages say, as a small model often adds what
/// they do not.
struct Grounding<'b, 'p> {
    passages: &'b [&'p Passage<'p>],
    /// The passages, [`folded`].
    text: String,
}

impl<'b, 'p> Grounding<'b, 'p> {
    /// The item's title counts as written.
    fn new(title: &str, passages: &'b [&'p Passage<'p>]) -> Self {
        let text = std::iter::once(title)
            .chain(passages.iter().map(|p| p.text))
            .map(folded)
            .collect::<Vec<_>>()
            .join("\n");
        Self { passages, text }
    }

    fn written(&self, words: &str) -> bool {
        let words = folded(words);
        !words.is_empty() && self.text.contains(&words)
    }

    /// The entities the passages write (by name, or by identifier), once each.
    fn entities(&self, entities: Vec<PayloadEntity>) -> Vec<PayloadEntity> {
        let mut seen = std::collections::HashSet::new();
        entities
            .into_iter()
            .filter(|e| {
                self.written(&e.name) || e.identifier.as_deref().is_some_and(|i| self.written(i))
            })
            .filter(|e| seen.insert(crate::entity_key(&e.name)))
            .collect()
    }

    /// The relations between two of `entities` that the passages state: the relation's context
    /// must be in them, or else the first sentence naming both ends stands for it (without one
    /// the relation is dropped); a date they do not give is dropped.
    fn relations(
        &self,
        entities: &[PayloadEntity],
        relations: Vec<PayloadRelation>,
    ) -> Vec<PayloadRelation> {
        let names: HashMap<String, String> = entities
            .iter()
            .map(|e| (crate::entity_key(&e.name), folded(&e.name)))
            .collect();
        relations
            .into_iter()
            .filter_map(|mut r| {
                let source = crate::entity_key(&r.source);
                let target = crate::entity_key(&r.target);
                if source == target {
                    return None;
                }
                let (source, target) = (names.get(&source)?, names.get(&target)?);
                if !r.context.as_deref().is_some_and(|c| self.written(c)) {
                    let sentence = self
                        .passages
                        .iter()
                        .flat_map(|p| crate::sentences(p.text))
                        .find(|s| {
                            let s = folded(s);
                            s.contains(source.as_str()) && s.contains(target.as_str())
                        })?;
                    r.context = Some(sentence.trim().to_owned());
                }
                r.temporal_details = r.temporal_details.take().filter(|t| self.written(t));
                Some(r)
            })
            .collect()
    }
}

fn entity_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["entities"],
        "properties": {"entities": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": false,
            "required": ["name", "type", "identifier"],
            "properties": {
                "name": {"type": "string"},
                "type": {"type": "string"},
                "identifier": {"type": ["string", "null"]}
            }
        }}}
    })
}

fn relation_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["relations"],
        "properties": {"relations": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": false,
            "required": ["source", "target", "predicate", "context", "temporal_details"],
            "properties": {
                "source": {"type": "string"},
                "target": {"type": "string"},
                "predicate": {"type": "string"},
                "context": {"type": "string"},
                "temporal_details": {"type": ["string", "null"]}
            }
        }}}
    })
}

impl LlmExtractor {
    pub fn new(client: Outbound, settings: LlmSettings, fallback: Arc<dyn GraphExtractor>) -> Self {
        Self {
            model: ChatModel::new(client, settings.clone()),
            settings,
            fallback,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The passages in batches of at most `batch_chars` (a longer passage is a batch alone),
    /// at most `max_batches`.
    fn batches<'p>(&self, passages: &'p [Passage<'p>]) -> Vec<Vec<&'p Passage<'p>>> {
        let mut batches: Vec<Vec<&Passage<'_>>> = Vec::new();
        let mut size = 0;
        for p in passages {
            let fits = batches
                .last()
                .is_some_and(|_| size + p.text.len() <= self.settings.batch_chars);
            if !fits {
                if batches.len() == self.settings.max_batches {
                    break;
                }
                batches.push(Vec::new());
                size = 0;
            }
            size += p.text.len();
            if let Some(batch) = batches.last_mut() {
                batch.push(p);
            }
        }
        batches
    }

    /// One item read by the model: entities then relations per batch, merged (entities by
    /// name) and checked as a `graph_payload`.
    async fn extract_with_model(
        &self,
        request: &ExtractRequest<'_>,
    ) -> Result<(ItemGraph, usize), ChatError> {
        let batches = self.batches(request.passages);
        let read: usize = batches.iter().map(Vec::len).sum();
        let mut payload = GraphPayload::default();
        for batch in &batches {
            let text: String = batch
                .iter()
                .map(|p| format!("[{}] {}\n\n", p.position, p.text))
                .collect();
            let text = if request.title.is_empty() {
                text
            } else {
                format!("Title: {}\n\n{text}", request.title)
            };
            let found = self
                .call(
                    request,
                    ENTITY_PROMPT,
                    entity_example(),
                    &text,
                    "entities",
                    entity_schema(),
                )
                .await?;
            let grounding = Grounding::new(request.title, batch);
            let entities: Vec<PayloadEntity> = found["entities"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    Some(PayloadEntity {
                        name: e["name"].as_str()?.trim().to_owned(),
                        kind: e["type"].as_str().map(str::to_owned),
                        namespace: None,
                        identifier: e["identifier"].as_str().map(str::to_owned),
                    })
                })
                .filter(|e| !e.name.is_empty())
                .collect();
            let entities = grounding.entities(entities);
            if entities.is_empty() {
                continue;
            }
            let listed = entity_list(
                entities
                    .iter()
                    .map(|e| (e.name.as_str(), e.kind.as_deref().unwrap_or("ENTITY"))),
            );
            let found = self
                .call(
                    request,
                    RELATION_PROMPT,
                    relation_example(),
                    &relation_request(&listed, &text),
                    "relations",
                    relation_schema(),
                )
                .await?;
            let relations: Vec<PayloadRelation> = found["relations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| serde_json::from_value::<PayloadRelation>(r.clone()).ok())
                .collect();
            let relations = grounding.relations(&entities, relations);
            // Within the payload limits as it grows: the rest of a long item is left out
            // rather than the whole answer refused.
            for e in entities {
                if payload.entities.len() >= crate::model::MAX_ENTITIES {
                    break;
                }
                payload
                    .entities
                    .entry(crate::entity_key(&e.name))
                    .or_insert(e);
            }
            let room = crate::model::MAX_RELATIONS.saturating_sub(payload.relations.len());
            payload.relations.extend(relations.into_iter().take(room));
        }
        let checked = payload
            .check()
            .map_err(|e| ChatError::Failed(format!("the model's graph is over a limit: {e}")))?;
        let mut graph = checked.payload.to_graph(request.passages);
        graph.origin = Origin::Extracted;
        for r in &mut graph.relations {
            r.confidence = LLM_CONFIDENCE;
        }
        Ok((graph, read))
    }

    /// One chat completion held to `schema`, its content parsed; cached by content hash within
    /// the item's database.
    async fn call(
        &self,
        owner: &ExtractRequest<'_>,
        system: &str,
        example: (String, Value),
        user: &str,
        name: &str,
        schema: Value,
    ) -> Result<Value, ChatError> {
        // The item's instructions go with every call (and so into the cache key).
        let system = &with_instructions(system, owner.instructions);
        let key: [u8; 32] = Sha256::new()
            .chain_update(owner.org.as_bytes())
            .chain_update([0])
            .chain_update(owner.database.as_bytes())
            .chain_update([0])
            .chain_update(self.settings.model.as_bytes())
            .chain_update([0])
            .chain_update(system.as_bytes())
            .chain_update([0])
            .chain_update(example.0.as_bytes())
            .chain_update([0])
            .chain_update(user.as_bytes())
            .finalize()
            .into();
        if let Some(answer) = self.cache.lock().ok().and_then(|c| c.get(&key)) {
            return Ok(answer);
        }
        let body = json!({
            "temperature": 0,
            "max_completion_tokens": self.settings.max_output_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": example.0},
                {"role": "assistant", "content": example.1.to_string()},
                {"role": "user", "content": user}
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": true, "schema": schema}
            }
        });
        let content = self.model.complete(body).await?;
        let content: Value = serde_json::from_str(&content)
            .map_err(|e| ChatError::Failed(format!("the model's content is not JSON: {e}")))?;
        if !content.is_object() {
            return Err(ChatError::Failed(
                "the model's content is not an object".into(),
            ));
        }
        if let Ok(mut cache) = self.cache.lock() {
            cache.put(key, content.clone());
        }
        Ok(content)
    }
}

#[async_trait]
impl GraphExtractor for LlmExtractor {
    async fn extract(&self, request: &ExtractRequest<'_>) -> Result<ItemGraph, GraphError> {
        match self.extract_with_model(request).await {
            Ok((graph, read)) if read == request.passages.len() => Ok(graph),
            Ok((mut graph, read)) => {
                // Passages past the item's cap are read by the rules.
                let rest = ExtractRequest {
                    passages: &request.passages[read..],
                    ..*request
                };
                let more = self.fallback.extract(&rest).await?;
                merge(&mut graph, more);
                Ok(graph)
            }
            Err(ChatError::Transient(why)) => {
                tracing::warn!(error = %why, code = "E6001", "the model endpoint stayed unusable; the rules read the item");
                metrics::counter!("engram_llm_fallbacks_total", "reason" => "transient")
                    .increment(1);
                self.fallback.extract(request).await
            }
            Err(ChatError::Failed(why)) => {
                tracing::warn!(error = %why, "the model gave no usable graph; the rules read the item");
                metrics::counter!("engram_llm_fallbacks_total", "reason" => "failed").increment(1);
                self.fallback.extract(request).await
            }
        }
    }
}

/// Appends `more` to `graph`, entities merged by key.
fn merge(graph: &mut ItemGraph, more: ItemGraph) {
    let mut index: BTreeMap<String, usize> = graph
        .entities
        .iter()
        .enumerate()
        .map(|(i, e)| (e.key.clone(), i))
        .collect();
    let mut moved = Vec::with_capacity(more.entities.len());
    for e in more.entities {
        let at = *index.entry(e.key.clone()).or_insert_with(|| {
            graph.entities.push(e);
            graph.entities.len() - 1
        });
        moved.push(at);
    }
    for mut r in more.relations {
        r.source = moved[r.source];
        r.target = moved[r.target];
        graph.relations.push(r);
    }
    for mut m in more.mentions {
        m.entity = moved[m.entity];
        graph.mentions.push(m);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::RuleExtractor;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::Json;

    /// A scripted OpenAI-compatible endpoint: it records every request and answers the
    /// entity and relation calls from a script, failing the first `failures` calls with
    /// `status`.
    /// Each request: its `authorization` header and body.
    type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

    #[derive(Clone, Default)]
    struct Endpoint {
        seen: Seen,
        failures: Arc<Mutex<(usize, u16)>>,
    }

    async fn complete(
        State(endpoint): State<Endpoint>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        endpoint.seen.lock().unwrap().push((auth, body.clone()));
        {
            let mut failures = endpoint.failures.lock().unwrap();
            if failures.0 > 0 {
                failures.0 -= 1;
                let status = StatusCode::from_u16(failures.1).unwrap();
                return (status, Json(json!({"error": {"message": "busy"}})));
            }
        }
        let content = match body["response_format"]["json_schema"]["name"].as_str() {
            Some("entities") => json!({"entities": [
                {"name": "Ana Ruiz", "type": "PERSON", "identifier": null},
                {"name": "Acme Corp", "type": "ORGANIZATION", "identifier": "acme.example"}
            ]}),
            _ => json!({"relations": [
                {"source": "Ana Ruiz", "target": "Acme Corp", "predicate": "works for",
                 "context": "Ana Ruiz works for Acme Corp", "temporal_details": "since 2021"},
                {"source": "Ana Ruiz", "target": "Nobody", "predicate": "knows",
                 "context": "", "temporal_details": null}
            ]}),
        };
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": content.to_string()}}]});
        (StatusCode::OK, Json(answer))
    }

    async fn serve(endpoint: Endpoint) -> String {
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(complete))
            .with_state(endpoint);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/v1")
    }

    fn extractor(base_url: String, max_batches: usize, attempts: u32) -> LlmExtractor {
        let client = Outbound::new(engram_outbound::AddressPolicy {
            allow_private: true,
        })
        .unwrap();
        let settings = LlmSettings {
            base_url,
            api_key: "sk-test".into(),
            model: "tiny-graph".into(),
            batch_chars: 200,
            max_batches,
            max_output_tokens: 512,
            timeout: std::time::Duration::from_secs(5),
            attempts,
            backoff: engram_types::Backoff {
                base: std::time::Duration::from_millis(1),
                max: std::time::Duration::from_millis(5),
                jitter: 0.0,
            },
        };
        LlmExtractor::new(client, settings, Arc::new(RuleExtractor))
    }

    const PASSAGES: [Passage<'static>; 2] = [
        Passage {
            position: 0,
            text: "Quarterly numbers for the northern region were flat.",
        },
        Passage {
            position: 1,
            text: "Ana Ruiz works for Acme Corp since 2021 and leads its Lisbon office.",
        },
    ];

    #[tokio::test]
    async fn entities_then_relations_checked_tied_to_passages_and_cached() {
        let endpoint = Endpoint::default();
        let llm = extractor(serve(endpoint.clone()).await, 8, 3);
        let request = ExtractRequest {
            org: "org-a",
            database: "db",
            title: "Staff",
            instructions: "",
            passages: &PASSAGES,
        };
        let graph = llm.extract(&request).await.unwrap();
        assert_eq!(graph.origin, Origin::Extracted);
        assert_eq!(
            graph.relations.len(),
            1,
            "the relation to an unknown entity is dropped"
        );
        let r = &graph.relations[0];
        assert_eq!(r.canonical_predicate, "WORKS_FOR");
        assert_eq!(r.passage, 1);
        assert_eq!(r.temporal_details.as_deref(), Some("since 2021"));
        assert!((r.confidence - LLM_CONFIDENCE).abs() < 1e-6);
        assert_eq!(graph.entities[r.target].key, "id:acme.example");
        assert_eq!(graph.entities[r.source].kind, "PERSON");

        let seen = endpoint.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "one batch: entities, then relations");
        for (auth, body) in &seen {
            assert_eq!(auth.as_deref(), Some("Bearer sk-test"));
            assert_eq!(body["model"], "tiny-graph");
            assert_eq!(body["temperature"], 0);
            assert_eq!(body["max_completion_tokens"], 512);
            assert_eq!(body["response_format"]["type"], "json_schema");
            assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        }
        assert_eq!(
            seen[0].1["response_format"]["json_schema"]["name"],
            "entities"
        );
        // Each call begins with its worked example, as an earlier exchange.
        let messages = seen[1].1["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        let example: Value =
            serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
        assert_eq!(example["relations"][0]["target"], "Charles Babbage");
        let asked = messages[3]["content"].as_str().unwrap();
        assert!(asked.contains("- Ana Ruiz (PERSON)"), "{asked}");
        assert!(
            asked.contains("[1] Ana Ruiz works for Acme Corp"),
            "{asked}"
        );

        // The same content again is answered from the cache, within its database only: the
        // same text in another organization's database (or another database) asks the model.
        let again = llm.extract(&request).await.unwrap();
        assert_eq!(again, graph);
        assert_eq!(endpoint.seen.lock().unwrap().len(), 2);
        let elsewhere = ExtractRequest {
            org: "org-b",
            ..request
        };
        assert_eq!(llm.extract(&elsewhere).await.unwrap(), graph);
        assert_eq!(endpoint.seen.lock().unwrap().len(), 4);
        let other_database = ExtractRequest {
            database: "db-2",
            ..request
        };
        llm.extract(&other_database).await.unwrap();
        assert_eq!(endpoint.seen.lock().unwrap().len(), 6);
        // The item's instructions go with both calls (and make their own cache entries).
        let instructed = ExtractRequest {
            instructions: "Leave out phone numbers.",
            ..request
        };
        llm.extract(&instructed).await.unwrap();
        let seen = endpoint.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 8);
        for (_, body) in &seen[6..] {
            let system = body["messages"][0]["content"].as_str().unwrap();
            assert!(system.ends_with("\nLeave out phone numbers."), "{system}");
        }
        assert!(!seen[0].1["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("instructions"));
        llm.extract(&elsewhere).await.unwrap();
        assert_eq!(endpoint.seen.lock().unwrap().len(), 8, "still cached");
    }

    #[tokio::test]
    async fn busy_answers_are_retried_and_an_unusable_endpoint_leaves_the_item_to_the_rules() {
        let endpoint = Endpoint::default();
        *endpoint.failures.lock().unwrap() = (2, 429);
        let llm = extractor(serve(endpoint.clone()).await, 8, 3);
        let request = ExtractRequest {
            org: "org-a",
            database: "db",
            title: "",
            instructions: "",
            passages: &PASSAGES,
        };
        let graph = llm.extract(&request).await.unwrap();
        assert!((graph.relations[0].confidence - LLM_CONFIDENCE).abs() < 1e-6);
        assert_eq!(
            endpoint.seen.lock().unwrap().len(),
            4,
            "two 429s, then both calls"
        );

        let down = Endpoint::default();
        *down.failures.lock().unwrap() = (usize::MAX, 503);
        let llm = extractor(serve(down.clone()).await, 8, 3);
        let graph = llm.extract(&request).await.unwrap();
        assert_eq!(graph, RuleExtractor.extract(&request).await.unwrap());
        assert_eq!(
            down.seen.lock().unwrap().len(),
            3,
            "three tries, then the rules"
        );

        // An endpoint nobody listens on is as unusable.
        let llm = extractor("http://127.0.0.1:9/v1".into(), 8, 2);
        let graph = llm.extract(&request).await.unwrap();
        assert_eq!(graph, RuleExtractor.extract(&request).await.unwrap());
    }

    #[tokio::test]
    async fn passages_past_the_cap_are_read_by_the_rules() {
        let endpoint = Endpoint::default();
        let llm = extractor(serve(endpoint.clone()).await, 1, 3);
        let passages = [
            PASSAGES[1],
            Passage {
                position: 1,
                text: &"padding words ".repeat(20),
            },
            Passage {
                position: 2,
                text: "Maria Lopez works for Globex Corporation.",
            },
        ];
        let request = ExtractRequest {
            org: "org-a",
            database: "db",
            title: "",
            instructions: "",
            passages: &passages,
        };
        let graph = llm.extract(&request).await.unwrap();
        assert_eq!(
            endpoint.seen.lock().unwrap().len(),
            2,
            "one batch read by the model"
        );
        assert!(
            graph.entities.iter().any(|e| e.name == "maria lopez"),
            "the rules read the rest: {:?}",
            graph.entities
        );
        assert!(graph
            .relations
            .iter()
            .any(|r| r.canonical_predicate == "WORKS_FOR"
                && (r.confidence - LLM_CONFIDENCE).abs() < 1e-6));
    }

    /// What a small model adds that the passages do not say is left out: entities they never
    /// write, relations to them or from an entity to itself, a context they do not hold (a
    /// sentence naming both ends stands for it), dates they do not give.
    #[test]
    fn answers_are_held_to_what_the_passages_say() {
        let passages = [
            Passage {
                position: 0,
                text: "Iris Okoye has been guiding Teo Brandt through his first quarter.",
            },
            Passage {
                position: 1,
                text: "Teo  Brandt joined Northwind Labs in March 2024. He likes it.",
            },
        ];
        let batch: Vec<&Passage<'_>> = passages.iter().collect();
        let grounding = Grounding::new("Team note", &batch);
        let entity = |name: &str, identifier: Option<&str>| PayloadEntity {
            name: name.into(),
            kind: Some("PERSON".into()),
            namespace: None,
            identifier: identifier.map(str::to_owned),
        };
        let entities = grounding.entities(vec![
            entity("Iris Okoye", None),
            entity("teo brandt", None),
            entity("Teo Brandt", None),
            entity("Northwind Labs", None),
            entity("Lisbon", None),
            entity("Team Note", None),
            entity("TB", Some("Teo Brandt")),
        ]);
        let names: Vec<&str> = entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Iris Okoye",
                "teo brandt",
                "Northwind Labs",
                "Team Note",
                "TB"
            ],
            "written (any case or spacing, the title too, or by identifier), once each"
        );
        let relation =
            |source: &str, target: &str, context: &str, when: Option<&str>| PayloadRelation {
                source: source.into(),
                target: target.into(),
                predicate: "relates to".into(),
                context: Some(context.into()),
                temporal_details: when.map(str::to_owned),
            };
        let relations = grounding.relations(
            &entities,
            vec![
                // Stated as written: kept whole.
                relation(
                    "Iris Okoye",
                    "Teo Brandt",
                    "iris okoye has been guiding teo brandt",
                    None,
                ),
                // A context the passages do not hold: the sentence naming both stands for it,
                // and a date they do not give is dropped.
                relation(
                    "Teo Brandt",
                    "Northwind Labs",
                    "Teo Brandt founded Northwind Labs.",
                    Some("1999"),
                ),
                relation("Teo Brandt", "Northwind Labs", "joined", Some("March 2024")),
                // No sentence names both; an end the passages never write; one entity twice.
                relation(
                    "Iris Okoye",
                    "Northwind Labs",
                    "Iris runs Northwind Labs",
                    None,
                ),
                relation("Iris Okoye", "Lisbon", "Iris Okoye lives in Lisbon", None),
                relation("Teo Brandt", "teo  brandt", "Teo Brandt", None),
            ],
        );
        let kept: Vec<(&str, Option<&str>, Option<&str>)> = relations
            .iter()
            .map(|r| {
                (
                    r.target.as_str(),
                    r.context.as_deref(),
                    r.temporal_details.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            kept,
            [
                (
                    "Teo Brandt",
                    Some("iris okoye has been guiding teo brandt"),
                    None
                ),
                (
                    "Northwind Labs",
                    Some("Teo  Brandt joined Northwind Labs in March 2024."),
                    None
                ),
                ("Northwind Labs", Some("joined"), Some("March 2024")),
            ]
        );
    }
}
