//! OAuth 2.0 for connectors: the authorization-code flow with PKCE (S256) that engram runs for
//! a user, and the refresh of the tokens it yields, against any provider's authorization server
//! (RFC 6749, RFC 7636; the `iss` check of RFC 9207 where the server sends it). Every request
//! goes through the outbound client, so a token endpoint on a private address is refused unless
//! the instance allows private addresses.
//!
//! How the app is meant to use it:
//!
//! 1. **Start** (`POST /connectors/{id}/oauth/start`): [`OAuthClient::start`] with a `state` the
//!    app makes, binding the connector, the organization and an expiry (sealed or signed, so the
//!    callback can trust what it reads back). It answers the URL to send the user to and the
//!    [`Pkce`] pair whose verifier the app keeps sealed with the vault until the callback (in its
//!    own row, or sealed into the state itself); the verifier is never sent in the clear before
//!    the code is exchanged.
//! 2. **Callback**: [`OAuthClient::callback`] reads the redirect's query (an `error` there is the
//!    user or the server refusing, [`OAuthError::Denied`]); the app checks the state it gets back
//!    (connector, organization, not expired), opens the verifier, and calls
//!    [`OAuthClient::exchange_code`]. The [`TokenSet`] (access token, refresh token, expiry) is
//!    sealed into the connector's credentials with the vault, and the first sync starts.
//! 3. **Refresh** before the access token expires ([`TokenSet::expires_within`] with a margin),
//!    under the connector's sync lease, so two instances never refresh one connector at once:
//!    [`OAuthClient::refresh`]. A rotated refresh token comes back in the [`TokenSet`] and must be
//!    sealed in the same transaction as the new access token; a server that rotates refuses the
//!    old one from then on, and many revoke the whole grant when an old one is used again.
//! 4. **Rejected**: a refresh answered [`OAuthError::InvalidGrant`] (expired, revoked, already
//!    used) sets `needs_reauth` (with `needs_reauth_at` and the reason) and stops scheduled syncs
//!    until new credentials or a new flow succeed; [`OAuthError::is_transient`] errors (network,
//!    time-out, 5xx, 429) are retried later with the old tokens kept; other refusals
//!    ([`OAuthError::Rejected`], e.g. `invalid_client` after the app's secret changed) block the
//!    connector until its credentials are updated.
//!
//! No token, secret, code or verifier appears in a `Debug` or `Display` output or an error
//! message: each is a [`Secret`], and what a server says in an error is quoted only after every
//! secret sent to it has been cut out.

use std::fmt;
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use engram_outbound::{Outbound, OutboundError, Url};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::ProviderError;

/// How long one token request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest token answer read.
const ANSWER_MAX_BYTES: usize = 1024 * 1024;
/// The longest part of a server's error description quoted in an error.
const QUOTED_MAX: usize = 200;
/// The longest `expires_in` taken as said (ten years); a longer one is cut to it.
const EXPIRES_IN_MAX: i64 = 10 * 365 * 86_400;
/// Random bytes in a PKCE verifier: 43 characters once encoded (RFC 7636 asks 43 to 128).
const VERIFIER_BYTES: usize = 32;

/// Error codes that mean the grant itself is gone (expired, revoked, used): `invalid_grant` as
/// RFC 6749 names it, and the names GitHub (`bad_refresh_token`, `bad_verification_code`) and
/// Slack (`invalid_refresh_token`, `invalid_code`) give the same refusals.
const GRANT_REFUSED: &[&str] = &[
    "invalid_grant",
    "bad_refresh_token",
    "bad_verification_code",
    "invalid_refresh_token",
    "invalid_code",
];

/// A secret string (a token, a client secret, an authorization code, a PKCE verifier): shown
/// as `<redacted>` by `Debug`, without `Display`, read only through [`Secret::expose`].
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, to send it or to seal it; never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How the client proves itself to the token endpoint (RFC 6749 section 2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// HTTP Basic with the form-encoded id and secret (`client_secret_basic`), which every
    /// server must accept.
    #[default]
    Basic,
    /// The id and secret in the request body (`client_secret_post`), as GitHub and Slack
    /// document it.
    Post,
}

/// One provider's authorization server and the OAuth app registered with it.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// Where the user authorizes (the provider's `authorize` page).
    pub authorization_endpoint: Url,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: Url,
    pub client_id: String,
    /// `None` for a public client, which proves itself by PKCE alone.
    pub client_secret: Option<Secret>,
    pub client_auth: ClientAuth,
    /// The callback address registered with the app, sent with the authorization and again
    /// with the code.
    pub redirect_uri: String,
    /// The scopes asked, already joined as the provider wants them (spaces by the RFC, commas
    /// for some); `None` asks for the app's defaults.
    pub scope: Option<String>,
    /// The server's issuer identifier: when set, a callback carrying another `iss` (RFC 9207)
    /// is refused (a mix-up of servers).
    pub issuer: Option<String>,
    /// More authorization parameters a provider needs (Google's `access_type=offline` and
    /// `prompt=consent`, for a refresh token).
    pub extra_authorization_params: Vec<(String, String)>,
}

/// A PKCE pair (RFC 7636, `S256`): the verifier, kept by the app until the code is exchanged,
/// and the challenge derived from it, sent with the authorization.
#[derive(Debug, Clone)]
pub struct Pkce {
    verifier: Secret,
    challenge: String,
}

impl Pkce {
    /// A new verifier of 32 random bytes (43 characters) and its challenge.
    pub fn generate() -> Result<Self, OAuthError> {
        let mut bytes = [0u8; VERIFIER_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| OAuthError::Invalid("no randomness available".to_owned()))?;
        Ok(Self::from_verifier(Secret(URL_SAFE_NO_PAD.encode(bytes))))
    }

    /// The pair of a verifier kept earlier (opened again for the callback).
    pub fn from_verifier(verifier: Secret) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, verifier.expose().as_bytes());
        Self {
            challenge: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            verifier,
        }
    }

    pub fn verifier(&self) -> &Secret {
        &self.verifier
    }

    /// `BASE64URL(SHA256(verifier))`, the `code_challenge` sent with `code_challenge_method=S256`.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }
}

/// The start of an authorization: where to send the user, and the PKCE pair to keep.
#[derive(Debug, Clone)]
pub struct AuthorizationStart {
    pub url: Url,
    pub pkce: Pkce,
}

/// What the authorization server sent back to the redirect URI.
#[derive(Debug, Clone)]
pub struct Callback {
    pub code: Secret,
    pub state: String,
}

/// Tokens from the token endpoint.
#[derive(Debug, Clone)]
pub struct TokenSet {
    pub access_token: Secret,
    /// `Bearer` unless the server says otherwise.
    pub token_type: String,
    /// The refresh token to keep from now on. After [`OAuthClient::refresh`] it is the rotated
    /// one when the server rotated it, else the one that was used; `None` only when the server
    /// issued none at all.
    pub refresh_token: Option<Secret>,
    /// When the access token expires, counted from just before the request was sent; `None`
    /// when the server did not say (a token that lives until revoked).
    pub expires_at: Option<OffsetDateTime>,
    /// The scopes granted, when the server says (they may be fewer than asked).
    pub scope: Option<String>,
}

impl TokenSet {
    /// Whether the access token expires within `margin` of `now` (time to refresh). A token
    /// without an expiry never does.
    pub fn expires_within(&self, now: OffsetDateTime, margin: Duration) -> bool {
        self.expires_at.is_some_and(|at| at - margin <= now)
    }
}

/// Why an OAuth step failed. No variant holds a token, secret, code or verifier.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The grant is gone (expired, revoked, a refresh token already used, a code already
    /// exchanged): only a new authorization helps. Sets `needs_reauth`.
    #[error("the authorization server refused the grant ({error}{}): the connector must be authorized again", quoted(description))]
    InvalidGrant {
        error: String,
        description: Option<String>,
    },
    /// The server refused the request for another reason (`invalid_client`,
    /// `unauthorized_client`, `invalid_scope`, a 4xx without an error): retrying will not help
    /// until the app's settings or credentials change.
    #[error(
        "the authorization server refused the request ({error}{}, HTTP {http_status})",
        quoted(description)
    )]
    Rejected {
        error: String,
        description: Option<String>,
        http_status: u16,
    },
    /// Worth retrying later: unreachable, timed out, a 5xx or 429, an answer that was not a
    /// token answer. The tokens held stay as they are.
    #[error("{message}")]
    Transient { message: String, http_status: u16 },
    /// The authorization was not granted: the redirect came back with an `error`
    /// (`access_denied` when the user declined).
    #[error("the authorization was not granted ({error}{})", quoted(description))]
    Denied {
        error: String,
        description: Option<String>,
    },
    /// The settings or the callback are wrong (an endpoint the outbound policy refuses, a
    /// callback without a code, another issuer).
    #[error("{0}")]
    Invalid(String),
}

impl OAuthError {
    /// Whether the connector needs to be authorized again (`needs_reauth`).
    pub fn needs_reauth(&self) -> bool {
        matches!(self, Self::InvalidGrant { .. })
    }

    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }

    /// The HTTP status the server answered, 0 when none.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::Rejected { http_status, .. } | Self::Transient { http_status, .. } => {
                *http_status
            }
            Self::InvalidGrant { .. } | Self::Denied { .. } | Self::Invalid(_) => 0,
        }
    }
}

impl From<OAuthError> for ProviderError {
    fn from(err: OAuthError) -> Self {
        let http_status = err.http_status();
        match err {
            OAuthError::InvalidGrant { .. } | OAuthError::Denied { .. } => Self::Unauthorized {
                message: err.to_string(),
                http_status,
            },
            OAuthError::Transient { message, .. } => Self::Transient {
                message,
                http_status,
            },
            OAuthError::Rejected { .. } | OAuthError::Invalid(_) => Self::Invalid(err.to_string()),
        }
    }
}

fn quoted(description: &Option<String>) -> String {
    description
        .as_deref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// The OAuth client of one provider's app. Cheap to clone.
#[derive(Clone)]
pub struct OAuthClient {
    config: OAuthConfig,
    outbound: Outbound,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OAuthClient {
    pub fn new(config: OAuthConfig, outbound: Outbound) -> Self {
        Self { config, outbound }
    }

    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// Starts an authorization: a new PKCE pair and the URL that asks the user for it, with
    /// `state` (made by the caller, bound to what it authorizes) sent along and returned to the
    /// redirect URI unchanged.
    pub fn start(&self, state: &str) -> Result<AuthorizationStart, OAuthError> {
        let pkce = Pkce::generate()?;
        Ok(AuthorizationStart {
            url: self.authorization_url(state, &pkce),
            pkce,
        })
    }

    /// The authorization URL for `state` and the challenge of `pkce` (`response_type=code`,
    /// `code_challenge_method=S256`), the endpoint's own query kept.
    pub fn authorization_url(&self, state: &str, pkce: &Pkce) -> Url {
        let mut url = self.config.authorization_endpoint.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.config.client_id)
                .append_pair("redirect_uri", &self.config.redirect_uri);
            if let Some(scope) = &self.config.scope {
                query.append_pair("scope", scope);
            }
            query
                .append_pair("state", state)
                .append_pair("code_challenge", pkce.challenge())
                .append_pair("code_challenge_method", "S256");
            for (name, value) in &self.config.extra_authorization_params {
                query.append_pair(name, value);
            }
        }
        url
    }

    /// Reads the query of the request that reached the redirect URI: its code and state, or the
    /// refusal it carries. With [`OAuthConfig::issuer`] set, an `iss` naming another server is
    /// refused.
    pub fn callback(&self, query: &str) -> Result<Callback, OAuthError> {
        let (mut code, mut state, mut error, mut description, mut iss) =
            (None, None, None, None, None);
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let value = value.into_owned();
            match name.as_ref() {
                "code" => code = Some(Secret(value)),
                "state" => state = Some(value),
                "error" => error = Some(value),
                "error_description" => description = Some(value),
                "iss" => iss = Some(value),
                _ => {}
            }
        }
        if let (Some(expected), Some(got)) = (&self.config.issuer, &iss) {
            if expected != got {
                return Err(OAuthError::Invalid(
                    "the authorization answer names another issuer than this provider's".to_owned(),
                ));
            }
        }
        if let Some(error) = error {
            return Err(OAuthError::Denied {
                error: error_code(&error),
                description: description.map(|d| scrub(&d, &[])),
            });
        }
        let state = state.ok_or_else(|| {
            OAuthError::Invalid("the authorization answer has no `state`".to_owned())
        })?;
        let code = code.ok_or_else(|| {
            OAuthError::Invalid("the authorization answer has no `code`".to_owned())
        })?;
        Ok(Callback { code, state })
    }

    /// Exchanges an authorization code (with the verifier of the PKCE pair its authorization
    /// was started with) for tokens.
    pub async fn exchange_code(&self, code: &Secret, pkce: &Pkce) -> Result<TokenSet, OAuthError> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.expose()),
            ("redirect_uri", &self.config.redirect_uri),
            ("code_verifier", pkce.verifier().expose()),
        ];
        self.token_request(&form, &[code, pkce.verifier()]).await
    }

    /// Refreshes the access token. The answer's refresh token is the rotated one when the
    /// server rotated it, else `refresh_token` itself.
    pub async fn refresh(&self, refresh_token: &Secret) -> Result<TokenSet, OAuthError> {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose()),
        ];
        let mut tokens = self.token_request(&form, &[refresh_token]).await?;
        if tokens.refresh_token.is_none() {
            tokens.refresh_token = Some(refresh_token.clone());
        }
        Ok(tokens)
    }

    /// POSTs `form` to the token endpoint with the client's authentication and reads the
    /// answer. `sent` are the secrets in the form, cut out of anything quoted from the server.
    async fn token_request(
        &self,
        form: &[(&str, &str)],
        sent: &[&Secret],
    ) -> Result<TokenSet, OAuthError> {
        let (headers, body) = self.token_form(form);
        let mut secrets: Vec<&Secret> = sent.to_vec();
        if let Some(secret) = &self.config.client_secret {
            secrets.push(secret);
        }

        let sent_at = OffsetDateTime::now_utc();
        let answer = self
            .outbound
            .request_read(
                "POST",
                &self.config.token_endpoint,
                &headers,
                Some(body),
                TIMEOUT,
                ANSWER_MAX_BYTES,
            )
            .await
            .map_err(outbound_error)?;
        read_token_answer(
            answer.status,
            answer.content_type.as_deref(),
            &answer.body,
            sent_at,
            &secrets,
        )
    }

    /// The headers and form body of a token request: `form` and the client's authentication.
    /// (Built apart from the request: the form serializer is not `Send`.)
    fn token_form(&self, form: &[(&str, &str)]) -> (Vec<(&'static str, String)>, Vec<u8>) {
        let mut body = url::form_urlencoded::Serializer::new(String::new());
        body.extend_pairs(form);
        let mut headers = vec![
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("accept", "application/json".to_owned()),
            // A fresh connection per token request: a pooled one the server has closed fails
            // as "connection reset" with the request perhaps received, and a refresh is not
            // safe to send twice (its token rotates). Token requests are rare.
            ("connection", "close".to_owned()),
        ];
        match (&self.config.client_secret, self.config.client_auth) {
            (Some(secret), ClientAuth::Basic) => {
                // RFC 6749 2.3.1: each form-encoded before they are joined and encoded.
                let encode = |s: &str| -> String {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
                };
                let pair = format!(
                    "{}:{}",
                    encode(&self.config.client_id),
                    encode(secret.expose())
                );
                headers.push(("authorization", format!("Basic {}", STANDARD.encode(pair))));
            }
            (Some(secret), ClientAuth::Post) => {
                body.append_pair("client_id", &self.config.client_id);
                body.append_pair("client_secret", secret.expose());
            }
            (None, _) => {
                body.append_pair("client_id", &self.config.client_id);
            }
        }
        (headers, body.finish().into_bytes())
    }
}

/// An outbound failure: a refused or malformed endpoint is the settings' fault, the rest
/// (unreachable, timed out) passes.
fn outbound_error(err: OutboundError) -> OAuthError {
    match err {
        OutboundError::InvalidUrl(_)
        | OutboundError::SchemeNotAllowed
        | OutboundError::AddressRefused { .. } => {
            OAuthError::Invalid(format!("the token endpoint: {err}"))
        }
        OutboundError::Unresolvable(_)
        | OutboundError::Timeout(_)
        | OutboundError::Connect(_)
        | OutboundError::Request(_) => OAuthError::Transient {
            message: format!("the token endpoint could not be reached: {err}"),
            http_status: 0,
        },
    }
}

/// Reads a token endpoint's answer: tokens, or the error it names (whatever the status: some
/// providers answer errors with `200`).
fn read_token_answer(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    sent_at: OffsetDateTime,
    secrets: &[&Secret],
) -> Result<TokenSet, OAuthError> {
    if status >= 500 || status == 429 || status == 408 {
        return Err(OAuthError::Transient {
            message: format!("the token endpoint answered HTTP {status}; engram tries again later"),
            http_status: status,
        });
    }
    let fields = parse_fields(content_type, body);
    if let Some(error) = fields
        .as_ref()
        .and_then(|f| f.get("error"))
        .and_then(Value::as_str)
    {
        let error = error_code(error);
        let description = fields
            .as_ref()
            .and_then(|f| f.get("error_description"))
            .and_then(Value::as_str)
            .map(|d| scrub(d, secrets));
        return Err(if GRANT_REFUSED.contains(&error.as_str()) {
            OAuthError::InvalidGrant { error, description }
        } else {
            OAuthError::Rejected {
                error,
                description,
                http_status: status,
            }
        });
    }
    if !(200..300).contains(&status) {
        return Err(OAuthError::Rejected {
            error: "no error code".to_owned(),
            description: None,
            http_status: status,
        });
    }
    let malformed = |what: &str| OAuthError::Transient {
        message: format!("the token endpoint's answer is not a token answer ({what})"),
        http_status: status,
    };
    let fields = fields.ok_or_else(|| malformed("neither JSON nor a form"))?;
    let text = |name: &str| {
        fields
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let access_token = text("access_token").ok_or_else(|| malformed("no `access_token`"))?;
    let expires_in = match fields.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_i64().ok_or_else(|| malformed("`expires_in`"))?),
        Some(Value::String(s)) => Some(s.trim().parse().map_err(|_| malformed("`expires_in`"))?),
        Some(_) => return Err(malformed("`expires_in`")),
    };
    Ok(TokenSet {
        access_token: Secret::new(access_token),
        token_type: text("token_type").unwrap_or("Bearer").to_owned(),
        refresh_token: text("refresh_token").map(Secret::new),
        expires_at: expires_in
            .map(|s| sent_at + time::Duration::seconds(s.clamp(0, EXPIRES_IN_MAX))),
        scope: text("scope").map(str::to_owned),
    })
}

/// The answer's fields: a JSON object, or a form (GitHub's answer without `Accept`).
fn parse_fields(content_type: Option<&str>, body: &[u8]) -> Option<Map<String, Value>> {
    if let Ok(Value::Object(map)) = serde_json::from_slice(body) {
        return Some(map);
    }
    let form = content_type.is_some_and(|t| {
        t.trim_start()
            .starts_with("application/x-www-form-urlencoded")
    });
    form.then(|| {
        url::form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect()
    })
}

/// An error code as RFC 6749 allows it (printable ASCII but `"` and `\`), else a placeholder:
/// nothing else a server sends is repeated.
fn error_code(code: &str) -> String {
    let allowed = |c: char| matches!(c, '\x20'..='\x21' | '\x23'..='\x5b' | '\x5d'..='\x7e');
    if !code.is_empty() && code.len() <= 64 && code.chars().all(allowed) {
        code.to_owned()
    } else {
        "unreadable error code".to_owned()
    }
}

/// A server's description, cut to [`QUOTED_MAX`] characters, control characters dropped and
/// every secret sent to it replaced, so a server that repeats what it was sent leaks nothing.
fn scrub(description: &str, secrets: &[&Secret]) -> String {
    let mut text = description.to_owned();
    for secret in secrets {
        if !secret.expose().is_empty() {
            text = text.replace(secret.expose(), "<redacted>");
        }
    }
    let mut out: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(QUOTED_MAX)
        .collect();
    if text.chars().count() > QUOTED_MAX {
        out.push('…');
    }
    out
}

/// A provider's authorization server and what its connectors ask of it: the defaults of a
/// connector's `oauth` credentials (each endpoint may be overridden there, for a provider's
/// self-hosted edition or another region).
#[derive(Debug, Clone, Copy)]
pub struct ProviderOAuth {
    pub authorization_endpoint: &'static str,
    pub token_endpoint: &'static str,
    /// The scopes asked by default, joined as the provider wants them.
    pub scope: &'static str,
    pub client_auth: ClientAuth,
    pub extra_authorization_params: &'static [(&'static str, &'static str)],
}

/// The JSON Schema of the `oauth` member of a provider's credentials: the user's own OAuth app
/// (`client_id`, `client_secret`) and either a `refresh_token` they already hold or nothing
/// more (engram runs the authorization-code flow, `POST /connectors/{id}/oauth/start`). The
/// tokens engram obtains are kept in the same object (`access_token`, `refresh_token`,
/// `expires_at`).
pub fn credential_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "description": "OAuth 2.0 with your own app: engram refreshes the access token before it expires",
        "properties": {
            "client_id": {"type": "string", "minLength": 1, "maxLength": 1000},
            "client_secret": {"type": "string", "minLength": 1, "maxLength": 1000},
            "refresh_token": {"type": "string", "minLength": 1, "maxLength": 10000},
            "access_token": {"type": "string", "minLength": 1, "maxLength": 10000},
            "expires_at": {"type": "string", "format": "date-time"},
            "scope": {"type": "string", "maxLength": 2000},
            "authorization_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000},
            "token_url": {"type": "string", "pattern": "^https?://", "maxLength": 2000},
            "issuer": {"type": "string", "minLength": 1, "maxLength": 2000}
        },
        "required": ["client_id"],
        "additionalProperties": false
    })
}

/// The `oauth` member of a connector's credentials, read.
#[derive(Debug, Clone)]
pub struct OAuthCredentials {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    pub refresh_token: Option<Secret>,
    pub access_token: Option<Secret>,
    pub expires_at: Option<OffsetDateTime>,
    pub scope: Option<String>,
    pub authorization_url: Option<String>,
    pub token_url: Option<String>,
    pub issuer: Option<String>,
}

impl OAuthCredentials {
    /// The `oauth` member of `credentials`; `None` when there is none (a plain token).
    pub fn read(credentials: &Map<String, Value>) -> Option<Self> {
        let oauth = credentials.get("oauth")?.as_object()?;
        let text = |name: &str| {
            oauth
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Some(Self {
            client_id: text("client_id").unwrap_or_default(),
            client_secret: text("client_secret").map(Secret),
            refresh_token: text("refresh_token").map(Secret),
            access_token: text("access_token").map(Secret),
            expires_at: text("expires_at").and_then(|at| {
                OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339).ok()
            }),
            scope: text("scope"),
            authorization_url: text("authorization_url"),
            token_url: text("token_url"),
            issuer: text("issuer"),
        })
    }

    /// Whether the access token must be refreshed before use: there is none, or it expires
    /// within `margin` of `now`. Without a refresh token nothing can be refreshed.
    pub fn wants_refresh(&self, now: OffsetDateTime, margin: Duration) -> bool {
        self.refresh_token.is_some()
            && (self.access_token.is_none() || self.expires_at.is_some_and(|at| at - margin <= now))
    }

    /// The client of this app on `provider`'s server (or the endpoints the credentials name),
    /// with `redirect_uri` as the callback (empty to refresh only).
    pub fn client(
        &self,
        provider: &ProviderOAuth,
        redirect_uri: &str,
        outbound: Outbound,
    ) -> Result<OAuthClient, OAuthError> {
        let endpoint = |given: &Option<String>, default: &str, what: &str| {
            let at = given.as_deref().unwrap_or(default);
            Url::parse(at).map_err(|_| OAuthError::Invalid(format!("`oauth.{what}` is not a URL")))
        };
        Ok(OAuthClient::new(
            OAuthConfig {
                authorization_endpoint: endpoint(
                    &self.authorization_url,
                    provider.authorization_endpoint,
                    "authorization_url",
                )?,
                token_endpoint: endpoint(&self.token_url, provider.token_endpoint, "token_url")?,
                client_id: self.client_id.clone(),
                client_secret: self.client_secret.clone(),
                client_auth: provider.client_auth,
                redirect_uri: redirect_uri.to_owned(),
                scope: Some(
                    self.scope
                        .clone()
                        .unwrap_or_else(|| provider.scope.to_owned()),
                )
                .filter(|s| !s.is_empty()),
                issuer: self.issuer.clone(),
                extra_authorization_params: provider
                    .extra_authorization_params
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
            outbound,
        ))
    }

    /// Writes `tokens` into the `oauth` member of `credentials`: the access token, its expiry,
    /// and the refresh token (the rotated one when the server rotated it), all in one object so
    /// they are sealed and stored together.
    pub fn keep(tokens: &TokenSet, credentials: &mut Map<String, Value>) {
        let entry = credentials
            .entry("oauth")
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Some(oauth) = entry.as_object_mut() else {
            return;
        };
        oauth.insert(
            "access_token".into(),
            Value::from(tokens.access_token.expose()),
        );
        match tokens.expires_at.and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        }) {
            Some(at) => oauth.insert("expires_at".into(), Value::from(at)),
            None => oauth.remove("expires_at"),
        };
        if let Some(refresh) = &tokens.refresh_token {
            oauth.insert("refresh_token".into(), Value::from(refresh.expose()));
        }
    }

    /// The credentials as a provider reads them: the `oauth` member replaced by the
    /// `access_token` it holds (absent before the first authorization).
    pub fn provider_view(credentials: &Map<String, Value>) -> Map<String, Value> {
        let mut view = credentials.clone();
        if let Some(oauth) = view.remove("oauth") {
            if let Some(token) = oauth.get("access_token").filter(|t| t.is_string()) {
                view.insert("access_token".into(), token.clone());
            }
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    #[test]
    fn pkce_challenge_is_s256_of_the_verifier() {
        // RFC 7636 appendix B.
        let pkce = Pkce::from_verifier(Secret::new("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
        assert_eq!(
            pkce.challenge(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let fresh = Pkce::generate().unwrap();
        assert_eq!(fresh.verifier().expose().len(), 43);
        assert!(fresh
            .verifier()
            .expose()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(
            fresh.verifier().expose(),
            Pkce::generate().unwrap().verifier().expose()
        );
        assert!(!format!("{fresh:?}").contains(fresh.verifier().expose()));
    }

    #[test]
    fn answers_are_read_as_tokens_or_classified_errors() {
        let refresh = Secret::new("rt-the-secret");
        let tokens = read_token_answer(
            200,
            Some("application/json"),
            br#"{"access_token":"at-1","expires_in":"120","refresh_token":"rt-2","scope":"read","token_type":"bearer"}"#,
            at(),
            &[&refresh],
        )
        .unwrap();
        assert_eq!(tokens.access_token.expose(), "at-1");
        assert_eq!(tokens.refresh_token.as_ref().unwrap().expose(), "rt-2");
        assert_eq!(tokens.expires_at, Some(at() + time::Duration::seconds(120)));
        assert!(!tokens.expires_within(at(), Duration::from_secs(60)));
        assert!(tokens.expires_within(at(), Duration::from_secs(120)));
        let shown = format!("{tokens:?}");
        assert!(
            !shown.contains("at-1") && !shown.contains("rt-2"),
            "{shown}"
        );

        // GitHub without `Accept: application/json`: a form, and errors with 200.
        let form = read_token_answer(
            200,
            Some("application/x-www-form-urlencoded; charset=utf-8"),
            b"access_token=gho_x&scope=repo&token_type=bearer",
            at(),
            &[],
        )
        .unwrap();
        assert_eq!(form.access_token.expose(), "gho_x");
        assert_eq!(form.expires_at, None);
        let forever = read_token_answer(
            200,
            None,
            br#"{"access_token":"a","expires_in":9223372036854775807}"#,
            at(),
            &[],
        )
        .unwrap();
        assert_eq!(
            forever.expires_at,
            Some(at() + time::Duration::seconds(EXPIRES_IN_MAX))
        );
        let github = read_token_answer(
            200,
            Some("application/json"),
            br#"{"error":"bad_refresh_token","error_description":"The refresh token passed is incorrect or expired."}"#,
            at(),
            &[&refresh],
        )
        .unwrap_err();
        assert!(github.needs_reauth(), "{github}");

        // A server that repeats the token in its description.
        let echoed = read_token_answer(
            400,
            Some("application/json"),
            br#"{"error":"invalid_grant","error_description":"refresh token rt-the-secret is expired"}"#,
            at(),
            &[&refresh],
        )
        .unwrap_err();
        assert!(echoed.needs_reauth());
        let message = echoed.to_string();
        assert!(!message.contains("rt-the-secret"), "{message}");
        assert!(message.contains("<redacted>"), "{message}");
        assert!(!format!("{echoed:?}").contains("rt-the-secret"));

        let client = read_token_answer(
            401,
            Some("application/json"),
            br#"{"error":"invalid_client","error_description":"client authentication failed"}"#,
            at(),
            &[],
        )
        .unwrap_err();
        assert!(matches!(
            client,
            OAuthError::Rejected {
                http_status: 401,
                ..
            }
        ));
        assert!(!client.needs_reauth() && !client.is_transient());

        for status in [500, 502, 503, 429] {
            let err =
                read_token_answer(status, Some("text/html"), b"<html>", at(), &[]).unwrap_err();
            assert!(err.is_transient(), "{status}: {err}");
            assert!(matches!(
                ProviderError::from(err),
                ProviderError::Transient { .. }
            ));
        }
        // A 200 that is no token answer, and one whose body would echo the token through a
        // parser's message.
        for body in [&b"<html>ok</html>"[..], br#"{"access_token":42}"#] {
            let err = read_token_answer(200, Some("text/html"), body, at(), &[]).unwrap_err();
            assert!(err.is_transient(), "{err}");
        }
        let err = read_token_answer(
            200,
            None,
            br#"{"access_token":"at-leak","expires_in":"soon"}"#,
            at(),
            &[],
        )
        .unwrap_err();
        assert!(!err.to_string().contains("at-leak") && !err.to_string().contains("soon"));
    }

    #[test]
    fn error_codes_and_descriptions_are_quoted_safely() {
        assert_eq!(error_code("invalid_grant"), "invalid_grant");
        assert_eq!(error_code("a\"b"), "unreadable error code");
        assert_eq!(error_code(&"x".repeat(65)), "unreadable error code");
        let long = "é".repeat(300);
        let cut = scrub(&long, &[]);
        assert_eq!(cut.chars().count(), QUOTED_MAX + 1);
        assert_eq!(scrub("a\nb\u{1b}[31m", &[]), "ab[31m");
    }
}
