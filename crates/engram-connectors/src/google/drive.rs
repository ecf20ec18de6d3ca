//! `google_drive`: the files of a Google account's My Drive and of the shared drives it is a
//! member of, through the Drive API v3 (`{api_url}/drive/v3/…`, default
//! `https://www.googleapis.com`), with the user's own Google OAuth app (`oauth`, scope
//! `drive.readonly`) or a plain `access_token` (a service account's domain-wide delegation).
//!
//! **Resources.** Discovery offers My Drive (`drive:root`) and each shared drive of `drives.list`
//! (`drive:<id>`), page by page.
//!
//! **Passes.** The first pass takes the changes feed's start (`changes.getStartPageToken`, for the
//! shared drive with `driveId`) before it lists every file (`files.list`, `q` = not trashed,
//! `corpora=user` for My Drive — its own files and those shared with the account — or
//! `corpora=drive` with `driveId` for a shared drive, `supportsAllDrives`,
//! `includeItemsFromAllDrives`, and `fields` naming what is read) with `complete_listing`, so a
//! change made while it lists is read again by the next pass. Later passes follow the changes
//! feed from the stored token (`changes.list` with `pageToken`, `includeRemoved`): a file
//! removed or trashed leaves engram, one changed is read again; the last page's
//! `newStartPageToken` is the next cursor. Once a day a pass lists every file again, so what the
//! feed may have missed is read and what left is swept.
//!
//! **Content.** Google Docs, Sheets and Slides are exported (`files.export`) as Office files
//! (docx, xlsx, pptx) and parsed like uploads: the Office formats keep headings, tables and
//! every sheet (`text/csv` exports only a spreadsheet's first sheet); Drive limits exports to
//! 10 MB. Other files are downloaded (`alt=media`) when at most the item's byte limit (a larger
//! one is counted failed without being downloaded). Folders, shortcuts, forms and the other
//! Google types without an export (sites, maps, drawings, scripts) are skipped.
//!
//! **Permissions.** Each file's `permissions` (`type`, `emailAddress`, `domain`, `role`) become
//! its readers: a `user` is its address, a `group` `group:<address>`, a `domain`
//! `group:domain:<domain>`, `anyone` everyone. Drive leaves `permissions` out of a listing for
//! shared-drive files: those are read with `permissions.list`; where they cannot be read (the
//! account lacks sharing rights on the file) the file carries no rule of its own and the page a
//! `page_acl_warning`. The readers are part of a file's version, so a sharing change sends the
//! file again.
//!
//! **Push.** Drive's `changes.watch` channels post notifications to the connector's events route
//! with `X-Goog-Channel-ID`, `X-Goog-Channel-Token`, `X-Goog-Resource-State` and
//! `X-Goog-Message-Number`: the token must equal the credentials' `channel_token` (compared in
//! constant time), a `sync` state only confirms the channel, any other state asks for a sync
//! (which reads the changes feed); a message number seen before is a replay. When engram's
//! public address is configured (`connectors.public_url`), each pass keeps a channel open on the
//! drive itself: `changes.watch` with `type=web_hook`, the connector's events URL as `address`
//! and the `channel_token` as `token`, a week long, renewed two days before it expires (the
//! channel it replaces stopped); its state lives in the cursor. Without that address the user
//! registers the channel the same way. A changes token Drive refuses (expired, 400/404/410)
//! makes the pass a full listing instead of a failure.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Api;
use crate::hosted::{object_failure, saved_pass, text_of};
use crate::push::{PushError, PushEvent, PushRequest};
use crate::{
    set_readers, Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Known,
    Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef, EVERYONE,
};

const SOURCE: &str = "Google Drive";
const DEFAULT_API: &str = "https://www.googleapis.com";
const SCOPE: &str = "https://www.googleapis.com/auth/drive.readonly";
/// How often a pass lists every file instead of following the changes feed.
const FULL_PASS_EVERY_S: i64 = 86_400;
/// Files (or changes) asked per page.
const PAGE_SIZE: u32 = 100;
/// Shared-drive pages discovery reads at most.
const DRIVE_PAGES_MAX: u32 = 100;
/// Pages one pass reads at most (a million files).
const PASS_PAGES_MAX: u32 = 10_000;
/// Readers read per file at most (one page of `permissions.list`).
const PERMISSIONS_MAX: u32 = 100;
/// Drive's own limit on an export.
const EXPORT_MAX_BYTES: usize = 10 * 1024 * 1024;

/// What a file listing reads of each file.
const FILE_FIELDS: &str = "id,name,mimeType,modifiedTime,size,md5Checksum,version,trashed,\
webViewLink,owners(emailAddress,displayName),parents,driveId,permissions(type,emailAddress,domain,role)";

/// Every Drive API method the provider calls (the resource and method of the published
/// client), with the parameters it may send: the fake's check holds them to
/// `@googleapis/drive`'s parameter types.
const METHODS: &[(&str, &[&str])] = &[
    ("Drives$List", &["pageSize", "pageToken", "fields"]),
    ("Drives$Get", &["driveId", "fields"]),
    (
        "Files$List",
        &[
            "q",
            "corpora",
            "driveId",
            "includeItemsFromAllDrives",
            "supportsAllDrives",
            "pageSize",
            "pageToken",
            "fields",
        ],
    ),
    ("Files$Get", &["fileId", "alt", "supportsAllDrives"]),
    ("Files$Export", &["fileId", "mimeType"]),
    (
        "Permissions$List",
        &["fileId", "supportsAllDrives", "pageSize", "fields"],
    ),
    (
        "Changes$Getstartpagetoken",
        &["driveId", "supportsAllDrives"],
    ),
    (
        "Changes$List",
        &[
            "pageToken",
            "driveId",
            "includeItemsFromAllDrives",
            "supportsAllDrives",
            "includeRemoved",
            "pageSize",
            "spaces",
            "fields",
        ],
    ),
    (
        "Changes$Watch",
        &[
            "pageToken",
            "driveId",
            "includeItemsFromAllDrives",
            "supportsAllDrives",
            "includeRemoved",
            "spaces",
        ],
    ),
    ("Channels$Stop", &[]),
];

/// How long a push channel engram registers lives (Drive's longest for the changes feed).
const CHANNEL_LIFE_MS: i64 = 7 * 86_400_000;
/// A channel is renewed by the first pass that finds less than this left of it.
const CHANNEL_RENEW_MS: i64 = 2 * 86_400_000;

/// The Google types exported, with the format and the extension of the export.
const EXPORTS: &[(&str, &str, &str)] = &[
    (
        "application/vnd.google-apps.document",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "docx",
    ),
    (
        "application/vnd.google-apps.spreadsheet",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "xlsx",
    ),
    (
        "application/vnd.google-apps.presentation",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "pptx",
    ),
];

pub struct GoogleDriveProvider {
    info: ProviderInfo,
}

impl Default for GoogleDriveProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl GoogleDriveProvider {
    /// Every Drive API method the provider calls (`Resource$Method` of the published client's
    /// parameter types) with the parameters it may send.
    pub fn methods() -> &'static [(&'static str, &'static [&'static str])] {
        METHODS
    }

    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "google_drive",
                category: "storage",
                connector_type: "drive",
                rank: Some(15),
                rbac_support: true,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["file", "document", "spreadsheet", "presentation"],
                fields: vec![
                    field(
                        "mime_type",
                        "string",
                        "The file's media type in Drive (application/vnd.google-apps.document for a Google Doc)",
                        Some("additional_metadata.mime_type"),
                    ),
                    field(
                        "owner",
                        "string",
                        "The e-mail address of the file's owner (none for shared-drive files)",
                        Some("additional_metadata.owner"),
                    ),
                    field(
                        "folder_id",
                        "string",
                        "The id of the folder holding the file",
                        Some("additional_metadata.folder_id"),
                    ),
                    field(
                        "drive_id",
                        "string",
                        "The shared drive's id, or root for My Drive",
                        Some("additional_metadata.drive_id"),
                    ),
                    field(
                        "drive",
                        "string",
                        "The shared drive's name, or My Drive",
                        Some("additional_metadata.drive"),
                    ),
                    field(
                        "modified_time",
                        "string",
                        "When the file last changed (RFC 3339)",
                        Some("additional_metadata.modified_time"),
                    ),
                    field(
                        "web_link",
                        "string",
                        "The file's address in Drive",
                        Some("additional_metadata.web_link"),
                    ),
                    field(
                        "size",
                        "integer",
                        "The file's size in bytes (none for Google Docs, Sheets and Slides)",
                        Some("additional_metadata.size"),
                    ),
                ],
                credential_schema: super::credential_schema(json!({
                    "channel_token": {"type": "string", "minLength": 16, "maxLength": 256}
                })),
                setup_guide: "Create an OAuth client (Web application) in a Google Cloud project \
                    with the Google Drive API enabled, add the connector's OAuth callback as an \
                    authorized redirect URI, and give its client id and secret as `oauth`; \
                    authorize through `POST /connectors/{id}/oauth/start` (scope \
                    https://www.googleapis.com/auth/drive.readonly; engram asks for offline access \
                    and refreshes the token). Or give an `access_token` you mint yourself (a \
                    service account with domain-wide delegation, same scope); it is not refreshed. \
                    Discovery offers My Drive (`drive:root`) and each shared drive (`drive:<id>`). \
                    Google Docs, Sheets and Slides are exported as docx, xlsx and pptx; other \
                    files are downloaded within the item size limit; folders, shortcuts and forms \
                    are skipped. Later syncs follow Drive's changes feed: trashed and removed \
                    files leave engram. Each file is readable by the addresses it is shared with \
                    (`group:<address>` for a Google Group, `group:domain:<domain>` for a domain, \
                    everyone for anyone with the link). For push, set a random `channel_token` \
                    (16+ characters): with engram's `connectors.public_url` set (an https address \
                    Google can reach), each sync keeps a week-long `changes.watch` channel open \
                    to the connector's events URL and renews it; without it, register one \
                    yourself: `POST https://www.googleapis.com/drive/v3/changes/watch?pageToken=<token>` \
                    with {\"id\": <a UUID>, \"type\": \"web_hook\", \"address\": <the connector's \
                    events URL>, \"token\": <channel_token>} (renew it before it expires).",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

/// The drive of a resource: `root` (My Drive) or a shared drive's id.
fn drive_of(resource: &ResourceRef) -> Result<&str, ProviderError> {
    crate::hosted::prefixed_id(
        resource,
        "drive:",
        200,
        |c| c.is_ascii_alphanumeric() || c == '-' || c == '_',
        "`drive:root` or `drive:` and a shared drive's id",
    )
}

/// The readers of a file's permissions (`None` when Drive did not say).
fn readers(permissions: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for permission in permissions {
        let email = text_of(permission, "/emailAddress").trim().to_lowercase();
        let domain = text_of(permission, "/domain").trim().to_lowercase();
        match text_of(permission, "/type") {
            "user" if !email.is_empty() => out.push(email),
            "group" if !email.is_empty() => out.push(format!("group:{email}")),
            "domain" if !domain.is_empty() => out.push(format!("group:domain:{domain}")),
            "anyone" => out.push(EVERYONE.to_owned()),
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// How a file's content is read: `Some((export format, extension))` for a Google type that is
/// exported, `None` for a download; `Err` for a type that is skipped.
fn export_of(mime: &str) -> Result<Option<(&'static str, &'static str)>, ()> {
    if let Some((_, to, ext)) = EXPORTS.iter().find(|(from, _, _)| *from == mime) {
        return Ok(Some((to, ext)));
    }
    if mime.starts_with("application/vnd.google-apps.") {
        // Folders, shortcuts, forms, sites, maps, drawings, scripts: nothing to export.
        return Err(());
    }
    Ok(None)
}

/// An extension for a downloaded file named without one.
fn extension_of(mime: &str) -> &'static str {
    match mime {
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/html" => "html",
        "text/csv" => "csv",
        "application/json" => "json",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => "pptx",
        _ => "",
    }
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    /// A full listing (`files.list`), else the changes feed.
    full: bool,
    /// The page to read next (`files.list`'s or `changes.list`'s `pageToken`).
    page_token: Option<String>,
    /// A full listing: where the changes feed starts once it ends.
    start_token: String,
    drive_name: String,
    pages: u32,
}

/// The cursor a pass leaves: where the changes feed goes on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Cursor {
    page_token: String,
    /// When the last full listing ended (Unix seconds; 0 for a cursor from before this was kept).
    #[serde(default)]
    full_at: i64,
    /// The push channel engram registered on the drive's changes, while it lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    channel: Option<Channel>,
}

/// A `changes.watch` channel: Drive's ids for it, when it expires, and where it posts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Channel {
    id: String,
    resource_id: String,
    expiration_ms: i64,
    address: String,
}

/// Stops a push channel (`channels.stop`): Drive posts nothing more through it.
async fn stop_channel(api: &Api<'_>, channel: &Channel) -> Result<(), ProviderError> {
    let stop = json!({"id": channel.id, "resourceId": channel.resource_id});
    api.post(
        &["drive", "v3", "channels", "stop"],
        &[],
        &stop,
        "a push channel",
    )
    .await
    .map(drop)
}

/// The push channel a cursor holds open that has not expired yet.
fn open_channel(cursor: &str) -> Option<Channel> {
    let cursor: Cursor = serde_json::from_str(cursor).ok()?;
    cursor
        .channel
        .filter(|c| c.expiration_ms > crate::now_unix().saturating_mul(1000))
}

/// A new channel id (Drive wants a unique string of letters, digits and `-_+/=`).
fn new_channel_id() -> Result<String, ProviderError> {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| ProviderError::Invalid("no randomness for a channel id".to_owned()))?;
    Ok(format!("engram-{}", hex::encode(bytes)))
}

/// Whether Drive refused a changes feed's page token (too old, or not one of this feed's): the
/// pass lists every file instead.
fn token_refused(err: &ProviderError) -> bool {
    matches!(
        err,
        ProviderError::Resource {
            http_status: 400 | 404 | 410,
            ..
        }
    )
}

impl Cursor {
    /// Whether the next pass lists every file: the first, and one a day.
    fn wants_full_listing(&self, now_unix: i64) -> bool {
        self.page_token.is_empty() || now_unix - self.full_at >= FULL_PASS_EVERY_S
    }
}

fn serialized<T: Serialize>(value: &T) -> Result<String, ProviderError> {
    serde_json::to_string(value).map_err(|e| ProviderError::Invalid(e.to_string()))
}

/// The parameters every call that reads a drive's files sends.
fn drive_params(drive: &str) -> Vec<(&'static str, String)> {
    if drive == "root" {
        vec![
            ("supportsAllDrives", "true".to_owned()),
            ("includeItemsFromAllDrives", "false".to_owned()),
        ]
    } else {
        vec![
            ("driveId", drive.to_owned()),
            ("supportsAllDrives", "true".to_owned()),
            ("includeItemsFromAllDrives", "true".to_owned()),
        ]
    }
}

impl GoogleDriveProvider {
    /// The page of the changes feed at the walk's token.
    async fn changes_page(
        &self,
        api: &Api<'_>,
        drive: &str,
        walk: &Walk,
    ) -> Result<Value, ProviderError> {
        let mut params = vec![
            ("includeRemoved", "true".to_owned()),
            ("spaces", "drive".to_owned()),
            ("pageSize", PAGE_SIZE.to_string()),
            (
                "fields",
                format!(
                    "nextPageToken,newStartPageToken,changes(changeType,removed,fileId,file({FILE_FIELDS}))"
                ),
            ),
            ("pageToken", walk.page_token.clone().unwrap_or_default()),
        ];
        params.extend(drive_params(drive));
        api.get(
            &["drive", "v3", "changes"],
            &params,
            &format!("the changes of drive {drive}"),
        )
        .await
    }

    /// Keeps a push channel open on the drive's changes when engram knows its events address
    /// and the credentials hold a `channel_token`: a channel is registered (`changes.watch`,
    /// `type=web_hook`, a week long) when there is none, when it expires within two days, or
    /// when the address moved, and the one it replaces is stopped (`channels.stop`). A refusal
    /// leaves the cursor as it was: the scheduled syncs go on, and the next pass tries again.
    async fn watched(&self, api: &Api<'_>, drive: &str, mut cursor: Cursor) -> Cursor {
        let (Some(address), Some(token)) = (
            api.access.events_url.clone(),
            crate::credential(api.access, "channel_token"),
        ) else {
            return cursor;
        };
        let now_ms = crate::now_unix().saturating_mul(1000);
        if cursor
            .channel
            .as_ref()
            .is_some_and(|c| c.address == address && c.expiration_ms - now_ms > CHANNEL_RENEW_MS)
        {
            return cursor;
        }
        let id = match new_channel_id() {
            Ok(id) => id,
            Err(_) => return cursor,
        };
        let mut params = vec![
            ("pageToken", cursor.page_token.clone()),
            ("includeRemoved", "true".to_owned()),
            ("spaces", "drive".to_owned()),
        ];
        params.extend(drive_params(drive));
        let body = json!({"id": id, "type": "web_hook", "address": address, "token": token,
                          "expiration": (now_ms + CHANNEL_LIFE_MS).to_string()});
        let what = format!("a push channel on drive {drive}");
        match api
            .post(&["drive", "v3", "changes", "watch"], &params, &body, &what)
            .await
        {
            Ok(answer) => {
                let channel = Channel {
                    id: Some(text_of(&answer, "/id"))
                        .filter(|i| !i.is_empty())
                        .unwrap_or(&id)
                        .to_owned(),
                    resource_id: text_of(&answer, "/resourceId").to_owned(),
                    expiration_ms: text_of(&answer, "/expiration")
                        .parse()
                        .unwrap_or(now_ms + CHANNEL_LIFE_MS),
                    address,
                };
                tracing::info!(
                    drive,
                    expiration_ms = channel.expiration_ms,
                    "a Google Drive push channel was registered"
                );
                if let Some(old) = cursor.channel.replace(channel) {
                    if let Err(err) = stop_channel(api, &old).await {
                        tracing::info!(drive, error = %err, "the old Google Drive push channel was not stopped; it expires on its own");
                    }
                }
            }
            Err(err) => {
                tracing::warn!(drive, error = %err, "a Google Drive push channel could not be registered; scheduled syncs go on");
            }
        }
        cursor
    }

    async fn start_walk(
        &self,
        api: &Api<'_>,
        drive: &str,
        full: bool,
        cursor: &Cursor,
    ) -> Result<Walk, ProviderError> {
        let drive_name = if drive == "root" {
            "My Drive".to_owned()
        } else {
            let found = api
                .get(
                    &["drive", "v3", "drives", drive],
                    &[("fields", "id,name".to_owned())],
                    &format!("shared drive {drive}"),
                )
                .await?;
            text_of(&found, "/name").to_owned()
        };
        let mut walk = Walk {
            full,
            drive_name,
            ..Walk::default()
        };
        if full {
            let mut params = vec![("supportsAllDrives", "true".to_owned())];
            if drive != "root" {
                params.push(("driveId", drive.to_owned()));
            }
            let start = api
                .get(
                    &["drive", "v3", "changes", "startPageToken"],
                    &params,
                    "the start of the changes feed",
                )
                .await?;
            walk.start_token = text_of(&start, "/startPageToken").to_owned();
            if walk.start_token.is_empty() {
                return Err(ProviderError::Transient {
                    message: "Google Drive named no startPageToken".to_owned(),
                    http_status: 200,
                });
            }
        } else {
            walk.page_token = Some(cursor.page_token.clone());
        }
        Ok(walk)
    }

    /// A file as an entry (`None` for a type that is skipped); `warn` when its readers could
    /// not be read.
    async fn entry(
        &self,
        api: &Api<'_>,
        drive: &str,
        walk: &Walk,
        file: &Value,
        warnings: &mut u32,
    ) -> Result<Option<Entry>, ProviderError> {
        let id = text_of(file, "/id");
        let mime = text_of(file, "/mimeType");
        let Ok(export) = export_of(mime) else {
            return Ok(None);
        };
        if id.is_empty() {
            return Ok(None);
        }
        let permissions = match file.get("permissions").and_then(Value::as_array) {
            Some(p) => Some(p.clone()),
            None => self.permissions(api, id).await?,
        };
        let name = text_of(file, "/name");
        let file_name = match export {
            Some((_, ext)) => format!("{name}.{ext}"),
            None if name.contains('.') || extension_of(mime).is_empty() => name.to_owned(),
            None => format!("{name}.{}", extension_of(mime)),
        };
        let modified = text_of(file, "/modifiedTime");
        let mut fields = serde_json::Map::new();
        fields.insert("mime_type".into(), json!(mime));
        let owner = text_of(file, "/owners/0/emailAddress");
        if !owner.is_empty() {
            fields.insert("owner".into(), json!(owner.to_lowercase()));
        }
        let folder = text_of(file, "/parents/0");
        if !folder.is_empty() {
            fields.insert("folder_id".into(), json!(folder));
        }
        fields.insert("drive_id".into(), json!(drive));
        fields.insert("drive".into(), json!(walk.drive_name));
        fields.insert("modified_time".into(), json!(modified));
        let link = text_of(file, "/webViewLink");
        fields.insert("web_link".into(), json!(link));
        if let Some(size) = file.get("size").and_then(|s| {
            s.as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .or(s.as_u64())
        }) {
            fields.insert("size".into(), json!(size));
        }
        let who = match &permissions {
            Some(p) => {
                let who = readers(p);
                set_readers(&mut fields, who.clone());
                who.join(",")
            }
            None => {
                *warnings += 1;
                "?".to_owned()
            }
        };
        let version = format!(
            "{}|{}|{}|{}",
            text_of(file, "/version"),
            modified,
            text_of(file, "/md5Checksum"),
            crate::short_hash(who.as_bytes())
        );
        Ok(Some(Entry {
            native_id: id.to_owned(),
            version,
            title: name.to_owned(),
            file_name,
            url: link.to_owned(),
            modified_at: modified.to_owned(),
            fields,
            content: None,
            state: String::new(),
        }))
    }

    /// A file's permissions by `permissions.list`; `None` when the account may not read them.
    async fn permissions(
        &self,
        api: &Api<'_>,
        file: &str,
    ) -> Result<Option<Vec<Value>>, ProviderError> {
        match api
            .get(
                &["drive", "v3", "files", file, "permissions"],
                &[
                    ("supportsAllDrives", "true".to_owned()),
                    ("pageSize", PERMISSIONS_MAX.to_string()),
                    (
                        "fields",
                        "nextPageToken,permissions(type,emailAddress,domain,role)".to_owned(),
                    ),
                ],
                &format!("the permissions of file {file}"),
            )
            .await
        {
            Ok(answer) if text_of(&answer, "/nextPageToken").is_empty() => Ok(Some(
                answer["permissions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            )),
            // More readers than a page: not all known, so no rule of its own.
            Ok(_) => Ok(None),
            Err(ProviderError::Resource { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list_drive(
        &self,
        api: &Api<'_>,
        drive: &str,
        position: &Position,
    ) -> Result<Page, ProviderError> {
        let cursor: Cursor = if position.cursor.is_empty() {
            Cursor::default()
        } else {
            serde_json::from_str(&position.cursor).unwrap_or_default()
        };
        let mut walk: Walk = if position.within.is_empty() {
            // A full listing first, then once a day: what the changes feed may have missed
            // (a change older than its token's reach) is read again, and what left is swept.
            let full = cursor.wants_full_listing(crate::now_unix());
            self.start_walk(api, drive, full, &cursor).await?
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "drive {drive} holds more than a pass reads ({PASS_PAGES_MAX} pages of {PAGE_SIZE})"
            )));
        }
        let mut page = Page::default();
        let mut warnings = 0;
        if walk.full {
            let mut params = vec![
                ("q", "trashed = false".to_owned()),
                (
                    "corpora",
                    if drive == "root" { "user" } else { "drive" }.to_owned(),
                ),
                ("pageSize", PAGE_SIZE.to_string()),
                ("fields", format!("nextPageToken,files({FILE_FIELDS})")),
            ];
            params.extend(drive_params(drive));
            if let Some(token) = &walk.page_token {
                params.push(("pageToken", token.clone()));
            }
            let answer = api
                .get(
                    &["drive", "v3", "files"],
                    &params,
                    &format!("the files of drive {drive}"),
                )
                .await?;
            for file in answer["files"].as_array().into_iter().flatten() {
                if file.get("trashed").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if let Some(entry) = self.entry(api, drive, &walk, file, &mut warnings).await? {
                    page.entries.push(entry);
                }
            }
            walk.page_token = Some(text_of(&answer, "/nextPageToken"))
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if walk.page_token.is_none() {
                page.complete_listing = true;
                let next = Cursor {
                    page_token: walk.start_token.clone(),
                    full_at: crate::now_unix(),
                    channel: cursor.channel.clone(),
                };
                page.cursor = serialized(&self.watched(api, drive, next).await)?;
            }
        } else {
            let answer = match self.changes_page(api, drive, &walk).await {
                Ok(answer) => answer,
                Err(err) if walk.pages == 1 && token_refused(&err) => {
                    // A token Drive refuses (expired, or from another feed): the pass goes on
                    // as a full listing rather than failing, and every pass after it.
                    tracing::warn!(drive, error = %err, "Google Drive refused the changes feed's token: the pass lists every file");
                    let full = self.start_walk(api, drive, true, &cursor).await?;
                    return Ok(Page {
                        next: Some(serialized(&full)?),
                        ..Page::default()
                    });
                }
                Err(err) => return Err(err),
            };
            for change in answer["changes"].as_array().into_iter().flatten() {
                if !matches!(text_of(change, "/changeType"), "file" | "") {
                    continue;
                }
                let id = text_of(change, "/fileId");
                let file = &change["file"];
                let in_drive = if drive == "root" {
                    text_of(file, "/driveId").is_empty()
                } else {
                    text_of(file, "/driveId") == drive
                };
                let gone = change.get("removed").and_then(Value::as_bool) == Some(true)
                    || file.get("trashed").and_then(Value::as_bool) == Some(true)
                    || !file.is_object()
                    || !in_drive;
                if gone {
                    if !id.is_empty() && !page.deleted.iter().any(|d| d == id) {
                        page.deleted.push(id.to_owned());
                    }
                    page.entries.retain(|e| e.native_id != id);
                    continue;
                }
                page.entries.retain(|e| e.native_id != id);
                page.deleted.retain(|d| d != id);
                if let Some(entry) = self.entry(api, drive, &walk, file, &mut warnings).await? {
                    page.entries.push(entry);
                }
            }
            walk.page_token = Some(text_of(&answer, "/nextPageToken"))
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if walk.page_token.is_none() {
                let next = text_of(&answer, "/newStartPageToken");
                let next = Cursor {
                    page_token: if next.is_empty() {
                        cursor.page_token.clone()
                    } else {
                        next.to_owned()
                    },
                    full_at: cursor.full_at,
                    channel: cursor.channel.clone(),
                };
                page.cursor = serialized(&self.watched(api, drive, next).await)?;
            }
        }
        if warnings > 0 {
            page.page_acl_warning = format!(
                "the sharing of {warnings} file(s) could not be read (the account lacks sharing \
                 rights on them): they carry no readers of their own"
            );
        }
        if walk.page_token.is_some() {
            page.next = Some(serialized(&walk)?);
        }
        Ok(page)
    }
}

/// Verifies a Drive notification (see the module's documentation).
fn verify(
    credentials: &serde_json::Map<String, Value>,
    request: &PushRequest<'_>,
) -> Result<PushEvent, PushError> {
    let expected = credentials
        .get("channel_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            PushError::Unsigned(
                "the connector has no `channel_token`: give the same token to the Drive watch \
                 channel and to the connector's credentials"
                    .to_owned(),
            )
        })?;
    let given = request.header("x-goog-channel-token").unwrap_or_default();
    if !crate::push::same_secret(expected, given) {
        return Err(PushError::Unsigned(
            "the notification's X-Goog-Channel-Token is not the connector's `channel_token`"
                .to_owned(),
        ));
    }
    let channel = request
        .header("x-goog-channel-id")
        .ok_or_else(|| PushError::Malformed("no X-Goog-Channel-ID".to_owned()))?;
    let number = request
        .header("x-goog-message-number")
        .and_then(|n| n.trim().parse::<u64>().ok())
        .ok_or_else(|| PushError::Malformed("no X-Goog-Message-Number".to_owned()))?;
    let state = request
        .header("x-goog-resource-state")
        .ok_or_else(|| PushError::Malformed("no X-Goog-Resource-State".to_owned()))?;
    let channel: String = channel
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let state: String = state
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(40)
        .collect();
    Ok(PushEvent {
        delivery_id: format!("{channel}:{number}"),
        ping: state == "sync",
        event: format!("drive.{state}"),
    })
}

#[async_trait]
impl Provider for GoogleDriveProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        Some(super::oauth(SCOPE))
    }

    fn verify_push(
        &self,
        credentials: &serde_json::Map<String, Value>,
        request: &PushRequest<'_>,
    ) -> Option<Result<PushEvent, PushError>> {
        Some(verify(credentials, request))
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let api = Api::new(access, SOURCE, "api_url", DEFAULT_API, true).await?;
        let mut found = vec![DiscoveredResource {
            id: "drive:root".to_owned(),
            name: "My Drive".to_owned(),
            resource_type: "drive".to_owned(),
            metadata: json!({"shared": false}),
        }];
        let mut token: Option<String> = None;
        for _ in 0..DRIVE_PAGES_MAX {
            let mut params = vec![
                ("pageSize", PAGE_SIZE.to_string()),
                ("fields", "nextPageToken,drives(id,name)".to_owned()),
            ];
            if let Some(token) = &token {
                params.push(("pageToken", token.clone()));
            }
            let answer = api
                .get(&["drive", "v3", "drives"], &params, "the shared drives")
                .await?;
            for drive in answer["drives"].as_array().into_iter().flatten() {
                let id = text_of(drive, "/id");
                if id.is_empty() {
                    continue;
                }
                found.push(DiscoveredResource {
                    id: format!("drive:{id}"),
                    name: text_of(drive, "/name").to_owned(),
                    resource_type: "drive".to_owned(),
                    metadata: json!({"shared": true}),
                });
            }
            token = Some(text_of(&answer, "/nextPageToken"))
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
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
        let drive = drive_of(resource)?;
        let api = Api::new(access, SOURCE, "api_url", DEFAULT_API, true).await?;
        self.list_drive(&api, drive, position).await
    }

    fn holds_open(&self, cursor: &str) -> bool {
        open_channel(cursor).is_some()
    }

    /// Stops the push channel engram registered, so Drive stops posting to a connector that
    /// is gone (it would answer 404 until the channel expired, a week at most).
    async fn release(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        cursor: &str,
    ) -> Result<(), ProviderError> {
        let Some(channel) = open_channel(cursor) else {
            return Ok(());
        };
        let api = Api::new(access, SOURCE, "api_url", DEFAULT_API, true).await?;
        stop_channel(&api, &channel).await
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let api = Api::new(access, SOURCE, "api_url", DEFAULT_API, false).await?;
        let id = entry.native_id.as_str();
        let mime = entry
            .fields
            .get("mime_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let what = format!("file {id}");
        let read = match export_of(mime) {
            Ok(Some((to, _))) => {
                api.download(
                    &["drive", "v3", "files", id, "export"],
                    &[("mimeType", to.to_owned())],
                    &what,
                    max_bytes.min(EXPORT_MAX_BYTES),
                )
                .await
            }
            Ok(None) => {
                let size = entry
                    .fields
                    .get("size")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if usize::try_from(size).unwrap_or(usize::MAX) > max_bytes {
                    return Err(ProviderError::Object(format!(
                        "file {id} holds {size} bytes, more than the {max_bytes} an item may"
                    )));
                }
                api.download(
                    &["drive", "v3", "files", id],
                    &[
                        ("alt", "media".to_owned()),
                        ("supportsAllDrives", "true".to_owned()),
                    ],
                    &what,
                    max_bytes,
                )
                .await
            }
            Err(()) => Err(ProviderError::Object(format!(
                "file {id} ({mime}) has no content to read"
            ))),
        };
        read.map(Content::File).map_err(object_failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_listing_comes_first_then_once_a_day() {
        let now = 1_800_000_000;
        assert!(Cursor::default().wants_full_listing(now));
        let cursor = Cursor {
            page_token: "42".into(),
            full_at: now - 3_600,
            channel: None,
        };
        assert!(!cursor.wants_full_listing(now));
        assert!(cursor.wants_full_listing(now + FULL_PASS_EVERY_S));
        // A cursor kept before the time was: listed in full once.
        let old: Cursor = serde_json::from_str(r#"{"page_token":"42"}"#).unwrap();
        assert!(old.wants_full_listing(now));
    }

    #[test]
    fn permissions_become_readers() {
        let permissions = json!([
            {"type": "user", "emailAddress": "Ana@Example.com", "role": "owner"},
            {"type": "group", "emailAddress": "eng@example.com", "role": "reader"},
            {"type": "domain", "domain": "example.com", "role": "reader"},
            {"type": "anyone", "role": "reader"},
            {"type": "user", "role": "reader"}
        ]);
        assert_eq!(
            readers(permissions.as_array().unwrap()),
            [
                EVERYONE,
                "ana@example.com",
                "group:domain:example.com",
                "group:eng@example.com"
            ]
        );
    }

    #[test]
    fn google_types_are_exported_and_folders_skipped() {
        assert_eq!(
            export_of("application/vnd.google-apps.document")
                .unwrap()
                .unwrap()
                .1,
            "docx"
        );
        assert_eq!(
            export_of("application/vnd.google-apps.spreadsheet")
                .unwrap()
                .unwrap()
                .1,
            "xlsx"
        );
        assert!(export_of("application/vnd.google-apps.folder").is_err());
        assert!(export_of("application/vnd.google-apps.shortcut").is_err());
        assert!(export_of("application/vnd.google-apps.form").is_err());
        assert_eq!(export_of("application/pdf"), Ok(None));
    }

    fn headers(token: &str, number: &str, state: &str) -> Vec<(String, String)> {
        vec![
            ("x-goog-channel-id".into(), "chan-1".into()),
            ("x-goog-channel-token".into(), token.into()),
            ("x-goog-resource-state".into(), state.into()),
            ("x-goog-message-number".into(), number.into()),
        ]
    }

    #[test]
    fn notifications_need_the_channel_token() {
        let credentials = json!({"channel_token": "a-channel-token-0123456789"});
        let credentials = credentials.as_object().unwrap();
        let check = |h: &[(String, String)]| {
            verify(
                credentials,
                &PushRequest {
                    headers: h,
                    body: b"",
                    now_unix: 0,
                },
            )
        };
        let event = check(&headers("a-channel-token-0123456789", "7", "change")).unwrap();
        assert_eq!(
            (event.delivery_id.as_str(), event.ping),
            ("chan-1:7", false)
        );
        assert!(
            check(&headers("a-channel-token-0123456789", "1", "sync"))
                .unwrap()
                .ping
        );
        assert!(matches!(
            check(&headers("a-channel-token-012345678X", "8", "change")),
            Err(PushError::Unsigned(_))
        ));
        assert!(matches!(
            check(&headers("", "8", "change")),
            Err(PushError::Unsigned(_))
        ));
        assert!(matches!(
            check(&headers("a-channel-token-0123456789", "", "change")),
            Err(PushError::Malformed(_))
        ));
        assert!(matches!(
            verify(
                &serde_json::Map::new(),
                &PushRequest {
                    headers: &headers("x", "1", "change"),
                    body: b"",
                    now_unix: 0
                }
            ),
            Err(PushError::Unsigned(_))
        ));
    }
}
