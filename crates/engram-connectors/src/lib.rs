//! Connectors: the [`Provider`] trait every source implements (one module per provider), the
//! [`Catalog`] of the providers this instance offers, credentials checked against each
//! provider's JSON Schema and sealed at rest ([`Sealer`]), and the providers themselves.
//!
//! A provider only reads its source. Syncing (what changed since the last pass, dispatching
//! objects as items, deleting what left the source, the run's record and the connector's health)
//! is engram-app's, the same for every provider.

mod atlassian;
mod confluence;
mod feed;
mod folder;
mod git;
mod github;
mod google;
mod hosted;
mod imap;
mod jira;
mod linear;
mod notion;
pub mod oauth;
mod postgres;
pub mod push;
mod s3;
mod slack;
mod vault;
mod web;
mod webdav;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use confluence::ConfluenceProvider;
pub use feed::FeedProvider;
pub use folder::FolderProvider;
pub use git::GitProvider;
pub use github::GitHubProvider;
pub use google::{GmailProvider, GoogleDriveProvider};
pub use imap::ImapProvider;
pub use jira::JiraProvider;
pub use linear::LinearProvider;
pub use notion::NotionProvider;
pub use postgres::PostgresProvider;
pub use s3::S3Provider;
pub use slack::SlackProvider;
pub use vault::{SealError, Sealer, KEY_FILE};
pub use web::WebProvider;
pub use webdav::WebDavProvider;

/// How often a provider's connectors may sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalBounds {
    pub min_s: u32,
    pub max_s: u32,
    pub default_s: u32,
}

impl IntervalBounds {
    /// The interval a request asks for: 0 or none is the default; out of bounds is refused.
    pub fn resolve(self, asked: Option<i64>) -> Result<u32, String> {
        match asked {
            None | Some(0) => Ok(self.default_s),
            Some(s) if s >= i64::from(self.min_s) && s <= i64::from(self.max_s) => {
                Ok(u32::try_from(s).unwrap_or(self.default_s))
            }
            Some(s) => Err(format!(
                "`sync_interval_seconds` {s} is outside {}..={} for this provider (0 for the default, {})",
                self.min_s, self.max_s, self.default_s
            )),
        }
    }
}

/// A field of synced documents.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldInfo {
    pub name: &'static str,
    pub data_type: &'static str,
    pub description: &'static str,
    /// Where a filter on it goes (`additional_metadata.<name>` or a top-level metadata key);
    /// `None` for a field that is only searchable.
    pub filter_key: Option<&'static str>,
}

impl FieldInfo {
    pub const fn new(
        name: &'static str,
        data_type: &'static str,
        description: &'static str,
        filter_key: Option<&'static str>,
    ) -> Self {
        Self {
            name,
            data_type,
            description,
            filter_key,
        }
    }
}

/// What the catalog says of a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    pub provider: &'static str,
    pub category: &'static str,
    pub connector_type: &'static str,
    pub rank: Option<u32>,
    pub rbac_support: bool,
    /// Whether the provider pushes events to `POST /connectors/{id}/events`
    /// ([`Provider::verify_push`]).
    pub webhook_support: bool,
    pub is_beta: bool,
    pub indexed_object_types: &'static [&'static str],
    pub fields: Vec<FieldInfo>,
    /// JSON Schema of `credentials`.
    pub credential_schema: Value,
    pub setup_guide: &'static str,
    pub interval: IntervalBounds,
}

/// Where a connector's source is and how to read it: its credentials (checked against the
/// schema) and the outbound client every network read goes through.
#[derive(Clone)]
pub struct Access {
    pub credentials: Map<String, Value>,
    pub outbound: engram_outbound::Outbound,
    /// The connector reading (keeps its local state, such as a git mirror, apart); empty when
    /// no connector exists yet (discovery before creating).
    pub owner: String,
    /// Where the provider can push the connector's events (`<public_url>/connectors/{id}/events`),
    /// for providers whose push channels engram registers itself (Drive's `changes.watch`);
    /// `None` when engram's public address is not configured or no connector exists yet.
    pub events_url: Option<String>,
}

/// A resource the account offers.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredResource {
    pub id: String,
    pub name: String,
    pub resource_type: String,
    pub metadata: Value,
}

/// A resource to read.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRef {
    pub id: String,
    pub resource_type: String,
    pub filters: Value,
    pub provider_metadata: Value,
}

/// Where a pass over a resource is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Position {
    /// The provider's cursor after the last completed pass; empty before the first.
    pub cursor: String,
    /// Where the pass in progress has got to; empty at its start.
    pub within: String,
}

/// An object at the source, as listed: enough to tell whether it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The provider's own id of the object (part of the dedupe key).
    pub native_id: String,
    /// Changes whenever the object does (an ETag, a modification time and size, a hash).
    pub version: String,
    pub title: String,
    /// A file name whose extension says the format; empty for text.
    pub file_name: String,
    pub url: String,
    /// When the object last changed, RFC 3339; empty when unknown.
    pub modified_at: String,
    /// The provider's own fields, written into the item's `additional_metadata`.
    pub fields: Map<String, Value>,
    /// The object's content when listing already read it (feeds); `None` to fetch it.
    pub content: Option<Content>,
    /// What the provider keeps of the object until the next pass (the web crawler: a page's
    /// validators and links); engram stores it with the object when it dispatches it and hands
    /// it back through [`Known`].
    pub state: String,
}

/// What engram holds of an object listed before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownObject {
    pub version: String,
    pub state: String,
}

/// The objects of the resource engram holds, for providers that read conditionally.
#[async_trait]
pub trait Known: Send + Sync {
    /// The version and state of each of `native_ids` engram holds (absent ones are new).
    async fn objects(
        &self,
        native_ids: &[String],
    ) -> Result<std::collections::HashMap<String, KnownObject>, ProviderError>;
}

/// What an object holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// A file, parsed like an upload.
    File(Vec<u8>),
    /// Text, indexed like app knowledge.
    Text(String),
}

/// One page of a pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Native ids deleted at the source (from a change feed).
    pub deleted: Vec<String>,
    /// Where the pass goes on from; `None` when this page ends it.
    pub next: Option<String>,
    /// The provider's cursor once the pass ends.
    pub cursor: String,
    /// The pass lists every object of the resource: objects it did not list left the source.
    pub complete_listing: bool,
    /// Non-empty: who may read the resource could not be read from the source (why, without
    /// secrets). The status shows it as `acl_warning`; a rule set on the resource still applies.
    pub acl_warning: String,
    /// Non-empty: the restrictions of some objects of this page could not be read; those objects
    /// carry no rule of their own (`page_acl_warning` in the status) until a later pass reads them.
    pub page_acl_warning: String,
}

/// Where an [`Entry`]'s readers go in its `fields` (the item's `additional_metadata.acl`, which
/// `acl` on `/query` filters by): see [`set_readers`].
pub const ACL_KEY: &str = "acl";
/// The principal every caller is: an object readable by anyone who can read the source.
pub const EVERYONE: &str = "__public__";

/// Records who may read an object, as the source says: e-mail addresses and `group:<name>`
/// principals, or [`EVERYONE`]. Not calling it leaves the object without a rule of its own
/// (the resource's rule, if any, applies); an empty list means nobody but the source's owner.
pub fn set_readers(fields: &mut Map<String, Value>, principals: impl IntoIterator<Item = String>) {
    let mut principals: Vec<String> = principals.into_iter().collect();
    principals.sort();
    principals.dedup();
    fields.insert(ACL_KEY.to_owned(), Value::from(principals));
}

/// Why a provider could not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The source rejected the credentials: the user must reconnect.
    #[error("the source rejected the credentials: {message}")]
    Unauthorized { message: String, http_status: u16 },
    /// This resource cannot be read and waiting will not help (gone, forbidden, refused).
    #[error("{message}")]
    Resource { message: String, http_status: u16 },
    /// Worth retrying later (unreachable, timed out, overloaded).
    #[error("{message}")]
    Transient { message: String, http_status: u16 },
    /// The source is rate limiting this account and said until when (Unix seconds): the next
    /// try waits at least until then.
    #[error("{message}")]
    RateLimited {
        message: String,
        http_status: u16,
        until_unix: i64,
    },
    /// One object cannot be read (too large, unreadable): it is counted failed, the rest go on.
    #[error("{0}")]
    Object(String),
    /// The connector's settings are wrong; only the user can fix them.
    #[error("{0}")]
    Invalid(String),
}

impl ProviderError {
    pub fn http_status(&self) -> u16 {
        match self {
            Self::Unauthorized { http_status, .. }
            | Self::Resource { http_status, .. }
            | Self::Transient { http_status, .. }
            | Self::RateLimited { http_status, .. } => *http_status,
            Self::Object(_) | Self::Invalid(_) => 0,
        }
    }
}

/// Nothing known: a first pass, or a listing outside a sync.
pub struct NothingKnown;

#[async_trait]
impl Known for NothingKnown {
    async fn objects(
        &self,
        _native_ids: &[String],
    ) -> Result<std::collections::HashMap<String, KnownObject>, ProviderError> {
        Ok(std::collections::HashMap::new())
    }
}

/// A source engram syncs from.
#[async_trait]
pub trait Provider: Send + Sync {
    fn info(&self) -> &ProviderInfo;

    /// The provider's OAuth 2.0 authorization server, when its connectors may authorize with
    /// an `oauth` member in their credentials (see [`oauth`]); `None` for tokens only.
    fn oauth(&self) -> Option<oauth::ProviderOAuth> {
        None
    }

    /// Verifies an event the provider pushed to the connector's public route
    /// ([`push`]); `None` for a provider that pushes nothing.
    fn verify_push(
        &self,
        _credentials: &Map<String, Value>,
        _request: &push::PushRequest<'_>,
    ) -> Option<Result<push::PushEvent, push::PushError>> {
        None
    }

    /// The JSON body the provider expects back for a verified event instead of engram's own
    /// answer (Slack's `url_verification` wants its `challenge`); answered at once with `200`.
    fn push_answer(&self, _event: &push::PushEvent, _body: &[u8]) -> Option<Value> {
        None
    }

    /// The signing secret a provider hands the endpoint in a first, unsigned request when its
    /// webhook is registered (Notion's `verification_token`, which the user then pastes back
    /// into Notion to activate the subscription); `None` for anything else. engram keeps it as
    /// the connector's `webhook_secret` when the connector has none.
    fn push_endpoint_secret(&self, _request: &push::PushRequest<'_>) -> Option<oauth::Secret> {
        None
    }

    /// The resources the account offers, checking the credentials on the way.
    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError>;

    /// The next page of a pass over `resource` from `position`; `known` tells what engram
    /// holds of the objects listed before.
    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        known: &dyn Known,
    ) -> Result<Page, ProviderError>;

    /// The content of an entry listed without it, at most `max_bytes`.
    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError>;

    /// Whether a resource whose pass left `cursor` holds something open at the source that
    /// should be let go of when the resource leaves engram (its connector deleted, or the
    /// resource removed): Drive's push channel. `false` for most providers.
    fn holds_open(&self, _cursor: &str) -> bool {
        false
    }

    /// Lets go of what [`Provider::holds_open`] found in `cursor` (Drive stops its channel).
    async fn release(
        &self,
        _access: &Access,
        _resource: &ResourceRef,
        _cursor: &str,
    ) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// The providers this instance offers, in display order.
pub struct Catalog {
    providers: Vec<Box<dyn Provider>>,
}

/// What the operator lets connectors reach.
#[derive(Debug, Clone, Default)]
pub struct CatalogOptions {
    /// Directories the folder provider may read; without any it is not offered.
    pub folder_roots: Vec<std::path::PathBuf>,
    /// Where providers keep local state (git mirrors).
    pub work_dir: std::path::PathBuf,
}

impl Catalog {
    pub fn new(options: &CatalogOptions) -> Self {
        let mut providers: Vec<Box<dyn Provider>> = vec![
            Box::new(FeedProvider::new()),
            Box::new(WebProvider::new()),
            Box::new(PostgresProvider::new()),
            Box::new(WebDavProvider::new()),
            Box::new(S3Provider::new()),
            Box::new(ImapProvider::new()),
            Box::new(GitHubProvider::new()),
            Box::new(NotionProvider::new()),
            Box::new(LinearProvider::new()),
            Box::new(ConfluenceProvider::new()),
            Box::new(JiraProvider::new()),
            Box::new(SlackProvider::new()),
            Box::new(GoogleDriveProvider::new()),
            Box::new(GmailProvider::new()),
        ];
        if !options.folder_roots.is_empty() {
            providers.push(Box::new(FolderProvider::new(options.folder_roots.clone())));
        }
        // The git provider needs the `git` program.
        let git = std::process::Command::new("git")
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if git {
            providers.push(Box::new(GitProvider::new(options.work_dir.join("git"))));
        }
        providers.sort_by(|a, b| {
            let (a, b) = (a.info(), b.info());
            (a.rank.is_none(), a.rank, a.provider).cmp(&(b.rank.is_none(), b.rank, b.provider))
        });
        Self { providers }
    }

    pub fn providers(&self) -> impl Iterator<Item = &dyn Provider> {
        self.providers.iter().map(|p| p.as_ref())
    }

    pub fn get(&self, provider: &str) -> Option<&dyn Provider> {
        self.providers().find(|p| p.info().provider == provider)
    }
}

/// Checks credentials against the provider's schema; the message names every failing place
/// (never a value).
pub fn check_credentials(info: &ProviderInfo, credentials: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(&info.credential_schema)
        .map_err(|e| format!("the provider's credential schema is invalid: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(credentials)
        .map(|error| {
            let at = error.instance_path().to_string();
            let place = if at.is_empty() {
                "credentials".to_owned()
            } else {
                format!("credentials{at}")
            };
            format!("{place}: {}", describe(&error))
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// A validation error in words that never repeat the value (it may be a secret).
#[allow(clippy::wildcard_enum_match_arm)] // every other kind reads the same
fn describe(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as Kind;
    match error.kind() {
        Kind::Required { property } => {
            format!("`{}` is required", property.as_str().unwrap_or("?"))
        }
        Kind::AdditionalProperties { unexpected } => {
            format!("unexpected field(s) {}", unexpected.join(", "))
        }
        Kind::Type { .. } => "has the wrong type".to_owned(),
        Kind::MinLength { limit } => format!("must hold at least {limit} characters"),
        Kind::MaxLength { limit } => format!("must hold at most {limit} characters"),
        Kind::Format { format } => format!("must be a {format}"),
        Kind::Enum { .. } => "is not one of the allowed values".to_owned(),
        _ => "does not match the schema".to_owned(),
    }
}

/// A short hex digest of `bytes` (SHA-256, 12 bytes): a version that changes with the content.
pub(crate) fn short_hash(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The credential schema of an HTTP source: HTTP Basic (`username` and `password`) or a bearer
/// `token`, both optional, and `list` (`feeds`, `sites`, …): addresses discovery offers.
pub(crate) fn http_credential_schema(list: &str) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            list: {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 100},
            "username": {"type": "string", "minLength": 1},
            "password": {"type": "string"},
            "token": {"type": "string", "minLength": 1}
        },
        "dependentRequired": {"username": ["password"], "password": ["username"]},
        "additionalProperties": false
    })
}

/// A list of strings in the credentials (`feeds`, `sites`): what discovery offers.
pub(crate) fn credential_list(access: &Access, key: &str) -> Vec<String> {
    access
        .credentials
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Unix seconds as RFC 3339 (UTC), or as the number when out of range.
pub(crate) fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| unix.to_string())
}

pub(crate) fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A non-empty string of the credentials.
pub(crate) fn credential<'a>(access: &'a Access, key: &str) -> Option<&'a str> {
    access
        .credentials
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The root of a hosted API: the credentials' `api_url` (a self-hosted edition, or a test's
/// fake), else `default`; checked against the outbound policy first when `check` (listing does;
/// fetching an object relies on the check every connection makes). It ends with `/`, without
/// query or fragment.
pub(crate) async fn api_root(
    access: &Access,
    default: &str,
    check: bool,
) -> Result<url::Url, ProviderError> {
    let raw = credential(access, "api_url").unwrap_or(default);
    let mut base = if check {
        access
            .outbound
            .check_url(raw)
            .await
            .map_err(|e| ProviderError::Invalid(format!("`api_url`: {e}")))?
    } else {
        url::Url::parse(raw).map_err(|e| ProviderError::Invalid(format!("`api_url`: {e}")))?
    };
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    base.set_query(None);
    base.set_fragment(None);
    Ok(base)
}

/// A test's access: `credentials` (a JSON object) and the default outbound policy.
#[cfg(test)]
pub(crate) fn test_access(credentials: Value) -> Access {
    Access {
        credentials: credentials.as_object().expect("an object").clone(),
        outbound: engram_outbound::Outbound::new(engram_outbound::AddressPolicy::default())
            .expect("an outbound client"),
        owner: String::new(),
        events_url: None,
    }
}

/// What an HTTP status from a source means for the connector. For the resource's own address
/// (`resource`: a feed, a site's start page) 401/403 are rejected credentials and 404/410 a
/// resource gone; elsewhere (a page of a site) they concern that page alone.
pub(crate) fn http_failure(status: u16, url: &str, resource: bool) -> Option<ProviderError> {
    match status {
        200..=299 | 304 => None,
        401 | 403 if resource => Some(ProviderError::Unauthorized {
            message: format!("{url} answered {status}"),
            http_status: status,
        }),
        404 | 410 if resource => Some(ProviderError::Resource {
            message: format!("{url} answered {status}: it is gone"),
            http_status: status,
        }),
        408 | 429 | 500..=599 => Some(ProviderError::Transient {
            message: format!("{url} answered {status}"),
            http_status: status,
        }),
        _ => Some(ProviderError::Resource {
            message: format!("{url} answered {status}"),
            http_status: status,
        }),
    }
}

/// The item id of a synced object: the dedupe key (provider, account scope, native id) hashed,
/// so a changed object replaces its item and a second sync never duplicates it.
pub fn item_id(provider: &str, account_scope: &str, native_id: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{provider}\u{0}{account_scope}\u{0}{native_id}").as_bytes(),
    );
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("cx_{provider}_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_take_the_default_for_zero_and_refuse_what_is_out_of_bounds() {
        let bounds = IntervalBounds {
            min_s: 60,
            max_s: 86_400,
            default_s: 3600,
        };
        assert_eq!(bounds.resolve(None), Ok(3600));
        assert_eq!(bounds.resolve(Some(0)), Ok(3600));
        assert_eq!(bounds.resolve(Some(60)), Ok(60));
        assert!(bounds.resolve(Some(59)).is_err());
        assert!(bounds.resolve(Some(86_401)).is_err());
        assert!(bounds.resolve(Some(-5)).is_err());
    }

    #[test]
    fn credential_errors_name_the_place_never_the_value() {
        let catalog = Catalog::new(&CatalogOptions::default());
        let info = catalog.get("rss").unwrap().info();
        let bad = serde_json::json!({"password": "hunter2-secret", "unknown": "s3cr3t"});
        let message = check_credentials(info, &bad).unwrap_err();
        assert!(message.contains("unknown"), "{message}");
        assert!(
            !message.contains("hunter2") && !message.contains("s3cr3t"),
            "{message}"
        );
        assert!(check_credentials(info, &serde_json::json!({})).is_ok());
    }

    #[test]
    fn the_catalog_says_webhook_support_for_exactly_the_providers_that_verify_pushes() {
        let catalog = Catalog::new(&CatalogOptions {
            folder_roots: vec![std::env::temp_dir()],
            ..CatalogOptions::default()
        });
        let request = push::PushRequest {
            headers: &[],
            body: b"",
            now_unix: 0,
        };
        let mut pushing = Vec::new();
        for provider in catalog.providers() {
            let verifies = provider.verify_push(&Map::new(), &request).is_some();
            assert_eq!(
                provider.info().webhook_support,
                verifies,
                "{}",
                provider.info().provider
            );
            if verifies {
                pushing.push(provider.info().provider);
            }
        }
        assert_eq!(
            pushing,
            [
                "github",
                "linear",
                "notion",
                "confluence",
                "jira",
                "slack",
                "google_drive"
            ]
        );
    }

    #[test]
    fn item_ids_are_stable_and_keyed_by_scope() {
        let a = item_id("rss", "acct", "guid-1");
        assert_eq!(a, item_id("rss", "acct", "guid-1"));
        assert_ne!(a, item_id("rss", "other", "guid-1"));
        assert!(a.len() <= 64 && a.starts_with("cx_rss_"));
    }
}
