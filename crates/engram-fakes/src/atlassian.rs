//! A stateful fake of the parts of Atlassian Cloud the `confluence` and `jira` connectors read,
//! on loopback, one site serving both products: Confluence's spaces, pages (nested, edited,
//! trashed), their attachments (and the download links they give) and read restrictions;
//! Jira's projects, issues (with ADF descriptions), comments and the JQL search
//! (`project = "X" [AND updated >= "yyyy/MM/dd HH:mm"] ORDER BY updated ASC`, `nextPageToken`).
//! Small pages force cursors; HTTP Basic (`email:api_token`) is checked (`401` otherwise) and
//! rate limiting (`429` with `Retry-After`) is given on demand.
//!
//! It is a test double of Atlassian's API, so it is held to Atlassian's own description of it.
//! Atlassian publishes its OpenAPI documents on its developer site only; on npm, the clients
//! generated from them (`jira.js`, `confluence.js`, which `make setup-test` installs with zod's
//! types) describe every endpoint (method, path, query parameters: the `config` of each function
//! in `dist/**/api/*.js`) and type every parameter and answer (their Zod schemas' `.d.ts`).
//! [`assert_conforms`] checks each exchange the fake logged against that endpoint table, then
//! writes its parameters and answer as TypeScript values of the published types
//! (`z.input<typeof PagesInSpaceSchema>`, …) and has `tsc --strict` check them.
#![allow(clippy::unwrap_used)] // test code

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::serve::{
    assert_no_problems, json_reply, query_pairs, read_answer, route_params, with_retry_after,
    Loopback, RateLimit, Serving,
};
use crate::typescript::{node_json, Checks};

/// One request and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    /// The route template; `UNROUTED <path>` for a request no route took.
    pub route: String,
    pub params: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub status: u16,
    /// The JSON answer (`None` for a file).
    pub body: Option<Value>,
}

struct PageRec {
    space: String,
    parent: Option<String>,
    title: String,
    body: String,
    version: u64,
    edited: String,
    trashed: bool,
    /// Read restrictions: users (`None` for one whose e-mail is hidden) and groups.
    users: Vec<Option<String>>,
    groups: Vec<String>,
}

struct AttachmentRec {
    page: String,
    title: String,
    media_type: String,
    bytes: Vec<u8>,
}

struct IssueRec {
    project: String,
    key: String,
    summary: String,
    description: String,
    status: String,
    priority: String,
    issue_type: String,
    assignee: String,
    labels: Vec<String>,
    updated: u64,
    comments: Vec<(String, String, u64)>,
}

#[derive(Default)]
struct Shared {
    /// The authorization server whose active access tokens are accepted too (as Data Center
    /// takes an OAuth 2.0 bearer token at the site itself).
    introspection: Option<crate::serve::Introspection>,
    authorization: String,
    spaces: Vec<(String, String, String)>,
    pages: BTreeMap<String, PageRec>,
    attachments: BTreeMap<String, AttachmentRec>,
    projects: Vec<(String, String, String)>,
    issues: BTreeMap<String, IssueRec>,
    /// Minutes since 2026-03-01T00:00Z.
    clock: u64,
    next_id: u64,
    page_size_max: usize,
    limited: RateLimit,
    log: crate::serve::Log<Exchange>,
}

type SharedState = Arc<Mutex<Shared>>;

fn at(minutes: u64) -> (String, String) {
    let (d, h, m) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
    (
        format!("2026-03-{:02}T{h:02}:{m:02}:00.000+0000", d + 1),
        format!("2026/03/{:02} {h:02}:{m:02}", d + 1),
    )
}

impl Shared {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        (10_000 + self.next_id).to_string()
    }
}

fn adf(text: &str) -> Value {
    json!({"type": "doc", "version": 1, "content": text.split("\n\n").map(|p|
        json!({"type": "paragraph", "content": [{"type": "text", "text": p}]})).collect::<Vec<_>>()})
}

fn limit(query: &BTreeMap<String, String>, s: &Shared) -> usize {
    query
        .get("limit")
        .or_else(|| query.get("maxResults"))
        .and_then(|l| l.parse().ok())
        .unwrap_or(25)
        .min(s.page_size_max)
}

/// A cursor page of `items`: the results and `_links.next` when more follow.
fn cursor_page(
    path: &str,
    items: Vec<Value>,
    query: &BTreeMap<String, String>,
    s: &Shared,
) -> Value {
    let from: usize = query
        .get("cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let size = limit(query, s);
    let page: Vec<Value> = items.iter().skip(from).take(size).cloned().collect();
    let mut links = json!({"base": "https://acme.atlassian.net/wiki"});
    if from + size < items.len() {
        links["next"] = json!(format!("{path}?cursor={}&limit={size}", from + size));
    }
    json!({"results": page, "_links": links})
}

fn page_json(s: &Shared, id: &str, body: bool) -> Value {
    let p = &s.pages[id];
    let mut page = json!({
        "id": id, "status": if p.trashed { "trashed" } else { "current" }, "title": p.title,
        "spaceId": p.space, "parentId": p.parent, "parentType": p.parent.as_ref().map(|_| "page"),
        "authorId": "557058:ana", "createdAt": "2026-03-01T00:00:00.000Z",
        "version": {"number": p.version, "createdAt": p.edited, "message": "", "minorEdit": false, "authorId": "557058:ana"},
        "_links": {"webui": format!("/spaces/{}/pages/{id}", p.space), "editui": format!("/pages/resumedraft.action?draftId={id}"), "tinyui": "/x/abc"}
    });
    if body {
        page["body"] = json!({"storage": {"representation": "storage", "value": p.body}});
    }
    page
}

async fn spaces(
    State(shared): State<SharedState>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let items = s.spaces.iter().map(|(id, key, name)| json!({
        "id": id, "key": key, "name": name, "type": "global", "status": "current",
        "authorId": "557058:ana", "createdAt": "2026-03-01T00:00:00.000Z", "homepageId": format!("{id}1"),
        "_links": {"webui": format!("/spaces/{key}")}
    })).collect();
    json_reply(
        StatusCode::OK,
        &cursor_page("/wiki/api/v2/spaces", items, &q, &s),
    )
}

async fn space_pages(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let items = s
        .pages
        .iter()
        .filter(|(_, p)| p.space == id && !p.trashed)
        .map(|(pid, _)| page_json(&s, pid, q.contains_key("body-format")))
        .collect();
    json_reply(
        StatusCode::OK,
        &cursor_page(&format!("/wiki/api/v2/spaces/{id}/pages"), items, &q, &s),
    )
}

fn not_found() -> Response {
    json_reply(
        StatusCode::NOT_FOUND,
        &json!({"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found"}]}),
    )
}

async fn page(State(shared): State<SharedState>, Path(id): Path<String>) -> Response {
    let s = shared.lock().unwrap();
    match s.pages.get(&id) {
        Some(p) if !p.trashed => json_reply(StatusCode::OK, &page_json(&s, &id, true)),
        _ => not_found(),
    }
}

async fn page_attachments(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let items = s.attachments.iter().filter(|(_, a)| a.page == id).map(|(aid, a)| json!({
        "id": aid, "status": "current", "title": a.title, "createdAt": "2026-03-01T00:00:00.000Z",
        "pageId": id, "mediaType": a.media_type, "fileSize": a.bytes.len(), "fileId": format!("f-{aid}"),
        "webuiLink": format!("/pages/viewpageattachments.action?pageId={id}"),
        "downloadLink": format!("/download/attachments/{id}/{}?version=1&api=v2", a.title),
        "version": {"number": 1, "createdAt": "2026-03-01T00:00:00.000Z", "message": "", "minorEdit": false, "authorId": "557058:ana"},
        "_links": {"download": format!("/download/attachments/{id}/{}", a.title), "webui": "/x"}
    })).collect();
    json_reply(
        StatusCode::OK,
        &cursor_page(
            &format!("/wiki/api/v2/pages/{id}/attachments"),
            items,
            &q,
            &s,
        ),
    )
}

async fn download(
    State(shared): State<SharedState>,
    Path((page, file)): Path<(String, String)>,
) -> Response {
    let s = shared.lock().unwrap();
    match s
        .attachments
        .values()
        .find(|a| a.page == page && a.title == file)
    {
        Some(a) => (
            StatusCode::OK,
            [("content-type", a.media_type.clone())],
            a.bytes.clone(),
        )
            .into_response(),
        None => not_found(),
    }
}

async fn restriction(
    State(shared): State<SharedState>,
    Path((id, op)): Path<(String, String)>,
) -> Response {
    let s = shared.lock().unwrap();
    let Some(p) = s.pages.get(&id) else {
        return not_found();
    };
    let users: Vec<Value> = p.users.iter().enumerate().map(|(i, email)| {
        let mut user = json!({"type": "known", "accountId": format!("557058:u{i}"), "accountType": "atlassian",
            "publicName": format!("user {i}"), "displayName": format!("User {i}"), "isExternalCollaborator": false,
            "profilePicture": {"path": "/p.png", "width": 48, "height": 48, "isDefault": true}});
        if let Some(email) = email { user["email"] = json!(email); }
        user
    }).collect();
    let groups: Vec<Value> = p.groups.iter().map(|g| json!({"type": "group", "name": g, "id": format!("g-{g}"), "_links": {"self": "/g"}})).collect();
    let links =
        json!({"base": "https://acme.atlassian.net/wiki", "context": "/wiki", "self": "/r"});
    let array = |results: Vec<Value>| json!({"results": results.clone(), "start": 0, "limit": 200, "size": results.len(), "_links": links.clone()});
    json_reply(
        StatusCode::OK,
        &json!({
            "operation": op,
            "restrictions": {"user": array(users), "group": array(groups)},
            "_expandable": {"content": "/rest/api/content/x"},
            "_links": links
        }),
    )
}

fn user(name: &str) -> Value {
    json!({"accountId": format!("557058:{}", name.to_lowercase().replace(' ', "-")), "displayName": name, "active": true, "accountType": "atlassian"})
}

fn issue_json(s: &Shared, id: &str, with_description: bool) -> Value {
    let i = &s.issues[id];
    let project = s.projects.iter().find(|p| p.1 == i.project).unwrap();
    let mut fields = json!({
        "summary": i.summary, "labels": i.labels,
        "status": {"name": i.status, "id": "3", "statusCategory": {"name": if i.status == "Done" { "Done" } else { "In Progress" }, "key": "indeterminate", "id": 4}},
        "priority": {"name": i.priority, "id": "2"}, "issuetype": {"name": i.issue_type, "id": "1", "subtask": false},
        "assignee": if i.assignee.is_empty() { Value::Null } else { user(&i.assignee) }, "reporter": user("Bo Reyes"),
        "project": {"id": project.0, "key": project.1, "name": project.2},
        "created": at(0).0, "updated": at(i.updated).0
    });
    if with_description {
        fields["description"] = adf(&i.description);
    }
    json!({"id": id, "key": i.key, "self": format!("https://acme.atlassian.net/rest/api/3/issue/{id}"), "fields": fields})
}

async fn projects(
    State(shared): State<SharedState>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let start: usize = q.get("startAt").and_then(|v| v.parse().ok()).unwrap_or(0);
    let size = limit(&q, &s);
    let values: Vec<Value> = s.projects.iter().skip(start).take(size).map(|(id, key, name)| json!({
        "id": id, "key": key, "name": name, "projectTypeKey": "software", "isPrivate": false, "simplified": false, "style": "classic",
        "self": format!("https://acme.atlassian.net/rest/api/3/project/{id}")})).collect();
    json_reply(
        StatusCode::OK,
        &json!({"startAt": start, "maxResults": size, "total": s.projects.len(),
        "isLast": start + size >= s.projects.len(), "values": values}),
    )
}

async fn search(
    State(shared): State<SharedState>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let jql = q.get("jql").cloned().unwrap_or_default();
    let quoted = |after: &str| {
        jql.split_once(after)
            .and_then(|(_, rest)| rest.split('"').nth(1))
            .map(str::to_owned)
    };
    let project = quoted("project = ").unwrap_or_default();
    let since = quoted("updated >= ");
    let mut hits: Vec<(&String, &IssueRec)> = s
        .issues
        .iter()
        .filter(|(_, i)| {
            i.project == project && since.as_ref().is_none_or(|t| at(i.updated).1 >= *t)
        })
        .collect();
    hits.sort_by_key(|(_, i)| i.updated);
    let from: usize = q
        .get("nextPageToken")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let size = limit(&q, &s);
    let issues: Vec<Value> = hits
        .iter()
        .skip(from)
        .take(size)
        .map(|(id, _)| issue_json(&s, id, false))
        .collect();
    let mut answer = json!({"issues": issues, "isLast": from + size >= hits.len()});
    if from + size < hits.len() {
        answer["nextPageToken"] = json!((from + size).to_string());
    }
    json_reply(StatusCode::OK, &answer)
}

async fn issue(State(shared): State<SharedState>, Path(id): Path<String>) -> Response {
    let s = shared.lock().unwrap();
    if !s.issues.contains_key(&id) {
        return json_reply(
            StatusCode::NOT_FOUND,
            &json!({"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}}),
        );
    }
    json_reply(StatusCode::OK, &issue_json(&s, &id, true))
}

async fn comments(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let Some(i) = s.issues.get(&id) else {
        return not_found();
    };
    let start: usize = q.get("startAt").and_then(|v| v.parse().ok()).unwrap_or(0);
    let size = limit(&q, &s);
    let page: Vec<Value> = i.comments.iter().enumerate().skip(start).take(size).map(|(n, (who, text, when))| json!({
        "id": format!("{id}{n}"), "author": user(who), "body": adf(text), "created": at(*when).0, "updated": at(*when).0,
        "self": format!("https://acme.atlassian.net/rest/api/3/issue/{id}/comment/{n}"), "jsdPublic": true})).collect();
    json_reply(
        StatusCode::OK,
        &json!({"startAt": start, "maxResults": size, "total": i.comments.len(), "comments": page}),
    )
}

/// Every request: the credentials checked and the rate limit applied, then the exchange logged.
async fn gate(
    State(shared): State<SharedState>,
    matched: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let route = matched.as_str().to_owned();
    let params = route_params(&route, request.uri().path());
    let method = request.method().to_string();
    let query = query_pairs(request.uri());
    let jira = route.starts_with("/rest/");
    let given = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let introspection = shared.lock().unwrap().introspection.clone();
    let vouched = match (introspection, given.strip_prefix("Bearer ")) {
        (Some(introspection), Some(token)) => introspection.active(token).await,
        _ => false,
    };
    let early = {
        let mut s = shared.lock().unwrap();
        if given != s.authorization && !vouched {
            Some(if jira {
                json_reply(
                    StatusCode::UNAUTHORIZED,
                    &json!({"errorMessages": ["You are not authenticated."], "errors": {}}),
                )
            } else {
                json_reply(
                    StatusCode::UNAUTHORIZED,
                    &json!({"errors": [{"status": 401, "code": "UNAUTHORIZED", "title": "Unauthorized"}]}),
                )
            })
        } else {
            s.limited.take().map(|wait| {
                with_retry_after(
                    json_reply(
                        StatusCode::TOO_MANY_REQUESTS,
                        &json!({"errorMessages": ["Rate limit exceeded."], "errors": {}}),
                    ),
                    wait,
                )
            })
        }
    };
    let response = match early {
        Some(response) => response,
        None => next.run(request).await,
    };
    let file = route.starts_with("/wiki/download/") && response.status() == StatusCode::OK;
    let (response, body) = if file {
        (response, None)
    } else {
        read_answer(response).await
    };
    shared.lock().unwrap().log.push(Exchange {
        method,
        route,
        params,
        query,
        status: response.status().as_u16(),
        body,
    });
    response
}

async fn unrouted(State(shared): State<SharedState>, request: Request) -> Response {
    shared.lock().unwrap().log.push(Exchange {
        method: request.method().to_string(),
        route: format!("UNROUTED {}", request.uri().path()),
        params: Vec::new(),
        query: query_pairs(request.uri()),
        status: 404,
        body: None,
    });
    not_found()
}

/// The routes the fake serves: the API routes with the client function each stands for, and
/// the download link Confluence's answers give (not an API route: no function).
const ROUTES: &[(&str, &str)] = &[
    ("/wiki/api/v2/spaces", "getSpaces"),
    ("/wiki/api/v2/spaces/{id}/pages", "getPagesInSpace"),
    ("/wiki/api/v2/pages/{id}", "getPageById"),
    ("/wiki/api/v2/pages/{id}/attachments", "getPageAttachments"),
    (
        "/wiki/rest/api/content/{id}/restriction/byOperation/{operationKey}",
        "getRestrictionsForOperation",
    ),
    ("/wiki/download/attachments/{page}/{file}", ""),
    ("/rest/api/3/project/search", "searchProjects"),
    ("/rest/api/3/search/jql", "searchAndReconsileIssuesUsingJql"),
    ("/rest/api/3/issue/{issueIdOrKey}", "getIssue"),
    ("/rest/api/3/issue/{issueIdOrKey}/comment", "getComments"),
];

pub struct AtlassianFake {
    shared: SharedState,
    serving: Serving,
}

impl AtlassianFake {
    /// Starts the fake; it accepts HTTP Basic with `email` and `token`; listings answer at most
    /// `page_size_max` objects a page.
    pub async fn start(email: &str, token: &str, page_size_max: usize) -> Self {
        let basic = base64(format!("{email}:{token}").as_bytes());
        let shared = Arc::new(Mutex::new(Shared {
            authorization: format!("Basic {basic}"),
            page_size_max,
            ..Shared::default()
        }));
        let router = Router::new()
            .route(ROUTES[0].0, get(spaces))
            .route(ROUTES[1].0, get(space_pages))
            .route(ROUTES[2].0, get(page))
            .route(ROUTES[3].0, get(page_attachments))
            .route(ROUTES[4].0, get(restriction))
            .route(ROUTES[5].0, get(download))
            .route(ROUTES[6].0, get(projects))
            .route(ROUTES[7].0, get(search))
            .route(ROUTES[8].0, get(issue))
            .route(ROUTES[9].0, get(comments))
            .route_layer(axum::middleware::from_fn_with_state(shared.clone(), gate))
            .fallback(unrouted)
            .with_state(shared.clone());
        Self {
            shared,
            serving: Loopback::bind().await.serve(router),
        }
    }

    /// The `site_url` a connector is given.
    pub fn site_url(&self) -> String {
        self.serving.host.clone()
    }

    pub fn add_space(&self, key: &str, name: &str) -> String {
        let mut s = self.shared.lock().unwrap();
        let id = s.id();
        s.spaces.push((id.clone(), key.to_owned(), name.to_owned()));
        id
    }

    pub fn add_page(&self, space: &str, parent: Option<&str>, title: &str, body: &str) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, now) = (s.id(), s.tick());
        s.pages.insert(
            id.clone(),
            PageRec {
                space: space.to_owned(),
                parent: parent.map(str::to_owned),
                title: title.to_owned(),
                body: body.to_owned(),
                version: 1,
                edited: format!("{}Z", &at(now).0[..23]),
                trashed: false,
                users: Vec::new(),
                groups: Vec::new(),
            },
        );
        id
    }

    pub fn edit_page(&self, id: &str, body: &str) {
        let mut s = self.shared.lock().unwrap();
        let now = s.tick();
        let p = s.pages.get_mut(id).unwrap();
        p.body = body.to_owned();
        p.version += 1;
        p.edited = format!("{}Z", &at(now).0[..23]);
    }

    pub fn trash_page(&self, id: &str) {
        self.shared
            .lock()
            .unwrap()
            .pages
            .get_mut(id)
            .unwrap()
            .trashed = true;
    }

    pub fn restrict(&self, id: &str, users: &[Option<&str>], groups: &[&str]) {
        let mut s = self.shared.lock().unwrap();
        let p = s.pages.get_mut(id).unwrap();
        p.users = users.iter().map(|u| u.map(str::to_owned)).collect();
        p.groups = groups.iter().map(|g| (*g).to_owned()).collect();
    }

    pub fn attach(&self, page: &str, title: &str, media_type: &str, bytes: &[u8]) {
        let mut s = self.shared.lock().unwrap();
        let id = format!("att{}", s.id());
        s.attachments.insert(
            id,
            AttachmentRec {
                page: page.to_owned(),
                title: title.to_owned(),
                media_type: media_type.to_owned(),
                bytes: bytes.to_vec(),
            },
        );
    }

    pub fn add_project(&self, key: &str, name: &str) {
        let mut s = self.shared.lock().unwrap();
        let id = s.id();
        s.projects.push((id, key.to_owned(), name.to_owned()));
    }

    /// Adds an issue: (summary, description, status, priority, type, assignee, labels).
    #[allow(clippy::too_many_arguments)]
    pub fn add_issue(
        &self,
        project: &str,
        summary: &str,
        description: &str,
        status: &str,
        priority: &str,
        issue_type: &str,
        assignee: &str,
        labels: &[&str],
    ) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, now) = (s.id(), s.tick());
        let n = s.issues.values().filter(|i| i.project == project).count() + 1;
        s.issues.insert(
            id.clone(),
            IssueRec {
                project: project.to_owned(),
                key: format!("{project}-{n}"),
                summary: summary.to_owned(),
                description: description.to_owned(),
                status: status.to_owned(),
                priority: priority.to_owned(),
                issue_type: issue_type.to_owned(),
                assignee: assignee.to_owned(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                updated: now,
                comments: Vec::new(),
            },
        );
        id
    }

    pub fn comment(&self, issue: &str, who: &str, text: &str) {
        let mut s = self.shared.lock().unwrap();
        let now = s.tick();
        let i = s.issues.get_mut(issue).unwrap();
        i.comments.push((who.to_owned(), text.to_owned(), now));
        i.updated = now;
    }

    pub fn set_status(&self, issue: &str, status: &str) {
        let mut s = self.shared.lock().unwrap();
        let now = s.tick();
        let i = s.issues.get_mut(issue).unwrap();
        i.status = status.to_owned();
        i.updated = now;
    }

    pub fn delete_issue(&self, issue: &str) {
        self.shared.lock().unwrap().issues.remove(issue);
    }

    pub fn rate_limit(&self, count: usize, retry_after: u64) {
        self.shared.lock().unwrap().limited.set(count, retry_after);
    }

    /// Accepts, besides its e-mail and API token, the bearer access tokens the authorization
    /// server whose introspection endpoint is `endpoint` holds active (checked with `client_id`,
    /// `secret`), as a Data Center site takes OAuth 2.0 tokens.
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        self.shared.lock().unwrap().introspection = Some(crate::serve::Introspection::new(
            endpoint, client_id, secret,
        ));
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    pub fn set_logging(&self, on: bool) {
        self.shared.lock().unwrap().log.set_on(on);
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.all()
    }
}

/// Standard base64 with padding (HTTP Basic).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Where `make setup-test` puts jira.js, confluence.js and zod.
fn cache() -> std::path::PathBuf {
    let dir = crate::cache_dir().join("atlassian-api");
    assert!(
        dir.join("jira.js/dist/cloud/api").is_dir()
            && dir.join("confluence.js/dist/v2/api").is_dir()
            && dir.join("node_modules/zod").is_dir()
            && crate::typescript::tsc().is_file(),
        "Atlassian's API types (jira.js, confluence.js, zod) or the TypeScript compiler are not in {}: run `make setup-test`",
        dir.display()
    );
    dir
}

/// The clients' endpoint table: by function name, its method, path template, query parameters
/// (wire name → parameter name), the module and name of its answer's schema, and its
/// parameters' type and module.
fn endpoints() -> &'static Value {
    static ENDPOINTS: OnceLock<Value> = OnceLock::new();
    ENDPOINTS.get_or_init(|| {
        let script = r#"
const fs = require('fs'), path = require('path'); const out = {};
for (const dir of process.argv.slice(1)) for (const file of fs.readdirSync(dir)) {
  if (!file.endsWith('.js')) continue;
  const js = fs.readFileSync(path.join(dir, file), 'utf8');
  const dts = fs.existsSync(path.join(dir, file.replace(/\.js$/, '.d.ts'))) ? fs.readFileSync(path.join(dir, file.replace(/\.js$/, '.d.ts')), 'utf8') : '';
  const imports = {}; for (const m of js.matchAll(/import \{ (\w+) \} from '([^']+)'/g)) imports[m[1]] = path.resolve(dir, m[2]);
  const ptypes = {}; for (const m of dts.matchAll(/import type \{ (\w+) \} from '([^']+)'/g)) ptypes[m[1]] = path.resolve(dir, m[2]);
  for (const m of js.matchAll(/export async function (\w+)\(client, parameters\) \{\s*const config = \{([\s\S]*?)\n    \};/g)) {
    const [, name, body] = m;
    const url = (body.match(/url: [`'](.*?)[`'],/) || [])[1]; const method = (body.match(/method: '(\w+)'/) || [])[1];
    if (!url) continue;
    const query = {}; const sp = body.match(/searchParams: \{([\s\S]*?)\n        \}/);
    if (sp) for (const q of sp[1].matchAll(/'?([\w-]+)'?: parameters\??\.(\w+)/g)) query[q[1]] = q[2];
    const schema = (body.match(/schema: (\w+)/) || [])[1];
    const sig = dts.match(new RegExp('function ' + name + '\\(client: Client, parameters\\??: (\\w+)\\)'));
    out[name] = {method, path: url.replace(/\$\{parameters\.(\w+)\}/g, '{$1}'), query, schema: schema || null,
      schemaModule: schema ? imports[schema] : null, params: sig ? sig[1] : null, paramsModule: sig ? ptypes[sig[1]] : null};
  }
}
process.stdout.write(JSON.stringify(out));"#;
        let root = cache();
        node_json(
            script,
            &[
                root.join("confluence.js/dist/v2/api"),
                root.join("confluence.js/dist/v1/api"),
                root.join("jira.js/dist/cloud/api"),
            ],
            "Atlassian",
        )
    })
}

/// The TypeScript type of a schema's values: `z.input<typeof S>`, or the interface a schema
/// declared `z.ZodType<I>` (a recursive one) stands for.
fn schema_type(module: &str, schema: &str, alias: &str, imports: &mut String) -> String {
    let dts = std::fs::read_to_string(format!("{}.d.ts", module.trim_end_matches(".js")))
        .unwrap_or_default();
    let declared = format!("const {schema}: z.ZodType<");
    match dts.find(&declared) {
        Some(at) => {
            let rest = &dts[at + declared.len()..];
            let interface = &rest[..rest.find('>').unwrap()];
            writeln!(
                imports,
                "import type {{ {interface} as {alias} }} from {module:?};"
            )
            .unwrap();
            alias.to_owned()
        }
        None => {
            writeln!(
                imports,
                "import type {{ {schema} as {alias} }} from {module:?};"
            )
            .unwrap();
            format!("z.input<typeof {alias}>")
        }
    }
}

/// A query value as its parameter's type wants it: numbers and booleans as such, the
/// comma-separated lists Jira takes as arrays when the type is one.
fn query_value(module: &str, property: &str, value: &str) -> Value {
    let dts = std::fs::read_to_string(format!("{}.d.ts", module.trim_end_matches(".js")))
        .unwrap_or_default();
    let declared = |ty: &str| {
        dts.contains(&format!("{property}: z.{ty}"))
            || dts.contains(&format!("{property}: z.ZodOptional<z.{ty}"))
    };
    if declared("ZodNumber") {
        if let Ok(n) = value.parse::<u64>() {
            return Value::from(n);
        }
    }
    if declared("ZodBoolean") && (value == "true" || value == "false") {
        return Value::from(value == "true");
    }
    if declared("ZodArray") {
        return Value::from(value.split(',').map(Value::from).collect::<Vec<_>>());
    }
    Value::from(value)
}

/// Each exchange's problems against the clients' endpoints and types (one list per exchange).
pub fn problems(exchanges: &[Exchange]) -> Vec<Vec<String>> {
    let root = cache();
    let endpoints = endpoints();
    let mut problems = vec![Vec::new(); exchanges.len()];
    let mut ts = Checks::new(format!(
        "import type {{ z }} from {:?};\n",
        root.join("node_modules/zod").display().to_string()
    ));
    let mut links: Vec<String> = Vec::new();
    for (i, exchange) in exchanges.iter().enumerate() {
        if let Some(answer) = &exchange.body {
            for result in answer
                .get("results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(link) = result.get("downloadLink").and_then(Value::as_str) {
                    links.push(link.split('?').next().unwrap().to_owned());
                }
            }
        }
        let Some((_, name)) = ROUTES.iter().find(|(r, _)| *r == exchange.route) else {
            problems[i].push("the clients describe no such route".into());
            continue;
        };
        if name.is_empty() {
            // A download link: one an earlier answer gave.
            let path = format!(
                "/download/attachments/{}/{}",
                exchange.params[0].1, exchange.params[1].1
            );
            if !links.contains(&path) {
                problems[i].push(format!("{path} is no downloadLink Confluence gave"));
            }
            continue;
        }
        let endpoint = &endpoints[*name];
        if endpoint["path"] != *exchange.route || endpoint["method"] != exchange.method.as_str() {
            problems[i].push(format!(
                "`{name}` is {} {}",
                endpoint["method"], endpoint["path"]
            ));
        }
        let params_module = endpoint["paramsModule"].as_str().unwrap_or_default();
        let mut request = serde_json::Map::new();
        for (key, value) in &exchange.params {
            request.insert(key.clone(), query_value(params_module, key, value));
        }
        for (key, value) in &exchange.query {
            match endpoint["query"][key].as_str() {
                Some(property) => {
                    request.insert(
                        property.to_owned(),
                        query_value(params_module, property, value),
                    );
                }
                None => problems[i].push(format!("query parameter `{key}` is not `{name}`'s")),
            }
        }
        let mut block = format!(
            "// {i}: {} {} -> {}\n",
            exchange.method, exchange.route, exchange.status
        );
        if let Some(params) = endpoint["params"].as_str() {
            writeln!(
                ts.head,
                "import type {{ {params} as P{i} }} from {params_module:?};"
            )
            .unwrap();
            writeln!(
                block,
                "export const request_{i}: P{i} = {};",
                Value::Object(request)
            )
            .unwrap();
        }
        match (
            &exchange.body,
            exchange.status,
            endpoint["schemaModule"].as_str(),
        ) {
            (Some(answer), 200, Some(module)) => {
                let schema = endpoint["schema"].as_str().unwrap();
                let ty = schema_type(module, schema, &format!("A{i}"), &mut ts.head);
                writeln!(block, "export const answer_{i}: {ty} = {answer};").unwrap();
            }
            (None, 200, _) => problems[i].push("no body".into()),
            _ => {}
        }
        ts.push(i, &block);
    }
    ts.compile(
        "exchanges.ts",
        &["--moduleResolution", "node10"],
        &mut problems,
    );
    problems
}

/// Checks each exchange against the clients' endpoints and types; panics with every problem.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let found = problems(exchanges);
    let mut report = Vec::new();
    for (exchange, problems) in exchanges.iter().zip(found) {
        let at = format!(
            "{} {} -> {}",
            exchange.method, exchange.route, exchange.status
        );
        report.extend(problems.into_iter().map(|p| format!("{at}: {p}")));
    }
    assert_no_problems(
        &report,
        "the fake (or a connector) strays from Atlassian's published API",
    );
}

/// The check has teeth: a wrong type in an answer, a missing required member, an unknown query
/// parameter, a route the clients lack and a download link no answer gave are each caught.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_atlassian_fake_answers_only_what_the_published_types_allow() {
        let fake = AtlassianFake::start("a@example.com", "tok", 2).await;
        let space = fake.add_space("ENG", "Engineering");
        let home = fake.add_page(&space, None, "Home", "<p>Hi</p>");
        fake.add_page(&space, Some(&home), "Child", "<p>There</p>");
        fake.attach(&home, "notes.txt", "text/plain", b"notes");
        fake.restrict(&home, &[Some("ana@example.com")], &["sre"]);
        fake.add_project("OPS", "Operations");
        let issue = fake.add_issue(
            "OPS",
            "Disk full",
            "The disk is full.",
            "To Do",
            "High",
            "Bug",
            "Ana Lima",
            &["infra"],
        );
        fake.comment(&issue, "Cy", "Cleaned up.");
        let client = reqwest::Client::new();
        let site = fake.site_url();
        let get = |path: String| {
            let request = client
                .get(format!("{site}{path}"))
                .basic_auth("a@example.com", Some("tok"));
            async move { request.send().await.unwrap() }
        };
        get("/wiki/api/v2/spaces?limit=50".into()).await;
        get(format!("/wiki/api/v2/spaces/{space}/pages?limit=1")).await;
        get(format!("/wiki/api/v2/pages/{home}?body-format=storage")).await;
        get(format!("/wiki/api/v2/pages/{home}/attachments?limit=50")).await;
        get(format!(
            "/wiki/download/attachments/{home}/notes.txt?version=1&api=v2"
        ))
        .await;
        get(format!(
            "/wiki/rest/api/content/{home}/restriction/byOperation/read?limit=200"
        ))
        .await;
        get("/rest/api/3/project/search?startAt=0&maxResults=50".into()).await;
        get("/rest/api/3/search/jql?jql=project+%3D+%22OPS%22+ORDER+BY+updated+ASC&maxResults=50&fields=summary,status".into()).await;
        get(format!(
            "/rest/api/3/issue/{issue}?fields=summary,description"
        ))
        .await;
        get(format!(
            "/rest/api/3/issue/{issue}/comment?startAt=0&maxResults=50&orderBy=created"
        ))
        .await;
        let exchanges = fake.exchanges();
        assert_eq!(exchanges.len(), 10);
        assert!(exchanges.iter().all(|e| e.status == 200), "{exchanges:#?}");
        let found = problems(&exchanges);
        assert!(found.iter().all(Vec::is_empty), "{found:#?}");

        let mut wrong_type = exchanges[1].clone();
        wrong_type.body.as_mut().unwrap()["results"][0]["title"] = json!(5);
        let mut missing = exchanges[5].clone();
        missing
            .body
            .as_mut()
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove("_links");
        let mut query = exchanges[6].clone();
        query.query.push(("offset".into(), "2".into()));
        let mut route = exchanges[6].clone();
        route.route = "/rest/api/2/project".into();
        let mut link = exchanges[4].clone();
        link.params[1].1 = "other.txt".into();
        let strays = [wrong_type, missing, query, route, link];
        let mut all = exchanges.clone();
        all.extend(strays.iter().cloned());
        let found = problems(&all);
        for (stray, problems) in strays.iter().zip(&found[exchanges.len()..]) {
            assert!(!problems.is_empty(), "{stray:#?} passed");
        }
    }
}
