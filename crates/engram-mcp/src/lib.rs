//! engram as a Model Context Protocol server: the tools an agent needs for knowledge and memory,
//! over the transport-free [`App`], so that stdio (a desktop host starting `engram mcp`) and
//! Streamable HTTP (`/mcp` on a running server) serve the same tools.
//!
//! Every call acts as one API key's [`Principal`]: fixed for stdio, and for HTTP the one the
//! server authenticated for that request (put in the request's extensions before the MCP
//! service sees it), so a key restricted to a database sees only it. A failure is a tool error
//! (`is_error`) whose text starts with the spec's code, never a transport failure.

use base64::Engine as _;
use engram_app::{
    App, AppError, AppSource, KnowledgeRequest, ListRequest, MemoryInput, MemoryRequest, Principal,
    QueryKind, QueryRequest, RequestedMode, UploadedFile,
};
use engram_types::{DatabaseName, ItemKind};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// Results are cut to about this many tokens unless the caller asks otherwise.
pub const TOKEN_BUDGET_DEFAULT: u32 = 2_000;
/// The largest token budget a caller may set.
pub const TOKEN_BUDGET_MAX: u32 = 32_000;
/// Characters per token, for budgets (English prose averages about four).
const CHARS_PER_TOKEN: usize = 4;

/// The MCP server over one [`App`].
#[derive(Clone)]
pub struct EngramMcp {
    app: App,
    /// The caller of every request (stdio); `None`: each request's own (HTTP).
    fixed: Option<Principal>,
    #[allow(dead_code)] // read by the `tool_handler` expansion
    tool_router: ToolRouter<Self>,
}

/// A tool failure: the spec's code and the message, as the model sees it.
fn failure(err: &AppError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {err}",
        err.code().as_str()
    ))])
}

fn text(body: String) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(body)]))
}

/// `body` cut to about `budget` tokens, at a character boundary, saying so when cut.
fn within_budget(body: &str, budget: u32) -> String {
    let limit = budget as usize * CHARS_PER_TOKEN;
    if body.len() <= limit {
        return body.to_owned();
    }
    let mut cut = limit;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[cut at the token budget of {budget}; ask for fewer results or a larger budget]",
        &body[..cut]
    )
}

fn database(name: &str) -> Result<DatabaseName, AppError> {
    engram_app::parse_database_name("database", name)
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DatabaseArgs {
    /// The database (tenant) name.
    pub database: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchArgs {
    /// The database to search.
    pub database: String,
    /// What to look for, in natural language or keywords.
    pub query: String,
    /// One collection of the database; default: its default collection.
    pub collection: Option<String>,
    /// How many results (1-50, default 5).
    pub max_results: Option<u32>,
    /// `fast`, `thinking` (expansion and reranking, slower) or `auto` (default).
    pub mode: Option<String>,
    /// About how many tokens the answer may take (default 2000, at most 32000).
    pub token_budget: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RecallArgs {
    /// The database holding the memories.
    pub database: String,
    /// The user whose memories to recall (their collection).
    pub user: String,
    /// What to recall.
    pub query: String,
    /// How many memories (1-50, default 5).
    pub max_results: Option<u32>,
    /// About how many tokens the answer may take (default 2000, at most 32000).
    pub token_budget: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MemoryArg {
    /// The memory as text.
    pub text: Option<String>,
    /// Or a conversation turn: what the user said...
    pub user_message: Option<String>,
    /// ...and what the assistant answered.
    pub assistant_message: Option<String>,
    /// When it happened (RFC 3339 or a date), for temporal questions later.
    pub timestamp: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddMemoriesArgs {
    /// The database to keep the memories in.
    pub database: String,
    /// The user they belong to (their collection).
    pub user: String,
    /// One or more memories: each `text`, or `user_message` with `assistant_message`.
    pub memories: Vec<MemoryArg>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct IngestArgs {
    /// The database to add knowledge to.
    pub database: String,
    /// A collection of the database; default: its default collection.
    pub collection: Option<String>,
    /// The source's id (default: generated). Ingesting an id again replaces that source.
    pub id: Option<String>,
    /// A title for text.
    pub title: Option<String>,
    /// The text to index. Give this, or a document.
    pub text: Option<String>,
    /// A document's bytes, base64-encoded (PDF, Word, Excel, PowerPoint, HTML, Markdown, CSV,
    /// images...). Give this with `filename`, or `text`.
    pub document_base64: Option<String>,
    /// The document's file name (its extension helps recognise the format).
    pub filename: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListArgs {
    /// The database to list.
    pub database: String,
    /// A collection; default: the default collection.
    pub collection: Option<String>,
    /// `knowledge` (default) or `memory`.
    pub kind: Option<String>,
    /// Page number, from 1.
    pub page: Option<u32>,
    /// Sources per page (1-100, default 20).
    pub page_size: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct IdsArgs {
    /// The database.
    pub database: String,
    /// A collection; default: the default collection.
    pub collection: Option<String>,
    /// The source or memory ids.
    pub ids: Vec<String>,
}

fn kind_of(raw: Option<&str>) -> Result<Option<ItemKind>, AppError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some("knowledge") => Ok(Some(ItemKind::Knowledge)),
        Some("memory" | "memories") => Ok(Some(ItemKind::Memory)),
        Some(other) => Err(AppError::InvalidParameters(format!(
            "unknown kind `{other}`; expected knowledge or memory"
        ))),
    }
}

fn mode_of(raw: Option<&str>) -> Result<RequestedMode, AppError> {
    match raw.map(str::trim) {
        None | Some("" | "auto") => Ok(RequestedMode::Auto),
        Some("fast") => Ok(RequestedMode::Fast),
        Some("thinking") => Ok(RequestedMode::Thinking),
        Some(other) => Err(AppError::InvalidParameters(format!(
            "unknown mode `{other}`; expected fast, thinking or auto"
        ))),
    }
}

fn budget_of(raw: Option<u32>) -> Result<u32, AppError> {
    match raw {
        None => Ok(TOKEN_BUDGET_DEFAULT),
        Some(b) if (1..=TOKEN_BUDGET_MAX).contains(&b) => Ok(b),
        Some(_) => Err(AppError::InvalidParameters(format!(
            "`token_budget` must be between 1 and {TOKEN_BUDGET_MAX}"
        ))),
    }
}

fn results_of(raw: Option<u32>) -> Result<i64, AppError> {
    match raw {
        None => Ok(5),
        Some(n) if (1..=50).contains(&n) => Ok(i64::from(n)),
        Some(_) => Err(AppError::InvalidParameters(
            "`max_results` must be between 1 and 50".into(),
        )),
    }
}

/// Ranked chunks as a model reads them: numbered, each with its source and score.
fn format_results(outcome: &engram_app::QueryOutcome, what: &str) -> String {
    if outcome.chunks.is_empty() {
        return format!("No {what} matched.");
    }
    let mut out = String::new();
    for (i, ranked) in outcome.chunks.iter().enumerate() {
        let hit = &ranked.hit;
        let title = hit.item.label();
        out.push_str(&format!(
            "[{}] {title} (id: {}, collection: {}, score: {:.2})\n{}\n\n",
            i + 1,
            hit.item.id,
            hit.item.collection,
            ranked.score,
            hit.content.trim()
        ));
    }
    out.trim_end().to_owned()
}

impl EngramMcp {
    /// A server acting as `fixed` for every call (stdio), or as each HTTP request's
    /// authenticated caller (`None`).
    pub fn new(app: App, fixed: Option<Principal>) -> Self {
        Self {
            app,
            fixed,
            tool_router: Self::tool_router(),
        }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Principal, AppError> {
        if let Some(fixed) = &self.fixed {
            return Ok(fixed.clone());
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
            .ok_or(AppError::Unauthorized("this request carries no API key"))
    }
}

/// Runs one tool body: the caller resolved, an [`AppError`] turned into a tool error.
macro_rules! run {
    ($self:ident, $ctx:ident, |$who:ident| $body:expr) => {{
        let $who = match $self.caller(&$ctx) {
            Ok(who) => who,
            Err(refused) => return Ok(failure(&refused)),
        };
        let result: Result<String, AppError> = async { $body }.await;
        match result {
            Ok(body) => text(body),
            Err(err) => Ok(failure(&err)),
        }
    }};
}

#[tool_router]
impl EngramMcp {
    #[tool(
        description = "List the databases this API key may use. Knowledge and memories live in databases; each database has collections."
    )]
    async fn list_databases(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let names: Vec<String> = self
                .app
                .list_databases(&who)
                .await?
                .into_iter()
                .map(|db| db.name.to_string())
                .collect();
            Ok(if names.is_empty() {
                "No databases yet.".to_owned()
            } else {
                names.join("\n")
            })
        })
    }

    #[tool(
        description = "List the collections of a database (users' memories live in one collection per user)."
    )]
    async fn list_collections(
        &self,
        Parameters(args): Parameters<DatabaseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let names = self
                .app
                .list_collections(&who, &database(&args.database)?)
                .await?;
            Ok(names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }

    #[tool(
        description = "Search a database's knowledge (documents and app content) with hybrid keyword and semantic ranking. Returns numbered passages with their source ids."
    )]
    async fn search_knowledge(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let budget = budget_of(args.token_budget)?;
            let request = QueryRequest {
                collection: args.collection,
                query: args.query,
                kind: QueryKind::Knowledge,
                mode: mode_of(args.mode.as_deref())?,
                max_results: Some(results_of(args.max_results)?),
                ..QueryRequest::default()
            };
            let outcome = self
                .app
                .query(&who, &database(&args.database)?, request)
                .await?;
            Ok(within_budget(
                &format_results(&outcome, "knowledge"),
                budget,
            ))
        })
    }

    #[tool(
        description = "Recall what is remembered about a user: their memories most relevant to the query, numbered, with temporal reasoning on (dates resolved)."
    )]
    async fn recall_memories(
        &self,
        Parameters(args): Parameters<RecallArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let budget = budget_of(args.token_budget)?;
            let request = QueryRequest {
                collection: Some(args.user),
                query: args.query,
                kind: QueryKind::Memory,
                max_results: Some(results_of(args.max_results)?),
                temporal: Some(engram_app::TemporalRequest::default()),
                ..QueryRequest::default()
            };
            let outcome = self
                .app
                .query(&who, &database(&args.database)?, request)
                .await?;
            Ok(within_budget(&format_results(&outcome, "memories"), budget))
        })
    }

    #[tool(
        description = "Remember things about a user: one or more memories, each a text or a user/assistant exchange. They are indexed in the background (seconds)."
    )]
    async fn add_memories(
        &self,
        Parameters(args): Parameters<AddMemoriesArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let memories = args
                .memories
                .into_iter()
                .map(|m| {
                    let pairs = match (m.user_message, m.assistant_message) {
                        (Some(u), Some(a)) => Some(vec![(u, a)]),
                        (None, None) => None,
                        _ => {
                            return Err(AppError::Validation(
                                "a conversation memory needs both `user_message` and `assistant_message`".into(),
                            ))
                        }
                    };
                    Ok(MemoryInput {
                        text: m.text,
                        pairs,
                        timestamp: m.timestamp,
                        user_name: Some(args.user.clone()),
                        ..MemoryInput::default()
                    })
                })
                .collect::<Result<Vec<_>, AppError>>()?;
            let outcome = self
                .app
                .ingest_memories(
                    &who,
                    &database(&args.database)?,
                    MemoryRequest {
                        collection: Some(args.user),
                        upsert: true,
                        memories,
                    },
                )
                .await?;
            Ok(outcome_text(&outcome))
        })
    }

    #[tool(
        description = "Add knowledge to a database: a text, or a document sent base64-encoded with its file name. It is parsed and indexed in the background; check with indexing_status."
    )]
    async fn ingest(
        &self,
        Parameters(args): Parameters<IngestArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let (files, app_knowledge) = match (args.text, args.document_base64) {
                (Some(text), None) => (
                    Vec::new(),
                    vec![AppSource {
                        id: args.id.clone(),
                        title: args.title.unwrap_or_default(),
                        text,
                        ..AppSource::default()
                    }],
                ),
                (None, Some(encoded)) => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(encoded.trim())
                        .map_err(|e| {
                            AppError::InvalidParameters(format!(
                                "`document_base64` is not base64: {e}"
                            ))
                        })?;
                    let filename = args.filename.unwrap_or_else(|| "document".into());
                    (
                        vec![UploadedFile {
                            filename,
                            media_type: None,
                            bytes,
                        }],
                        Vec::new(),
                    )
                }
                _ => {
                    return Err(AppError::InvalidParameters(
                        "give `text` or `document_base64`, one of them".into(),
                    ))
                }
            };
            let file_metadata = (!files.is_empty()).then(|| {
                vec![engram_app::FileMetadata {
                    id: args.id,
                    ..engram_app::FileMetadata::default()
                }]
            });
            let outcome = self
                .app
                .ingest_knowledge(
                    &who,
                    &database(&args.database)?,
                    KnowledgeRequest {
                        collection: args.collection,
                        upsert: true,
                        files,
                        file_metadata,
                        file_metadata_field: "document_metadata",
                        app_knowledge,
                        graph_payload: None,
                    },
                )
                .await?;
            Ok(outcome_text(&outcome))
        })
    }

    #[tool(
        description = "List the sources (or a user's memories) of a collection, newest first, a page at a time."
    )]
    async fn list_sources(
        &self,
        Parameters(args): Parameters<ListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let request = ListRequest {
                collection: args.collection,
                kind: Some(kind_of(args.kind.as_deref())?.unwrap_or(ItemKind::Knowledge)),
                page: args.page.map(i64::from),
                page_size: Some(i64::from(args.page_size.unwrap_or(20))),
                ..ListRequest::default()
            };
            let listing = self
                .app
                .list_items(&who, &database(&args.database)?, request)
                .await?;
            let mut out = format!(
                "{} in all; page {} of {}\n",
                listing.page.total,
                listing.page_number,
                listing.total_pages().max(1)
            );
            for item in &listing.page.items {
                let text = item.fields.text.as_deref().unwrap_or_default();
                let preview: String = text.chars().take(120).collect();
                out.push_str(&format!(
                    "- {} ({}; {}) {}\n",
                    item.id,
                    if item.fields.title.is_empty() {
                        "untitled"
                    } else {
                        item.fields.title.as_str()
                    },
                    item.status.as_str(),
                    preview.replace('\n', " ")
                ));
            }
            Ok(out.trim_end().to_owned())
        })
    }

    #[tool(description = "Delete sources or memories by id, with everything indexed from them.")]
    async fn delete_sources(
        &self,
        Parameters(args): Parameters<IdsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let (_, deleted) = self
                .app
                .delete_items(
                    &who,
                    &database(&args.database)?,
                    args.collection.as_deref(),
                    None,
                    &args.ids,
                )
                .await?;
            Ok(deleted
                .iter()
                .map(|d| {
                    if d.deleted {
                        format!("{}: deleted", d.id)
                    } else {
                        format!("{}: not found", d.id)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }

    #[tool(
        description = "Indexing status of sources or memories by id: queued, processing, graph_creation, completed or errored (with the error)."
    )]
    async fn indexing_status(
        &self,
        Parameters(args): Parameters<IdsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        run!(self, ctx, |who| {
            let (_, statuses) = self
                .app
                .item_statuses(
                    &who,
                    &database(&args.database)?,
                    args.collection.as_deref(),
                    &args.ids,
                )
                .await?;
            Ok(statuses
                .iter()
                .map(|(id, status)| match status {
                    None => format!("{id}: not found"),
                    Some(s) if s.error_code.is_empty() => {
                        format!("{id}: {}", s.status.as_str())
                    }
                    Some(s) => format!(
                        "{id}: {} ({}: {})",
                        s.status.as_str(),
                        s.error_code,
                        s.error_message
                    ),
                })
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }
}

/// What an ingest call did, an item a line.
fn outcome_text(outcome: &engram_app::IngestOutcome) -> String {
    let mut out = format!(
        "{} accepted, {} refused (collection {})\n",
        outcome.success_count(),
        outcome.failed_count(),
        outcome.collection
    );
    for r in &outcome.results {
        if r.error.is_empty() {
            let status = r.status.map_or("queued", |s| s.as_str());
            out.push_str(&format!("- {}: {status}\n", r.id));
        } else {
            out.push_str(&format!("- {}: refused ({})\n", r.id, r.error));
        }
    }
    out.trim_end().to_owned()
}

#[tool_handler]
impl ServerHandler for EngramMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "engram: knowledge and memory for agents. Search a database's knowledge, recall and \
             add a user's memories, ingest text or documents, list, delete and check indexing. \
             Start with list_databases.",
        )
    }
}

/// The Streamable HTTP service for `/mcp`: each request must carry its caller's [`Principal`]
/// in its extensions (the HTTP layer authenticates before handing the request over), and its
/// body may take up to `max_body` bytes. Any `Host` is served: every request carries an API key,
/// so DNS rebinding gains nothing, and the service runs behind whatever name it is given.
pub fn http_service(
    app: App,
    cancel: CancellationToken,
    max_body: usize,
) -> StreamableHttpService<EngramMcp, LocalSessionManager> {
    StreamableHttpService::new(
        move || Ok(EngramMcp::new(app.clone(), None)),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default()
            .with_cancellation_token(cancel)
            .disable_allowed_hosts()
            .with_max_request_body_bytes(max_body),
    )
}

/// Serves the tools over stdin/stdout as `who` until the client closes the connection.
pub async fn serve_stdio(app: App, who: Principal) -> std::io::Result<()> {
    use rmcp::ServiceExt as _;
    let running = EngramMcp::new(app, Some(who))
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_cut_at_the_budget_on_a_character_boundary() {
        assert_eq!(within_budget("short", 10), "short");
        let long = "é".repeat(100);
        let cut = within_budget(&long, 5);
        assert!(cut.starts_with(&"é".repeat(10)), "{cut}");
        assert!(cut.contains("cut at the token budget of 5"));
    }

    #[test]
    fn arguments_out_of_range_are_refused_with_the_spec_codes() {
        assert_eq!(budget_of(None).unwrap(), TOKEN_BUDGET_DEFAULT);
        assert!(budget_of(Some(0)).is_err() && budget_of(Some(TOKEN_BUDGET_MAX + 1)).is_err());
        assert!(results_of(Some(51)).is_err());
        assert_eq!(mode_of(Some("thinking")).unwrap(), RequestedMode::Thinking);
        let err = kind_of(Some("files")).unwrap_err();
        assert_eq!(err.code().as_str(), "INVALID_PARAMETERS");
        assert!(failure(&err).is_error == Some(true));
    }
}
