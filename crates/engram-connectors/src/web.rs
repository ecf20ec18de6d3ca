//! `web`: a site read from a start URL. A start URL ending in `.xml` is a sitemap: its `<loc>`
//! pages are listed with their `<lastmod>` as version, so an unchanged page is never fetched
//! again. Any other start URL is crawled breadth first, same origin only, within `max_depth`
//! links and `max_pages` pages (the resource's `filters`), honouring the site's `robots.txt`;
//! a page's version is its `ETag`, else its content's hash, so an unchanged page is not indexed
//! again. A page served with validators keeps them and its links with its object: the next pass
//! asks for it with `If-None-Match` / `If-Modified-Since`, and a `304` costs no body while the
//! crawl still follows the links the page had. A crawl
//! that reached every page it found within the limits is a complete listing: pages no longer
//! linked leave engram; a crawl cut short by a limit or an error deletes nothing.
//!
//! The crawl's frontier is the pass position, saved after every page of results, so a crash
//! resumes the crawl where it stopped.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

const PAGE_MAX_BYTES: usize = 8 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Pages fetched per page of results.
const FETCHES_PER_PAGE: usize = 10;
const DEFAULT_MAX_PAGES: u64 = 500;
const MAX_PAGES_LIMIT: u64 = 10_000;
const DEFAULT_MAX_DEPTH: u64 = 3;
const AGENT: &str = "engram";

pub struct WebProvider {
    info: ProviderInfo,
}

impl Default for WebProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl WebProvider {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                provider: "web",
                category: "web",
                connector_type: "crawler",
                rank: Some(3),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["page"],
                fields: vec![
                    FieldInfo {
                        name: "url",
                        data_type: "string",
                        description: "The page's URL",
                        filter_key: Some("additional_metadata.url"),
                    },
                    FieldInfo {
                        name: "site",
                        data_type: "string",
                        description: "The start URL the page was found from",
                        filter_key: Some("additional_metadata.site"),
                    },
                ],
                credential_schema: crate::http_credential_schema("sites"),
                setup_guide: "Configure a resource per site: its start URL (crawled on the same origin) or its \
                    sitemap (a URL ending in .xml). `filters.max_pages` (default 500) and `filters.max_depth` \
                    (default 3) bound a crawl. Sites behind a login take `username` and `password` (HTTP Basic) \
                    or a bearer `token`; `credentials.sites` lists sites for discovery.",
                interval: IntervalBounds {
                    min_s: 300,
                    max_s: 30 * 86_400,
                    default_s: 86_400,
                },
            },
        }
    }
}

/// What a crawled page keeps until the next pass: its validators, for a conditional GET, and
/// its same-origin links, so a page answered `304 Not Modified` is still crawled through.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct PageState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_modified: Option<String>,
    #[serde(default)]
    links: Vec<String>,
}

/// Links kept per page (a page linking to more is read again in full next pass).
const LINKS_KEPT: usize = 1_000;

impl PageState {
    /// The headers that ask for the page only if it changed.
    fn conditions(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        if let Some(etag) = &self.etag {
            headers.push(("if-none-match", etag.clone()));
        }
        if let Some(date) = &self.last_modified {
            headers.push(("if-modified-since", date.clone()));
        }
        headers
    }
}

/// The crawl in progress, kept as the pass position.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Crawl {
    queue: VecDeque<(String, u64)>,
    seen: Vec<String>,
    robots: String,
    fetched: u64,
    /// Something was skipped (a limit, an error): the listing is not complete.
    partial: bool,
}

impl Crawl {
    /// Queues the same-origin links not seen yet at `depth`; past the frontier's bound the crawl
    /// is partial.
    fn follow(
        &mut self,
        start: &url::Url,
        links: impl Iterator<Item = String>,
        depth: u64,
        max_pages: u64,
    ) {
        for link in links {
            let same = url::Url::parse(&link).is_ok_and(|l| same_origin(start, &l));
            if !same || self.seen.contains(&link) {
                continue;
            }
            if self.seen.len() as u64 >= max_pages * 4 {
                self.partial = true;
                break;
            }
            self.seen.push(link.clone());
            self.queue.push_back((link, depth));
        }
    }
}

fn limit(filters: &Value, name: &str, default: u64, most: u64) -> u64 {
    filters
        .get(name)
        .and_then(Value::as_u64)
        .unwrap_or(default)
        .clamp(1, most)
}

fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// The links of an HTML page, resolved against its URL, fragments dropped.
fn links(base: &url::Url, html: &[u8]) -> Vec<url::Url> {
    use html5gum::{Token, Tokenizer};
    let text = String::from_utf8_lossy(html);
    let mut found = Vec::new();
    for token in Tokenizer::new(&*text).flatten() {
        if let Token::StartTag(tag) = token {
            if tag.name.as_slice() != b"a" && tag.name.as_slice() != b"link" {
                continue;
            }
            if tag.name.as_slice() == b"link"
                && tag
                    .attributes
                    .get(b"rel".as_slice())
                    .is_none_or(|r| r.as_slice() != b"alternate")
            {
                continue;
            }
            if let Some(href) = tag.attributes.get(b"href".as_slice()) {
                if let Ok(mut url) = base.join(&String::from_utf8_lossy(href.as_slice())) {
                    url.set_fragment(None);
                    found.push(url);
                }
            }
        }
    }
    found
}

/// A sitemap's `(loc, lastmod)` entries.
fn sitemap(xml: &[u8]) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(xml);
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    let (mut field, mut loc, mut lastmod) = (Vec::new(), String::new(), String::new());
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) => field = e.local_name().as_ref().to_vec(),
            Ok(Event::Text(t)) => {
                let text = String::from_utf8_lossy(t.as_ref()).trim().to_owned();
                match field.as_slice() {
                    b"loc" => loc = text,
                    b"lastmod" => lastmod = text,
                    _ => {}
                }
            }
            Ok(Event::End(e)) => {
                if e.local_name().as_ref() == b"url" && !loc.is_empty() {
                    out.push((std::mem::take(&mut loc), std::mem::take(&mut lastmod)));
                }
                field.clear();
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
        buf.clear();
    }
    out
}

fn auth(access: &Access) -> Vec<(&'static str, String)> {
    crate::feed::auth_headers(&access.credentials)
}

async fn get(access: &Access, url: &url::Url) -> Result<engram_outbound::Fetched, ProviderError> {
    get_with(access, url, Vec::new()).await
}

/// A GET with the connector's credentials and `extra` headers.
async fn get_with(
    access: &Access,
    url: &url::Url,
    extra: Vec<(&'static str, String)>,
) -> Result<engram_outbound::Fetched, ProviderError> {
    let mut headers = auth(access);
    headers.extend(extra);
    access
        .outbound
        .get_read(url, &headers, TIMEOUT, PAGE_MAX_BYTES)
        .await
        .map_err(|e| ProviderError::Transient {
            message: format!("{url}: {e}"),
            http_status: 0,
        })
}

/// A page as an entry: HTML is parsed as a page, anything else by its name.
fn page_entry(
    site: &str,
    url: &url::Url,
    fetched: Option<engram_outbound::Fetched>,
    version: String,
) -> Entry {
    let html = fetched
        .as_ref()
        .and_then(|f| f.content_type.as_deref())
        .is_none_or(|t| t.contains("html"));
    let name = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .filter(|s| !s.is_empty())
        .unwrap_or("index")
        .to_owned();
    let file_name = if html && !name.ends_with(".html") && !name.ends_with(".htm") {
        format!("{name}.html")
    } else {
        name
    };
    let mut fields = Map::new();
    fields.insert("url".into(), Value::from(url.as_str()));
    fields.insert("site".into(), Value::from(site));
    Entry {
        native_id: url.to_string(),
        version,
        title: url.to_string(),
        file_name,
        url: url.to_string(),
        modified_at: String::new(),
        fields,
        content: fetched.map(|f| Content::File(f.body)),
        state: String::new(),
    }
}

impl WebProvider {
    async fn start(&self, access: &Access, resource: &str) -> Result<url::Url, ProviderError> {
        access
            .outbound
            .check_url(resource)
            .await
            .map_err(|e| ProviderError::Invalid(format!("site `{resource}`: {e}")))
    }

    async fn list_sitemap(&self, access: &Access, start: &url::Url) -> Result<Page, ProviderError> {
        let fetched = get(access, start).await?;
        if let Some(err) = crate::http_failure(fetched.status, start.as_str(), true) {
            return Err(err);
        }
        let entries = sitemap(&fetched.body)
            .into_iter()
            .filter_map(|(loc, lastmod)| {
                let url = start.join(&loc).ok()?;
                same_origin(start, &url).then_some((url, lastmod))
            })
            .map(|(url, lastmod)| {
                let mut fields = Map::new();
                fields.insert("url".into(), Value::from(url.as_str()));
                fields.insert("site".into(), Value::from(start.as_str()));
                Entry {
                    native_id: url.to_string(),
                    // Without a lastmod the page is read every pass (its hash then decides).
                    version: if lastmod.is_empty() {
                        String::new()
                    } else {
                        format!("lastmod:{lastmod}")
                    },
                    title: url.to_string(),
                    file_name: String::new(),
                    url: url.to_string(),
                    modified_at: lastmod,
                    fields,
                    content: None,
                    state: String::new(),
                }
            })
            .collect();
        Ok(Page {
            entries,
            complete_listing: true,
            ..Page::default()
        })
    }

    async fn crawl_page(
        &self,
        access: &Access,
        resource: &ResourceRef,
        start: &url::Url,
        position: &Position,
        known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let max_pages = limit(
            &resource.filters,
            "max_pages",
            DEFAULT_MAX_PAGES,
            MAX_PAGES_LIMIT,
        );
        let max_depth = limit(&resource.filters, "max_depth", DEFAULT_MAX_DEPTH, 20);
        let mut crawl: Crawl = if position.within.is_empty() {
            let robots_url = start
                .join("/robots.txt")
                .map_err(|e| ProviderError::Invalid(e.to_string()))?;
            let robots = match get(access, &robots_url).await {
                Ok(f) if (200..300).contains(&f.status) => {
                    String::from_utf8_lossy(&f.body).into_owned()
                }
                _ => String::new(),
            };
            Crawl {
                queue: VecDeque::from([(start.to_string(), 0)]),
                seen: vec![start.to_string()],
                robots,
                ..Crawl::default()
            }
        } else {
            serde_json::from_str(&position.within).map_err(|e| {
                ProviderError::Invalid(format!("the saved crawl cannot be read: {e}"))
            })?
        };
        let robot = texting_robots::Robot::new(AGENT, crawl.robots.as_bytes()).ok();
        let mut entries = Vec::new();
        while entries.len() < FETCHES_PER_PAGE {
            let Some((next, depth)) = crawl.queue.pop_front() else {
                break;
            };
            if crawl.fetched >= max_pages {
                crawl.partial = true;
                crawl.queue.clear();
                break;
            }
            let Ok(url) = url::Url::parse(&next) else {
                continue;
            };
            if robot.as_ref().is_some_and(|r| !r.allowed(url.as_str())) {
                continue;
            }
            let is_start = crawl.fetched == 0 && depth == 0;
            // A page synced before is asked for only if it changed.
            let before = known
                .objects(std::slice::from_ref(&next))
                .await?
                .remove(&next)
                .and_then(|k| {
                    let state = serde_json::from_str::<PageState>(&k.state).ok()?;
                    Some((k, state))
                });
            let conditions = before
                .as_ref()
                .map(|(_, state)| state.conditions())
                .unwrap_or_default();
            let fetched = match get_with(access, &url, conditions).await {
                Ok(fetched) => fetched,
                Err(err) if is_start => return Err(err),
                Err(_) => {
                    crawl.partial = true;
                    continue;
                }
            };
            crawl.fetched += 1;
            if fetched.status == 304 {
                let Some((known, state)) = before else {
                    crawl.partial = true;
                    continue;
                };
                if depth < max_depth {
                    crawl.follow(start, state.links.iter().cloned(), depth + 1, max_pages);
                }
                let mut entry = page_entry(start.as_str(), &url, None, known.version);
                entry.state = known.state;
                entries.push(entry);
                continue;
            }
            if (300..400).contains(&fetched.status) {
                // Redirects are followed on the same origin only, as a link of the same depth.
                if let Some(target) = fetched
                    .location
                    .as_deref()
                    .and_then(|l| url.join(l).ok())
                    .filter(|t| same_origin(start, t))
                {
                    if !crawl.seen.contains(&target.to_string()) {
                        crawl.seen.push(target.to_string());
                        crawl.queue.push_back((target.to_string(), depth));
                    }
                }
                continue;
            }
            match crate::http_failure(fetched.status, url.as_str(), is_start) {
                Some(err) if is_start => return Err(err),
                // A page gone is simply not listed; anything else makes the listing partial.
                Some(_) if matches!(fetched.status, 404 | 410) => continue,
                Some(_) => {
                    crawl.partial = true;
                    continue;
                }
                None => {}
            }
            let html = fetched
                .content_type
                .as_deref()
                .is_none_or(|t| t.contains("html"));
            let mut page_links: Vec<String> = if html {
                links(&url, &fetched.body)
                    .into_iter()
                    .filter(|link| same_origin(start, link))
                    .map(String::from)
                    .collect()
            } else {
                Vec::new()
            };
            let mut unique = std::collections::HashSet::new();
            page_links.retain(|link| unique.insert(link.clone()));
            if depth < max_depth {
                crawl.follow(start, page_links.iter().cloned(), depth + 1, max_pages);
            }
            let version = fetched
                .etag
                .clone()
                .unwrap_or_else(|| crate::short_hash(&fetched.body));
            let state = PageState {
                etag: fetched.etag.clone(),
                last_modified: fetched.last_modified.clone(),
                links: page_links,
            };
            let validated = state.etag.is_some() || state.last_modified.is_some();
            let mut entry = page_entry(start.as_str(), &url, Some(fetched), version);
            if validated && state.links.len() <= LINKS_KEPT {
                entry.state = serde_json::to_string(&state).unwrap_or_default();
            }
            entries.push(entry);
        }
        let done = crawl.queue.is_empty();
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next: (!done)
                .then(|| serde_json::to_string(&crawl))
                .transpose()
                .map_err(|e| ProviderError::Invalid(e.to_string()))?,
            cursor: String::new(),
            complete_listing: done && !crawl.partial,
            ..Page::default()
        })
    }
}

#[async_trait]
impl Provider for WebProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let sites = crate::credential_list(access, "sites");
        let mut found = Vec::with_capacity(sites.len());
        for site in sites {
            let start = self.start(access, &site).await?;
            let fetched = get(access, &start).await?;
            if let Some(err) = crate::http_failure(fetched.status, start.as_str(), true) {
                return Err(err);
            }
            let sitemap = start.path().ends_with(".xml");
            found.push(DiscoveredResource {
                name: start.host_str().unwrap_or(&site).to_owned(),
                id: start.to_string(),
                resource_type: if sitemap { "sitemap" } else { "site" }.to_owned(),
                metadata: json!({"url": start.as_str()}),
            });
        }
        Ok(found)
    }

    async fn list(
        &self,
        access: &Access,
        resource: &ResourceRef,
        position: &Position,
        known: &dyn crate::Known,
    ) -> Result<Page, ProviderError> {
        let start = self.start(access, &resource.id).await?;
        if start.path().ends_with(".xml") {
            self.list_sitemap(access, &start).await
        } else {
            self.crawl_page(access, resource, &start, position, known)
                .await
        }
    }

    async fn fetch(
        &self,
        access: &Access,
        resource: &ResourceRef,
        entry: &Entry,
        _max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let url = url::Url::parse(&entry.native_id)
            .map_err(|e| ProviderError::Object(format!("{}: {e}", entry.native_id)))?;
        let fetched = get(access, &url)
            .await
            .map_err(|e| ProviderError::Object(e.to_string()))?;
        if let Some(err) = crate::http_failure(fetched.status, url.as_str(), false) {
            return Err(ProviderError::Object(err.to_string()));
        }
        let _ = resource;
        Ok(Content::File(fetched.body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_on_the_page_and_lose_their_fragment() {
        let base = url::Url::parse("https://docs.example.com/guide/intro.html").unwrap();
        let html = br#"<a href="setup.html#install">Setup</a><a href="/api/">API</a>
            <a href="https://other.example.com/x">Out</a><link rel="stylesheet" href="s.css">"#;
        let found: Vec<String> = links(&base, html).iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "https://docs.example.com/guide/setup.html",
                "https://docs.example.com/api/",
                "https://other.example.com/x"
            ]
        );
    }

    #[test]
    fn sitemaps_give_locations_and_last_changes() {
        let xml =
            br#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <url><loc>https://s.example.com/a</loc><lastmod>2026-11-01</lastmod></url>
            <url><loc>https://s.example.com/b</loc></url></urlset>"#;
        assert_eq!(
            sitemap(xml),
            [
                (
                    "https://s.example.com/a".to_owned(),
                    "2026-11-01".to_owned()
                ),
                ("https://s.example.com/b".to_owned(), String::new())
            ]
        );
    }
}
