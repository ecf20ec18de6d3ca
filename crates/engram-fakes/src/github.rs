//! A stateful fake of the part of GitHub's REST API the github connector reads, on loopback and
//! under `/api/v3` as GitHub Enterprise Server serves it: repositories, their files (trees and
//! blobs, a tree truncated on demand), issues and pull requests with comments (`since`, sorting,
//! pages with `Link` headers, `ETag` and `304`), tokens (personal and installation; revocable),
//! and rate limiting (`403` with GitHub's headers and message, `GET /rate_limit`).
//!
//! It is a test double of GitHub, so it is held to GitHub's own description of its API: every
//! exchange is logged, and [`assert_conforms`] checks each against the OpenAPI description
//! `@octokit/openapi` ships (`make setup-test` installs it): the route and method are
//! described, each query parameter is documented and its value fits, and each JSON answer
//! validates against the schema documented for its status.
#![allow(clippy::unwrap_used)] // test code

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Router;
use serde_json::{json, Map, Value};

use crate::serve::{
    assert_no_problems, clock_time, json_reply, query_pairs, read_answer, Loopback, Serving,
};

/// Where the API lives on the fake's host (as on GitHub Enterprise Server).
const PREFIX: &str = "/api/v3";
const DOCS: &str = "https://docs.github.com/rest";
/// When a rate limit the fake imposes resets (Unix seconds).
const RATE_RESET: i64 = 1_893_456_000;

/// One request and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    /// The OpenAPI path template (`/repos/{owner}/{repo}`); `UNROUTED <path>` for a request no
    /// route took.
    pub route: String,
    pub query: Vec<(String, String)>,
    pub status: u16,
    /// The answer's JSON; `None` when it had no body.
    pub body: Option<Value>,
}

struct Comment {
    id: u64,
    author: String,
    body: String,
    created_at: String,
    updated_at: String,
}

struct Issue {
    id: u64,
    number: u64,
    title: String,
    body: String,
    author: String,
    labels: Vec<String>,
    pull_request: bool,
    state: String,
    created_at: String,
    updated_at: String,
    comments: Vec<Comment>,
}

struct Repo {
    id: u64,
    owner: String,
    name: String,
    private: bool,
    default_branch: String,
    files: BTreeMap<String, Vec<u8>>,
    /// Every blob a file ever held, by its id (blobs outlive the files that held them, as in
    /// Git).
    blobs: HashMap<String, Vec<u8>>,
    issues: Vec<Issue>,
    /// Who has access (logins); `None`: the token may not list them (it lacks push access).
    collaborators: Option<Vec<String>>,
    created_at: String,
    pushed_at: String,
}

#[derive(Default)]
struct Shared {
    /// The personal token, and an app installation token (`ghs_…`), the fake accepts.
    token: String,
    installation_token: String,
    rate_limited: bool,
    truncate_trees: bool,
    repos: BTreeMap<String, Repo>,
    /// Seconds since 2026-03-01T00:00:00Z: each change moves it a minute on.
    clock: u64,
    next_id: u64,
    log: crate::serve::Log<Exchange>,
    not_modified: usize,
    /// `http://127.0.0.1:PORT`.
    host: String,
    /// Where other bearer tokens are checked (an authorization server's token introspection,
    /// RFC 7662), with the resource server's client id and secret: OAuth access tokens.
    introspection: Option<crate::serve::Introspection>,
}

type SharedState = Arc<Mutex<Shared>>;

impl Shared {
    fn tick(&mut self) -> String {
        self.clock += 60;
        format!("{}Z", clock_time(self.clock))
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        1000 + self.next_id
    }

    fn api(&self) -> String {
        format!("{}{PREFIX}", self.host)
    }
}

/// A stand-in for an object id: 40 hex digits of a hash of `parts`.
fn hex40(parts: &[&[u8]]) -> String {
    let mut out = String::new();
    for seed in 0..3_u8 {
        let mut hasher = DefaultHasher::new();
        seed.hash(&mut hasher);
        for part in parts {
            part.hash(&mut hasher);
        }
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out.truncate(40);
    out
}

fn blob_sha(bytes: &[u8]) -> String {
    hex40(&[b"blob", bytes])
}

/// Standard base64 with a line break every 60 characters, as GitHub sends blobs.
fn base64_lines(bytes: &[u8]) -> String {
    use base64::Engine as _;
    let plain = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = String::new();
    for line in plain.as_bytes().chunks(60) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out
}

/// A tree node: a file or a folder.
#[derive(Clone)]
struct Node {
    tree: bool,
    sha: String,
    size: usize,
}

/// Every folder of a repository (`""` is the root): its members by name.
fn folders(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, BTreeMap<String, Node>> {
    let mut folders: BTreeMap<String, BTreeMap<String, Node>> = BTreeMap::new();
    folders.entry(String::new()).or_default();
    for (path, bytes) in files {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let node = Node {
            tree: false,
            sha: blob_sha(bytes),
            size: bytes.len(),
        };
        folders
            .entry(dir.to_owned())
            .or_default()
            .insert(name.to_owned(), node);
        let mut ancestor = dir;
        while let Some((parent, _)) = ancestor.rsplit_once('/') {
            folders.entry(parent.to_owned()).or_default();
            ancestor = parent;
        }
    }
    // Deepest first, so each folder's id is known before its parent's.
    let mut order: Vec<String> = folders.keys().filter(|d| !d.is_empty()).cloned().collect();
    order.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for dir in order {
        let sha = folder_sha(&folders[&dir]);
        let (parent, name) = dir.rsplit_once('/').unwrap_or(("", &dir));
        folders.get_mut(parent).unwrap().insert(
            name.to_owned(),
            Node {
                tree: true,
                sha,
                size: 0,
            },
        );
    }
    folders
}

fn folder_sha(members: &BTreeMap<String, Node>) -> String {
    let listing: String = members
        .iter()
        .map(|(name, node)| format!("{name} {}\n", node.sha))
        .collect();
    hex40(&[b"tree", listing.as_bytes()])
}

fn user(api: &str, host: &str, login: &str) -> Value {
    let id = login.bytes().map(u64::from).sum::<u64>();
    json!({
        "login": login, "id": id, "node_id": format!("U_{id}"),
        "avatar_url": format!("{host}/avatars/{login}"), "gravatar_id": "",
        "url": format!("{api}/users/{login}"), "html_url": format!("{host}/{login}"),
        "followers_url": format!("{api}/users/{login}/followers"),
        "following_url": format!("{api}/users/{login}/following{{/other_user}}"),
        "gists_url": format!("{api}/users/{login}/gists{{/gist_id}}"),
        "starred_url": format!("{api}/users/{login}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/users/{login}/subscriptions"),
        "organizations_url": format!("{api}/users/{login}/orgs"),
        "repos_url": format!("{api}/users/{login}/repos"),
        "events_url": format!("{api}/users/{login}/events{{/privacy}}"),
        "received_events_url": format!("{api}/users/{login}/received_events"),
        "type": "User", "user_view_type": "public", "site_admin": false
    })
}

/// A repository as `/user/repos` lists it (`full`: as `GET /repos/{owner}/{repo}` answers).
fn repository(shared: &Shared, repo: &Repo, full: bool) -> Value {
    let (api, host) = (shared.api(), shared.host.as_str());
    let full_name = format!("{}/{}", repo.owner, repo.name);
    let url = format!("{api}/repos/{full_name}");
    let html = format!("{host}/{full_name}");
    let open = repo.issues.iter().filter(|i| i.state == "open").count();
    let mut value = json!({
        "id": repo.id, "node_id": format!("R_{}", repo.id), "name": repo.name,
        "full_name": full_name, "owner": user(&api, host, &repo.owner), "private": repo.private,
        "html_url": html, "description": "The team handbook", "fork": false, "url": url,
        "git_url": format!("git://127.0.0.1/{full_name}.git"),
        "ssh_url": format!("git@127.0.0.1:{full_name}.git"),
        "clone_url": format!("{html}.git"), "mirror_url": null, "svn_url": html,
    });
    let settings = json!({
        "homepage": null, "language": "Markdown", "forks_count": 0,
        "stargazers_count": 3, "watchers_count": 3, "size": 42,
        "default_branch": repo.default_branch, "open_issues_count": open, "is_template": false,
        "topics": ["handbook"], "has_issues": true, "has_projects": false, "has_wiki": false,
        "has_pages": false, "has_downloads": true, "archived": false, "disabled": false,
        "visibility": if repo.private { "private" } else { "public" },
        "pushed_at": repo.pushed_at, "created_at": repo.created_at, "updated_at": repo.pushed_at,
        "permissions": {"admin": false, "maintain": false, "push": false, "triage": true, "pull": true},
        "allow_forking": true, "forks": 0, "open_issues": open, "watchers": 3, "license": null
    });
    for (key, v) in settings.as_object().unwrap() {
        value[key] = v.clone();
    }
    // The addresses of the repository's parts (URI templates where GitHub gives them).
    for (key, suffix) in [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("hooks_url", "/hooks"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
    ] {
        value[key] = json!(format!("{url}{suffix}"));
    }
    if full {
        let extra = json!({"has_discussions": false, "network_count": 0, "subscribers_count": 2});
        for (key, v) in extra.as_object().unwrap() {
            value[key] = v.clone();
        }
    } else {
        value["has_discussions"] = json!(false);
    }
    value
}

fn label(api: &str, full_name: &str, name: &str) -> Value {
    let id = name.bytes().map(u64::from).sum::<u64>();
    json!({"id": id, "node_id": format!("LA_{id}"), "url": format!("{api}/repos/{full_name}/labels/{name}"),
           "name": name, "description": null, "color": "d73a4a", "default": false})
}

fn issue(shared: &Shared, repo: &Repo, issue: &Issue) -> Value {
    let (api, host) = (shared.api(), shared.host.as_str());
    let full_name = format!("{}/{}", repo.owner, repo.name);
    let url = format!("{api}/repos/{full_name}/issues/{}", issue.number);
    let kind = if issue.pull_request { "pull" } else { "issues" };
    let html = format!("{host}/{full_name}/{kind}/{}", issue.number);
    let mut value = json!({
        "id": issue.id, "node_id": format!("I_{}", issue.id), "url": url,
        "repository_url": format!("{api}/repos/{full_name}"),
        "labels_url": format!("{url}/labels{{/name}}"), "comments_url": format!("{url}/comments"),
        "events_url": format!("{url}/events"), "html_url": html, "number": issue.number,
        "state": issue.state, "state_reason": null, "title": issue.title, "body": issue.body,
        "user": user(&api, host, &issue.author),
        "labels": issue.labels.iter().map(|l| label(&api, &full_name, l)).collect::<Vec<_>>(),
        "assignee": null, "assignees": [], "milestone": null, "locked": false,
        "active_lock_reason": null, "comments": issue.comments.len(),
        "closed_at": null, "created_at": issue.created_at, "updated_at": issue.updated_at,
        "author_association": "MEMBER"
    });
    if issue.pull_request {
        let pull = format!("{api}/repos/{full_name}/pulls/{}", issue.number);
        value["pull_request"] = json!({"url": pull, "html_url": html, "diff_url": format!("{html}.diff"),
                                       "patch_url": format!("{html}.patch"), "merged_at": null});
        value["draft"] = json!(false);
    }
    value
}

fn comment(shared: &Shared, repo: &Repo, issue: &Issue, comment: &Comment) -> Value {
    let (api, host) = (shared.api(), shared.host.as_str());
    let full_name = format!("{}/{}", repo.owner, repo.name);
    json!({
        "id": comment.id, "node_id": format!("IC_{}", comment.id),
        "url": format!("{api}/repos/{full_name}/issues/comments/{}", comment.id),
        "html_url": format!("{host}/{full_name}/issues/{}#issuecomment-{}", issue.number, comment.id),
        "body": comment.body, "user": user(&api, host, &comment.author),
        "created_at": comment.created_at, "updated_at": comment.updated_at,
        "issue_url": format!("{api}/repos/{full_name}/issues/{}", issue.number),
        "author_association": "MEMBER"
    })
}

fn error(status: StatusCode, message: &str) -> Response {
    json_reply(
        status,
        &json!({"message": message, "documentation_url": DOCS, "status": status.as_u16().to_string()}),
    )
}

/// One page of `items` as `per_page` and `page` ask, with GitHub's `Link` header.
fn paginate(items: Vec<Value>, query: &HashMap<String, String>, url: &str) -> (Vec<Value>, String) {
    let per_page = query
        .get("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(30_usize)
        .clamp(1, 100);
    let page = query
        .get("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1_usize)
        .max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let link = if page < last {
        format!(
            "<{url}?per_page={per_page}&page={}>; rel=\"next\", <{url}?per_page={per_page}&page={last}>; rel=\"last\"",
            page + 1
        )
    } else {
        String::new()
    };
    let items = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    (items, link)
}

fn page_reply(items: Vec<Value>, link: &str) -> Response {
    let mut response = json_reply(StatusCode::OK, &Value::Array(items));
    if !link.is_empty() {
        response.headers_mut().insert("link", link.parse().unwrap());
    }
    response
}

async fn user_repos(
    State(shared): State<SharedState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let shared = shared.lock().unwrap();
    if bearer(&headers) == Some(shared.installation_token.as_str()) {
        return error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        );
    }
    let repos = shared
        .repos
        .values()
        .map(|r| repository(&shared, r, false))
        .collect();
    let (items, link) = paginate(repos, &query, &format!("{}/user/repos", shared.api()));
    page_reply(items, &link)
}

async fn installation_repos(
    State(shared): State<SharedState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let shared = shared.lock().unwrap();
    if bearer(&headers) != Some(shared.installation_token.as_str()) {
        return error(
            StatusCode::FORBIDDEN,
            "This endpoint requires an installation access token",
        );
    }
    let repos: Vec<Value> = shared
        .repos
        .values()
        .map(|r| repository(&shared, r, false))
        .collect();
    let total = repos.len();
    let url = format!("{}/installation/repositories", shared.api());
    let (items, link) = paginate(repos, &query, &url);
    let mut response = json_reply(
        StatusCode::OK,
        &json!({"total_count": total, "repositories": items}),
    );
    if !link.is_empty() {
        response.headers_mut().insert("link", link.parse().unwrap());
    }
    response
}

async fn get_repo(
    State(shared): State<SharedState>,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    let shared = shared.lock().unwrap();
    match shared.repos.get(&format!("{owner}/{name}")) {
        Some(repo) => json_reply(StatusCode::OK, &repository(&shared, repo, true)),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn get_tree(
    State(shared): State<SharedState>,
    Path((owner, name, tree_sha)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let shared = shared.lock().unwrap();
    let Some(repo) = shared.repos.get(&format!("{owner}/{name}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    if repo.files.is_empty() {
        return error(StatusCode::CONFLICT, "Git Repository is empty.");
    }
    let folders = folders(&repo.files);
    let root_sha = folder_sha(&folders[""]);
    let folder = if tree_sha == repo.default_branch || tree_sha == root_sha {
        String::new()
    } else {
        let Some(dir) = folders
            .iter()
            .find(|(_, members)| folder_sha(members) == tree_sha)
            .map(|(dir, _)| dir.clone())
        else {
            return error(StatusCode::NOT_FOUND, "Not Found");
        };
        dir
    };
    let recursive = query.contains_key("recursive");
    let truncated = recursive && shared.truncate_trees;
    let url = format!("{}/repos/{owner}/{name}/git", shared.api());
    let mut items = Vec::new();
    let mut stack = vec![(folder.clone(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let mut below = Vec::new();
        for (member, node) in &folders[&dir] {
            let path = format!("{prefix}{member}");
            let mut item = json!({"path": path, "mode": if node.tree { "040000" } else { "100644" },
                                  "type": if node.tree { "tree" } else { "blob" }, "sha": node.sha,
                                  "url": format!("{url}/{}/{}", if node.tree { "trees" } else { "blobs" }, node.sha)});
            if !node.tree {
                item["size"] = json!(node.size);
            }
            items.push(item);
            if node.tree && recursive && !truncated {
                let child = if dir.is_empty() {
                    member.clone()
                } else {
                    format!("{dir}/{member}")
                };
                below.push((child, format!("{path}/")));
            }
        }
        stack.extend(below.into_iter().rev());
    }
    let sha = folder_sha(&folders[&folder]);
    json_reply(
        StatusCode::OK,
        &json!({"sha": sha, "url": format!("{url}/trees/{sha}"), "tree": items, "truncated": truncated}),
    )
}

async fn get_blob(
    State(shared): State<SharedState>,
    Path((owner, name, file_sha)): Path<(String, String, String)>,
) -> Response {
    let shared = shared.lock().unwrap();
    let Some(repo) = shared.repos.get(&format!("{owner}/{name}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let Some(bytes) = repo.blobs.get(&file_sha) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    json_reply(
        StatusCode::OK,
        &json!({"sha": file_sha, "node_id": format!("B_{file_sha}"), "size": bytes.len(),
                "url": format!("{}/repos/{owner}/{name}/git/blobs/{file_sha}", shared.api()),
                "content": base64_lines(bytes), "encoding": "base64"}),
    )
}

async fn list_issues(
    State(shared): State<SharedState>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut shared = shared.lock().unwrap();
    let Some(repo) = shared.repos.get(&format!("{owner}/{name}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let state = query.get("state").map_or("open", String::as_str);
    let since = query.get("since").cloned().unwrap_or_default();
    let mut chosen: Vec<&Issue> = repo
        .issues
        .iter()
        .filter(|i| state == "all" || i.state == state)
        .filter(|i| i.updated_at >= since)
        .collect();
    match query.get("sort").map_or("created", String::as_str) {
        "updated" => {
            chosen.sort_by(|a, b| (&a.updated_at, a.number).cmp(&(&b.updated_at, b.number)))
        }
        "comments" => chosen.sort_by_key(|i| (i.comments.len(), i.number)),
        _ => chosen.sort_by(|a, b| (&a.created_at, a.number).cmp(&(&b.created_at, b.number))),
    }
    if query.get("direction").map_or("desc", String::as_str) == "desc" {
        chosen.reverse();
    }
    let all = chosen.iter().map(|i| issue(&shared, repo, i)).collect();
    let url = format!("{}/repos/{owner}/{name}/issues", shared.api());
    let (items, link) = paginate(all, &query, &url);
    let etag = format!(
        "W/\"{}\"",
        hex40(&[Value::from(items.clone()).to_string().as_bytes()])
    );
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        shared.not_modified += 1;
        return (StatusCode::NOT_MODIFIED, [("etag", etag)]).into_response();
    }
    let mut response = page_reply(items, &link);
    response.headers_mut().insert("etag", etag.parse().unwrap());
    response
}

async fn list_collaborators(
    State(shared): State<SharedState>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let shared = shared.lock().unwrap();
    let Some(repo) = shared.repos.get(&format!("{owner}/{name}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let Some(logins) = &repo.collaborators else {
        return error(
            StatusCode::FORBIDDEN,
            "Must have push access to view repository collaborators.",
        );
    };
    let (api, host) = (shared.api(), shared.host.clone());
    let all = logins
        .iter()
        .map(|login| {
            let mut person = user(&api, &host, login);
            let admin = *login == repo.owner;
            person["permissions"] = json!({
                "pull": true, "triage": true, "push": true, "maintain": admin, "admin": admin
            });
            person["role_name"] = Value::from(if admin { "admin" } else { "write" });
            person
        })
        .collect();
    let url = format!("{api}/repos/{owner}/{name}/collaborators");
    let (items, link) = paginate(all, &query, &url);
    page_reply(items, &link)
}

async fn get_issue(
    State(shared): State<SharedState>,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Response {
    let shared = shared.lock().unwrap();
    let found = shared
        .repos
        .get(&format!("{owner}/{name}"))
        .and_then(|r| r.issues.iter().find(|i| i.number == number).map(|i| (r, i)));
    match found {
        Some((repo, found)) => json_reply(StatusCode::OK, &issue(&shared, repo, found)),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn list_comments(
    State(shared): State<SharedState>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let shared = shared.lock().unwrap();
    let found = shared
        .repos
        .get(&format!("{owner}/{name}"))
        .and_then(|r| r.issues.iter().find(|i| i.number == number).map(|i| (r, i)));
    let Some((repo, found)) = found else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let since = query.get("since").cloned().unwrap_or_default();
    let all = found
        .comments
        .iter()
        .filter(|c| c.updated_at >= since)
        .map(|c| comment(&shared, repo, found, c))
        .collect();
    let url = format!(
        "{}/repos/{owner}/{name}/issues/{number}/comments",
        shared.api()
    );
    let (items, link) = paginate(all, &query, &url);
    page_reply(items, &link)
}

fn rate(remaining: i64) -> Value {
    json!({"limit": 5000, "remaining": remaining, "reset": RATE_RESET, "used": 5000 - remaining})
}

async fn rate_limit(State(shared): State<SharedState>) -> Response {
    let remaining = if shared.lock().unwrap().rate_limited {
        0
    } else {
        4990
    };
    json_reply(
        StatusCode::OK,
        &json!({"resources": {"core": rate(remaining), "search": rate(30), "graphql": rate(5000)},
                "rate": rate(remaining)}),
    )
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
}

/// Every request: the token checked and the rate limit applied, then the answer logged.
async fn gate(
    State(shared): State<SharedState>,
    matched: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let route = matched
        .as_str()
        .trim_start_matches(PREFIX)
        .replace("{*", "{");
    let (known, introspection) = {
        let s = shared.lock().unwrap();
        let token = bearer(request.headers());
        (
            token.is_some()
                && (token == Some(s.token.as_str())
                    || token == Some(s.installation_token.as_str())),
            s.introspection.clone(),
        )
    };
    let introspected = match (known, introspection, bearer(request.headers())) {
        (false, Some(introspection), Some(token)) => introspection.active(token).await,
        _ => false,
    };
    let early = {
        let s = shared.lock().unwrap();
        if !known && !introspected {
            Some(error(StatusCode::UNAUTHORIZED, "Bad credentials"))
        } else if s.rate_limited && route != "/rate_limit" {
            let mut limited = error(
                StatusCode::FORBIDDEN,
                "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
            );
            for (name, value) in [
                ("x-ratelimit-limit", "5000".to_owned()),
                ("x-ratelimit-remaining", "0".to_owned()),
                ("x-ratelimit-used", "5000".to_owned()),
                ("x-ratelimit-reset", RATE_RESET.to_string()),
                ("x-ratelimit-resource", "core".to_owned()),
            ] {
                limited.headers_mut().insert(name, value.parse().unwrap());
            }
            Some(limited)
        } else {
            None
        }
    };
    let method = request.method().to_string();
    let query = query_pairs(request.uri());
    let response = match early {
        Some(response) => response,
        None => next.run(request).await,
    };
    let (response, body) = read_answer(response).await;
    shared.lock().unwrap().log.push(Exchange {
        method,
        route,
        query,
        status: response.status().as_u16(),
        body,
    });
    response
}

/// A request no route takes: logged (a conformance failure) and answered like GitHub.
async fn unrouted(State(shared): State<SharedState>, request: Request) -> Response {
    shared.lock().unwrap().log.push(Exchange {
        method: request.method().to_string(),
        route: format!("UNROUTED {}", request.uri().path()),
        query: query_pairs(request.uri()),
        status: 404,
        body: None,
    });
    error(StatusCode::NOT_FOUND, "Not Found")
}

/// The routes the fake serves (axum's templates under [`PREFIX`]).
fn routes() -> Vec<(&'static str, MethodRouter<SharedState>)> {
    vec![
        ("/user/repos", get(user_repos)),
        ("/installation/repositories", get(installation_repos)),
        ("/repos/{owner}/{repo}", get(get_repo)),
        ("/repos/{owner}/{repo}/git/trees/{*tree_sha}", get(get_tree)),
        ("/repos/{owner}/{repo}/git/blobs/{file_sha}", get(get_blob)),
        ("/repos/{owner}/{repo}/issues", get(list_issues)),
        (
            "/repos/{owner}/{repo}/issues/{issue_number}",
            get(get_issue),
        ),
        (
            "/repos/{owner}/{repo}/issues/{issue_number}/comments",
            get(list_comments),
        ),
        (
            "/repos/{owner}/{repo}/collaborators",
            get(list_collaborators),
        ),
        ("/rate_limit", get(rate_limit)),
    ]
}

/// The fake, serving until dropped.
pub struct GitHubFake {
    shared: SharedState,
    _serving: Serving,
}

impl GitHubFake {
    /// Starts the fake; `token` is the personal access token it accepts (`ghs_installation` is
    /// its app installation token).
    pub async fn start(token: &str) -> Self {
        let loopback = Loopback::bind().await;
        let shared = Arc::new(Mutex::new(Shared {
            token: token.to_owned(),
            installation_token: "ghs_installation".to_owned(),
            host: loopback.host.clone(),
            ..Shared::default()
        }));
        let mut router = Router::new();
        for (route, handler) in routes() {
            router = router.route(&format!("{PREFIX}{route}"), handler);
        }
        let router = router
            .route_layer(axum::middleware::from_fn_with_state(shared.clone(), gate))
            .fallback(unrouted)
            .with_state(shared.clone());
        Self {
            shared,
            _serving: loopback.serve(router),
        }
    }

    /// Accepts, besides its own tokens, the access tokens the authorization server whose
    /// introspection endpoint is `endpoint` holds active (checked with `client_id`, `secret`).
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        self.shared.lock().unwrap().introspection = Some(crate::serve::Introspection::new(
            endpoint, client_id, secret,
        ));
    }

    /// The `api_url` a connector is given.
    pub fn api_url(&self) -> String {
        self.shared.lock().unwrap().api()
    }

    pub fn add_repo(&self, full_name: &str, private: bool) {
        let mut s = self.shared.lock().unwrap();
        let (owner, name) = full_name.split_once('/').unwrap();
        let (id, at) = (s.id(), s.tick());
        s.repos.insert(
            full_name.to_owned(),
            Repo {
                id,
                owner: owner.to_owned(),
                name: name.to_owned(),
                private,
                default_branch: "main".to_owned(),
                files: BTreeMap::new(),
                blobs: HashMap::new(),
                issues: Vec::new(),
                collaborators: Some(vec![owner.to_owned()]),
                created_at: at.clone(),
                pushed_at: at,
            },
        );
    }

    /// Who has access to `repo` (the owner alone at first); `None`: the token may not list
    /// them (`403`, as to a token without push access).
    pub fn set_collaborators(&self, repo: &str, logins: Option<&[&str]>) {
        let mut s = self.shared.lock().unwrap();
        s.repos.get_mut(repo).unwrap().collaborators =
            logins.map(|l| l.iter().map(|l| (*l).to_owned()).collect());
    }

    /// Commits `bytes` at `path` of the default branch.
    pub fn put_file(&self, repo: &str, path: &str, bytes: &[u8]) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let repo = s.repos.get_mut(repo).unwrap();
        repo.files.insert(path.to_owned(), bytes.to_vec());
        repo.blobs.insert(blob_sha(bytes), bytes.to_vec());
        repo.pushed_at = at;
    }

    pub fn remove_file(&self, repo: &str, path: &str) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let repo = s.repos.get_mut(repo).unwrap();
        assert!(repo.files.remove(path).is_some(), "{path}");
        repo.pushed_at = at;
    }

    /// Opens an issue (or a pull request); its number.
    pub fn open_issue(
        &self,
        repo: &str,
        title: &str,
        body: &str,
        author: &str,
        labels: &[&str],
        pull_request: bool,
    ) -> u64 {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let repo = s.repos.get_mut(repo).unwrap();
        let number = repo.issues.len() as u64 + 1;
        repo.issues.push(Issue {
            id,
            number,
            title: title.to_owned(),
            body: body.to_owned(),
            author: author.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            pull_request,
            state: "open".to_owned(),
            created_at: at.clone(),
            updated_at: at,
            comments: Vec::new(),
        });
        number
    }

    /// Comments on an issue (which moves its `updated_at`, as on GitHub).
    pub fn comment(&self, repo: &str, number: u64, author: &str, body: &str) {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let issue = s
            .repos
            .get_mut(repo)
            .unwrap()
            .issues
            .iter_mut()
            .find(|i| i.number == number)
            .unwrap();
        issue.comments.push(Comment {
            id,
            author: author.to_owned(),
            body: body.to_owned(),
            created_at: at.clone(),
            updated_at: at.clone(),
        });
        issue.updated_at = at;
    }

    pub fn set_rate_limited(&self, limited: bool) {
        self.shared.lock().unwrap().rate_limited = limited;
    }

    /// Recursive trees come back truncated (their top level only), as GitHub cuts large ones.
    pub fn set_truncated_trees(&self, truncated: bool) {
        self.shared.lock().unwrap().truncate_trees = truncated;
    }

    /// The blob id GitHub gives `bytes`.
    pub fn blob_sha(bytes: &[u8]) -> String {
        blob_sha(bytes)
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    pub fn set_logging(&self, on: bool) {
        self.shared.lock().unwrap().log.set_on(on);
    }

    /// Every exchange so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.all()
    }

    /// Requests answered `304 Not Modified` so far.
    pub fn not_modified(&self) -> usize {
        self.shared.lock().unwrap().not_modified
    }

    /// The OpenAPI templates of the routes the fake serves.
    pub fn routes() -> Vec<String> {
        routes()
            .into_iter()
            .map(|(route, _)| route.replace("{*", "{"))
            .collect()
    }
}

/// GitHub's REST API description, read once (`make setup-test` installs it).
fn description() -> &'static Value {
    static DESCRIPTION: OnceLock<Value> = OnceLock::new();
    DESCRIPTION.get_or_init(|| {
        let path = crate::cache_dir().join("github-openapi/api.github.com.json");
        let text = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "GitHub's OpenAPI description {} cannot be read ({e}): run `make setup-test`",
                path.display()
            )
        });
        serde_json::from_slice(&text).expect("the description is JSON")
    })
}

/// An OpenAPI 3.0 schema as JSON Schema (2020-12): `nullable` becomes a type union (or an
/// `anyOf` with null, and null joins an `enum`); extensions and examples go.
fn json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                if key.starts_with("x-")
                    || key == "example"
                    || key == "examples"
                    || key == "nullable"
                {
                    continue;
                }
                let converted = if key == "properties" || key == "patternProperties" {
                    // A map of names to schemas, not a schema.
                    Value::Object(
                        value
                            .as_object()
                            .map(|m| m.iter().map(|(k, v)| (k.clone(), json_schema(v))).collect())
                            .unwrap_or_default(),
                    )
                } else {
                    json_schema(value)
                };
                out.insert(key.clone(), converted);
            }
            if map.get("nullable") == Some(&Value::Bool(true)) {
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
                match out.get("type").cloned() {
                    Some(Value::String(t)) => {
                        out.insert("type".into(), json!([t, "null"]));
                    }
                    _ => return json!({"anyOf": [{"type": "null"}, Value::Object(out)]}),
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => schema.clone(),
    }
}

/// The component a `#/components/<kind>/<name>` reference names.
fn component(reference: &str) -> &'static Value {
    let pointer = reference.trim_start_matches('#');
    description()
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{reference} is not in the description"))
}

/// `value` itself, or what its `$ref` names.
fn resolved(value: &Value) -> &Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => component(reference),
        None => value,
    }
}

/// A schema ready to validate with: the schema, and every component schema it reaches, under
/// `components/schemas` so its references resolve.
fn standalone(schema: &Value) -> Value {
    let mut reached = BTreeSet::new();
    let mut todo = vec![schema.clone()];
    while let Some(next) = todo.pop() {
        let mut stack = vec![&next];
        let mut found = Vec::new();
        while let Some(value) = stack.pop() {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(reference)) = map.get("$ref") {
                        found.push(reference.clone());
                    }
                    stack.extend(map.values());
                }
                Value::Array(items) => stack.extend(items),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
            }
        }
        for reference in found {
            let name = reference
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{reference}: only schema references are expected"))
                .to_owned();
            if reached.insert(name) {
                todo.push(component(&reference).clone());
            }
        }
    }
    let schemas: Map<String, Value> = reached
        .into_iter()
        .map(|name| {
            let converted = json_schema(component(&format!("#/components/schemas/{name}")));
            (name, converted)
        })
        .collect();
    let mut root = json_schema(schema);
    let Value::Object(map) = &mut root else {
        panic!("a schema is an object")
    };
    map.insert("components".into(), json!({ "schemas": schemas }));
    root
}

/// Validates `instance` against a standalone schema with engram's own JSON Schema check (the
/// one credentials go through: jsonschema, draft 2020-12), so the suite needs no second
/// validator; the message names each failing place.
fn validate(schema: Value, instance: &Value) -> Result<(), String> {
    let info = engram_connectors::ProviderInfo {
        provider: "openapi",
        category: "",
        connector_type: "",
        rank: None,
        rbac_support: false,
        webhook_support: false,
        is_beta: false,
        indexed_object_types: &[],
        fields: Vec::new(),
        credential_schema: schema,
        setup_guide: "",
        interval: engram_connectors::IntervalBounds {
            min_s: 0,
            max_s: 0,
            default_s: 0,
        },
    };
    engram_connectors::check_credentials(&info, instance)
        .map_err(|e| e.replace("credentials", "the answer"))
}

/// The JSON schema GitHub documents for an operation's answer with `status`: its own, else
/// GitHub's basic error (which every error status may carry).
fn answer_schema(operation: &Value, status: u16) -> Option<Value> {
    let documented = operation
        .pointer(&format!("/responses/{status}"))
        .map(resolved);
    let schema = documented
        .and_then(|r| r.pointer("/content/application~1json/schema"))
        .cloned();
    match (status, schema) {
        (200..=299, Some(schema)) => Some(schema),
        (200..=299, None) => panic!("GitHub documents no JSON answer {status}"),
        (_, Some(schema)) => Some(schema),
        (_, None) => Some(json!({"$ref": "#/components/schemas/basic-error"})),
    }
}

/// Checks each exchange against GitHub's OpenAPI description: the route and method described,
/// each query parameter documented with a fitting value, each JSON answer valid against its
/// documented schema. Panics with every problem found.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let paths = description().get("paths").expect("paths");
    let mut problems = Vec::new();
    for exchange in exchanges {
        let at = format!(
            "{} {} -> {}",
            exchange.method, exchange.route, exchange.status
        );
        let Some(operation) = paths
            .get(&exchange.route)
            .and_then(|p| p.get(exchange.method.to_lowercase()))
        else {
            problems.push(format!("{at}: GitHub describes no such route and method"));
            continue;
        };
        let parameters: Vec<&Value> = operation
            .get("parameters")
            .and_then(Value::as_array)
            .into_iter()
            .chain(
                paths[&exchange.route]
                    .get("parameters")
                    .and_then(Value::as_array),
            )
            .flatten()
            .map(resolved)
            .collect();
        for (name, value) in &exchange.query {
            let Some(parameter) = parameters
                .iter()
                .find(|p| p["in"] == "query" && p["name"] == name.as_str())
            else {
                problems.push(format!("{at}: query parameter `{name}` is not documented"));
                continue;
            };
            let schema = parameter.get("schema").cloned().unwrap_or(json!({}));
            let typed = match schema["type"].as_str() {
                Some("integer") => value.parse::<i64>().map(Value::from).ok(),
                Some("boolean") => value.parse::<bool>().map(Value::from).ok(),
                _ => Some(Value::from(value.clone())),
            };
            let fits = typed
                .ok_or_else(|| "not of its type".to_owned())
                .and_then(|v| validate(standalone(&schema), &v));
            if let Err(e) = fits {
                problems.push(format!("{at}: `{name}={value}` does not fit: {e}"));
            }
        }
        match (&exchange.body, exchange.status) {
            (None, 304) => {}
            (None, _) => problems.push(format!("{at}: no body")),
            (Some(_), 304) => problems.push(format!("{at}: a 304 with a body")),
            (Some(body), status) => {
                if let Some(schema) = answer_schema(operation, status) {
                    if let Err(e) = validate(standalone(&schema), body) {
                        problems.push(format!("{at}: {e}"));
                    }
                }
            }
        }
    }
    assert_no_problems(&problems, "the fake strays from GitHub's description");
}

/// Every route the fake serves, each answer it can give (pages, `304`, errors, a truncated
/// tree, an installation token, rate limiting), checked against GitHub's description.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_github_fake_answers_only_what_githubs_openapi_description_allows() {
        let fake = GitHubFake::start("ghp_conformance").await;
        let repo = "octo-org/handbook";
        fake.add_repo(repo, true);
        fake.add_repo("octo-org/empty", false);
        fake.put_file(repo, "README.md", b"# Handbook\n");
        fake.put_file(repo, "docs/guide/intro.md", b"# Intro\n");
        let issue = fake.open_issue(repo, "Deploys stall", "At 90%.", "ana", &["bug"], false);
        fake.comment(repo, issue, "bo", "The cache was cold.");
        fake.open_issue(repo, "Raise the retry budget", "", "bo", &[], true);
        let client = reqwest::Client::new();
        let api = fake.api_url();
        let call = |path: String, token: &'static str, etag: Option<String>| {
            let mut request = client
                .get(format!("{api}{path}"))
                .header("authorization", format!("Bearer {token}"));
            if let Some(etag) = etag {
                request = request.header("if-none-match", etag);
            }
            async move { request.send().await.unwrap() }
        };
        let token = "ghp_conformance";
        call(
            "/user/repos?per_page=1&page=2&sort=full_name".into(),
            token,
            None,
        )
        .await;
        call("/user/repos".into(), "ghs_installation", None).await;
        call(
            "/installation/repositories?per_page=100&page=1".into(),
            "ghs_installation",
            None,
        )
        .await;
        call(format!("/repos/{repo}"), token, None).await;
        call("/repos/octo-org/missing".into(), token, None).await;
        let tree: Value = call(
            format!("/repos/{repo}/git/trees/main?recursive=1"),
            token,
            None,
        )
        .await
        .json()
        .await
        .unwrap();
        let docs = tree["tree"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["path"] == "docs")
            .unwrap()["sha"]
            .as_str()
            .unwrap()
            .to_owned();
        call(format!("/repos/{repo}/git/trees/{docs}"), token, None).await;
        call(
            "/repos/octo-org/empty/git/trees/main?recursive=1".into(),
            token,
            None,
        )
        .await;
        fake.set_truncated_trees(true);
        call(
            format!("/repos/{repo}/git/trees/main?recursive=1"),
            token,
            None,
        )
        .await;
        fake.set_truncated_trees(false);
        let sha = GitHubFake::blob_sha(b"# Handbook\n");
        call(format!("/repos/{repo}/git/blobs/{sha}"), token, None).await;
        let issues = format!(
        "/repos/{repo}/issues?state=all&sort=updated&direction=asc&since=2026-03-01T00:00:00Z&per_page=100&page=1"
    );
        let listed = call(issues.clone(), token, None).await;
        let etag = listed.headers()["etag"].to_str().unwrap().to_owned();
        assert_eq!(listed.status(), 200);
        let again = call(issues, token, Some(etag)).await;
        assert_eq!(again.status(), 304);
        call(format!("/repos/{repo}/issues/{issue}"), token, None).await;
        call(format!("/repos/{repo}/issues/9"), token, None).await;
        call(
            format!("/repos/{repo}/issues/{issue}/comments?per_page=100&page=1"),
            token,
            None,
        )
        .await;
        call("/rate_limit".into(), token, None).await;
        fake.set_collaborators(repo, Some(&["octo-org", "mona"]));
        call(
            format!("/repos/{repo}/collaborators?affiliation=all&per_page=1&page=2"),
            token,
            None,
        )
        .await;
        fake.set_collaborators(repo, None);
        assert_eq!(
            call(format!("/repos/{repo}/collaborators"), token, None)
                .await
                .status(),
            403
        );
        assert_eq!(
            call(format!("/repos/{repo}"), "ghp_wrong", None)
                .await
                .status(),
            401
        );
        fake.set_rate_limited(true);
        assert_eq!(
            call(format!("/repos/{repo}"), token, None).await.status(),
            403
        );
        call("/rate_limit".into(), token, None).await;
        fake.set_rate_limited(false);

        let exchanges = fake.exchanges();
        for route in GitHubFake::routes() {
            assert!(
                exchanges
                    .iter()
                    .any(|e| e.route == route && e.status == 200),
                "{route} was not exercised"
            );
        }
        let statuses: BTreeSet<u16> = exchanges.iter().map(|e| e.status).collect();
        assert_eq!(
            statuses,
            BTreeSet::from([200, 304, 401, 403, 404, 409]),
            "{exchanges:#?}"
        );
        assert_conforms(&exchanges);

        // The check has teeth: an undocumented parameter, a route GitHub lacks, a wrong shape, a
        // value out of its enum, a repository without a required field and a non-null value of the
        // wrong type are each caught.
        let answered = |route: &str| {
            exchanges
                .iter()
                .find(|e| e.route == route && e.status == 200)
                .unwrap()
                .clone()
        };
        let mut no_branch = answered("/user/repos");
        no_branch.body.as_mut().unwrap()[0]
            .as_object_mut()
            .unwrap()
            .remove("default_branch");
        let mut closed_at = answered("/repos/{owner}/{repo}/issues/{issue_number}");
        closed_at.body.as_mut().unwrap()["closed_at"] = json!(5);
        let strays = [
            no_branch,
            closed_at,
            Exchange {
                method: "GET".into(),
                route: "/repos/{owner}/{repo}/issues".into(),
                query: vec![("updated_since".into(), "x".into())],
                status: 200,
                body: Some(json!([])),
            },
            Exchange {
                method: "GET".into(),
                route: "/repos/{owner}/{repo}/files".into(),
                query: Vec::new(),
                status: 200,
                body: Some(json!([])),
            },
            Exchange {
                method: "GET".into(),
                route: "/repos/{owner}/{repo}/git/blobs/{file_sha}".into(),
                query: Vec::new(),
                status: 200,
                body: Some(json!({"sha": "x", "content": 1})),
            },
            Exchange {
                method: "GET".into(),
                route: "/repos/{owner}/{repo}/issues".into(),
                query: vec![("state".into(), "merged".into())],
                status: 200,
                body: Some(json!([])),
            },
        ];
        for stray in strays {
            let caught = std::panic::catch_unwind(|| assert_conforms(std::slice::from_ref(&stray)));
            assert!(caught.is_err(), "{stray:#?} passed");
        }
    }

    /// What a pass of `engram-connectors`' GitHub provider knows: nothing (it asks for nothing).
    struct NothingKnown;

    #[async_trait::async_trait]
    impl engram_connectors::Known for NothingKnown {
        async fn objects(
            &self,
            _: &[String],
        ) -> Result<HashMap<String, engram_connectors::KnownObject>, engram_connectors::ProviderError>
        {
            Ok(HashMap::new())
        }
    }

    /// A pass over a repository of more files than a page holds reads its tree once, not once a
    /// page; another connector's pass of the same tree reads it with its own token.
    #[tokio::test]
    async fn a_pass_over_a_large_tree_reads_it_once() {
        use engram_connectors::{Access, Position, Provider, ResourceRef};
        let fake = GitHubFake::start("ghp_tree").await;
        let repo = "octo-org/monorepo";
        fake.add_repo(repo, false);
        for n in 0..4_500 {
            fake.put_file(
                repo,
                &format!("src/m{}/f{n}.md", n % 30),
                format!("file {n}").as_bytes(),
            );
        }
        let access = |owner: &str| Access {
            credentials: json!({"token": "ghp_tree", "api_url": fake.api_url()})
                .as_object()
                .unwrap()
                .clone(),
            outbound: engram_outbound::Outbound::new(engram_outbound::AddressPolicy {
                allow_private: true,
            })
            .unwrap(),
            owner: owner.to_owned(),
            events_url: None,
        };
        let resource = ResourceRef {
            id: repo.to_owned(),
            resource_type: "repository".to_owned(),
            filters: json!({}),
            provider_metadata: json!({}),
        };
        let trees = || {
            fake.exchanges()
                .iter()
                .filter(|e| e.route.contains("/git/trees/"))
                .count()
        };
        let provider = engram_connectors::GitHubProvider::new();
        let pass = |access: Access, position: Position| {
            let (provider, resource) = (&provider, &resource);
            async move {
                let mut position = position;
                let mut paths = Vec::new();
                loop {
                    let page = provider
                        .list(&access, resource, &position, &NothingKnown)
                        .await
                        .unwrap();
                    assert!(page.complete_listing);
                    paths.extend(page.entries.into_iter().map(|e| e.native_id));
                    match page.next {
                        Some(next) => position.within = next,
                        None => return paths,
                    }
                }
            }
        };
        let first = pass(access("conn_a"), Position::default()).await;
        assert_eq!(first.len(), 4_500);
        let unique: std::collections::HashSet<_> = first.iter().collect();
        assert_eq!(unique.len(), 4_500, "no file listed twice");
        assert_eq!(trees(), 1, "three pages, one tree read");

        // A second pass reads it again (the first one's last page let it go); so does another
        // connector's pass.
        assert_eq!(pass(access("conn_a"), Position::default()).await, first);
        assert_eq!(trees(), 2);
        // Another connector's page in the middle of a pass reads the tree for itself.
        let start = Position::default();
        let page = provider
            .list(&access("conn_b"), &resource, &start, &NothingKnown)
            .await
            .unwrap();
        assert_eq!(trees(), 3);
        let within = Position {
            within: page.next.unwrap(),
            ..Position::default()
        };
        let rest = pass(access("conn_c"), within).await;
        assert_eq!(rest, first[2_000..]);
        assert_eq!(
            trees(),
            4,
            "a pass resumed by another reader reads the tree by its SHA"
        );
        assert!(fake
            .exchanges()
            .iter()
            .filter(|e| e.route.contains("/git/trees/"))
            .all(|e| e.status == 200));
    }
}
