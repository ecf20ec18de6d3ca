//! `jira`: the issues of Jira Cloud (or Data Center) projects with their comments, through
//! Jira's REST API v3 (see [`crate::atlassian`] for the site, credentials, rate limits and
//! webhooks). Discovery lists the projects the account can browse (`GET
//! /rest/api/3/project/search`, page by page), each a resource `project:<key>`.
//!
//! A pass searches the project's issues with JQL (`GET /rest/api/3/search/jql`, which goes on
//! with `nextPageToken`; Atlassian retired the older `/rest/api/3/search`): `project = "KEY"
//! AND updated >= "yyyy/MM/dd HH:mm" ORDER BY updated ASC` from the newest `updated` the last
//! pass saw (less a margin: JQL reads that time to the minute, in the account's time zone, and
//! search is eventually consistent). A comment moves its issue's `updated`, so a commented issue
//! is listed again. Deleted and moved issues are not in such a listing: every
//! `filters.full_pass_every_hours` (default 24; 0 for every pass) a pass lists every issue of
//! the project, and those it did not see leave engram. Each issue is one document: its summary,
//! what it is (type, status, priority, people, labels), its description and its comments (both
//! Atlassian Document Format, read as text), with status, priority, assignee, reporter, labels
//! and issue type as fields to filter on. Who may read an issue (permission schemes, issue
//! security) is not readable with read scopes: each pass says so as `acl_warning`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::atlassian::{adf_text, Product, Site};
use crate::hosted::{object_failure, saved_pass, text_of};
use crate::{
    now_unix, Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Known, Page,
    Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Issues a search page asks for, and projects a discovery page.
const PER_PAGE: usize = 50;
/// Pages discovery reads at most (5,000 projects).
const PROJECT_PAGES_MAX: usize = 100;
/// Pages one pass reads at most (100,000 issues).
const PASS_PAGES_MAX: u32 = 2000;
/// Comment pages read for one issue at most (2,000 comments).
const COMMENT_PAGES_MAX: usize = 40;
/// How often a pass lists every issue by default.
const FULL_PASS_EVERY_H: i64 = 24;
/// How far before the newest `updated` seen the next pass searches from.
const SINCE_MARGIN_MIN: i64 = 15;
/// The fields a search reads of each issue.
const LISTED_FIELDS: &str =
    "summary,status,priority,assignee,reporter,labels,issuetype,created,updated,project";
const ACL_WARNING: &str = "Jira's issue permissions (the project's permission scheme and issue \
    security levels) cannot be read with read-only scopes: issues carry no rule of their own; \
    set one on the resource to limit who finds them";

pub struct JiraProvider {
    info: ProviderInfo,
}

impl Default for JiraProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl JiraProvider {
    pub fn new() -> Self {
        let field = FieldInfo::new;
        let filter = |name: &'static str| Some(name);
        Self {
            info: ProviderInfo {
                provider: "jira",
                category: "project_management",
                connector_type: "issue_tracker",
                rank: Some(13),
                rbac_support: false,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["issue"],
                fields: vec![
                    field("project", "string", "The key of the issue's project, e.g. ENG", filter("additional_metadata.project")),
                    field("key", "string", "The issue's key, e.g. ENG-123", filter("additional_metadata.key")),
                    field("status", "string", "The issue's status, e.g. In Progress", filter("additional_metadata.status")),
                    field("status_category", "string", "The status's category: To Do, In Progress or Done", filter("additional_metadata.status_category")),
                    field("priority", "string", "The issue's priority, e.g. High", filter("additional_metadata.priority")),
                    field("issue_type", "string", "The issue's type, e.g. Bug", filter("additional_metadata.issue_type")),
                    field("assignee", "string", "The display name of whom the issue is assigned to", filter("additional_metadata.assignee")),
                    field("reporter", "string", "The display name of who reported the issue", filter("additional_metadata.reporter")),
                    field("labels", "array", "The issue's labels", filter("additional_metadata.labels")),
                    field("created", "string", "When the issue was created (RFC 3339)", None),
                ],
                credential_schema: crate::atlassian::credential_schema(),
                setup_guide: "Give `site_url` (https://<your-site>.atlassian.net, or your Data Center \
                    address) and either `email` with an `api_token` made at \
                    https://id.atlassian.com/manage-profile/security/api-tokens (it reads what that \
                    account can browse), or OAuth: an `oauth` object with your Atlassian OAuth 2.0 \
                    (3LO) app's `client_id` and `client_secret` (scopes `read:jira-work read:jira-user \
                    offline_access`; engram runs the authorization and refreshes the rotating tokens; \
                    `cloud_id` is looked up from the site unless given). Discovery offers each project \
                    (`project:<key>`); its issues sync with their descriptions and comments, one \
                    document per issue, with status, priority, issue type, assignee, reporter and \
                    labels as fields. Deleted issues leave at the next full pass \
                    (`filters.full_pass_every_hours`, default 24). For push, create a webhook \
                    (Jira settings → System → WebHooks) to https://<engram>/connectors/<id>/events \
                    with a secret, the events Issue created/updated/deleted and Comment \
                    created/updated/deleted, and give the same secret as `webhook_secret`.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

/// The project key of a resource (`project:<key>`, or a bare key).
fn project_of(resource: &ResourceRef) -> Result<&str, ProviderError> {
    crate::hosted::prefixed_id(
        resource,
        "project:",
        100,
        |c| c.is_ascii_alphanumeric() || c == '_',
        "`project:` and a Jira project key",
    )
}

/// Jira's time (`2026-03-01T10:00:00.000+0000`) in RFC 3339 (`…+00:00`).
fn rfc3339_of(jira: &str) -> String {
    let bytes = jira.as_bytes();
    if jira.len() >= 5 && matches!(bytes[jira.len() - 5], b'+' | b'-') && !jira.ends_with('Z') {
        let (head, zone) = jira.split_at(jira.len() - 2);
        return format!("{head}:{zone}");
    }
    jira.to_owned()
}

/// A JQL time (`yyyy/MM/dd HH:mm`) `SINCE_MARGIN_MIN` before Jira's time `at`, read in the
/// zone it was written in (Jira writes times in the account's zone, which JQL reads).
fn jql_since(at: &str) -> Option<String> {
    use time::macros::format_description;
    let local = at.get(..16)?;
    let parsed = time::PrimitiveDateTime::parse(
        local,
        format_description!("[year]-[month]-[day]T[hour]:[minute]"),
    )
    .ok()?;
    let earlier = parsed - time::Duration::minutes(SINCE_MARGIN_MIN);
    earlier
        .format(format_description!("[year]/[month]/[day] [hour]:[minute]"))
        .ok()
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    token: Option<String>,
    full: bool,
    /// JQL time the search starts from (empty: every issue).
    since: String,
    /// The newest `updated` seen.
    high: String,
    pages: u32,
}

/// The cursor a pass leaves.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Cursor {
    high: String,
    /// When the last pass over every issue ended (Unix seconds).
    full_at: i64,
}

fn start_walk(cursor: &Cursor, every_h: i64, now: i64) -> Walk {
    let full = cursor.high.is_empty() || now - cursor.full_at >= every_h * 3600;
    Walk {
        token: None,
        full,
        since: if full {
            String::new()
        } else {
            jql_since(&cursor.high).unwrap_or_default()
        },
        high: cursor.high.clone(),
        pages: 0,
    }
}

fn jql(project: &str, walk: &Walk) -> String {
    let mut jql = format!("project = \"{project}\"");
    if !walk.since.is_empty() {
        jql.push_str(&format!(" AND updated >= \"{}\"", walk.since));
    }
    jql.push_str(" ORDER BY updated ASC");
    jql
}

fn name_of(issue: &Value, pointer: &str) -> Option<String> {
    let who = issue.pointer(pointer)?;
    let name = who
        .get("displayName")
        .or_else(|| who.get("name"))
        .and_then(Value::as_str)?;
    (!name.is_empty()).then(|| name.to_owned())
}

fn labels(issue: &Value) -> Vec<String> {
    issue
        .pointer("/fields/labels")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// An issue's entry.
fn issue_entry(site: &Site<'_>, issue: &Value) -> Option<Entry> {
    let id = text_of(issue, "/id");
    if id.is_empty() {
        return None;
    }
    let key = text_of(issue, "/key");
    let updated = text_of(issue, "/fields/updated");
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::from("issue"));
    fields.insert("key".into(), Value::from(key));
    fields.insert(
        "project".into(),
        Value::from(text_of(issue, "/fields/project/key")),
    );
    for (name, pointer) in [
        ("status", "/fields/status/name"),
        ("status_category", "/fields/status/statusCategory/name"),
        ("priority", "/fields/priority/name"),
        ("issue_type", "/fields/issuetype/name"),
    ] {
        let value = text_of(issue, pointer);
        if !value.is_empty() {
            fields.insert(name.into(), Value::from(value));
        }
    }
    for (name, pointer) in [
        ("assignee", "/fields/assignee"),
        ("reporter", "/fields/reporter"),
    ] {
        if let Some(who) = name_of(issue, pointer) {
            fields.insert(name.into(), Value::from(who));
        }
    }
    fields.insert("labels".into(), Value::from(labels(issue)));
    let created = text_of(issue, "/fields/created");
    if !created.is_empty() {
        fields.insert("created".into(), Value::from(rfc3339_of(created)));
    }
    Some(Entry {
        native_id: id.to_owned(),
        version: updated.to_owned(),
        title: format!("{key}: {}", text_of(issue, "/fields/summary")),
        file_name: String::new(),
        url: site.link(&format!("browse/{key}")),
        modified_at: rfc3339_of(updated),
        fields,
        content: None,
        state: String::new(),
    })
}

/// An issue and its comments as one text.
fn render_issue(issue: &Value, comments: &[Value]) -> String {
    let mut text = format!(
        "{}: {}\n\n",
        text_of(issue, "/key"),
        text_of(issue, "/fields/summary")
    );
    text.push_str(&format!(
        "{} in project {}, {}",
        text_of(issue, "/fields/issuetype/name"),
        text_of(issue, "/fields/project/name"),
        text_of(issue, "/fields/status/name"),
    ));
    let priority = text_of(issue, "/fields/priority/name");
    if !priority.is_empty() {
        text.push_str(&format!(", priority {priority}"));
    }
    if let Some(reporter) = name_of(issue, "/fields/reporter") {
        text.push_str(&format!(", reported by {reporter}"));
    }
    if let Some(assignee) = name_of(issue, "/fields/assignee") {
        text.push_str(&format!(", assigned to {assignee}"));
    }
    text.push_str(".\n");
    let labels = labels(issue);
    if !labels.is_empty() {
        text.push_str(&format!("Labels: {}.\n", labels.join(", ")));
    }
    let description = issue.pointer("/fields/description").map(|d| match d {
        // Data Center's API v2 answers wiki markup; ADF otherwise.
        Value::String(s) => s.trim().to_owned(),
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::Array(_)
        | Value::Object(_)) => adf_text(other),
    });
    if let Some(description) = description.filter(|d| !d.is_empty()) {
        text.push('\n');
        text.push_str(&description);
        text.push('\n');
    }
    for comment in comments {
        let body = match comment.get("body") {
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(other) => adf_text(other),
            None => String::new(),
        };
        text.push_str(&format!(
            "\nComment by {} on {}:\n{body}\n",
            name_of(comment, "/author").unwrap_or_else(|| "someone".to_owned()),
            rfc3339_of(text_of(comment, "/created")),
        ));
    }
    text
}

fn project_resource(project: &Value) -> Option<DiscoveredResource> {
    let key = text_of(project, "/key");
    if key.is_empty() {
        return None;
    }
    Some(DiscoveredResource {
        id: format!("project:{key}"),
        name: format!("{key}: {}", text_of(project, "/name")),
        resource_type: "project".to_owned(),
        metadata: json!({
            "id": project.get("id"),
            "key": key,
            "name": project.get("name"),
            "project_type": project.get("projectTypeKey"),
            "private": project.get("isPrivate"),
        }),
    })
}

fn serialized<T: Serialize>(value: &T) -> Result<String, ProviderError> {
    serde_json::to_string(value).map_err(|e| ProviderError::Invalid(e.to_string()))
}

/// Hours between full passes: `filters.full_pass_every_hours` (0: every pass), default 24.
fn full_every_h(resource: &ResourceRef) -> i64 {
    resource
        .filters
        .get("full_pass_every_hours")
        .and_then(Value::as_i64)
        .map_or(FULL_PASS_EVERY_H, |h| h.clamp(0, 24 * 30))
}

impl JiraProvider {
    async fn fetch_issue(
        &self,
        site: &Site<'_>,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let what = format!("issue {}", entry.title);
        let id = entry.native_id.as_str();
        let issue = site
            .get(
                &format!("rest/api/3/issue/{id}"),
                &[("fields", format!("{LISTED_FIELDS},description"))],
                &what,
            )
            .await?;
        let mut comments = Vec::new();
        for _ in 0..COMMENT_PAGES_MAX {
            let page = site
                .get(
                    &format!("rest/api/3/issue/{id}/comment"),
                    &[
                        ("startAt", comments.len().to_string()),
                        ("maxResults", PER_PAGE.to_string()),
                        ("orderBy", "created".to_owned()),
                    ],
                    &format!("the comments of {what}"),
                )
                .await?;
            let got = page
                .get("comments")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let total = page.get("total").and_then(Value::as_u64).unwrap_or(0);
            let empty = got.is_empty();
            comments.extend(got);
            if empty || comments.len() as u64 >= total {
                break;
            }
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

#[async_trait]
impl Provider for JiraProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        Some(crate::atlassian::oauth(
            "read:jira-work read:jira-user offline_access",
        ))
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(crate::atlassian::verify_push(
            credentials,
            request,
            Product::Jira,
            &["jira:issue_", "comment_"],
        ))
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let site = Site::new(access, Product::Jira, true).await?;
        let mut found = Vec::new();
        let mut start = 0;
        for _ in 0..PROJECT_PAGES_MAX {
            let page = site
                .get(
                    "rest/api/3/project/search",
                    &[
                        ("startAt", start.to_string()),
                        ("maxResults", PER_PAGE.to_string()),
                    ],
                    "the account's projects",
                )
                .await?;
            let values = page
                .get("values")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            start += values.len();
            found.extend(values.iter().filter_map(project_resource));
            if values.is_empty() || page.get("isLast").and_then(Value::as_bool) != Some(false) {
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
        _known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let site = Site::new(access, Product::Jira, true).await?;
        let project = project_of(resource)?;
        let cursor: Cursor = serde_json::from_str(&position.cursor).unwrap_or_default();
        let mut walk = if position.within.is_empty() {
            start_walk(&cursor, full_every_h(resource), now_unix())
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "project {project} changed more than a pass reads ({PASS_PAGES_MAX} pages)"
            )));
        }
        let mut query = vec![
            ("jql", jql(project, &walk)),
            ("maxResults", PER_PAGE.to_string()),
            ("fields", LISTED_FIELDS.to_owned()),
        ];
        if let Some(token) = &walk.token {
            query.push(("nextPageToken", token.clone()));
        }
        let answer = site
            .get(
                "rest/api/3/search/jql",
                &query,
                &format!("the issues of project {project}"),
            )
            .await?;
        let mut entries = Vec::new();
        for issue in answer
            .get("issues")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let updated = text_of(issue, "/fields/updated");
            if updated > walk.high.as_str() {
                walk.high = updated.to_owned();
            }
            entries.extend(issue_entry(&site, issue));
        }
        let token = answer
            .get("nextPageToken")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        let (next, cursor) = match token {
            Some(token) if answer.get("isLast").and_then(Value::as_bool) != Some(true) => {
                walk.token = Some(token);
                (Some(serialized(&walk)?), String::new())
            }
            _ => {
                let done = Cursor {
                    high: walk.high.clone(),
                    full_at: if walk.full {
                        now_unix()
                    } else {
                        cursor.full_at
                    },
                };
                (None, serialized(&done)?)
            }
        };
        Ok(Page {
            entries,
            next,
            cursor,
            complete_listing: walk.full,
            acl_warning: ACL_WARNING.to_owned(),
            ..Page::default()
        })
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let site = Site::new(access, Product::Jira, false)
            .await
            .map_err(|e| ProviderError::Object(e.to_string()))?;
        self.fetch_issue(&site, entry, max_bytes)
            .await
            .map_err(object_failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue() -> Value {
        json!({"id": "10001", "key": "ENG-7", "fields": {
            "summary": "Deploys stall at 90 percent",
            "status": {"name": "In Progress", "statusCategory": {"name": "In Progress"}},
            "priority": {"name": "High"}, "issuetype": {"name": "Bug"},
            "assignee": {"displayName": "Ana Lima"}, "reporter": {"displayName": "Bo"},
            "labels": ["ops", "deploy"], "project": {"key": "ENG", "name": "Engineering"},
            "created": "2026-03-01T09:00:00.000+0000", "updated": "2026-03-02T10:05:00.000+0100",
            "description": {"type": "doc", "version": 1, "content": [
                {"type": "paragraph", "content": [{"type": "text", "text": "Every deploy hangs."}]}]}
        }})
    }

    #[test]
    fn an_issue_reads_as_its_text_and_comments_with_its_fields() {
        let access = crate::test_access(
            json!({"site_url": "https://acme.atlassian.net", "email": "a@b.c", "api_token": "t"}),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let site = rt
            .block_on(Site::new(&access, Product::Jira, false))
            .unwrap();
        let entry = issue_entry(&site, &issue()).unwrap();
        assert_eq!(entry.native_id, "10001");
        assert_eq!(entry.title, "ENG-7: Deploys stall at 90 percent");
        assert_eq!(entry.url, "https://acme.atlassian.net/browse/ENG-7");
        assert_eq!(entry.modified_at, "2026-03-02T10:05:00.000+01:00");
        assert_eq!(entry.fields["status"], "In Progress");
        assert_eq!(entry.fields["priority"], "High");
        assert_eq!(entry.fields["issue_type"], "Bug");
        assert_eq!(entry.fields["assignee"], "Ana Lima");
        assert_eq!(entry.fields["reporter"], "Bo");
        assert_eq!(entry.fields["labels"], json!(["ops", "deploy"]));
        let comments = [
            json!({"author": {"displayName": "Cy"}, "created": "2026-03-02T11:00:00.000+0000",
            "body": {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [
                {"type": "text", "text": "Fixed by warming the cache."}]}]}}),
        ];
        let text = render_issue(&issue(), &comments);
        for part in [
            "ENG-7: Deploys stall at 90 percent",
            "Bug in project Engineering, In Progress, priority High, reported by Bo, assigned to Ana Lima.",
            "Labels: ops, deploy.",
            "Every deploy hangs.",
            "Comment by Cy on 2026-03-02T11:00:00.000+00:00:\nFixed by warming the cache.",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    #[test]
    fn passes_search_from_the_newest_update_and_list_everything_now_and_then() {
        let first = start_walk(&Cursor::default(), 24, 1_000_000);
        assert!(first.full);
        assert_eq!(jql("ENG", &first), "project = \"ENG\" ORDER BY updated ASC");
        let cursor = Cursor {
            high: "2026-03-02T10:05:00.000+0100".into(),
            full_at: 1_000_000,
        };
        let next = start_walk(&cursor, 24, 1_000_000 + 3600);
        assert!(!next.full);
        assert_eq!(
            jql("ENG", &next),
            "project = \"ENG\" AND updated >= \"2026/03/02 09:50\" ORDER BY updated ASC"
        );
        assert!(start_walk(&cursor, 24, 1_000_000 + 86_400).full);
        assert!(start_walk(&cursor, 0, 1_000_000).full);
    }

    #[test]
    fn resources_are_project_keys() {
        let resource = |id: &str| ResourceRef {
            id: id.to_owned(),
            resource_type: "project".to_owned(),
            filters: json!({"full_pass_every_hours": 2}),
            provider_metadata: Value::Null,
        };
        assert_eq!(project_of(&resource("project:ENG")).unwrap(), "ENG");
        assert_eq!(project_of(&resource("OPS")).unwrap(), "OPS");
        for bad in ["project:", "project:a\"b", "a b"] {
            assert!(project_of(&resource(bad)).is_err(), "{bad}");
        }
        assert_eq!(full_every_h(&resource("ENG")), 2);
    }
}
