//! `slack`: the messages, threads and files of the Slack channels a bot is a member of, through
//! Slack's Web API (`{api_url}/<method>`, default `https://slack.com/api`), with a bot token
//! (`token`, `xoxb-…`) or OAuth v2 (`oauth`: Slack's `oauth/v2/authorize` and `oauth.v2.access`,
//! whose answer carries the bot's `access_token` at the top level, optional `refresh_token` and
//! `expires_in` with token rotation on, and `ok:false` + `error` for a refusal; the app's OAuth
//! client reads it as it is, and hands the provider the current `access_token`). Every method is
//! called as Slack documents it: `POST` with a form body and `Authorization: Bearer <token>`.
//!
//! **Resources.** Discovery lists the public and private channels the bot is a member of
//! (`conversations.list`, `types=public_channel,private_channel`, page by page through
//! `response_metadata.next_cursor`), each a resource `channel:<id>`.
//!
//! **One document per thread.** A thread (a root message and its replies, read with
//! `conversations.replies`) is one document, and a message without replies is a document of its
//! own. A reply alone ("yes, Tuesday works", "+1, merged") means nothing without the question
//! it answers: one document per message would index fragments whose best chunk cannot answer
//! anything, or repeat the whole thread as context in every reply's document (a thread of 50
//! replies indexed 50 times over). A thread as one document is also what a reader sees and
//! what an answer should cite. Its native id is `<channel>:<root ts>`; its version is the root's
//! `ts`, `edited.ts`, `reply_count` and `latest_reply`, plus, for threads in the recent window,
//! a hash of every reply's `ts` and `edited.ts` (an edit of a reply does not move anything on
//! the root), so an edit anywhere in a thread makes a new version of its document.
//!
//! **Passes.** Slack has no "changed since" listing: `conversations.history` with `oldest` only
//! returns messages posted after it. So a pass reads `conversations.history` from `oldest` =
//! the newest `ts` seen by the last pass minus a recent window ([`REVISIT_S`], three days): new
//! messages and threads, and the edits, new replies and deletions of recent ones (the ids listed
//! in the window by the last pass are kept in the cursor, and those the window no longer holds
//! are deleted). Once a day, and on the first pass, a pass lists the whole history with
//! `complete_listing`, so older edits are read and older deletions leave engram. Slack's Events
//! API (below) asks for a pass at once when a message is posted, edited or deleted.
//!
//! **Files** shared in a channel (`files` on a message, a reply in the window, or a thread's
//! reply read by a full pass) are documents of their own (`<channel>:file:<id>`), downloaded
//! from `url_private` with the token when they changed, at most the item's byte limit (larger
//! ones are counted failed without being downloaded), and parsed by the parsers like an upload.
//!
//! **Permissions.** A public channel's documents are readable by the whole workspace:
//! `group:slack:<team_id>` (the team of `auth.test`; give that principal to the workspace's
//! members in `acl` queries). A private channel's are readable by its members' e-mail addresses
//! (`conversations.members`, then each member's `users.info` `profile.email`; bots are left
//! out). When an address cannot be read (the token lacks `users:read.email`) the channel's
//! documents keep the addresses that could be read (never more readers than Slack allows) and
//! the resource carries an `acl_warning`.
//!
//! **Rate limits.** Slack's `429` with `Retry-After` (its tier limits) is waited out in place
//! when short (up to 5 s, three times), else it ends the pass as `RateLimited` until then.
//! `ok:false` errors are mapped: `invalid_auth`, `not_authed`, `token_revoked`, `token_expired`,
//! `account_inactive` need the user to reconnect; `missing_scope` too (the app must be
//! reinstalled with the scope named); `not_in_channel`, `channel_not_found`, `is_archived` fail
//! the resource alone; `ratelimited` is a rate limit; Slack's `internal_error`,
//! `fatal_error`, `service_unavailable` and `request_timeout` are retried later.
//!
//! **Push.** Slack's Events API posts to the connector's events route: `X-Slack-Signature`
//! (`v0=` and the hex HMAC-SHA256 of `v0:{X-Slack-Request-Timestamp}:{body}` under the app's
//! signing secret, the credentials' `signing_secret`), refused when the timestamp is more than
//! five minutes from now; `url_verification` is answered with its `challenge`; each
//! `event_callback` (`message` and its `message_changed` and `message_deleted` subtypes,
//! `channel_*`) is deduplicated by its `event_id` and asks for a sync.
//!
//! User names and addresses come from `users.info`, cached per pass (per token, from the pass's
//! start; at most [`USERS_CACHED_MAX`] users, an hour at most). The token only ever travels in the `Authorization` header; no
//! message repeats it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::hosted::{self, retry_wait, saved_pass, text_of, unanswered, waited_out};
use crate::{
    credential, now_unix, rfc3339, set_readers, Access, Content, DiscoveredResource, Entry,
    FieldInfo, IntervalBounds, Known, Page, Position, Provider, ProviderError, ProviderInfo,
    ResourceRef,
};

const DEFAULT_API: &str = "https://slack.com/api";
const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer of a method read.
const ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Objects asked per page (Slack advises at most 200).
const PER_PAGE: u32 = 200;
/// Channel pages discovery reads at most.
const CHANNEL_PAGES_MAX: u32 = 200;
/// History pages one pass reads at most (a million messages).
const PASS_PAGES_MAX: u32 = 5000;
/// Reply pages read for one thread at most (10,000 replies).
const REPLY_PAGES_MAX: u32 = 50;
/// Member pages of a private channel read at most, and the members whose addresses are read.
const MEMBER_PAGES_MAX: u32 = 25;
const MEMBERS_MAX: usize = 2000;
/// How often a pass lists the whole history, so old edits are read and deletions leave.
const FULL_PASS_EVERY_S: i64 = 86_400;
/// The recent window every pass lists again: edits, new replies and deletions in it are seen.
const REVISIT_S: i64 = 3 * 86_400;
/// Ids of the recent window kept in the cursor at most (the newest).
const RECENT_MAX: usize = 2000;
/// Users whose names and addresses are cached at most, and for how long.
const USERS_CACHED_MAX: usize = 10_000;
const USER_TTL: Duration = Duration::from_secs(3600);
/// A `Retry-After` at most this long is waited out in place, at most this many times.
const RATE_WAIT_MAX: Duration = Duration::from_secs(5);
const RATE_RETRIES: u32 = 3;
/// How far a signed event's timestamp may be from now (Slack's guidance: five minutes).
const PUSH_WINDOW_S: i64 = 300;
/// Longest error text of Slack's quoted.
const QUOTED_MAX: usize = 200;
/// The scopes the bot needs (bot token scopes, comma-separated as Slack's OAuth wants them).
const SCOPES: &str =
    "channels:history,channels:read,groups:history,groups:read,users:read,users:read.email,files:read";

/// Message subtypes that are not conversation (joins, renames, topic changes): not indexed.
const SKIPPED_SUBTYPES: &[&str] = &[
    "channel_join",
    "channel_leave",
    "channel_topic",
    "channel_purpose",
    "channel_name",
    "channel_archive",
    "channel_unarchive",
    "group_join",
    "group_leave",
    "group_topic",
    "group_purpose",
    "group_name",
    "group_archive",
    "group_unarchive",
    "bot_add",
    "bot_remove",
    "pinned_item",
    "unpinned_item",
    "channel_convert_to_private",
    "channel_convert_to_public",
];

/// Every Web API method the provider calls, with the parameters it sends (its tests and the
/// fake's check hold them to `@slack/web-api`'s published argument types).
const METHODS: &[(&str, &[&str])] = &[
    ("auth.test", &[]),
    (
        "conversations.list",
        &["types", "exclude_archived", "limit", "cursor"],
    ),
    ("conversations.info", &["channel"]),
    (
        "conversations.history",
        &["channel", "limit", "cursor", "oldest"],
    ),
    (
        "conversations.replies",
        &["channel", "ts", "limit", "cursor"],
    ),
    ("conversations.members", &["channel", "limit", "cursor"]),
    ("users.info", &["user"]),
];

/// A user as the cache keeps it.
#[derive(Debug, Clone)]
struct User {
    name: String,
    email: Option<String>,
    bot: bool,
    at: Instant,
}

pub struct SlackProvider {
    info: ProviderInfo,
    /// `users.info` answers by token (hashed) and user id.
    users: Mutex<HashMap<(String, String), User>>,
}

impl Default for SlackProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl SlackProvider {
    /// Every Web API method the provider calls, with the parameters it may send (the fake's
    /// check holds them to `@slack/web-api`'s published argument types).
    pub fn methods() -> &'static [(&'static str, &'static [&'static str])] {
        METHODS
    }

    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            users: Mutex::new(HashMap::new()),
            info: ProviderInfo {
                provider: "slack",
                category: "communication",
                connector_type: "chat",
                rank: Some(14),
                rbac_support: true,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["thread", "message", "file"],
                fields: vec![
                    field(
                        "kind",
                        "string",
                        "thread (a message with its replies), message (without replies) or file",
                        Some("additional_metadata.kind"),
                    ),
                    field(
                        "channel",
                        "string",
                        "The channel's name, without #",
                        Some("additional_metadata.channel"),
                    ),
                    field(
                        "channel_id",
                        "string",
                        "The channel's id, e.g. C0123ABCD",
                        Some("additional_metadata.channel_id"),
                    ),
                    field(
                        "private",
                        "boolean",
                        "Whether the channel is private",
                        Some("additional_metadata.private"),
                    ),
                    field(
                        "author",
                        "string",
                        "Who posted the message that starts the thread (or shared the file)",
                        Some("additional_metadata.author"),
                    ),
                    field(
                        "participants",
                        "array",
                        "Who posted in the thread (as far as the listing shows)",
                        Some("additional_metadata.participants"),
                    ),
                    field(
                        "thread_ts",
                        "string",
                        "The Slack ts of the thread's first message (of the message a file was shared in)",
                        Some("additional_metadata.thread_ts"),
                    ),
                    field(
                        "reply_count",
                        "integer",
                        "How many replies the thread has",
                        Some("additional_metadata.reply_count"),
                    ),
                    field(
                        "has_files",
                        "boolean",
                        "Whether files were shared in the message",
                        Some("additional_metadata.has_files"),
                    ),
                    field(
                        "edited",
                        "boolean",
                        "Whether the first message was edited",
                        Some("additional_metadata.edited"),
                    ),
                    field(
                        "mimetype",
                        "string",
                        "A file's media type",
                        Some("additional_metadata.mimetype"),
                    ),
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "token": {"type": "string", "pattern": "^xox[a-z]-", "minLength": 8, "maxLength": 1000},
                        "access_token": {"type": "string", "minLength": 1, "maxLength": 10000},
                        "api_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000},
                        "oauth": crate::oauth::credential_schema(),
                        "signing_secret": {"type": "string", "minLength": 16, "maxLength": 1000},
                        "webhook_secret": {"type": "string", "minLength": 16, "maxLength": 1000}
                    },
                    "anyOf": [{"required": ["token"]}, {"required": ["access_token"]}, {"required": ["oauth"]}],
                    "additionalProperties": false
                }),
                setup_guide: "Create a Slack app (api.slack.com/apps) and give its bot the scopes \
                    channels:history, channels:read, groups:history, groups:read, users:read, \
                    users:read.email and files:read; install it in the workspace and give its Bot \
                    User OAuth Token as `token` (`xoxb-…`), or give the app's client id and secret \
                    as `oauth` and authorize through `POST /connectors/{id}/oauth/start` (token \
                    rotation is supported). Invite the bot to each channel to sync (`/invite \
                    @your-app`): discovery offers the channels it is a member of (`channel:` and \
                    the id). Each thread becomes one document (the first message and its replies), \
                    each shared file one more, with the channel, author, thread and files as fields \
                    to filter on; edited messages are updated and deleted ones leave engram. A \
                    public channel's documents are readable by `group:slack:<team id>`, a private \
                    channel's by its members' e-mail addresses (users:read.email is needed). For \
                    push, subscribe the app's Event Subscriptions to message.channels, \
                    message.groups and the channel events with the connector's events URL as \
                    Request URL, and give the app's Signing Secret as `signing_secret`.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }

    /// A user's name, address and whether it is a bot, from the cache or `users.info`.
    async fn user(&self, api: &Api<'_>, id: &str) -> Result<User, ProviderError> {
        let key = (api.key.clone(), id.to_owned());
        {
            let users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(user) = users.get(&key).filter(|u| u.at.elapsed() < USER_TTL) {
                return Ok(user.clone());
            }
        }
        let answer = match api
            .call(
                "users.info",
                &[("user", id.to_owned())],
                &format!("user {id}"),
            )
            .await
        {
            Ok(answer) => answer,
            // A user who left (or of another workspace): shown by id.
            Err(ProviderError::Resource { .. }) => json!({"user": {"id": id}}),
            Err(e) => return Err(e),
        };
        let user = &answer["user"];
        let name = [
            "/profile/display_name",
            "/profile/real_name",
            "/real_name",
            "/name",
        ]
        .iter()
        .map(|p| text_of(user, p).trim())
        .find(|n| !n.is_empty())
        .unwrap_or(id)
        .to_owned();
        let found = User {
            name,
            email: Some(text_of(user, "/profile/email").trim().to_lowercase())
                .filter(|e| !e.is_empty()),
            bot: user.get("is_bot").and_then(Value::as_bool) == Some(true)
                || user.get("is_app_user").and_then(Value::as_bool) == Some(true)
                || id == "USLACKBOT",
            at: Instant::now(),
        };
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if users.len() >= USERS_CACHED_MAX {
            users.retain(|_, u| u.at.elapsed() < USER_TTL);
            if users.len() >= USERS_CACHED_MAX {
                users.clear();
            }
        }
        users.insert(key, found.clone());
        Ok(found)
    }

    /// The name of a message's author (a bot's `username` when it has no user).
    async fn author(&self, api: &Api<'_>, message: &Value) -> Result<String, ProviderError> {
        let user = text_of(message, "/user");
        if user.is_empty() {
            let name = ["/username", "/bot_profile/name", "/bot_id"]
                .iter()
                .map(|p| text_of(message, p))
                .find(|n| !n.is_empty())
                .unwrap_or("someone");
            return Ok(name.to_owned());
        }
        Ok(self.user(api, user).await?.name)
    }
}

fn quoted(message: &str) -> String {
    message
        .chars()
        .filter(|c| !c.is_control())
        .take(QUOTED_MAX)
        .collect()
}

/// What an `ok:false` error (or an HTTP failure) of `method` means for the connector.
fn failure(status: u16, error: &str, needed: &str, what: &str) -> ProviderError {
    let error = quoted(error);
    match error.as_str() {
        "invalid_auth" | "not_authed" | "token_revoked" | "token_expired" | "account_inactive"
        | "no_permission" | "org_login_required" | "ekm_access_denied" => {
            ProviderError::Unauthorized {
                message: format!("Slack refused the token ({what}: {error}); reconnect the app"),
                http_status: status,
            }
        }
        "missing_scope" => ProviderError::Unauthorized {
            message: format!(
                "the token lacks a scope ({what}: missing_scope{}); reinstall the app with the \
                 scopes the setup guide names",
                if needed.is_empty() {
                    String::new()
                } else {
                    format!(", needs {}", quoted(needed))
                }
            ),
            http_status: status,
        },
        "not_in_channel"
        | "channel_not_found"
        | "is_archived"
        | "thread_not_found"
        | "method_not_supported_for_channel_type" => ProviderError::Resource {
            message: format!("Slack cannot read {what} ({error}); invite the bot to the channel"),
            http_status: status,
        },
        "internal_error"
        | "fatal_error"
        | "service_unavailable"
        | "request_timeout"
        | "team_added_to_org" => ProviderError::Transient {
            message: format!("Slack failed on {what} ({error}); engram tries again later"),
            http_status: status,
        },
        _ if status >= 500 || status == 408 => ProviderError::Transient {
            message: format!("Slack answered {status} to {what}"),
            http_status: status,
        },
        _ if status == 401 => ProviderError::Unauthorized {
            message: format!("Slack refused the token ({what}: {status})"),
            http_status: status,
        },
        "" => ProviderError::Resource {
            message: format!("Slack answered {status} to {what}"),
            http_status: status,
        },
        _ => ProviderError::Resource {
            message: format!("Slack refused {what} ({error})"),
            http_status: status,
        },
    }
}

/// The error of a rate limit not waited out.
fn rate_limit_error(wait: Duration, now: i64, what: &str) -> ProviderError {
    hosted::rate_limit_error(
        &format!("Slack is rate limiting this app ({what}: 429, its method's tier limit)"),
        wait,
        now,
    )
}

/// The Web API of one connector: where it is and the token that reads it.
struct Api<'a> {
    base: url::Url,
    token: String,
    /// The token's hash: the users cache's key.
    key: String,
    access: &'a Access,
}

impl std::fmt::Debug for Api<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl<'a> Api<'a> {
    async fn new(access: &'a Access, check: bool) -> Result<Self, ProviderError> {
        let token = credential(access, "token")
            .or_else(|| credential(access, "access_token"))
            .ok_or_else(|| {
                ProviderError::Invalid(
                    "the credentials hold no `token` (or `oauth` not yet authorized)".to_owned(),
                )
            })?;
        let base = crate::api_root(access, DEFAULT_API, check).await?;
        Ok(Self {
            base,
            key: crate::short_hash(token.as_bytes()),
            token: token.to_owned(),
            access,
        })
    }

    /// Calls `method` (a form POST) and answers its JSON when `ok`; a short `429` is waited out.
    async fn call(
        &self,
        method: &str,
        params: &[(&str, String)],
        what: &str,
    ) -> Result<Value, ProviderError> {
        let url = self
            .base
            .join(method)
            .map_err(|e| ProviderError::Invalid(format!("`api_url`: {e}")))?;
        let body = form(params);
        let headers = [
            ("authorization", format!("Bearer {}", self.token)),
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("accept", "application/json".to_owned()),
        ];
        let mut attempt = 0;
        loop {
            let fetched = self
                .access
                .outbound
                .request_read(
                    "POST",
                    &url,
                    &headers,
                    Some(body.clone().into_bytes()),
                    TIMEOUT,
                    ANSWER_MAX_BYTES,
                )
                .await
                .map_err(|e| unanswered("Slack", what, e))?;
            let answer: Value = serde_json::from_slice(&fetched.body).unwrap_or(Value::Null);
            let error = text_of(&answer, "/error");
            if fetched.status == 429 || error == "ratelimited" {
                let wait = retry_wait(fetched.header("retry-after"), attempt);
                if !waited_out(wait, &mut attempt, RATE_WAIT_MAX, RATE_RETRIES).await {
                    tracing::warn!(
                        http_status = fetched.status,
                        "Slack rate limited a connector"
                    );
                    return Err(rate_limit_error(wait, now_unix(), method));
                }
                continue;
            }
            if !(200..300).contains(&fetched.status)
                || answer.get("ok").and_then(Value::as_bool) != Some(true)
            {
                return Err(failure(
                    fetched.status,
                    error,
                    text_of(&answer, "/needed"),
                    what,
                ));
            }
            return Ok(answer);
        }
    }
}

/// A form body (built apart from the request: the serializer is not `Send`).
fn form(params: &[(&str, String)]) -> String {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in params {
        body.append_pair(key, value);
    }
    body.finish()
}

/// The next page's cursor of an answer (`response_metadata.next_cursor`), when there is one.
fn next_cursor(answer: &Value) -> Option<String> {
    Some(text_of(answer, "/response_metadata/next_cursor"))
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

fn channel_resource(channel: &Value) -> Option<DiscoveredResource> {
    let id = text_of(channel, "/id");
    if id.is_empty() || channel.get("is_member").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let private = channel.get("is_private").and_then(Value::as_bool) == Some(true);
    Some(DiscoveredResource {
        id: format!("channel:{id}"),
        name: format!("#{}", text_of(channel, "/name")),
        resource_type: "channel".to_owned(),
        metadata: json!({
            "name": channel.get("name"),
            "is_private": private,
            "is_archived": channel.get("is_archived"),
            "num_members": channel.get("num_members"),
            "topic": channel.pointer("/topic/value"),
            "purpose": channel.pointer("/purpose/value"),
        }),
    })
}

/// The channel id of a resource (`channel:<id>`, or a bare id).
fn channel_of(resource: &ResourceRef) -> Result<&str, ProviderError> {
    crate::hosted::prefixed_id(
        resource,
        "channel:",
        64,
        |c| c.is_ascii_alphanumeric(),
        "`channel:` and a Slack channel id",
    )
}

/// A Slack `ts` (`1712345678.000100`) as Unix seconds.
fn ts_seconds(ts: &str) -> i64 {
    ts.split('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

/// A Slack `ts` as RFC 3339.
fn ts_time(ts: &str) -> String {
    rfc3339(ts_seconds(ts))
}

/// `ts` compared as Slack's (fixed six decimals, so as text after the seconds' width).
fn ts_key(ts: &str) -> (i64, String) {
    (
        ts_seconds(ts),
        ts.split_once('.')
            .map(|(_, f)| f.to_owned())
            .unwrap_or_default(),
    )
}

/// Whether a history message is indexed as (the root of) a document.
fn indexed(message: &Value) -> bool {
    let subtype = text_of(message, "/subtype");
    if SKIPPED_SUBTYPES.contains(&subtype) || text_of(message, "/ts").is_empty() {
        return false;
    }
    // A reply also sent to the channel is part of its thread's document.
    let thread = text_of(message, "/thread_ts");
    thread.is_empty() || thread == text_of(message, "/ts")
}

fn reply_count(message: &Value) -> i64 {
    message
        .get("reply_count")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// A message's files that can be downloaded (not deleted, not external, not hidden).
fn files(message: &Value) -> Vec<&Value> {
    message
        .get("files")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter(|f| {
                    !text_of(f, "/id").is_empty()
                        && !text_of(f, "/url_private").is_empty()
                        && !matches!(
                            text_of(f, "/mode"),
                            "tombstone" | "hidden_by_limit" | "external"
                        )
                        && f.get("is_external").and_then(Value::as_bool) != Some(true)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The part of a thread's version its root tells.
fn root_version(message: &Value) -> String {
    format!(
        "{}|{}|{}|{}",
        text_of(message, "/ts"),
        text_of(message, "/edited/ts"),
        reply_count(message),
        text_of(message, "/latest_reply")
    )
}

/// A hash of every reply's `ts` and `edited.ts` (and text, for edits Slack does not mark).
fn replies_hash(replies: &[Value]) -> String {
    let mut all = String::new();
    for reply in replies {
        all.push_str(text_of(reply, "/ts"));
        all.push('|');
        all.push_str(text_of(reply, "/edited/ts"));
        all.push('|');
        all.push_str(text_of(reply, "/text"));
        all.push('\n');
    }
    crate::short_hash(all.as_bytes())
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    /// Every message of the history is listed (the end removes what was not seen).
    full: bool,
    /// Messages after this `ts` are listed (empty: all).
    oldest: String,
    /// Slack's `next_cursor` to go on from.
    cursor: Option<String>,
    /// The newest `ts` seen.
    latest: String,
    channel_name: String,
    private: bool,
    team_id: String,
    /// The workspace's address (`https://acme.slack.com/`), for permalinks.
    team_url: String,
    /// Who may read the channel's documents.
    readers: Vec<String>,
    acl_warning: String,
    /// Native ids and `ts` listed by this pass in the recent window.
    seen: Vec<(String, String)>,
    /// More were seen than are kept: no deletion is inferred from the window this pass.
    seen_capped: bool,
    /// Those the last pass listed in its window.
    before: Vec<(String, String)>,
    pages: u32,
}

impl Walk {
    /// Notes an object listed in the recent window (at most twice [`RECENT_MAX`]).
    fn note_seen(&mut self, native_id: &str, ts: &str) {
        if self.seen.len() >= 2 * RECENT_MAX {
            self.seen_capped = true;
            return;
        }
        self.seen.push((native_id.to_owned(), ts.to_owned()));
    }
}

/// The cursor a pass leaves.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Cursor {
    latest: String,
    /// When the last full pass ended (Unix seconds).
    full_at: i64,
    /// Native ids and `ts` listed in the recent window.
    recent: Vec<(String, String)>,
}

/// The `oldest` of an incremental pass after `latest`: the recent window before it.
fn window_start(latest: &str) -> String {
    let start = ts_seconds(latest) - REVISIT_S;
    if start <= 0 {
        String::new()
    } else {
        format!("{start}.000000")
    }
}

/// Whether `ts` lies in the window that starts at `oldest`.
fn in_window(ts: &str, oldest: &str) -> bool {
    oldest.is_empty() || ts_key(ts) > ts_key(oldest)
}

fn serialized<T: Serialize>(value: &T) -> Result<String, ProviderError> {
    serde_json::to_string(value).map_err(|e| ProviderError::Invalid(e.to_string()))
}

impl SlackProvider {
    /// The start of a pass over `channel`: the channel, the team, who may read it.
    async fn start_walk(
        &self,
        api: &Api<'_>,
        channel: &str,
        cursor: &Cursor,
    ) -> Result<Walk, ProviderError> {
        // Names and addresses are read afresh by each pass (kept for its length).
        self.users
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(key, _), _| *key != api.key);
        let team = api.call("auth.test", &[], "the token's workspace").await?;
        let info = api
            .call(
                "conversations.info",
                &[("channel", channel.to_owned())],
                &format!("channel {channel}"),
            )
            .await?;
        let info = &info["channel"];
        let private = info.get("is_private").and_then(Value::as_bool) == Some(true);
        let team_id = text_of(&team, "/team_id").to_owned();
        let full = cursor.latest.is_empty() || now_unix() - cursor.full_at >= FULL_PASS_EVERY_S;
        let mut walk = Walk {
            full,
            oldest: if full {
                String::new()
            } else {
                window_start(&cursor.latest)
            },
            latest: cursor.latest.clone(),
            channel_name: text_of(info, "/name").to_owned(),
            private,
            team_url: text_of(&team, "/url").to_owned(),
            before: cursor.recent.clone(),
            team_id,
            ..Walk::default()
        };
        if private {
            let (readers, warning) = self.members(api, channel).await?;
            walk.readers = readers;
            walk.acl_warning = warning;
        } else if walk.team_id.is_empty() {
            walk.acl_warning =
                "auth.test named no team: the channel's readers are not set".to_owned();
        } else {
            walk.readers = vec![format!("group:slack:{}", walk.team_id)];
        }
        Ok(walk)
    }

    /// The e-mail addresses of a private channel's members, and a warning when some could
    /// not be read.
    async fn members(
        &self,
        api: &Api<'_>,
        channel: &str,
    ) -> Result<(Vec<String>, String), ProviderError> {
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        let mut complete = false;
        for _ in 0..MEMBER_PAGES_MAX {
            let mut params = vec![
                ("channel", channel.to_owned()),
                ("limit", PER_PAGE.to_string()),
            ];
            if let Some(cursor) = &cursor {
                params.push(("cursor", cursor.clone()));
            }
            let answer = api
                .call(
                    "conversations.members",
                    &params,
                    &format!("the members of channel {channel}"),
                )
                .await?;
            ids.extend(
                answer["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
            cursor = next_cursor(&answer);
            if cursor.is_none() {
                complete = true;
                break;
            }
        }
        let mut warnings = Vec::new();
        if !complete || ids.len() > MEMBERS_MAX {
            ids.truncate(MEMBERS_MAX);
            warnings.push(format!(
                "the channel has more than {MEMBERS_MAX} members: only the first are readers"
            ));
        }
        let mut readers = Vec::new();
        let mut unread = 0;
        for id in &ids {
            let user = self.user(api, id).await?;
            match (&user.email, user.bot) {
                (_, true) => {}
                (Some(email), false) => readers.push(email.clone()),
                (None, false) => unread += 1,
            }
        }
        if unread > 0 {
            warnings.push(format!(
                "the e-mail addresses of {unread} member(s) could not be read (does the token \
                 have the users:read.email scope?): they are not readers until a pass reads them"
            ));
        }
        Ok((readers, warnings.join("; ")))
    }

    /// The replies of a thread (the root first), page by page.
    async fn replies(
        &self,
        api: &Api<'_>,
        channel: &str,
        ts: &str,
    ) -> Result<Vec<Value>, ProviderError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..REPLY_PAGES_MAX {
            let mut params = vec![
                ("channel", channel.to_owned()),
                ("ts", ts.to_owned()),
                ("limit", PER_PAGE.to_string()),
            ];
            if let Some(cursor) = &cursor {
                params.push(("cursor", cursor.clone()));
            }
            let answer = api
                .call(
                    "conversations.replies",
                    &params,
                    &format!("the thread {ts} of channel {channel}"),
                )
                .await?;
            all.extend(answer["messages"].as_array().into_iter().flatten().cloned());
            cursor = next_cursor(&answer);
            if cursor.is_none() {
                break;
            }
        }
        all.sort_by_key(|m| ts_key(text_of(m, "/ts")));
        all.dedup_by(|a, b| a.get("ts") == b.get("ts"));
        Ok(all)
    }

    async fn list_channel(
        &self,
        api: &Api<'_>,
        channel: &str,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let cursor: Cursor = if position.cursor.is_empty() {
            Cursor::default()
        } else {
            serde_json::from_str(&position.cursor).unwrap_or_default()
        };
        let first = position.within.is_empty();
        let mut walk = if first {
            self.start_walk(api, channel, &cursor).await?
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "channel {channel} holds more than a pass reads ({PASS_PAGES_MAX} pages of {PER_PAGE})"
            )));
        }
        let mut params = vec![
            ("channel", channel.to_owned()),
            ("limit", PER_PAGE.to_string()),
        ];
        if !walk.oldest.is_empty() {
            params.push(("oldest", walk.oldest.clone()));
        }
        if let Some(cursor) = &walk.cursor {
            params.push(("cursor", cursor.clone()));
        }
        let answer = api
            .call(
                "conversations.history",
                &params,
                &format!("the history of channel {channel}"),
            )
            .await?;
        let messages: Vec<&Value> = answer["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| indexed(m))
            .collect();
        let ids: Vec<String> = messages
            .iter()
            .map(|m| format!("{channel}:{}", text_of(m, "/ts")))
            .collect();
        let held = known.objects(&ids).await?;
        // The window whose threads are read at listing time (their replies' edits show).
        let recent_from = window_start(&format!("{}.000000", now_unix()));
        let mut entries = Vec::new();
        for message in messages {
            let ts = text_of(message, "/ts");
            if ts_key(ts) > ts_key(&walk.latest) {
                walk.latest = ts.to_owned();
            }
            let native_id = format!("{channel}:{ts}");
            let base = root_version(message);
            let mut participants = vec![self.author(api, message).await?];
            let mut thread_files: Vec<Value> = files(message).into_iter().cloned().collect();
            let version = if reply_count(message) > 0 && in_window(ts, &recent_from) {
                let replies = self.replies(api, channel, ts).await?;
                for reply in replies.iter().skip(1) {
                    let name = self.author(api, reply).await?;
                    if !participants.contains(&name) {
                        participants.push(name);
                    }
                    thread_files.extend(files(reply).into_iter().cloned());
                }
                format!("{base}|{}", replies_hash(&replies))
            } else {
                // Outside the window: the version stored, while the root says nothing changed.
                held.get(&native_id)
                    .map(|k| k.version.clone())
                    .filter(|v| v.starts_with(&format!("{base}|")) || *v == base)
                    .unwrap_or(base)
            };
            let recent = in_window(ts, &window_start(&walk.latest));
            if recent {
                walk.note_seen(&native_id, ts);
            }
            entries.push(self.thread_entry(
                &walk,
                channel,
                message,
                native_id,
                version,
                participants.clone(),
            ));
            for file in thread_files {
                let entry = self.file_entry(&walk, channel, ts, &file, &participants[0]);
                if recent {
                    walk.note_seen(&entry.native_id, ts);
                }
                entries.push(entry);
            }
        }
        let acl_warning = if first {
            walk.acl_warning.clone()
        } else {
            String::new()
        };
        let mut deleted = Vec::new();
        let next = match next_cursor(&answer) {
            Some(next) => {
                walk.cursor = Some(next);
                Some(serialized(&walk)?)
            }
            None => None,
        };
        let cursor = match next {
            Some(_) => String::new(),
            None => {
                let window = window_start(&walk.latest);
                if !walk.full && !walk.seen_capped {
                    // What the last pass listed in this pass's window and this one did not: gone.
                    let seen: std::collections::HashSet<&str> =
                        walk.seen.iter().map(|(id, _)| id.as_str()).collect();
                    deleted.extend(
                        walk.before
                            .iter()
                            .filter(|(id, ts)| {
                                in_window(ts, &walk.oldest) && !seen.contains(id.as_str())
                            })
                            .map(|(id, _)| id.clone()),
                    );
                }
                let mut recent: Vec<(String, String)> = walk
                    .seen
                    .iter()
                    .filter(|(_, ts)| in_window(ts, &window))
                    .cloned()
                    .collect();
                recent.sort_by_key(|r| std::cmp::Reverse(ts_key(&r.1)));
                recent.truncate(RECENT_MAX);
                serialized(&Cursor {
                    latest: walk.latest.clone(),
                    full_at: if walk.full {
                        now_unix()
                    } else {
                        cursor.full_at
                    },
                    recent,
                })?
            }
        };
        Ok(Page {
            entries,
            deleted,
            next,
            cursor,
            complete_listing: walk.full,
            acl_warning,
            ..Page::default()
        })
    }

    /// The fields every document of the channel carries.
    fn channel_fields(walk: &Walk, channel: &str) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("channel".into(), Value::from(walk.channel_name.clone()));
        fields.insert("channel_id".into(), Value::from(channel));
        fields.insert("private".into(), Value::from(walk.private));
        if !walk.readers.is_empty() || walk.private {
            set_readers(&mut fields, walk.readers.iter().cloned());
        }
        fields
    }

    fn permalink(walk: &Walk, channel: &str, ts: &str) -> String {
        if walk.team_url.is_empty() {
            return String::new();
        }
        let base = walk.team_url.trim_end_matches('/');
        format!("{base}/archives/{channel}/p{}", ts.replace('.', ""))
    }

    fn thread_entry(
        &self,
        walk: &Walk,
        channel: &str,
        message: &Value,
        native_id: String,
        version: String,
        participants: Vec<String>,
    ) -> Entry {
        let ts = text_of(message, "/ts");
        let replies = reply_count(message);
        let mut fields = Self::channel_fields(walk, channel);
        fields.insert(
            "kind".into(),
            Value::from(if replies > 0 { "thread" } else { "message" }),
        );
        fields.insert(
            "author".into(),
            Value::from(participants.first().cloned().unwrap_or_default()),
        );
        fields.insert("participants".into(), Value::from(participants));
        fields.insert("thread_ts".into(), Value::from(ts));
        fields.insert("reply_count".into(), Value::from(replies));
        fields.insert("has_files".into(), Value::from(!files(message).is_empty()));
        fields.insert(
            "edited".into(),
            Value::from(!text_of(message, "/edited/ts").is_empty()),
        );
        let text = text_of(message, "/text");
        let first_line: String = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no text)")
            .chars()
            .take(80)
            .collect();
        let edited = text_of(message, "/edited/ts");
        let latest = text_of(message, "/latest_reply");
        let modified = [ts, edited, latest]
            .into_iter()
            .filter(|t| !t.is_empty())
            .max_by_key(|t| ts_key(t))
            .unwrap_or(ts);
        Entry {
            native_id,
            version,
            title: format!("#{}: {first_line}", walk.channel_name),
            file_name: String::new(),
            url: Self::permalink(walk, channel, ts),
            modified_at: ts_time(modified),
            fields,
            content: None,
            state: String::new(),
        }
    }

    fn file_entry(
        &self,
        walk: &Walk,
        channel: &str,
        thread_ts: &str,
        file: &Value,
        shared_by: &str,
    ) -> Entry {
        let id = text_of(file, "/id");
        let name = text_of(file, "/name");
        let title = Some(text_of(file, "/title"))
            .filter(|t| !t.is_empty())
            .unwrap_or(name);
        let mut fields = Self::channel_fields(walk, channel);
        fields.insert("kind".into(), Value::from("file"));
        fields.insert("author".into(), Value::from(shared_by));
        fields.insert("thread_ts".into(), Value::from(thread_ts));
        fields.insert("has_files".into(), Value::from(true));
        fields.insert("mimetype".into(), Value::from(text_of(file, "/mimetype")));
        // The address to download is kept with the entry (never a token).
        let download = match text_of(file, "/url_private_download") {
            "" => text_of(file, "/url_private"),
            url => url,
        };
        let state = json!({
            "url": download,
            "size": file.get("size").and_then(Value::as_u64).unwrap_or(0),
        })
        .to_string();
        let changed = file
            .get("updated")
            .or_else(|| file.get("timestamp"))
            .or_else(|| file.get("created"))
            .and_then(Value::as_i64)
            .unwrap_or_default();
        Entry {
            native_id: format!("{channel}:file:{id}"),
            version: format!(
                "{id}|{}|{changed}",
                file.get("size").and_then(Value::as_u64).unwrap_or(0)
            ),
            title: format!("#{}: {title}", walk.channel_name),
            file_name: if name.is_empty() {
                id.to_owned()
            } else {
                name.to_owned()
            },
            url: text_of(file, "/permalink").to_owned(),
            modified_at: if changed > 0 {
                rfc3339(changed)
            } else {
                String::new()
            },
            fields,
            content: None,
            state,
        }
    }

    /// A thread as one text: where it is, then each message with its author and time.
    async fn render_thread(
        &self,
        api: &Api<'_>,
        entry: &Entry,
        messages: &[Value],
    ) -> Result<String, ProviderError> {
        let channel = entry
            .fields
            .get("channel")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut text = String::new();
        for (i, message) in messages.iter().enumerate() {
            let author = self.author(api, message).await?;
            let ts = text_of(message, "/ts");
            if i == 0 {
                text.push_str(&format!(
                    "Slack thread in #{channel}, started by {author} on {}",
                    ts_time(ts)
                ));
                if messages.len() > 1 {
                    text.push_str(&format!(", {} replies", messages.len() - 1));
                }
                text.push_str(".\n\n");
                text.push_str(&format!("{author}:\n"));
            } else {
                text.push_str(&format!("\n{author} replied on {}:\n", ts_time(ts)));
            }
            text.push_str(text_of(message, "/text").trim());
            if !text_of(message, "/edited/ts").is_empty() {
                text.push_str(" (edited)");
            }
            text.push('\n');
            for file in files(message) {
                let name = Some(text_of(file, "/title"))
                    .filter(|t| !t.is_empty())
                    .unwrap_or(text_of(file, "/name"));
                text.push_str(&format!("[file: {name}]\n"));
            }
        }
        Ok(text)
    }

    async fn fetch_file(
        &self,
        access: &Access,
        api: &Api<'_>,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let state: Value = serde_json::from_str(&entry.state).unwrap_or(Value::Null);
        let size = state.get("size").and_then(Value::as_u64).unwrap_or(0);
        if usize::try_from(size).unwrap_or(usize::MAX) > max_bytes {
            return Err(ProviderError::Object(format!(
                "{} is {size} bytes, more than the {max_bytes} an item may hold",
                entry.title
            )));
        }
        let url = url::Url::parse(text_of(&state, "/url")).map_err(|_| {
            ProviderError::Object(format!("{} has no download address", entry.title))
        })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(ProviderError::Object(format!(
                "{} has no download address",
                entry.title
            )));
        }
        let fetched = access
            .outbound
            .request_read(
                "GET",
                &url,
                &[("authorization", format!("Bearer {}", api.token))],
                None,
                TIMEOUT,
                max_bytes,
            )
            .await
            .map_err(|e| ProviderError::Object(format!("{}: {e}", entry.title)))?;
        if fetched.status == 429 {
            return Err(rate_limit_error(
                retry_wait(fetched.header("retry-after"), 0),
                now_unix(),
                "a file download",
            ));
        }
        if !(200..300).contains(&fetched.status) {
            return Err(ProviderError::Object(format!(
                "{} could not be downloaded (HTTP {})",
                entry.title, fetched.status
            )));
        }
        // Slack answers a sign-in page (HTML) instead of the file when the token may not read it.
        let html = fetched
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/html"));
        let named_html = entry.file_name.ends_with(".html") || entry.file_name.ends_with(".htm");
        if html && !named_html {
            return Err(ProviderError::Object(format!(
                "{} could not be downloaded: Slack answered a web page (does the token have \
                 files:read?)",
                entry.title
            )));
        }
        Ok(Content::File(fetched.body))
    }
}

/// A Slack Events API delivery: `X-Slack-Signature` (`v0=` and the hex HMAC-SHA256 of
/// `v0:{X-Slack-Request-Timestamp}:{body}` under the signing secret), the timestamp within five
/// minutes of now; `url_verification` answered with its challenge, `event_callback` a sync.
fn verify_slack_push(
    credentials: &Map<String, Value>,
    request: &crate::push::PushRequest<'_>,
) -> Result<crate::push::PushEvent, crate::push::PushError> {
    use crate::push::{hmac_sha256_matches, PushError, PushEvent};
    let secret = credentials
        .get("signing_secret")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(|| crate::push::secret(credentials, "Slack"), Ok)
        .map_err(|_| {
            PushError::Unsigned(
                "the connector has no `signing_secret`: give it the Slack app's Signing Secret"
                    .to_owned(),
            )
        })?;
    let signature = request
        .header("x-slack-signature")
        .ok_or_else(|| PushError::Unsigned("the event has no X-Slack-Signature".to_owned()))?;
    let timestamp = request.header("x-slack-request-timestamp").ok_or_else(|| {
        PushError::Unsigned("the event has no X-Slack-Request-Timestamp".to_owned())
    })?;
    let Some(hex) = signature.strip_prefix("v0=") else {
        return Err(PushError::Unsigned(
            "the event's X-Slack-Signature is not a v0 signature".to_owned(),
        ));
    };
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(request.body);
    if !hmac_sha256_matches(secret, &base, hex) {
        return Err(PushError::Unsigned(
            "the event's X-Slack-Signature does not match the connector's signing_secret"
                .to_owned(),
        ));
    }
    let sent: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| PushError::Unsigned("X-Slack-Request-Timestamp is not a time".to_owned()))?;
    if (request.now_unix - sent).abs() > PUSH_WINDOW_S {
        return Err(PushError::Stale(
            "the event's X-Slack-Request-Timestamp is more than five minutes away from now: a \
             replay, or a clock off"
                .to_owned(),
        ));
    }
    let body: Value = serde_json::from_slice(request.body)
        .map_err(|_| PushError::Malformed("the event's body is not JSON".to_owned()))?;
    match text_of(&body, "/type") {
        "url_verification" => {
            let challenge = text_of(&body, "/challenge");
            if challenge.is_empty() || challenge.len() > 1000 {
                return Err(PushError::Malformed(
                    "the url_verification event has no challenge".to_owned(),
                ));
            }
            Ok(PushEvent {
                delivery_id: format!(
                    "url_verification:{}",
                    crate::short_hash(challenge.as_bytes())
                ),
                event: "url_verification".to_owned(),
                ping: true,
            })
        }
        "event_callback" => {
            let event_id = text_of(&body, "/event_id");
            if event_id.is_empty() {
                return Err(PushError::Malformed(
                    "the event_callback has no event_id".to_owned(),
                ));
            }
            let kind = text_of(&body, "/event/type");
            let subtype = text_of(&body, "/event/subtype");
            let event = if kind == "message" && !subtype.is_empty() {
                subtype
            } else {
                kind
            };
            Ok(PushEvent {
                delivery_id: event_id.to_owned(),
                event: event.to_owned(),
                ping: false,
            })
        }
        // Slack says it stopped delivering for a while: a scheduled sync catches up.
        "app_rate_limited" => Ok(PushEvent {
            delivery_id: format!(
                "app_rate_limited:{}",
                body.get("minute_rate_limited")
                    .and_then(Value::as_i64)
                    .unwrap_or(sent)
            ),
            event: "app_rate_limited".to_owned(),
            ping: true,
        }),
        _ => Err(PushError::Malformed(
            "not a Slack Events API event (url_verification or event_callback)".to_owned(),
        )),
    }
}

/// The answer a verified `url_verification` wants: `{"challenge": …}`.
fn url_verification_answer(event: &crate::push::PushEvent, body: &[u8]) -> Option<Value> {
    if !event.ping || event.event != "url_verification" {
        return None;
    }
    let body: Value = serde_json::from_slice(body).ok()?;
    let challenge = text_of(&body, "/challenge");
    (!challenge.is_empty()).then(|| json!({ "challenge": challenge }))
}

#[async_trait]
impl Provider for SlackProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        // Slack's OAuth v2: bot scopes comma-separated; the client's id and secret in the token
        // request's form, as Slack documents it. `oauth.v2.access` answers the bot token at the
        // top level (`access_token`), and with token rotation a `refresh_token` and
        // `expires_in`; a refusal is `ok:false` with `error` (`invalid_code`,
        // `invalid_refresh_token`), which the OAuth client reads as a grant refused.
        Some(crate::oauth::ProviderOAuth {
            authorization_endpoint: "https://slack.com/oauth/v2/authorize",
            token_endpoint: "https://slack.com/api/oauth.v2.access",
            scope: SCOPES,
            client_auth: crate::oauth::ClientAuth::Post,
            extra_authorization_params: &[],
        })
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(verify_slack_push(credentials, request))
    }

    fn push_answer(&self, event: &crate::push::PushEvent, body: &[u8]) -> Option<Value> {
        url_verification_answer(event, body)
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, true).await?;
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..CHANNEL_PAGES_MAX {
            let mut params = vec![
                ("types", "public_channel,private_channel".to_owned()),
                ("exclude_archived", "true".to_owned()),
                ("limit", PER_PAGE.to_string()),
            ];
            if let Some(cursor) = &cursor {
                params.push(("cursor", cursor.clone()));
            }
            let answer = api
                .call("conversations.list", &params, "the bot's channels")
                .await?;
            found.extend(
                answer["channels"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(channel_resource),
            );
            cursor = next_cursor(&answer);
            if cursor.is_none() {
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
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let api = Api::new(access, true).await?;
        let channel = channel_of(resource)?;
        self.list_channel(&api, channel, position, known).await
    }

    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let api = Api::new(access, false).await?;
        if entry.fields.get("kind").and_then(Value::as_str) == Some("file") {
            return self.fetch_file(access, &api, entry, max_bytes).await;
        }
        let channel = channel_of(resource)?;
        let ts = entry
            .native_id
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        let read = async {
            let messages = self.replies(&api, channel, &ts).await?;
            if messages.is_empty() {
                return Err(ProviderError::Object(format!("{} is gone", entry.title)));
            }
            self.render_thread(&api, entry, &messages).await
        };
        match read.await {
            Ok(text) if text.len() > max_bytes => Err(ProviderError::Object(format!(
                "{} is longer than the {max_bytes} bytes an item may hold",
                entry.title
            ))),
            Ok(text) => Ok(Content::Text(text)),
            // A rate limit or rejected token stops the pass, not this object alone.
            Err(
                e @ (ProviderError::Object(_)
                | ProviderError::RateLimited { .. }
                | ProviderError::Unauthorized { .. }),
            ) => Err(e),
            Err(
                e @ (ProviderError::Resource { .. }
                | ProviderError::Transient { .. }
                | ProviderError::Invalid(_)),
            ) => Err(ProviderError::Object(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::{hmac_sha256_hex, PushError, PushRequest};

    fn signed(secret: &str, ts: i64, body: &str) -> Vec<(String, String)> {
        let base = format!("v0:{ts}:{body}");
        vec![
            (
                "x-slack-signature".to_owned(),
                format!("v0={}", hmac_sha256_hex(secret, base.as_bytes())),
            ),
            ("x-slack-request-timestamp".to_owned(), ts.to_string()),
        ]
    }

    fn credentials(secret: &str) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("token".into(), json!("xoxb-1"));
        map.insert("signing_secret".into(), json!(secret));
        map
    }

    #[test]
    fn events_verify_with_the_signing_secret_within_five_minutes() {
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let now = 1_531_420_618;
        let body = r#"{"type":"event_callback","event_id":"Ev1","event":{"type":"message","subtype":"message_deleted","channel":"C1"}}"#;
        let headers = signed(secret, now, body);
        let request = |headers: &[(String, String)], body: &str, now_unix: i64| {
            verify_slack_push(
                &credentials(secret),
                &PushRequest {
                    headers,
                    body: body.as_bytes(),
                    now_unix,
                },
            )
        };
        let event = request(&headers, body, now + 10).unwrap();
        assert_eq!(
            (event.delivery_id.as_str(), event.event.as_str(), event.ping),
            ("Ev1", "message_deleted", false)
        );
        assert!(matches!(
            request(&headers, body, now + 301),
            Err(PushError::Stale(_))
        ));
        assert!(matches!(
            request(&headers, &body.replace("C1", "C2"), now),
            Err(PushError::Unsigned(_))
        ));
        let forged = signed("another-secret-0000000000", now, body);
        assert!(matches!(
            request(&forged, body, now),
            Err(PushError::Unsigned(_))
        ));
        assert!(matches!(
            request(&[], body, now),
            Err(PushError::Unsigned(_))
        ));
        // The timestamp is signed: moving it breaks the signature.
        let mut moved = headers.clone();
        moved[1].1 = (now + 5).to_string();
        assert!(matches!(
            request(&moved, body, now),
            Err(PushError::Unsigned(_))
        ));
        // Slack's documented example: its signature for this body, secret and time.
        let example = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        let base = format!("v0:1531420618:{example}");
        assert_eq!(
            format!("v0={}", hmac_sha256_hex(secret, base.as_bytes())),
            expected
        );
    }

    #[test]
    fn url_verification_is_answered_with_its_challenge() {
        let secret = "signing-secret-0000000001";
        let body = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let headers = signed(secret, 100, body);
        let event = verify_slack_push(
            &credentials(secret),
            &PushRequest {
                headers: &headers,
                body: body.as_bytes(),
                now_unix: 100,
            },
        )
        .unwrap();
        assert!(event.ping);
        assert_eq!(
            SlackProvider::new().push_answer(&event, body.as_bytes()),
            Some(json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}))
        );
        let none = verify_slack_push(
            &Map::new(),
            &PushRequest {
                headers: &headers,
                body: body.as_bytes(),
                now_unix: 100,
            },
        );
        assert!(matches!(none, Err(PushError::Unsigned(_))));
    }

    #[test]
    fn slack_errors_map_to_reconnect_resource_and_retry() {
        let kind = |e: ProviderError| match e {
            ProviderError::Unauthorized { .. } => "reconnect",
            ProviderError::Resource { .. } => "resource",
            ProviderError::Transient { .. } => "retry",
            ProviderError::RateLimited { .. } => "limited",
            ProviderError::Object(_) | ProviderError::Invalid(_) => "other",
        };
        for (error, expected) in [
            ("invalid_auth", "reconnect"),
            ("token_revoked", "reconnect"),
            ("account_inactive", "reconnect"),
            ("missing_scope", "reconnect"),
            ("not_in_channel", "resource"),
            ("channel_not_found", "resource"),
            ("internal_error", "retry"),
            ("something_else", "resource"),
        ] {
            assert_eq!(kind(failure(200, error, "", "x")), expected, "{error}");
        }
        assert_eq!(kind(failure(503, "", "", "x")), "retry");
        let limited = rate_limit_error(Duration::from_secs(30), 1000, "conversations.history");
        assert!(matches!(
            limited,
            ProviderError::RateLimited {
                until_unix: 1030,
                ..
            }
        ));
        assert_eq!(retry_wait(Some("7"), 0), Duration::from_secs(7));
    }

    #[test]
    fn only_conversation_roots_are_documents_and_versions_follow_edits() {
        let root = json!({"type": "message", "ts": "1700000000.000100", "text": "hi", "reply_count": 2, "latest_reply": "1700000100.000200", "thread_ts": "1700000000.000100"});
        let reply = json!({"type": "message", "ts": "1700000100.000200", "thread_ts": "1700000000.000100", "subtype": "thread_broadcast"});
        let join = json!({"type": "message", "ts": "1700000000.000300", "subtype": "channel_join"});
        assert!(indexed(&root));
        assert!(!indexed(&reply));
        assert!(!indexed(&join));
        let mut edited = root.clone();
        edited["edited"] = json!({"user": "U1", "ts": "1700000200.000000"});
        assert_ne!(root_version(&root), root_version(&edited));
        let replies = vec![
            root.clone(),
            json!({"ts": "1700000100.000200", "text": "a"}),
        ];
        let mut changed = replies.clone();
        changed[1]["text"] = json!("b");
        assert_ne!(replies_hash(&replies), replies_hash(&changed));
        assert!(ts_key("1700000000.000100") < ts_key("1700000000.000200"));
        assert!(ts_key("999999999.999999") < ts_key("1000000000.000000"));
        assert_eq!(
            window_start("1700000000.000100"),
            format!("{}.000000", 1_700_000_000 - REVISIT_S)
        );
        assert!(in_window("1700000000.000100", ""));
    }

    #[test]
    fn channels_are_resources_only_where_the_bot_is_a_member() {
        let member = json!({"id": "C1", "name": "general", "is_member": true, "is_private": false});
        let outside = json!({"id": "C2", "name": "random", "is_member": false});
        let found = channel_resource(&member).unwrap();
        assert_eq!(
            (found.id.as_str(), found.name.as_str()),
            ("channel:C1", "#general")
        );
        assert!(channel_resource(&outside).is_none());
        let resource = |id: &str| ResourceRef {
            id: id.to_owned(),
            resource_type: "channel".to_owned(),
            filters: Value::Null,
            provider_metadata: Value::Null,
        };
        assert_eq!(channel_of(&resource("channel:C1")).unwrap(), "C1");
        assert!(channel_of(&resource("channel:../x")).is_err());
    }

    #[test]
    fn the_oauth_server_is_slacks_with_the_bot_scopes() {
        let provider = SlackProvider::new();
        let oauth = provider.oauth().unwrap();
        assert_eq!(
            oauth.token_endpoint,
            "https://slack.com/api/oauth.v2.access"
        );
        for scope in [
            "channels:history",
            "channels:read",
            "groups:history",
            "groups:read",
            "users:read",
            "users:read.email",
            "files:read",
        ] {
            assert!(oauth.scope.split(',').any(|s| s == scope), "{scope}");
            assert!(provider.info().setup_guide.contains(scope), "{scope}");
        }
        let info = provider.info();
        assert!(crate::check_credentials(info, &json!({"token": "xoxb-123-abc"})).is_ok());
        assert!(crate::check_credentials(info, &json!({"token": "not-a-token"})).is_err());
        assert!(crate::check_credentials(info, &json!({"api_url": "https://x"})).is_err());
    }
}
