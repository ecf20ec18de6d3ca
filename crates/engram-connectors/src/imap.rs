//! `imap`: the messages of a mailbox over IMAP (RFC 3501), each message a document parsed as an
//! e-mail and each named attachment a document of its own, parsed by its format. A resource is
//! a mailbox (`INBOX`, `Archive/2026`, from discovery). Messages are immutable under their UID
//! while the mailbox's UIDVALIDITY holds, so an object's native id is `uidvalidity:uid` (an
//! attachment's `uidvalidity:uid/n`) and a pass fetches only the UIDs engram does not hold; a
//! pass lists every UID, so expunged messages (and their attachments) leave engram, and a
//! mailbox rebuilt under a new UIDVALIDITY is synced again and its old objects removed. The
//! mailbox is opened read-only (`EXAMINE`, `BODY.PEEK`): syncing never marks mail as read.
//!
//! Connections use TLS (port 993) unless `security` is `none` (port 143, for a server on a
//! trusted network); the server's address passes the outbound policy before any connection.

use async_imap::types::Fetch;
use async_trait::async_trait;
use futures_util::TryStreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Known, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Messages read per page of a pass.
const MESSAGES: usize = 50;
/// The largest message read (a larger one is counted failed).
const MESSAGE_MAX_BYTES: u32 = 25 * 1024 * 1024;
/// The longest any one exchange with the server may take.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Mailboxes discovery offers at most.
const MAILBOXES_MAX: usize = 1_000;

pub struct ImapProvider {
    info: ProviderInfo,
}

impl Default for ImapProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl ImapProvider {
    pub fn new() -> Self {
        let field = |name, description| FieldInfo {
            name,
            data_type: "string",
            description,
            filter_key: Some(match name {
                "mailbox" => "additional_metadata.mailbox",
                "from" => "additional_metadata.from",
                "message_id" => "additional_metadata.message_id",
                _ => "additional_metadata.attachment",
            }),
        };
        Self {
            info: ProviderInfo {
                provider: "imap",
                category: "email",
                connector_type: "mailbox",
                rank: Some(8),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["message", "attachment"],
                fields: vec![
                    field("mailbox", "The mailbox the message is in"),
                    field("from", "The sender"),
                    field("message_id", "The message's Message-ID"),
                    field("attachment", "An attachment's file name"),
                ],
                credential_schema: json!({
                    "type": "object",
                    "properties": {
                        "host": {"type": "string", "minLength": 1, "maxLength": 253},
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "username": {"type": "string", "minLength": 1},
                        "password": {"type": "string", "minLength": 1},
                        "security": {"enum": ["tls", "none"]}
                    },
                    "required": ["host", "username", "password"],
                    "additionalProperties": false
                }),
                setup_guide: "Give the IMAP server's `host`, a `username` and `password` (an app password \
                    where the provider offers them), and optionally `port` (993) and `security` (`tls`, or \
                    `none` for a server on a trusted network, port 143). Configure a resource per mailbox \
                    (from discovery). Messages are read without marking them read; named attachments \
                    become documents of their own.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 900,
                },
            },
        }
    }
}

/// The connection: TLS, or plain TCP where the connector says so.
#[derive(Debug)]
enum Wire {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

type Session = async_imap::Session<Wire>;

fn transient(what: &str, err: impl std::fmt::Display) -> ProviderError {
    ProviderError::Transient {
        message: format!("IMAP {what}: {err}"),
        http_status: 0,
    }
}

/// Bounds one exchange with the server in time.
async fn timed<T>(
    what: &str,
    work: impl std::future::Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    tokio::time::timeout(TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(transient(what, "the server did not answer in time")))
}

struct Settings<'a> {
    host: &'a str,
    port: u16,
    username: &'a str,
    password: &'a str,
    tls: bool,
}

fn settings(access: &Access) -> Result<Settings<'_>, ProviderError> {
    let text = |key: &str| {
        access
            .credentials
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::Invalid(format!("credentials.{key} is required")))
    };
    let tls = access.credentials.get("security").and_then(Value::as_str) != Some("none");
    let port = access
        .credentials
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(if tls { 993 } else { 143 });
    Ok(Settings {
        host: text("host")?,
        port,
        username: text("username")?,
        password: text("password")?,
        tls,
    })
}

/// Logs in, after the outbound policy allowed the server's address.
#[allow(clippy::wildcard_enum_match_arm)] // every other failure is retried alike
async fn connect(access: &Access) -> Result<Session, ProviderError> {
    let s = settings(access)?;
    let target = format!("https://{}:{}/", s.host, s.port);
    access
        .outbound
        .check_url(&target)
        .await
        .map_err(|e| ProviderError::Invalid(format!("IMAP server: {e}")))?;
    timed("connection", async {
        let tcp = TcpStream::connect((s.host, s.port))
            .await
            .map_err(|e| transient("connection", e))?;
        let wire = if s.tls {
            let roots = tokio_rustls::rustls::RootCertStore::from_iter(
                webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
            );
            let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
            let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| transient("TLS", e))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(s.host.to_owned())
                .map_err(|e| ProviderError::Invalid(format!("IMAP host `{}`: {e}", s.host)))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| transient("TLS", e))?;
            Wire::Tls(Box::new(tls))
        } else {
            Wire::Plain(tcp)
        };
        let mut client = async_imap::Client::new(wire);
        client
            .read_response()
            .await
            .map_err(|e| transient("greeting", e))?
            .ok_or_else(|| transient("greeting", "the server closed the connection"))?;
        client
            .login(s.username, s.password)
            .await
            .map_err(|(err, _)| match err {
                async_imap::error::Error::No(message) | async_imap::error::Error::Bad(message) => {
                    ProviderError::Unauthorized {
                        message: format!("the IMAP server refused the login: {message}"),
                        http_status: 401,
                    }
                }
                other => transient("login", other),
            })
    })
    .await
}

/// Opens `mailbox` read-only; returns its UIDVALIDITY.
#[allow(clippy::wildcard_enum_match_arm)] // every other failure is retried alike
async fn examine(session: &mut Session, mailbox: &str) -> Result<u32, ProviderError> {
    let opened = session.examine(mailbox).await.map_err(|err| match err {
        async_imap::error::Error::No(message) => ProviderError::Resource {
            message: format!(
                "mailbox `{mailbox}` cannot be opened (removed at the source?): {message}"
            ),
            http_status: 404,
        },
        other => transient("EXAMINE", other),
    })?;
    Ok(opened.uid_validity.unwrap_or(0))
}

/// Where a pass is: the mailbox's UIDVALIDITY and the last UID listed.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Progress {
    validity: u32,
    after: u32,
}

/// What a message keeps between passes, so it is listed again (and, when engram must dispatch
/// it again, fetched) without being read: its title, date and fields, and its attachments
/// (index, file name).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct MessageState {
    title: String,
    modified_at: String,
    fields: Map<String, Value>,
    attachments: Vec<(usize, String)>,
}

/// A native id's parts: UIDVALIDITY, UID and, for an attachment, its index.
fn parse_native(native_id: &str) -> Option<(u32, u32, Option<usize>)> {
    let (validity, rest) = native_id.split_once(':')?;
    let (uid, part) = match rest.split_once('/') {
        Some((uid, part)) => (uid, Some(part.parse().ok()?)),
        None => (rest, None),
    };
    Some((validity.parse().ok()?, uid.parse().ok()?, part))
}

/// The named attachments of a parsed message, by their index among its attachments.
fn attachments<'a>(
    message: &'a mail_parser::Message<'a>,
) -> impl Iterator<Item = (usize, String, &'a [u8])> + 'a {
    use mail_parser::MimeHeaders as _;
    message.attachments().enumerate().filter_map(|(n, part)| {
        let name = part.attachment_name()?.trim();
        (!name.is_empty()).then(|| (n, name.to_owned(), part.contents()))
    })
}

/// A message's fields as listed: mailbox, UID, sender, Message-ID, subject.
fn message_fields(
    mailbox: &str,
    validity: u32,
    uid: u32,
    message: &mail_parser::Message<'_>,
) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("mailbox".into(), Value::from(mailbox));
    fields.insert("uid".into(), Value::from(uid));
    fields.insert("uid_validity".into(), Value::from(validity));
    if let Some(id) = message.message_id() {
        fields.insert("message_id".into(), Value::from(id));
    }
    if let Some(from) = message.from().and_then(|f| f.first()) {
        if let Some(address) = from.address() {
            fields.insert("from".into(), Value::from(address));
        }
    }
    if let Some(subject) = message.subject() {
        fields.insert("subject".into(), Value::from(subject));
    }
    fields
}

fn imap_url(access: &Access, mailbox: &str, validity: u32, uid: u32) -> String {
    let host = access
        .credentials
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or("");
    // RFC 5092: imap://host/mailbox;UIDVALIDITY=v/;UID=u
    format!("imap://{host}/{mailbox};UIDVALIDITY={validity}/;UID={uid}")
}

/// The entries of a message read in full: the message, then each named attachment.
fn read_entries(access: &Access, mailbox: &str, validity: u32, uid: u32, raw: &[u8]) -> Vec<Entry> {
    let native = format!("{validity}:{uid}");
    let Some(message) = mail_parser::MessageParser::default().parse(raw) else {
        // Not a message a parser can read: kept as its bytes (the e-mail reader decides).
        return vec![Entry {
            native_id: native.clone(),
            version: "1".into(),
            title: format!("message {uid}"),
            file_name: format!("{uid}.eml"),
            url: imap_url(access, mailbox, validity, uid),
            modified_at: String::new(),
            fields: message_fields_empty(mailbox, validity, uid),
            content: Some(Content::File(raw.to_vec())),
            state: String::new(),
        }];
    };
    let fields = message_fields(mailbox, validity, uid, &message);
    let subject = message.subject().unwrap_or("").to_owned();
    let modified_at = message.date().map(|d| d.to_rfc3339()).unwrap_or_default();
    let url = imap_url(access, mailbox, validity, uid);
    let title = if subject.is_empty() {
        format!("message {uid}")
    } else {
        subject
    };
    let mut state = MessageState {
        title: title.clone(),
        modified_at: modified_at.clone(),
        fields: fields.clone(),
        attachments: Vec::new(),
    };
    let mut entries = Vec::new();
    for (n, name, bytes) in attachments(&message) {
        state.attachments.push((n, name.clone()));
        let mut fields = fields.clone();
        fields.insert("attachment".into(), Value::from(name.as_str()));
        entries.push(Entry {
            native_id: format!("{native}/{n}"),
            version: "1".into(),
            title: name.clone(),
            file_name: name,
            url: url.clone(),
            modified_at: modified_at.clone(),
            fields,
            content: Some(Content::File(bytes.to_vec())),
            state: String::new(),
        });
    }
    entries.insert(
        0,
        Entry {
            native_id: native,
            version: "1".into(),
            title,
            file_name: format!("{uid}.eml"),
            url,
            modified_at,
            fields,
            content: Some(Content::File(raw.to_vec())),
            state: serde_json::to_string(&state).unwrap_or_default(),
        },
    );
    entries
}

fn message_fields_empty(mailbox: &str, validity: u32, uid: u32) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("mailbox".into(), Value::from(mailbox));
    fields.insert("uid".into(), Value::from(uid));
    fields.insert("uid_validity".into(), Value::from(validity));
    fields
}

/// The entries of a message engram holds: listed again from what it kept, content not read.
fn known_entries(
    access: &Access,
    mailbox: &str,
    validity: u32,
    uid: u32,
    known: crate::KnownObject,
) -> Vec<Entry> {
    let native = format!("{validity}:{uid}");
    let url = imap_url(access, mailbox, validity, uid);
    let kept: MessageState = serde_json::from_str(&known.state).unwrap_or_default();
    let fields = if kept.fields.is_empty() {
        message_fields_empty(mailbox, validity, uid)
    } else {
        kept.fields.clone()
    };
    let entry = |native_id: String, title: String, file_name: String, fields, state| Entry {
        native_id,
        version: "1".into(),
        title,
        file_name,
        url: url.clone(),
        modified_at: kept.modified_at.clone(),
        fields,
        content: None,
        state,
    };
    let title = if kept.title.is_empty() {
        format!("message {uid}")
    } else {
        kept.title.clone()
    };
    let mut entries = vec![entry(
        native.clone(),
        title,
        format!("{uid}.eml"),
        fields.clone(),
        known.state.clone(),
    )];
    for (n, name) in &kept.attachments {
        let mut fields = fields.clone();
        fields.insert("attachment".into(), Value::from(name.as_str()));
        entries.push(entry(
            format!("{native}/{n}"),
            name.clone(),
            name.clone(),
            fields,
            String::new(),
        ));
    }
    entries
}

/// `query` fetched for each of `uids` (none asked for none).
async fn fetch_each(
    session: &mut Session,
    uids: &[u32],
    query: &str,
) -> Result<Vec<Fetch>, ProviderError> {
    if uids.is_empty() {
        return Ok(Vec::new());
    }
    let set = uids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    session
        .uid_fetch(&set, query)
        .await
        .map_err(|e| transient("FETCH", e))?
        .try_collect()
        .await
        .map_err(|e| transient("FETCH", e))
}

/// The raw message under `uid`, when the mailbox still holds it.
async fn read_message(session: &mut Session, uid: u32) -> Result<Option<Vec<u8>>, ProviderError> {
    let fetches = fetch_each(session, &[uid], "(UID BODY.PEEK[])").await?;
    Ok(fetches
        .iter()
        .find(|f| f.uid == Some(uid))
        .and_then(|f| f.body().map(<[u8]>::to_vec)))
}

impl ImapProvider {
    async fn list_page(
        &self,
        access: &Access,
        mailbox: &str,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        let mut session = connect(access).await?;
        let page = timed("listing", async {
            let validity = examine(&mut session, mailbox).await?;
            let progress: Progress = serde_json::from_str(&position.within).unwrap_or_default();
            // A mailbox rebuilt mid-pass (a new UIDVALIDITY) is listed again from its start.
            let after = if progress.validity == validity {
                progress.after
            } else {
                0
            };
            let mut uids: Vec<u32> = session
                .uid_search(format!("UID {}:*", after.saturating_add(1)))
                .await
                .map_err(|e| transient("SEARCH", e))?
                .into_iter()
                .filter(|uid| *uid > after)
                .collect();
            uids.sort_unstable();
            let more = uids.len() > MESSAGES;
            uids.truncate(MESSAGES);
            let ids: Vec<String> = uids.iter().map(|uid| format!("{validity}:{uid}")).collect();
            let mut held = known.objects(&ids).await?;
            let fresh: Vec<u32> = uids
                .iter()
                .copied()
                .filter(|uid| !held.contains_key(&format!("{validity}:{uid}")))
                .collect();
            // Sizes first: a message over the limit is listed without content (and counted
            // failed when it is read).
            let mut sizes = std::collections::HashMap::new();
            for f in fetch_each(&mut session, &fresh, "(UID RFC822.SIZE)").await? {
                if let (Some(uid), Some(size)) = (f.uid, f.size) {
                    sizes.insert(uid, size);
                }
            }
            let small: Vec<u32> = fresh
                .iter()
                .copied()
                .filter(|uid| sizes.get(uid).is_some_and(|s| *s <= MESSAGE_MAX_BYTES))
                .collect();
            let mut bodies = std::collections::HashMap::new();
            for f in fetch_each(&mut session, &small, "(UID BODY.PEEK[])").await? {
                if let (Some(uid), Some(body)) = (f.uid, f.body()) {
                    bodies.insert(uid, body.to_vec());
                }
            }
            let mut entries = Vec::new();
            for uid in &uids {
                let native = format!("{validity}:{uid}");
                if let Some(kept) = held.remove(&native) {
                    entries.extend(known_entries(access, mailbox, validity, *uid, kept));
                } else if let Some(raw) = bodies.remove(uid) {
                    entries.extend(read_entries(access, mailbox, validity, *uid, &raw));
                } else if sizes.contains_key(uid) {
                    // Too large, or gone between the listing and the read: fetched (and refused)
                    // by `fetch`.
                    entries.push(Entry {
                        native_id: native,
                        version: "1".into(),
                        title: format!("message {uid}"),
                        file_name: format!("{uid}.eml"),
                        url: imap_url(access, mailbox, validity, *uid),
                        modified_at: String::new(),
                        fields: message_fields_empty(mailbox, validity, *uid),
                        content: None,
                        state: String::new(),
                    });
                }
            }
            let next = match (more, uids.last()) {
                (true, Some(last)) => Some(
                    serde_json::to_string(&Progress {
                        validity,
                        after: *last,
                    })
                    .map_err(|e| ProviderError::Invalid(e.to_string()))?,
                ),
                _ => None,
            };
            Ok(Page {
                entries,
                deleted: Vec::new(),
                complete_listing: next.is_none(),
                next,
                cursor: validity.to_string(),
                ..Page::default()
            })
        })
        .await;
        let _ = timed("logout", async {
            session.logout().await.map_err(|e| transient("LOGOUT", e))
        })
        .await;
        page
    }
}

#[async_trait]
impl Provider for ImapProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let mut session = connect(access).await?;
        let names = timed("LIST", async {
            let names: Vec<async_imap::types::Name> = session
                .list(Some(""), Some("*"))
                .await
                .map_err(|e| transient("LIST", e))?
                .try_collect()
                .await
                .map_err(|e| transient("LIST", e))?;
            Ok(names)
        })
        .await?;
        let _ = session.logout().await;
        let mut seen = HashSet::new();
        Ok(names
            .iter()
            .filter(|n| {
                !n.attributes()
                    .iter()
                    .any(|a| matches!(a, async_imap::types::NameAttribute::NoSelect))
            })
            .filter(|n| seen.insert(n.name().to_owned()))
            .take(MAILBOXES_MAX)
            .map(|n| DiscoveredResource {
                id: n.name().to_owned(),
                name: n.name().to_owned(),
                resource_type: "mailbox".to_owned(),
                metadata: json!({"delimiter": n.delimiter()}),
            })
            .collect())
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError> {
        self.list_page(access, &resource.id, position, known).await
    }

    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let Some((validity, uid, part)) = parse_native(&entry.native_id) else {
            return Err(ProviderError::Object(format!(
                "`{}` is not a message of this mailbox",
                entry.native_id
            )));
        };
        let mut session = connect(access).await?;
        let read = timed("FETCH", async {
            if examine(&mut session, &resource.id).await? != validity {
                return Ok(None);
            }
            read_message(&mut session, uid).await
        })
        .await;
        let _ = session.logout().await;
        let raw = read?.ok_or_else(|| {
            ProviderError::Object(format!("message {uid} is no longer in `{}`", resource.id))
        })?;
        if raw.len() > max_bytes.min(MESSAGE_MAX_BYTES as usize) {
            return Err(ProviderError::Object(format!(
                "message {uid} is {} bytes, over the limit",
                raw.len()
            )));
        }
        let Some(n) = part else {
            return Ok(Content::File(raw));
        };
        let message = mail_parser::MessageParser::default()
            .parse(&raw)
            .ok_or_else(|| ProviderError::Object(format!("message {uid} cannot be read")))?;
        let found = attachments(&message)
            .find(|(i, _, _)| *i == n)
            .map(|(_, _, bytes)| Content::File(bytes.to_vec()));
        found.ok_or_else(|| ProviderError::Object(format!("message {uid} has no attachment {n}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_ids_name_a_message_or_one_of_its_attachments() {
        assert_eq!(parse_native("17:42"), Some((17, 42, None)));
        assert_eq!(parse_native("17:42/3"), Some((17, 42, Some(3))));
        assert_eq!(parse_native("17"), None);
        assert_eq!(parse_native("a:1"), None);
    }

    #[test]
    fn a_message_is_listed_with_its_named_attachments() {
        let raw = b"From: Ana <ana@example.com>\r\nTo: ops@example.com\r\nSubject: Quarterly numbers\r\n\
Message-ID: <q3@example.com>\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n\
--b\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=\"q3.csv\"\r\n\r\nregion,revenue\r\nnorth,12\r\n--b--\r\n";
        let access = crate::test_access(serde_json::json!({}));
        let entries = read_entries(&access, "INBOX", 7, 3, raw);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].native_id, "7:3");
        assert_eq!(entries[0].title, "Quarterly numbers");
        assert_eq!(entries[0].fields["from"], "ana@example.com");
        assert_eq!(entries[0].fields["message_id"], "q3@example.com");
        assert_eq!(entries[1].native_id, "7:3/0");
        assert_eq!(entries[1].file_name, "q3.csv");
        assert_eq!(
            entries[1].content,
            Some(Content::File(b"region,revenue\r\nnorth,12".to_vec()))
        );
        let kept: MessageState = serde_json::from_str(&entries[0].state).unwrap();
        assert_eq!(kept.attachments, [(0, "q3.csv".to_owned())]);
        let again = known_entries(
            &access,
            "INBOX",
            7,
            3,
            crate::KnownObject {
                version: "1".into(),
                state: entries[0].state.clone(),
            },
        );
        let ids: Vec<&str> = again.iter().map(|e| e.native_id.as_str()).collect();
        assert_eq!(ids, ["7:3", "7:3/0"]);
        assert!(again.iter().all(|e| e.content.is_none()));
        assert_eq!(again[0].title, "Quarterly numbers");
        assert_eq!(again[1].fields["attachment"], "q3.csv");
        assert_eq!(again[1].fields["from"], "ana@example.com");
    }
}
