//! `github`: repositories on GitHub (or GitHub Enterprise Server) through its REST API, with a
//! token (classic or fine-grained personal access token, or an app installation token; an
//! OAuth `access_token` reads the same). Discovery lists the repositories the token may read,
//! each offered as two resources, because their passes differ in kind:
//!
//! - `owner/name` (`repository`): the files of the default branch (or `filters.branch`), read
//!   from the Git trees API (`recursive=1`; a truncated tree is walked a tree at a time), each
//!   blob's SHA its version, so only changed files are read (the blobs API). Every pass lists the
//!   whole tree, so files gone since leave engram.
//! - `owner/name/issues` (`issues`): issues and pull requests with their comments, one text
//!   document each. Passes are incremental by `updated_at` (`since`, oldest first, the newest time
//!   seen as the cursor); the first request of an unchanged repository is answered `304` from its
//!   `ETag`. Deleted or transferred issues are not in such a listing, so once a day a pass lists
//!   them all and those it did not see leave engram.
//!
//! Every request goes through the outbound client. GitHub's rate limits are honoured: a `403` or
//! `429` that says so stops the pass, and the next sync waits until the limit resets: a
//! secondary limit's `Retry-After` (a minute when it names none), a spent primary limit's
//! `X-RateLimit-Reset`, or, when the answer says neither, what `GET /rate_limit` says (it costs
//! nothing). The token only
//! ever travels in the `Authorization` header; no message repeats it.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::hosted::{not_json, object_failure, saved_pass, unanswered};
use crate::{
    credential, now_unix, rfc3339, Access, Content, DiscoveredResource, Entry, FieldInfo,
    IntervalBounds, Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

const DEFAULT_API: &str = "https://api.github.com";
const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest listing answer read (GitHub cuts a recursive tree at 7 MB).
const LISTING_MAX_BYTES: usize = 32 * 1024 * 1024;
/// Items per page of GitHub's paginated listings (its maximum).
const PER_PAGE: usize = 100;
/// Repositories discovery lists at most (pages of 100).
const REPO_PAGES_MAX: u32 = 100;
/// Files per page of a pass.
const FILES_PER_PAGE: usize = 2000;
/// Trees read per page when a truncated tree is walked, and at most in one pass.
const TREES_PER_PAGE: usize = 20;
const TREES_MAX: usize = 50_000;
/// Recursive trees kept for the passes reading them (see `TreeCache`).
const TREES_CACHED: usize = 4;
/// The blobs API serves files up to 100 MB.
const BLOB_MAX_BYTES: u64 = 100 * 1024 * 1024;
/// Collaborator pages read for a private repository at most (1,000 people).
const COLLABORATOR_PAGES_MAX: u32 = 10;
/// Comment pages read for one issue at most (10,000 comments).
const COMMENT_PAGES_MAX: u32 = 100;
/// How often an issues pass lists every issue, so deleted and transferred ones leave.
const FULL_ISSUE_PASS_EVERY_S: i64 = 86_400;
/// Longest message of GitHub's quoted in an error.
const QUOTED_MAX: usize = 200;

/// File types the parsers cannot read: listed never, so never counted failed.
const BINARY_EXTENSIONS: &[&str] = &[
    "7z", "a", "avi", "bin", "bmp", "bz2", "class", "dat", "db", "dll", "dmg", "dylib", "eot",
    "exe", "flac", "gif", "gz", "ico", "iso", "jar", "lz4", "m4a", "mkv", "mov", "mp3", "mp4", "o",
    "obj", "ogg", "otf", "pdb", "psd", "pyc", "pyo", "rar", "so", "sqlite", "sqlite3", "tar",
    "tgz", "ttf", "war", "wasm", "wav", "webm", "woff", "woff2", "xz", "zst",
];

pub struct GitHubProvider {
    info: ProviderInfo,
    trees: TreeCache,
}

impl Default for GitHubProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl GitHubProvider {
    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "github",
                category: "code",
                connector_type: "repository",
                rank: Some(9),
                rbac_support: true,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["file", "issue", "pull_request"],
                fields: vec![
                    field(
                        "repository",
                        "string",
                        "The repository, owner/name",
                        Some("additional_metadata.repository"),
                    ),
                    field(
                        "kind",
                        "string",
                        "file, issue or pull_request",
                        Some("additional_metadata.kind"),
                    ),
                    field(
                        "path",
                        "string",
                        "A file's path in the repository",
                        Some("additional_metadata.path"),
                    ),
                    field(
                        "branch",
                        "string",
                        "The branch a file was read from",
                        None,
                    ),
                    field(
                        "number",
                        "integer",
                        "An issue's or pull request's number",
                        Some("additional_metadata.number"),
                    ),
                    field(
                        "state",
                        "string",
                        "An issue's or pull request's state: open or closed",
                        Some("additional_metadata.state"),
                    ),
                    field(
                        "labels",
                        "array",
                        "An issue's or pull request's labels",
                        Some("additional_metadata.labels"),
                    ),
                    field(
                        "author",
                        "string",
                        "The login of who opened the issue or pull request",
                        Some("additional_metadata.author"),
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
                setup_guide: "Give a `token`: a fine-grained personal access token with read access to \
                    the repositories' Contents, Issues, Pull requests and Metadata (or a classic token with \
                    the `repo` scope; `public_repo` for public repositories only), or a GitHub App \
                    installation token. Or authorize with OAuth: `oauth` with your OAuth app's `client_id` and \
                    `client_secret` (its callback URL set to engram's /connectors/oauth/callback), then \
                    POST /connectors/{id}/oauth/start and open the URL it answers (scopes `repo read:org`); \
                    engram refreshes the token itself. For GitHub Enterprise Server set `api_url` to \
                    https://HOST/api/v3 (and `oauth.authorization_url`, `oauth.token_url` to its \
                    /login/oauth/authorize and /login/oauth/access_token). Discovery offers each repository twice: `owner/name` (its files at \
                    the default branch; `filters.branch` picks another, `filters.paths` keeps files under \
                    the given path prefixes, `filters.max_file_bytes` skips larger files) and \
                    `owner/name/issues` (its issues and pull requests with their comments; \
                    `filters.pull_requests: false` leaves pull requests out).",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
            trees: TreeCache::default(),
        }
    }
}

/// A Git tree as the trees API answers it: what a pass reads of it, no more (its other fields,
/// such as each item's `url`, are not kept).
#[derive(Debug, Default, Deserialize)]
struct Tree {
    #[serde(default)]
    sha: String,
    #[serde(default)]
    truncated: bool,
    #[serde(default)]
    tree: Vec<TreeItem>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
struct TreeItem {
    #[serde(default)]
    path: String,
    #[serde(default)]
    mode: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    sha: String,
    #[serde(default)]
    size: Option<u64>,
}

impl TreeItem {
    /// A file's content: not a folder, a submodule (`commit`) or a symbolic link.
    fn is_file(&self) -> bool {
        self.kind == "blob" && self.mode != "120000"
    }
}

/// A file of a recursive tree, as a pass's later pages need it.
#[derive(Debug, Clone, PartialEq)]
struct TreeFile {
    path: Box<str>,
    sha: Box<str>,
    size: Option<u64>,
}

/// The files of the recursive trees that passes are reading, so that a pass's later pages do not
/// ask GitHub for the same tree again: a repository of 20,000 files is ten pages, and each read
/// all 20,000 entries again. A tree is named by the hash of its content, so what is kept never
/// goes stale. Kept per connector (`Access::owner`) and address, never shared between
/// connectors: each reads its trees with its own token. Holds the last `TREES_CACHED` trees,
/// each bounded by what GitHub serves in one recursive answer (100,000 entries, 7 MB; a larger
/// tree comes truncated and is walked a folder at a time instead); a pass's last page drops its
/// tree. A pass resumed elsewhere (another instance, after a restart) reads it again.
#[derive(Default)]
struct TreeCache {
    trees: Mutex<VecDeque<(String, Arc<[TreeFile]>)>>,
}

impl TreeCache {
    fn key(access: &Access, api: &Api, full_name: &str, sha: &str) -> String {
        format!("{}\n{}\n{full_name}\n{sha}", access.owner, api.base)
    }

    fn get(&self, key: &str) -> Option<Arc<[TreeFile]>> {
        let trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.iter().find(|(k, _)| k == key).map(|(_, t)| t.clone())
    }

    fn put(&self, key: String, files: Arc<[TreeFile]>) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.retain(|(k, _)| *k != key);
        if trees.len() >= TREES_CACHED {
            trees.pop_front();
        }
        trees.push_back((key, files));
    }

    fn drop_tree(&self, key: &str) {
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        trees.retain(|(k, _)| k != key);
    }
}

/// A GitHub webhook delivery: `X-Hub-Signature-256` (`sha256=` and the HMAC-SHA256 of the body
/// under the webhook's secret), `X-GitHub-Delivery` (its id, repeated by a redelivery) and
/// `X-GitHub-Event` (`ping` when the hook is created).
fn verify_github_push(
    credentials: &Map<String, Value>,
    request: &crate::push::PushRequest<'_>,
) -> Result<crate::push::PushEvent, crate::push::PushError> {
    use crate::push::{hmac_sha256_matches, secret, PushError, PushEvent};
    let secret = secret(credentials, "GitHub")?;
    let signature = request
        .header("x-hub-signature-256")
        .and_then(|s| s.strip_prefix("sha256="))
        .ok_or_else(|| PushError::Unsigned("the event has no X-Hub-Signature-256".to_owned()))?;
    if !hmac_sha256_matches(secret, request.body, signature) {
        return Err(PushError::Unsigned(
            "the event's X-Hub-Signature-256 does not match the connector's webhook_secret"
                .to_owned(),
        ));
    }
    let delivery_id = request
        .header("x-github-delivery")
        .ok_or_else(|| PushError::Malformed("the event has no X-GitHub-Delivery".to_owned()))?;
    let event = request.header("x-github-event").unwrap_or_default();
    Ok(PushEvent {
        delivery_id: delivery_id.to_owned(),
        event: event.to_owned(),
        ping: event == "ping",
    })
}

/// The API of one connector: where it is and the token that reads it.
struct Api {
    /// The API root, ending with `/`.
    base: url::Url,
    authorization: String,
}

/// A JSON answer and its `ETag`.
struct Answer<T = Value> {
    status: u16,
    etag: Option<String>,
    body: T,
}

/// The first `QUOTED_MAX` characters of GitHub's `message` in an error body.
fn quoted_message(body: &[u8]) -> String {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    message.chars().take(QUOTED_MAX).collect()
}

/// Whether an error answer is GitHub's rate limiting (primary or secondary).
fn rate_limited(status: u16, body: &[u8]) -> bool {
    let message = quoted_message(body).to_lowercase();
    status == 429
        || (status == 403 && (message.contains("rate limit") || message.contains("abuse")))
}

/// What an error answer (not rate limiting) means for the connector; `what` names the request
/// in words (never with the token, which only travels in a header).
fn failure(status: u16, body: &[u8], what: &str) -> ProviderError {
    let said = quoted_message(body);
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    };
    match status {
        401 => ProviderError::Unauthorized {
            message: format!("GitHub refused the token ({what}: 401{said})"),
            http_status: status,
        },
        403 => ProviderError::Resource {
            message: format!("the token may not read {what} (403{said}); grant it access"),
            http_status: status,
        },
        404 => ProviderError::Resource {
            message: format!("{what} is not found, or the token may not see it (404{said})"),
            http_status: status,
        },
        301 | 302 | 307 | 308 => ProviderError::Resource {
            message: format!(
                "{what} moved ({status}): renamed or transferred? Configure its new name"
            ),
            http_status: status,
        },
        410 => ProviderError::Resource {
            message: format!("{what} is gone or disabled (410{said})"),
            http_status: status,
        },
        408 | 500..=599 => ProviderError::Transient {
            message: format!("GitHub answered {status} to {what}{said}"),
            http_status: status,
        },
        _ => ProviderError::Resource {
            message: format!("GitHub answered {status} to {what}{said}"),
            http_status: status,
        },
    }
}

/// The error of a rate-limited answer, saying when the limit resets (`core`: the
/// `resources.core` of `GET /rate_limit`, or the answer's own `X-RateLimit-*` headers).
fn rate_limit_error(status: u16, core: Option<&Value>, now: i64) -> ProviderError {
    let remaining = core
        .and_then(|c| c.get("remaining"))
        .and_then(Value::as_i64);
    let reset = core.and_then(|c| c.get("reset")).and_then(Value::as_i64);
    match (remaining, reset) {
        (Some(0), Some(reset)) => ProviderError::RateLimited {
            message: format!(
                "GitHub's API rate limit for this token is spent until {} (in about {} min); \
                 engram tries again after that",
                rfc3339(reset),
                (reset - now).max(0) / 60 + 1
            ),
            http_status: status,
            until_unix: reset,
        },
        // GitHub's advice for a secondary limit that names no wait: at least a minute.
        (Some(_), _) => secondary_limit(status, now, SECONDARY_WAIT_S),
        (None, _) => ProviderError::Transient {
            message: "GitHub is rate limiting this token; engram tries again later".to_owned(),
            http_status: status,
        },
    }
}

/// How long a secondary rate limit without `Retry-After` is waited out, seconds.
const SECONDARY_WAIT_S: i64 = 60;

fn secondary_limit(status: u16, now: i64, wait_s: i64) -> ProviderError {
    let until = now.saturating_add(wait_s.max(1));
    ProviderError::RateLimited {
        message: format!(
            "GitHub's secondary rate limit stopped the sync (too many requests at once); engram \
             tries again after {}",
            rfc3339(until)
        ),
        http_status: status,
        until_unix: until,
    }
}

impl Api {
    /// The connector's API; `check` checks its address against the outbound policy first
    /// (listing does; fetching an object relies on the check every connection makes).
    async fn new(access: &Access, check: bool) -> Result<Self, ProviderError> {
        let token = credential(access, "token")
            .or_else(|| credential(access, "access_token"))
            .ok_or_else(|| ProviderError::Invalid("the credentials hold no `token`".to_owned()))?;
        let base = crate::api_root(access, DEFAULT_API, check).await?;
        Ok(Self {
            base,
            authorization: format!("Bearer {token}"),
        })
    }

    /// The address of the API path made of `segments` (each escaped as one path segment; a
    /// segment holding `/` is split there), with `query`.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<url::Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| ProviderError::Invalid("`api_url` cannot take a path".to_owned()))?;
            path.pop_if_empty();
            for segment in segments {
                path.extend(segment.split('/'));
            }
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    fn headers(&self, etag: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("authorization", self.authorization.clone()),
            ("accept", "application/vnd.github+json".to_owned()),
            ("x-github-api-version", "2022-11-28".to_owned()),
        ];
        if let Some(etag) = etag {
            headers.push(("if-none-match", etag.to_owned()));
        }
        headers
    }

    /// The repository's own description (`GET /repos/{owner}/{repo}`).
    async fn repository(
        &self,
        access: &Access,
        owner: &str,
        repo: &str,
    ) -> Result<Value, ProviderError> {
        let url = self.url(&["repos", owner, repo], &[])?;
        Ok(self
            .get(
                access,
                &url,
                &format!("repository {owner}/{repo}"),
                None,
                LISTING_MAX_BYTES,
            )
            .await?
            .body)
    }

    /// GETs a JSON answer read straight into `T` (`T::default()` for a `304`, which comes back
    /// as such); other failures as errors.
    async fn get<T: DeserializeOwned + Default>(
        &self,
        access: &Access,
        url: &url::Url,
        what: &str,
        etag: Option<&str>,
        max_bytes: usize,
    ) -> Result<Answer<T>, ProviderError> {
        let fetched = access
            .outbound
            .get_read(url, &self.headers(etag), TIMEOUT, max_bytes)
            .await
            .map_err(|e| unanswered("GitHub", what, e))?;
        if fetched.status == 304 {
            return Ok(Answer {
                status: 304,
                etag: fetched.etag,
                body: T::default(),
            });
        }
        if !(200..300).contains(&fetched.status) {
            if rate_limited(fetched.status, &fetched.body) {
                return Err(self.rate_limit(access, &fetched).await);
            }
            return Err(failure(fetched.status, &fetched.body, what));
        }
        let body = serde_json::from_slice(&fetched.body)
            .map_err(|e| not_json("GitHub", what, fetched.status, e))?;
        Ok(Answer {
            status: fetched.status,
            etag: fetched.etag,
            body,
        })
    }

    /// The error of a rate-limited answer, saying until when: its `Retry-After` (a secondary
    /// limit), its `X-RateLimit-Remaining` and `-Reset` (the primary one), else what `GET
    /// /rate_limit` says (it does not count against the limit).
    async fn rate_limit(
        &self,
        access: &Access,
        fetched: &engram_outbound::Fetched,
    ) -> ProviderError {
        let (status, now) = (fetched.status, now_unix());
        tracing::warn!(http_status = status, "GitHub rate limited a connector");
        if let Some(wait) = fetched
            .header("retry-after")
            .and_then(|v| v.trim().parse::<i64>().ok())
        {
            return secondary_limit(status, now, wait);
        }
        let number = |name: &str| {
            fetched
                .header(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
        };
        if let (Some(remaining), Some(reset)) =
            (number("x-ratelimit-remaining"), number("x-ratelimit-reset"))
        {
            let core = json!({"remaining": remaining, "reset": reset});
            return rate_limit_error(status, Some(&core), now);
        }
        let core = match self.url(&["rate_limit"], &[]) {
            Ok(url) => access
                .outbound
                .get_read(&url, &self.headers(None), TIMEOUT, 1024 * 1024)
                .await
                .ok()
                .filter(|f| f.status == 200)
                .and_then(|f| serde_json::from_slice::<Value>(&f.body).ok())
                .and_then(|v| v.pointer("/resources/core").cloned()),
            Err(_) => None,
        };
        rate_limit_error(status, core.as_ref(), now)
    }

    /// A paginated listing's page (an array).
    async fn list_page(
        &self,
        access: &Access,
        segments: &[&str],
        query: &[(&str, String)],
        page: u32,
        what: &str,
    ) -> Result<Vec<Value>, ProviderError> {
        let mut query = query.to_vec();
        query.push(("per_page", PER_PAGE.to_string()));
        query.push(("page", page.to_string()));
        let url = self.url(segments, &query)?;
        let answer = self
            .get(access, &url, what, None, LISTING_MAX_BYTES)
            .await?;
        array(answer.body, what)
    }
}

fn array(body: Value, what: &str) -> Result<Vec<Value>, ProviderError> {
    match body {
        Value::Array(items) => Ok(items),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => {
            Err(ProviderError::Transient {
                message: format!("GitHub's answer to {what} is not a list"),
                http_status: 200,
            })
        }
    }
}

fn text_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A repository's two resources.
fn discovered(repo: &Value) -> Vec<DiscoveredResource> {
    let full_name = text_of(repo, "full_name");
    if full_name.is_empty() {
        return Vec::new();
    }
    vec![
        DiscoveredResource {
            id: full_name.to_owned(),
            name: full_name.to_owned(),
            resource_type: "repository".to_owned(),
            metadata: json!({
                "full_name": full_name,
                "description": repo.get("description"),
                "default_branch": repo.get("default_branch"),
                "private": repo.get("private"),
                "visibility": repo.get("visibility"),
                "archived": repo.get("archived"),
                "fork": repo.get("fork"),
                "language": repo.get("language"),
                "html_url": repo.get("html_url"),
                "pushed_at": repo.get("pushed_at"),
                "size_kb": repo.get("size"),
            }),
        },
        DiscoveredResource {
            id: format!("{full_name}/issues"),
            name: format!("{full_name}: issues and pull requests"),
            resource_type: "issues".to_owned(),
            metadata: json!({
                "full_name": full_name,
                "private": repo.get("private"),
                "has_issues": repo.get("has_issues"),
                "open_issues_count": repo.get("open_issues_count"),
                "html_url": repo.get("html_url"),
            }),
        },
    ]
}

/// What a resource is: a repository's files, or its issues.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Files { owner: String, repo: String },
    Issues { owner: String, repo: String },
}

fn target(resource: &ResourceRef) -> Result<Target, ProviderError> {
    let parts: Vec<&str> = resource.id.split('/').collect();
    let name = |s: &str| !s.is_empty() && s != "." && s != "..";
    match parts.as_slice() {
        [owner, repo] if name(owner) && name(repo) => {
            let (owner, repo) = ((*owner).to_owned(), (*repo).to_owned());
            Ok(if resource.resource_type == "issues" {
                Target::Issues { owner, repo }
            } else {
                Target::Files { owner, repo }
            })
        }
        [owner, repo, "issues"] if name(owner) && name(repo) => Ok(Target::Issues {
            owner: (*owner).to_owned(),
            repo: (*repo).to_owned(),
        }),
        _ => Err(ProviderError::Invalid(format!(
            "`{}` is not a repository (owner/name) or its issues (owner/name/issues)",
            resource.id
        ))),
    }
}

/// Who may read a repository's objects, as a pass read it.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct Readers {
    /// `None`: unknown (no rule of the objects' own).
    principals: Option<Vec<String>>,
    /// Why they are unknown; empty when they are known.
    warning: String,
}

impl Readers {
    /// Gives an entry the rule, and a version that changes with it (so a changed rule
    /// re-dispatches the object).
    fn apply(&self, entry: &mut Entry) {
        if let Some(principals) = &self.principals {
            crate::set_readers(&mut entry.fields, principals.iter().cloned());
            entry.version.push_str("|acl:");
            entry
                .version
                .push_str(&crate::short_hash(principals.join("\n").as_bytes()));
        }
    }
}

/// What a files pass keeps between its pages.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct FilesWalk {
    /// Who may read the repository, read at the pass's start.
    #[serde(default)]
    readers: Readers,
    /// The root tree read (pinned for the whole pass).
    tree: String,
    branch: String,
    /// The repository's web address.
    html_url: String,
    /// Recursive listing: how many wanted files earlier pages listed.
    offset: usize,
    /// A truncated tree walked a tree at a time: (path prefix, tree SHA) still to read.
    queue: Option<VecDeque<(String, String)>>,
    walked: usize,
}

/// What decides which files a pass lists.
struct FileFilter {
    prefixes: Vec<String>,
    max_bytes: u64,
}

impl FileFilter {
    fn of(resource: &ResourceRef) -> Self {
        let prefixes = resource
            .filters
            .get("paths")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|p| p.trim_start_matches('/').to_owned())
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let max_bytes = resource
            .filters
            .get("max_file_bytes")
            .and_then(Value::as_u64)
            .unwrap_or(BLOB_MAX_BYTES)
            .min(BLOB_MAX_BYTES);
        Self {
            prefixes,
            max_bytes,
        }
    }

    /// Whether a file (a tree item that `is_file`) of `size` bytes at `path` is to be listed.
    fn wants(&self, path: &str, size: Option<u64>) -> bool {
        if size.unwrap_or(0) > self.max_bytes {
            return false;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        if let Some((_, extension)) = name.rsplit_once('.') {
            if BINARY_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str()) {
                return false;
            }
        }
        self.under_prefix(path)
    }

    fn under_prefix(&self, path: &str) -> bool {
        self.prefixes.is_empty() || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }

    /// Whether a folder may hold wanted files.
    fn may_hold(&self, folder: &str) -> bool {
        self.prefixes.is_empty()
            || self
                .prefixes
                .iter()
                .any(|p| p.starts_with(folder) || folder.starts_with(p.as_str()))
    }
}

/// A page of a files pass: `entries`, and where the pass goes on when there is `more`.
fn files_page(entries: Vec<Entry>, walk: &FilesWalk, more: bool) -> Result<Page, ProviderError> {
    Ok(Page {
        entries,
        deleted: Vec::new(),
        next: more
            .then(|| serde_json::to_string(walk))
            .transpose()
            .map_err(|e| ProviderError::Invalid(e.to_string()))?,
        cursor: String::new(),
        complete_listing: true,
        acl_warning: walk.readers.warning.clone(),
        ..Page::default()
    })
}

/// A file's entry.
fn file_entry(owner: &str, repo: &str, walk: &FilesWalk, file: &TreeFile) -> Entry {
    let path: &str = &file.path;
    let full_name = format!("{owner}/{repo}");
    let mut fields = Map::new();
    fields.insert("repository".into(), Value::from(full_name.clone()));
    fields.insert("kind".into(), Value::from("file"));
    fields.insert("path".into(), Value::from(path));
    fields.insert("branch".into(), Value::from(walk.branch.clone()));
    if let Some(size) = file.size {
        fields.insert("size".into(), Value::from(size));
    }
    let url = if walk.html_url.is_empty() {
        String::new()
    } else {
        let mut url = format!("{}/blob/", walk.html_url.trim_end_matches('/'));
        url.push_str(&walk.branch);
        url.push('/');
        url.push_str(path);
        url
    };
    let mut entry = Entry {
        native_id: format!("{full_name}:{path}"),
        version: file.sha.to_string(),
        title: path.to_owned(),
        file_name: path.rsplit('/').next().unwrap_or(path).to_owned(),
        url,
        modified_at: String::new(),
        fields,
        content: None,
        state: String::new(),
    };
    walk.readers.apply(&mut entry);
    entry
}

/// Where an issues pass is.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct IssuesWalk {
    /// Who may read the repository, read at the pass's first page.
    #[serde(default)]
    readers: Readers,
    /// `since` of the requests (empty: from the start).
    since: String,
    page: u32,
    /// A pass listing every issue (its end removes those it did not see).
    full: bool,
    /// The newest `updated_at` seen (the next pass's `since`).
    high: String,
    /// The `ETag` of the pass's first answer and the `since` it was asked with.
    etag: Option<String>,
    etag_since: String,
}

/// The cursor an issues pass leaves.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct IssuesCursor {
    since: String,
    /// When the last pass over every issue ended (Unix seconds).
    full_at: i64,
    /// The `ETag` of the first answer to `since` (an unchanged repository answers `304`).
    etag: Option<String>,
    etag_since: String,
}

/// Where the pass goes on after a page of `items` asked at `walk`: `None` at its end.
fn next_walk(walk: &IssuesWalk, items: &[Value]) -> Option<IssuesWalk> {
    if items.len() < PER_PAGE {
        return None;
    }
    let last = items.last().map(|i| text_of(i, "updated_at")).unwrap_or("");
    let mut next = walk.clone();
    if !last.is_empty() && last > walk.since.as_str() {
        // From the newest seen on, oldest first: issues changed meanwhile move past it and are
        // still read, which page numbers would not promise.
        next.since = last.to_owned();
        next.page = 1;
    } else {
        next.page += 1;
    }
    Some(next)
}

/// An issue's (or pull request's) entry.
fn issue_entry(owner: &str, repo: &str, issue: &Value) -> Option<Entry> {
    let number = issue.get("number").and_then(Value::as_u64)?;
    let full_name = format!("{owner}/{repo}");
    let kind = if issue.get("pull_request").is_some_and(|p| !p.is_null()) {
        "pull_request"
    } else {
        "issue"
    };
    let labels: Vec<Value> = issue
        .get("labels")
        .and_then(Value::as_array)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name").and_then(Value::as_str)))
                .map(Value::from)
                .collect()
        })
        .unwrap_or_default();
    let updated = text_of(issue, "updated_at");
    let comments = issue.get("comments").and_then(Value::as_u64).unwrap_or(0);
    let mut fields = Map::new();
    fields.insert("repository".into(), Value::from(full_name.clone()));
    fields.insert("kind".into(), Value::from(kind));
    fields.insert("number".into(), Value::from(number));
    fields.insert("state".into(), Value::from(text_of(issue, "state")));
    fields.insert("labels".into(), Value::Array(labels));
    if let Some(author) = issue.pointer("/user/login").and_then(Value::as_str) {
        fields.insert("author".into(), Value::from(author));
    }
    fields.insert("comments".into(), Value::from(comments));
    Some(Entry {
        native_id: format!("{full_name}#{number}"),
        version: format!("{updated}|{comments}"),
        title: format!("{} (#{number})", text_of(issue, "title")),
        file_name: String::new(),
        url: text_of(issue, "html_url").to_owned(),
        modified_at: updated.to_owned(),
        fields,
        content: None,
        state: String::new(),
    })
}

/// An issue and its comments as one text: title, what it is, labels, body, then each comment
/// in order with its author.
fn render_issue(full_name: &str, issue: &Value, comments: &[Value]) -> String {
    let number = issue.get("number").and_then(Value::as_u64).unwrap_or(0);
    let kind = if issue.get("pull_request").is_some_and(|p| !p.is_null()) {
        "Pull request"
    } else {
        "Issue"
    };
    let author = |v: &Value| {
        v.pointer("/user/login")
            .and_then(Value::as_str)
            .unwrap_or("ghost")
            .to_owned()
    };
    let mut text = format!("{}\n\n", text_of(issue, "title"));
    text.push_str(&format!(
        "{kind} #{number} in {full_name}, {}, opened by @{} on {}",
        text_of(issue, "state"),
        author(issue),
        text_of(issue, "created_at")
    ));
    let closed = text_of(issue, "closed_at");
    if !closed.is_empty() {
        text.push_str(&format!(", closed on {closed}"));
    }
    text.push_str(".\n");
    let labels: Vec<&str> = issue
        .get("labels")
        .and_then(Value::as_array)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name").and_then(Value::as_str)))
                .collect()
        })
        .unwrap_or_default();
    if !labels.is_empty() {
        text.push_str(&format!("Labels: {}.\n", labels.join(", ")));
    }
    let body = text_of(issue, "body").trim();
    if !body.is_empty() {
        text.push('\n');
        text.push_str(body);
        text.push('\n');
    }
    for comment in comments {
        text.push_str(&format!(
            "\nComment by @{} on {}:\n{}\n",
            author(comment),
            text_of(comment, "created_at"),
            text_of(comment, "body").trim()
        ));
    }
    text
}

impl GitHubProvider {
    async fn list_files(
        &self,
        api: &Api,
        access: &Access,
        resource: &ResourceRef,
        owner: &str,
        repo: &str,
        position: &Position,
    ) -> Result<Page, ProviderError> {
        let full_name = format!("{owner}/{repo}");
        let filter = FileFilter::of(resource);
        let mut walk: FilesWalk = if position.within.is_empty() {
            let meta = api.repository(access, owner, repo).await?;
            let branch = resource
                .filters
                .get("branch")
                .and_then(Value::as_str)
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| text_of(&meta, "default_branch"))
                .to_owned();
            FilesWalk {
                readers: self.readers(api, access, owner, repo, &meta).await?,
                branch,
                html_url: text_of(&meta, "html_url").to_owned(),
                ..FilesWalk::default()
            }
        } else {
            saved_pass(&position.within)?
        };
        let mut entries = Vec::new();
        if walk.queue.is_none() {
            // The whole tree at once (most repositories): read at the pass's first page, kept
            // for its later ones.
            let cached = if walk.tree.is_empty() {
                None
            } else {
                self.trees
                    .get(&TreeCache::key(access, api, &full_name, &walk.tree))
            };
            let files = match cached {
                Some(files) => files,
                None => {
                    let reference = if walk.tree.is_empty() {
                        walk.branch.clone()
                    } else {
                        walk.tree.clone()
                    };
                    let what = format!("the tree of {full_name} at `{reference}`");
                    let url = api.url(
                        &["repos", owner, repo, "git", "trees", &reference],
                        &[("recursive", "1".to_owned())],
                    )?;
                    let tree: Tree =
                        match api.get(access, &url, &what, None, LISTING_MAX_BYTES).await {
                            Ok(answer) => answer.body,
                            // An empty repository has no tree: nothing to list, and nothing left.
                            Err(err) if err.http_status() == 409 => {
                                return Ok(Page {
                                    complete_listing: true,
                                    ..Page::default()
                                })
                            }
                            Err(err) => return Err(err),
                        };
                    walk.tree = tree.sha;
                    if tree.truncated {
                        // Too large to list at once: walked a tree at a time.
                        walk.queue = Some(VecDeque::from([(String::new(), walk.tree.clone())]));
                        return self
                            .walk_trees(api, access, &full_name, owner, repo, &filter, walk)
                            .await;
                    }
                    let files: Arc<[TreeFile]> = tree
                        .tree
                        .into_iter()
                        .filter(TreeItem::is_file)
                        .map(|item| TreeFile {
                            path: item.path.into(),
                            sha: item.sha.into(),
                            size: item.size,
                        })
                        .collect();
                    self.trees.put(
                        TreeCache::key(access, api, &full_name, &walk.tree),
                        files.clone(),
                    );
                    files
                }
            };
            let mut wanted = files
                .iter()
                .filter(|file| filter.wants(&file.path, file.size))
                .skip(walk.offset)
                .peekable();
            while entries.len() < FILES_PER_PAGE {
                let Some(file) = wanted.next() else { break };
                entries.push(file_entry(owner, repo, &walk, file));
            }
            let more = wanted.peek().is_some();
            walk.offset += entries.len();
            if !more {
                self.trees
                    .drop_tree(&TreeCache::key(access, api, &full_name, &walk.tree));
            }
            return files_page(entries, &walk, more);
        }
        self.walk_trees(api, access, &full_name, owner, repo, &filter, walk)
            .await
    }

    /// A page of a truncated tree's walk: up to `TREES_PER_PAGE` folders read, their files
    /// listed and their folders queued.
    #[allow(clippy::too_many_arguments)]
    async fn walk_trees(
        &self,
        api: &Api,
        access: &Access,
        full_name: &str,
        owner: &str,
        repo: &str,
        filter: &FileFilter,
        mut walk: FilesWalk,
    ) -> Result<Page, ProviderError> {
        let mut entries = Vec::new();
        let mut queue = walk.queue.take().unwrap_or_default();
        for _ in 0..TREES_PER_PAGE {
            let Some((prefix, sha)) = queue.pop_front() else {
                break;
            };
            let what = format!("the tree of {full_name} at `{prefix}`");
            let url = api.url(&["repos", owner, repo, "git", "trees", &sha], &[])?;
            let tree: Tree = api
                .get(access, &url, &what, None, LISTING_MAX_BYTES)
                .await?
                .body;
            walk.walked += 1;
            for item in tree.tree {
                let path = format!("{prefix}{}", item.path);
                if item.kind == "tree" {
                    let folder = format!("{path}/");
                    if filter.may_hold(&folder) {
                        if walk.walked + queue.len() >= TREES_MAX {
                            return Err(ProviderError::Invalid(format!(
                                "{full_name} holds more than {TREES_MAX} folders; keep fewer with `filters.paths`"
                            )));
                        }
                        queue.push_back((folder, item.sha));
                    }
                } else if item.is_file() && filter.wants(&path, item.size) {
                    let file = TreeFile {
                        path: path.as_str().into(),
                        sha: item.sha.into(),
                        size: item.size,
                    };
                    entries.push(file_entry(owner, repo, &walk, &file));
                }
            }
        }
        let more = !queue.is_empty();
        walk.queue = Some(queue);
        files_page(entries, &walk, more)
    }

    async fn list_issues(
        &self,
        api: &Api,
        access: &Access,
        resource: &ResourceRef,
        owner: &str,
        repo: &str,
        position: &Position,
    ) -> Result<Page, ProviderError> {
        let full_name = format!("{owner}/{repo}");
        let cursor: IssuesCursor = if position.cursor.is_empty() {
            IssuesCursor::default()
        } else {
            serde_json::from_str(&position.cursor).unwrap_or_default()
        };
        let first = position.within.is_empty();
        let walk: IssuesWalk = if first {
            let full =
                cursor.since.is_empty() || now_unix() - cursor.full_at >= FULL_ISSUE_PASS_EVERY_S;
            IssuesWalk {
                since: if full {
                    String::new()
                } else {
                    cursor.since.clone()
                },
                page: 1,
                full,
                high: cursor.since.clone(),
                etag: None,
                etag_since: String::new(),
                readers: Readers::default(),
            }
        } else {
            saved_pass(&position.within)?
        };
        let mut query = vec![
            ("state", "all".to_owned()),
            ("sort", "updated".to_owned()),
            ("direction", "asc".to_owned()),
        ];
        if !walk.since.is_empty() {
            query.push(("since", walk.since.clone()));
        }
        query.push(("per_page", PER_PAGE.to_string()));
        query.push(("page", walk.page.to_string()));
        let url = api.url(&["repos", owner, repo, "issues"], &query)?;
        // The first answer of a pass, unchanged since the last asked the same: nothing to read.
        let conditional = (first && cursor.etag_since == walk.since)
            .then_some(cursor.etag.as_deref())
            .flatten();
        let what = format!("the issues of {full_name}");
        let answer = api
            .get(access, &url, &what, conditional, LISTING_MAX_BYTES)
            .await?;
        if answer.status == 304 {
            return Ok(Page {
                cursor: serde_json::to_string(&cursor)
                    .map_err(|e| ProviderError::Invalid(e.to_string()))?,
                ..Page::default()
            });
        }
        let items = array(answer.body, &what)?;
        let pull_requests = resource
            .filters
            .get("pull_requests")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let mut walk = walk;
        if first {
            walk.etag = answer.etag;
            walk.etag_since = walk.since.clone();
            // Read once a pass that has something to list (an unchanged repository answers
            // `304` above): a change of readers alone shows at the daily pass over every issue.
            let meta = api.repository(access, owner, repo).await?;
            walk.readers = self.readers(api, access, owner, repo, &meta).await?;
        }
        let mut entries = Vec::new();
        for issue in &items {
            let updated = text_of(issue, "updated_at");
            if updated > walk.high.as_str() {
                walk.high = updated.to_owned();
            }
            if let Some(mut entry) = issue_entry(owner, repo, issue) {
                walk.readers.apply(&mut entry);
                if pull_requests || entry.fields.get("kind") != Some(&Value::from("pull_request")) {
                    entries.push(entry);
                }
            }
        }
        let next = next_walk(&walk, &items);
        let cursor = match &next {
            Some(_) => String::new(),
            None => serde_json::to_string(&IssuesCursor {
                since: walk.high.clone(),
                full_at: if walk.full {
                    now_unix()
                } else {
                    cursor.full_at
                },
                // Good for the next pass only when it asks the same.
                etag: walk.etag.clone().filter(|_| walk.etag_since == walk.high),
                etag_since: walk.etag_since.clone(),
            })
            .map_err(|e| ProviderError::Invalid(e.to_string()))?,
        };
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next: next
                .map(|n| serde_json::to_string(&n))
                .transpose()
                .map_err(|e| ProviderError::Invalid(e.to_string()))?,
            cursor,
            complete_listing: walk.full,
            acl_warning: walk.readers.warning.clone(),
            ..Page::default()
        })
    }

    /// Who may read a repository: everyone for a public one; for a private or internal one,
    /// its collaborators (`github:<login>`, everyone with access: direct, through a team or
    /// the organization), read from `GET /repos/{owner}/{repo}/collaborators`, which asks push
    /// access of the token. When they cannot be read, no rule and a warning saying why.
    async fn readers(
        &self,
        api: &Api,
        access: &Access,
        owner: &str,
        repo: &str,
        meta: &Value,
    ) -> Result<Readers, ProviderError> {
        let full_name = format!("{owner}/{repo}");
        let public = meta.get("private") == Some(&Value::Bool(false))
            && meta
                .get("visibility")
                .and_then(Value::as_str)
                .is_none_or(|v| v == "public");
        if public {
            return Ok(Readers {
                principals: Some(vec![crate::EVERYONE.to_owned()]),
                warning: String::new(),
            });
        }
        let mut principals = Vec::new();
        for page in 1..=COLLABORATOR_PAGES_MAX {
            let url = api.url(
                &["repos", owner, repo, "collaborators"],
                &[
                    ("affiliation", "all".to_owned()),
                    ("per_page", PER_PAGE.to_string()),
                    ("page", page.to_string()),
                ],
            )?;
            let what = format!("the collaborators of {full_name}");
            let people = match api.get(access, &url, &what, None, LISTING_MAX_BYTES).await {
                Ok(answer) => array(answer.body, &what)?,
                Err(
                    err @ (ProviderError::Resource { .. } | ProviderError::Unauthorized { .. }),
                ) => {
                    return Ok(Readers {
                        principals: None,
                        warning: format!(
                            "who may read the private repository {full_name} could not be read \
                             ({}): its collaborators need a token with push access (classic: \
                             `repo`; fine-grained: Metadata read and Administration read); its \
                             files and issues are readable by everyone who may query this \
                             database until then",
                            err.http_status()
                        ),
                    });
                }
                Err(err) => return Err(err),
            };
            let last = people.len() < PER_PAGE;
            principals.extend(
                people
                    .iter()
                    .filter_map(|p| p.get("login").and_then(Value::as_str))
                    .map(|login| format!("github:{}", login.to_lowercase())),
            );
            if last {
                return Ok(Readers {
                    principals: Some(principals),
                    warning: String::new(),
                });
            }
        }
        Ok(Readers {
            principals: None,
            warning: format!(
                "the private repository {full_name} has more than {} collaborators, more than \
                 a rule holds: its files and issues are readable by everyone who may query this \
                 database",
                COLLABORATOR_PAGES_MAX as usize * PER_PAGE
            ),
        })
    }

    async fn fetch_file(
        &self,
        api: &Api,
        access: &Access,
        owner: &str,
        repo: &str,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let size = entry
            .fields
            .get("size")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if size > max_bytes as u64 {
            return Err(ProviderError::Object(format!(
                "{} holds {size} bytes, more than the {max_bytes} a file may",
                entry.native_id
            )));
        }
        // The version is the blob's SHA, then the readers' hash.
        let sha = entry.version.split('|').next().unwrap_or_default();
        let url = api.url(&["repos", owner, repo, "git", "blobs", sha], &[])?;
        // Base64 with line breaks: a third longer and more.
        let bound = max_bytes.saturating_mul(3) / 2 + 64 * 1024;
        let blob = api
            .get(access, &url, &entry.native_id, None, bound)
            .await?
            .body;
        let content = text_of(&blob, "content");
        let bytes = match text_of(&blob, "encoding") {
            "base64" => {
                use base64::Engine as _;
                let compact: String = content.chars().filter(|c| !c.is_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map_err(|e| {
                        ProviderError::Object(format!(
                            "{}: the blob is not base64: {e}",
                            entry.native_id
                        ))
                    })?
            }
            "utf-8" | "utf8" => content.as_bytes().to_vec(),
            other => {
                return Err(ProviderError::Object(format!(
                    "{}: the blob comes in `{other}`, which engram cannot read",
                    entry.native_id
                )))
            }
        };
        if bytes.len() > max_bytes {
            return Err(ProviderError::Object(format!(
                "{} holds more than the {max_bytes} bytes a file may",
                entry.native_id
            )));
        }
        Ok(Content::File(bytes))
    }

    async fn fetch_issue(
        &self,
        api: &Api,
        access: &Access,
        owner: &str,
        repo: &str,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let number = entry
            .fields
            .get("number")
            .and_then(Value::as_u64)
            .ok_or_else(|| ProviderError::Object(format!("{} has no number", entry.native_id)))?
            .to_string();
        let url = api.url(&["repos", owner, repo, "issues", &number], &[])?;
        let issue: Value = api
            .get(access, &url, &entry.native_id, None, LISTING_MAX_BYTES)
            .await?
            .body;
        let mut comments = Vec::new();
        if issue.get("comments").and_then(Value::as_u64).unwrap_or(0) > 0 {
            let what = format!("the comments of {}", entry.native_id);
            for page in 1..=COMMENT_PAGES_MAX {
                let items = api
                    .list_page(
                        access,
                        &["repos", owner, repo, "issues", &number, "comments"],
                        &[],
                        page,
                        &what,
                    )
                    .await?;
                let more = items.len() >= PER_PAGE;
                comments.extend(items);
                if !more {
                    break;
                }
            }
        }
        let text = render_issue(&format!("{owner}/{repo}"), &issue, &comments);
        if text.len() > max_bytes {
            return Err(ProviderError::Object(format!(
                "{} with its comments is longer than the {max_bytes} bytes an item may hold",
                entry.native_id
            )));
        }
        Ok(Content::Text(text))
    }
}

#[async_trait]
impl Provider for GitHubProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(verify_github_push(credentials, request))
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        // GitHub's OAuth apps (and GitHub Apps acting for a user): the token endpoint takes the
        // client's id and secret in the form; `repo` reads private repositories' contents and
        // issues, `read:org` the organizations' repositories. GitHub Enterprise Server serves
        // the same paths on its own host (`oauth.authorization_url`, `oauth.token_url`).
        Some(crate::oauth::ProviderOAuth {
            authorization_endpoint: "https://github.com/login/oauth/authorize",
            token_endpoint: "https://github.com/login/oauth/access_token",
            scope: "repo read:org",
            client_auth: crate::oauth::ClientAuth::Post,
            extra_authorization_params: &[],
        })
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, true).await?;
        let mut found = Vec::new();
        for page in 1..=REPO_PAGES_MAX {
            let query = [("sort", "full_name".to_owned())];
            let repos = match api
                .list_page(
                    access,
                    &["user", "repos"],
                    &query,
                    page,
                    "the token's repositories",
                )
                .await
            {
                Ok(repos) => repos,
                // An app installation token has no user: its installation's repositories.
                Err(ProviderError::Resource {
                    http_status: 403, ..
                }) if page == 1 => return self.installation_repositories(&api, access).await,
                Err(err) => return Err(err),
            };
            let more = repos.len() >= PER_PAGE;
            found.extend(repos.iter().flat_map(discovered));
            if !more {
                break;
            }
        }
        Ok(found)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        _known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let api = Api::new(access, true).await?;
        match target(resource)? {
            Target::Files { owner, repo } => {
                self.list_files(&api, access, resource, &owner, &repo, position)
                    .await
            }
            Target::Issues { owner, repo } => {
                self.list_issues(&api, access, resource, &owner, &repo, position)
                    .await
            }
        }
    }

    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let api = Api::new(access, false)
            .await
            .map_err(|e| ProviderError::Object(e.to_string()))?;
        let read = match target(resource)? {
            Target::Files { owner, repo } => {
                self.fetch_file(&api, access, &owner, &repo, entry, max_bytes)
                    .await
            }
            Target::Issues { owner, repo } => {
                self.fetch_issue(&api, access, &owner, &repo, entry, max_bytes)
                    .await
            }
        };
        read.map_err(object_failure)
    }
}

impl GitHubProvider {
    /// The repositories an app installation token may read (`GET /installation/repositories`).
    async fn installation_repositories(
        &self,
        api: &Api,
        access: &Access,
    ) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let mut found = Vec::new();
        let what = "the installation's repositories";
        for page in 1..=REPO_PAGES_MAX {
            let url = api.url(
                &["installation", "repositories"],
                &[
                    ("per_page", PER_PAGE.to_string()),
                    ("page", page.to_string()),
                ],
            )?;
            let answer: Answer = api.get(access, &url, what, None, LISTING_MAX_BYTES).await?;
            let repos = array(
                answer
                    .body
                    .get("repositories")
                    .cloned()
                    .unwrap_or(Value::Null),
                what,
            )?;
            let more = repos.len() >= PER_PAGE;
            found.extend(repos.iter().flat_map(discovered));
            if !more {
                break;
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(id: &str, resource_type: &str, filters: Value) -> ResourceRef {
        ResourceRef {
            id: id.to_owned(),
            resource_type: resource_type.to_owned(),
            filters,
            provider_metadata: Value::Null,
        }
    }

    #[test]
    fn resources_name_a_repositorys_files_or_its_issues() {
        let files = target(&resource("octo/handbook", "", json!({}))).unwrap();
        assert_eq!(
            files,
            Target::Files {
                owner: "octo".into(),
                repo: "handbook".into()
            }
        );
        let issues = target(&resource("octo/handbook/issues", "", json!({}))).unwrap();
        assert!(matches!(issues, Target::Issues { .. }));
        let typed = target(&resource("octo/handbook", "issues", json!({}))).unwrap();
        assert!(matches!(typed, Target::Issues { .. }));
        for bad in ["octo", "octo/../x", "a/b/c", "/x", "a//issues"] {
            assert!(
                matches!(
                    target(&resource(bad, "", json!({}))),
                    Err(ProviderError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn errors_say_what_to_do_and_rate_limits_say_when() {
        let bad =
            br#"{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}"#;
        assert!(matches!(
            failure(401, bad, "x"),
            ProviderError::Unauthorized { .. }
        ));
        assert!(matches!(
            failure(404, b"{}", "x"),
            ProviderError::Resource {
                http_status: 404,
                ..
            }
        ));
        assert!(matches!(
            failure(502, b"", "x"),
            ProviderError::Transient { .. }
        ));
        let limited = br#"{"message":"API rate limit exceeded for user ID 1."}"#;
        assert!(rate_limited(403, limited));
        assert!(rate_limited(
            403,
            br#"{"message":"You have exceeded a secondary rate limit."}"#
        ));
        assert!(rate_limited(429, b""));
        assert!(!rate_limited(
            403,
            br#"{"message":"Resource not accessible by personal access token"}"#
        ));
        let spent = rate_limit_error(
            403,
            Some(&json!({"remaining": 0, "reset": 1_800_000_600})),
            1_800_000_000,
        );
        let ProviderError::RateLimited {
            message,
            until_unix,
            ..
        } = spent
        else {
            panic!("rate limited")
        };
        assert_eq!(until_unix, 1_800_000_600);
        assert!(
            message.contains("2027-01-15T08:10:00Z") && message.contains("11 min"),
            "{message}"
        );
        let secondary = rate_limit_error(403, Some(&json!({"remaining": 4000, "reset": 0})), 0);
        assert!(secondary.to_string().contains("secondary"));
        assert!(matches!(
            secondary,
            ProviderError::RateLimited {
                until_unix: SECONDARY_WAIT_S,
                ..
            }
        ));
        assert!(matches!(
            rate_limit_error(429, None, 0),
            ProviderError::Transient { .. }
        ));
    }

    #[test]
    fn webhook_deliveries_verify_by_their_signature() {
        use crate::push::{hmac_sha256_hex, PushError, PushRequest};
        let secret = "a-webhook-secret-of-length";
        let credentials = json!({"token": "t", "webhook_secret": secret});
        let credentials = credentials.as_object().unwrap();
        let body = br#"{"ref":"refs/heads/main"}"#;
        let signed = |signature: String| {
            vec![
                ("x-hub-signature-256".to_owned(), signature),
                ("x-github-delivery".to_owned(), "d-1".to_owned()),
                ("x-github-event".to_owned(), "push".to_owned()),
            ]
        };
        let good = signed(format!("sha256={}", hmac_sha256_hex(secret, body)));
        let request = |headers: &[(String, String)]| {
            verify_github_push(
                credentials,
                &PushRequest {
                    headers,
                    body,
                    now_unix: 0,
                },
            )
        };
        let event = request(&good).unwrap();
        assert_eq!((event.delivery_id.as_str(), event.ping), ("d-1", false));
        let forged = signed(format!("sha256={}", hmac_sha256_hex("another", body)));
        assert!(matches!(request(&forged), Err(PushError::Unsigned(_))));
        assert!(matches!(request(&good[1..]), Err(PushError::Unsigned(_))));
        let no_secret = json!({"token": "t"});
        let refused = verify_github_push(
            no_secret.as_object().unwrap(),
            &PushRequest {
                headers: &good,
                body,
                now_unix: 0,
            },
        );
        assert!(matches!(refused, Err(PushError::Unsigned(m)) if m.contains("webhook_secret")));
    }

    #[test]
    fn files_are_filtered_by_kind_size_extension_and_prefix() {
        let filter = FileFilter::of(&resource(
            "o/r",
            "",
            json!({"paths": ["docs/", "/README"], "max_file_bytes": 100}),
        ));
        assert!(filter.wants("docs/a.md", Some(10)));
        assert!(filter.wants("README.md", Some(10)));
        assert!(!filter.wants("src/main.rs", Some(10)));
        assert!(!filter.wants("docs/big.md", Some(1000)));
        assert!(!filter.wants("docs/font.WOFF2", Some(10)));
        let item = |value: Value| serde_json::from_value::<TreeItem>(value).unwrap();
        assert!(item(json!({"type": "blob", "mode": "100644", "size": 5, "sha": "s"})).is_file());
        assert!(!item(json!({"type": "blob", "mode": "120000", "size": 5})).is_file());
        assert!(!item(json!({"type": "commit", "mode": "160000"})).is_file());
        assert!(!item(json!({"type": "tree", "mode": "040000"})).is_file());
        assert!(
            filter.may_hold("docs/") && filter.may_hold("docs/deep/") && !filter.may_hold("src/")
        );
        let all = FileFilter::of(&resource("o/r", "", json!({})));
        assert!(all.wants("src/main.rs", Some(10)) && all.may_hold("src/"));
    }

    #[test]
    fn issue_passes_go_on_from_the_newest_seen_and_end_on_a_short_page() {
        let walk = IssuesWalk {
            page: 1,
            ..IssuesWalk::default()
        };
        let page = |last: &str| {
            let mut items = vec![json!({"updated_at": "2026-01-01T00:00:00Z"}); PER_PAGE - 1];
            items.push(json!({ "updated_at": last }));
            items
        };
        assert_eq!(next_walk(&walk, &page("2026-01-01T00:00:00Z")[..10]), None);
        let next = next_walk(&walk, &page("2026-02-01T00:00:00Z")).unwrap();
        assert_eq!(
            (next.since.as_str(), next.page),
            ("2026-02-01T00:00:00Z", 1)
        );
        // A whole page at the same second: the next page of it.
        let same = next_walk(&next, &page("2026-02-01T00:00:00Z")).unwrap();
        assert_eq!(
            (same.since.as_str(), same.page),
            ("2026-02-01T00:00:00Z", 2)
        );
    }

    #[test]
    fn an_issue_reads_as_its_text_and_comments_with_its_fields() {
        let issue = json!({
            "number": 7, "title": "Deploys stall", "state": "open", "body": "They hang at 90%.",
            "user": {"login": "ana"}, "labels": [{"name": "bug"}, {"name": "ops"}],
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z",
            "comments": 1, "html_url": "https://github.com/o/r/issues/7",
            "pull_request": {"url": "x"}
        });
        let entry = issue_entry("o", "r", &issue).unwrap();
        assert_eq!(entry.native_id, "o/r#7");
        assert_eq!(entry.version, "2026-01-02T00:00:00Z|1");
        assert_eq!(entry.fields["kind"], "pull_request");
        assert_eq!(entry.fields["labels"], json!(["bug", "ops"]));
        assert_eq!(entry.fields["author"], "ana");
        let text = render_issue(
            "o/r",
            &issue,
            &[
                json!({"user": {"login": "bo"}, "created_at": "2026-01-02T00:00:00Z", "body": "Fixed by raising the timeout."}),
            ],
        );
        assert!(text.starts_with("Deploys stall\n"), "{text}");
        for part in [
            "Pull request #7 in o/r, open, opened by @ana",
            "Labels: bug, ops.",
            "They hang at 90%.",
            "Comment by @bo",
            "raising the timeout",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    #[test]
    fn discovery_offers_each_repository_twice() {
        let found =
            discovered(&json!({"full_name": "o/r", "default_branch": "main", "private": true}));
        let ids: Vec<(&str, &str)> = found
            .iter()
            .map(|r| (r.id.as_str(), r.resource_type.as_str()))
            .collect();
        assert_eq!(ids, [("o/r", "repository"), ("o/r/issues", "issues")]);
        assert_eq!(found[0].metadata["default_branch"], "main");
    }
}
