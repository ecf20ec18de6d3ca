//! `linear`: issues and their comments on Linear, through its GraphQL API (`POST
//! {api_url}/graphql`), with a personal API key (`api_key`, sent as `Authorization: <key>`, as
//! Linear documents) or an OAuth access token (`access_token`, sent as `Bearer`). Discovery lists
//! the teams the key can read (the `teams` connection, page by page), each a resource (`team`)
//! whose pass reads its issues, one text document per issue with its comments, and the projects
//! (`project:<id>`, type `project`), whose pass reads the project's issues the same way and its
//! overview (description and content) as one more document.
//!
//! A pass has two phases. First the comments changed since the last pass (`comments` filtered by
//! `updatedAt` and the issue's team, archived ones included): each names an issue whose text
//! changed, listed again with a version that carries the newest comment's time (whether Linear
//! moves an issue's `updatedAt` when it is commented on is not promised). Then the issues
//! changed since the last pass (`updatedAt: { gt: cursor }`, archived and trashed ones included,
//! which are deletions); the newest `updatedAt` seen is the next cursor. Moved or deleted issues
//! are not in such a listing, so once a day a pass lists every live issue of the team and those
//! it did not see leave engram. The very first pass reads every issue whole and notes the time
//! of the newest comment there is (both ends of `comments` ordered by `updatedAt`, so the
//! order's direction does not matter) as where the comment phase starts. Each page goes on from
//! Linear's `endCursor` (kept in `Position.within`); nothing of the listing is held across pages.
//!
//! Queries stay well within Linear's complexity limit (10,000 points a query: pages of 50
//! issues, 25 labels each). Rate limiting (`RATELIMITED` in a GraphQL error, on HTTP 400 or 429)
//! stops the pass; the next sync waits until `X-RateLimit-Requests-Reset` (when the answer
//! carries it; otherwise engram's own backoff). The key only ever travels
//! in the `Authorization` header; no message repeats it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::time::Duration;

use crate::hosted::{object_failure, saved_pass, text_of, unanswered};
use crate::{
    credential, now_unix, rfc3339, Access, Content, DiscoveredResource, Entry, FieldInfo,
    IntervalBounds, Known, Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

const DEFAULT_API: &str = "https://api.linear.app";
const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read.
const ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Items per page: teams, issues and comments (Linear's default; well within its complexity
/// limit with the fields asked).
const PER_PAGE: i64 = 50;
/// Team (and project) pages discovery reads at most.
const TEAM_PAGES_MAX: u32 = 100;
/// Pages one pass reads at most (100,000 issues and as many changed comments).
const PASS_PAGES_MAX: u32 = 4000;
/// Comment pages read for one issue at most (2,000 comments).
const COMMENT_PAGES_MAX: u32 = 40;
/// How often a pass lists every issue, so deleted and moved ones leave.
const FULL_PASS_EVERY_S: i64 = 86_400;
/// Longest message of Linear's quoted in an error.
const QUOTED_MAX: usize = 200;

/// The fields of an issue a listing reads (its entry and `fields`).
macro_rules! listed_issue {
    () => {
        "fragment ListedIssue on Issue { id identifier number title url priority priorityLabel \
         createdAt updatedAt archivedAt trashed state { name type } team { id key name } \
         assignee { name displayName } creator { name displayName } project { id name } \
         cycle { number name } labels(first: 25) { nodes { name } } }"
    };
}

/// The fields of a comment an issue's text holds.
macro_rules! comment_page {
    () => {
        "nodes { id body createdAt user { name displayName } } pageInfo { hasNextPage endCursor }"
    };
}

/// Discovery: the teams the key can read.
const TEAMS_QUERY: &str = "query EngramTeams($first: Int!, $after: String) { \
    teams(first: $first, after: $after) { nodes { id key name description private } \
    pageInfo { hasNextPage endCursor } } }";

/// Discovery: the projects the key can read.
const PROJECTS_QUERY: &str = "query EngramProjects($first: Int!, $after: String) { \
    projects(first: $first, after: $after) { nodes { id name description url status { name } } \
    pageInfo { hasNextPage endCursor } } }";

/// A project itself: its overview, read as one document of its pass.
const PROJECT_QUERY: &str = "query EngramProject($id: String!) { project(id: $id) { id name \
    description content url createdAt updatedAt startDate targetDate status { name type } \
    lead { name displayName } } }";

/// A page of a team's (or project's) issues (`filter` holds the team and, between full passes, `updatedAt`).
const ISSUES_QUERY: &str = concat!(
    "query EngramIssues($filter: IssueFilter!, $first: Int!, $after: String, ",
    "$includeArchived: Boolean!) { issues(filter: $filter, first: $first, after: $after, ",
    "includeArchived: $includeArchived, orderBy: updatedAt) { nodes { ...ListedIssue } ",
    "pageInfo { hasNextPage endCursor } } } ",
    listed_issue!()
);

/// A page of the comments changed since the last pass, with their issues.
const COMMENTS_QUERY: &str = concat!(
    "query EngramComments($filter: CommentFilter!, $first: Int!, $after: String) { ",
    "comments(filter: $filter, first: $first, after: $after, includeArchived: true, ",
    "orderBy: updatedAt) { nodes { id updatedAt issue { ...ListedIssue } } ",
    "pageInfo { hasNextPage endCursor } } } ",
    listed_issue!()
);

/// One issue with its description and first page of comments.
const ISSUE_QUERY: &str = concat!(
    "query EngramIssue($id: String!, $first: Int!) { issue(id: $id) { ...ListedIssue ",
    "description comments(first: $first) { ",
    comment_page!(),
    " } } } ",
    listed_issue!()
);

/// The next page of an issue's comments.
const ISSUE_COMMENTS_QUERY: &str = concat!(
    "query EngramIssueComments($id: String!, $first: Int!, $after: String) { issue(id: $id) { ",
    "comments(first: $first, after: $after) { ",
    comment_page!(),
    " } } }"
);

/// The newest comment's time in a team (its two ends: which end is newest does not matter).
const NEWEST_COMMENT_QUERY: &str = "query EngramNewestComment($filter: CommentFilter!) { \
    head: comments(filter: $filter, first: 1, orderBy: updatedAt) { nodes { updatedAt } } \
    tail: comments(filter: $filter, last: 1, orderBy: updatedAt) { nodes { updatedAt } } }";

/// Every query document the provider sends (its tests check them against Linear's schema).
const QUERIES: &[&str] = &[
    TEAMS_QUERY,
    ISSUES_QUERY,
    COMMENTS_QUERY,
    ISSUE_QUERY,
    ISSUE_COMMENTS_QUERY,
    NEWEST_COMMENT_QUERY,
    PROJECTS_QUERY,
    PROJECT_QUERY,
];

/// Who may read a team's issues (its members, for a private team) is not read (`acl_warning`
/// on every pass).
const UNREAD_MEMBERS: &str = "who may read the team's issues (its members, for a private team) \
    is not read from Linear: its items carry no readers of their own, so everyone who may query \
    this database reads them unless the resource has a rule (`acl`)";

pub struct LinearProvider {
    info: ProviderInfo,
}

impl Default for LinearProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl LinearProvider {
    /// Every query document the provider sends: discovery's teams, a page of a team's issues, a
    /// page of changed comments, one issue, the next page of an issue's comments, and a team's
    /// newest comment, discovery's projects and a project's overview (its tests check them
    /// against Linear's schema).
    pub fn queries() -> &'static [&'static str] {
        QUERIES
    }

    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "linear",
                category: "project_management",
                connector_type: "issue_tracker",
                rank: Some(10),
                rbac_support: false,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["issue", "project"],
                fields: vec![
                    field(
                        "kind",
                        "string",
                        "issue, or project for a project's overview",
                        Some("additional_metadata.kind"),
                    ),
                    field(
                        "identifier",
                        "string",
                        "The issue's identifier, e.g. ENG-123",
                        Some("additional_metadata.identifier"),
                    ),
                    field(
                        "team",
                        "string",
                        "The key of the issue's team, e.g. ENG",
                        Some("additional_metadata.team"),
                    ),
                    field(
                        "state",
                        "string",
                        "The name of the issue's workflow state, e.g. In Progress",
                        Some("additional_metadata.state"),
                    ),
                    field(
                        "state_type",
                        "string",
                        "The kind of the state: triage, backlog, unstarted, started, completed or canceled",
                        Some("additional_metadata.state_type"),
                    ),
                    field(
                        "priority",
                        "string",
                        "The priority: No priority, Urgent, High, Medium or Low",
                        Some("additional_metadata.priority"),
                    ),
                    field(
                        "labels",
                        "array",
                        "The issue's labels",
                        Some("additional_metadata.labels"),
                    ),
                    field(
                        "assignee",
                        "string",
                        "The name of whom the issue is assigned to",
                        Some("additional_metadata.assignee"),
                    ),
                    field(
                        "creator",
                        "string",
                        "The name of who created the issue",
                        Some("additional_metadata.creator"),
                    ),
                    field(
                        "project",
                        "string",
                        "The name of the issue's project (of the project, for its overview)",
                        Some("additional_metadata.project"),
                    ),
                    field("cycle", "integer", "The number of the issue's cycle", None),
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "api_key": {"type": "string", "minLength": 1},
                        "access_token": {"type": "string", "minLength": 1},
                        "api_url": {"type": "string", "pattern": "^https?://"},
                        "oauth": crate::oauth::credential_schema(),
                        "webhook_secret": {"type": "string", "minLength": 16, "maxLength": 1000}
                    },
                    "anyOf": [{"required": ["api_key"]}, {"required": ["access_token"]}, {"required": ["oauth"]}],
                    "additionalProperties": false
                }),
                setup_guide: "Give an `api_key`: a personal API key (`lin_api_…`) made in Linear under \
                    Settings → Account → Security & access → Personal API keys; it reads what its \
                    owner can read (read-only access is enough). Or give an OAuth `access_token` of \
                    your own Linear OAuth application with the `read` scope. Discovery offers each \
                    team the key can read (its id) and each project (`project:` and its id); a \
                    team's or project's issues sync with their comments, one document per issue, \
                    with the identifier, state, priority, labels, assignee, team and project as \
                    fields to filter on, and a project's overview (description and content) is one \
                    more document. Archived and deleted issues leave engram.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

fn quoted(message: &str) -> String {
    message.chars().take(QUOTED_MAX).collect()
}

/// How old a Linear webhook's `webhookTimestamp` may be (Linear's guidance: a minute).
const PUSH_WINDOW_MS: i64 = 60_000;

/// A Linear webhook delivery: `Linear-Signature` (the hex HMAC-SHA256 of the body under the
/// webhook's signing secret), `Linear-Delivery` (its id), `Linear-Event` (`Issue`, `Comment`,
/// …), and `webhookTimestamp` in the body (milliseconds), refused when older than a minute.
fn verify_linear_push(
    credentials: &Map<String, Value>,
    request: &crate::push::PushRequest<'_>,
) -> Result<crate::push::PushEvent, crate::push::PushError> {
    use crate::push::{hmac_sha256_matches, secret, PushError, PushEvent};
    let secret = secret(credentials, "Linear")?;
    let signature = request
        .header("linear-signature")
        .ok_or_else(|| PushError::Unsigned("the event has no Linear-Signature".to_owned()))?;
    if !hmac_sha256_matches(secret, request.body, signature) {
        return Err(PushError::Unsigned(
            "the event's Linear-Signature does not match the connector's webhook_secret".to_owned(),
        ));
    }
    let body: Value = serde_json::from_slice(request.body)
        .map_err(|_| PushError::Malformed("the event's body is not JSON".to_owned()))?;
    let sent_ms = body
        .get("webhookTimestamp")
        .and_then(Value::as_i64)
        .ok_or_else(|| PushError::Malformed("the event has no webhookTimestamp".to_owned()))?;
    if (request.now_unix.saturating_mul(1000) - sent_ms).abs() > PUSH_WINDOW_MS {
        return Err(PushError::Stale(
            "the event's webhookTimestamp is more than a minute away from now: a replay, or a \
             clock off"
                .to_owned(),
        ));
    }
    let delivery_id = request
        .header("linear-delivery")
        .map(str::to_owned)
        .or_else(|| {
            body.get("webhookId")
                .and_then(Value::as_str)
                .map(|id| format!("{id}:{sent_ms}"))
        })
        .ok_or_else(|| PushError::Malformed("the event has no Linear-Delivery".to_owned()))?;
    Ok(PushEvent {
        delivery_id,
        event: request
            .header("linear-event")
            .or_else(|| body.get("type").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned(),
        ping: false,
    })
}

/// The transient error of a rate-limited answer; `reset_ms` is when Linear says the budget
/// refills (`X-RateLimit-Requests-Reset`, epoch milliseconds) when it is known.
fn rate_limit_error(status: u16, reset_ms: Option<i64>, now_ms: i64) -> ProviderError {
    match reset_ms {
        Some(reset) if reset > now_ms => ProviderError::RateLimited {
            message: format!(
                "Linear's API rate limit for this key is spent until {} (in about {} min); \
                 engram tries again after that",
                rfc3339(reset.div_euclid(1000)),
                (reset - now_ms) / 60_000 + 1
            ),
            http_status: status,
            until_unix: reset.div_euclid(1000) + 1,
        },
        Some(_) | None => ProviderError::Transient {
            message: "Linear is rate limiting this key (RATELIMITED); its budget refills \
                      continuously, and engram tries again later"
                .to_owned(),
            http_status: status,
        },
    }
}

/// What an answer that failed means for the connector: `status` is the HTTP status, `body` the
/// answer (its GraphQL `errors`, when it has them), `what` names the request in words.
fn failure(status: u16, body: &Value, what: &str, reset_ms: Option<i64>) -> Option<ProviderError> {
    let error = body
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first());
    let code = error
        .and_then(|e| e.pointer("/extensions/code"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let said = error
        .and_then(|e| {
            e.pointer("/extensions/userPresentableMessage")
                .or_else(|| e.get("message"))
        })
        .and_then(Value::as_str)
        .map(quoted)
        .unwrap_or_default();
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    };
    if code == "RATELIMITED" || status == 429 {
        tracing::warn!(http_status = status, "Linear rate limited a connector");
        return Some(rate_limit_error(status, reset_ms, now_unix() * 1000));
    }
    if code == "AUTHENTICATION_ERROR" || status == 401 {
        return Some(ProviderError::Unauthorized {
            message: format!("Linear refused the key ({what}: {status}{said})"),
            http_status: status,
        });
    }
    if code == "FORBIDDEN" || status == 403 {
        return Some(ProviderError::Resource {
            message: format!("the key may not read {what} ({status}{said}); grant it access"),
            http_status: status,
        });
    }
    if status >= 500 || status == 408 || code == "INTERNAL_SERVER_ERROR" {
        return Some(ProviderError::Transient {
            message: format!("Linear answered {status} to {what}{said}"),
            http_status: status,
        });
    }
    if error.is_some() || !(200..300).contains(&status) {
        return Some(ProviderError::Resource {
            message: format!("Linear answered {status} to {what}{said}"),
            http_status: status,
        });
    }
    None
}

/// The API of one connector: where it is and how it is authorized.
struct Api {
    endpoint: url::Url,
    authorization: String,
}

impl Api {
    /// The connector's API; `check` checks its address against the outbound policy first
    /// (listing does; fetching an object relies on the check every connection makes).
    async fn new(access: &Access, check: bool) -> Result<Self, ProviderError> {
        let authorization = match (
            credential(access, "api_key"),
            credential(access, "access_token"),
        ) {
            // A personal API key goes as it is; an OAuth token as a bearer token.
            (Some(key), _) => key.to_owned(),
            (None, Some(token)) => format!("Bearer {token}"),
            (None, None) => {
                return Err(ProviderError::Invalid(
                    "the credentials hold no `api_key` or `access_token`".to_owned(),
                ))
            }
        };
        let mut base = crate::api_root(access, DEFAULT_API, check).await?;
        let path = format!("{}graphql", base.path());
        base.set_path(&path);
        Ok(Self {
            endpoint: base,
            authorization,
        })
    }

    /// Sends a query; its `data`, or what its failure means.
    async fn query(
        &self,
        access: &Access,
        query: &str,
        variables: Value,
        what: &str,
    ) -> Result<Value, ProviderError> {
        let body = serde_json::to_vec(&json!({"query": query, "variables": variables}))
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let headers = [
            ("authorization", self.authorization.clone()),
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json".to_owned()),
        ];
        let fetched = access
            .outbound
            .request_read(
                "POST",
                &self.endpoint,
                &headers,
                Some(body),
                TIMEOUT,
                ANSWER_MAX_BYTES,
            )
            .await
            .map_err(|e| unanswered("Linear", what, e))?;
        let answer: Value = serde_json::from_slice(&fetched.body).unwrap_or(Value::Null);
        // When the spent budget refills (`X-RateLimit-Requests-Reset`, epoch milliseconds).
        let reset_ms = fetched
            .header("x-ratelimit-requests-reset")
            .and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(err) = failure(fetched.status, &answer, what, reset_ms) {
            return Err(err);
        }
        match answer.get("data") {
            Some(data) if data.is_object() => Ok(data.clone()),
            Some(_) | None => Err(ProviderError::Transient {
                message: format!("Linear's answer to {what} holds no data"),
                http_status: fetched.status,
            }),
        }
    }
}

/// The nodes and page info of a connection at `pointer`.
fn connection<'a>(data: &'a Value, pointer: &str) -> (&'a [Value], Option<String>) {
    let nodes = data
        .pointer(&format!("{pointer}/nodes"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let more = data
        .pointer(&format!("{pointer}/pageInfo/hasNextPage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let end = data
        .pointer(&format!("{pointer}/pageInfo/endCursor"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    (nodes, end.filter(|_| more))
}

fn team_resource(team: &Value) -> Option<DiscoveredResource> {
    let id = text_of(team, "/id");
    if id.is_empty() {
        return None;
    }
    let key = text_of(team, "/key");
    Some(DiscoveredResource {
        id: id.to_owned(),
        name: format!("{key}: {}", text_of(team, "/name")),
        resource_type: "team".to_owned(),
        metadata: json!({
            "key": key,
            "name": team.get("name"),
            "description": team.get("description"),
            "private": team.get("private"),
        }),
    })
}

fn person(value: &Value, pointer: &str) -> Option<String> {
    let who = value.pointer(pointer)?;
    let name = text_of(who, "/name");
    let name = if name.is_empty() {
        text_of(who, "/displayName")
    } else {
        name
    };
    (!name.is_empty()).then(|| name.to_owned())
}

fn label_names(issue: &Value) -> Vec<String> {
    issue
        .pointer("/labels/nodes")
        .and_then(Value::as_array)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|l| l.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether Linear archived (or trashed, that is deleted) the issue.
fn gone(issue: &Value) -> bool {
    issue.get("archivedAt").is_some_and(|a| !a.is_null())
        || issue.get("trashed").and_then(Value::as_bool) == Some(true)
}

/// An issue's entry; `version` is its version (its `updatedAt`, and the newest comment's time
/// when a comment listed it).
fn issue_entry(scope: Scope<'_>, issue: &Value, version: String) -> Option<Entry> {
    let id = text_of(issue, "/id");
    if id.is_empty() {
        return None;
    }
    let identifier = text_of(issue, "/identifier");
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::from("issue"));
    fields.insert("identifier".into(), Value::from(identifier));
    fields.insert("team".into(), Value::from(text_of(issue, "/team/key")));
    fields.insert("state".into(), Value::from(text_of(issue, "/state/name")));
    fields.insert(
        "state_type".into(),
        Value::from(text_of(issue, "/state/type")),
    );
    fields.insert(
        "priority".into(),
        Value::from(text_of(issue, "/priorityLabel")),
    );
    fields.insert(
        "labels".into(),
        Value::Array(label_names(issue).into_iter().map(Value::from).collect()),
    );
    for (key, pointer) in [("assignee", "/assignee"), ("creator", "/creator")] {
        if let Some(name) = person(issue, pointer) {
            fields.insert(key.into(), Value::from(name));
        }
    }
    let project = text_of(issue, "/project/name");
    if !project.is_empty() {
        fields.insert("project".into(), Value::from(project));
    }
    if let Some(cycle) = issue.pointer("/cycle/number").and_then(Value::as_f64) {
        // Linear's cycle numbers are whole numbers typed Float.
        #[allow(clippy::cast_possible_truncation)]
        fields.insert("cycle".into(), Value::from(cycle as i64));
    }
    Some(Entry {
        native_id: scope.native_id(id),
        version,
        title: format!("{identifier}: {}", text_of(issue, "/title")),
        file_name: String::new(),
        url: text_of(issue, "/url").to_owned(),
        modified_at: text_of(issue, "/updatedAt").to_owned(),
        fields,
        content: None,
        state: String::new(),
    })
}

/// Linear's id of the issue an entry is (a project's issues carry the project before it).
fn issue_id(entry: &Entry) -> &str {
    entry.native_id.rsplit('/').next().unwrap_or_default()
}

/// An issue and its comments as one text: title, what it is, labels, description, then each
/// comment in order with its author.
fn render_issue(issue: &Value, comments: &[Value]) -> String {
    let mut text = format!("{}\n\n", text_of(issue, "/title"));
    text.push_str(&format!(
        "Issue {} in team {}, {}, priority {}",
        text_of(issue, "/identifier"),
        text_of(issue, "/team/name"),
        text_of(issue, "/state/name"),
        text_of(issue, "/priorityLabel"),
    ));
    if let Some(creator) = person(issue, "/creator") {
        text.push_str(&format!(", created by {creator}"));
    }
    text.push_str(&format!(" on {}", text_of(issue, "/createdAt")));
    if let Some(assignee) = person(issue, "/assignee") {
        text.push_str(&format!(", assigned to {assignee}"));
    }
    let project = text_of(issue, "/project/name");
    if !project.is_empty() {
        text.push_str(&format!(", in project {project}"));
    }
    if let Some(cycle) = issue.pointer("/cycle/number").and_then(Value::as_f64) {
        text.push_str(&format!(", in cycle {cycle}"));
    }
    text.push_str(".\n");
    let labels = label_names(issue);
    if !labels.is_empty() {
        text.push_str(&format!("Labels: {}.\n", labels.join(", ")));
    }
    let description = text_of(issue, "/description").trim();
    if !description.is_empty() {
        text.push('\n');
        text.push_str(description);
        text.push('\n');
    }
    let mut ordered: Vec<&Value> = comments.iter().collect();
    ordered.sort_by(|a, b| text_of(a, "/createdAt").cmp(text_of(b, "/createdAt")));
    for comment in ordered {
        text.push_str(&format!(
            "\nComment by {} on {}:\n{}\n",
            person(comment, "/user").unwrap_or_else(|| "someone".to_owned()),
            text_of(comment, "/createdAt"),
            text_of(comment, "/body").trim()
        ));
    }
    text
}

/// What a resource reads: a team's issues, or a project's issues and overview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope<'a> {
    Team(&'a str),
    Project(&'a str),
}

impl Scope<'_> {
    /// The part of an `IssueFilter` that keeps the scope's issues.
    fn filter(self) -> Value {
        match self {
            Self::Team(id) => json!({"team": {"id": {"eq": id}}}),
            Self::Project(id) => json!({"project": {"id": {"eq": id}}}),
        }
    }

    /// The native id of an issue read through the scope: a project's issues are kept apart
    /// from their team's (both may be configured).
    fn native_id(self, issue: &str) -> String {
        match self {
            Self::Team(_) => issue.to_owned(),
            Self::Project(project) => format!("project:{project}/{issue}"),
        }
    }

    fn describe(self) -> String {
        match self {
            Self::Team(id) => format!("team {id}"),
            Self::Project(id) => format!("project {id}"),
        }
    }
}

/// Which part of a pass a page reads.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
enum Phase {
    /// Comments changed since the last pass: their issues.
    #[default]
    Comments,
    /// Issues changed since the last pass (every live one in a full pass).
    Issues,
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    phase: Phase,
    /// Linear's `endCursor` to go on from.
    after: Option<String>,
    /// A pass listing every live issue (its end removes those it did not see).
    full: bool,
    /// Issues and comments changed after these are read (empty: every issue; no comments).
    since: String,
    comments_since: String,
    /// The newest `updatedAt` of an issue and of a comment seen.
    high: String,
    comments_high: String,
    pages: u32,
}

/// The cursor a pass leaves.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Cursor {
    since: String,
    comments_since: String,
    /// When the last pass over every issue ended (Unix seconds).
    full_at: i64,
}

/// How a pass starts from the last one's cursor at `now`.
fn start_walk(cursor: &Cursor, now: i64) -> Walk {
    let full = cursor.since.is_empty() || now - cursor.full_at >= FULL_PASS_EVERY_S;
    Walk {
        // Before any pass no comment is new: the first pass reads every issue whole.
        phase: if cursor.comments_since.is_empty() {
            Phase::Issues
        } else {
            Phase::Comments
        },
        after: None,
        full,
        since: if full {
            String::new()
        } else {
            cursor.since.clone()
        },
        comments_since: cursor.comments_since.clone(),
        high: cursor.since.clone(),
        comments_high: cursor.comments_since.clone(),
        pages: 0,
    }
}

/// The filter of an issues page.
fn issue_filter(scope: Scope<'_>, walk: &Walk) -> Value {
    let mut filter = scope.filter();
    if !walk.since.is_empty() {
        filter["updatedAt"] = json!({"gt": walk.since});
    }
    filter
}

/// The cursor a finished pass leaves.
fn end_cursor(walk: &Walk, previous: &Cursor, now: i64) -> Cursor {
    Cursor {
        since: walk.high.clone(),
        // Without a comment in the team yet, those newer than its issues are the next pass's.
        comments_since: if walk.comments_high.is_empty() {
            walk.high.clone()
        } else {
            walk.comments_high.clone()
        },
        full_at: if walk.full { now } else { previous.full_at },
    }
}

fn serialized<T: Serialize>(value: &T) -> Result<String, ProviderError> {
    serde_json::to_string(value).map_err(|e| ProviderError::Invalid(e.to_string()))
}

impl LinearProvider {
    async fn list_scope(
        &self,
        api: &Api,
        access: &Access,
        scope: Scope<'_>,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let cursor: Cursor = if position.cursor.is_empty() {
            Cursor::default()
        } else {
            serde_json::from_str(&position.cursor).unwrap_or_default()
        };
        let mut walk = if position.within.is_empty() {
            let mut walk = start_walk(&cursor, now_unix());
            if walk.comments_since.is_empty() {
                // The first pass reads every comment with its issue: the comments after the
                // newest there is now are the next pass's.
                walk.comments_high = self.newest_comment(api, access, scope).await?;
            }
            walk
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "{} changed more than a pass reads ({PASS_PAGES_MAX} pages of {PER_PAGE})",
                scope.describe()
            )));
        }
        let mut entries = Vec::new();
        let mut deleted = Vec::new();
        let next_after = match walk.phase {
            Phase::Comments => {
                let filter = json!({
                    "updatedAt": {"gt": walk.comments_since},
                    "issue": scope.filter()
                });
                let data = api
                    .query(
                        access,
                        COMMENTS_QUERY,
                        json!({"filter": filter, "first": PER_PAGE, "after": walk.after}),
                        &format!("the comments of {}", scope.describe()),
                    )
                    .await?;
                let (comments, after) = connection(&data, "/comments");
                // Each issue once, with its newest comment's time.
                let mut newest: Vec<(&Value, String)> = Vec::new();
                for comment in comments {
                    let updated = text_of(comment, "/updatedAt");
                    if updated > walk.comments_high.as_str() {
                        walk.comments_high = updated.to_owned();
                    }
                    let Some(issue) = comment.get("issue").filter(|i| i.is_object()) else {
                        continue;
                    };
                    if gone(issue) {
                        continue; // the issues phase deletes it
                    }
                    match newest
                        .iter_mut()
                        .find(|(i, _)| i.get("id") == issue.get("id"))
                    {
                        Some((_, at)) if at.as_str() < updated => *at = updated.to_owned(),
                        Some(_) => {}
                        None => newest.push((issue, updated.to_owned())),
                    }
                }
                for (issue, at) in newest {
                    let version = format!("{}|{at}", text_of(issue, "/updatedAt"));
                    entries.extend(issue_entry(scope, issue, version));
                }
                after
            }
            Phase::Issues => {
                if let (Scope::Project(project), None) = (scope, &walk.after) {
                    // The overview first, when it changed (every full pass lists it).
                    entries.extend(self.project_entry(api, access, project, &walk).await?);
                }
                let data = api
                    .query(
                        access,
                        ISSUES_QUERY,
                        json!({
                            "filter": issue_filter(scope, &walk),
                            "first": PER_PAGE,
                            "after": walk.after,
                            // Between full passes archived and trashed issues are listed, to
                            // delete them.
                            "includeArchived": !walk.full
                        }),
                        &format!("the issues of {}", scope.describe()),
                    )
                    .await?;
                let (issues, after) = connection(&data, "/issues");
                let ids: Vec<String> = issues
                    .iter()
                    .map(|i| scope.native_id(text_of(i, "/id")))
                    .collect();
                let held = known.objects(&ids).await?;
                for issue in issues {
                    let updated = text_of(issue, "/updatedAt");
                    if updated > walk.high.as_str() {
                        walk.high = updated.to_owned();
                    }
                    if gone(issue) {
                        deleted.push(scope.native_id(text_of(issue, "/id")));
                        continue;
                    }
                    // Unchanged since a comment listed it: the version it was stored with.
                    let version = held
                        .get(&scope.native_id(text_of(issue, "/id")))
                        .map(|k| k.version.clone())
                        .filter(|v| v.split('|').next() == Some(updated))
                        .unwrap_or_else(|| updated.to_owned());
                    entries.extend(issue_entry(scope, issue, version));
                }
                after
            }
        };
        let next = match (next_after, walk.phase) {
            (Some(after), _) => {
                walk.after = Some(after);
                Some(serialized(&walk)?)
            }
            (None, Phase::Comments) => {
                walk.phase = Phase::Issues;
                walk.after = None;
                Some(serialized(&walk)?)
            }
            (None, Phase::Issues) => None,
        };
        let cursor = match next {
            Some(_) => String::new(),
            None => serialized(&end_cursor(&walk, &cursor, now_unix()))?,
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

    /// The time of the newest comment on the scope's issues (empty when there is none).
    async fn newest_comment(
        &self,
        api: &Api,
        access: &Access,
        scope: Scope<'_>,
    ) -> Result<String, ProviderError> {
        let data = api
            .query(
                access,
                NEWEST_COMMENT_QUERY,
                json!({"filter": {"issue": scope.filter()}}),
                &format!("the newest comment of {}", scope.describe()),
            )
            .await?;
        let newest = ["/head/nodes", "/tail/nodes"]
            .iter()
            .filter_map(|p| data.pointer(p).and_then(Value::as_array))
            .flatten()
            .map(|c| text_of(c, "/updatedAt"))
            .max()
            .unwrap_or_default();
        Ok(newest.to_owned())
    }

    /// A project's overview, read whole, when the pass lists it: every full pass, and the others
    /// when it changed since the last.
    async fn project_entry(
        &self,
        api: &Api,
        access: &Access,
        project: &str,
        walk: &Walk,
    ) -> Result<Option<Entry>, ProviderError> {
        let data = api
            .query(
                access,
                PROJECT_QUERY,
                json!({ "id": project }),
                &format!("project {project}"),
            )
            .await?;
        let Some(project) = data.get("project").filter(|p| p.is_object()) else {
            return Ok(None);
        };
        let updated = text_of(project, "/updatedAt");
        if !walk.full && updated <= walk.since.as_str() {
            return Ok(None);
        }
        Ok(project_overview(project))
    }

    async fn fetch_issue(
        &self,
        api: &Api,
        access: &Access,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let what = format!("issue {}", entry.title);
        let data = api
            .query(
                access,
                ISSUE_QUERY,
                json!({"id": issue_id(entry), "first": PER_PAGE}),
                &what,
            )
            .await?;
        let issue = data.get("issue").cloned().unwrap_or(Value::Null);
        if !issue.is_object() {
            return Err(ProviderError::Object(format!("{what} is gone")));
        }
        let (first, mut after) = connection(&issue, "/comments");
        let mut comments = first.to_vec();
        let mut pages = 1;
        while let Some(from) = after.take() {
            if pages >= COMMENT_PAGES_MAX {
                break;
            }
            pages += 1;
            let data = api
                .query(
                    access,
                    ISSUE_COMMENTS_QUERY,
                    json!({"id": issue_id(entry), "first": PER_PAGE, "after": from}),
                    &format!("the comments of {what}"),
                )
                .await?;
            let (more, next) = connection(&data, "/issue/comments");
            comments.extend(more.iter().cloned());
            after = next;
        }
        let text = render_issue(&issue, &comments);
        if text.len() > max_bytes {
            return Err(ProviderError::Object(format!(
                "{what} with its comments is longer than the {max_bytes} bytes an item may hold"
            )));
        }
        Ok(Content::Text(text))
    }
}

/// What a resource reads: `project:<id>` (or the type `project`) a project, any other id a
/// team.
fn scope_of(resource: &ResourceRef) -> Result<Scope<'_>, ProviderError> {
    let id = resource.id.as_str();
    let (project, bare) = match id.strip_prefix("project:") {
        Some(bare) => (true, bare),
        None => (resource.resource_type == "project", id),
    };
    if bare.is_empty() || bare.len() > 200 || bare.chars().any(|c| c.is_whitespace() || c == ':') {
        return Err(ProviderError::Invalid(format!(
            "`{id}` is not a Linear team id or `project:` and a project id"
        )));
    }
    Ok(if project {
        Scope::Project(bare)
    } else {
        Scope::Team(bare)
    })
}

fn project_resource(project: &Value) -> Option<DiscoveredResource> {
    let id = text_of(project, "/id");
    if id.is_empty() {
        return None;
    }
    Some(DiscoveredResource {
        id: format!("project:{id}"),
        name: format!("Project: {}", text_of(project, "/name")),
        resource_type: "project".to_owned(),
        metadata: json!({
            "name": project.get("name"),
            "description": project.get("description"),
            "status": project.pointer("/status/name"),
            "url": project.get("url"),
        }),
    })
}

/// A project's overview as an entry holding its text.
fn project_overview(project: &Value) -> Option<Entry> {
    let id = text_of(project, "/id");
    if id.is_empty() {
        return None;
    }
    let name = text_of(project, "/name");
    let status = text_of(project, "/status/name");
    let mut text = format!("{name}\n\nProject, {status}");
    if let Some(lead) = person(project, "/lead") {
        text.push_str(&format!(", led by {lead}"));
    }
    for (label, pointer) in [("starts", "/startDate"), ("due", "/targetDate")] {
        let date = text_of(project, pointer);
        if !date.is_empty() {
            text.push_str(&format!(", {label} {date}"));
        }
    }
    text.push_str(".\n");
    for part in ["/description", "/content"] {
        let part = text_of(project, part).trim();
        if !part.is_empty() {
            text.push('\n');
            text.push_str(part);
            text.push('\n');
        }
    }
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::from("project"));
    fields.insert("project".into(), Value::from(name));
    fields.insert("state".into(), Value::from(status));
    if let Some(lead) = person(project, "/lead") {
        fields.insert("lead".into(), Value::from(lead));
    }
    let updated = text_of(project, "/updatedAt");
    Some(Entry {
        native_id: format!("project:{id}"),
        version: updated.to_owned(),
        title: format!("Project: {name}"),
        file_name: String::new(),
        url: text_of(project, "/url").to_owned(),
        modified_at: updated.to_owned(),
        fields,
        content: Some(Content::Text(text)),
        state: String::new(),
    })
}

#[async_trait]
impl Provider for LinearProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        // Linear's OAuth 2.0 apps: the client's id and secret in the token request's form;
        // `read` reads issues, comments and projects.
        Some(crate::oauth::ProviderOAuth {
            authorization_endpoint: "https://linear.app/oauth/authorize",
            token_endpoint: "https://api.linear.app/oauth/token",
            scope: "read",
            client_auth: crate::oauth::ClientAuth::Post,
            extra_authorization_params: &[("actor", "user")],
        })
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(verify_linear_push(credentials, request))
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, true).await?;
        let mut found = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..TEAM_PAGES_MAX {
            let data = api
                .query(
                    access,
                    TEAMS_QUERY,
                    json!({"first": PER_PAGE, "after": after}),
                    "the key's teams",
                )
                .await?;
            let (teams, next) = connection(&data, "/teams");
            found.extend(teams.iter().filter_map(team_resource));
            match next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut after: Option<String> = None;
        for _ in 0..TEAM_PAGES_MAX {
            let data = api
                .query(
                    access,
                    PROJECTS_QUERY,
                    json!({"first": PER_PAGE, "after": after}),
                    "the key's projects",
                )
                .await?;
            let (projects, next) = connection(&data, "/projects");
            found.extend(projects.iter().filter_map(project_resource));
            match next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(found)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let api = Api::new(access, true).await?;
        let scope = scope_of(resource)?;
        let mut page = self
            .list_scope(&api, access, scope, position, known)
            .await?;
        page.acl_warning = UNREAD_MEMBERS.to_owned();
        Ok(page)
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let api = Api::new(access, false)
            .await
            .map_err(|e| ProviderError::Object(e.to_string()))?;
        self.fetch_issue(&api, access, entry, max_bytes)
            .await
            .map_err(object_failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue() -> Value {
        json!({
            "id": "9f3c0b8e-1", "identifier": "ENG-123", "number": 123.0,
            "title": "Deploys stall at 90 percent", "url": "https://linear.app/acme/issue/ENG-123",
            "priority": 2.0, "priorityLabel": "High",
            "createdAt": "2026-03-01T00:01:00.000Z", "updatedAt": "2026-03-02T10:00:00.000Z",
            "archivedAt": null, "trashed": null,
            "state": {"name": "In Progress", "type": "started"},
            "team": {"id": "t1", "key": "ENG", "name": "Engineering"},
            "assignee": {"name": "Ana Lima", "displayName": "ana"},
            "creator": {"name": "", "displayName": "bo"},
            "project": {"id": "p1", "name": "Reliability"},
            "cycle": {"number": 7.0, "name": null},
            "labels": {"nodes": [{"name": "bug"}, {"name": "ops"}]},
            "description": "Every deploy **hangs** at 90%.\n"
        })
    }

    #[test]
    fn webhook_deliveries_verify_by_signature_and_age() {
        use crate::push::{hmac_sha256_hex, PushError, PushRequest};
        let secret = "linear-signing-secret-0001";
        let credentials = json!({"api_key": "k", "webhook_secret": secret});
        let credentials = credentials.as_object().unwrap();
        let body = br#"{"action":"update","type":"Issue","webhookTimestamp":1800000000000}"#;
        let headers = |signature: String| {
            vec![
                ("linear-signature".to_owned(), signature),
                ("linear-delivery".to_owned(), "d-7".to_owned()),
                ("linear-event".to_owned(), "Issue".to_owned()),
            ]
        };
        let good = headers(hmac_sha256_hex(secret, body));
        let at = |headers: &[(String, String)], now_unix: i64| {
            verify_linear_push(
                credentials,
                &PushRequest {
                    headers,
                    body,
                    now_unix,
                },
            )
        };
        let event = at(&good, 1_800_000_030).unwrap();
        assert_eq!(
            (event.delivery_id.as_str(), event.event.as_str()),
            ("d-7", "Issue")
        );
        assert!(matches!(at(&good, 1_800_000_090), Err(PushError::Stale(_))));
        let forged = headers(hmac_sha256_hex("not-the-secret-0000000", body));
        assert!(matches!(
            at(&forged, 1_800_000_030),
            Err(PushError::Unsigned(_))
        ));
    }

    #[test]
    fn an_issue_reads_as_its_text_and_comments_with_its_fields() {
        let entry = issue_entry(
            Scope::Team("t1"),
            &issue(),
            "2026-03-02T10:00:00.000Z".into(),
        )
        .unwrap();
        assert_eq!(entry.native_id, "9f3c0b8e-1");
        assert_eq!(issue_id(&entry), "9f3c0b8e-1");
        let of_project = issue_entry(Scope::Project("p1"), &issue(), String::new()).unwrap();
        assert_eq!(of_project.native_id, "project:p1/9f3c0b8e-1");
        assert_eq!(issue_id(&of_project), "9f3c0b8e-1");
        assert_eq!(entry.title, "ENG-123: Deploys stall at 90 percent");
        assert_eq!(entry.url, "https://linear.app/acme/issue/ENG-123");
        assert_eq!(entry.fields["identifier"], "ENG-123");
        assert_eq!(entry.fields["team"], "ENG");
        assert_eq!(entry.fields["state"], "In Progress");
        assert_eq!(entry.fields["priority"], "High");
        assert_eq!(entry.fields["labels"], json!(["bug", "ops"]));
        assert_eq!(entry.fields["assignee"], "Ana Lima");
        assert_eq!(entry.fields["creator"], "bo");
        assert_eq!(entry.fields["project"], "Reliability");
        assert_eq!(entry.fields["cycle"], 7);
        let comments = [
            json!({"id": "c2", "body": "Fixed by warming the cache.", "createdAt": "2026-03-02T09:00:00.000Z",
                   "user": {"name": "Cy", "displayName": "cy"}}),
            json!({"id": "c1", "body": "Seen again today.", "createdAt": "2026-03-01T09:00:00.000Z",
                   "user": null}),
        ];
        let text = render_issue(&issue(), &comments);
        assert!(text.starts_with("Deploys stall at 90 percent\n"), "{text}");
        for part in [
            "Issue ENG-123 in team Engineering, In Progress, priority High, created by bo",
            "assigned to Ana Lima, in project Reliability, in cycle 7.",
            "Labels: bug, ops.",
            "Every deploy **hangs** at 90%.",
            "Comment by someone on 2026-03-01T09:00:00.000Z:\nSeen again today.",
            "Comment by Cy",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(text.find("Seen again").unwrap() < text.find("warming").unwrap());
        let mut bare = issue();
        bare["archivedAt"] = json!("2026-03-03T00:00:00.000Z");
        assert!(gone(&bare) && !gone(&issue()));
        bare["archivedAt"] = Value::Null;
        bare["trashed"] = json!(true);
        assert!(gone(&bare));
    }

    #[test]
    fn errors_map_to_what_the_connector_should_do() {
        let error = |code: &str| {
            json!({"errors": [{"message": "nope", "extensions": {"code": code,
                   "userPresentableMessage": "Not allowed."}}]})
        };
        assert!(matches!(
            failure(400, &error("AUTHENTICATION_ERROR"), "x", None),
            Some(ProviderError::Unauthorized { .. })
        ));
        assert!(matches!(
            failure(401, &Value::Null, "x", None),
            Some(ProviderError::Unauthorized {
                http_status: 401,
                ..
            })
        ));
        let forbidden = failure(200, &error("FORBIDDEN"), "team ENG", None).unwrap();
        assert!(
            matches!(forbidden, ProviderError::Resource { .. })
                && forbidden.to_string().contains("Not allowed."),
            "{forbidden}"
        );
        for status in [400, 429] {
            let limited = failure(status, &error("RATELIMITED"), "x", None).unwrap();
            assert!(
                matches!(limited, ProviderError::Transient { http_status, .. } if http_status == status),
                "{limited:?}"
            );
            assert!(limited.to_string().contains("rate limiting"));
        }
        assert!(matches!(
            failure(429, &Value::Null, "x", None),
            Some(ProviderError::Transient { .. })
        ));
        assert!(matches!(
            failure(502, &Value::Null, "x", None),
            Some(ProviderError::Transient { .. })
        ));
        assert!(matches!(
            failure(400, &error("GRAPHQL_VALIDATION_FAILED"), "x", None),
            Some(ProviderError::Resource { .. })
        ));
        assert_eq!(failure(200, &json!({"data": {}}), "x", None), None);
        let spent = rate_limit_error(400, Some(1_800_000_600_000), 1_800_000_000_000);
        assert!(
            spent.to_string().contains("2027-01-15T08:10:00Z")
                && spent.to_string().contains("11 min"),
            "{spent}"
        );
        assert!(matches!(
            spent,
            ProviderError::RateLimited {
                until_unix: 1_800_000_601,
                ..
            }
        ));
    }

    #[test]
    fn passes_go_on_incrementally_and_list_everything_once_a_day() {
        let first = start_walk(&Cursor::default(), 1_000_000);
        assert!(first.full && first.since.is_empty());
        assert_eq!(
            first.phase,
            Phase::Issues,
            "no comment is new before any pass"
        );
        let done = Walk {
            high: "2026-03-02T10:00:00.000Z".into(),
            ..first
        };
        let cursor = end_cursor(&done, &Cursor::default(), 1_000_000);
        assert_eq!(cursor.comments_since, cursor.since);
        assert_eq!(cursor.full_at, 1_000_000);
        let next = start_walk(&cursor, 1_000_000 + 3600);
        assert!(!next.full && next.since == cursor.since && next.phase == Phase::Comments);
        assert_eq!(
            issue_filter(Scope::Team("t1"), &next),
            json!({"team": {"id": {"eq": "t1"}}, "updatedAt": {"gt": "2026-03-02T10:00:00.000Z"}})
        );
        let daily = start_walk(&cursor, 1_000_000 + FULL_PASS_EVERY_S);
        assert!(daily.full && daily.since.is_empty());
        assert_eq!(
            issue_filter(Scope::Project("p1"), &daily),
            json!({"project": {"id": {"eq": "p1"}}})
        );
    }

    #[test]
    fn resources_are_teams_or_projects_and_a_project_reads_as_its_overview() {
        let resource = |id: &str, resource_type: &str| ResourceRef {
            id: id.to_owned(),
            resource_type: resource_type.to_owned(),
            filters: Value::Null,
            provider_metadata: Value::Null,
        };
        assert_eq!(scope_of(&resource("t1", "")).unwrap(), Scope::Team("t1"));
        assert_eq!(
            scope_of(&resource("t1", "team")).unwrap(),
            Scope::Team("t1")
        );
        assert_eq!(
            scope_of(&resource("project:p1", "")).unwrap(),
            Scope::Project("p1")
        );
        assert_eq!(
            scope_of(&resource("p1", "project")).unwrap(),
            Scope::Project("p1")
        );
        for bad in ["", "project:", "a b", "project:x:y"] {
            assert!(scope_of(&resource(bad, "")).is_err(), "{bad}");
        }
        let project = json!({"id": "p1", "name": "Reliability", "description": "Fewer pages.",
            "content": "## Goals\nHalve the incidents.", "url": "https://linear.app/acme/project/p1",
            "updatedAt": "2026-03-02T00:00:00.000Z", "startDate": "2026-03-01", "targetDate": null,
            "status": {"name": "In Progress", "type": "started"}, "lead": {"name": "Ana Lima"}});
        let entry = project_overview(&project).unwrap();
        assert_eq!(entry.native_id, "project:p1");
        assert_eq!(entry.fields["kind"], "project");
        let Some(Content::Text(text)) = entry.content else {
            panic!("text")
        };
        assert!(
            text.starts_with(
                "Reliability\n\nProject, In Progress, led by Ana Lima, starts 2026-03-01.\n"
            ) && text.contains("Fewer pages.")
                && text.contains("Halve the incidents."),
            "{text}"
        );
    }

    #[test]
    fn the_key_goes_as_it_is_and_a_token_as_a_bearer() {
        let access = crate::test_access;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let api = rt
            .block_on(Api::new(
                &access(json!({"api_key": "lin_api_x", "api_url": "https://linear.example/"})),
                false,
            ))
            .unwrap();
        assert_eq!(api.authorization, "lin_api_x");
        assert_eq!(api.endpoint.as_str(), "https://linear.example/graphql");
        let api = rt
            .block_on(Api::new(&access(json!({"access_token": "tok"})), false))
            .unwrap();
        assert_eq!(api.authorization, "Bearer tok");
        assert_eq!(api.endpoint.as_str(), "https://api.linear.app/graphql");
        assert!(matches!(
            rt.block_on(Api::new(&access(json!({})), false)),
            Err(ProviderError::Invalid(_))
        ));
    }
}
