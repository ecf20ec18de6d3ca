//! Ingestion: validate a request as a whole (schema values, array lengths, memory content), then
//! store and queue every acceptable item in one transaction. Items refused on their own (an
//! unsupported file, an id that exists without upsert) get their own result entry and never
//! affect the others.

use engram_graph::{CheckedPayload, GraphPayload};
use engram_store::{DatabaseRecord, EnqueueOutcome, ItemFields, ItemOrigin, NewItem};
use engram_types::limits::{
    INSTRUCTIONS_MAX_CHARS, ITEMS_PER_REQUEST_MAX, ITEM_ID_MAX_CHARS, ITEM_LINKS_MAX,
    ITEM_METADATA_KEYS_MAX, ITEM_METADATA_MAX_BYTES, TITLE_MAX_CHARS,
};
use engram_types::{CollectionName, IndexingStatus, ItemErrorCode, ItemKind, UnixMs};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// An uploaded file.
#[derive(Debug, Clone)]
pub struct UploadedFile {
    pub filename: String,
    pub media_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// Per-file metadata (`document_metadata` / legacy `file_metadata`), one per file.
#[derive(Debug, Clone, Default)]
pub struct FileMetadata {
    pub id: Option<String>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    /// Links to other sources (`{"ids": [...]}`); null when none.
    pub relations: Value,
}

/// Pre-extracted app content (`app_knowledge`).
#[derive(Debug, Clone, Default)]
pub struct AppSource {
    pub id: Option<String>,
    pub database: Option<String>,
    pub collection: Option<String>,
    pub title: String,
    pub source_type: String,
    pub description: String,
    pub note: String,
    pub url: String,
    pub timestamp: String,
    pub text: String,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub attachments: Value,
    pub relations: Value,
    /// Principals who may retrieve it; `None`: everyone.
    pub acl: Option<Vec<String>>,
}

/// One memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryInput {
    pub id: Option<String>,
    pub title: String,
    pub text: Option<String>,
    pub pairs: Option<Vec<(String, String)>>,
    pub infer: bool,
    /// How inference should read this memory, on top of the database's and collection's.
    pub custom_instructions: Option<String>,
    pub user_name: Option<String>,
    /// Time to live in seconds.
    pub expiry_time: Option<i64>,
    /// When the memory happened (RFC 3339 or a date); what its relative dates ("yesterday")
    /// resolve against in temporal reasoning.
    pub timestamp: Option<String>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    /// Links to other memories (`{"ids": [...]}`); null when none.
    pub relations: Value,
}

impl MemoryInput {
    /// The fields of this memory that do nothing as sent, with why: what only inference
    /// reads, when the memory is not inferred (`custom_instructions` is also read by graph
    /// extraction with a model: `graph_reads_instructions`).
    pub fn inert(&self, graph_reads_instructions: bool) -> Vec<(&'static str, &'static str)> {
        let mut inert = Vec::new();
        if !self.infer {
            if !graph_reads_instructions
                && self
                    .custom_instructions
                    .as_deref()
                    .is_some_and(|c| !c.is_empty())
            {
                inert.push((
                    "custom_instructions",
                    "read by inference (`infer: true`) and by graph extraction with a model, neither of which runs here",
                ));
            }
            if self.user_name.as_deref().is_some_and(|u| !u.is_empty()) {
                inert.push(("user_name", "read only by inference, with `infer: true`"));
            }
        }
        // A knowledge item's relations are kept as given and listed back; a memory's are
        // read for their `ids` alone.
        if self
            .relations
            .as_object()
            .is_some_and(|r| r.keys().any(|k| k != "ids"))
        {
            inert.push(("relations", "a memory's relations are read for `ids` alone"));
        }
        inert
    }
}

/// An object a connector synced, as an item.
#[derive(Debug, Clone)]
pub(crate) struct SyncedItem {
    pub id: String,
    pub collection: CollectionName,
    pub title: String,
    pub file_name: String,
    pub url: String,
    pub timestamp: String,
    pub content: engram_connectors::Content,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    /// The connector's and resource's instructions (the database's are added on the way in).
    pub instructions: String,
}

/// Knowledge to ingest: files, app content, or both.
#[derive(Debug, Clone, Default)]
pub struct KnowledgeRequest {
    pub collection: Option<String>,
    pub upsert: bool,
    pub files: Vec<UploadedFile>,
    pub file_metadata: Option<Vec<FileMetadata>>,
    /// Name of the form field carrying `file_metadata`, for messages.
    pub file_metadata_field: &'static str,
    pub app_knowledge: Vec<AppSource>,
    /// The client's own graphs (`graph_payload`): a JSON object of source id to graph.
    pub graph_payload: Option<String>,
}

/// Memories to ingest.
#[derive(Debug, Clone, Default)]
pub struct MemoryRequest {
    pub collection: Option<String>,
    pub upsert: bool,
    pub memories: Vec<MemoryInput>,
}

/// The outcome for one item of an ingest request.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemResult {
    pub id: String,
    pub filename: String,
    pub title: String,
    /// `Some(Queued)` when accepted; `None` when refused (see `error`).
    pub status: Option<IndexingStatus>,
    pub infer: bool,
    /// Why the item was refused; empty when accepted.
    pub error: String,
    /// The `E####` code of a refused file; empty otherwise.
    pub error_code: String,
    /// Relations of the client's own graph that will be stored.
    pub relations_created: u32,
    /// Why relations of the client's own graph were refused; empty when none were.
    pub relations_error: String,
}

impl ItemResult {
    fn accepted(id: String, filename: String, title: String, infer: bool) -> Self {
        Self {
            id,
            filename,
            title,
            status: Some(IndexingStatus::Queued),
            infer,
            error: String::new(),
            error_code: String::new(),
            relations_created: 0,
            relations_error: String::new(),
        }
    }

    fn refused(mut self, code: &str, error: String) -> Self {
        self.status = None;
        self.error_code = code.to_owned();
        self.error = error;
        self
    }
}

/// The outcome of an ingest request.
#[derive(Debug, Clone)]
pub struct IngestOutcome {
    pub database: DatabaseRecord,
    pub collection: CollectionName,
    pub results: Vec<ItemResult>,
}

impl IngestOutcome {
    pub fn success_count(&self) -> usize {
        self.results.iter().filter(|r| r.status.is_some()).count()
    }

    pub fn failed_count(&self) -> usize {
        self.results.len() - self.success_count()
    }
}

fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Validates a given item id: 1-256 characters, no control characters and no `,` (status is
/// polled with a comma-separated list of ids, so an id with a comma could never be polled).
fn item_id(given: Option<String>) -> AppResult<String> {
    match given.filter(|id| !id.is_empty()) {
        None => Ok(new_id()),
        Some(id)
            if id.chars().count() <= ITEM_ID_MAX_CHARS
                && !id.chars().any(|c| c.is_control() || c == ',') =>
        {
            Ok(id)
        }
        Some(_) => Err(AppError::Validation(format!(
            "item `id` must be 1-{ITEM_ID_MAX_CHARS} characters without control characters or `,`"
        ))),
    }
}

/// The request carries at most [`ITEMS_PER_REQUEST_MAX`] items.
fn check_item_count(count: usize) -> AppResult<()> {
    if count > ITEMS_PER_REQUEST_MAX {
        return Err(AppError::InvalidParameters(format!(
            "{count} items in one request; at most {ITEMS_PER_REQUEST_MAX} may be sent at once"
        )));
    }
    Ok(())
}

/// An item's title and metadata are within their limits, checked before anything is stored.
pub(crate) fn check_item_limits(
    whose: &str,
    title: &str,
    metadata: &Map<String, Value>,
    additional_metadata: &Map<String, Value>,
) -> AppResult<()> {
    if title.chars().count() > TITLE_MAX_CHARS {
        return Err(AppError::InvalidParameters(format!(
            "{whose}: the title is longer than {TITLE_MAX_CHARS} characters"
        )));
    }
    for (name, map) in [
        ("metadata", metadata),
        ("additional_metadata", additional_metadata),
    ] {
        if map.len() > ITEM_METADATA_KEYS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "{whose}: `{name}` has {} keys; at most {ITEM_METADATA_KEYS_MAX} are allowed",
                map.len()
            )));
        }
    }
    let bytes = serde_json::to_vec(metadata).map_or(usize::MAX, |b| b.len())
        + serde_json::to_vec(additional_metadata).map_or(usize::MAX, |b| b.len());
    if bytes > ITEM_METADATA_MAX_BYTES {
        return Err(AppError::InvalidParameters(format!(
            "{whose}: metadata takes {bytes} bytes; at most {ITEM_METADATA_MAX_BYTES} are allowed"
        )));
    }
    Ok(())
}

pub(crate) fn parse_collection(
    db: &DatabaseRecord,
    given: Option<&str>,
    field: &'static str,
) -> AppResult<CollectionName> {
    match given.filter(|c| !c.is_empty()) {
        None => Ok(db.default_collection.clone()),
        Some(name) => {
            CollectionName::parse(name).map_err(|reason| AppError::InvalidName { field, reason })
        }
    }
}

pub(crate) fn check_metadata(
    db: &DatabaseRecord,
    values: &Map<String, Value>,
    whose: &str,
) -> AppResult<()> {
    db.schema
        .check_values(values)
        .map_err(|e| AppError::Validation(format!("{whose}: {e}")))
}

/// An item's `relations`: absent or an object whose `ids` (when given) are at most
/// [`ITEM_LINKS_MAX`] item ids; stored as given.
fn check_relations(whose: &str, relations: Value) -> AppResult<Value> {
    let object = match relations {
        Value::Null => return Ok(Value::Object(Map::new())),
        Value::Object(object) => object,
        _ => {
            return Err(AppError::Validation(format!(
                "{whose}.relations must be an object such as {{\"ids\": [\"other-id\"]}}"
            )))
        }
    };
    match object.get("ids") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ids)) => {
            if ids.len() > ITEM_LINKS_MAX {
                return Err(AppError::InvalidParameters(format!(
                    "{whose}.relations.ids has {} ids; at most {ITEM_LINKS_MAX} are allowed",
                    ids.len()
                )));
            }
            for id in ids {
                let valid = id.as_str().is_some_and(|id| {
                    !id.is_empty()
                        && id.chars().count() <= ITEM_ID_MAX_CHARS
                        && !id.chars().any(char::is_control)
                });
                if !valid {
                    return Err(AppError::Validation(format!(
                        "{whose}.relations.ids must hold item ids (strings of 1-{ITEM_ID_MAX_CHARS} characters)"
                    )));
                }
            }
        }
        Some(_) => {
            return Err(AppError::Validation(format!(
                "{whose}.relations.ids must be an array of item ids"
            )))
        }
    }
    Ok(Value::Object(object))
}

/// The client's own graphs of a knowledge request, checked: a JSON object of source id to
/// graph, each id one of the request's sources, each graph within the limits (see
/// [`GraphPayload::check`]); `null` for a source drops the graph it was given before, so it
/// is extracted again (`None` here).
fn graph_payloads(
    given: Option<&str>,
    ids: &std::collections::HashSet<&str>,
) -> AppResult<BTreeMap<String, Option<CheckedPayload>>> {
    let Some(text) = given.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(BTreeMap::new());
    };
    let graphs: BTreeMap<String, Option<GraphPayload>> =
        serde_json::from_str(text).map_err(|e| {
            AppError::InvalidParameters(format!(
            "`graph_payload` must be a JSON object of source id to {{entities, relations}}: {e}"
        ))
        })?;
    graphs
        .into_iter()
        .map(|(id, graph)| {
            if !ids.contains(id.as_str()) {
                return Err(AppError::InvalidParameters(format!(
                    "`graph_payload` names `{id}`, which is not the id of a source in this request"
                )));
            }
            let checked = graph.map(GraphPayload::check).transpose().map_err(|e| {
                AppError::InvalidParameters(format!("`graph_payload` of `{id}`: {e}"))
            })?;
            Ok((id, checked))
        })
        .collect()
}

/// The items of one ingest call to store, each with its result, in request order; refused
/// items have a result only.
#[derive(Default)]
struct Batch {
    results: Vec<ItemResult>,
    /// Each item with the position of its result.
    items: Vec<(usize, NewItem)>,
}

impl Batch {
    fn accept(&mut self, result: ItemResult, item: NewItem) {
        self.items.push((self.results.len(), item));
        self.results.push(result);
    }

    /// Accepts an item with the client's own graph of it, when the request gave one.
    fn accept_with_graph(
        &mut self,
        mut result: ItemResult,
        mut item: NewItem,
        graphs: &mut BTreeMap<String, Option<CheckedPayload>>,
    ) {
        match graphs.remove(&item.id) {
            Some(Some(checked)) => {
                result.relations_created = checked.relations_created();
                result.relations_error = checked.relations_error();
                item.graph_payload = serde_json::to_string(&checked.payload).ok();
            }
            // An empty payload drops the one the item had.
            Some(None) => item.graph_payload = Some(String::new()),
            None => {}
        }
        self.accept(result, item);
    }

    fn refuse(&mut self, result: ItemResult) {
        self.results.push(result);
    }
}

/// One `file_metadata` entry per file (defaults when none were sent), each checked against the
/// schema; refused as a whole when there is nothing to ingest or the counts differ.
fn file_metadata(db: &DatabaseRecord, request: &KnowledgeRequest) -> AppResult<Vec<FileMetadata>> {
    if request.files.is_empty() && request.app_knowledge.is_empty() {
        return Err(AppError::InvalidParameters(
            "nothing to ingest: send `documents` and/or `app_knowledge`".into(),
        ));
    }
    let field = request.file_metadata_field;
    let metadata = match &request.file_metadata {
        Some(list) if list.len() != request.files.len() => {
            return Err(AppError::Validation(format!(
                "`{field}` has {} entries but {} files were sent; send one entry per file",
                list.len(),
                request.files.len()
            )))
        }
        Some(list) => list.clone(),
        None => vec![FileMetadata::default(); request.files.len()],
    };
    for (i, (meta, file)) in metadata.iter().zip(&request.files).enumerate() {
        let whose = format!("{field}[{i}]");
        check_item_limits(
            &whose,
            &file.filename,
            &meta.metadata,
            &meta.additional_metadata,
        )?;
        check_metadata(db, &meta.metadata, &format!("{whose}.metadata"))?;
    }
    Ok(metadata)
}

/// Each file with its detected format (sniffing reads whole files: off the async runtime).
async fn sniff(
    files: Vec<UploadedFile>,
) -> AppResult<
    Vec<(
        UploadedFile,
        Result<engram_parse::Format, engram_parse::Unsupported>,
    )>,
> {
    tokio::task::spawn_blocking(move || {
        files
            .into_iter()
            .map(|f| {
                let format = engram_parse::detect(&f.bytes, &f.filename, f.media_type.as_deref());
                (f, format)
            })
            .collect()
    })
    .await
    .map_err(AppError::from)
}

/// The fields every item starts from: its schema values and free-form metadata, no
/// attachments, no relations.
fn fields(metadata: Map<String, Value>, additional_metadata: Map<String, Value>) -> ItemFields {
    ItemFields {
        metadata: Value::Object(metadata),
        additional_metadata: Value::Object(additional_metadata),
        attachments: Value::Array(Vec::new()),
        relations: Value::Object(Map::new()),
        ..ItemFields::default()
    }
}

/// An uploaded file: its bytes are the payload, parsed when indexed.
fn file_item(
    collection: &CollectionName,
    id: String,
    file: UploadedFile,
    meta: FileMetadata,
    format: engram_parse::Format,
) -> NewItem {
    NewItem {
        collection: collection.clone(),
        id,
        kind: ItemKind::Knowledge,
        origin: ItemOrigin::File,
        fields: ItemFields {
            filename: file.filename.clone(),
            media_type: format.media_type().to_owned(),
            title: file.filename,
            relations: meta.relations,
            ..fields(meta.metadata, meta.additional_metadata)
        },
        payload: Some(file.bytes),
        graph_payload: None,
    }
}

/// Pre-extracted app content: its text is indexed as given.
fn app_item(collection: CollectionName, id: String, app: AppSource) -> NewItem {
    let base = fields(app.metadata, app.additional_metadata);
    NewItem {
        collection,
        id,
        kind: ItemKind::Knowledge,
        origin: ItemOrigin::App,
        fields: ItemFields {
            title: app.title,
            source_type: app.source_type,
            description: app.description,
            note: app.note,
            url: app.url,
            timestamp: app.timestamp,
            text: Some(app.text),
            attachments: if app.attachments.is_array() {
                app.attachments
            } else {
                base.attachments.clone()
            },
            relations: app.relations,
            ..base
        },
        payload: None,
        graph_payload: None,
    }
}

/// A memory of one user (default `User`), expiring at `expires_at` when given.
fn memory_item(
    collection: &CollectionName,
    id: String,
    memory: MemoryInput,
    text: String,
    expires_at: Option<UnixMs>,
) -> NewItem {
    NewItem {
        collection: collection.clone(),
        id,
        kind: ItemKind::Memory,
        origin: ItemOrigin::Memory,
        fields: ItemFields {
            title: memory.title,
            text: Some(text),
            user_name: memory
                .user_name
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "User".into()),
            infer: memory.infer,
            timestamp: memory.timestamp.unwrap_or_default(),
            instructions: memory.custom_instructions.unwrap_or_default(),
            expires_at,
            relations: memory.relations,
            ..fields(memory.metadata, memory.additional_metadata)
        },
        payload: None,
        graph_payload: None,
    }
}

fn memory_text(memory: &MemoryInput, index: usize) -> AppResult<String> {
    let text = memory
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let pairs = memory.pairs.as_deref().filter(|p| !p.is_empty());
    match (text, pairs) {
        (Some(text), None) => Ok(text.to_owned()),
        (None, Some(pairs)) => Ok(pairs
            .iter()
            .map(|(user, assistant)| format!("User: {user}\nAssistant: {assistant}"))
            .collect::<Vec<_>>()
            .join("\n\n")),
        (Some(_), Some(_)) => Err(AppError::Validation(format!(
            "memories[{index}]: give either `text` or `user_assistant_pairs`, not both"
        ))),
        (None, None) => Err(AppError::Validation(format!(
            "memories[{index}]: a memory needs `text` or `user_assistant_pairs`"
        ))),
    }
}

impl App {
    /// Ingests files and app content into a database.
    pub async fn ingest_knowledge(
        &self,
        who: &Principal,
        database: &engram_types::DatabaseName,
        request: KnowledgeRequest,
    ) -> AppResult<IngestOutcome> {
        who.require(Scope::Write)?;
        check_item_count(request.files.len() + request.app_knowledge.len())?;
        let db = self.authorize_database(who, database, Scope::Write).await?;
        let collection = parse_collection(&db, request.collection.as_deref(), "collection")?;
        let mut metadata = file_metadata(&db, &request)?;
        let mut request = request;
        for (i, meta) in metadata.iter_mut().enumerate() {
            let whose = format!("{}[{i}]", request.file_metadata_field);
            meta.relations = check_relations(&whose, std::mem::take(&mut meta.relations))?;
        }
        for (i, app) in request.app_knowledge.iter_mut().enumerate() {
            let whose = format!("app_knowledge[{i}]");
            // The access rule is kept with the free-form metadata, within its limits.
            if let Some(acl) = app.acl.take() {
                let rule = crate::filters::access_rule(&format!("{whose}.acl"), acl)?;
                app.additional_metadata
                    .insert(crate::filters::ACL_FIELD.to_owned(), Value::from(rule));
            }
            check_item_limits(&whose, &app.title, &app.metadata, &app.additional_metadata)?;
            check_metadata(&db, &app.metadata, &format!("{whose}.metadata"))?;
            app.relations = check_relations(&whose, std::mem::take(&mut app.relations))?;
        }
        let given_ids: std::collections::HashSet<&str> = metadata
            .iter()
            .filter_map(|m| m.id.as_deref())
            .chain(request.app_knowledge.iter().filter_map(|a| a.id.as_deref()))
            .collect();
        let mut graphs = graph_payloads(request.graph_payload.as_deref(), &given_ids)?;
        let mut batch = Batch::default();
        for ((file, detected), meta) in sniff(request.files).await?.into_iter().zip(metadata) {
            let id = item_id(meta.id.clone())?;
            let result = ItemResult::accepted(
                id.clone(),
                file.filename.clone(),
                file.filename.clone(),
                false,
            );
            match detected {
                Ok(format) => {
                    let item = file_item(&collection, id, file, meta, format);
                    batch.accept_with_graph(result, item, &mut graphs);
                }
                Err(unsupported) => {
                    let code = ItemErrorCode::UnsupportedFormat.as_str();
                    let message = format!("{code}: unsupported file format: {unsupported}");
                    batch.refuse(result.refused(code, message));
                }
            }
        }
        for app in request.app_knowledge {
            let id = item_id(app.id.clone())?;
            let result = ItemResult::accepted(id.clone(), String::new(), app.title.clone(), false);
            if app
                .database
                .as_deref()
                .is_some_and(|d| !d.is_empty() && d != db.name.as_str())
            {
                let message = format!("app_knowledge item `{id}` names another database");
                batch.refuse(result.refused("", message));
                continue;
            }
            if let Some(refusal) = self.over_text_budget(&id, app.text.len()) {
                batch.refuse(result.refused(ItemErrorCode::OverBudget.as_str(), refusal));
                continue;
            }
            let item_collection = match app.collection.as_deref() {
                Some(c) if !c.is_empty() => {
                    parse_collection(&db, Some(c), "app_knowledge.collection")?
                }
                _ => collection.clone(),
            };
            batch.accept_with_graph(result, app_item(item_collection, id, app), &mut graphs);
        }
        let results = self
            .enqueue(&db, batch, request.upsert, &who.request_id)
            .await?;
        Ok(IngestOutcome {
            database: db,
            collection,
            results,
        })
    }

    pub async fn ingest_memories(
        &self,
        who: &Principal,
        database: &engram_types::DatabaseName,
        request: MemoryRequest,
    ) -> AppResult<IngestOutcome> {
        who.require(Scope::Write)?;
        check_item_count(request.memories.len())?;
        let db = self.authorize_database(who, database, Scope::Write).await?;
        let collection = parse_collection(&db, request.collection.as_deref(), "collection")?;
        if request.memories.is_empty() {
            return Err(AppError::Validation(
                "`memories` must hold at least one memory".into(),
            ));
        }
        let now = self.now();
        let mut prepared = Vec::with_capacity(request.memories.len());
        for (i, memory) in request.memories.iter().enumerate() {
            let text = memory_text(memory, i)?;
            let whose = format!("memories[{i}]");
            check_item_limits(
                &whose,
                &memory.title,
                &memory.metadata,
                &memory.additional_metadata,
            )?;
            check_metadata(&db, &memory.metadata, &format!("{whose}.metadata"))?;
            let relations = check_relations(&whose, memory.relations.clone())?;
            if memory
                .custom_instructions
                .as_deref()
                .is_some_and(|text| text.chars().count() > INSTRUCTIONS_MAX_CHARS)
            {
                return Err(AppError::InvalidParameters(format!(
                    "{whose}.custom_instructions is longer than {INSTRUCTIONS_MAX_CHARS} characters"
                )));
            }
            let expires_at = match memory.expiry_time {
                None => None,
                Some(secs) if secs > 0 => Some(now.after(Duration::from_secs(secs.unsigned_abs()))),
                Some(_) => {
                    return Err(AppError::Validation(format!(
                        "memories[{i}].expiry_time must be a positive number of seconds"
                    )))
                }
            };
            prepared.push((text, expires_at, relations));
        }
        let mut batch = Batch::default();
        for (mut memory, (text, expires_at, relations)) in
            request.memories.into_iter().zip(prepared)
        {
            memory.relations = relations;
            let id = item_id(memory.id.clone())?;
            let result = ItemResult::accepted(
                id.clone(),
                String::new(),
                memory.title.clone(),
                memory.infer,
            );
            if let Some(refusal) = self.over_text_budget(&id, text.len()) {
                batch.refuse(result.refused(ItemErrorCode::OverBudget.as_str(), refusal));
                continue;
            }
            batch.accept(
                result,
                memory_item(&collection, id, memory, text, expires_at),
            );
        }
        let results = self
            .enqueue(&db, batch, request.upsert, &who.request_id)
            .await?;
        Ok(IngestOutcome {
            database: db,
            collection,
            results,
        })
    }

    /// Why an item of given text is refused at upload: its text is over `budgets.text_bytes`
    /// (it could never be indexed), checked before anything is stored.
    fn over_text_budget(&self, id: &str, bytes: usize) -> Option<String> {
        let most = self.config().budgets.text_bytes;
        (bytes > most).then(|| {
            format!(
                "{}: item `{id}` has {bytes} bytes of text, over the limit of {most} (budgets.text_bytes)",
                ItemErrorCode::OverBudget.as_str()
            )
        })
    }

    /// Queues objects a connector synced, replacing the items they were before: files are
    /// sniffed and parsed like uploads, text is indexed like app knowledge. The metadata is
    /// engram's own (`provider`) over values checked when the resource was configured.
    pub(crate) async fn enqueue_synced(
        &self,
        db: &DatabaseRecord,
        objects: Vec<SyncedItem>,
    ) -> AppResult<Vec<ItemResult>> {
        let mut batch = Batch::default();
        let (mut files, texts): (Vec<_>, Vec<_>) = objects
            .into_iter()
            .partition(|o| matches!(o.content, engram_connectors::Content::File(_)));
        // The bytes move into the uploads; the objects keep the rest.
        let uploads = files
            .iter_mut()
            .map(|o| UploadedFile {
                filename: o.file_name.clone(),
                media_type: None,
                bytes: match &mut o.content {
                    engram_connectors::Content::File(bytes) => std::mem::take(bytes),
                    engram_connectors::Content::Text(_) => Vec::new(),
                },
            })
            .collect();
        for (object, (file, detected)) in files.into_iter().zip(sniff(uploads).await?) {
            let result = ItemResult::accepted(
                object.id.clone(),
                object.file_name.clone(),
                object.title.clone(),
                false,
            );
            let Ok(format) = detected else {
                let code = ItemErrorCode::UnsupportedFormat.as_str();
                let message = format!("{code}: unsupported file format: {}", object.file_name);
                batch.refuse(result.refused(code, message));
                continue;
            };
            let meta = FileMetadata {
                id: Some(object.id.clone()),
                metadata: object.metadata,
                additional_metadata: object.additional_metadata,
                relations: Value::Object(Map::new()),
            };
            let mut item = file_item(&object.collection, object.id, file, meta, format);
            item.fields.title = object.title;
            item.fields.url = object.url;
            item.fields.timestamp = object.timestamp;
            item.fields.instructions = object.instructions;
            batch.accept(result, item);
        }
        for object in texts {
            let engram_connectors::Content::Text(text) = object.content else {
                continue;
            };
            let result = ItemResult::accepted(
                object.id.clone(),
                String::new(),
                object.title.clone(),
                false,
            );
            if let Some(refusal) = self.over_text_budget(&object.id, text.len()) {
                batch.refuse(result.refused(ItemErrorCode::OverBudget.as_str(), refusal));
                continue;
            }
            let app = AppSource {
                id: Some(object.id.clone()),
                title: object.title,
                url: object.url,
                timestamp: object.timestamp,
                text,
                metadata: object.metadata,
                additional_metadata: object.additional_metadata,
                ..AppSource::default()
            };
            let mut item = app_item(object.collection, object.id, app);
            item.fields.instructions = object.instructions;
            batch.accept(result, item);
        }
        self.enqueue(db, batch, true, "").await
    }

    /// Stores the batch's items in one transaction and queues them, each with the id of the
    /// request that sent it (empty: engram's own); an existing id without `upsert` becomes that
    /// item's refusal. Returns every result, in request order.
    async fn enqueue(
        &self,
        db: &DatabaseRecord,
        batch: Batch,
        upsert: bool,
        request_id: &str,
    ) -> AppResult<Vec<ItemResult>> {
        let Batch { mut results, items } = batch;
        if items.is_empty() {
            return Ok(results);
        }
        let (positions, mut items): (Vec<usize>, Vec<NewItem>) = items.into_iter().unzip();
        // The instructions in force now go with each item (database, collection, its own).
        for item in &mut items {
            item.fields.instructions = db
                .instructions
                .for_item(item.collection.as_str(), &item.fields.instructions);
            request_id.clone_into(&mut item.fields.request_id);
        }
        let outcomes = self
            .store()
            .enqueue_items(&db.scope(), &items, upsert, self.now())
            .await
            .map_err(|e| match e {
                engram_store::StoreError::NotFound(_) => {
                    AppError::DatabaseNotFound(db.name.to_string())
                }
                other => other.into(),
            })?;
        for (position, outcome) in positions.into_iter().zip(outcomes) {
            if outcome == EnqueueOutcome::Exists {
                let result = &mut results[position];
                *result = result.clone().refused(
                    "",
                    format!(
                        "an item with id `{}` exists and `upsert` is false",
                        result.id
                    ),
                );
            }
        }
        self.inner.pipeline_wake.notify_waiters();
        self.inner.pipeline_wake.notify_one();
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_content_is_text_or_pairs() {
        let text = MemoryInput {
            text: Some(" likes tea ".into()),
            ..Default::default()
        };
        assert_eq!(memory_text(&text, 0).unwrap(), "likes tea");
        let pairs = MemoryInput {
            pairs: Some(vec![("hi".into(), "hello".into())]),
            ..Default::default()
        };
        assert_eq!(
            memory_text(&pairs, 0).unwrap(),
            "User: hi\nAssistant: hello"
        );
        assert!(memory_text(&MemoryInput::default(), 3)
            .unwrap_err()
            .to_string()
            .contains("memories[3]"));
        let blank = MemoryInput {
            text: Some("  ".into()),
            pairs: Some(vec![]),
            ..Default::default()
        };
        assert!(memory_text(&blank, 0).is_err());
    }

    #[test]
    fn relations_are_an_object_of_at_most_so_many_item_ids() {
        assert_eq!(
            check_relations("x", Value::Null).unwrap(),
            Value::Object(Map::new())
        );
        let ok = serde_json::json!({"ids": ["a", "b"], "note": "kept"});
        assert_eq!(check_relations("x", ok.clone()).unwrap(), ok);
        for bad in [
            serde_json::json!(["a"]),
            serde_json::json!({"ids": "a"}),
            serde_json::json!({"ids": [1]}),
            serde_json::json!({"ids": [""]}),
        ] {
            assert!(
                matches!(
                    check_relations("x", bad.clone()),
                    Err(AppError::Validation(_))
                ),
                "{bad}"
            );
        }
        let many: Vec<String> = (0..=ITEM_LINKS_MAX).map(|i| format!("id{i}")).collect();
        let err =
            check_relations("app_knowledge[2]", serde_json::json!({ "ids": many })).unwrap_err();
        assert!(matches!(err, AppError::InvalidParameters(_)), "{err}");
        assert!(
            err.to_string()
                .contains("app_knowledge[2].relations.ids has 101 ids"),
            "{err}"
        );
    }

    #[test]
    fn graph_payloads_name_sources_of_the_request() {
        let ids = std::collections::HashSet::from(["a"]);
        assert!(graph_payloads(None, &ids).unwrap().is_empty());
        let given = r#"{"a": {"entities": {"x": {"name": "X"}, "y": {"name": "Y"}},
                              "relations": [{"source": "x", "target": "y", "predicate": "p"}]}}"#;
        let checked = graph_payloads(Some(given), &ids).unwrap();
        assert_eq!(checked["a"].as_ref().unwrap().relations_created(), 1);
        assert!(graph_payloads(Some(r#"{"a": null}"#), &ids).unwrap()["a"].is_none());
        for bad in [r#"{"b": {}}"#, "[]", r#"{"a": 3}"#] {
            assert!(
                matches!(
                    graph_payloads(Some(bad), &ids),
                    Err(AppError::InvalidParameters(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn ids_are_generated_or_checked() {
        assert_eq!(item_id(None).unwrap().len(), 32);
        assert_eq!(item_id(Some(String::new())).unwrap().len(), 32);
        assert_eq!(item_id(Some("doc-1".into())).unwrap(), "doc-1");
        assert!(item_id(Some("a\nb".into())).is_err());
        assert!(item_id(Some("x".repeat(257))).is_err());
        assert_eq!(item_id(Some("x".repeat(256))).unwrap().len(), 256);
        let err = item_id(Some("x,y".into())).unwrap_err();
        assert!(err.to_string().contains("`,`"), "{err}");
    }

    #[test]
    fn titles_metadata_and_item_counts_are_bounded() {
        let none = Map::new();
        check_item_limits("t", &"é".repeat(TITLE_MAX_CHARS), &none, &none).unwrap();
        let err =
            check_item_limits("t", &"é".repeat(TITLE_MAX_CHARS + 1), &none, &none).unwrap_err();
        assert!(err.to_string().contains("title"), "{err}");

        let keys: Map<String, Value> = (0..=ITEM_METADATA_KEYS_MAX)
            .map(|i| (format!("k{i}"), Value::from(i)))
            .collect();
        let err = check_item_limits("memories[3]", "", &none, &keys).unwrap_err();
        assert!(
            err.to_string()
                .contains("memories[3]: `additional_metadata` has 257 keys"),
            "{err}"
        );

        let big = Map::from_iter([(
            "k".to_owned(),
            Value::from("v".repeat(ITEM_METADATA_MAX_BYTES)),
        )]);
        let err = check_item_limits("t", "", &big, &none).unwrap_err();
        assert!(err.to_string().contains("bytes"), "{err}");

        check_item_count(ITEMS_PER_REQUEST_MAX).unwrap();
        assert!(matches!(
            check_item_count(ITEMS_PER_REQUEST_MAX + 1),
            Err(AppError::InvalidParameters(_))
        ));
    }
}
