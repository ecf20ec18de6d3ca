//! A stateful fake of the parts of Google's Drive API v3 and Gmail API v1 the `google_drive` and
//! `gmail` connectors read, on loopback: My Drive and shared drives, files (Google Docs exported,
//! other files downloaded with `alt=media`), folders, edits that move `modifiedTime` and
//! `version` and feed the changes API (`changes.getStartPageToken`, `changes.list` with its
//! `newStartPageToken`), trashing, sharing changes, files whose sharing the caller may not read
//! (`permissions` left out, `permissions.list` refused with `403`); a mailbox with labels,
//! messages (`format=full`, attachments read apart), a history (`messagesAdded`,
//! `messagesDeleted`, `labelsAdded`, `labelsRemoved`) that can be made to expire (`404`), small
//! pages everywhere; `429` or `403 userRateLimitExceeded` on demand, `401` for a bad token.
//! Push: `changes.watch` registers a `web_hook` channel, which is sent a `sync` notification at
//! once and a `change` one for each change to its drive after (posted to its `address` with
//! Google's `X-Goog-*` headers, the channel's `token` among them), until `channels.stop`; a
//! changes feed can be made to refuse its older page tokens (`400`).
//!
//! It is a test double of Google, so it is held to Google's own description of those APIs: the
//! clients Google generates from its discovery documents, `@googleapis/drive` and
//! `@googleapis/gmail` (`make setup-test` installs their `build/*.d.ts` and `build/*.js`).
//! [`assert_conforms`] checks that each route the fake serves is a method of the client with the
//! same HTTP method and path (read from the client's request table), and has `tsc --strict`
//! check every call's parameters as a value of that method's `Params$Resource$…` type and every
//! JSON answer as a value of the `Schema$…` type the method answers, plus every method and
//! parameter the providers say they send.
#![allow(clippy::unwrap_used)] // test code

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Map, Value};

use crate::serve::{clock_time, json_reply, query_pairs, with_retry_after, Loopback, Serving};
use crate::typescript::Checks;

/// One call and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// `drive` or `gmail`.
    pub api: &'static str,
    /// The client's resource and method (`Files$List`), empty for a route Google lacks.
    pub method: String,
    pub http: String,
    /// The route's template (`/drive/v3/files/{fileId}`).
    pub route: String,
    /// Path parameters then query parameters, in order.
    pub params: Vec<(String, String)>,
    pub status: u16,
    /// The JSON answer (none for content).
    pub body: Option<Value>,
    pub bearer: bool,
    /// The JSON request body (`changes.watch`'s channel), if any.
    pub request: Option<Value>,
}

/// A push channel `changes.watch` registered.
#[derive(Clone)]
struct ChannelRec {
    id: String,
    resource_id: String,
    address: String,
    token: String,
    expiration: String,
    /// The drive whose changes it reports (`None`: My Drive).
    drive: Option<String>,
    /// The last message number sent.
    number: u64,
}

#[derive(Clone)]
struct FileRec {
    name: String,
    mime: String,
    /// `None` for My Drive.
    drive: Option<String>,
    parent: String,
    owner: String,
    bytes: Vec<u8>,
    version: u64,
    modified: u64,
    trashed: bool,
    permissions: Vec<Value>,
    /// The caller lacks sharing rights: no `permissions`, `permissions.list` refused.
    sharing_hidden: bool,
}

#[derive(Clone)]
struct MessageRec {
    thread: String,
    labels: Vec<String>,
    from: String,
    to: String,
    subject: String,
    body: String,
    attachments: Vec<(String, String, Vec<u8>)>,
    internal: u64,
}

#[derive(Default)]
struct Shared {
    /// The authorization server whose active access tokens are accepted too.
    introspection: Option<crate::serve::Introspection>,
    tokens: Vec<String>,
    page_max: usize,
    clock: u64,
    next_id: u64,
    drives: BTreeMap<String, String>,
    files: BTreeMap<String, FileRec>,
    /// The changes feed: (file id) in order; a page token is an index into it.
    changes: Vec<String>,
    /// Page tokens below this are refused (`400`).
    changes_floor: usize,
    channels: Vec<ChannelRec>,
    owner: String,
    labels: BTreeMap<String, (String, bool)>,
    messages: BTreeMap<String, MessageRec>,
    /// (history id, record kind, message id, labels).
    history: Vec<(u64, &'static str, String, Vec<String>)>,
    history_id: u64,
    /// History ids below this are gone (`404`).
    expired_before: u64,
    limited: usize,
    retry_after: u64,
    /// Rate limits answer `403 userRateLimitExceeded` instead of `429`.
    limit_as_403: bool,
    log: crate::serve::Log<Exchange>,
}

type SharedState = Arc<Mutex<Shared>>;

/// The routes the fake serves: (api, client method, HTTP method, template).
const ROUTES: &[(&str, &str, &str, &str)] = &[
    ("drive", "Drives$List", "GET", "/drive/v3/drives"),
    ("drive", "Drives$Get", "GET", "/drive/v3/drives/{driveId}"),
    ("drive", "Files$List", "GET", "/drive/v3/files"),
    ("drive", "Files$Get", "GET", "/drive/v3/files/{fileId}"),
    (
        "drive",
        "Files$Export",
        "GET",
        "/drive/v3/files/{fileId}/export",
    ),
    (
        "drive",
        "Permissions$List",
        "GET",
        "/drive/v3/files/{fileId}/permissions",
    ),
    (
        "drive",
        "Changes$Getstartpagetoken",
        "GET",
        "/drive/v3/changes/startPageToken",
    ),
    ("drive", "Changes$List", "GET", "/drive/v3/changes"),
    ("drive", "Changes$Watch", "POST", "/drive/v3/changes/watch"),
    ("drive", "Channels$Stop", "POST", "/drive/v3/channels/stop"),
    (
        "gmail",
        "Users$Getprofile",
        "GET",
        "/gmail/v1/users/{userId}/profile",
    ),
    (
        "gmail",
        "Users$Labels$List",
        "GET",
        "/gmail/v1/users/{userId}/labels",
    ),
    (
        "gmail",
        "Users$Messages$List",
        "GET",
        "/gmail/v1/users/{userId}/messages",
    ),
    (
        "gmail",
        "Users$Messages$Get",
        "GET",
        "/gmail/v1/users/{userId}/messages/{id}",
    ),
    (
        "gmail",
        "Users$Messages$Attachments$Get",
        "GET",
        "/gmail/v1/users/{userId}/messages/{messageId}/attachments/{id}",
    ),
    (
        "gmail",
        "Users$History$List",
        "GET",
        "/gmail/v1/users/{userId}/history",
    ),
];

/// The route of a path: its index in [`ROUTES`] and its parameters.
fn route_of(method: &str, path: &str) -> Option<(usize, Vec<(String, String)>)> {
    let parts: Vec<&str> = path.split('/').collect();
    ROUTES.iter().enumerate().find_map(|(i, (_, _, http, t))| {
        let tparts: Vec<&str> = t.split('/').collect();
        if *http != method || tparts.len() != parts.len() {
            return None;
        }
        let mut params = Vec::new();
        for (t, p) in tparts.iter().zip(&parts) {
            match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Some(name) if !p.is_empty() => params.push((name.to_owned(), (*p).to_owned())),
                Some(_) => return None,
                None if t == p => {}
                None => return None,
            }
        }
        Some((i, params))
    })
}

fn error(status: StatusCode, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        status,
        json!({"error": {"code": status.as_u16(), "message": message,
            "errors": [{"domain": "global", "reason": reason, "message": message}],
            "status": match status.as_u16() { 401 => "UNAUTHENTICATED", 403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND", 429 => "RESOURCE_EXHAUSTED", _ => "INVALID_ARGUMENT" }}}),
    )
}

/// Base64url without padding, as Gmail sends bodies and attachments.
fn b64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

impl Shared {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:06}x", self.next_id)
    }

    fn file_json(&self, id: &str) -> Value {
        let f = &self.files[id];
        let mut out = json!({
            "kind": "drive#file", "id": id, "name": f.name, "mimeType": f.mime,
            "modifiedTime": format!("{}.000Z", clock_time(f.modified)),
            "version": f.version.to_string(), "trashed": f.trashed,
            "webViewLink": format!("https://drive.google.com/file/d/{id}/view"),
            "parents": [f.parent],
        });
        if !f.mime.starts_with("application/vnd.google-apps.") {
            out["size"] = json!(f.bytes.len().to_string());
            out["md5Checksum"] = json!(format!("{:x}", f.bytes.len() * 7919 + f.version as usize));
        }
        match &f.drive {
            Some(drive) => out["driveId"] = json!(drive),
            None => {
                out["owners"] = json!([{"kind": "drive#user", "emailAddress": f.owner,
                    "displayName": f.owner.split('@').next().unwrap_or_default(), "me": false}]);
                if !f.sharing_hidden {
                    out["permissions"] = json!(f.permissions);
                }
            }
        }
        out
    }

    fn change(&mut self, id: &str) {
        self.changes.push(id.to_owned());
        let drive = self.files.get(id).and_then(|f| f.drive.clone());
        for i in 0..self.channels.len() {
            if self.channels[i].drive == drive {
                self.notify(i, "change");
            }
        }
    }

    /// Posts the next notification of channel `i` with `state`, as Google does: no body, the
    /// channel and the change in `X-Goog-*` headers.
    fn notify(&mut self, i: usize, state: &'static str) {
        let channel = &mut self.channels[i];
        channel.number += 1;
        let headers = [
            ("x-goog-channel-id", channel.id.clone()),
            ("x-goog-channel-token", channel.token.clone()),
            ("x-goog-channel-expiration", channel.expiration.clone()),
            ("x-goog-resource-id", channel.resource_id.clone()),
            (
                "x-goog-resource-uri",
                "https://www.googleapis.com/drive/v3/changes?alt=json".to_owned(),
            ),
            ("x-goog-resource-state", state.to_owned()),
            ("x-goog-message-number", channel.number.to_string()),
        ];
        let address = channel.address.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut request = reqwest::Client::new().post(&address);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            // Google retries failed deliveries with backoff; the tests need no more than one.
            let _ = request.send().await;
        });
    }

    /// `changes.watch`: a `web_hook` channel on the changes of `drive`, notified `sync` at once.
    fn watch(&mut self, drive: Option<String>, body: Option<&Value>) -> Answer {
        let text = |key: &str| {
            body.and_then(|b| b.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        if text("type") != "web_hook"
            || text("id").is_empty()
            || !text("address").starts_with("http")
        {
            let (status, body) = error(
                StatusCode::BAD_REQUEST,
                "invalid",
                "A channel needs an id, type web_hook and an address.",
            );
            return Answer::Json(status, body);
        }
        let resource_id = self.id("res");
        let expiration = Some(text("expiration"))
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "3600000".to_owned());
        self.channels.push(ChannelRec {
            id: text("id"),
            resource_id: resource_id.clone(),
            address: text("address"),
            token: text("token"),
            expiration: expiration.clone(),
            drive,
            number: 0,
        });
        self.notify(self.channels.len() - 1, "sync");
        Answer::Json(
            StatusCode::OK,
            json!({"kind": "api#channel", "id": text("id"), "resourceId": resource_id,
                   "resourceUri": "https://www.googleapis.com/drive/v3/changes?alt=json",
                   "token": text("token"), "expiration": expiration}),
        )
    }

    fn message_json(&self, id: &str) -> Value {
        let m = &self.messages[id];
        let headers = json!([
            {"name": "From", "value": m.from}, {"name": "To", "value": m.to},
            {"name": "Subject", "value": m.subject},
            {"name": "Date", "value": "Sun, 1 Mar 2026 09:00:00 +0000"}
        ]);
        let text = json!({"partId": "0", "mimeType": "text/plain", "filename": "",
            "headers": [{"name": "Content-Type", "value": "text/plain; charset=UTF-8"}],
            "body": {"size": m.body.len(), "data": b64(m.body.as_bytes())}});
        let payload = if m.attachments.is_empty() {
            let mut p = text;
            p["partId"] = json!("");
            p["headers"] = headers;
            p
        } else {
            let mut parts = vec![text];
            for (n, (name, mime, bytes)) in m.attachments.iter().enumerate() {
                parts.push(json!({"partId": (n + 1).to_string(), "mimeType": mime, "filename": name,
                    "headers": [{"name": "Content-Disposition", "value": format!("attachment; filename=\"{name}\"")}],
                    "body": {"size": bytes.len(), "attachmentId": format!("ANGj{id}{n}")}}));
            }
            json!({"partId": "", "mimeType": "multipart/mixed", "filename": "", "headers": headers,
                "body": {"size": 0}, "parts": parts})
        };
        json!({"id": id, "threadId": m.thread, "labelIds": m.labels,
            "snippet": m.body.chars().take(100).collect::<String>(),
            "historyId": self.history_id.to_string(), "internalDate": (m.internal * 1000).to_string(),
            "sizeEstimate": m.body.len() + 500, "payload": payload})
    }

    fn record(&mut self, kind: &'static str, id: &str, labels: Vec<String>) {
        self.history_id += 1;
        let h = self.history_id;
        self.history.push((h, kind, id.to_owned(), labels));
    }
}

/// A page of `items` from the offset `token`: the page and the next token.
fn paged<T: Clone>(items: &[T], token: Option<&str>, limit: usize) -> (Vec<T>, Option<String>) {
    let from: usize = token
        .and_then(|t| t.strip_prefix("pg"))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let to = (from + limit).min(items.len());
    let next = (to < items.len()).then(|| format!("pg{to}"));
    (items[from.min(to)..to].to_vec(), next)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

enum Answer {
    Json(StatusCode, Value),
    Bytes(String, Vec<u8>),
    /// `204 No Content`.
    Empty,
}

fn answer(
    s: &mut Shared,
    route: usize,
    params: &[(String, String)],
    request: Option<&Value>,
) -> Answer {
    let (_, method, _, _) = ROUTES[route];
    let p = |name: &str| param(params, name).map(str::to_owned);
    let page_max = s.page_max;
    let ok = |v: Value| Answer::Json(StatusCode::OK, v);
    let fail = |(status, body): (StatusCode, Value)| Answer::Json(status, body);
    match method {
        "Drives$List" => {
            let drives: Vec<Value> = s
                .drives
                .iter()
                .map(|(id, name)| json!({"kind": "drive#drive", "id": id, "name": name}))
                .collect();
            let (page, next) = paged(&drives, p("pageToken").as_deref(), page_max);
            let mut out = json!({"kind": "drive#driveList", "drives": page});
            if let Some(next) = next {
                out["nextPageToken"] = json!(next);
            }
            ok(out)
        }
        "Drives$Get" => match s.drives.get(&p("driveId").unwrap_or_default()) {
            Some(name) => ok(json!({"kind": "drive#drive", "id": p("driveId"), "name": name})),
            None => fail(error(
                StatusCode::NOT_FOUND,
                "notFound",
                "Shared drive not found",
            )),
        },
        "Files$List" => {
            let drive = p("driveId");
            let ids: Vec<String> = s
                .files
                .iter()
                .filter(|(_, f)| !f.trashed && f.drive == drive)
                .map(|(id, _)| id.clone())
                .collect();
            let (page, next) = paged(&ids, p("pageToken").as_deref(), page_max);
            let files: Vec<Value> = page.iter().map(|id| s.file_json(id)).collect();
            let mut out =
                json!({"kind": "drive#fileList", "incompleteSearch": false, "files": files});
            if let Some(next) = next {
                out["nextPageToken"] = json!(next);
            }
            ok(out)
        }
        "Files$Get" | "Files$Export" => {
            let id = p("fileId").unwrap_or_default();
            match s.files.get(&id) {
                None => fail(error(StatusCode::NOT_FOUND, "notFound", "File not found")),
                Some(f) if method == "Files$Get" && p("alt").as_deref() == Some("media") => {
                    Answer::Bytes(f.mime.clone(), f.bytes.clone())
                }
                Some(_) if method == "Files$Get" => ok(s.file_json(&id)),
                Some(f) if f.mime.starts_with("application/vnd.google-apps.") => {
                    Answer::Bytes(p("mimeType").unwrap_or_default(), f.bytes.clone())
                }
                Some(_) => fail(error(
                    StatusCode::FORBIDDEN,
                    "fileNotExportable",
                    "Export only supports Docs Editors files.",
                )),
            }
        }
        "Permissions$List" => match s.files.get(&p("fileId").unwrap_or_default()) {
            None => fail(error(StatusCode::NOT_FOUND, "notFound", "File not found")),
            Some(f) if f.sharing_hidden => fail(error(
                StatusCode::FORBIDDEN,
                "insufficientFilePermissions",
                "The user does not have sufficient permissions for this file.",
            )),
            Some(f) => ok(json!({"kind": "drive#permissionList", "permissions": f.permissions})),
        },
        "Changes$Getstartpagetoken" => ok(json!({"kind": "drive#startPageToken",
            "startPageToken": s.changes.len().to_string()})),
        "Changes$Watch" => s.watch(p("driveId"), request),
        "Channels$Stop" => {
            let field = |key: &str| request.and_then(|r| r.get(key)).and_then(Value::as_str);
            let before = s.channels.len();
            s.channels.retain(|c| {
                Some(c.id.as_str()) != field("id")
                    || Some(c.resource_id.as_str()) != field("resourceId")
            });
            if s.channels.len() == before {
                fail(error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    "Channel not found",
                ))
            } else {
                Answer::Empty
            }
        }
        "Changes$List"
            if p("pageToken")
                .and_then(|t| t.parse::<usize>().ok())
                .unwrap_or(0)
                < s.changes_floor =>
        {
            fail(error(StatusCode::BAD_REQUEST, "invalid", "Invalid Value"))
        }
        "Changes$List" => {
            let from: usize = p("pageToken").and_then(|t| t.parse().ok()).unwrap_or(0);
            let drive = p("driveId");
            let all: Vec<(usize, String)> = s
                .changes
                .iter()
                .enumerate()
                .skip(from)
                .filter(|(_, id)| s.files.get(*id).is_none_or(|f| f.drive == drive))
                .map(|(i, id)| (i, id.clone()))
                .collect();
            let page: Vec<(usize, String)> = all.iter().take(page_max).cloned().collect();
            let changes: Vec<Value> = page
                .iter()
                .map(|(_, id)| {
                    let mut c = json!({"kind": "drive#change", "changeType": "file", "fileId": id,
                        "time": format!("{}.000Z", clock_time(s.clock)), "removed": !s.files.contains_key(id)});
                    if s.files.contains_key(id) {
                        c["file"] = s.file_json(id);
                    }
                    c
                })
                .collect();
            let mut out = json!({"kind": "drive#changeList", "changes": changes});
            if all.len() > page.len() {
                out["nextPageToken"] = json!((page.last().unwrap().0 + 1).to_string());
            } else {
                out["newStartPageToken"] = json!(s.changes.len().to_string());
            }
            ok(out)
        }
        "Users$Getprofile" => ok(
            json!({"emailAddress": s.owner, "messagesTotal": s.messages.len(),
            "threadsTotal": s.messages.len(), "historyId": s.history_id.to_string()}),
        ),
        "Users$Labels$List" => {
            let labels: Vec<Value> = s
                .labels
                .iter()
                .map(|(id, (name, system))| {
                    json!({"id": id, "name": name, "type": if *system { "system" } else { "user" },
                        "messageListVisibility": "show", "labelListVisibility": "labelShow"})
                })
                .collect();
            ok(json!({ "labels": labels }))
        }
        "Users$Messages$List" => {
            let label = p("labelIds").unwrap_or_default();
            let mut ids: Vec<(String, String)> = s
                .messages
                .iter()
                .filter(|(_, m)| m.labels.contains(&label))
                .map(|(id, m)| (id.clone(), m.thread.clone()))
                .collect();
            ids.reverse();
            let (page, next) = paged(&ids, p("pageToken").as_deref(), page_max);
            let messages: Vec<Value> = page
                .iter()
                .map(|(id, thread)| json!({"id": id, "threadId": thread}))
                .collect();
            let mut out = json!({"messages": messages, "resultSizeEstimate": ids.len()});
            if let Some(next) = next {
                out["nextPageToken"] = json!(next);
            }
            ok(out)
        }
        "Users$Messages$Get" => match s.messages.get(&p("id").unwrap_or_default()) {
            Some(_) => ok(s.message_json(&p("id").unwrap_or_default())),
            None => fail(error(
                StatusCode::NOT_FOUND,
                "notFound",
                "Requested entity was not found.",
            )),
        },
        "Users$Messages$Attachments$Get" => {
            let id = p("messageId").unwrap_or_default();
            let wanted = p("id").unwrap_or_default();
            let found = s.messages.get(&id).and_then(|m| {
                m.attachments
                    .iter()
                    .enumerate()
                    .find(|(n, _)| format!("ANGj{id}{n}") == wanted)
                    .map(|(_, (_, _, bytes))| bytes.clone())
            });
            match found {
                Some(bytes) => {
                    ok(json!({"attachmentId": wanted, "size": bytes.len(), "data": b64(&bytes)}))
                }
                None => fail(error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    "Requested entity was not found.",
                )),
            }
        }
        "Users$History$List" => {
            let start: u64 = p("startHistoryId")
                .and_then(|h| h.parse().ok())
                .unwrap_or(0);
            if start < s.expired_before {
                return fail(error(
                    StatusCode::NOT_FOUND,
                    "notFound",
                    "Requested entity was not found.",
                ));
            }
            let label = p("labelId").unwrap_or_default();
            let records: Vec<Value> = s
                .history
                .iter()
                .filter(|(h, _, _, _)| *h > start)
                .filter(|(_, kind, id, labels)| {
                    let with = labels.contains(&label);
                    match *kind {
                        "messagesAdded" | "messagesDeleted" => with,
                        _ => {
                            with || s
                                .messages
                                .get(id)
                                .is_some_and(|m| m.labels.contains(&label))
                        }
                    }
                })
                .map(|(h, kind, id, labels)| {
                    let thread = s
                        .messages
                        .get(id)
                        .map(|m| m.thread.clone())
                        .unwrap_or_else(|| id.clone());
                    let message = json!({"id": id, "threadId": thread, "labelIds": labels});
                    let mut r =
                        json!({"id": h.to_string(), "messages": [{"id": id, "threadId": thread}]});
                    r[*kind] = match *kind {
                        "labelsAdded" | "labelsRemoved" => {
                            json!([{"message": {"id": id, "threadId": thread}, "labelIds": labels}])
                        }
                        _ => json!([{ "message": message }]),
                    };
                    r
                })
                .collect();
            let (page, next) = paged(&records, p("pageToken").as_deref(), page_max);
            let mut out = json!({"historyId": s.history_id.to_string()});
            if !page.is_empty() {
                out["history"] = json!(page);
            }
            if let Some(next) = next {
                out["nextPageToken"] = json!(next);
            }
            ok(out)
        }
        _ => fail(error(StatusCode::NOT_FOUND, "notFound", "Not Found")),
    }
}

async fn serve(
    State(state): State<SharedState>,
    method: Method,
    uri: Uri,
    mut headers: HeaderMap,
    sent: axum::body::Bytes,
) -> Response {
    let (introspection, own) = {
        let s = state.lock().unwrap();
        (
            s.introspection.clone(),
            s.tokens.first().cloned().unwrap_or_default(),
        )
    };
    crate::serve::vouch(&mut headers, introspection, &own).await;
    let request: Option<Value> = serde_json::from_slice(&sent).ok();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let mut s = state.lock().unwrap();
    let found = route_of(method.as_str(), uri.path());
    let mut params = found.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
    params.extend(query_pairs(&uri));
    let (api, name, template) = match &found {
        Some((i, _)) => (
            ROUTES[*i].0,
            ROUTES[*i].1.to_owned(),
            ROUTES[*i].3.to_owned(),
        ),
        None => ("", String::new(), uri.path().to_owned()),
    };
    let allowed = token
        .as_deref()
        .is_some_and(|t| s.tokens.iter().any(|k| k == t));
    let mut retry = None;
    let answered = if !allowed {
        let (status, body) = error(
            StatusCode::UNAUTHORIZED,
            "authError",
            "Request had invalid authentication credentials.",
        );
        Answer::Json(status, body)
    } else if s.limited > 0 {
        s.limited -= 1;
        retry = Some(s.retry_after).filter(|r| *r > 0);
        let (status, body) = if s.limit_as_403 {
            error(
                StatusCode::FORBIDDEN,
                "userRateLimitExceeded",
                "User Rate Limit Exceeded",
            )
        } else {
            error(
                StatusCode::TOO_MANY_REQUESTS,
                "rateLimitExceeded",
                "Quota exceeded",
            )
        };
        Answer::Json(status, body)
    } else {
        match &found {
            Some((i, _)) => answer(&mut s, *i, &params, request.as_ref()),
            None => {
                let (status, body) = error(StatusCode::NOT_FOUND, "notFound", "Not Found");
                Answer::Json(status, body)
            }
        }
    };
    let (status, body, response) = match answered {
        Answer::Json(status, body) => (status, Some(body.clone()), json_reply(status, &body)),
        Answer::Bytes(mime, bytes) => (
            StatusCode::OK,
            None,
            (StatusCode::OK, [("content-type", mime)], bytes).into_response(),
        ),
        Answer::Empty => (
            StatusCode::NO_CONTENT,
            None,
            StatusCode::NO_CONTENT.into_response(),
        ),
    };
    s.log.push(Exchange {
        api,
        method: name,
        http: method.as_str().to_owned(),
        route: template,
        params,
        status: status.as_u16(),
        body,
        bearer: token.is_some(),
        request,
    });
    match retry {
        Some(seconds) => with_retry_after(response, seconds),
        None => response,
    }
}

/// A fake Google account (Drive and Gmail) serving until dropped.
pub struct GoogleFake {
    state: SharedState,
    _serving: Serving,
    host: String,
}

impl GoogleFake {
    /// An account `owner` whose token is `token`, answering pages of at most `page_max`.
    pub async fn start(token: &str, owner: &str, page_max: usize) -> Self {
        let loopback = Loopback::bind().await;
        let host = loopback.host.clone();
        let mut shared = Shared {
            tokens: vec![token.to_owned()],
            page_max,
            owner: owner.to_owned(),
            history_id: 1000,
            ..Shared::default()
        };
        for id in ["INBOX", "SENT", "SPAM", "TRASH", "UNREAD", "IMPORTANT"] {
            shared.labels.insert(id.to_owned(), (id.to_owned(), true));
        }
        let state: SharedState = Arc::new(Mutex::new(shared));
        let router = Router::new().fallback(serve).with_state(state.clone());
        Self {
            state,
            _serving: loopback.serve(router),
            host,
        }
    }

    /// The root of both APIs (`api_url`).
    pub fn api_url(&self) -> String {
        self.host.clone()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn add_drive(&self, name: &str) -> String {
        self.with(|s| {
            let id = s.id("0AD");
            s.drives.insert(id.clone(), name.to_owned());
            id
        })
    }

    /// A file in `drive` (`None`: My Drive), shared with `permissions` besides its owner.
    pub fn add_file(
        &self,
        drive: Option<&str>,
        name: &str,
        mime: &str,
        bytes: &[u8],
        permissions: &[Value],
    ) -> String {
        self.with(|s| {
            let id = s.id("1f");
            let modified = s.tick();
            let owner = s.owner.clone();
            let mut all = vec![
                json!({"kind": "drive#permission", "id": "p0", "type": "user",
                "emailAddress": owner, "role": "owner"}),
            ];
            all.extend(permissions.iter().cloned());
            s.files.insert(
                id.clone(),
                FileRec {
                    name: name.to_owned(),
                    mime: mime.to_owned(),
                    drive: drive.map(str::to_owned),
                    parent: drive.map_or_else(|| "0AROOTx".to_owned(), str::to_owned),
                    owner,
                    bytes: bytes.to_vec(),
                    version: 1,
                    modified,
                    trashed: false,
                    permissions: all,
                    sharing_hidden: false,
                },
            );
            s.change(&id);
            id
        })
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut FileRec)) {
        self.with(|s| {
            let modified = s.tick();
            let file = s.files.get_mut(id).unwrap();
            f(file);
            file.version += 1;
            file.modified = modified;
            s.change(id);
        });
    }

    pub fn edit(&self, id: &str, bytes: &[u8]) {
        self.update(id, |f| f.bytes = bytes.to_vec());
    }

    pub fn trash(&self, id: &str) {
        self.update(id, |f| f.trashed = true);
    }

    pub fn share(&self, id: &str, permission: Value) {
        self.update(id, |f| f.permissions.push(permission));
    }

    pub fn hide_sharing(&self, id: &str) {
        self.with(|s| s.files.get_mut(id).unwrap().sharing_hidden = true);
    }

    pub fn add_label(&self, name: &str) -> String {
        self.with(|s| {
            let id = format!("Label_{}", s.labels.len());
            s.labels.insert(id.clone(), (name.to_owned(), false));
            id
        })
    }

    /// A message delivered with `labels`, with `attachments` (name, type, bytes); its id.
    pub fn deliver(
        &self,
        labels: &[&str],
        from: &str,
        subject: &str,
        body: &str,
        attachments: &[(&str, &str, &[u8])],
    ) -> String {
        self.with(|s| {
            let id = s.id("18e");
            let internal = 1_772_323_200 + s.tick();
            let labels: Vec<String> = labels.iter().map(|l| (*l).to_owned()).collect();
            s.messages.insert(
                id.clone(),
                MessageRec {
                    thread: id.clone(),
                    labels: labels.clone(),
                    from: from.to_owned(),
                    to: s.owner.clone(),
                    subject: subject.to_owned(),
                    body: body.to_owned(),
                    attachments: attachments
                        .iter()
                        .map(|(n, m, b)| ((*n).to_owned(), (*m).to_owned(), b.to_vec()))
                        .collect(),
                    internal,
                },
            );
            s.record("messagesAdded", &id, labels);
            id
        })
    }

    pub fn delete_message(&self, id: &str) {
        self.with(|s| {
            let labels = s.messages.remove(id).map(|m| m.labels).unwrap_or_default();
            s.record("messagesDeleted", id, labels);
        });
    }

    pub fn unlabel(&self, id: &str, label: &str) {
        self.with(|s| {
            s.messages
                .get_mut(id)
                .unwrap()
                .labels
                .retain(|l| l != label);
            s.record("labelsRemoved", id, vec![label.to_owned()]);
        });
    }

    /// The changes feed refuses the page tokens it gave before now (`400 Invalid Value`), as
    /// Drive does for a token too old or not its own.
    pub fn expire_changes(&self) {
        self.with(|s| s.changes_floor = s.changes.len());
    }

    /// The push channels open: (id, address).
    pub fn channels(&self) -> Vec<(String, String)> {
        self.with(|s| {
            s.channels
                .iter()
                .map(|c| (c.id.clone(), c.address.clone()))
                .collect()
        })
    }

    /// History before now is gone: a `startHistoryId` before it answers `404`.
    pub fn expire_history(&self) {
        self.with(|s| s.expired_before = s.history_id + 1);
    }

    /// The next `count` calls answer a rate limit (`429`, or `403 userRateLimitExceeded` when
    /// `as_403`), with `Retry-After: retry_after` when not 0.
    pub fn rate_limit(&self, count: usize, retry_after: u64, as_403: bool) {
        self.with(|s| {
            s.limited = count;
            s.retry_after = retry_after;
            s.limit_as_403 = as_403;
        });
    }

    /// Accepts, besides its own tokens, the access tokens the authorization server whose
    /// introspection endpoint is `endpoint` holds active (checked with `client_id`, `secret`).
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        let introspection = crate::serve::Introspection::new(endpoint, client_id, secret);
        self.with(|s| s.introspection = Some(introspection));
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    pub fn set_logging(&self, on: bool) {
        self.with(|s| s.log.set_on(on));
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.with(|s| s.log.all())
    }
}

fn cache() -> std::path::PathBuf {
    let root = crate::cache_dir();
    let dir = root.join("google-api");
    assert!(
        dir.join("drive/build/v3.d.ts").is_file()
            && dir.join("gmail/build/v1.d.ts").is_file()
            && crate::typescript::tsc().is_file(),
        "Google's API clients (@googleapis/drive, @googleapis/gmail) and the TypeScript compiler \
         are not in {}: run `make setup-test`",
        root.display()
    );
    dir
}

/// The files of an API's client: its declarations and its request table.
fn client(api: &str) -> (std::path::PathBuf, std::path::PathBuf, &'static str) {
    let dir = cache();
    match api {
        "drive" => (
            dir.join("drive/build/v3"),
            dir.join("drive/build/v3.js"),
            "drive_v3",
        ),
        _ => (
            dir.join("gmail/build/v1"),
            dir.join("gmail/build/v1.js"),
            "gmail_v1",
        ),
    }
}

/// The client's request table: `Resource$Method` (method lowercased) → (HTTP method, path).
fn request_table(js: &std::path::Path) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(js).unwrap();
    let mut table = BTreeMap::new();
    let (mut class, mut method, mut url) = (String::new(), String::new(), String::new());
    let mut want_url = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("class Resource$") {
            class = rest.trim_end_matches(" {").to_owned();
        } else if line.starts_with("        ") && !line.starts_with("         ") {
            if let Some((name, _)) = t.split_once("(paramsOrCallback") {
                method = name.to_owned();
            }
        }
        if t.starts_with("url: (rootUrl +") {
            want_url = true;
        }
        if want_url {
            if let Some(start) = t.find('\'') {
                if let Some(len) = t[start + 1..].find('\'') {
                    url = t[start + 1..start + 1 + len].to_owned();
                    want_url = false;
                }
            }
        }
        if let Some(http) = t
            .strip_prefix("method: '")
            .and_then(|m| m.strip_suffix("',"))
        {
            table.insert(
                format!("{class}${}", method.to_lowercase()),
                (http.to_owned(), url.clone()),
            );
        }
    }
    table
}

/// A parameter's value as its type wants it.
fn param_value(key: &str, values: &[&str]) -> Value {
    if matches!(key, "labelIds" | "historyTypes") {
        return json!(values);
    }
    let value = values[0];
    match value {
        "true" => json!(true),
        "false" => json!(false),
        _ if matches!(key, "pageSize" | "maxResults") => value
            .parse::<u64>()
            .map(Value::from)
            .unwrap_or(json!(value)),
        _ => json!(value),
    }
}

/// The `Schema$…` a method answers, from its declaration in the client.
fn answer_type(declarations: &str, method: &str) -> Option<String> {
    let needle = format!(
        "Params$Resource${method}, options?: MethodOptions): Promise<GaxiosResponseWithHTTP2<"
    );
    let at = declarations.find(&needle)? + needle.len();
    let rest = &declarations[at..];
    let end = rest.find(">>")?;
    Some(rest[..end].to_owned()).filter(|t| t.starts_with("Schema$"))
}

/// Each call's problems against Google's clients (one list per call); `extra` are (api,
/// method, parameters) the providers may send, reported by index after the calls.
pub fn problems(
    exchanges: &[Exchange],
    extra: &[(&'static str, String, Value)],
) -> Vec<Vec<String>> {
    let total = exchanges.len() + extra.len();
    let mut problems = vec![Vec::<String>::new(); total];
    let mut head = String::new();
    let mut tables = BTreeMap::new();
    let mut declarations = BTreeMap::new();
    for api in ["drive", "gmail"] {
        let (types, js, namespace) = client(api);
        writeln!(
            head,
            "import type {{ {namespace} }} from {:?};",
            types.display().to_string()
        )
        .unwrap();
        tables.insert(api, request_table(&js));
        declarations.insert(
            api,
            std::fs::read_to_string(types.with_extension("d.ts")).unwrap(),
        );
    }
    let mut ts = Checks::new(head);
    let mut items: Vec<(&str, String, Value, Option<Value>)> = Vec::new();
    for (i, e) in exchanges.iter().enumerate() {
        if e.method.is_empty() {
            problems[i].push(format!(
                "{} {}: a route the fake does not serve",
                e.http, e.route
            ));
            items.push(("", String::new(), Value::Null, None));
            continue;
        }
        if !e.bearer {
            problems[i].push("no `Authorization: Bearer`".into());
        }
        let mut args = Map::new();
        let mut keys: Vec<&str> = e.params.iter().map(|(k, _)| k.as_str()).collect();
        keys.dedup();
        for key in keys {
            let values: Vec<&str> = e
                .params
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect();
            if values.len() > 1 && !matches!(key, "labelIds" | "historyTypes") {
                problems[i].push(format!("`{key}` sent more than once"));
            }
            args.insert(key.to_owned(), param_value(key, &values));
        }
        if let Some(request) = &e.request {
            args.insert("requestBody".to_owned(), request.clone());
        }
        // Only successful answers are typed by the client (errors share Google's error body).
        let body = e.body.clone().filter(|_| (200..300).contains(&e.status));
        items.push((e.api, e.method.clone(), Value::Object(args), body));
    }
    for (api, method, args) in extra {
        items.push((api, method.clone(), args.clone(), None));
    }
    for (i, (api, method, args, body)) in items.iter().enumerate() {
        if api.is_empty() {
            continue;
        }
        let (class, name) = method.rsplit_once('$').unwrap();
        let key = format!("{class}${}", name.to_lowercase());
        let route = ROUTES.iter().find(|r| r.0 == *api && r.1 == method);
        match (tables[api].get(&key), route) {
            (None, _) => problems[i].push(format!("{api} has no method {method}")),
            (Some((http, path)), Some((_, _, fake_http, fake_path))) => {
                let path = path.trim_start_matches('/');
                if http != fake_http || path != fake_path.trim_start_matches('/') {
                    problems[i].push(format!(
                        "{method} is {http} /{path} in the client, the fake serves {fake_http} {fake_path}"
                    ));
                }
            }
            (Some(_), None) => problems[i].push(format!("the fake does not serve {method}")),
        }
        let namespace = client(api).2;
        let mut block = format!(
            "// {i}: {api} {method}\nexport const params_{i}: {namespace}.Params$Resource${method} = {args};\n"
        );
        if let Some(body) = body {
            match answer_type(&declarations[api], method) {
                Some(schema) => {
                    writeln!(
                        block,
                        "export const answer_{i}: {namespace}.{schema} = {body};"
                    )
                    .unwrap();
                }
                None => problems[i].push(format!("{method} answers no JSON schema")),
            }
        }
        ts.push(i, &block);
    }
    ts.compile("calls.ts", &[], &mut problems);
    problems
}

/// The methods the providers say they call, each with every parameter it may send.
fn provider_calls() -> Vec<(&'static str, String, Value)> {
    let mut out = Vec::new();
    for (api, methods) in [
        ("drive", engram_connectors::GoogleDriveProvider::methods()),
        ("gmail", engram_connectors::GmailProvider::methods()),
    ] {
        for (method, params) in methods {
            let args: Map<String, Value> = params
                .iter()
                .map(|p| ((*p).to_owned(), param_value(p, &["1"])))
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "supportsAllDrives"
                        | "includeItemsFromAllDrives"
                        | "includeRemoved"
                        | "includeSpamTrash" => json!(true),
                        _ => v,
                    };
                    (k, v)
                })
                .collect();
            out.push((api, (*method).to_owned(), Value::Object(args)));
        }
    }
    out
}

/// Checks each call against Google's clients, and every method and parameter the providers may
/// send; panics with every problem found.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let calls = provider_calls();
    let found = problems(exchanges, &calls);
    let mut report = Vec::new();
    for (i, problems) in found.into_iter().enumerate() {
        let at = match exchanges.get(i) {
            Some(e) => format!("{} {} {:?} -> {}", e.http, e.route, e.params, e.status),
            None => format!("the provider's {}", calls[i - exchanges.len()].1),
        };
        report.extend(problems.into_iter().map(|p| format!("{at}: {p}")));
    }
    assert!(
        report.is_empty(),
        "the fake (or the connector) strays from Google's published API types:\n{}",
        report.join("\n")
    );
}

/// Every route the fake serves, each kind of answer it gives (pages, changes, exports, history,
/// errors, rate limits), checked against Google's published clients; and the check has teeth.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_google_fake_answers_only_what_googles_published_types_allow() {
        let token = "ya29.conformance-1";
        let fake = GoogleFake::start(token, "ana@example.com", 2).await;
        let drive = fake.add_drive("Engineering");
        let doc = fake.add_file(
        None,
        "Plan",
        "application/vnd.google-apps.document",
        b"doc",
        &[json!({"kind": "drive#permission", "id": "p1", "type": "group", "emailAddress": "eng@example.com", "role": "reader"})],
    );
        fake.add_file(None, "notes.txt", "text/plain", b"hello", &[]);
        fake.add_file(None, "more.txt", "text/plain", b"more", &[]);
        let shared = fake.add_file(Some(&drive), "spec.pdf", "application/pdf", b"%PDF", &[]);
        fake.hide_sharing(&shared);
        fake.edit(&doc, b"doc 2");
        let label = fake.add_label("Projects");
        let m = fake.deliver(
            &["INBOX", &label],
            "Bo <bo@example.com>",
            "Hi",
            "Hello",
            &[("a.txt", "text/plain", b"att")],
        );
        fake.unlabel(&m, &label);
        let client = reqwest::Client::new();
        let base = fake.api_url();
        let get = |path: &str, query: Vec<(&str, String)>, token: &str| {
            let request = client
                .get(format!("{base}{path}"))
                .bearer_auth(token)
                .query(&query);
            async move { request.send().await.unwrap() }
        };
        get("/drive/v3/drives", vec![("pageSize", "1".into())], token).await;
        get(&format!("/drive/v3/drives/{drive}"), vec![], token).await;
        let listed: Value = get(
            "/drive/v3/files",
            vec![
                ("q", "trashed = false".into()),
                ("corpora", "user".into()),
                ("supportsAllDrives", "true".into()),
            ],
            token,
        )
        .await
        .json()
        .await
        .unwrap();
        let next = listed["nextPageToken"].as_str().unwrap().to_owned();
        get("/drive/v3/files", vec![("pageToken", next)], token).await;
        get(
            "/drive/v3/files",
            vec![("driveId", drive.clone()), ("corpora", "drive".into())],
            token,
        )
        .await;
        get(
            &format!("/drive/v3/files/{doc}/export"),
            vec![("mimeType", "application/pdf".into())],
            token,
        )
        .await;
        get(
            &format!("/drive/v3/files/{shared}"),
            vec![("alt", "media".into())],
            token,
        )
        .await;
        get(&format!("/drive/v3/files/{doc}"), vec![], token).await;
        get(&format!("/drive/v3/files/{doc}/permissions"), vec![], token).await;
        get(
            &format!("/drive/v3/files/{shared}/permissions"),
            vec![],
            token,
        )
        .await;
        get("/drive/v3/changes/startPageToken", vec![], token).await;
        let changes: Value = get("/drive/v3/changes", vec![("pageToken", "0".into())], token)
            .await
            .json()
            .await
            .unwrap();
        assert!(changes["nextPageToken"].is_string(), "{changes:#}");
        get("/drive/v3/changes", vec![("pageToken", "4".into())], token).await;
        // A push channel: registered, sent `sync` then one `change` per change, stopped.
        let (sent, mut received) = tokio::sync::mpsc::unbounded_channel::<HeaderMap>();
        let receiver = Loopback::bind().await;
        let address = format!("{}/connectors/con_1/events", receiver.host);
        let _receiving = receiver.serve(Router::new().fallback(move |headers: HeaderMap| {
            let sent = sent.clone();
            async move {
                sent.send(headers).unwrap();
                StatusCode::OK
            }
        }));
        let watched: Value = client
            .post(format!("{base}/drive/v3/changes/watch"))
            .bearer_auth(token)
            .query(&[("pageToken", "4"), ("supportsAllDrives", "true")])
            .json(
                &json!({"id": "engram-ch1", "type": "web_hook", "address": address,
                          "token": "channel-token-0001", "expiration": "1800000000000"}),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        fake.edit(&doc, b"doc 3");
        let mut states = Vec::new();
        for _ in 0..2 {
            let headers = received.recv().await.unwrap();
            assert_eq!(headers["x-goog-channel-token"], "channel-token-0001");
            assert_eq!(headers["x-goog-channel-id"], "engram-ch1");
            states.push(
                headers["x-goog-resource-state"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        states.sort();
        assert_eq!(states, ["change", "sync"]);
        let stop = |id: &str| {
            client
                .post(format!("{base}/drive/v3/channels/stop"))
                .bearer_auth(token)
                .json(&json!({"id": id, "resourceId": watched["resourceId"]}))
                .send()
        };
        assert_eq!(stop("engram-ch1").await.unwrap().status(), 204);
        assert_eq!(stop("engram-ch1").await.unwrap().status(), 404);
        assert!(fake.channels().is_empty());
        fake.expire_changes();
        let refused = get("/drive/v3/changes", vec![("pageToken", "4".into())], token).await;
        assert_eq!(refused.status(), 400);
        get("/gmail/v1/users/me/profile", vec![], token).await;
        get("/gmail/v1/users/me/labels", vec![], token).await;
        get(
            "/gmail/v1/users/me/messages",
            vec![("labelIds", "INBOX".into())],
            token,
        )
        .await;
        get(
            &format!("/gmail/v1/users/me/messages/{m}"),
            vec![("format", "full".into())],
            token,
        )
        .await;
        get(
            &format!("/gmail/v1/users/me/messages/{m}/attachments/ANGj{m}0"),
            vec![],
            token,
        )
        .await;
        get(
            "/gmail/v1/users/me/history",
            vec![
                ("startHistoryId", "1000".into()),
                ("labelId", label.clone()),
                ("historyTypes", "messageAdded".into()),
                ("historyTypes", "labelRemoved".into()),
            ],
            token,
        )
        .await;
        fake.expire_history();
        let expired = get(
            "/gmail/v1/users/me/history",
            vec![("startHistoryId", "1000".into())],
            token,
        )
        .await;
        assert_eq!(expired.status(), 404);
        get("/drive/v3/drives/0ADnone", vec![], token).await;
        get("/drive/v3/files", vec![], "ya29.wrong").await;
        fake.rate_limit(1, 3, false);
        let limited = get("/drive/v3/files", vec![], token).await;
        assert_eq!(
            (
                limited.status().as_u16(),
                limited.headers()["retry-after"].to_str().unwrap()
            ),
            (429, "3")
        );
        fake.rate_limit(1, 0, true);
        assert_eq!(
            get("/gmail/v1/users/me/labels", vec![], token)
                .await
                .status(),
            403
        );
        let exchanges = fake.exchanges();
        assert_conforms(&exchanges);

        // The check has teeth: a parameter the method does not take, a field its schema lacks, a
        // field of the wrong type, and a route of the wrong path are each refused.
        let mut param = exchanges[2].clone();
        param.params.push(("since".into(), "1".into()));
        let mut field = exchanges[2].clone();
        field.body.as_mut().unwrap()["files"][0]["colour"] = json!("teal");
        let mut typed = exchanges[2].clone();
        typed.body.as_mut().unwrap()["files"][0]["trashed"] = json!("no");
        let mut method = exchanges[0].clone();
        method.method = "Drives$Everything".into();
        let found = problems(&[param, field, typed, method], &[]);
        assert!(found.iter().all(|p| !p.is_empty()), "{found:#?}");
    }
}
