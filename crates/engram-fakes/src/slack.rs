//! A stateful fake of the part of Slack's Web API the slack connector reads, on loopback:
//! users (with or without a readable e-mail address), public and private channels the bot is or
//! is not a member of, messages with threads, edits (`edited`), deletions and shared files
//! (downloaded from `url_private` with the bearer token), and the methods `auth.test`,
//! `conversations.list`, `conversations.info`, `conversations.history` (`oldest`),
//! `conversations.replies`, `conversations.members` and `users.info`, each answered to `POST`
//! (form) or `GET` (query) with `Authorization: Bearer`, paginated by `response_metadata.
//! next_cursor` with small pages; `ok:false` errors as Slack gives them (`invalid_auth`,
//! `token_revoked`, `not_in_channel`, `channel_not_found`), and `429` with `Retry-After` on
//! demand.
//!
//! It is a test double of Slack, so it is held to Slack's own description of its API: the types
//! of Slack's official client (`@slack/web-api`, which `make setup-test` installs), whose
//! `Methods` class names every method with its argument and response types. [`assert_conforms`]
//! writes each logged call's arguments and answer as TypeScript values of
//! `Methods[…][…]`'s argument and answer types and has `tsc --strict` check them: a method Slack
//! does not have, a parameter it does not take or a shape its answer type does not allow fails.
#![allow(clippy::unwrap_used)] // test code

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};

use crate::serve::{
    assert_no_problems, json_reply, query_pairs, with_retry_after, Loopback, RateLimit, Serving,
};
use crate::typescript::Checks;

pub const TEAM: &str = "T0ENGRAM1";
const BOT: &str = "U0BOT0001";

/// One call and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The Web API method (`conversations.history`), or `FILE` for a download.
    pub method: String,
    /// The arguments sent (form or query), in order, without a token.
    pub params: Vec<(String, String)>,
    pub status: u16,
    pub body: Option<Value>,
    /// The request carried `Authorization: Bearer`.
    pub bearer: bool,
}

#[derive(Clone)]
struct UserRec {
    name: String,
    real_name: String,
    email: String,
    bot: bool,
}

#[derive(Clone)]
struct MessageRec {
    user: String,
    text: String,
    /// The thread's root ts, for a reply.
    thread_ts: Option<String>,
    edited: Option<String>,
    files: Vec<String>,
}

struct ChannelRec {
    name: String,
    private: bool,
    members: Vec<String>,
    messages: BTreeMap<String, MessageRec>,
    /// Each thread's replies (their ts, oldest first) by its root's ts: a root's replies are
    /// found without reading every message of the channel.
    threads: HashMap<String, Vec<String>>,
}

struct FileRec {
    name: String,
    title: String,
    mimetype: String,
    bytes: Vec<u8>,
    created: u64,
}

#[derive(Default)]
struct Shared {
    /// The authorization server whose active access tokens are accepted too.
    introspection: Option<crate::serve::Introspection>,
    tokens: Vec<String>,
    revoked: Vec<String>,
    host: String,
    users: BTreeMap<String, UserRec>,
    channels: BTreeMap<String, ChannelRec>,
    files: BTreeMap<String, FileRec>,
    /// Seconds: messages are stamped from two hours ago on, one second apart.
    base: u64,
    clock: u64,
    next_id: u64,
    page_max: usize,
    /// E-mail addresses are not answered (a token without `users:read.email`).
    emails_hidden: bool,
    limited: RateLimit,
    log: crate::serve::Log<Exchange>,
}

type SharedState = Arc<Mutex<Shared>>;

impl Shared {
    fn tick(&mut self) -> String {
        self.clock += 1;
        format!("{}.{:06}", self.base + self.clock, self.clock % 1_000_000)
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}0{:07}", self.next_id)
    }

    fn user_json(&self, id: &str) -> Option<Value> {
        let user = self.users.get(id)?;
        let mut profile = json!({
            "real_name": user.real_name,
            "display_name": user.name,
            "team": TEAM,
        });
        if !self.emails_hidden && !user.bot && !user.email.is_empty() {
            profile["email"] = json!(user.email);
        }
        Some(json!({
            "id": id, "team_id": TEAM, "name": user.name, "real_name": user.real_name,
            "deleted": false, "is_bot": user.bot, "is_admin": false, "tz": "Europe/Paris",
            "profile": profile
        }))
    }

    fn channel_json(&self, id: &str) -> Option<Value> {
        let channel = self.channels.get(id)?;
        Some(json!({
            "id": id, "name": channel.name, "name_normalized": channel.name,
            "is_channel": !channel.private, "is_group": channel.private, "is_im": false,
            "is_mpim": false, "is_private": channel.private, "is_archived": false,
            "is_general": false, "is_shared": false, "is_ext_shared": false,
            "is_org_shared": false, "context_team_id": TEAM,
            "is_member": channel.members.iter().any(|m| m == BOT),
            "created": self.base, "creator": channel.members.first().cloned().unwrap_or_default(),
            "num_members": channel.members.len(),
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": format!("The {} channel", channel.name), "creator": "", "last_set": 0}
        }))
    }

    fn file_json(&self, id: &str) -> Value {
        let file = &self.files[id];
        let ext = file.name.rsplit('.').next().unwrap_or_default();
        json!({
            "id": id, "created": file.created, "timestamp": file.created, "name": file.name,
            "title": file.title, "mimetype": file.mimetype, "filetype": ext,
            "pretty_type": ext.to_uppercase(), "user": "", "mode": "hosted",
            "editable": false, "is_external": false, "external_type": "",
            "is_public": true, "public_url_shared": false, "size": file.bytes.len(),
            "url_private": format!("{}/files/{id}/{}", self.host, file.name),
            "url_private_download": format!("{}/files/{id}/{}?download=1", self.host, file.name),
            "permalink": format!("https://engram-test.slack.com/files/{id}")
        })
    }

    fn message_json(&self, channel: &ChannelRec, ts: &str) -> Value {
        let message = &channel.messages[ts];
        let mut out = json!({"type": "message", "user": message.user, "text": message.text, "ts": ts, "team": TEAM});
        if let Some(edited) = &message.edited {
            out["edited"] = json!({"user": message.user, "ts": edited});
        }
        if !message.files.is_empty() {
            out["files"] = Value::from(
                message
                    .files
                    .iter()
                    .filter(|f| self.files.contains_key(*f))
                    .map(|f| {
                        let mut file = self.file_json(f);
                        file["user"] = json!(message.user);
                        file
                    })
                    .collect::<Vec<_>>(),
            );
            out["upload"] = json!(false);
        }
        match &message.thread_ts {
            Some(root) => out["thread_ts"] = json!(root),
            None => {
                let replies: Vec<(&String, &MessageRec)> = channel
                    .threads
                    .get(ts)
                    .into_iter()
                    .flatten()
                    .filter_map(|r| channel.messages.get_key_value(r))
                    .collect();
                if let Some((latest, _)) = replies.last() {
                    let mut users: Vec<String> =
                        replies.iter().map(|(_, m)| m.user.clone()).collect();
                    users.sort();
                    users.dedup();
                    out["thread_ts"] = json!(ts);
                    out["reply_count"] = json!(replies.len());
                    out["reply_users_count"] = json!(users.len());
                    out["reply_users"] = json!(users);
                    out["latest_reply"] = json!(latest);
                    out["subscribed"] = json!(false);
                }
            }
        }
        out
    }
}

/// A page of `items` from `cursor` (an offset): the page and the next cursor.
fn paged<T: Clone>(items: &[T], cursor: Option<&str>, limit: usize) -> (Vec<T>, String) {
    let from: usize = cursor
        .and_then(|c| c.strip_prefix("dXNlcj"))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let to = (from + limit).min(items.len());
    let next = if to < items.len() {
        format!("dXNlcj{to}")
    } else {
        String::new()
    };
    (items[from.min(to)..to].to_vec(), next)
}

/// A fake Slack workspace serving until dropped.
pub struct SlackFake {
    state: SharedState,
    _serving: Serving,
    host: String,
}

impl SlackFake {
    /// A workspace whose bot token is `token`, answering pages of at most `page_max`.
    pub async fn start(token: &str, page_max: usize) -> Self {
        let loopback = Loopback::bind().await;
        let host = loopback.host.clone();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut shared = Shared {
            tokens: vec![token.to_owned()],
            host: host.clone(),
            base: now - 7200,
            page_max,
            ..Shared::default()
        };
        shared.users.insert(
            BOT.to_owned(),
            UserRec {
                name: "engram".into(),
                real_name: "engram".into(),
                email: String::new(),
                bot: true,
            },
        );
        let state: SharedState = Arc::new(Mutex::new(shared));
        let router = Router::new()
            .route("/api/{method}", get(api).post(api))
            .route("/files/{id}/{name}", get(download))
            .with_state(state.clone());
        Self {
            state,
            _serving: loopback.serve(router),
            host,
        }
    }

    pub fn api_url(&self) -> String {
        format!("{}/api", self.host)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn add_user(&self, name: &str, email: &str) -> String {
        self.with(|s| {
            let id = s.id("U");
            s.users.insert(
                id.clone(),
                UserRec {
                    name: name.to_lowercase(),
                    real_name: name.to_owned(),
                    email: email.to_owned(),
                    bot: false,
                },
            );
            id
        })
    }

    /// A channel with `members` (and the bot when `bot_member`).
    pub fn add_channel(
        &self,
        name: &str,
        private: bool,
        bot_member: bool,
        members: &[&str],
    ) -> String {
        self.with(|s| {
            let id = s.id(if private { "G" } else { "C" });
            let mut all: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
            if bot_member {
                all.push(BOT.to_owned());
            }
            s.channels.insert(
                id.clone(),
                ChannelRec {
                    name: name.to_owned(),
                    private,
                    members: all,
                    messages: BTreeMap::new(),
                    threads: HashMap::new(),
                },
            );
            id
        })
    }

    /// Posts a message (a reply when `thread` is given); its ts.
    pub fn post(&self, channel: &str, user: &str, text: &str, thread: Option<&str>) -> String {
        self.with(|s| {
            let ts = s.tick();
            let channel = s.channels.get_mut(channel).unwrap();
            channel.messages.insert(
                ts.clone(),
                MessageRec {
                    user: user.to_owned(),
                    text: text.to_owned(),
                    thread_ts: thread.map(str::to_owned),
                    edited: None,
                    files: Vec::new(),
                },
            );
            if let Some(root) = thread {
                channel
                    .threads
                    .entry(root.to_owned())
                    .or_default()
                    .push(ts.clone());
            }
            ts
        })
    }

    /// Shares a file in a new message; the message's ts and the file's id.
    pub fn share_file(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        name: &str,
        mimetype: &str,
        bytes: &[u8],
    ) -> (String, String) {
        let ts = self.post(channel, user, text, None);
        self.with(|s| {
            let id = s.id("F");
            let created = s.base + s.clock;
            s.files.insert(
                id.clone(),
                FileRec {
                    name: name.to_owned(),
                    title: name.to_owned(),
                    mimetype: mimetype.to_owned(),
                    bytes: bytes.to_vec(),
                    created,
                },
            );
            let message = s
                .channels
                .get_mut(channel)
                .unwrap()
                .messages
                .get_mut(&ts)
                .unwrap();
            message.files.push(id.clone());
            (ts, id)
        })
    }

    pub fn edit(&self, channel: &str, ts: &str, text: &str) {
        self.with(|s| {
            let at = s.tick();
            let message = s
                .channels
                .get_mut(channel)
                .unwrap()
                .messages
                .get_mut(ts)
                .unwrap();
            message.text = text.to_owned();
            message.edited = Some(at);
        });
    }

    /// Deletes a message (with its files; a root's replies stay hidden with it).
    pub fn delete(&self, channel: &str, ts: &str) {
        self.with(|s| {
            let channel = s.channels.get_mut(channel).unwrap();
            let gone = channel.messages.remove(ts).unwrap();
            for reply in channel.threads.remove(ts).unwrap_or_default() {
                channel.messages.remove(&reply);
            }
            if let Some(root) = &gone.thread_ts {
                if let Some(replies) = channel.threads.get_mut(root) {
                    replies.retain(|r| r != ts);
                }
            }
            for file in gone.files {
                s.files.remove(&file);
            }
        });
    }

    /// Revokes `token`: calls with it are answered `token_revoked`.
    pub fn revoke(&self, token: &str) {
        self.with(|s| {
            s.tokens.retain(|t| t != token);
            s.revoked.push(token.to_owned());
        });
    }

    /// The next `calls` calls are answered `429` with `Retry-After: retry_after`.
    pub fn rate_limit(&self, calls: usize, retry_after: u64) {
        self.with(|s| s.limited.set(calls, retry_after));
    }

    /// Whether `users.info` leaves e-mail addresses out (no `users:read.email`).
    pub fn hide_emails(&self, hidden: bool) {
        self.with(|s| s.emails_hidden = hidden);
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    /// Accepts, besides its own tokens, the access tokens the authorization server whose
    /// introspection endpoint is `endpoint` holds active (checked with `client_id`, `secret`).
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        let introspection = crate::serve::Introspection::new(endpoint, client_id, secret);
        self.with(|s| s.introspection = Some(introspection));
    }

    pub fn set_logging(&self, on: bool) {
        self.with(|s| s.log.set_on(on));
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.with(|s| s.log.all())
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned)
}

/// A token the authorization server vouches for, read as the fake's first token.
async fn vouch(state: &SharedState, headers: &mut HeaderMap) {
    let (introspection, own) = {
        let s = state.lock().unwrap();
        (
            s.introspection.clone(),
            s.tokens.first().cloned().unwrap_or_default(),
        )
    };
    crate::serve::vouch(headers, introspection, &own).await;
}

async fn api(
    State(state): State<SharedState>,
    Path(method): Path<String>,
    mut headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let mut params = query_pairs(&uri);
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        let form = reqwest::Url::parse(&format!("http://fake/?{}", String::from_utf8_lossy(&body)))
            .unwrap();
        params.extend(
            form.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned())),
        );
    }
    vouch(&state, &mut headers).await;
    let token = bearer(&headers);
    let mut shared = state.lock().unwrap();
    let (status, answer, retry) = answer(&mut shared, &method, &params, token.as_deref());
    shared.log.push(Exchange {
        method,
        params,
        status: status.as_u16(),
        body: Some(answer.clone()),
        bearer: token.is_some(),
    });
    let response = json_reply(status, &answer);
    match retry {
        Some(retry) => with_retry_after(response, retry),
        None => response,
    }
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn error(code: &str) -> (StatusCode, Value, Option<u64>) {
    (StatusCode::OK, json!({"ok": false, "error": code}), None)
}

fn ok(mut body: Value, next: Option<String>) -> (StatusCode, Value, Option<u64>) {
    body["ok"] = json!(true);
    if let Some(next) = next {
        body["response_metadata"] = json!({ "next_cursor": next });
    }
    (StatusCode::OK, body, None)
}

/// The answer to one call of `method`.
fn answer(
    s: &mut Shared,
    method: &str,
    params: &[(String, String)],
    token: Option<&str>,
) -> (StatusCode, Value, Option<u64>) {
    if let Some(wait) = s.limited.take() {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            json!({"ok": false, "error": "ratelimited"}),
            Some(wait),
        );
    }
    match token {
        None => return error("not_authed"),
        Some(t) if s.revoked.iter().any(|r| r == t) => return error("token_revoked"),
        Some(t) if !s.tokens.iter().any(|k| k == t) => return error("invalid_auth"),
        Some(_) => {}
    }
    let limit = param(params, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(100)
        .clamp(1, s.page_max);
    let cursor = param(params, "cursor");
    let channel_id = param(params, "channel").unwrap_or_default().to_owned();
    // A channel the bot may read: private ones it is not in do not exist for it.
    let readable = |s: &Shared| -> Result<(), &'static str> {
        match s.channels.get(&channel_id) {
            None => Err("channel_not_found"),
            Some(c) if !c.members.iter().any(|m| m == BOT) => Err(if c.private {
                "channel_not_found"
            } else {
                "not_in_channel"
            }),
            Some(_) => Ok(()),
        }
    };
    match method {
        "auth.test" => ok(
            json!({"url": "https://engram-test.slack.com/", "team": "Engram Test", "user": "engram",
                   "team_id": TEAM, "user_id": BOT, "bot_id": "B0BOT0001", "is_enterprise_install": false}),
            None,
        ),
        "conversations.list" => {
            let types = param(params, "types").unwrap_or("public_channel");
            let ids: Vec<String> = s
                .channels
                .iter()
                .filter(|(_, c)| {
                    types.contains(if c.private {
                        "private_channel"
                    } else {
                        "public_channel"
                    })
                })
                // A private channel is listed only to its members.
                .filter(|(_, c)| !c.private || c.members.iter().any(|m| m == BOT))
                .map(|(id, _)| id.clone())
                .collect();
            let (page, next) = paged(&ids, cursor, limit);
            let channels: Vec<Value> = page.iter().filter_map(|id| s.channel_json(id)).collect();
            ok(json!({ "channels": channels }), Some(next))
        }
        "conversations.info" => match s.channels.get(&channel_id) {
            Some(c) if !c.private || c.members.iter().any(|m| m == BOT) => {
                ok(json!({"channel": s.channel_json(&channel_id)}), None)
            }
            Some(_) | None => error("channel_not_found"),
        },
        "conversations.history" => {
            if let Err(e) = readable(s) {
                return error(e);
            }
            let channel = &s.channels[&channel_id];
            let oldest = param(params, "oldest").unwrap_or("0");
            let after =
                |ts: &str| ts.parse::<f64>().unwrap_or(0.0) > oldest.parse::<f64>().unwrap_or(0.0);
            let mut roots: Vec<String> = channel
                .messages
                .iter()
                .filter(|(ts, m)| m.thread_ts.is_none() && after(ts))
                .map(|(ts, _)| ts.clone())
                .collect();
            roots.reverse(); // newest first, as Slack lists
            let (page, next) = paged(&roots, cursor, limit);
            let messages: Vec<Value> = page.iter().map(|ts| s.message_json(channel, ts)).collect();
            let more = !next.is_empty();
            ok(
                json!({"messages": messages, "has_more": more, "pin_count": 0}),
                Some(next),
            )
        }
        "conversations.replies" => {
            if let Err(e) = readable(s) {
                return error(e);
            }
            let channel = &s.channels[&channel_id];
            let root = param(params, "ts").unwrap_or_default();
            if !channel.messages.contains_key(root) {
                return error("thread_not_found");
            }
            let mut thread: Vec<String> = vec![root.to_owned()];
            thread.extend(channel.threads.get(root).into_iter().flatten().cloned());
            let (page, next) = paged(&thread, cursor, limit);
            let messages: Vec<Value> = page.iter().map(|ts| s.message_json(channel, ts)).collect();
            let more = !next.is_empty();
            ok(json!({"messages": messages, "has_more": more}), Some(next))
        }
        "conversations.members" => {
            if let Err(e) = readable(s) {
                return error(e);
            }
            let members = s.channels[&channel_id].members.clone();
            let (page, next) = paged(&members, cursor, limit);
            ok(json!({ "members": page }), Some(next))
        }
        "users.info" => match s.user_json(param(params, "user").unwrap_or_default()) {
            Some(user) => ok(json!({ "user": user }), None),
            None => error("user_not_found"),
        },
        _ => error("unknown_method"),
    }
}

async fn download(
    State(state): State<SharedState>,
    Path((id, _name)): Path<(String, String)>,
    mut headers: HeaderMap,
) -> Response {
    vouch(&state, &mut headers).await;
    let token = bearer(&headers);
    let mut shared = state.lock().unwrap();
    let allowed = token
        .as_deref()
        .is_some_and(|t| shared.tokens.iter().any(|k| k == t));
    let found = shared
        .files
        .get(&id)
        .map(|f| (f.mimetype.clone(), f.bytes.clone()));
    shared.log.push(Exchange {
        method: "FILE".into(),
        params: vec![("file".into(), id)],
        status: 200,
        body: None,
        bearer: token.is_some(),
    });
    match (allowed, found) {
        // Slack answers its sign-in page to a request it does not authorize.
        (false, _) => (
            StatusCode::OK,
            [("content-type", "text/html")],
            "<html>sign in</html>".to_owned().into_bytes(),
        )
            .into_response(),
        (true, None) => StatusCode::NOT_FOUND.into_response(),
        (true, Some((mimetype, bytes))) => {
            (StatusCode::OK, [("content-type", mimetype)], bytes).into_response()
        }
    }
}

/// An Events API delivery signed as Slack signs it: its headers.
pub fn signed_headers(secret: &str, timestamp: i64, body: &str) -> Vec<(String, String)> {
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    vec![
        (
            "x-slack-signature".into(),
            format!("v0={}", hex::encode(mac.finalize().into_bytes())),
        ),
        ("x-slack-request-timestamp".into(), timestamp.to_string()),
    ]
}

fn cache() -> std::path::PathBuf {
    let root = crate::cache_dir();
    let dir = root.join("slack-api");
    assert!(
        dir.join("client/dist/methods.d.ts").is_file() && crate::typescript::tsc().is_file(),
        "Slack's Web API types (@slack/web-api) and the TypeScript compiler are not in {}: run \
         `make setup-test`",
        root.display()
    );
    dir
}

/// A form value as its argument's type wants it (numbers for `limit`, booleans).
fn arg_value(value: &str) -> Value {
    match value {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => value
            .parse::<u64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(value)),
    }
}

/// `Methods["a"]["b"]…` of a method name.
fn method_type(method: &str) -> String {
    let mut out = "Methods".to_owned();
    for part in method.split('.') {
        write!(out, "[{part:?}]").unwrap();
    }
    out
}

/// Each call's problems against `@slack/web-api`'s methods and types (one list per call);
/// `extra` are argument objects to check as well (method, arguments), reported by index after
/// the calls.
pub fn problems(exchanges: &[Exchange], extra: &[(String, Value)]) -> Vec<Vec<String>> {
    let root = cache();
    let total = exchanges.len() + extra.len();
    let mut problems = vec![Vec::<String>::new(); total];
    let mut ts = Checks::new(format!(
        "import type {{ Methods }} from {:?};\n\
         type Args<M> = M extends (options: infer A) => unknown ? NonNullable<A> : never;\n\
         type Answer<M> = M extends (...args: never[]) => Promise<infer R> ? R : never;\n",
        root.join("client/dist/methods").display().to_string()
    ));
    let mut checks: Vec<(String, Value, Option<Value>)> = Vec::new();
    for (i, exchange) in exchanges.iter().enumerate() {
        if exchange.method == "FILE" {
            if !exchange.bearer {
                problems[i].push("a file downloaded without the bearer token".into());
            }
            checks.push((String::new(), Value::Null, None));
            continue;
        }
        if !exchange.bearer {
            problems[i].push("no `Authorization: Bearer`".into());
        }
        let mut args = Map::new();
        for (key, value) in &exchange.params {
            if key == "token" {
                problems[i].push("the token sent as an argument".into());
                continue;
            }
            args.insert(key.clone(), arg_value(value));
        }
        checks.push((
            exchange.method.clone(),
            Value::Object(args),
            exchange.body.clone(),
        ));
    }
    for (method, args) in extra {
        checks.push((method.clone(), args.clone(), None));
    }
    for (i, (method, args, answer)) in checks.iter().enumerate() {
        if method.is_empty() {
            continue;
        }
        let mut block = format!(
            "// {i}: {method}\nexport const args_{i}: Args<{}> = {args};\n",
            method_type(method)
        );
        if let Some(answer) = answer {
            writeln!(
                block,
                "export const answer_{i}: Answer<{}> = {answer};",
                method_type(method)
            )
            .unwrap();
        }
        ts.push(i, &block);
    }
    ts.compile("calls.ts", &[], &mut problems);
    problems
}

/// The methods the provider says it calls, each with every argument it may send.
fn provider_calls() -> Vec<(String, Value)> {
    engram_connectors::SlackProvider::methods()
        .iter()
        .map(|(method, args)| {
            let args: Map<String, Value> = args
                .iter()
                .map(|a| {
                    let value = match *a {
                        "limit" => json!(200),
                        "exclude_archived" => json!(true),
                        _ => json!("x"),
                    };
                    ((*a).to_owned(), value)
                })
                .collect();
            ((*method).to_owned(), Value::Object(args))
        })
        .collect()
}

/// Checks each call against `@slack/web-api`'s methods and types, and every method and argument
/// the provider may send; panics with every problem found.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let calls = provider_calls();
    let found = problems(exchanges, &calls);
    let mut report = Vec::new();
    for (i, problems) in found.into_iter().enumerate() {
        let at = match exchanges.get(i) {
            Some(e) => format!("{} {:?} -> {}", e.method, e.params, e.status),
            None => format!("the provider's {}", calls[i - exchanges.len()].0),
        };
        report.extend(problems.into_iter().map(|p| format!("{at}: {p}")));
    }
    assert_no_problems(
        &report,
        "the fake (or the connector) strays from Slack's published Web API types",
    );
}

/// Every method the fake serves, each answer it can give (pages, threads, edits, files,
/// errors, a rate limit), checked against `@slack/web-api`'s published types; and the check has
/// teeth.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_slack_fake_answers_only_what_slacks_published_types_allow() {
        let token = "xoxb-conformance-1";
        let fake = SlackFake::start(token, 2).await;
        let ana = fake.add_user("Ana", "ana@example.com");
        let bo = fake.add_user("Bo", "bo@example.com");
        let general = fake.add_channel("general", false, true, &[&ana, &bo]);
        let secret = fake.add_channel("secret", true, true, &[&ana]);
        fake.add_channel("random", false, false, &[&bo]);
        let root = fake.post(&general, &ana, "Question?", None);
        fake.post(&general, &bo, "Answer.", Some(&root));
        fake.post(&general, &bo, "More.", Some(&root));
        fake.edit(&general, &root, "The question?");
        fake.share_file(&general, &ana, "notes", "notes.txt", "text/plain", b"hello");
        fake.post(&secret, &ana, "hush", None);
        let client = reqwest::Client::new();
        let api = fake.api_url();
        let call = |method: &str, args: Vec<(&str, String)>, token: &str| {
            let request = client
                .post(format!("{api}/{method}"))
                .bearer_auth(token)
                .form(&args);
            async move { request.send().await.unwrap() }
        };
        call("auth.test", vec![], token).await;
        let first: Value = call(
            "conversations.list",
            vec![
                ("types", "public_channel,private_channel".into()),
                ("limit", "2".into()),
            ],
            token,
        )
        .await
        .json()
        .await
        .unwrap();
        let next = first["response_metadata"]["next_cursor"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(!next.is_empty());
        call(
            "conversations.list",
            vec![
                ("types", "public_channel,private_channel".into()),
                ("cursor", next),
            ],
            token,
        )
        .await;
        call(
            "conversations.info",
            vec![("channel", general.clone())],
            token,
        )
        .await;
        let history: Value = call(
            "conversations.history",
            vec![("channel", general.clone()), ("limit", "200".into())],
            token,
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(
            history["messages"].as_array().unwrap().len(),
            2,
            "{history:#}"
        );
        call(
            "conversations.history",
            vec![("channel", general.clone()), ("oldest", "1.000000".into())],
            token,
        )
        .await;
        call(
            "conversations.replies",
            vec![("channel", general.clone()), ("ts", root.clone())],
            token,
        )
        .await;
        call(
            "conversations.members",
            vec![("channel", secret.clone())],
            token,
        )
        .await;
        call("users.info", vec![("user", ana.clone())], token).await;
        fake.hide_emails(true);
        call("users.info", vec![("user", bo.clone())], token).await;
        call("users.info", vec![("user", "U404".into())], token).await;
        call(
            "conversations.history",
            vec![("channel", "C404".into())],
            token,
        )
        .await;
        call(
            "conversations.info",
            vec![("channel", "C404".into())],
            token,
        )
        .await;
        call("auth.test", vec![], "xoxb-wrong").await;
        fake.rate_limit(1, 3);
        let limited = call("auth.test", vec![], token).await;
        assert_eq!(limited.status(), 429);
        assert_eq!(limited.headers()["retry-after"], "3");
        fake.revoke(token);
        call("auth.test", vec![], token).await;
        let exchanges = fake.exchanges();
        assert!(exchanges.iter().any(|e| e
            .body
            .as_ref()
            .is_some_and(|b| b["error"] == "token_revoked")));
        assert_conforms(&exchanges);

        // The check has teeth: a method Slack lacks, an argument it does not take, a field its
        // answer type does not have and a field of the wrong type are each refused.
        let mut wrong = exchanges[0].clone();
        wrong.method = "conversations.everything".into();
        let mut argument = exchanges[1].clone();
        argument.params.push(("since".into(), "1".into()));
        let mut field = exchanges[0].clone();
        field.body.as_mut().unwrap()["workspace_colour"] = json!("teal");
        let mut typed = exchanges[1].clone();
        typed.body.as_mut().unwrap()["channels"][0]["num_members"] = json!("two");
        let found = problems(&[wrong, argument, field, typed], &[]);
        assert!(found.iter().all(|p| !p.is_empty()), "{found:#?}");
    }
}
