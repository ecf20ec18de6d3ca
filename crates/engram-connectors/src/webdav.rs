//! `webdav`: the files of a WebDAV share (the shape Nextcloud, ownCloud and SharePoint-style
//! shares take). A resource is a collection URL; a pass walks it breadth first with
//! `PROPFIND Depth: 1` (servers often refuse `infinity`), a few collections per page, the queue
//! saved as the pass position. Each file's `ETag` (else its size and modification time) is its
//! version, so only changed files are read; the pass lists every file, so files gone since
//! leave engram.

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::time::Duration;

use crate::{
    Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Page, Position,
    Provider, ProviderError, ProviderInfo, ResourceRef,
};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest `PROPFIND` answer read.
const LISTING_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Collections read per page.
const COLLECTIONS_PER_PAGE: usize = 20;
/// Collections one pass may walk (a bound on the saved queue).
const COLLECTIONS_MAX: usize = 20_000;

const PROPFIND: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getetag/><d:getlastmodified/><d:getcontentlength/><d:getcontenttype/></d:prop></d:propfind>"#;

pub struct WebDavProvider {
    info: ProviderInfo,
}

impl Default for WebDavProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl WebDavProvider {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                provider: "webdav",
                category: "files",
                connector_type: "share",
                rank: Some(6),
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &["file"],
                fields: vec![
                    FieldInfo {
                        name: "path",
                        data_type: "string",
                        description: "The file's path on the share",
                        filter_key: Some("additional_metadata.path"),
                    },
                    FieldInfo {
                        name: "content_type",
                        data_type: "string",
                        description: "The type the share declares for the file",
                        filter_key: None,
                    },
                ],
                credential_schema: crate::http_credential_schema("shares"),
                setup_guide: "Configure a resource per folder of the share: its WebDAV URL (for Nextcloud, \
                    https://host/remote.php/dav/files/<user>/<folder>/). Give `username` and `password` (an app \
                    password) or a bearer `token`; `credentials.shares` lists folders for discovery.",
                interval: IntervalBounds {
                    min_s: 60,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

/// One `<response>` of a multistatus answer.
#[derive(Debug, Default, Clone, PartialEq)]
struct Member {
    href: String,
    collection: bool,
    etag: String,
    modified: String,
    length: String,
    content_type: String,
}

/// The members of a `207 Multi-Status` answer (any namespace prefix).
fn members(xml: &[u8]) -> Vec<Member> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(xml);
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    let (mut current, mut field) = (None::<Member>, Vec::new());
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) => {
                let name = e.local_name().as_ref().to_vec();
                match name.as_slice() {
                    b"response" => current = Some(Member::default()),
                    b"collection" => {
                        if let Some(m) = current.as_mut() {
                            m.collection = true;
                        }
                    }
                    _ => {}
                }
                field = name;
            }
            Ok(Event::Empty(e)) if e.local_name().as_ref() == b"collection" => {
                if let Some(m) = current.as_mut() {
                    m.collection = true;
                }
            }
            Ok(Event::Text(t)) => {
                let text = t.decode().map(|s| s.trim().to_owned()).unwrap_or_default();
                if let Some(m) = current.as_mut() {
                    match field.as_slice() {
                        b"href" => m.href.push_str(&text),
                        b"getetag" => m.etag = text,
                        b"getlastmodified" => m.modified = text,
                        b"getcontentlength" => m.length = text,
                        b"getcontenttype" => m.content_type = text,
                        _ => {}
                    }
                }
            }
            Ok(Event::End(e)) => {
                if e.local_name().as_ref() == b"response" {
                    if let Some(m) = current.take() {
                        out.push(m);
                    }
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

/// The walk in progress, kept as the pass position.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Walk {
    queue: VecDeque<String>,
    walked: usize,
}

fn headers(access: &Access) -> Vec<(&'static str, String)> {
    crate::feed::auth_headers(&access.credentials)
}

impl WebDavProvider {
    async fn propfind(
        &self,
        access: &Access,
        url: &url::Url,
        root: bool,
    ) -> Result<Vec<Member>, ProviderError> {
        let mut request_headers = headers(access);
        request_headers.push(("depth", "1".to_owned()));
        request_headers.push(("content-type", "application/xml; charset=utf-8".to_owned()));
        let fetched = access
            .outbound
            .request_read(
                "PROPFIND",
                url,
                &request_headers,
                Some(PROPFIND.as_bytes().to_vec()),
                TIMEOUT,
                LISTING_MAX_BYTES,
            )
            .await
            .map_err(|e| ProviderError::Transient {
                message: format!("{url}: {e}"),
                http_status: 0,
            })?;
        if fetched.status != 207 {
            return Err(
                crate::http_failure(fetched.status, url.as_str(), root).unwrap_or_else(|| {
                    ProviderError::Resource {
                        message: format!(
                            "{url} answered {} to PROPFIND: not a WebDAV collection",
                            fetched.status
                        ),
                        http_status: fetched.status,
                    }
                }),
            );
        }
        Ok(members(&fetched.body))
    }

    async fn root(&self, access: &Access, resource: &str) -> Result<url::Url, ProviderError> {
        let mut url = access
            .outbound
            .check_url(resource)
            .await
            .map_err(|e| ProviderError::Invalid(format!("share `{resource}`: {e}")))?;
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        Ok(url)
    }
}

#[async_trait]
impl Provider for WebDavProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let mut found = Vec::new();
        for share in crate::credential_list(access, "shares") {
            let root = self.root(access, &share).await?;
            let listed = self.propfind(access, &root, true).await?;
            found.push(DiscoveredResource {
                name: root
                    .path()
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or("/")
                    .to_owned(),
                id: root.to_string(),
                resource_type: "folder".to_owned(),
                metadata: json!({"url": root.as_str(), "members": listed.len().saturating_sub(1)}),
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
        let root = self.root(access, &resource.id).await?;
        let mut walk: Walk = if position.within.is_empty() {
            Walk {
                queue: VecDeque::from([root.to_string()]),
                walked: 0,
            }
        } else {
            serde_json::from_str(&position.within).map_err(|e| {
                ProviderError::Invalid(format!("the saved walk cannot be read: {e}"))
            })?
        };
        let mut entries = Vec::new();
        for _ in 0..COLLECTIONS_PER_PAGE {
            let Some(next) = walk.queue.pop_front() else {
                break;
            };
            let url = url::Url::parse(&next).map_err(|e| ProviderError::Invalid(e.to_string()))?;
            let is_root = walk.walked == 0;
            let listed = self.propfind(access, &url, is_root).await?;
            walk.walked += 1;
            for member in listed {
                let Ok(target) = url.join(&member.href) else {
                    continue;
                };
                // The collection itself, and anything off the share, are not its members.
                if target.path().trim_end_matches('/') == url.path().trim_end_matches('/')
                    || !target.as_str().starts_with(root.as_str())
                {
                    continue;
                }
                if member.collection {
                    if walk.walked + walk.queue.len() >= COLLECTIONS_MAX {
                        return Err(ProviderError::Invalid(format!(
                            "the share holds more than {COLLECTIONS_MAX} folders; configure a folder below it"
                        )));
                    }
                    walk.queue.push_back(target.to_string());
                    continue;
                }
                let path = target.path()[root.path().len()..].to_owned();
                let path = percent_decode(&path);
                let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
                let mut fields = Map::new();
                fields.insert("path".into(), Value::from(path.clone()));
                if !member.content_type.is_empty() {
                    fields.insert(
                        "content_type".into(),
                        Value::from(member.content_type.clone()),
                    );
                }
                entries.push(Entry {
                    native_id: target.to_string(),
                    version: if member.etag.is_empty() {
                        format!("{}|{}", member.length, member.modified)
                    } else {
                        member.etag
                    },
                    title: path,
                    file_name: name,
                    url: target.to_string(),
                    modified_at: member.modified,
                    fields,
                    content: None,
                    state: String::new(),
                });
            }
        }
        let done = walk.queue.is_empty();
        Ok(Page {
            entries,
            deleted: Vec::new(),
            next: (!done)
                .then(|| serde_json::to_string(&walk))
                .transpose()
                .map_err(|e| ProviderError::Invalid(e.to_string()))?,
            cursor: String::new(),
            complete_listing: true,
            ..Page::default()
        })
    }

    async fn fetch(
        &self,
        access: &Access,
        _resource: &ResourceRef,
        entry: &Entry,
        max_bytes: usize,
    ) -> Result<Content, ProviderError> {
        let url = url::Url::parse(&entry.native_id)
            .map_err(|e| ProviderError::Object(format!("{}: {e}", entry.native_id)))?;
        let fetched = access
            .outbound
            .get_read(&url, &headers(access), TIMEOUT, max_bytes)
            .await
            .map_err(|e| ProviderError::Object(format!("{url}: {e}")))?;
        match crate::http_failure(fetched.status, url.as_str(), false) {
            None => Ok(Content::File(fetched.body)),
            Some(err) => Err(ProviderError::Object(err.to_string())),
        }
    }
}

/// `%xx` escapes of a URL path decoded (as UTF-8, lossily).
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multistatus_answers_give_files_and_folders_whatever_the_prefix() {
        let xml = br#"<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">
          <D:response><D:href>/dav/docs/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype></D:prop></D:propstat></D:response>
          <D:response><D:href>/dav/docs/Q3%20plan.md</D:href><D:propstat><D:prop><D:resourcetype/>
            <D:getetag>"abc"</D:getetag><D:getcontentlength>42</D:getcontentlength>
            <D:getlastmodified>Mon, 02 Nov 2026 10:00:00 GMT</D:getlastmodified></D:prop></D:propstat></D:response>
          <D:response><D:href>/dav/docs/sub/</D:href><D:propstat><D:prop><D:resourcetype><D:collection></D:collection></D:resourcetype></D:prop></D:propstat></D:response>
        </D:multistatus>"#;
        let found = members(xml);
        assert_eq!(found.len(), 3);
        assert!(found[0].collection && found[2].collection && !found[1].collection);
        assert_eq!(found[1].href, "/dav/docs/Q3%20plan.md");
        assert_eq!(found[1].etag, "\"abc\"");
        assert_eq!(percent_decode("Q3%20plan.md"), "Q3 plan.md");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%aé and %"), "%aé and %");
    }
}
