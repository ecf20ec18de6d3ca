//! Feedback about answers already given, kept against the `request_id` those answers carried
//! (`meta.request_id`), for retrieval-quality work. It never changes an answer.

use engram_store::FeedbackRecord;
use engram_types::limits::{FEEDBACK_LIST_MAX, FEEDBACK_TEXT_MAX_CHARS, ITEM_ID_MAX_CHARS};
use serde_json::{json, Map, Value};

use crate::ingest::parse_collection;
use crate::{parse_database_name, App, AppError, AppResult, Principal};
use engram_types::Scope;

/// What the caller knows the right answer to be.
#[derive(Debug, Clone, Default)]
pub struct GroundTruth {
    pub answer: Option<String>,
    pub source_ids: Vec<String>,
}

/// One feedback submission as a client sends it.
#[derive(Debug, Clone, Default)]
pub struct FeedbackInput {
    pub request_id: String,
    pub database: Option<String>,
    pub collection: Option<String>,
    pub feedback: Option<String>,
    /// `positive`, `negative` or `neutral`.
    pub rating: Option<String>,
    /// `user` (default) or `agent`.
    pub source: Option<String>,
    pub ground_truth: Option<GroundTruth>,
    pub metadata: Map<String, Value>,
}

const RATINGS: [&str; 3] = ["positive", "negative", "neutral"];
const SOURCES: [&str; 2] = ["user", "agent"];

fn too_long(field: &str, text: &str) -> AppResult<()> {
    if text.chars().count() > FEEDBACK_TEXT_MAX_CHARS {
        return Err(AppError::InvalidParameters(format!(
            "`{field}` is longer than {FEEDBACK_TEXT_MAX_CHARS} characters"
        )));
    }
    Ok(())
}

fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> AppResult<()> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(AppError::Validation(format!(
            "`{field}` must be one of {}, not `{v}`",
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
}

impl FeedbackInput {
    /// Checks the submission on its own (no store access) and gives the body to keep.
    fn body(&self) -> AppResult<Value> {
        let request_id = self.request_id.trim();
        if request_id.is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required field `request_id` (the `meta.request_id` of the answer)".into(),
            ));
        }
        if request_id.chars().count() > ITEM_ID_MAX_CHARS {
            return Err(AppError::InvalidParameters(format!(
                "`request_id` is longer than {ITEM_ID_MAX_CHARS} characters"
            )));
        }
        one_of("rating", self.rating.as_deref(), &RATINGS)?;
        one_of("source", self.source.as_deref(), &SOURCES)?;
        let comment = self.feedback.as_deref().map(str::trim).unwrap_or_default();
        too_long("feedback", comment)?;
        if let Some(truth) = &self.ground_truth {
            let answer = truth.answer.as_deref().map(str::trim).unwrap_or_default();
            if answer.is_empty() && truth.source_ids.is_empty() {
                return Err(AppError::Validation(
                    "`ground_truth` needs an `answer`, `source_ids` or both".into(),
                ));
            }
            too_long("ground_truth.answer", answer)?;
            if truth.source_ids.len() > FEEDBACK_LIST_MAX {
                return Err(AppError::InvalidParameters(format!(
                    "`ground_truth.source_ids` names more than {FEEDBACK_LIST_MAX} sources"
                )));
            }
        } else if comment.is_empty() {
            return Err(AppError::Validation(
                "send `feedback` (a comment), `ground_truth` or both".into(),
            ));
        }
        if self.metadata.len() > FEEDBACK_LIST_MAX {
            return Err(AppError::InvalidParameters(format!(
                "`metadata` holds more than {FEEDBACK_LIST_MAX} entries"
            )));
        }
        for (key, value) in &self.metadata {
            let text = value.as_str().ok_or_else(|| {
                AppError::Validation(format!("`metadata.{key}` must be a string"))
            })?;
            too_long(&format!("metadata.{key}"), text)?;
        }
        Ok(json!({
            "feedback": comment,
            "rating": self.rating,
            "source": self.source.as_deref().unwrap_or("user"),
            "ground_truth": self.ground_truth.as_ref().map(|t| json!({
                "answer": t.answer,
                "source_ids": t.source_ids,
            })),
            "metadata": self.metadata,
        }))
    }
}

impl App {
    /// Keeps one feedback submission. A `database`, when named, must be one the key may use;
    /// a `collection` needs its `database`.
    pub async fn submit_feedback(
        &self,
        who: &Principal,
        input: FeedbackInput,
    ) -> AppResult<FeedbackRecord> {
        who.require(Scope::Write)?;
        let body = input.body()?;
        let database = input.database.as_deref().filter(|d| !d.is_empty());
        let collection = input.collection.as_deref().filter(|c| !c.is_empty());
        let (database, collection) = match (database, collection) {
            (None, Some(collection)) => {
                return Err(AppError::InvalidParameters(format!(
                    "collection `{collection}` belongs to a database: send `database` with it"
                )))
            }
            (None, None) => (String::new(), String::new()),
            (Some(name), collection) => {
                let name = parse_database_name("database", name)?;
                let db = self.authorize_database(who, &name, Scope::Write).await?;
                let collection = match collection {
                    Some(c) => parse_collection(&db, Some(c), "collection")?.to_string(),
                    None => String::new(),
                };
                (db.name.to_string(), collection)
            }
        };
        let record = FeedbackRecord {
            feedback_id: format!("fb_{}", uuid::Uuid::now_v7().simple()),
            org: who.org.clone(),
            request_id: input.request_id.trim().to_owned(),
            database,
            collection,
            body,
            created_at: self.now(),
        };
        self.store().insert_feedback(&record).await?;
        tracing::info!(org = %who.org, request_id = %record.request_id, feedback_id = %record.feedback_id, "feedback recorded");
        Ok(record)
    }

    /// The organization's feedback on one answer, oldest first; a key restricted to some
    /// databases sees only feedback given for them.
    pub async fn feedback_for(
        &self,
        who: &Principal,
        request_id: &str,
    ) -> AppResult<Vec<FeedbackRecord>> {
        who.require(Scope::Read)?;
        if request_id.trim().is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required parameter `request_id`".into(),
            ));
        }
        let all = self
            .store()
            .feedback_for(&who.org, request_id.trim())
            .await?;
        Ok(all
            .into_iter()
            .filter(|f| {
                who.databases.is_none()
                    || engram_types::DatabaseName::parse(&f.database)
                        .is_ok_and(|name| who.may_use(&name))
            })
            .collect())
    }
}
