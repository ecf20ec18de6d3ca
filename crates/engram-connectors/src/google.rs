//! What the Google providers (`google_drive`, `gmail`) share: one Google OAuth app serves both
//! (Google's authorization server, asked for a refresh token), the credential schema, and the
//! client of Google's REST APIs: bearer token, JSON answers, Google's error body
//! (`{"error": {"code", "message", "errors": [{"reason"}], "status"}}`) mapped to what it means
//! for the connector, and rate limits waited out in place when short.
//!
//! Both APIs are the same kind of REST API with the same error body and the same quota errors,
//! so they share this module; each provider keeps its own resources and passes in its own
//! module ([`drive`], [`gmail`]).
//!
//! **Errors.** `401` is rejected credentials (the app refreshes an OAuth token and tries once
//! more; a plain `access_token` needs a new one). `429`, and `403` with the reason
//! `userRateLimitExceeded`, `rateLimitExceeded` or `dailyLimitExceeded` (Google's quota errors)
//! are rate limits: a `Retry-After` of at most [`RATE_WAIT_MAX`] is waited out in place (twice at
//! most), else the pass ends as `RateLimited` until then (Google rarely sends `Retry-After`: a
//! backoff of 1, 2, 4… s by attempt stands in). `403` with `insufficientPermissions` (the token
//! lacks the scope) needs a reconnect; another `403` and `404` fail the resource (or the object);
//! `5xx` is retried later. Google's message is quoted, cut short; the token only ever travels
//! in the `Authorization` header.

pub(crate) mod drive;
pub(crate) mod gmail;

use std::time::Duration;

use serde_json::{json, Value};

use crate::hosted::{self, retry_wait, text_of, unanswered};
use crate::{credential, now_unix, Access, ProviderError};

pub use drive::GoogleDriveProvider;
pub use gmail::GmailProvider;

const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest JSON answer read.
const ANSWER_MAX_BYTES: usize = 32 * 1024 * 1024;
/// A wait at most this long is done in place, at most [`RATE_RETRIES`] times.
const RATE_WAIT_MAX: Duration = Duration::from_secs(5);
const RATE_RETRIES: u32 = 2;
/// Longest message of Google's quoted.
const QUOTED_MAX: usize = 200;

/// Google's authorization server, for both providers: a refresh token comes back only with
/// `access_type=offline`, and again on a later consent only with `prompt=consent`. The token
/// endpoint takes the client's id and secret in the form (`client_secret_post`, as Google
/// documents it; it accepts Basic too).
pub(crate) fn oauth(scope: &'static str) -> crate::oauth::ProviderOAuth {
    crate::oauth::ProviderOAuth {
        authorization_endpoint: "https://accounts.google.com/o/oauth2/v2/auth",
        token_endpoint: "https://oauth2.googleapis.com/token",
        scope,
        client_auth: crate::oauth::ClientAuth::Post,
        extra_authorization_params: &[("access_type", "offline"), ("prompt", "consent")],
    }
}

/// The credentials of a Google provider: `oauth` (the user's own Google app) or an
/// `access_token` minted elsewhere (a service account's domain-wide delegation), `api_url` (the
/// API's root, for tests) and `extra` properties of the provider.
pub(crate) fn credential_schema(extra: Value) -> Value {
    let mut properties = json!({
        "access_token": {"type": "string", "minLength": 1, "maxLength": 10000},
        "api_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000},
        "oauth": crate::oauth::credential_schema(),
    });
    if let (Some(all), Some(extra)) = (properties.as_object_mut(), extra.as_object()) {
        all.extend(extra.clone());
    }
    json!({
        "type": "object",
        "properties": properties,
        "anyOf": [{"required": ["access_token"]}, {"required": ["oauth"]}],
        "additionalProperties": false
    })
}

fn quoted(message: &str) -> String {
    message
        .chars()
        .filter(|c| !c.is_control())
        .take(QUOTED_MAX)
        .collect()
}

/// The first `reason` of Google's error body.
fn reason(answer: &Value) -> &str {
    text_of(answer, "/error/errors/0/reason")
}

/// Whether an answer is one of Google's rate limits.
fn rate_limited(status: u16, answer: &Value) -> bool {
    status == 429
        || (status == 403
            && matches!(
                reason(answer),
                "userRateLimitExceeded" | "rateLimitExceeded" | "dailyLimitExceeded"
            ))
}

/// What an HTTP failure of `source` (`Google Drive`, `Gmail`) on `what` means.
pub(crate) fn failure(source: &str, status: u16, answer: &Value, what: &str) -> ProviderError {
    let said = quoted(text_of(answer, "/error/message"));
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    };
    match (status, reason(answer)) {
        (401, _) => ProviderError::Unauthorized {
            message: format!("{source} refused the token ({what}: 401{said}); reconnect"),
            http_status: status,
        },
        (403, "insufficientPermissions" | "authError") => ProviderError::Unauthorized {
            message: format!(
                "the token lacks a scope ({what}: 403{said}); reconnect with the scope the setup \
                 guide names"
            ),
            http_status: status,
        },
        (408 | 500..=599, _) => ProviderError::Transient {
            message: format!("{source} answered {status} to {what}{said}"),
            http_status: status,
        },
        (404, _) => ProviderError::Resource {
            message: format!("{source} has no {what} (404{said})"),
            http_status: status,
        },
        _ => ProviderError::Resource {
            message: format!("{source} refused {what} ({status}{said})"),
            http_status: status,
        },
    }
}

/// One Google API of a connector: where it is and the token that reads it.
pub(crate) struct Api<'a> {
    base: url::Url,
    token: String,
    source: &'static str,
    access: &'a Access,
}

impl std::fmt::Debug for Api<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

/// An answer of a Google API that is not JSON (a download, an export).
pub(crate) enum Body {
    Json(Value),
    Bytes(Vec<u8>),
}

impl<'a> Api<'a> {
    /// The API at the credentials' `url_key` (else `api_url`, else `default`).
    pub(crate) async fn new(
        access: &'a Access,
        source: &'static str,
        url_key: &str,
        default: &str,
        check: bool,
    ) -> Result<Self, ProviderError> {
        let token = credential(access, "access_token").ok_or_else(|| {
            ProviderError::Invalid(
                "the credentials hold no `access_token` (or `oauth` not yet authorized)".to_owned(),
            )
        })?;
        let raw = credential(access, url_key)
            .or_else(|| credential(access, "api_url"))
            .unwrap_or(default);
        let mut base = if check {
            access
                .outbound
                .check_url(raw)
                .await
                .map_err(|e| ProviderError::Invalid(format!("`{url_key}`: {e}")))?
        } else {
            url::Url::parse(raw).map_err(|e| ProviderError::Invalid(format!("`{url_key}`: {e}")))?
        };
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        base.set_query(None);
        base.set_fragment(None);
        Ok(Self {
            base,
            token: token.to_owned(),
            source,
            access,
        })
    }

    /// `path` (segments, each escaped) with `query` under the API's root.
    fn url(&self, path: &[&str], query: &[(&str, String)]) -> Result<url::Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|()| ProviderError::Invalid("`api_url` cannot be a base".to_owned()))?;
            segments.pop_if_empty();
            segments.extend(path);
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    /// GETs a JSON answer.
    pub(crate) async fn get(
        &self,
        path: &[&str],
        query: &[(&str, String)],
        what: &str,
    ) -> Result<Value, ProviderError> {
        match self
            .send("GET", path, query, None, what, ANSWER_MAX_BYTES, true)
            .await?
        {
            Body::Json(value) => Ok(value),
            Body::Bytes(_) => Ok(Value::Null),
        }
    }

    /// POSTs `body` as JSON; the JSON answer (`null` for an empty one).
    pub(crate) async fn post(
        &self,
        path: &[&str],
        query: &[(&str, String)],
        body: &Value,
        what: &str,
    ) -> Result<Value, ProviderError> {
        let body = Some(body.to_string().into_bytes());
        match self
            .send("POST", path, query, body, what, ANSWER_MAX_BYTES, true)
            .await?
        {
            Body::Json(value) => Ok(value),
            Body::Bytes(_) => Ok(Value::Null),
        }
    }

    /// GETs content (a download, an export), at most `max_bytes`.
    pub(crate) async fn download(
        &self,
        path: &[&str],
        query: &[(&str, String)],
        what: &str,
        max_bytes: usize,
    ) -> Result<Vec<u8>, ProviderError> {
        match self
            .send("GET", path, query, None, what, max_bytes, false)
            .await?
        {
            Body::Bytes(bytes) => Ok(bytes),
            Body::Json(value) => Ok(value.to_string().into_bytes()),
        }
    }

    #[allow(clippy::too_many_arguments)] // one private call site per kind of request
    async fn send(
        &self,
        method: &str,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<Vec<u8>>,
        what: &str,
        max_bytes: usize,
        json: bool,
    ) -> Result<Body, ProviderError> {
        let url = self.url(path, query)?;
        let mut headers = vec![("authorization", format!("Bearer {}", self.token))];
        if json {
            headers.push(("accept", "application/json".to_owned()));
        }
        if body.is_some() {
            headers.push(("content-type", "application/json".to_owned()));
        }
        let mut attempt = 0;
        loop {
            let fetched = self
                .access
                .outbound
                .request_read(method, &url, &headers, body.clone(), TIMEOUT, max_bytes)
                .await
                .map_err(|e| {
                    if matches!(&e, engram_outbound::OutboundError::Request(m) if m.contains("longer than"))
                    {
                        ProviderError::Object(format!("{what} is larger than {max_bytes} bytes"))
                    } else {
                        unanswered(self.source, what, e)
                    }
                })?;
            let ok = (200..300).contains(&fetched.status);
            if ok && !json {
                return Ok(Body::Bytes(fetched.body));
            }
            let answer: Value = serde_json::from_slice(&fetched.body).unwrap_or(Value::Null);
            if ok {
                if answer.is_null() && !fetched.body.is_empty() {
                    return Err(hosted::not_json(
                        self.source,
                        what,
                        fetched.status,
                        "an unreadable body",
                    ));
                }
                return Ok(Body::Json(answer));
            }
            if rate_limited(fetched.status, &answer) {
                let wait = retry_wait(fetched.header("retry-after"), attempt);
                if wait > RATE_WAIT_MAX || attempt >= RATE_RETRIES {
                    tracing::warn!(
                        http_status = fetched.status,
                        source = self.source,
                        "Google rate limited a connector"
                    );
                    let why = match reason(&answer) {
                        "" => String::new(),
                        r => format!(", {}", quoted(r)),
                    };
                    return Err(hosted::rate_limit_error(
                        &format!(
                            "{} is rate limiting this account ({what}: {}{why})",
                            self.source, fetched.status
                        ),
                        wait,
                        now_unix(),
                    ));
                }
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            return Err(failure(self.source, fetched.status, &answer, what));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn googles_errors_mean_what_they_say() {
        let limited = json!({"error": {"code": 403, "message": "User Rate Limit Exceeded",
            "errors": [{"domain": "usageLimits", "reason": "userRateLimitExceeded"}]}});
        assert!(rate_limited(403, &limited));
        assert!(rate_limited(429, &Value::Null));
        let denied = json!({"error": {"code": 403, "message": "The user does not have sufficient permissions",
            "errors": [{"domain": "global", "reason": "insufficientFilePermissions"}]}});
        assert!(!rate_limited(403, &denied));
        assert!(matches!(
            failure("Google Drive", 403, &denied, "file x"),
            ProviderError::Resource { .. }
        ));
        let scope = json!({"error": {"errors": [{"reason": "insufficientPermissions"}]}});
        assert!(matches!(
            failure("Gmail", 403, &scope, "labels"),
            ProviderError::Unauthorized { .. }
        ));
        assert!(matches!(
            failure("Gmail", 401, &Value::Null, "labels"),
            ProviderError::Unauthorized { .. }
        ));
        assert!(matches!(
            failure("Gmail", 404, &Value::Null, "label L"),
            ProviderError::Resource {
                http_status: 404,
                ..
            }
        ));
        assert!(matches!(
            failure("Gmail", 503, &Value::Null, "labels"),
            ProviderError::Transient { .. }
        ));
    }

    #[test]
    fn the_oauth_app_asks_for_a_refresh_token() {
        let oauth = oauth("https://www.googleapis.com/auth/drive.readonly");
        assert!(oauth
            .extra_authorization_params
            .contains(&("access_type", "offline")));
        assert!(oauth
            .extra_authorization_params
            .contains(&("prompt", "consent")));
    }
}
