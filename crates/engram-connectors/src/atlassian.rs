//! What the `confluence` and `jira` providers share: an Atlassian site and how to reach it
//! (credentials, the API's root, HTTP Basic or OAuth 2.0 3LO), requests with Atlassian's rate
//! limits (`429` with `Retry-After` or `X-RateLimit-Reset`) and its error answers, the webhook
//! signature both products use (`X-Hub-Signature: sha256=<hmac>`), and Atlassian Document
//! Format (ADF, the JSON both use for rich text) as plain text.
//!
//! Credentials: `site_url` (`https://acme.atlassian.net`, or a Data Center address) and either
//! `email` with an `api_token` (HTTP Basic, as Atlassian Cloud documents for scripts) or OAuth
//! (`access_token`, or the `oauth` object engram refreshes). With OAuth, Atlassian Cloud is
//! reached through `https://api.atlassian.com/ex/{jira|confluence}/{cloud_id}/…`; the cloud id
//! is `cloud_id` when given, else looked up in `accessible-resources` by the site's address.
//! A site that is not on `atlassian.net` (Data Center, or a test's fake) takes the bearer token
//! at its own address. The token only ever travels in the `Authorization` header.

use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::time::Duration;

use crate::hosted::{self, not_json, unanswered, waited_out};
use crate::{credential, now_unix, Access, ProviderError};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest JSON answer read.
const ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// A `429` whose wait is at most this is waited out inside the pass, at most this many times.
const RATE_WAIT_MAX: Duration = Duration::from_secs(5);
const RATE_RETRIES: u32 = 2;
/// Longest message of Atlassian's quoted in an error.
const QUOTED_MAX: usize = 200;
/// Where OAuth 2.0 (3LO) apps reach Atlassian Cloud.
const OAUTH_GATEWAY: &str = "https://api.atlassian.com";
/// How far a webhook's `timestamp` may be from now before the event is taken for a replay.
const PUSH_WINDOW_MS: i64 = 10 * 60 * 1000;

/// Which product a site's API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Product {
    Jira,
    Confluence,
}

impl Product {
    fn name(self) -> &'static str {
        match self {
            Self::Jira => "Jira",
            Self::Confluence => "Confluence",
        }
    }

    /// Its segment in `api.atlassian.com/ex/{…}/{cloud_id}`.
    fn gateway(self) -> &'static str {
        match self {
            Self::Jira => "jira",
            Self::Confluence => "confluence",
        }
    }
}

/// The credential schema both providers take.
pub(crate) fn credential_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "site_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000},
            "email": {"type": "string", "minLength": 3, "maxLength": 320},
            "api_token": {"type": "string", "minLength": 1, "maxLength": 10000},
            "access_token": {"type": "string", "minLength": 1, "maxLength": 10000},
            "cloud_id": {"type": "string", "pattern": "^[A-Za-z0-9-]{1,100}$"},
            "oauth": crate::oauth::credential_schema(),
            "webhook_secret": {"type": "string", "minLength": 16, "maxLength": 1000}
        },
        "required": ["site_url"],
        "dependentRequired": {"email": ["api_token"], "api_token": ["email"]},
        "anyOf": [{"required": ["api_token"]}, {"required": ["access_token"]}, {"required": ["oauth"]}],
        "additionalProperties": false
    })
}

/// Atlassian's OAuth 2.0 (3LO) authorization server; `scope` the product's read scopes.
pub(crate) fn oauth(scope: &'static str) -> crate::oauth::ProviderOAuth {
    crate::oauth::ProviderOAuth {
        authorization_endpoint: "https://auth.atlassian.com/authorize",
        token_endpoint: "https://auth.atlassian.com/oauth/token",
        scope,
        client_auth: crate::oauth::ClientAuth::Post,
        // `audience` names the API; `prompt=consent` so a refresh token is issued.
        extra_authorization_params: &[("audience", "api.atlassian.com"), ("prompt", "consent")],
    }
}

/// One connector's site: the API's root (ending with `/`), the site's own address (for the
/// links of pages and issues) and the `Authorization` header.
pub(crate) struct Site<'a> {
    pub base: url::Url,
    pub site: url::Url,
    authorization: String,
    product: Product,
    access: &'a Access,
}

fn with_slash(mut url: url::Url) -> url::Url {
    if !url.path().ends_with('/') {
        url.set_path(&format!("{}/", url.path()));
    }
    url.set_query(None);
    url.set_fragment(None);
    url
}

fn quoted(body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return String::new();
    };
    // Jira: `errorMessages` and `errors`; Confluence: `message`, or `errors[].title`.
    let said = value
        .pointer("/errorMessages/0")
        .or_else(|| value.get("message"))
        .or_else(|| value.pointer("/errors/0/title"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if said.is_empty() {
        String::new()
    } else {
        format!(": {}", said.chars().take(QUOTED_MAX).collect::<String>())
    }
}

/// What an error answer (not rate limiting) means for the connector.
pub(crate) fn failure(product: &str, status: u16, body: &[u8], what: &str) -> ProviderError {
    let said = quoted(body);
    match status {
        401 => ProviderError::Unauthorized {
            message: format!("{product} refused the credentials ({what}: 401{said})"),
            http_status: status,
        },
        403 => ProviderError::Resource {
            message: format!("the account may not read {what} (403{said}); grant it access"),
            http_status: status,
        },
        404 | 410 => ProviderError::Resource {
            message: format!("{what} is not found, or not visible to the account ({status}{said})"),
            http_status: status,
        },
        408 | 409 | 429 | 500..=599 => ProviderError::Transient {
            message: format!("{product} answered {status} to {what}{said}"),
            http_status: status,
        },
        _ => ProviderError::Resource {
            message: format!("{product} answered {status} to {what}{said}"),
            http_status: status,
        },
    }
}

/// How long Atlassian asks to wait: `Retry-After` (seconds) or `X-RateLimit-Reset` (an
/// ISO 8601 time), else a backoff of 1, 2, 4… seconds by attempt.
pub(crate) fn retry_wait(
    retry_after: Option<&str>,
    reset: Option<&str>,
    attempt: u32,
    now: i64,
) -> Duration {
    if let Some(wait) = hosted::retry_after(retry_after) {
        return wait;
    }
    if let Some(at) = reset.and_then(|v| {
        time::OffsetDateTime::parse(v.trim(), &time::format_description::well_known::Rfc3339).ok()
    }) {
        let secs = at.unix_timestamp() - now;
        return Duration::from_secs(u64::try_from(secs.max(1)).unwrap_or(1));
    }
    hosted::backoff(attempt)
}

/// The error of a rate limit not waited out.
pub(crate) fn rate_limit_error(product: &str, wait: Duration, now: i64) -> ProviderError {
    hosted::rate_limit_error(
        &format!("{product} is rate limiting this account (429)"),
        wait,
        now,
    )
}

impl<'a> Site<'a> {
    /// The connector's site; `check` checks its address against the outbound policy first.
    pub(crate) async fn new(
        access: &'a Access,
        product: Product,
        check: bool,
    ) -> Result<Self, ProviderError> {
        let raw = credential(access, "site_url")
            .ok_or_else(|| ProviderError::Invalid("the credentials hold no `site_url`".into()))?;
        let site = if check {
            access
                .outbound
                .check_url(raw)
                .await
                .map_err(|e| ProviderError::Invalid(format!("`site_url`: {e}")))?
        } else {
            url::Url::parse(raw).map_err(|e| ProviderError::Invalid(format!("`site_url`: {e}")))?
        };
        let site = with_slash(site);
        if let (Some(email), Some(token)) =
            (credential(access, "email"), credential(access, "api_token"))
        {
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{email}:{token}"));
            return Ok(Self {
                base: site.clone(),
                site,
                authorization: format!("Basic {basic}"),
                product,
                access,
            });
        }
        let token = credential(access, "access_token").ok_or_else(|| {
            ProviderError::Invalid(
                "the credentials hold neither `email` and `api_token` nor an OAuth token".into(),
            )
        })?;
        let authorization = format!("Bearer {token}");
        let cloud = site
            .host_str()
            .is_some_and(|h| h.ends_with(".atlassian.net"));
        let base = match (credential(access, "cloud_id"), cloud) {
            (Some(id), _) => gateway(product, id)?,
            (None, true) => {
                let id = cloud_id(access, &authorization, &site).await?;
                gateway(product, &id)?
            }
            // Data Center (or a test's fake): the token at the site itself.
            (None, false) => site.clone(),
        };
        Ok(Self {
            base,
            site,
            authorization,
            product,
            access,
        })
    }

    /// The address of `path` (relative, without a leading `/`) with `query`.
    pub(crate) fn url(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<url::Url, ProviderError> {
        let mut url = self
            .base
            .join(path)
            .map_err(|e| ProviderError::Invalid(format!("`{path}`: {e}")))?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    /// GETs `url`, waiting out a short rate limit; the answer's body, at most `max_bytes`.
    pub(crate) async fn get_bytes(
        &self,
        url: &url::Url,
        max_bytes: usize,
        what: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        let product = self.product.name();
        let headers = [
            ("authorization", self.authorization.clone()),
            ("accept", "application/json".to_owned()),
        ];
        let mut attempt = 0;
        loop {
            let fetched = self
                .access
                .outbound
                .request_read("GET", url, &headers, None, TIMEOUT, max_bytes)
                .await
                .map_err(|e| unanswered(product, what, e))?;
            if fetched.status == 429 {
                let wait = retry_wait(
                    fetched.header("retry-after"),
                    fetched.header("x-ratelimit-reset"),
                    attempt,
                    now_unix(),
                );
                if !waited_out(wait, &mut attempt, RATE_WAIT_MAX, RATE_RETRIES).await {
                    tracing::warn!(
                        http_status = 429,
                        product,
                        "Atlassian rate limited a connector"
                    );
                    return Err(rate_limit_error(product, wait, now_unix()));
                }
                continue;
            }
            if !(200..300).contains(&fetched.status) {
                return Err(failure(product, fetched.status, &fetched.body, what));
            }
            return Ok(fetched.body);
        }
    }

    /// GETs `path` with `query` and reads its JSON answer.
    pub(crate) async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
        what: &str,
    ) -> Result<Value, ProviderError> {
        let url = self.url(path, query)?;
        let body = self.get_bytes(&url, ANSWER_MAX_BYTES, what).await?;
        serde_json::from_slice(&body).map_err(|e| not_json(self.product.name(), what, 200, e))
    }

    /// The site's address of a link the API gave relative to it (`/browse/KEY-1`,
    /// `/wiki/spaces/…`).
    pub(crate) fn link(&self, path: &str) -> String {
        self.site
            .join(path.trim_start_matches('/'))
            .map(|u| u.to_string())
            .unwrap_or_default()
    }
}

fn gateway(product: Product, cloud_id: &str) -> Result<url::Url, ProviderError> {
    url::Url::parse(&format!(
        "{OAUTH_GATEWAY}/ex/{}/{cloud_id}/",
        product.gateway()
    ))
    .map_err(|e| ProviderError::Invalid(format!("`cloud_id`: {e}")))
}

/// The cloud id of `site` among the sites the OAuth token may reach.
async fn cloud_id(
    access: &Access,
    authorization: &str,
    site: &url::Url,
) -> Result<String, ProviderError> {
    let url = url::Url::parse(&format!("{OAUTH_GATEWAY}/oauth/token/accessible-resources"))
        .map_err(|e| ProviderError::Invalid(e.to_string()))?;
    let fetched = access
        .outbound
        .request_read(
            "GET",
            &url,
            &[
                ("authorization", authorization.to_owned()),
                ("accept", "application/json".to_owned()),
            ],
            None,
            TIMEOUT,
            ANSWER_MAX_BYTES,
        )
        .await
        .map_err(|e| unanswered("Atlassian", "the token's sites", e))?;
    if !(200..300).contains(&fetched.status) {
        return Err(failure(
            "Atlassian",
            fetched.status,
            &fetched.body,
            "the token's sites",
        ));
    }
    let sites: Value = serde_json::from_slice(&fetched.body).unwrap_or(Value::Null);
    let wanted = site.as_str().trim_end_matches('/');
    sites
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| {
            s.get("url")
                .and_then(Value::as_str)
                .map(|u| u.trim_end_matches('/'))
                == Some(wanted)
        })
        .and_then(|s| s.get("id").and_then(Value::as_str))
        .map(str::to_owned)
        .ok_or_else(|| ProviderError::Unauthorized {
            message: format!(
                "the OAuth token was not granted {wanted}: authorize the app for that site"
            ),
            http_status: 403,
        })
}

/// Verifies a webhook delivery of Jira or Confluence: `X-Hub-Signature: sha256=<hex HMAC of
/// the body under the webhook's secret>`; the delivery's id is `X-Atlassian-Webhook-Identifier`
/// (the same on a retry), else the event's name, time and signature; a `timestamp` (epoch
/// milliseconds) in the body more than ten minutes from now is a replay. Events that change
/// nothing engram reads (`project_created`, …) verify as pings; an event without a name, as a
/// change.
pub(crate) fn verify_push(
    credentials: &Map<String, Value>,
    request: &crate::push::PushRequest<'_>,
    product: Product,
    syncs: &[&str],
) -> Result<crate::push::PushEvent, crate::push::PushError> {
    use crate::push::{hmac_sha256_matches, secret, PushError, PushEvent};
    let secret = secret(credentials, product.name())?;
    let signature = request
        .header("x-hub-signature")
        .ok_or_else(|| PushError::Unsigned("the event has no X-Hub-Signature".to_owned()))?;
    let hex = signature.strip_prefix("sha256=").ok_or_else(|| {
        PushError::Unsigned("the event's X-Hub-Signature is not `sha256=…`".to_owned())
    })?;
    if !hmac_sha256_matches(secret, request.body, hex) {
        return Err(PushError::Unsigned(
            "the event's X-Hub-Signature does not match the connector's webhook_secret".to_owned(),
        ));
    }
    let body: Value = serde_json::from_slice(request.body)
        .map_err(|_| PushError::Malformed("the event's body is not JSON".to_owned()))?;
    let event = body
        .get("webhookEvent")
        .or_else(|| body.get("eventType"))
        .or_else(|| body.get("event"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let sent_ms = body.get("timestamp").and_then(Value::as_i64);
    if let Some(sent_ms) = sent_ms {
        if (request.now_unix.saturating_mul(1000) - sent_ms).abs() > PUSH_WINDOW_MS {
            return Err(PushError::Stale(
                "the event's timestamp is more than ten minutes away from now: a replay, or a \
                 clock off"
                    .to_owned(),
            ));
        }
    }
    let delivery_id = match request.header("x-atlassian-webhook-identifier") {
        Some(id) => id.to_owned(),
        None => format!("{event}:{}:{}", sent_ms.unwrap_or_default(), hex.trim()),
    };
    // An event that names itself nowhere (Confluence Cloud's webhooks name theirs in the
    // registration, not the body) is taken as a change: a needless pass costs little, a missed
    // change stays until the next scheduled sync.
    let ping = !event.is_empty() && !syncs.iter().any(|prefix| event.starts_with(prefix));
    Ok(PushEvent {
        delivery_id,
        event,
        ping,
    })
}

/// Atlassian Document Format (ADF) as text: paragraphs and headings on their own lines
/// (headings as `#`), list items with `-` or numbers, code blocks fenced, table rows with `|`,
/// mentions and emoji by their text.
pub(crate) fn adf_text(node: &Value) -> String {
    let mut out = String::new();
    adf_into(node, &mut out, 0);
    squeezed(&out)
}

/// Text as read from markup: each line without its trailing white space, a run of blank lines
/// as one, and none at either end.
pub(crate) fn squeezed(out: &str) -> String {
    let mut text = String::new();
    let mut blank = 0;
    for line in out.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        text.push_str(line);
        text.push('\n');
    }
    text.trim().to_owned()
}

fn adf_children(node: &Value, out: &mut String, depth: usize) {
    for child in node
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        adf_into(child, out, depth);
    }
}

fn adf_into(node: &Value, out: &mut String, depth: usize) {
    if depth > 64 {
        return;
    }
    let attr = |key: &str| node.pointer(&format!("/attrs/{key}"));
    match node.get("type").and_then(Value::as_str).unwrap_or_default() {
        "text" => out.push_str(node.get("text").and_then(Value::as_str).unwrap_or_default()),
        "hardBreak" => out.push('\n'),
        "mention" | "emoji" | "status" | "date" => {
            let text = attr("text")
                .or_else(|| attr("shortName"))
                .or_else(|| attr("timestamp"))
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
                .unwrap_or_default();
            out.push_str(&text);
        }
        "inlineCard" | "blockCard" | "embedCard" => {
            if let Some(url) = attr("url").and_then(Value::as_str) {
                out.push_str(url);
            }
        }
        "heading" => {
            let level = attr("level")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, 6);
            out.push_str(&format!(
                "\n{} ",
                "#".repeat(usize::try_from(level).unwrap_or(1))
            ));
            adf_children(node, out, depth + 1);
            out.push_str("\n\n");
        }
        "paragraph" => {
            adf_children(node, out, depth + 1);
            out.push_str("\n\n");
        }
        "bulletList" | "orderedList" => {
            let ordered = node.get("type").and_then(Value::as_str) == Some("orderedList");
            let indent = "  ".repeat(depth.min(8) / 2);
            for (i, item) in node
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if ordered {
                    out.push_str(&format!("{indent}{}. ", i + 1));
                } else {
                    out.push_str(&format!("{indent}- "));
                }
                let mut inner = String::new();
                adf_children(item, &mut inner, depth + 2);
                out.push_str(inner.trim());
                out.push('\n');
            }
            out.push('\n');
        }
        "codeBlock" => {
            let language = attr("language").and_then(Value::as_str).unwrap_or_default();
            out.push_str(&format!("```{language}\n"));
            adf_children(node, out, depth + 1);
            out.push_str("\n```\n\n");
        }
        "tableRow" => {
            let cells: Vec<String> = node
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|cell| {
                    let mut inner = String::new();
                    adf_children(cell, &mut inner, depth + 1);
                    inner.split_whitespace().collect::<Vec<_>>().join(" ")
                })
                .collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        "table" => {
            adf_children(node, out, depth + 1);
            out.push('\n');
        }
        "rule" => out.push_str("\n---\n"),
        _ => adf_children(node, out, depth + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::{hmac_sha256_hex, PushError, PushRequest};

    #[test]
    fn adf_reads_as_text_with_headings_lists_code_and_tables() {
        let doc = json!({"type": "doc", "version": 1, "content": [
            {"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Steps"}]},
            {"type": "paragraph", "content": [
                {"type": "text", "text": "Ask "},
                {"type": "mention", "attrs": {"id": "a1", "text": "@Ana"}},
                {"type": "text", "text": " first."}]},
            {"type": "orderedList", "content": [
                {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Drain"}]}]},
                {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Restart"}]}]}]},
            {"type": "codeBlock", "attrs": {"language": "sh"}, "content": [{"type": "text", "text": "kubectl rollout restart"}]},
            {"type": "table", "content": [{"type": "tableRow", "content": [
                {"type": "tableHeader", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Service"}]}]},
                {"type": "tableCell", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "api"}]}]}]}]}
        ]});
        let text = adf_text(&doc);
        for part in [
            "## Steps",
            "Ask @Ana first.",
            "1. Drain\n2. Restart",
            "```sh\nkubectl rollout restart\n```",
            "| Service | api |",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    #[test]
    fn webhooks_verify_by_signature_refuse_replays_and_sync_only_on_content_events() {
        let secret = "atlassian-webhook-secret-01";
        let credentials =
            json!({"site_url": "https://acme.atlassian.net", "webhook_secret": secret});
        let credentials = credentials.as_object().unwrap();
        let body = br#"{"webhookEvent":"jira:issue_updated","timestamp":1800000000000}"#;
        let headers = |signature: String| {
            vec![
                ("x-hub-signature".to_owned(), signature),
                (
                    "x-atlassian-webhook-identifier".to_owned(),
                    "w-1".to_owned(),
                ),
            ]
        };
        let at = |headers: &[(String, String)], body: &[u8], now_unix: i64| {
            verify_push(
                credentials,
                &PushRequest {
                    headers,
                    body,
                    now_unix,
                },
                Product::Jira,
                &["jira:issue_", "comment_"],
            )
        };
        let good = headers(format!("sha256={}", hmac_sha256_hex(secret, body)));
        let event = at(&good, body, 1_800_000_100).unwrap();
        assert_eq!(
            (event.delivery_id.as_str(), event.event.as_str(), event.ping),
            ("w-1", "jira:issue_updated", false)
        );
        assert!(matches!(
            at(&good, body, 1_800_001_000),
            Err(PushError::Stale(_))
        ));
        let forged = headers(format!(
            "sha256={}",
            hmac_sha256_hex("another-secret-000000", body)
        ));
        assert!(matches!(
            at(&forged, body, 1_800_000_100),
            Err(PushError::Unsigned(_))
        ));
        let bare = headers(hmac_sha256_hex(secret, body));
        assert!(matches!(
            at(&bare, body, 1_800_000_100),
            Err(PushError::Unsigned(_))
        ));
        let other = br#"{"webhookEvent":"project_created","timestamp":1800000000000}"#;
        let signed = headers(format!("sha256={}", hmac_sha256_hex(secret, other)));
        assert!(at(&signed, other, 1_800_000_100).unwrap().ping);
        let unnamed = br#"{"page":{"id":"42"},"timestamp":1800000000000}"#;
        let signed = headers(format!("sha256={}", hmac_sha256_hex(secret, unnamed)));
        assert!(
            !at(&signed, unnamed, 1_800_000_100).unwrap().ping,
            "a change unless it says otherwise"
        );
        assert!(matches!(
            verify_push(
                &Map::new(),
                &PushRequest {
                    headers: &good,
                    body,
                    now_unix: 1_800_000_100
                },
                Product::Jira,
                &[]
            ),
            Err(PushError::Unsigned(_))
        ));
    }

    #[test]
    fn errors_say_what_to_do_and_rate_limits_say_when() {
        assert!(matches!(
            failure("Jira", 401, br#"{"errorMessages":["nope"]}"#, "x"),
            ProviderError::Unauthorized {
                http_status: 401,
                ..
            }
        ));
        let forbidden = failure(
            "Jira",
            403,
            br#"{"errorMessages":["No access"]}"#,
            "project ENG",
        );
        assert!(
            matches!(forbidden, ProviderError::Resource { .. })
                && forbidden.to_string().contains("No access"),
            "{forbidden}"
        );
        assert!(matches!(
            failure("Jira", 503, b"", "x"),
            ProviderError::Transient { .. }
        ));
        assert_eq!(retry_wait(Some("30"), None, 0, 0), Duration::from_secs(30));
        assert_eq!(
            retry_wait(None, Some("2027-01-15T08:10:00Z"), 0, 1_800_000_000),
            Duration::from_secs(600)
        );
        assert_eq!(retry_wait(None, None, 2, 0), Duration::from_secs(4));
        let limited = rate_limit_error("Confluence", Duration::from_secs(60), 1_800_000_000);
        assert!(matches!(
            limited,
            ProviderError::RateLimited {
                until_unix: 1_800_000_060,
                ..
            }
        ));
        assert!(limited.to_string().contains("rate limiting"));
    }

    #[test]
    fn basic_auth_goes_to_the_site_and_oauth_to_the_gateway() {
        let access = crate::test_access;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let basic = access(
            json!({"site_url": "https://acme.atlassian.net", "email": "a@b.c", "api_token": "t"}),
        );
        let site = rt
            .block_on(Site::new(&basic, Product::Jira, false))
            .unwrap();
        assert_eq!(site.base.as_str(), "https://acme.atlassian.net/");
        assert_eq!(site.authorization, "Basic YUBiLmM6dA==");
        let oauth = access(
            json!({"site_url": "https://acme.atlassian.net", "access_token": "tok", "cloud_id": "c-1"}),
        );
        let site = rt
            .block_on(Site::new(&oauth, Product::Confluence, false))
            .unwrap();
        assert_eq!(
            site.base.as_str(),
            "https://api.atlassian.com/ex/confluence/c-1/"
        );
        assert_eq!(
            site.url("wiki/api/v2/spaces", &[]).unwrap().as_str(),
            "https://api.atlassian.com/ex/confluence/c-1/wiki/api/v2/spaces"
        );
        assert_eq!(
            site.link("/browse/ENG-1"),
            "https://acme.atlassian.net/browse/ENG-1"
        );
        let dc =
            access(json!({"site_url": "https://jira.example.com/jira", "access_token": "pat"}));
        let site = rt.block_on(Site::new(&dc, Product::Jira, false)).unwrap();
        assert_eq!(site.base.as_str(), "https://jira.example.com/jira/");
        assert_eq!(site.authorization, "Bearer pat");
        assert!(matches!(
            rt.block_on(Site::new(
                &access(json!({"site_url": "https://x.example"})),
                Product::Jira,
                false
            )),
            Err(ProviderError::Invalid(_))
        ));
    }
}
