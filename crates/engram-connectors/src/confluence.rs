//! `confluence`: the pages of Confluence Cloud (or Data Center) spaces and their attachments,
//! through Confluence's REST API v2 (see [`crate::atlassian`] for the site, credentials, rate
//! limits and webhooks). Discovery lists the spaces the account can read (`GET
//! /wiki/api/v2/spaces`, going on with the cursor of `_links.next`), each a resource
//! `space:<id>`.
//!
//! A pass lists every current page of the space (`GET /wiki/api/v2/spaces/{id}/pages`, nested
//! pages included, page after page by cursor), which is cheap without bodies, so pages trashed,
//! deleted or moved away since leave engram at its end. A page whose `version.number` moved (or
//! that is new) is read whole (`GET /wiki/api/v2/pages/{id}?body-format=storage`) and its
//! storage format (XHTML) becomes text: headings as `#`, lists, tables as `|` rows, code blocks
//! (the `code` macro) fenced. Its attachments (`GET /wiki/api/v2/pages/{id}/attachments`) are
//! listed with it and read as files by engram's parsers (at most the item size engram allows);
//! an unchanged page hands back the attachments it had (kept in its entry's `state`).
//!
//! Who may read: a changed page's read restrictions (`GET
//! /wiki/rest/api/content/{id}/restriction/byOperation/read`) become its readers (e-mail
//! addresses and `group:<name>`), and its attachments'. A restricted user whose e-mail address
//! Confluence does not show, or restrictions that cannot be read, leave the page with the
//! readers that could be read (never more) and say so as `page_acl_warning`. Pages without
//! restrictions are readable by whoever may read the space; space permissions name accounts
//! without e-mail addresses, so they carry no rule of their own, which `acl_warning` says.
//! Restrictions inherited from a parent page are not applied.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::atlassian::{squeezed, Product, Site};
use crate::hosted::{object_failure, saved_pass, text_of};
use crate::{
    set_readers, Access, Content, DiscoveredResource, Entry, FieldInfo, IntervalBounds, Known,
    Page, Position, Provider, ProviderError, ProviderInfo, ResourceRef,
};

/// Pages (and spaces, attachments) a listing asks for at once.
const PER_PAGE: usize = 50;
/// Pages discovery reads at most (5,000 spaces).
const SPACE_PAGES_MAX: usize = 100;
/// Listing pages one pass reads at most (100,000 pages).
const PASS_PAGES_MAX: u32 = 2000;
/// Attachment pages read for one page at most (500 attachments).
const ATTACHMENT_PAGES_MAX: usize = 10;
/// Restricted users and groups read of one page at most.
const RESTRICTIONS_MAX: usize = 200;
const ACL_WARNING: &str = "Confluence space permissions name accounts without e-mail addresses: \
    pages without read restrictions carry no rule of their own; set one on the resource to limit \
    who finds them";

pub struct ConfluenceProvider {
    info: ProviderInfo,
}

impl Default for ConfluenceProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfluenceProvider {
    pub fn new() -> Self {
        let field = FieldInfo::new;
        Self {
            info: ProviderInfo {
                provider: "confluence",
                category: "knowledge_base",
                connector_type: "wiki",
                rank: Some(12),
                rbac_support: true,
                webhook_support: true,
                is_beta: true,
                indexed_object_types: &["page", "attachment"],
                fields: vec![
                    field("kind", "string", "page, or attachment for a file attached to a page", Some("additional_metadata.kind")),
                    field("space_id", "string", "The id of the page's space", Some("additional_metadata.space_id")),
                    field("page_id", "string", "The page (an attachment's page)", Some("additional_metadata.page_id")),
                    field("parent_id", "string", "The page a page sits under", Some("additional_metadata.parent_id")),
                    field("version", "integer", "The page's version number", None),
                    field("acl", "array", "Who may read a restricted page: e-mail addresses and group:<name>", Some("additional_metadata.acl")),
                ],
                credential_schema: crate::atlassian::credential_schema(),
                setup_guide: "Give `site_url` (https://<your-site>.atlassian.net, or your Data Center \
                    address) and either `email` with an `api_token` made at \
                    https://id.atlassian.com/manage-profile/security/api-tokens (it reads what that \
                    account can read), or OAuth: an `oauth` object with your Atlassian OAuth 2.0 (3LO) \
                    app's `client_id` and `client_secret` (scopes `read:confluence-content.all \
                    read:confluence-space.summary read:confluence-content.permission \
                    read:confluence-content.summary read:page:confluence read:space:confluence \
                    read:attachment:confluence offline_access`; engram runs the authorization and \
                    refreshes the rotating tokens). Discovery offers each space (`space:<id>`); its \
                    pages sync as text with their attachments as files, restricted pages carry their \
                    readers (`acl`), and trashed pages leave engram. For push, register a webhook for \
                    page and attachment events to https://<engram>/connectors/<id>/events with a \
                    secret, and give the same secret as `webhook_secret`.",
                interval: IntervalBounds {
                    min_s: 300,
                    max_s: 7 * 86_400,
                    default_s: 3600,
                },
            },
        }
    }
}

/// The `cursor` parameter of a `_links.next` address (`/wiki/api/v2/…?cursor=…&limit=…`).
fn next_cursor(answer: &Value) -> Option<String> {
    let next = text_of(answer, "/_links/next");
    if next.is_empty() {
        return None;
    }
    let url = url::Url::parse("https://site.invalid/")
        .ok()?
        .join(next)
        .ok()?;
    url.query_pairs()
        .find(|(k, _)| k == "cursor")
        .map(|(_, v)| v.into_owned())
        .filter(|c| !c.is_empty())
}

fn space_of(resource: &ResourceRef) -> Result<&str, ProviderError> {
    crate::hosted::prefixed_id(
        resource,
        "space:",
        40,
        |c| c.is_ascii_digit(),
        "`space:` and a Confluence space id",
    )
}

/// Confluence storage format (XHTML with `ac:` macros) as text.
#[allow(clippy::wildcard_enum_match_arm)] // every other token reads as nothing
pub(crate) fn storage_text(xhtml: &str) -> String {
    use html5gum::{Token, Tokenizer};
    let mut out = String::new();
    // Open lists: `None` for bullets, `Some(n)` for the next number.
    let mut lists: Vec<Option<usize>> = Vec::new();
    let mut skip = 0_usize; // inside macro parameters
    let mut cells: Option<Vec<String>> = None;
    let mut macros: Vec<bool> = Vec::new(); // open macros: whether each is a code block
    let push = |out: &mut String, cells: &mut Option<Vec<String>>, text: &str| match cells {
        Some(row) => match row.last_mut() {
            Some(cell) => cell.push_str(text),
            None => row.push(text.to_owned()),
        },
        None => out.push_str(text),
    };
    for token in Tokenizer::new(xhtml).flatten() {
        match token {
            Token::StartTag(tag) => {
                let name = String::from_utf8_lossy(tag.name.as_slice()).to_ascii_lowercase();
                match name.as_str() {
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                        let level = usize::from(name.as_bytes()[1] - b'0');
                        push(&mut out, &mut cells, &format!("\n\n{} ", "#".repeat(level)));
                    }
                    "p" | "div" | "blockquote" => push(&mut out, &mut cells, "\n\n"),
                    "br" => push(&mut out, &mut cells, "\n"),
                    "ul" => lists.push(None),
                    "ol" => lists.push(Some(1)),
                    "li" => {
                        let indent = "  ".repeat(lists.len().saturating_sub(1));
                        let mark = match lists.last_mut() {
                            Some(Some(n)) => {
                                *n += 1;
                                format!("{}.", *n - 1)
                            }
                            Some(None) | None => "-".to_owned(),
                        };
                        push(&mut out, &mut cells, &format!("\n{indent}{mark} "));
                    }
                    "tr" => cells = Some(Vec::new()),
                    "td" | "th" => {
                        if let Some(row) = cells.as_mut() {
                            row.push(String::new());
                        }
                    }
                    "pre" => push(&mut out, &mut cells, "\n```\n"),
                    "ac:structured-macro" => {
                        let code = tag
                            .attributes
                            .get(b"ac:name".as_slice())
                            .is_some_and(|n| n.as_slice() == b"code");
                        if code {
                            push(&mut out, &mut cells, "\n```\n");
                        }
                        macros.push(code);
                    }
                    "ac:parameter" => skip += 1,
                    _ => {}
                }
            }
            Token::EndTag(tag) => {
                let name = String::from_utf8_lossy(tag.name.as_slice()).to_ascii_lowercase();
                match name.as_str() {
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "p" | "div" | "blockquote" => {
                        push(&mut out, &mut cells, "\n")
                    }
                    "ul" | "ol" => {
                        lists.pop();
                        push(&mut out, &mut cells, "\n");
                    }
                    "tr" => {
                        if let Some(row) = cells.take() {
                            let row: Vec<String> = row
                                .iter()
                                .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
                                .collect();
                            out.push_str(&format!("\n| {} |", row.join(" | ")));
                        }
                    }
                    "table" => out.push('\n'),
                    "pre" => push(&mut out, &mut cells, "\n```\n"),
                    "ac:structured-macro" if macros.pop() == Some(true) => {
                        push(&mut out, &mut cells, "\n```\n");
                    }
                    "ac:parameter" => skip = skip.saturating_sub(1),
                    _ => {}
                }
            }
            Token::String(text) if skip == 0 => {
                push(
                    &mut out,
                    &mut cells,
                    &String::from_utf8_lossy(text.as_slice()),
                );
            }
            // `<![CDATA[…]]>` (a code macro's body) reads as a comment in HTML.
            Token::Comment(text) if skip == 0 => {
                let text = String::from_utf8_lossy(text.as_slice());
                if let Some(body) = text.strip_prefix("[CDATA[") {
                    push(
                        &mut out,
                        &mut cells,
                        body.strip_suffix("]]").unwrap_or(body),
                    );
                }
            }
            // Doctypes, errors, text in macro parameters: nothing to read.
            _ => {}
        }
    }
    squeezed(&out)
}

/// What a page keeps until the next pass (its entry's `state`): its attachments and readers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Kept {
    attachments: Vec<Attachment>,
    /// `None`: the page has no read restriction.
    readers: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Attachment {
    id: String,
    title: String,
    version: String,
    media_type: String,
    download: String,
    webui: String,
    modified_at: String,
    size: u64,
}

/// The readers of a page's read restrictions (`None`: unrestricted), and whether someone
/// restricted could not be named.
fn readers_of(restriction: &Value) -> (Option<Vec<String>>, bool) {
    let list = |pointer: &str| {
        restriction
            .pointer(pointer)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let users = list("/restrictions/user/results");
    let groups = list("/restrictions/group/results");
    if users.is_empty() && groups.is_empty() {
        return (None, false);
    }
    let mut unnamed = users.len() + groups.len() > RESTRICTIONS_MAX;
    let mut readers = Vec::new();
    for user in users.iter().take(RESTRICTIONS_MAX) {
        match user
            .get("email")
            .and_then(Value::as_str)
            .filter(|e| e.contains('@'))
        {
            Some(email) => readers.push(email.to_ascii_lowercase()),
            None => unnamed = true,
        }
    }
    for group in groups.iter().take(RESTRICTIONS_MAX) {
        match group
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(name) => readers.push(format!("group:{name}")),
            None => unnamed = true,
        }
    }
    (Some(readers), unnamed)
}

fn attachment_of(attachment: &Value) -> Option<Attachment> {
    let id = text_of(attachment, "/id");
    if id.is_empty() || text_of(attachment, "/status") != "current" {
        return None;
    }
    Some(Attachment {
        id: id.to_owned(),
        title: text_of(attachment, "/title").to_owned(),
        version: attachment
            .pointer("/version/number")
            .map(Value::to_string)
            .unwrap_or_default(),
        media_type: text_of(attachment, "/mediaType").to_owned(),
        download: text_of(attachment, "/downloadLink").to_owned(),
        webui: text_of(attachment, "/webuiLink").to_owned(),
        modified_at: text_of(attachment, "/version/createdAt").to_owned(),
        size: attachment
            .get("fileSize")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

fn page_entry(site: &Site<'_>, page: &Value, kept: &Kept) -> Entry {
    let id = text_of(page, "/id");
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::from("page"));
    fields.insert("space_id".into(), Value::from(text_of(page, "/spaceId")));
    fields.insert("page_id".into(), Value::from(id));
    let parent = text_of(page, "/parentId");
    if !parent.is_empty() {
        fields.insert("parent_id".into(), Value::from(parent));
    }
    if let Some(number) = page.pointer("/version/number").and_then(Value::as_i64) {
        fields.insert("version".into(), Value::from(number));
    }
    if let Some(readers) = &kept.readers {
        set_readers(&mut fields, readers.iter().cloned());
    }
    Entry {
        native_id: format!("page:{id}"),
        version: page
            .pointer("/version/number")
            .map(Value::to_string)
            .unwrap_or_default(),
        title: text_of(page, "/title").to_owned(),
        file_name: String::new(),
        url: site.link(&format!("wiki{}", text_of(page, "/_links/webui"))),
        modified_at: text_of(page, "/version/createdAt").to_owned(),
        fields,
        content: None,
        state: serde_json::to_string(kept).unwrap_or_default(),
    }
}

fn attachment_entry(site: &Site<'_>, page: &Value, a: &Attachment, kept: &Kept) -> Entry {
    let mut fields = Map::new();
    fields.insert("kind".into(), Value::from("attachment"));
    fields.insert("space_id".into(), Value::from(text_of(page, "/spaceId")));
    fields.insert("page_id".into(), Value::from(text_of(page, "/id")));
    fields.insert("media_type".into(), Value::from(a.media_type.clone()));
    if let Some(readers) = &kept.readers {
        set_readers(&mut fields, readers.iter().cloned());
    }
    Entry {
        native_id: format!("attachment:{}", a.id),
        version: a.version.clone(),
        title: a.title.clone(),
        file_name: a.title.clone(),
        url: if a.webui.is_empty() {
            String::new()
        } else {
            site.link(&format!("wiki{}", a.webui))
        },
        modified_at: a.modified_at.clone(),
        fields,
        content: None,
        state: serde_json::to_string(a).unwrap_or_default(),
    }
}

/// Where a pass is (`Position.within`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Walk {
    cursor: Option<String>,
    pages: u32,
}

impl ConfluenceProvider {
    /// A changed page's read restrictions: its kept readers and a warning when some could not
    /// be read.
    async fn restrictions(&self, site: &Site<'_>, id: &str) -> (Option<Vec<String>>, String) {
        let answer = site
            .get(
                &format!("wiki/rest/api/content/{id}/restriction/byOperation/read"),
                &[("limit", RESTRICTIONS_MAX.to_string())],
                &format!("the restrictions of page {id}"),
            )
            .await;
        match answer {
            Ok(answer) => match readers_of(&answer) {
                (readers, false) => (readers, String::new()),
                (readers, true) => (
                    readers,
                    format!(
                        "page {id} is restricted to accounts whose e-mail addresses Confluence \
                         does not show: only the readers it names may find it"
                    ),
                ),
            },
            Err(e) => (
                Some(Vec::new()),
                format!("the read restrictions of page {id} could not be read ({e}): nobody may find it until they are"),
            ),
        }
    }

    async fn attachments(
        &self,
        site: &Site<'_>,
        id: &str,
    ) -> Result<Vec<Attachment>, ProviderError> {
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..ATTACHMENT_PAGES_MAX {
            let mut query = vec![("limit", PER_PAGE.to_string())];
            if let Some(cursor) = &cursor {
                query.push(("cursor", cursor.clone()));
            }
            let answer = site
                .get(
                    &format!("wiki/api/v2/pages/{id}/attachments"),
                    &query,
                    &format!("the attachments of page {id}"),
                )
                .await?;
            found.extend(
                answer
                    .get("results")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(attachment_of),
            );
            cursor = next_cursor(&answer);
            if cursor.is_none() {
                break;
            }
        }
        Ok(found)
    }
}

#[async_trait]
impl Provider for ConfluenceProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn oauth(&self) -> Option<crate::oauth::ProviderOAuth> {
        Some(crate::atlassian::oauth(
            "read:confluence-content.all read:confluence-space.summary \
             read:confluence-content.permission read:confluence-content.summary \
             read:page:confluence read:space:confluence read:attachment:confluence offline_access",
        ))
    }

    fn verify_push(
        &self,
        credentials: &Map<String, Value>,
        request: &crate::push::PushRequest<'_>,
    ) -> Option<Result<crate::push::PushEvent, crate::push::PushError>> {
        Some(crate::atlassian::verify_push(
            credentials,
            request,
            Product::Confluence,
            &["page_", "attachment_", "comment_", "blog_"],
        ))
    }

    async fn discover(&self, access: &Access) -> Result<Vec<DiscoveredResource>, ProviderError> {
        let site = Site::new(access, Product::Confluence, true).await?;
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..SPACE_PAGES_MAX {
            let mut query = vec![("limit", PER_PAGE.to_string())];
            if let Some(cursor) = &cursor {
                query.push(("cursor", cursor.clone()));
            }
            let answer = site
                .get("wiki/api/v2/spaces", &query, "the account's spaces")
                .await?;
            for space in answer
                .get("results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = text_of(space, "/id");
                if id.is_empty() {
                    continue;
                }
                found.push(DiscoveredResource {
                    id: format!("space:{id}"),
                    name: format!("{}: {}", text_of(space, "/key"), text_of(space, "/name")),
                    resource_type: "space".to_owned(),
                    metadata: json!({
                        "key": space.get("key"),
                        "name": space.get("name"),
                        "type": space.get("type"),
                        "status": space.get("status"),
                    }),
                });
            }
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
        let site = Site::new(access, Product::Confluence, true).await?;
        let space = space_of(resource)?;
        let mut walk: Walk = if position.within.is_empty() {
            Walk::default()
        } else {
            saved_pass(&position.within)?
        };
        walk.pages += 1;
        if walk.pages > PASS_PAGES_MAX {
            return Err(ProviderError::Invalid(format!(
                "space {space} holds more pages than a pass reads ({PASS_PAGES_MAX} pages of {PER_PAGE})"
            )));
        }
        let mut query = vec![("limit", PER_PAGE.to_string())];
        if let Some(cursor) = &walk.cursor {
            query.push(("cursor", cursor.clone()));
        }
        let answer = site
            .get(
                &format!("wiki/api/v2/spaces/{space}/pages"),
                &query,
                &format!("the pages of space {space}"),
            )
            .await?;
        let pages: Vec<&Value> = answer
            .get("results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| !text_of(p, "/id").is_empty() && text_of(p, "/status") == "current")
            .collect();
        let ids: Vec<String> = pages
            .iter()
            .map(|p| format!("page:{}", text_of(p, "/id")))
            .collect();
        let held = known.objects(&ids).await?;
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        for (page, native) in pages.into_iter().zip(&ids) {
            let version = page
                .pointer("/version/number")
                .map(Value::to_string)
                .unwrap_or_default();
            let kept = match held.get(native) {
                Some(k) if k.version == version => {
                    serde_json::from_str(&k.state).unwrap_or_default()
                }
                _ => {
                    let id = text_of(page, "/id");
                    let (readers, warning) = self.restrictions(&site, id).await;
                    if !warning.is_empty() {
                        warnings.push(warning);
                    }
                    Kept {
                        attachments: self.attachments(&site, id).await?,
                        readers,
                    }
                }
            };
            for attachment in &kept.attachments {
                entries.push(attachment_entry(&site, page, attachment, &kept));
            }
            entries.push(page_entry(&site, page, &kept));
        }
        let next = match next_cursor(&answer) {
            Some(cursor) => {
                walk.cursor = Some(cursor);
                Some(
                    serde_json::to_string(&walk)
                        .map_err(|e| ProviderError::Invalid(e.to_string()))?,
                )
            }
            None => None,
        };
        Ok(Page {
            entries,
            next,
            complete_listing: true,
            acl_warning: ACL_WARNING.to_owned(),
            page_acl_warning: warnings.join("; "),
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
        let site = Site::new(access, Product::Confluence, false)
            .await
            .map_err(object_failure)?;
        if let Some(id) = entry.native_id.strip_prefix("page:") {
            let what = format!("page {}", entry.title);
            let page = site
                .get(
                    &format!("wiki/api/v2/pages/{id}"),
                    &[("body-format", "storage".to_owned())],
                    &what,
                )
                .await
                .map_err(object_failure)?;
            let body = storage_text(text_of(&page, "/body/storage/value"));
            let text = format!("{}\n\n{body}\n", text_of(&page, "/title"));
            if text.len() > max_bytes {
                return Err(ProviderError::Object(format!(
                    "{what} is longer than the {max_bytes} bytes an item may hold"
                )));
            }
            return Ok(Content::Text(text));
        }
        let attachment: Attachment = serde_json::from_str(&entry.state).unwrap_or_default();
        if attachment.download.is_empty() {
            return Err(ProviderError::Object(format!(
                "attachment {} has no download link",
                entry.title
            )));
        }
        if usize::try_from(attachment.size).unwrap_or(usize::MAX) > max_bytes {
            return Err(ProviderError::Object(format!(
                "attachment {} is larger than the {max_bytes} bytes an item may hold",
                entry.title
            )));
        }
        let url = site
            .url(&format!("wiki{}", attachment.download), &[])
            .map_err(object_failure)?;
        let bytes = site
            .get_bytes(&url, max_bytes, &format!("attachment {}", entry.title))
            .await
            .map_err(object_failure)?;
        Ok(Content::File(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_format_reads_as_text_with_headings_lists_tables_and_code() {
        let xhtml = "<h1>Runbook</h1><p>Deploys go out on <strong>Tuesday</strong> &amp; Thursday.</p>\
            <ul><li>Drain the node</li><li>Restart<ol><li>api</li><li>worker</li></ol></li></ul>\
            <table><tbody><tr><th>Service</th><th>Owner</th></tr><tr><td>billing</td><td><p>Ana</p></td></tr></tbody></table>\
            <ac:structured-macro ac:name=\"code\"><ac:parameter ac:name=\"language\">bash</ac:parameter>\
            <ac:plain-text-body><![CDATA[kubectl rollout undo deploy/api]]></ac:plain-text-body></ac:structured-macro>";
        let text = storage_text(xhtml);
        for part in [
            "# Runbook",
            "Deploys go out on Tuesday & Thursday.",
            "- Drain the node",
            "- Restart",
            "  1. api\n  2. worker",
            "| Service | Owner |\n| billing | Ana |",
            "```\nkubectl rollout undo deploy/api\n```",
        ] {
            assert!(text.contains(part), "{part:?}: {text}");
        }
        assert!(!text.contains("bash"), "{text}");
    }

    #[test]
    fn restrictions_become_readers_and_unnamed_users_a_warning() {
        let open = json!({"operation": "read", "restrictions": {"user": {"results": []}, "group": {"results": []}}});
        assert_eq!(readers_of(&open), (None, false));
        let closed = json!({"operation": "read", "restrictions": {
            "user": {"results": [{"accountId": "a1", "email": "Ana@Example.com"}, {"accountId": "a2"}]},
            "group": {"results": [{"name": "sre"}]}}});
        assert_eq!(
            readers_of(&closed),
            (
                Some(vec!["ana@example.com".to_owned(), "group:sre".to_owned()]),
                true
            )
        );
    }

    #[test]
    fn cursors_come_from_the_next_link_and_resources_are_space_ids() {
        let answer =
            json!({"_links": {"next": "/wiki/api/v2/spaces/9/pages?cursor=abc%3D&limit=50"}});
        assert_eq!(next_cursor(&answer).as_deref(), Some("abc="));
        assert_eq!(next_cursor(&json!({"_links": {}})), None);
        let resource = |id: &str| ResourceRef {
            id: id.to_owned(),
            resource_type: "space".to_owned(),
            filters: Value::Null,
            provider_metadata: Value::Null,
        };
        assert_eq!(space_of(&resource("space:123")).unwrap(), "123");
        assert!(space_of(&resource("space:ENG")).is_err());
    }
}
