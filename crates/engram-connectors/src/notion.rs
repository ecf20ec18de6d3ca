//! `notion`: pages and databases of a Notion workspace through Notion's public REST API
//! (`Notion-Version: 2022-06-28`), with an internal integration's secret (`secret_…`/`ntn_…`)
//! or a public integration's OAuth `access_token`. Discovery (`POST /v1/search`) offers what the
//! integration was given, two kinds of resources:
//!
//! - `page:<id>` (`page`): a page shared with the integration whose parent is not, and every
//!   page under it, each its own document: its blocks as text (headings as `#`, lists, to-dos,
//!   quotes, code with its language, tables, toggles, callouts), walked through
//!   `GET /v1/blocks/{id}/children` to a bounded depth. A full pass (the first, then once a
//!   day) visits each page (`GET /v1/pages/{id}`), reads the blocks only of those whose
//!   `last_edited_time` moved (or that changed within the last minutes: Notion keeps that time
//!   to the minute), takes the child pages of an unchanged page to be the ones it had, and lists
//!   the whole tree, so pages gone since leave engram. The passes in between cost what changed,
//!   not the tree's size: `POST /v1/search` for pages, newest edit first, down to the last
//!   pass's newest edit (less those minutes); a listed page in the tree (the root, a page held
//!   from it, or a page whose parent is one) is read as above, with its new child pages, and
//!   the child pages it no longer holds are asked for: archived (`in_trash`), no longer shared
//!   or gone, they are deletions.
//! - `database:<id>` (`database`): the rows of a database (`POST /v1/databases/{id}/query`),
//!   each a document: its properties as fields (`additional_metadata`, by their names in
//!   snake_case) and its page content as text. Passes are incremental by `last_edited_time`
//!   (a filter `on_or_after` the newest seen); once a day a pass lists every row, so rows
//!   archived or deleted since leave.
//!
//! Every request goes through the outbound client, paced to Notion's average of three requests a
//! second (with some burst); a `429` is waited out inside the pass when the wait is short, and
//! otherwise ends it as a transient failure naming when to retry. The token only ever travels in
//! the `Authorization` header; no message repeats it.
//!
//! Push: Notion's webhook subscription first sends the endpoint an unsigned
//! `verification_token`, which engram keeps as the connector's `webhook_secret` (the user reads
//! it from the vault and pastes it into Notion); each event after is signed with it and asks
//! for a sync ([`crate::push`]).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::hosted::{self, not_json, retry_wait, saved_pass, unanswered, waited_out};
use crate::{
    credential, now_unix, Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds,
    Known, Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

const DEFAULT_API: &str = "https://api.notion.com";
const NOTION_VERSION: &str = "2022-06-28";
const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read (a page of 100 objects is far smaller).
const ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Objects per page of Notion's paginated listings (its maximum).
const PAGE_SIZE: usize = 100;
/// Pages of search results discovery reads at most (10,000 pages and databases).
const SEARCH_PAGES_MAX: usize = 100;
/// How deep blocks nest under a page before the rest is left out.
const BLOCK_DEPTH_MAX: usize = 8;
/// Blocks read of one page at most; a longer page is indexed up to there.
const BLOCKS_PER_PAGE_MAX: usize = 5000;
/// Pages one pass over a page resource visits at most, and how deep child pages nest.
const PAGES_PER_PASS_MAX: usize = 10_000;
const PAGE_DEPTH_MAX: usize = 32;
/// Pages visited per page of a pass.
const PAGES_PER_LIST: usize = 25;
/// How often a pass lists every row of a database or every page of a tree, so archived and
/// deleted ones leave (the passes in between read what was edited since).
const FULL_PASS_EVERY_S: i64 = 86_400;
/// Pages edited this recently are read again even when their `last_edited_time` did not move
/// (Notion rounds it to the minute); their text decides whether they changed.
const RECENT_EDIT_S: i64 = 300;
/// Notion's request rate: three a second on average, with bursts.
const RATE_PER_S: f64 = 3.0;
const RATE_BURST: f64 = 20.0;
/// A `429` whose wait is at most this is waited out inside the pass, at most this many times.
const RATE_WAIT_MAX: Duration = Duration::from_secs(5);
const RATE_RETRIES: u32 = 2;
/// Longest message of Notion's quoted in an error.
const QUOTED_MAX: usize = 200;
/// Keys engram writes into every item's `additional_metadata`: a property of the same name is
/// kept under `property_<name>`.
const RESERVED_KEYS: &[&str] = &[
    "provider",
    "connector_id",
    "resource_id",
    "provider_account_scope",
    "native_id",
    "acl",
];

/// Notion's API does not say with whom a page is shared (`acl_warning` on every pass).
const UNREADABLE_SHARING: &str = "Notion's API does not say who may read a page: its items carry \
    no readers of their own, so everyone who may query this database reads them unless the \
    resource has a rule (`acl`)";

pub struct NotionProvider {
    info: ProviderInfo,
    pacer: Arc<Pacer>,
}

impl Default for NotionProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl NotionProvider {
    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "notion",
                category: "knowledge_base",
                connector_type: "workspace",
                rank: Some(11),
                rbac_support: false,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["page", "database_row"],
                fields: vec![
                    field(
                        "notion_kind",
                        "string",
                        "page, or database_row for a row of a database",
                        Some("additional_metadata.notion_kind"),
                    ),
                    field(
                        "notion_database",
                        "string",
                        "A row's database, by its title",
                        Some("additional_metadata.notion_database"),
                    ),
                    field(
                        "notion_database_id",
                        "string",
                        "A row's database, by its id",
                        Some("additional_metadata.notion_database_id"),
                    ),
                    field(
                        "notion_parent_id",
                        "string",
                        "The page (or database) a page sits in",
                        Some("additional_metadata.notion_parent_id"),
                    ),
                    field(
                        "notion_created_time",
                        "string",
                        "When the page was created (RFC 3339)",
                        Some("additional_metadata.notion_created_time"),
                    ),
                    field(
                        "<property>",
                        "any",
                        "Each property of a database row, under its name in snake_case (`Due date` \
                         is `additional_metadata.due_date`): title, text, URL, e-mail and phone as \
                         text; select and status as the option's name; multi-select and people as \
                         lists of names; number, checkbox and date (its start) as such",
                        None,
                    ),
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "token": {"type": "string", "minLength": 1},
                        "access_token": {"type": "string", "minLength": 1},
                        "api_url": {"type": "string", "pattern": "^https?://"},
                        "oauth": crate::oauth::credential_schema(),
                        "webhook_secret": {"type": "string", "minLength": 16, "maxLength": 1000}
                    },
                    "anyOf": [{"required": ["token"]}, {"required": ["access_token"]}, {"required": ["oauth"]}],
                    "additionalProperties": false
                }),
                setup_guide: "Create an internal integration at https://www.notion.so/profile/integrations \
                    with the capability \"Read content\" (no other is needed; \"Read user information\" \
                    adds people's names) and give its secret (`secret_…` or `ntn_…`) as `token`, or give a \
                    public integration's OAuth `access_token`. Notion shows an integration only what was \
                    shared with it: on each top-level page or database open ••• → Connections → add the \
                    integration (its child pages follow). Discovery offers each shared page whose parent \
                    is not shared (`page:<id>`: it and every page under it) and each database \
                    (`database:<id>`: its rows, with their properties as fields). Push: in the \
                    integration's Webhooks tab create a subscription to \
                    `<engram>/connectors/{id}/events` (page and database events); Notion sends it a \
                    `verification_token`, which engram keeps as the connector's `webhook_secret`; \
                    read it with `POST /credential-vault/{id}/reveal` (field `webhook_secret`) and \
                    paste it into Notion's Verify dialog. Events are then signed with it \
                    (`X-Notion-Signature`) and each starts a sync. `api_url` is for tests and \
                    proxies (default https://api.notion.com).",
                interval: IntervalBounds {
                    min_s: 300,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
            pacer: Arc::new(Pacer::default()),
        }
    }
}

/// Paces requests per token to Notion's rate: a bucket of `RATE_BURST` requests refilled at
/// `RATE_PER_S`, shared by every pass of the token.
#[derive(Default)]
struct Pacer {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Pacer {
    /// Waits until the token may send a request, and takes that request from its bucket.
    async fn take(&self, key: &str) {
        loop {
            let wait = {
                let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let (tokens, at) = buckets.entry(key.to_owned()).or_insert((RATE_BURST, now));
                let refilled =
                    (*tokens + now.duration_since(*at).as_secs_f64() * RATE_PER_S).min(RATE_BURST);
                *at = now;
                if refilled >= 1.0 {
                    *tokens = refilled - 1.0;
                    None
                } else {
                    *tokens = refilled;
                    Some(Duration::from_secs_f64((1.0 - refilled) / RATE_PER_S))
                }
            };
            match wait {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Empties the token's bucket: Notion said it is sending too fast.
    fn drain(&self, key: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.insert(key.to_owned(), (0.0, Instant::now()));
    }
}

/// The API of one connector: where it is and the token that reads it.
struct Api<'a> {
    /// The API root, ending with `/`.
    base: url::Url,
    authorization: String,
    /// The pacer's key for the token (a digest, never the token).
    key: String,
    pacer: &'a Pacer,
    access: &'a Access,
}

/// Notion's `code` and the first `QUOTED_MAX` characters of its `message` in an error body.
fn quoted(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return String::new();
    };
    let code = text_of(&value, "code");
    let message: String = text_of(&value, "message")
        .chars()
        .take(QUOTED_MAX)
        .collect();
    match (code.is_empty(), message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" {code}"),
        (true, false) => format!(": {message}"),
        (false, false) => format!(" {code}: {message}"),
    }
}

/// What an error answer (not rate limiting) means for the connector; `what` names the request
/// in words (never with the token, which only travels in a header).
fn failure(status: u16, body: &[u8], what: &str) -> ProviderError {
    let said = quoted(body);
    match status {
        401 => ProviderError::Unauthorized {
            message: format!("Notion refused the token ({what}: 401{said})"),
            http_status: status,
        },
        403 => ProviderError::Resource {
            message: format!(
                "the integration may not read {what} (403{said}); give it the \"Read content\" capability"
            ),
            http_status: status,
        },
        404 => ProviderError::Resource {
            message: format!(
                "{what} is not found, or not shared with the integration (404{said}); share it \
                 with the integration (••• → Connections)"
            ),
            http_status: status,
        },
        408 | 409 | 429 | 500..=599 => ProviderError::Transient {
            message: format!("Notion answered {status} to {what}{said}"),
            http_status: status,
        },
        _ => ProviderError::Resource {
            message: format!("Notion answered {status} to {what}{said}"),
            http_status: status,
        },
    }
}

/// The error of a rate limit not waited out.
fn rate_limit_error(wait: Duration, now: i64) -> ProviderError {
    hosted::rate_limit_error(
        "Notion is rate limiting this integration (429, about three requests a second are \
         allowed)",
        wait,
        now,
    )
}

/// Unix seconds of an RFC 3339 time; `None` when it is not one.
fn unix_of(at: &str) -> Option<i64> {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

impl<'a> Api<'a> {
    /// The connector's API; `check` checks its address against the outbound policy first
    /// (listing does; fetching an object relies on the check every connection makes).
    async fn new(access: &'a Access, pacer: &'a Pacer, check: bool) -> Result<Self, ProviderError> {
        let token = credential(access, "token")
            .or_else(|| credential(access, "access_token"))
            .ok_or_else(|| ProviderError::Invalid("the credentials hold no `token`".to_owned()))?;
        let base = crate::api_root(access, DEFAULT_API, check).await?;
        Ok(Self {
            base,
            authorization: format!("Bearer {token}"),
            key: crate::short_hash(token.as_bytes()),
            pacer,
            access,
        })
    }

    /// The address of `v1/<segments…>` (each escaped as one path segment) with `query`.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<url::Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| ProviderError::Invalid("`api_url` cannot take a path".to_owned()))?;
            path.pop_if_empty();
            path.push("v1");
            path.extend(segments);
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    /// Sends a request (`body`: a JSON body to POST) and reads its JSON answer; a `429` is
    /// waited out when the wait is short.
    async fn call(
        &self,
        method: &str,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, ProviderError> {
        let url = self.url(segments, query)?;
        let mut headers = vec![
            ("authorization", self.authorization.clone()),
            ("notion-version", NOTION_VERSION.to_owned()),
            ("accept", "application/json".to_owned()),
        ];
        if body.is_some() {
            headers.push(("content-type", "application/json".to_owned()));
        }
        let body = body.map(|b| b.to_string().into_bytes());
        let mut attempt = 0;
        loop {
            self.pacer.take(&self.key).await;
            let fetched = self
                .access
                .outbound
                .request_read(
                    method,
                    &url,
                    &headers,
                    body.clone(),
                    TIMEOUT,
                    ANSWER_MAX_BYTES,
                )
                .await
                .map_err(|e| unanswered("Notion", what, e))?;
            if fetched.status == 429 {
                self.pacer.drain(&self.key);
                // Notion's `Retry-After` (seconds); without it, its advice is to back off.
                let wait = retry_wait(fetched.header("retry-after"), attempt);
                if !waited_out(wait, &mut attempt, RATE_WAIT_MAX, RATE_RETRIES).await {
                    tracing::warn!(http_status = 429, "Notion rate limited a connector");
                    return Err(rate_limit_error(wait, now_unix()));
                }
                continue;
            }
            if !(200..300).contains(&fetched.status) {
                return Err(failure(fetched.status, &fetched.body, what));
            }
            return serde_json::from_slice(&fetched.body)
                .map_err(|e| not_json("Notion", what, fetched.status, e));
        }
    }

    async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
        what: &str,
    ) -> Result<Value, ProviderError> {
        self.call("GET", segments, query, None, what).await
    }

    async fn post(
        &self,
        segments: &[&str],
        body: &Value,
        what: &str,
    ) -> Result<Value, ProviderError> {
        self.call("POST", segments, &[], Some(body), what).await
    }

    /// Every block under `page_id`, by parent, read breadth first within the bounds.
    async fn block_tree(&self, page_id: &str, what: &str) -> Result<BlockTree, ProviderError> {
        let mut tree = BlockTree::default();
        let mut queue = VecDeque::from([(page_id.to_owned(), 0_usize)]);
        while let Some((parent, depth)) = queue.pop_front() {
            let mut cursor: Option<String> = None;
            let mut children = Vec::new();
            loop {
                let mut query = vec![("page_size", PAGE_SIZE.to_string())];
                if let Some(cursor) = &cursor {
                    query.push(("start_cursor", cursor.clone()));
                }
                let answer = self
                    .get(&["blocks", &parent, "children"], &query, what)
                    .await?;
                for block in results(&answer) {
                    if tree.blocks >= BLOCKS_PER_PAGE_MAX {
                        tree.truncated = true;
                        break;
                    }
                    tree.blocks += 1;
                    if block.get("has_children").and_then(Value::as_bool) == Some(true)
                        && descends(text_of(block, "type"))
                    {
                        if depth + 1 < BLOCK_DEPTH_MAX {
                            queue.push_back((text_of(block, "id").to_owned(), depth + 1));
                        } else {
                            tree.truncated = true;
                        }
                    }
                    children.push(block.clone());
                }
                cursor = next_cursor(&answer);
                if cursor.is_none() || tree.truncated && tree.blocks >= BLOCKS_PER_PAGE_MAX {
                    break;
                }
            }
            tree.children.insert(parent, children);
        }
        Ok(tree)
    }
}

/// The objects of a list answer (`results`).
fn results(answer: &Value) -> &[Value] {
    answer
        .get("results")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Where a list answer goes on (`next_cursor` when `has_more`).
fn next_cursor(answer: &Value) -> Option<String> {
    if answer.get("has_more").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    answer
        .get("next_cursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

fn text_of<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Whether an object is archived or in the trash (a deletion).
fn archived(object: &Value) -> bool {
    object.get("archived").and_then(Value::as_bool) == Some(true)
        || object.get("in_trash").and_then(Value::as_bool) == Some(true)
}

/// Whether a block's children are part of its page's text (a child page or database is its own
/// object, read apart or not at all).
fn descends(block_type: &str) -> bool {
    !matches!(block_type, "child_page" | "child_database")
}

/// Rich text as plain text.
fn plain(rich: Option<&Value>) -> String {
    rich.and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .map(|p| text_of(p, "plain_text"))
                .collect::<String>()
        })
        .unwrap_or_default()
}

/// A page's title: its `title` property.
fn page_title(page: &Value) -> String {
    page.get("properties")
        .and_then(Value::as_object)
        .and_then(|props| props.values().find(|p| text_of(p, "type") == "title"))
        .map(|p| plain(p.get("title")))
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "Untitled".to_owned())
}

/// A database's title.
fn database_title(database: &Value) -> String {
    let title = plain(database.get("title"));
    if title.trim().is_empty() {
        "Untitled database".to_owned()
    } else {
        title
    }
}

/// The blocks of a page, by parent id, as read.
#[derive(Debug, Default)]
struct BlockTree {
    children: HashMap<String, Vec<Value>>,
    blocks: usize,
    /// The bounds left blocks out.
    truncated: bool,
}

/// A page's blocks as text, and the child pages met on the way.
#[derive(Debug, Default, PartialEq)]
struct Rendered {
    text: String,
    child_pages: Vec<String>,
}

/// Renders the blocks under `root` as Markdown-like text.
fn render(tree: &BlockTree, root: &str) -> Rendered {
    let mut out = Rendered::default();
    render_children(tree, root, 0, &mut out);
    if tree.truncated {
        out.text.push_str(
            "\n[The rest of this page was left out: it is too long or too deeply nested.]\n",
        );
    }
    out
}

fn render_children(tree: &BlockTree, parent: &str, indent: usize, out: &mut Rendered) {
    let Some(blocks) = tree.children.get(parent) else {
        return;
    };
    let mut number = 0_usize;
    for block in blocks {
        let kind = text_of(block, "type");
        let body = block.get(kind).unwrap_or(&Value::Null);
        let text = plain(body.get("rich_text"));
        let pad = "  ".repeat(indent);
        let id = text_of(block, "id");
        number = if kind == "numbered_list_item" {
            number + 1
        } else {
            0
        };
        let mut nested = indent;
        match kind {
            "paragraph" => {
                out.text.push_str(&pad);
                out.text.push_str(&text);
                out.text.push('\n');
            }
            "heading_1" | "heading_2" | "heading_3" => {
                let level = kind
                    .trim_start_matches("heading_")
                    .parse::<usize>()
                    .unwrap_or(1);
                out.text
                    .push_str(&format!("\n{} {text}\n", "#".repeat(level)));
            }
            "bulleted_list_item" | "toggle" => {
                out.text.push_str(&format!("{pad}- {text}\n"));
                nested += 1;
            }
            "numbered_list_item" => {
                out.text.push_str(&format!("{pad}{number}. {text}\n"));
                nested += 1;
            }
            "to_do" => {
                let checked = body.get("checked").and_then(Value::as_bool) == Some(true);
                let mark = if checked { "x" } else { " " };
                out.text.push_str(&format!("{pad}- [{mark}] {text}\n"));
                nested += 1;
            }
            "quote" => out.text.push_str(&format!("{pad}> {text}\n")),
            "callout" => {
                let icon = body
                    .pointer("/icon/emoji")
                    .and_then(Value::as_str)
                    .map(|e| format!("{e} "))
                    .unwrap_or_default();
                out.text.push_str(&format!("{pad}> {icon}{text}\n"));
            }
            "code" => {
                let language = text_of(body, "language");
                let language = if language == "plain text" {
                    ""
                } else {
                    language
                };
                out.text.push_str(&format!("```{language}\n{text}\n```\n"));
                let caption = plain(body.get("caption"));
                if !caption.is_empty() {
                    out.text.push_str(&format!("{caption}\n"));
                }
            }
            "equation" => {
                out.text
                    .push_str(&format!("{pad}$$ {} $$\n", text_of(body, "expression")));
            }
            "divider" => out.text.push_str("---\n"),
            "table" => {
                let header = body.get("has_column_header").and_then(Value::as_bool) == Some(true);
                render_table(tree, id, header, out);
                continue;
            }
            "child_page" => {
                out.child_pages.push(id.to_owned());
                continue;
            }
            "child_database" => {
                out.text
                    .push_str(&format!("{pad}Database: {}\n", text_of(body, "title")));
                continue;
            }
            "bookmark" | "embed" | "link_preview" => {
                let caption = plain(body.get("caption"));
                let url = text_of(body, "url");
                out.text.push_str(&format!(
                    "{pad}{}\n",
                    [caption.as_str(), url].join(" ").trim()
                ));
            }
            "image" | "video" | "file" | "pdf" | "audio" => {
                let caption = plain(body.get("caption"));
                let name = text_of(body, "name");
                let label = if caption.is_empty() {
                    name
                } else {
                    caption.as_str()
                };
                if !label.is_empty() {
                    out.text.push_str(&format!("{pad}[{kind}: {label}]\n"));
                }
            }
            // Containers and navigation: their children (if any) carry the text.
            "column_list" | "column" | "synced_block" | "template" | "link_to_page"
            | "breadcrumb" | "table_of_contents" | "table_row" | "unsupported" => {}
            _ => {
                if !text.is_empty() {
                    out.text.push_str(&format!("{pad}{text}\n"));
                }
            }
        }
        if block.get("has_children").and_then(Value::as_bool) == Some(true) {
            render_children(tree, id, nested, out);
        }
    }
}

/// A table's rows (`table_row` children) as a Markdown table.
fn render_table(tree: &BlockTree, table: &str, header: bool, out: &mut Rendered) {
    let Some(rows) = tree.children.get(table) else {
        return;
    };
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .pointer("/table_row/cells")
            .and_then(Value::as_array)
            .map(|cells| {
                cells
                    .iter()
                    .map(|c| plain(Some(c)).replace('|', "\\|").replace('\n', " "))
                    .collect()
            })
            .unwrap_or_default();
        out.text.push_str(&format!("| {} |\n", cells.join(" | ")));
        if i == 0 && header {
            out.text
                .push_str(&format!("|{}\n", " --- |".repeat(cells.len().max(1))));
        }
    }
}

/// A property's name as a field key: lowercase snake_case, apart from engram's own keys.
fn field_key(name: &str) -> String {
    let mut key = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            key.push(c);
        } else if !key.ends_with('_') && !key.is_empty() {
            key.push('_');
        }
    }
    let key = key.trim_end_matches('_').to_owned();
    if key.is_empty() {
        "property".to_owned()
    } else if RESERVED_KEYS.contains(&key.as_str()) || key.starts_with("notion_") {
        format!("property_{key}")
    } else {
        key
    }
}

/// A user's name (or e-mail, or id).
fn person(user: &Value) -> Value {
    let name = text_of(user, "name");
    let email = user
        .pointer("/person/email")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = text_of(user, "id");
    Value::from(
        [name, email, id]
            .into_iter()
            .find(|s| !s.is_empty())
            .unwrap_or_default(),
    )
}

/// A property's value as a field; `None` for an empty one or a kind not kept.
fn property_value(property: &Value) -> Option<Value> {
    let kind = text_of(property, "type");
    let value = property.get(kind)?;
    let name_of = |v: &Value| v.get("name").and_then(Value::as_str).map(Value::from);
    let kept = match kind {
        "title" | "rich_text" => {
            let text = plain(Some(value));
            (!text.is_empty()).then(|| Value::from(text))
        }
        "select" | "status" => name_of(value),
        "multi_select" => Some(Value::Array(
            value.as_array()?.iter().filter_map(name_of).collect(),
        )),
        "people" => Some(Value::Array(value.as_array()?.iter().map(person).collect())),
        "number" | "checkbox" => (!value.is_null()).then(|| value.clone()),
        "date" => value.get("start").filter(|s| s.is_string()).cloned(),
        "url" | "email" | "phone_number" | "created_time" | "last_edited_time" => {
            value.as_str().filter(|s| !s.is_empty()).map(Value::from)
        }
        "formula" => {
            let inner = text_of(value, "type");
            match value.get(inner) {
                Some(Value::Object(date)) => date.get("start").cloned(),
                Some(v) if !v.is_null() => Some(v.clone()),
                Some(_) | None => None,
            }
        }
        "unique_id" => {
            let number = value.get("number").and_then(Value::as_i64)?;
            Some(match value.get("prefix").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => Value::from(format!("{prefix}-{number}")),
                Some(_) | None => Value::from(number),
            })
        }
        _ => None,
    };
    kept
}

/// A row's properties as fields.
fn property_fields(page: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    if let Some(props) = page.get("properties").and_then(Value::as_object) {
        for (name, property) in props {
            if let Some(value) = property_value(property) {
                fields.insert(field_key(name), value);
            }
        }
    }
    fields
}

/// A field's value as text in a row's document.
fn field_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(field_text).collect::<Vec<_>>().join(", "),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::Null => String::new(),
        Value::Number(_) | Value::Object(_) => value.to_string(),
    }
}

/// The page (or database) a page sits in.
fn parent_id(page: &Value) -> Option<&str> {
    let parent = page.get("parent")?;
    parent.get(text_of(parent, "type"))?.as_str()
}

/// What every page's entry carries.
fn page_entry(page: &Value, version: String, kind: &str) -> Entry {
    let mut fields = Map::new();
    fields.insert("notion_kind".into(), Value::from(kind));
    if let Some(parent) = parent_id(page) {
        fields.insert("notion_parent_id".into(), Value::from(parent));
    }
    let created = text_of(page, "created_time");
    if !created.is_empty() {
        fields.insert("notion_created_time".into(), Value::from(created));
    }
    Entry {
        native_id: text_of(page, "id").to_owned(),
        version,
        title: page_title(page),
        file_name: String::new(),
        url: text_of(page, "url").to_owned(),
        modified_at: text_of(page, "last_edited_time").to_owned(),
        fields,
        content: None,
        state: String::new(),
    }
}

/// A database row's entry: its properties as fields, `last_edited_time` its version.
fn row_entry(row: &Value, database_id: &str, database: &str) -> Entry {
    let mut entry = page_entry(
        row,
        text_of(row, "last_edited_time").to_owned(),
        "database_row",
    );
    let mut fields = property_fields(row);
    fields.append(&mut entry.fields);
    fields.insert("notion_database".into(), Value::from(database));
    fields.insert("notion_database_id".into(), Value::from(database_id));
    entry.fields = fields;
    entry
}

/// What a resource is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Page(String),
    Database(String),
}

fn target(resource: &ResourceRef) -> Result<Target, ProviderError> {
    let (kind, id) = match resource.id.split_once(':') {
        Some((kind, id)) if kind == "page" || kind == "database" => (kind, id),
        Some(_) | None => (resource.resource_type.as_str(), resource.id.as_str()),
    };
    let valid =
        !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    match kind {
        "page" if valid => Ok(Target::Page(id.to_owned())),
        "database" if valid => Ok(Target::Database(id.to_owned())),
        _ => Err(ProviderError::Invalid(format!(
            "`{}` is not a Notion page (page:<id>) or database (database:<id>)",
            resource.id
        ))),
    }
}

/// Where a pass over a page tree is. A full pass walks the tree from its root (so pages gone
/// since leave); a pass in between reads only what Notion's search lists as edited since the
/// last pass's newest edit, in the tree, and the pages a changed page no longer holds.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct PagesWalk {
    /// The pages still to visit (a stack, with their depth).
    queue: Vec<(String, usize)>,
    visited: usize,
    /// Some pages were left out (bounds): the pass does not list every page.
    truncated: bool,
    full: bool,
    /// The search of a pass in between; `None` in a full pass.
    search: Option<EditedSince>,
    /// The pages a pass in between put in its queue (each is visited once).
    taken: BTreeSet<String>,
    /// The newest `last_edited_time` seen (the next pass's start).
    high: String,
    /// When the last full pass ended (Unix seconds).
    full_at: i64,
}

/// A search for the pages edited since a time, newest first.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct EditedSince {
    /// Unix seconds: pages edited before this are not read (the last pass's newest edit, less
    /// [`RECENT_EDIT_S`], as Notion rounds edit times to the minute).
    since: i64,
    start_cursor: Option<String>,
    done: bool,
}

/// What a page keeps until the next pass: its child pages.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct PageState {
    children: Vec<String>,
}

/// Where a database pass is.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct RowsWalk {
    title: String,
    /// The pass lists every row (its end removes those it did not see).
    full: bool,
    /// Rows edited on or after this (empty: all).
    since: String,
    start_cursor: Option<String>,
    /// The newest `last_edited_time` seen (the next pass's `since`).
    high: String,
    full_at: i64,
}

/// The cursor a database or page pass leaves.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct RowsCursor {
    since: String,
    /// When the last pass over every row ended (Unix seconds).
    full_at: i64,
}

/// The body of a database query from `walk`.
fn query_body(walk: &RowsWalk) -> Value {
    let mut body = json!({
        "page_size": PAGE_SIZE,
        "sorts": [{"timestamp": "last_edited_time", "direction": "ascending"}],
    });
    if !walk.since.is_empty() {
        body["filter"] = json!({
            "timestamp": "last_edited_time",
            "last_edited_time": {"on_or_after": walk.since}
        });
    }
    if let Some(cursor) = &walk.start_cursor {
        body["start_cursor"] = Value::from(cursor.clone());
    }
    body
}

impl NotionProvider {
    async fn list_pages(
        &self,
        api: &Api<'_>,
        root: &str,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let mut walk: PagesWalk = if position.within.is_empty() {
            let cursor: RowsCursor = serde_json::from_str(&position.cursor).unwrap_or_default();
            let since = unix_of(&cursor.since);
            let full = since.is_none() || now_unix() - cursor.full_at >= FULL_PASS_EVERY_S;
            PagesWalk {
                queue: if full {
                    vec![(root.to_owned(), 0)]
                } else {
                    Vec::new()
                },
                full,
                search: since.filter(|_| !full).map(|since| EditedSince {
                    since: since - RECENT_EDIT_S,
                    ..EditedSince::default()
                }),
                high: cursor.since.clone(),
                full_at: cursor.full_at,
                ..PagesWalk::default()
            }
        } else {
            saved_pass(&position.within)?
        };
        let (mut entries, mut deleted) = (Vec::new(), Vec::new());
        let mut visited = 0;
        while visited < PAGES_PER_LIST {
            let Some((id, depth)) = walk.queue.pop() else {
                if walk.search.as_ref().is_some_and(|s| !s.done) {
                    // A page of the search counts as a visit: a list call stays bounded.
                    visited += 1;
                    self.edited_since(api, root, &mut walk, known).await?;
                    continue;
                }
                break;
            };
            visited += 1;
            walk.visited += 1;
            let what = format!("page {id}");
            let page = match api.get(&["pages", &id], &[], &what).await {
                Ok(page) => page,
                // A page below the root no longer shared or gone: not listed, so it leaves.
                Err(ProviderError::Resource { http_status, .. })
                    if id != root && (http_status == 403 || http_status == 404) =>
                {
                    if !walk.full {
                        deleted.push(id);
                    }
                    continue;
                }
                Err(err) => return Err(err),
            };
            if archived(&page) {
                deleted.push(id);
                continue;
            }
            let edited = text_of(&page, "last_edited_time").to_owned();
            if edited > walk.high {
                walk.high.clone_from(&edited);
            }
            let recent = unix_of(&edited).is_none_or(|at| now_unix() - at < RECENT_EDIT_S);
            let held = known.objects(std::slice::from_ref(&id)).await?.remove(&id);
            let had: Vec<String> = held
                .as_ref()
                .and_then(|h| serde_json::from_str::<PageState>(&h.state).ok())
                .map(|s| s.children)
                .unwrap_or_default();
            let (entry, children) = match held {
                Some(held) if !recent && held.version.starts_with(&format!("{edited}|")) => {
                    let mut entry = page_entry(&page, held.version, "page");
                    entry.state = held.state;
                    (entry, had.clone())
                }
                Some(_) | None => {
                    let tree = api.block_tree(&id, &what).await?;
                    let rendered = render(&tree, &id);
                    let title = page_title(&page);
                    let text = format!("# {title}\n\n{}", rendered.text.trim_start());
                    let version = format!("{edited}|{}", crate::short_hash(text.as_bytes()));
                    let mut entry = page_entry(&page, version, "page");
                    entry.state = serde_json::to_string(&PageState {
                        children: rendered.child_pages.clone(),
                    })
                    .map_err(|e| ProviderError::Invalid(e.to_string()))?;
                    entry.content = Some(Content::Text(text));
                    (entry, rendered.child_pages)
                }
            };
            entries.push(entry);
            let children = if walk.full {
                children
            } else {
                // Between full passes a page's known children are read only when the search
                // lists them; its new ones now, and those it no longer holds to see whether
                // they are gone (archived or no longer shared).
                let new: Vec<String> = children
                    .iter()
                    .filter(|c| !had.contains(c))
                    .cloned()
                    .collect();
                let held_new = known.objects(&new).await?;
                let mut visit: Vec<String> = new
                    .into_iter()
                    .filter(|c| !held_new.contains_key(c))
                    .collect();
                visit.extend(had.into_iter().filter(|c| !children.contains(c)));
                visit
            };
            // Depth first, in the order the page holds them.
            for child in children.into_iter().rev() {
                if depth + 1 > PAGE_DEPTH_MAX
                    || walk.visited + walk.queue.len() >= PAGES_PER_PASS_MAX
                {
                    walk.truncated = true;
                    continue;
                }
                // A tree holds a page once; between full passes a page may be listed twice.
                if walk.full || walk.taken.insert(child.clone()) {
                    walk.queue.push((child, depth + 1));
                }
            }
        }
        let searching = walk.search.as_ref().is_some_and(|s| !s.done);
        let (next, cursor) = if walk.queue.is_empty() && !searching {
            let cursor = RowsCursor {
                since: walk.high.clone(),
                full_at: if walk.full { now_unix() } else { walk.full_at },
            };
            (
                None,
                serde_json::to_string(&cursor)
                    .map_err(|e| ProviderError::Invalid(e.to_string()))?,
            )
        } else {
            let within =
                serde_json::to_string(&walk).map_err(|e| ProviderError::Invalid(e.to_string()))?;
            (Some(within), String::new())
        };
        Ok(Page {
            entries,
            deleted,
            next,
            cursor,
            complete_listing: walk.full && !walk.truncated,
            ..Page::default()
        })
    }

    /// One page of the search for pages edited since the walk's time, newest first: those in
    /// the tree (the root, a page engram holds from it, or a page whose parent is one of those
    /// or was taken by this pass) join the queue. The search ends at the first page edited
    /// before the time.
    async fn edited_since(
        &self,
        api: &Api<'_>,
        root: &str,
        walk: &mut PagesWalk,
        known: &dyn Known,
    ) -> Result<(), ProviderError> {
        let Some(search) = walk.search.as_mut() else {
            return Ok(());
        };
        let mut body = json!({
            "filter": {"property": "object", "value": "page"},
            "sort": {"timestamp": "last_edited_time", "direction": "descending"},
            "page_size": PAGE_SIZE,
        });
        if let Some(cursor) = &search.start_cursor {
            body["start_cursor"] = Value::from(cursor.clone());
        }
        let answer = api
            .post(&["search"], &body, "the pages edited since the last pass")
            .await?;
        let mut found = Vec::new();
        for page in results(&answer) {
            let edited = unix_of(text_of(page, "last_edited_time"));
            if edited.is_some_and(|at| at < search.since) {
                search.done = true;
                break;
            }
            let id = text_of(page, "id");
            if !id.is_empty() && !archived(page) {
                found.push((
                    id.to_owned(),
                    parent_id(page).unwrap_or_default().to_owned(),
                ));
            }
        }
        search.start_cursor = next_cursor(&answer);
        search.done |= search.start_cursor.is_none();
        let asked: Vec<String> = found
            .iter()
            .flat_map(|(id, parent)| [id.clone(), parent.clone()])
            .collect();
        let held = known.objects(&asked).await?;
        // Parents first or not, a page joins once its parent has.
        loop {
            let mut grew = false;
            for (id, parent) in &found {
                let inside = id == root
                    || held.contains_key(id)
                    || parent == root
                    || held.contains_key(parent)
                    || walk.taken.contains(parent);
                if inside && walk.taken.insert(id.clone()) {
                    walk.queue.push((id.clone(), 1));
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        Ok(())
    }

    async fn list_rows(
        &self,
        api: &Api<'_>,
        database_id: &str,
        position: &Position,
    ) -> Result<Page, ProviderError> {
        let what = format!("database {database_id}");
        let walk: RowsWalk = if position.within.is_empty() {
            let cursor: RowsCursor = serde_json::from_str(&position.cursor).unwrap_or_default();
            let database = api.get(&["databases", database_id], &[], &what).await?;
            if archived(&database) {
                // The database is in the trash: every row leaves.
                return Ok(Page {
                    complete_listing: true,
                    ..Page::default()
                });
            }
            let full = cursor.since.is_empty() || now_unix() - cursor.full_at >= FULL_PASS_EVERY_S;
            RowsWalk {
                title: database_title(&database),
                full,
                since: if full {
                    String::new()
                } else {
                    cursor.since.clone()
                },
                start_cursor: None,
                high: cursor.since.clone(),
                full_at: cursor.full_at,
            }
        } else {
            saved_pass(&position.within)?
        };
        let answer = api
            .post(
                &["databases", database_id, "query"],
                &query_body(&walk),
                &what,
            )
            .await?;
        let mut walk = walk;
        let (mut entries, mut deleted) = (Vec::new(), Vec::new());
        for row in results(&answer) {
            let edited = text_of(row, "last_edited_time");
            if edited > walk.high.as_str() {
                walk.high = edited.to_owned();
            }
            if text_of(row, "object") != "page" || text_of(row, "id").is_empty() {
                continue;
            }
            if archived(row) {
                deleted.push(text_of(row, "id").to_owned());
            } else {
                entries.push(row_entry(row, database_id, &walk.title));
            }
        }
        walk.start_cursor = next_cursor(&answer);
        let (next, cursor) = match &walk.start_cursor {
            Some(_) => (
                Some(
                    serde_json::to_string(&walk)
                        .map_err(|e| ProviderError::Invalid(e.to_string()))?,
                ),
                String::new(),
            ),
            None => (
                None,
                serde_json::to_string(&RowsCursor {
                    since: walk.high.clone(),
                    full_at: if walk.full { now_unix() } else { walk.full_at },
                })
                .map_err(|e| ProviderError::Invalid(e.to_string()))?,
            ),
        };
        Ok(Page {
            entries,
            deleted,
            next,
            cursor,
            complete_listing: walk.full,
            ..Page::default()
        })
    }
}

/// The largest verification request taken as one (Notion's is a one-member object).
const VERIFICATION_MAX_BYTES: usize = 4096;

/// Notion's verification request: an unsigned body `{"verification_token": "secret_…"}`, sent
/// once when a webhook subscription is created (and again on "Resend token").
fn verification_token(request: &crate::push::PushRequest<'_>) -> Option<crate::oauth::Secret> {
    if request.header("x-notion-signature").is_some() || request.body.len() > VERIFICATION_MAX_BYTES
    {
        return None;
    }
    let body: Map<String, Value> = serde_json::from_slice(request.body).ok()?;
    let token = body.get("verification_token")?.as_str()?;
    (body.len() == 1 && (16..=1000).contains(&token.len()) && !token.chars().any(char::is_control))
        .then(|| crate::oauth::Secret::new(token))
}

/// Event types that change nothing engram reads: comments, which it does not sync.
const NOT_SYNCED_EVENTS: &[&str] = &["comment."];

/// A Notion webhook event: `X-Notion-Signature: sha256=<hex HMAC-SHA256 of the body under the
/// subscription's verification token>` (kept as `webhook_secret`); its `id` names the delivery
/// (the same on Notion's retries) and `type` the event (`page.content_updated`, …). Notion's
/// events carry no signed sending time, so replays are refused by id only; a replay costs at
/// most an incremental pass.
fn verify_notion_push(
    credentials: &Map<String, Value>,
    request: &crate::push::PushRequest<'_>,
) -> Result<crate::push::PushEvent, crate::push::PushError> {
    use crate::push::{hmac_sha256_matches, secret, PushError, PushEvent};
    let secret = secret(credentials, "Notion")?;
    let signature = request
        .header("x-notion-signature")
        .ok_or_else(|| PushError::Unsigned("the event has no X-Notion-Signature".to_owned()))?;
    let hex = signature.strip_prefix("sha256=").ok_or_else(|| {
        PushError::Unsigned("the event's X-Notion-Signature is not `sha256=…`".to_owned())
    })?;
    if !hmac_sha256_matches(secret, request.body, hex) {
        return Err(PushError::Unsigned(
            "the event's X-Notion-Signature does not match the connector's webhook_secret"
                .to_owned(),
        ));
    }
    let body: Value = serde_json::from_slice(request.body)
        .map_err(|_| PushError::Malformed("the event's body is not JSON".to_owned()))?;
    let delivery_id = body
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= 200)
        .ok_or_else(|| PushError::Malformed("the event has no `id`".to_owned()))?;
    let event = text_of(&body, "type").chars().take(100).collect::<String>();
    Ok(PushEvent {
        delivery_id: delivery_id.to_owned(),
        ping: NOT_SYNCED_EVENTS.iter().any(|p| event.starts_with(p)),
        event,
    })
}

#[async_trait]
impl Provider for NotionProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(verify_notion_push(credentials, request))
    }

    fn push_endpoint_secret(
        &self,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<crate::oauth::Secret> {
        verification_token(request)
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        // A public Notion integration: HTTP Basic with its id and secret at the token endpoint;
        // the user picks the pages to share while authorizing (`owner=user`).
        Some(crate::oauth::ProviderOAuth {
            authorization_endpoint: "https://api.notion.com/v1/oauth/authorize",
            token_endpoint: "https://api.notion.com/v1/oauth/token",
            scope: "",
            client_auth: crate::oauth::ClientAuth::Basic,
            extra_authorization_params: &[("owner", "user")],
        })
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, &self.pacer, true).await?;
        let mut found: Vec<Value> = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..SEARCH_PAGES_MAX {
            let mut body = json!({"page_size": PAGE_SIZE});
            if let Some(cursor) = &cursor {
                body["start_cursor"] = Value::from(cursor.clone());
            }
            let answer = api
                .post(
                    &["search"],
                    &body,
                    "the pages and databases shared with the integration",
                )
                .await?;
            // Only what discovery needs of each object is kept.
            found.extend(results(&answer).iter().filter(|o| !archived(o)).map(|o| {
                json!({
                    "object": o.get("object"), "id": o.get("id"), "parent": o.get("parent"),
                    "url": o.get("url"), "last_edited_time": o.get("last_edited_time"),
                    "title": if text_of(o, "object") == "database" { database_title(o) } else { page_title(o) },
                })
            }));
            cursor = next_cursor(&answer);
            if cursor.is_none() {
                break;
            }
        }
        let shared: HashSet<&str> = found.iter().map(|o| text_of(o, "id")).collect();
        let mut resources = Vec::new();
        for object in &found {
            let id = text_of(object, "id");
            let parent = object.get("parent").unwrap_or(&Value::Null);
            let kind = text_of(object, "object");
            let top = match text_of(parent, "type") {
                "workspace" => true,
                "page_id" => !shared.contains(text_of(parent, "page_id")),
                // Rows are their database's; a page inside another's block is reached from it.
                _ => false,
            };
            if id.is_empty() || !(kind == "database" || (kind == "page" && top)) {
                continue;
            }
            resources.push(DiscoveredResource {
                id: format!("{kind}:{id}"),
                name: text_of(object, "title").to_owned(),
                resource_type: kind.to_owned(),
                metadata: json!({
                    "notion_id": id,
                    "url": object.get("url"),
                    "last_edited_time": object.get("last_edited_time"),
                    "parent_type": parent.get("type"),
                }),
            });
        }
        Ok(resources)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let api = Api::new(access, &self.pacer, true).await?;
        let mut page = match target(resource)? {
            Target::Page(id) => self.list_pages(&api, &id, position, known).await?,
            Target::Database(id) => self.list_rows(&api, &id, position).await?,
        };
        page.acl_warning = UNREADABLE_SHARING.to_owned();
        Ok(page)
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let read = async {
            let api = Api::new(access, &self.pacer, false).await?;
            let what = format!("page {}", entry.native_id);
            let tree = api.block_tree(&entry.native_id, &what).await?;
            let rendered = render(&tree, &entry.native_id);
            let mut text = format!("# {}\n\n", entry.title);
            for (key, value) in &entry.fields {
                if key.starts_with("notion_") {
                    continue;
                }
                let value = field_text(value);
                if !value.is_empty() {
                    text.push_str(&format!("{key}: {value}\n"));
                }
            }
            text.push('\n');
            text.push_str(rendered.text.trim_start());
            Ok(text)
        };
        match read.await {
            Ok(text) if text.len() > max_bytes => Err(ProviderError::Object(format!(
                "{} is longer than the {max_bytes} bytes an item may hold",
                entry.native_id
            ))),
            Ok(text) => Ok(Content::Text(text)),
            // A rate limit stops the pass (waiting is what helps), not this object alone.
            Err(e @ (ProviderError::Object(_) | ProviderError::RateLimited { .. })) => Err(e),
            Err(
                e @ (ProviderError::Unauthorized { .. }
                | ProviderError::Resource { .. }
                | ProviderError::Transient { .. }
                | ProviderError::Invalid(_)),
            ) => Err(ProviderError::Object(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verification_token_is_taken_only_unsigned_and_alone_and_events_only_signed() {
        use crate::push::{hmac_sha256_hex, PushError, PushRequest};
        let request = |headers: &[(String, String)], body: &[u8]| {
            verification_token(&PushRequest {
                headers,
                body,
                now_unix: 1_800_000_000,
            })
            .map(|t| t.expose().to_owned())
        };
        let token = "secret_verifyToken000000000001";
        let body = json!({"verification_token": token}).to_string();
        assert_eq!(request(&[], body.as_bytes()).as_deref(), Some(token));
        let signed = [("x-notion-signature".to_owned(), "sha256=00".to_owned())];
        assert_eq!(
            request(&signed, body.as_bytes()),
            None,
            "a signed body is an event"
        );
        let more = json!({"verification_token": token, "type": "page.created"}).to_string();
        assert_eq!(request(&[], more.as_bytes()), None);
        assert_eq!(request(&[], br#"{"verification_token":"short"}"#), None);
        assert_eq!(request(&[], b"not json"), None);

        let credentials = json!({"token": "ntn_x", "webhook_secret": token});
        let credentials = credentials.as_object().unwrap();
        let event = |kind: &str| {
            json!({"id": "evt-1", "type": kind, "entity": {"id": "p1", "type": "page"}}).to_string()
        };
        let verify = |body: &str, signature: Option<String>| {
            let headers: Vec<(String, String)> = signature
                .map(|s| ("x-notion-signature".to_owned(), s))
                .into_iter()
                .collect();
            verify_notion_push(
                credentials,
                &PushRequest {
                    headers: &headers,
                    body: body.as_bytes(),
                    now_unix: 1_800_000_000,
                },
            )
        };
        let sign = |body: &str| {
            Some(format!(
                "sha256={}",
                hmac_sha256_hex(token, body.as_bytes())
            ))
        };
        let updated = event("page.content_updated");
        let verified = verify(&updated, sign(&updated)).unwrap();
        assert_eq!(
            (
                verified.delivery_id.as_str(),
                verified.event.as_str(),
                verified.ping
            ),
            ("evt-1", "page.content_updated", false)
        );
        let comment = event("comment.created");
        assert!(verify(&comment, sign(&comment)).unwrap().ping);
        assert!(matches!(
            verify(&updated, None),
            Err(PushError::Unsigned(_))
        ));
        assert!(matches!(
            verify(&updated, sign(&comment)),
            Err(PushError::Unsigned(_))
        ));
        let no_id = json!({"type": "page.created"}).to_string();
        assert!(matches!(
            verify(&no_id, sign(&no_id)),
            Err(PushError::Malformed(_))
        ));
    }

    fn rich(text: &str) -> Value {
        json!([{"type": "text", "text": {"content": text, "link": null}, "plain_text": text,
                "annotations": {"bold": false}, "href": null}])
    }

    fn block(id: &str, kind: &str, body: Value, has_children: bool) -> Value {
        let mut block =
            json!({"object": "block", "id": id, "type": kind, "has_children": has_children});
        block[kind] = body;
        block
    }

    fn text_block(id: &str, kind: &str, text: &str) -> Value {
        block(
            id,
            kind,
            json!({"rich_text": rich(text), "color": "default"}),
            false,
        )
    }

    fn resource(id: &str, resource_type: &str) -> ResourceRef {
        ResourceRef {
            id: id.to_owned(),
            resource_type: resource_type.to_owned(),
            filters: json!({}),
            provider_metadata: Value::Null,
        }
    }

    #[test]
    fn blocks_read_as_markdown_like_text_with_child_pages_apart() {
        let mut tree = BlockTree::default();
        let mut toggle = text_block("t", "toggle", "Escalation");
        toggle["has_children"] = json!(true);
        let mut bullet = text_block("b1", "bulleted_list_item", "Page the secondary");
        bullet["has_children"] = json!(true);
        let mut table = block(
            "tb",
            "table",
            json!({"has_column_header": true, "has_row_header": false, "table_width": 2}),
            true,
        );
        table["has_children"] = json!(true);
        tree.children.insert(
            "page".into(),
            vec![
                text_block("h", "heading_1", "On call"),
                text_block("p", "paragraph", "Read this first."),
                bullet,
                text_block("n1", "numbered_list_item", "Acknowledge"),
                text_block("n2", "numbered_list_item", "Triage"),
                block(
                    "td",
                    "to_do",
                    json!({"rich_text": rich("Rotate keys"), "checked": true}),
                    false,
                ),
                block(
                    "td2",
                    "to_do",
                    json!({"rich_text": rich("Write report"), "checked": false}),
                    false,
                ),
                text_block("q", "quote", "Calm is contagious."),
                block(
                    "c",
                    "callout",
                    json!({"rich_text": rich("Never page at night twice."),
                                               "icon": {"type": "emoji", "emoji": "💡"}}),
                    false,
                ),
                block(
                    "code",
                    "code",
                    json!({"rich_text": rich("kubectl rollout undo"),
                                              "language": "shell", "caption": []}),
                    false,
                ),
                toggle,
                table,
                block("cp", "child_page", json!({"title": "Runbooks"}), true),
                block("cd", "child_database", json!({"title": "Incidents"}), false),
                text_block("h2", "heading_2", "Later"),
            ],
        );
        tree.children.insert(
            "b1".into(),
            vec![text_block("b2", "bulleted_list_item", "after 15 minutes")],
        );
        tree.children.insert(
            "t".into(),
            vec![text_block("tp", "paragraph", "Call the lead.")],
        );
        let row = |id: &str, a: &str, b: &str| {
            block(id, "table_row", json!({"cells": [rich(a), rich(b)]}), false)
        };
        tree.children.insert(
            "tb".into(),
            vec![row("r0", "Service", "Owner"), row("r1", "api", "ana|bo")],
        );
        let rendered = render(&tree, "page");
        let expected = "\n# On call\nRead this first.\n- Page the secondary\n  - after 15 minutes\n\
                        1. Acknowledge\n2. Triage\n- [x] Rotate keys\n- [ ] Write report\n\
                        > Calm is contagious.\n> 💡 Never page at night twice.\n\
                        ```shell\nkubectl rollout undo\n```\n- Escalation\n  Call the lead.\n\
                        | Service | Owner |\n| --- | --- |\n| api | ana\\|bo |\nDatabase: Incidents\n\n## Later\n";
        assert_eq!(rendered.text, expected, "{}", rendered.text);
        assert_eq!(rendered.child_pages, ["cp"]);
        tree.truncated = true;
        assert!(render(&tree, "page").text.contains("left out"));
    }

    #[test]
    fn properties_become_fields_by_their_snake_case_names() {
        let row = json!({
            "object": "page", "id": "row-1", "url": "https://www.notion.so/row-1",
            "created_time": "2026-03-01T00:00:00.000Z", "last_edited_time": "2026-03-02T10:00:00.000Z",
            "parent": {"type": "database_id", "database_id": "db-1"},
            "archived": false, "in_trash": false,
            "properties": {
                "Name": {"id": "title", "type": "title", "title": rich("Fix the login loop")},
                "Notes": {"id": "a", "type": "rich_text", "rich_text": rich("Seen on Safari")},
                "Priority": {"id": "b", "type": "select", "select": {"id": "1", "name": "High", "color": "red"}},
                "Tags": {"id": "c", "type": "multi_select", "multi_select": [{"id": "2", "name": "auth", "color": "red"}, {"id": "3", "name": "web", "color": "blue"}]},
                "Status": {"id": "d", "type": "status", "status": {"id": "4", "name": "In progress", "color": "blue"}},
                "Estimate (h)": {"id": "e", "type": "number", "number": 3.5},
                "Blocked?": {"id": "f", "type": "checkbox", "checkbox": false},
                "Due date": {"id": "g", "type": "date", "date": {"start": "2026-03-10", "end": null, "time_zone": null}},
                "Owner": {"id": "h", "type": "people", "people": [{"object": "user", "id": "u1", "name": "Ana"}, {"object": "user", "id": "u2"}]},
                "Spec": {"id": "i", "type": "url", "url": "https://example.com/spec"},
                "Contact": {"id": "j", "type": "email", "email": "ana@example.com"},
                "Empty": {"id": "k", "type": "select", "select": null},
                "Provider": {"id": "l", "type": "rich_text", "rich_text": rich("reserved")},
                "Files": {"id": "m", "type": "files", "files": []}
            }
        });
        let entry = row_entry(&row, "db-1", "Tasks");
        let fields = &entry.fields;
        let expect = [
            ("name", json!("Fix the login loop")),
            ("notes", json!("Seen on Safari")),
            ("priority", json!("High")),
            ("tags", json!(["auth", "web"])),
            ("status", json!("In progress")),
            ("estimate_h", json!(3.5)),
            ("blocked", json!(false)),
            ("due_date", json!("2026-03-10")),
            ("owner", json!(["Ana", "u2"])),
            ("spec", json!("https://example.com/spec")),
            ("contact", json!("ana@example.com")),
            ("property_provider", json!("reserved")),
            ("notion_kind", json!("database_row")),
            ("notion_database", json!("Tasks")),
            ("notion_database_id", json!("db-1")),
            ("notion_parent_id", json!("db-1")),
        ];
        for (key, value) in expect {
            assert_eq!(fields.get(key), Some(&value), "{key}: {fields:#?}");
        }
        assert!(!fields.contains_key("empty") && !fields.contains_key("files"));
        assert_eq!(entry.title, "Fix the login loop");
        assert_eq!(entry.version, "2026-03-02T10:00:00.000Z");
        assert_eq!(field_text(&json!(["a", "b"])), "a, b");
        assert_eq!(field_key("  Due  date! "), "due_date");
        assert_eq!(field_key("???"), "property");
        assert_eq!(field_key("notion_kind"), "property_notion_kind");
    }

    #[test]
    fn resources_name_a_page_or_a_database() {
        let id = "1a2b3c4d-0000-4000-8000-00000000abcd";
        assert_eq!(
            target(&resource(&format!("page:{id}"), "")).unwrap(),
            Target::Page(id.into())
        );
        assert_eq!(
            target(&resource(&format!("database:{id}"), "")).unwrap(),
            Target::Database(id.into())
        );
        assert_eq!(
            target(&resource(id, "database")).unwrap(),
            Target::Database(id.into())
        );
        for (bad, kind) in [(id, ""), ("page:../x", ""), ("page:", ""), ("user:abc", "")] {
            assert!(
                matches!(target(&resource(bad, kind)), Err(ProviderError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn errors_say_what_to_do_and_rate_limits_say_when() {
        let body = br#"{"object":"error","status":401,"code":"unauthorized","message":"API token is invalid."}"#;
        let err = failure(401, body, "x");
        assert!(matches!(err, ProviderError::Unauthorized { .. }));
        assert!(
            err.to_string()
                .contains("unauthorized: API token is invalid."),
            "{err}"
        );
        assert!(matches!(
            failure(404, b"{}", "page p"),
            ProviderError::Resource {
                http_status: 404,
                ..
            }
        ));
        assert!(failure(404, b"", "page p")
            .to_string()
            .contains("Connections"));
        assert!(matches!(
            failure(403, b"", "x"),
            ProviderError::Resource { .. }
        ));
        for status in [409, 429, 500, 502, 503] {
            assert!(matches!(
                failure(status, b"", "x"),
                ProviderError::Transient { .. }
            ));
        }
        assert_eq!(retry_wait(Some("2"), 0), Duration::from_secs(2));
        assert_eq!(retry_wait(None, 0), Duration::from_secs(1));
        assert_eq!(retry_wait(Some("soon"), 2), Duration::from_secs(4));
        let ProviderError::RateLimited {
            message,
            http_status,
            until_unix,
        } = rate_limit_error(Duration::from_secs(60), 1_800_000_000)
        else {
            panic!("rate limited")
        };
        assert_eq!((http_status, until_unix), (429, 1_800_000_060));
        assert!(
            message.contains("2027-01-15T08:01:00Z") && message.contains("60 s"),
            "{message}"
        );
    }

    #[test]
    fn database_queries_filter_on_the_newest_edit_seen() {
        let full = RowsWalk::default();
        let body = query_body(&full);
        assert!(body.get("filter").is_none(), "{body}");
        assert_eq!(body["sorts"][0]["timestamp"], "last_edited_time");
        let since = RowsWalk {
            since: "2026-03-01T10:00:00.000Z".into(),
            start_cursor: Some("c1".into()),
            ..RowsWalk::default()
        };
        let body = query_body(&since);
        assert_eq!(
            body["filter"],
            json!({"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": "2026-03-01T10:00:00.000Z"}})
        );
        assert_eq!(body["start_cursor"], "c1");
        assert_eq!(body["page_size"], 100);
    }

    #[tokio::test]
    async fn the_pacer_lets_a_burst_through_then_paces() {
        let pacer = Pacer::default();
        let started = Instant::now();
        for _ in 0..20 {
            pacer.take("k").await;
        }
        assert!(started.elapsed() < Duration::from_millis(200));
        pacer.drain("k");
        let started = Instant::now();
        pacer.take("k").await;
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
        // Another token has its own bucket.
        let started = Instant::now();
        pacer.take("other").await;
        assert!(started.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn the_catalog_entry_is_truthful() {
        let provider = NotionProvider::new();
        let info = provider.info();
        assert_eq!(info.provider, "notion");
        assert!(!info.rbac_support);
        assert!(info.setup_guide.contains("Read content"));
        assert!(info.setup_guide.contains("Connections"));
        let ok = json!({"token": "ntn_x", "api_url": "http://127.0.0.1:9"});
        assert!(crate::check_credentials(info, &ok).is_ok());
        assert!(crate::check_credentials(info, &json!({"access_token": "a"})).is_ok());
        assert!(crate::check_credentials(info, &json!({})).is_err());
        assert!(crate::check_credentials(info, &json!({"token": "t", "x": 1})).is_err());
    }
}
