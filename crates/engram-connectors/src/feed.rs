//! `rss`: RSS and Atom feeds (feed-rs reads both). A resource is a feed URL; each entry becomes
//! a document (its title, authors and content, parsed as HTML). Feeds are read conditionally
//! (`ETag`, `Last-Modified`), so an unchanged feed costs one `304`. A feed is a window onto the
//! newest entries: an entry that scrolls off it was not deleted at the source, so a pass never
//! deletes. Credentials are optional (HTTP Basic or a bearer token), for private feeds.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Largest feed document read.
const FEED_MAX_BYTES: usize = 16 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct FeedProvider {
    info: ProviderInfo,
}

impl Default for FeedProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl FeedProvider {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                provider: "rss",
                category: "web",
                connector_type: "feed",
                rank: Some(2),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["entry"],
                fields: vec![
                    FieldInfo {
                        name: "feed_url",
                        data_type: "string",
                        description: "The feed the entry came from",
                        filter_key: Some("additional_metadata.feed_url"),
                    },
                    FieldInfo {
                        name: "author",
                        data_type: "string",
                        description: "The entry's authors",
                        filter_key: None,
                    },
                    FieldInfo {
                        name: "published_at",
                        data_type: "datetime",
                        description: "When the entry was published",
                        filter_key: None,
                    },
                ],
                credential_schema: crate::http_credential_schema("feeds"),
                setup_guide: "Give the feeds to offer in `credentials.feeds` (discovery lists them with their titles), \
                    or configure any feed URL as a resource. Private feeds take `username` and `password` \
                    (HTTP Basic) or a bearer `token`.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

/// The request headers the credentials call for.
pub(crate) fn auth_headers(credentials: &Map<String, Value>) -> Vec<(&'static str, String)> {
    let text = |key: &str| credentials.get(key).and_then(Value::as_str);
    if let Some(token) = text("token") {
        return vec![("authorization", format!("Bearer {token}"))];
    }
    if let (Some(user), Some(password)) = (text("username"), text("password")) {
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        return vec![("authorization", format!("Basic {basic}"))];
    }
    Vec::new()
}

/// The validators of the last read, kept as the resource's cursor.
fn validators(cursor: &str) -> Vec<(&'static str, String)> {
    let saved: Value = serde_json::from_str(cursor).unwrap_or(Value::Null);
    let mut headers = Vec::new();
    if let Some(etag) = saved.get("etag").and_then(Value::as_str) {
        headers.push(("if-none-match", etag.to_owned()));
    }
    if let Some(modified) = saved.get("last_modified").and_then(Value::as_str) {
        headers.push(("if-modified-since", modified.to_owned()));
    }
    headers
}

/// Reads a feed: `None` when it has not changed since `cursor`.
async fn read(
    access: &Access,
    url: &str,
    cursor: &str,
) -> Result<Option<(feed_rs::model::Feed, String)>, ProviderError> {
    let target = access
        .outbound
        .check_url(url)
        .await
        .map_err(|e| ProviderError::Invalid(format!("feed `{url}`: {e}")))?;
    let mut headers = auth_headers(&access.credentials);
    headers.extend(validators(cursor));
    let fetched = access
        .outbound
        .get_read(&target, &headers, TIMEOUT, FEED_MAX_BYTES)
        .await
        .map_err(|e| ProviderError::Transient {
            message: format!("feed `{url}`: {e}"),
            http_status: 0,
        })?;
    if let Some(err) = crate::http_failure(fetched.status, url, true) {
        return Err(err);
    }
    if fetched.status == 304 {
        return Ok(None);
    }
    let feed =
        feed_rs::parser::parse(fetched.body.as_slice()).map_err(|e| ProviderError::Resource {
            message: format!("{url} is not an RSS or Atom feed: {e}"),
            http_status: fetched.status,
        })?;
    let cursor = json!({"etag": fetched.etag, "last_modified": fetched.last_modified});
    Ok(Some((feed, cursor.to_string())))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn entry(feed_url: &str, item: &feed_rs::model::Entry) -> Entry {
    let title = item
        .title
        .as_ref()
        .map(|t| t.content.clone())
        .unwrap_or_default();
    let body = item
        .content
        .as_ref()
        .and_then(|c| c.body.clone())
        .or_else(|| item.summary.as_ref().map(|s| s.content.clone()))
        .unwrap_or_default();
    let authors: Vec<&str> = item
        .authors
        .iter()
        .filter_map(|a| a.name.as_deref())
        .collect();
    let link = item
        .links
        .first()
        .map(|l| l.href.clone())
        .unwrap_or_default();
    let when = item.updated.or(item.published);
    let html = format!(
        "<html><head><title>{t}</title></head><body><h1>{t}</h1>{by}{body}</body></html>",
        t = escape(&title),
        by = if authors.is_empty() {
            String::new()
        } else {
            format!("<p>By {}</p>", escape(&authors.join(", ")))
        },
    );
    let version = crate::short_hash(html.as_bytes());
    let mut fields = Map::new();
    fields.insert("feed_url".into(), Value::from(feed_url));
    fields.insert("entry_id".into(), Value::from(item.id.clone()));
    if !authors.is_empty() {
        fields.insert("author".into(), Value::from(authors.join(", ")));
    }
    if let Some(published) = item.published {
        fields.insert("published_at".into(), Value::from(published.to_rfc3339()));
    }
    Entry {
        native_id: format!("{feed_url}#{}", item.id),
        version,
        title,
        file_name: "entry.html".to_owned(),
        url: link,
        modified_at: when.map(|w| w.to_rfc3339()).unwrap_or_default(),
        fields,
        content: Some(Content::File(html.into_bytes())),
        state: String::new(),
    }
}

#[async_trait]
impl Provider for FeedProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let feeds = crate::credential_list(access, "feeds");
        let mut found = Vec::with_capacity(feeds.len());
        for url in feeds {
            // A read without validators is never answered "not modified" by a sane server.
            let (feed, _) =
                read(access, &url, "")
                    .await?
                    .ok_or_else(|| ProviderError::Resource {
                        message: format!("{url} answered 304 to a request without validators"),
                        http_status: 304,
                    })?;
            found.push(DiscoveredResource {
                name: feed.title.map(|t| t.content).unwrap_or_else(|| url.clone()),
                id: url.clone(),
                resource_type: "feed".to_owned(),
                metadata: json!({"url": url, "entries": feed.entries.len()}),
            });
        }
        Ok(found)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        _known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let Some((feed, cursor)) = read(access, &resource.id, &position.cursor).await? else {
            return Ok(Page {
                cursor: position.cursor.clone(),
                ..Page::default()
            });
        };
        Ok(Page {
            entries: feed
                .entries
                .iter()
                .map(|e| entry(&resource.id, e))
                .collect(),
            deleted: Vec::new(),
            next: None,
            cursor,
            complete_listing: false,
            ..Page::default()
        })
    }

    async fn fetch(
        &self,
        _access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        _max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        // Listing reads every entry whole.
        entry.content.clone().ok_or_else(|| {
            ProviderError::Object(format!("entry {} has no content", entry.native_id))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_become_html_documents_with_stable_versions() {
        let rss = r#"<?xml version="1.0"?><rss version="2.0"><channel><title>Eng blog</title>
            <item><guid>post-1</guid><title>Release 4.2 &amp; more</title><link>https://example.com/1</link>
            <author>ada@example.com (Ada)</author><description>&lt;p&gt;The new &lt;b&gt;indexer&lt;/b&gt;&lt;/p&gt;</description>
            <pubDate>Mon, 02 Nov 2026 10:00:00 GMT</pubDate></item></channel></rss>"#;
        let feed = feed_rs::parser::parse(rss.as_bytes()).unwrap();
        let a = entry("https://example.com/feed", &feed.entries[0]);
        let b = entry("https://example.com/feed", &feed.entries[0]);
        assert_eq!(a.native_id, "https://example.com/feed#post-1");
        assert_eq!(a.title, "Release 4.2 & more");
        assert_eq!(a.version, b.version);
        let Some(Content::File(html)) = &a.content else {
            panic!("content")
        };
        let html = String::from_utf8_lossy(html);
        assert!(
            html.contains("<b>indexer</b>") && html.contains("Release 4.2 &amp; more"),
            "{html}"
        );
        assert_eq!(a.fields["published_at"], "2026-11-02T10:00:00+00:00");
    }

    #[test]
    fn statuses_map_to_what_the_connector_must_do() {
        assert!(matches!(
            crate::http_failure(401, "u", true),
            Some(ProviderError::Unauthorized { .. })
        ));
        assert!(matches!(
            crate::http_failure(410, "u", true),
            Some(ProviderError::Resource { .. })
        ));
        assert!(matches!(
            crate::http_failure(503, "u", true),
            Some(ProviderError::Transient { .. })
        ));
        assert_eq!(crate::http_failure(304, "u", true), None);
        // A page of a site refused or gone concerns that page, not the credentials.
        assert!(matches!(
            crate::http_failure(403, "u", false),
            Some(ProviderError::Resource { .. })
        ));
    }
}
