//! `gmail`: the messages of a Gmail mailbox, label by label, through the Gmail API v1
//! (`{gmail_api_url}/gmail/v1/users/me/…`, default `https://gmail.googleapis.com`; `api_url`
//! when `gmail_api_url` is not given), with the same Google OAuth app as Drive (`oauth`, scope
//! `gmail.readonly`) or a plain `access_token`.
//!
//! **Resources.** Discovery lists the mailbox's labels (`users.labels.list`): the system labels
//! that hold mail (INBOX, SENT, IMPORTANT, STARRED) and every user label, each `label:<id>`.
//!
//! **Passes.** The first pass notes the mailbox's `historyId` (`users.getProfile`) before it
//! lists the label's messages (`users.messages.list` with `labelIds`, page by page) with
//! `complete_listing`; each message new to engram is read with `format=full`. A message never
//! changes after it is sent, so one engram holds is not read again. Later passes follow the
//! mailbox's history from the stored `historyId` (`users.history.list` with `labelId` and
//! `historyTypes`): `messagesAdded` and `labelsAdded` of this label bring a message in,
//! `messagesDeleted` and `labelsRemoved` of this label take it out. Gmail keeps history for
//! about a week: a `404` on an expired `historyId` makes the pass a full listing again.
//!
//! **Content.** A message is one document: its headers (From, To, Cc, Date, Subject) and its
//! body, `text/plain` preferred over `text/html` (whose tags are dropped). Each attachment is a
//! document of its own (`<message id>/<n>`), read with `users.messages.attachments.get` when it
//! is at most the item's byte limit and parsed like an upload; at most [`ATTACHMENTS_MAX`] per
//! message.
//!
//! **Readers.** A mailbox's messages are readable by the mailbox's owner alone (the address of
//! `users.getProfile`): the To and Cc recipients hold their own copies in their own mailboxes,
//! and this copy carries the owner's labels and, for mail the owner sent, the Bcc recipients.
//!
//! **Push.** Gmail notifies changes only through Google Cloud Pub/Sub (`users.watch` on a topic),
//! not by a web hook: this provider pushes nothing; schedule its syncs.

use async_trait::async_trait;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Api;
use crate::hosted::{object_failure, saved_pass, text_of};
use crate::{
    rfc3339, set_readers, Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds,
    Known, Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

const SOURCE: &str = "Gmail";
const DEFAULT_API: &str = "https://gmail.googleapis.com";
const SCOPE: &str = "https://www.googleapis.com/auth/gmail.readonly";
/// Messages (or history records) asked per page.
const PAGE_SIZE: u32 = 100;
/// Pages one pass reads at most (a million messages).
const PASS_PAGES_MAX: u32 = 10_000;
/// Attachments of one message indexed at most.
const ATTACHMENTS_MAX: usize = 10;
/// Longest body of a message indexed (characters).
const BODY_MAX_CHARS: usize = 1_000_000;
/// System labels offered (the others hold no mail of their own or none worth indexing).
const SYSTEM_LABELS: &[&str] = &["INBOX", "SENT", "IMPORTANT", "STARRED"];
/// What a version of a message says (a message does not change once sent).
const MESSAGE_VERSION: &str = "m1";

/// Every Gmail API method the provider calls (the resource and method of the published
/// client), with the parameters it may send: the fake's check holds them to
/// `@googleapis/gmail`'s parameter types.
const METHODS: &[(&str, &[&str])] = &[
    ("Users$Getprofile", &["userId"]),
    ("Users$Labels$List", &["userId"]),
    (
        "Users$Messages$List",
        &[
            "userId",
            "labelIds",
            "maxResults",
            "pageToken",
            "includeSpamTrash",
        ],
    ),
    ("Users$Messages$Get", &["userId", "id", "format"]),
    (
        "Users$Messages$Attachments$Get",
        &["userId", "messageId", "id"],
    ),
    (
        "Users$History$List",
        &[
            "userId",
            "startHistoryId",
            "labelId",
            "historyTypes",
            "maxResults",
            "pageToken",
        ],
    ),
];

pub struct GmailProvider {
    info: ProviderInfo,
}

impl Default for GmailProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl GmailProvider {
    /// Every Gmail API method the provider calls (`Resource$Method` of the published client's
    /// parameter types) with the parameters it may send.
    pub fn methods() -> &'static [(&'static str, &'static [&'static str])] {
        METHODS
    }

    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "gmail",
                category: "communication",
                connector_type: "email",
                rank: Some(16),
                rbac_support: true,
                webhook_support: false,
                is_beta: true,
                indexed_object_types: &["message", "attachment"],
                fields: vec![
                    field("from", "string", "The sender (the From header)", Some("additional_metadata.from")),
                    field("to", "array", "The To and Cc addresses", Some("additional_metadata.to")),
                    field("subject", "string", "The Subject header", Some("additional_metadata.subject")),
                    field("thread_id", "string", "Gmail's thread id", Some("additional_metadata.thread_id")),
                    field("label", "string", "The label synced (INBOX, SENT or a user label's id)", Some("additional_metadata.label")),
                    field("has_attachments", "boolean", "Whether the message has attachments", Some("additional_metadata.has_attachments")),
                    field("date", "string", "When Gmail received the message (RFC 3339)", Some("additional_metadata.date")),
                    field("kind", "string", "message or attachment", Some("additional_metadata.kind")),
                ],
                credential_schema: super::credential_schema(json!({
                    "gmail_api_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000}
                })),
                setup_guide: "Create an OAuth client (Web application) in a Google Cloud project \
                    with the Gmail API enabled (the same app as for Google Drive serves), add the \
                    connector's OAuth callback as an authorized redirect URI, and give its client \
                    id and secret as `oauth`; authorize through `POST /connectors/{id}/oauth/start` \
                    (scope https://www.googleapis.com/auth/gmail.readonly; engram asks for offline \
                    access and refreshes the token). Or give an `access_token` you mint yourself \
                    (a service account with domain-wide delegation, same scope). Discovery offers \
                    the labels (`label:INBOX`, `label:SENT`, `label:<id>` for your own). Each \
                    message is a document (headers and the plain-text body), each attachment one \
                    more; later syncs follow the mailbox's history, so deleted and unlabelled \
                    messages leave engram. Documents are readable by the mailbox's owner only. \
                    Gmail pushes changes only through Google Cloud Pub/Sub, not to a web hook: \
                    this connector has no push; it syncs on its schedule.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 1800,
                },
            },
        }
    }
}

/// The label of a resource (`label:<id>`).
fn label_of(resource: &ResourceRef) -> Result<&str, ProviderError> {
    crate::hosted::prefixed_id(
        resource,
        "label:",
        200,
        |c| c.is_ascii_alphanumeric() || c == '_' || c == '-',
        "`label:` and a Gmail label id",
    )
}

/// A header of a message's payload.
fn header<'a>(message: &'a Value, name: &str) -> &'a str {
    message
        .pointer("/payload/headers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|h| text_of(h, "/name").eq_ignore_ascii_case(name))
        .map(|h| text_of(h, "/value"))
        .unwrap_or_default()
}

/// Base64url (padded or not) as text.
fn decoded(data: &str) -> Vec<u8> {
    let data = data.trim_end_matches('=');
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(data)
        .unwrap_or_default()
}

/// Every part of a payload, depth first.
fn parts(payload: &Value) -> Vec<&Value> {
    let mut out = vec![payload];
    let mut i = 0;
    while i < out.len() && out.len() < 500 {
        let children: Vec<&Value> = out[i]
            .get("parts")
            .and_then(Value::as_array)
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        out.extend(children);
        i += 1;
    }
    out
}

/// The body of a message: its first `text/plain` part, else its first `text/html` part without
/// tags.
fn body(message: &Value) -> String {
    let all = parts(&message["payload"]);
    let inline = |mime: &str| {
        all.iter()
            .find(|p| text_of(p, "/mimeType") == mime && text_of(p, "/filename").is_empty())
            .map(|p| String::from_utf8_lossy(&decoded(text_of(p, "/body/data"))).into_owned())
    };
    let text = inline("text/plain")
        .or_else(|| inline("text/html").map(|h| without_tags(&h)))
        .unwrap_or_default();
    text.chars().take(BODY_MAX_CHARS).collect()
}

/// HTML as text: tags dropped (scripts and styles with their content), entities of the
/// commonest kinds read.
fn without_tags(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let lower = after.get(..8).unwrap_or(after).to_ascii_lowercase();
        let skip_to = if lower.starts_with("<script") {
            after.to_ascii_lowercase().find("</script>").map(|i| i + 9)
        } else if lower.starts_with("<style") {
            after.to_ascii_lowercase().find("</style>").map(|i| i + 8)
        } else {
            after.find('>').map(|i| i + 1)
        };
        match skip_to {
            Some(n) => {
                if lower.starts_with("<br") || lower.starts_with("<p") || lower.starts_with("</p") {
                    out.push('\n');
                }
                rest = &after[n..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A message's attachments: (file name, media type, attachment id, size), at most
/// [`ATTACHMENTS_MAX`].
fn attachments(message: &Value) -> Vec<(String, String, String, u64)> {
    parts(&message["payload"])
        .into_iter()
        .filter(|p| {
            !text_of(p, "/filename").is_empty() && !text_of(p, "/body/attachmentId").is_empty()
        })
        .take(ATTACHMENTS_MAX)
        .map(|p| {
            (
                text_of(p, "/filename").to_owned(),
                text_of(p, "/mimeType").to_owned(),
                text_of(p, "/body/attachmentId").to_owned(),
                p.pointer("/body/size").and_then(Value::as_u64).unwrap_or(0),
            )
        })
        .collect()
}

/// The addresses of an address header (`"Ana" <ana@example.com>, bo@example.com`).
fn addresses(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter_map(|a| {
            let a = a.trim();
            let inner = match (a.rfind('<'), a.rfind('>')) {
                (Some(l), Some(r)) if l < r => &a[l + 1..r],
                _ => a,
            };
            let inner = inner.trim().to_lowercase();
            inner.contains('@').then_some(inner)
        })
        .collect()
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    /// A full listing (`users.messages.list`), else the history.
    full: bool,
    page_token: Option<String>,
    /// The mailbox's history id when the pass started (a full listing's next cursor).
    start_history: String,
    owner: String,
    pages: u32,
}

/// The cursor a pass leaves.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Cursor {
    history_id: String,
}

fn serialized<T: Serialize>(value: &T) -> Result<String, ProviderError> {
    serde_json::to_string(value).map_err(|e| ProviderError::Invalid(e.to_string()))
}

/// A history id as Gmail writes it (a string of digits; a number tolerated).
fn history_of(value: &Value) -> Option<String> {
    value
        .as_str()
        .map(str::to_owned)
        .or_else(|| value.as_u64().map(|n| n.to_string()))
        .filter(|h| !h.is_empty())
}

fn me() -> [&'static str; 4] {
    ["gmail", "v1", "users", "me"]
}

impl GmailProvider {
    /// The profile: the owner's address and the mailbox's history id.
    async fn profile(api: &Api<'_>) -> Result<(String, String), ProviderError> {
        let mut path = me().to_vec();
        path.push("profile");
        let profile = api.get(&path, &[], "the mailbox's profile").await?;
        let history = history_of(&profile["historyId"]).unwrap_or_default();
        Ok((text_of(&profile, "/emailAddress").to_lowercase(), history))
    }

    /// A message read whole, as its entries (the message, then its attachments); none when it
    /// is gone.
    async fn message_entries(
        &self,
        api: &Api<'_>,
        label: &str,
        owner: &str,
        id: &str,
    ) -> Result<Vec<Entry>, ProviderError> {
        let mut path = me().to_vec();
        path.extend(["messages", id]);
        let message = match api
            .get(
                &path,
                &[("format", "full".to_owned())],
                &format!("message {id}"),
            )
            .await
        {
            Ok(m) => m,
            Err(ProviderError::Resource {
                http_status: 404, ..
            }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let subject = header(&message, "Subject").to_owned();
        let from = header(&message, "From").to_owned();
        let mut to = addresses(header(&message, "To"));
        to.extend(addresses(header(&message, "Cc")));
        let date = message
            .get("internalDate")
            .and_then(|d| {
                d.as_str()
                    .and_then(|s| s.parse::<i64>().ok())
                    .or(d.as_i64())
            })
            .map(|ms| rfc3339(ms / 1000))
            .unwrap_or_default();
        let thread = text_of(&message, "/threadId").to_owned();
        let found = attachments(&message);
        let url = format!("https://mail.google.com/mail/#all/{id}");
        let mut fields = serde_json::Map::new();
        fields.insert("from".into(), json!(from));
        fields.insert("to".into(), json!(to));
        fields.insert("subject".into(), json!(subject));
        fields.insert("thread_id".into(), json!(thread));
        fields.insert("label".into(), json!(label));
        fields.insert("has_attachments".into(), json!(!found.is_empty()));
        fields.insert("date".into(), json!(date));
        if !owner.is_empty() {
            set_readers(&mut fields, [owner.to_owned()]);
        }
        let mut text = String::new();
        for (name, value) in [
            ("From", from.as_str()),
            ("To", header(&message, "To")),
            ("Cc", header(&message, "Cc")),
            ("Date", header(&message, "Date")),
            ("Subject", subject.as_str()),
        ] {
            if !value.is_empty() {
                text.push_str(&format!("{name}: {value}\n"));
            }
        }
        text.push('\n');
        text.push_str(&body(&message));
        let title = if subject.is_empty() {
            "(no subject)".to_owned()
        } else {
            subject.clone()
        };
        let mut message_fields = fields.clone();
        message_fields.insert("kind".into(), json!("message"));
        let mut out = vec![Entry {
            native_id: id.to_owned(),
            version: format!("{MESSAGE_VERSION}|{}", found.len()),
            title: title.clone(),
            file_name: String::new(),
            url: url.clone(),
            modified_at: date.clone(),
            fields: message_fields,
            content: Some(Content::Text(text)),
            state: String::new(),
        }];
        for (n, (name, mime, attachment, size)) in found.into_iter().enumerate() {
            let mut fields = fields.clone();
            fields.insert("kind".into(), json!("attachment"));
            fields.insert("mime_type".into(), json!(mime));
            fields.insert("size".into(), json!(size));
            fields.insert("attachment_id".into(), json!(attachment));
            out.push(Entry {
                native_id: format!("{id}/{}", n + 1),
                version: MESSAGE_VERSION.to_owned(),
                title: format!("{title}: {name}"),
                file_name: name,
                url: url.clone(),
                modified_at: date.clone(),
                fields,
                content: None,
                state: String::new(),
            });
        }
        Ok(out)
    }

    /// The entries of `ids` (messages of the label): those engram holds as they are, the others
    /// read.
    async fn entries_of(
        &self,
        api: &Api<'_>,
        label: &str,
        owner: &str,
        ids: &[String],
        known: &dyn Known,
    ) -> Result<Vec<Entry>, ProviderError> {
        let held = known.objects(ids).await?;
        let mut out = Vec::new();
        for id in ids {
            let count = held
                .get(id)
                .and_then(|k| k.version.strip_prefix(&format!("{MESSAGE_VERSION}|")))
                .and_then(|n| n.parse::<usize>().ok());
            match count {
                Some(count) => {
                    // Held: the same message (listed so a full pass keeps it), not read again.
                    let mut native = vec![id.clone()];
                    native.extend((1..=count.min(ATTACHMENTS_MAX)).map(|n| format!("{id}/{n}")));
                    let versions = known.objects(&native).await?;
                    for native_id in native {
                        let version = versions
                            .get(&native_id)
                            .map(|k| k.version.clone())
                            .unwrap_or_else(|| MESSAGE_VERSION.to_owned());
                        out.push(Entry {
                            native_id,
                            version,
                            title: String::new(),
                            file_name: String::new(),
                            url: String::new(),
                            modified_at: String::new(),
                            fields: serde_json::Map::new(),
                            content: None,
                            state: String::new(),
                        });
                    }
                }
                None => out.extend(self.message_entries(api, label, owner, id).await?),
            }
        }
        Ok(out)
    }

    /// The native ids engram holds of deleted messages (the messages and their attachments).
    async fn held_of(
        &self,
        ids: &[String],
        known: &dyn Known,
    ) -> Result<Vec<String>, ProviderError> {
        let mut native = Vec::new();
        for id in ids {
            native.push(id.clone());
            native.extend((1..=ATTACHMENTS_MAX).map(|n| format!("{id}/{n}")));
        }
        let held = known.objects(&native).await?;
        Ok(native
            .into_iter()
            .filter(|n| held.contains_key(n))
            .collect())
    }

    async fn list_label(
        &self,
        api: &Api<'_>,
        label: &str,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let cursor: Cursor = if position.cursor.is_empty() {
            Cursor::default()
        } else {
            serde_json::from_str(&position.cursor).unwrap_or_default()
        };
        let mut walk: Walk = if position.within.is_empty() {
            let (owner, history) = Self::profile(api).await?;
            if cursor.history_id.is_empty() {
                Walk {
                    full: true,
                    start_history: history,
                    owner,
                    ..Walk::default()
                }
            } else {
                Walk {
                    full: false,
                    page_token: None,
                    start_history: cursor.history_id.clone(),
                    owner,
                    ..Walk::default()
                }
            }
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "label {label} holds more than a pass reads ({PASS_PAGES_MAX} pages of {PAGE_SIZE})"
            )));
        }
        let mut page = Page::default();
        if !walk.full {
            let mut params = vec![
                ("startHistoryId", walk.start_history.clone()),
                ("labelId", label.to_owned()),
                ("historyTypes", "messageAdded".to_owned()),
                ("historyTypes", "messageDeleted".to_owned()),
                ("historyTypes", "labelAdded".to_owned()),
                ("historyTypes", "labelRemoved".to_owned()),
                ("maxResults", PAGE_SIZE.to_string()),
            ];
            if let Some(token) = &walk.page_token {
                params.push(("pageToken", token.clone()));
            }
            let mut path = me().to_vec();
            path.push("history");
            match api
                .get(&path, &params, &format!("the history of label {label}"))
                .await
            {
                Ok(answer) => {
                    // The final state of each message this page tells of, in order.
                    let mut present: Vec<(String, bool)> = Vec::new();
                    let mut note = |id: &str, here: bool| {
                        if id.is_empty() {
                            return;
                        }
                        present.retain(|(i, _)| i != id);
                        present.push((id.to_owned(), here));
                    };
                    for record in answer["history"].as_array().into_iter().flatten() {
                        for added in record["messagesAdded"].as_array().into_iter().flatten() {
                            let labels = &added["message"]["labelIds"];
                            let has = labels
                                .as_array()
                                .is_none_or(|l| l.iter().any(|x| x == label));
                            if has {
                                note(text_of(added, "/message/id"), true);
                            }
                        }
                        for changed in record["labelsAdded"].as_array().into_iter().flatten() {
                            if changed["labelIds"]
                                .as_array()
                                .is_some_and(|l| l.iter().any(|x| x == label))
                            {
                                note(text_of(changed, "/message/id"), true);
                            }
                        }
                        for changed in record["labelsRemoved"].as_array().into_iter().flatten() {
                            if changed["labelIds"]
                                .as_array()
                                .is_some_and(|l| l.iter().any(|x| x == label))
                            {
                                note(text_of(changed, "/message/id"), false);
                            }
                        }
                        for deleted in record["messagesDeleted"].as_array().into_iter().flatten() {
                            note(text_of(deleted, "/message/id"), false);
                        }
                    }
                    let added: Vec<String> = present
                        .iter()
                        .filter(|(_, here)| *here)
                        .map(|(id, _)| id.clone())
                        .collect();
                    let gone: Vec<String> = present
                        .iter()
                        .filter(|(_, here)| !*here)
                        .map(|(id, _)| id.clone())
                        .collect();
                    page.entries = self
                        .entries_of(api, label, &walk.owner, &added, known)
                        .await?;
                    page.deleted = self.held_of(&gone, known).await?;
                    walk.page_token = Some(text_of(&answer, "/nextPageToken"))
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned);
                    if walk.page_token.is_none() {
                        let next = history_of(&answer["historyId"])
                            .unwrap_or_else(|| walk.start_history.clone());
                        page.cursor = serialized(&Cursor { history_id: next })?;
                    } else {
                        page.next = Some(serialized(&walk)?);
                    }
                    return Ok(page);
                }
                // The history id expired (Gmail keeps about a week): list everything again.
                Err(ProviderError::Resource {
                    http_status: 404, ..
                }) => {
                    tracing::info!("Gmail's history expired: a full pass follows");
                    let (_, history) = Self::profile(api).await?;
                    walk = Walk {
                        full: true,
                        start_history: history,
                        owner: walk.owner,
                        pages: walk.pages,
                        ..Walk::default()
                    };
                }
                Err(e) => return Err(e),
            }
        }
        let mut params = vec![
            ("labelIds", label.to_owned()),
            ("maxResults", PAGE_SIZE.to_string()),
            ("includeSpamTrash", "false".to_owned()),
        ];
        if let Some(token) = &walk.page_token {
            params.push(("pageToken", token.clone()));
        }
        let mut path = me().to_vec();
        path.push("messages");
        let answer = api
            .get(&path, &params, &format!("the messages of label {label}"))
            .await?;
        let ids: Vec<String> = answer["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| text_of(m, "/id").to_owned())
            .filter(|id| !id.is_empty())
            .collect();
        page.entries = self
            .entries_of(api, label, &walk.owner, &ids, known)
            .await?;
        walk.page_token = Some(text_of(&answer, "/nextPageToken"))
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if walk.page_token.is_none() {
            page.complete_listing = true;
            page.cursor = serialized(&Cursor {
                history_id: walk.start_history.clone(),
            })?;
        } else {
            page.next = Some(serialized(&walk)?);
        }
        Ok(page)
    }
}

#[async_trait]
impl Provider for GmailProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        Some(super::oauth(SCOPE))
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, SOURCE, "gmail_api_url", DEFAULT_API, true).await?;
        let (owner, _) = Self::profile(&api).await?;
        let mut path = me().to_vec();
        path.push("labels");
        let answer = api.get(&path, &[], "the mailbox's labels").await?;
        let mut found = Vec::new();
        for label in answer["labels"].as_array().into_iter().flatten() {
            let id = text_of(label, "/id");
            let system = text_of(label, "/type") == "system";
            if id.is_empty() || (system && !SYSTEM_LABELS.contains(&id)) {
                continue;
            }
            found.push(DiscoveredResource {
                id: format!("label:{id}"),
                name: text_of(label, "/name").to_owned(),
                resource_type: "label".to_owned(),
                metadata: json!({"system": system, "mailbox": owner}),
            });
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
        let label = label_of(resource)?;
        let api = Api::new(access, SOURCE, "gmail_api_url", DEFAULT_API, true).await?;
        self.list_label(&api, label, position, known).await
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let api = Api::new(access, SOURCE, "gmail_api_url", DEFAULT_API, false).await?;
        let Some((message, _)) = entry.native_id.split_once('/') else {
            return Err(ProviderError::Object(format!(
                "message {} has no content to fetch",
                entry.native_id
            )));
        };
        let attachment = entry
            .fields
            .get("attachment_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let size = entry
            .fields
            .get("size")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if usize::try_from(size).unwrap_or(usize::MAX) > max_bytes {
            return Err(ProviderError::Object(format!(
                "attachment {} holds {size} bytes, more than the {max_bytes} an item may",
                entry.native_id
            )));
        }
        let mut path = me().to_vec();
        path.extend(["messages", message, "attachments", attachment]);
        // The JSON answer carries the bytes in base64url: a third more than the file.
        let answer = api
            .get(&path, &[], &format!("attachment {}", entry.native_id))
            .await
            .map_err(object_failure)?;
        let bytes = decoded(text_of(&answer, "/data"));
        if bytes.len() > max_bytes {
            return Err(ProviderError::Object(format!(
                "attachment {} is larger than {max_bytes} bytes",
                entry.native_id
            )));
        }
        Ok(Content::File(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(text: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    }

    #[test]
    fn a_message_reads_its_plain_text_its_headers_and_its_attachments() {
        let message = json!({
            "id": "m1", "threadId": "t1", "internalDate": "1772323200000",
            "payload": {"mimeType": "multipart/mixed", "headers": [
                {"name": "From", "value": "Ana <ana@example.com>"},
                {"name": "To", "value": "Bo <Bo@Example.com>, cy@example.com"},
                {"name": "Subject", "value": "Plans"}],
              "parts": [
                {"partId": "0", "mimeType": "multipart/alternative", "filename": "", "parts": [
                    {"partId": "0.0", "mimeType": "text/plain", "filename": "", "body": {"size": 5, "data": encoded("plain words")}},
                    {"partId": "0.1", "mimeType": "text/html", "filename": "", "body": {"size": 5, "data": encoded("<p>html</p>")}}]},
                {"partId": "1", "mimeType": "application/pdf", "filename": "plan.pdf", "body": {"size": 900, "attachmentId": "ANGj"}}]}
        });
        assert_eq!(header(&message, "subject"), "Plans");
        assert_eq!(body(&message), "plain words");
        assert_eq!(
            addresses(header(&message, "To")),
            ["bo@example.com", "cy@example.com"]
        );
        assert_eq!(
            attachments(&message),
            [(
                "plan.pdf".to_owned(),
                "application/pdf".to_owned(),
                "ANGj".to_owned(),
                900
            )]
        );
        let html = json!({"payload": {"mimeType": "text/html", "body": {"data": encoded("<style>x{}</style><p>Hello &amp; bye</p><br>")}}});
        assert_eq!(body(&html).trim(), "Hello & bye");
    }
}
